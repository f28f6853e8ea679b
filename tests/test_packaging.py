"""The built wheel ships the templates: install it into a fresh environment and render from there."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

# Seconds each: the wheel's first user builds and installs it (the others use it) and pipx builds
# its own. Those two start first; the other users of the wheel come in their turn, when it is
# built, not at the start, where each waited for it with a test process idle.

SOURCE = Path(__file__).resolve().parents[1]
SHIPPED = ("implement.tmpl", "review.tmpl", "draft.tmpl", "history.json", "destinations.toml")

SMOKE = """
import json, sys
from pathlib import Path
import drover
from drover import prompts as templates
from drover.prompts import resources
from drover.config import Config
from drover.prompts.data import TemplateData

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


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The wheel built from this checkout, installed into a fresh venv: (wheel, venv dir, clean env).

    Once per run: under pytest-xdist the first process to ask builds it in the run's folder, and
    the others wait for it and use it."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    tmp_path = shared / "wheel"
    env_dir = tmp_path / "venv"
    clean_env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    with open(shared / "wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (tmp_path / "installed").exists():
            shutil.rmtree(tmp_path, ignore_errors=True)  # what a failed build left
            dist = tmp_path / "dist"
            _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(SOURCE)])
            venv.EnvBuilder(with_pip=False).create(env_dir)  # this pip installs into it: no ensurepip, seconds saved
            (wheel,) = dist.glob("drover_cli-*.whl")
            # no bytecode compiled at the install: pip's compiles every module of drover and its
            # dependencies (a second of CPU), where the tests import a few, each compiled at its first import
            _run([sys.executable, "-m", "pip", "--python", str(env_dir / "bin" / "python"), "install", "--quiet",
                  "--disable-pip-version-check", "--no-compile", str(wheel)], env=clean_env)
            (tmp_path / "installed").touch()
    (wheel,) = (tmp_path / "dist").glob("drover_cli-*.whl")
    return wheel, env_dir, clean_env


def test_the_installed_wheel_renders_every_slot(installed, tmp_path):
    wheel, env_dir, clean_env = installed
    python = env_dir / "bin" / "python"
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in SHIPPED:
        assert f"drover/builtin_templates/{name}" in names, name
    assert "drover/prompts/__init__.py" in names and "drover/prompts/history.py" in names

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


from drover.prompts.resources import HELP_TOPICS as HELP_PAGES  # noqa: E402 - every topic ships in the wheel


@pytest.mark.slow
def test_the_wheel_is_drover_cli_with_its_metadata_and_help_pages(installed):
    wheel, _, _ = installed
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    for page in HELP_PAGES:
        assert f"drover/help/{page}.md" in names, page
    (metadata_name,) = [name for name in names if name.endswith(".dist-info/METADATA")]
    metadata = archive.read(metadata_name).decode()
    assert "\nName: drover-cli\n" in metadata
    assert "Classifier: Environment :: Console" in metadata
    assert "Project-URL: " in metadata
    assert "Description-Content-Type: text/markdown" in metadata
    entry_points = archive.read(metadata_name.replace("METADATA", "entry_points.txt")).decode()
    assert "drover = drover.cli.main:main" in entry_points


def test_a_new_user_goes_from_the_installed_wheel_to_a_finished_item_on_master(installed, tmp_path):
    """Only the installed command, a repository whose default branch is master, and the demo agent."""
    _, env_dir, clean_env = installed
    env = {**clean_env, "PATH": f"{env_dir / 'bin'}{os.pathsep}{clean_env['PATH']}"}
    drover = str(env_dir / "bin" / "drover")
    root = tmp_path / "library"
    root.mkdir()
    for argv in (["git", "init", "-q", "-b", "master"], ["git", "commit", "-q", "--allow-empty", "-m", "start"]):
        _run(argv, cwd=root, env=env)
    assert _run([drover, "--version"], cwd=root, env=env).stdout.startswith("drover, version ")
    module = _run([str(env_dir / "bin" / "python"), "-m", "drover.cli", "--version"], cwd=root, env=env)
    assert module.stdout.startswith("drover, version ")
    assert "  configuration\n" in _run([drover, "help"], cwd=root, env=env).stdout
    assert "[run]" in _run([drover, "help", "configuration"], cwd=root, env=env).stdout
    said = _run([drover, "init"], cwd=root, env=env).stdout
    assert "base branch: master" in said and "next steps:" in said
    config = (root / "drover.toml").read_text()
    config = config.replace('preset = "claude"', 'preset = "demo"', 1)
    config = re.sub(r'^default = .*$', 'default = "true"', config, count=1, flags=re.M)
    (root / "drover.toml").write_text(config)
    _run(["git", "add", "-A"], cwd=root, env=env)
    _run(["git", "commit", "-q", "-m", "Set up drover"], cwd=root, env=env)
    item, path = _run([drover, "new", "Greet a person by name"], cwd=root, env=env).stdout.split()[:2]
    text = (root / path).read_text()
    (root / path).write_text(re.sub(r"^- To be written: .*$", "1. `greet NAME` prints `Hello, NAME!`.", text,
                                    flags=re.M))
    _run(["git", "add", "-A"], cwd=root, env=env)
    _run(["git", "commit", "-q", "-m", "First item"], cwd=root, env=env)
    driven = _run([drover, "drive", "--finish", "--json"], cwd=root, env=env)
    import json

    report = json.loads(driven.stdout)
    assert report["items"][0]["id"] == item and report["items"][0]["result"] == "finished", driven.stderr
    assert (report["approved"], report["finished"], report["total"]) == (1, 1, 1)
    shown = json.loads(_run([drover, "show", "1", "--json"], cwd=root, env=env).stdout)
    assert shown["done"] is True
    tracked = _run(["git", "ls-files"], cwd=root, env=env).stdout.split()
    assert f"greet/{item.lower().replace('-', '_')}.py" in tracked  # the agent's work, merged into master
    assert _run(["git", "branch", "--show-current"], cwd=root, env=env).stdout.strip() == "master"


@pytest.mark.slow
def test_pipx_install_from_a_checkout_gives_the_drover_command(tmp_path):
    """`pipx install .`, as the README tells a user: its own venv, the `drover` command on PATH."""
    home, bin_dir = tmp_path / "pipx-home", tmp_path / "pipx-bin"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(PIPX_HOME=str(home), PIPX_BIN_DIR=str(bin_dir), PIPX_MAN_DIR=str(tmp_path / "pipx-man"))
    # no bytecode compiled at the install, as `installed` (5.5 -> 4.7 s of CPU): pipx's install is the point
    _run([sys.executable, "-m", "pipx", "install", "--python", sys.executable, "--pip-args=--no-compile", str(SOURCE)],
         env=env)
    drover = bin_dir / "drover"
    assert drover.is_file()
    assert Path(os.path.realpath(drover)).is_relative_to(home), "the command is not pipx's own"
    assert _run([str(drover), "--version"], env=env).stdout.startswith("drover, version ")
    assert "| key | default | meaning |" in _run([str(drover), "help", "configuration"], env=env).stdout
