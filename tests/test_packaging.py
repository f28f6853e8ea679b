"""The built wheel ships the templates: install it into a fresh environment and render from there."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1]
SHIPPED = ("implement.tmpl", "review.tmpl", "draft.tmpl", "history.json", "destinations.toml")

SMOKE = """
import json, sys
from pathlib import Path
import drover
from drover import resources, templates
from drover.config import Config
from drover.data import TemplateData

data = TemplateData(Id="D-1", Title="Smoke", Path="items/D-1.md", Body="Body {{ x }}", VerifyCommand="make check")
prompts = {slot: templates.render(slot, data, root=Path.cwd(), config=Config()).text for slot in templates.SLOTS}
print(json.dumps({
    "package": drover.__file__,
    "builtin_dir": str(resources.builtin_dir()),
    "prompts": prompts,
    "missing_history": templates.missing_history(),
    "blocks": len(templates.schema_prompts()),
}))
"""


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, timeout=900, **kwargs)
    assert result.returncode == 0, f"{args[:3]} failed:\n{result.stdout}\n{result.stderr}"
    return result


def test_the_installed_wheel_renders_every_slot(tmp_path):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(SOURCE)])
    (wheel,) = dist.glob("drover-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SHIPPED:
        assert f"drover/builtin_templates/{name}" in names, name
    assert "drover/templates/__init__.py" in names and "drover/templates/history.py" in names

    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    clean_env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel)], env=clean_env)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _run([str(python), "-c", SMOKE], cwd=elsewhere, env=clean_env)
    import json

    report = json.loads(result.stdout)
    assert Path(report["package"]).is_relative_to(env_dir), "drover was imported from the source tree"
    assert Path(report["builtin_dir"]).is_relative_to(env_dir)
    assert report["missing_history"] == []
    assert report["blocks"] >= 7
    for slot, text in report["prompts"].items():
        assert text.startswith("You are"), slot
        assert "Body {{ x }}" in text, slot
    assert "`make check` passes" in report["prompts"]["implement"]
