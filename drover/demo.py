"""The demo: a throw-away repository, three items, and a scripted agent that needs no network.

`python -m drover.demo` builds the repository and drives it; `python -m drover.demo agent`
is the `demo` preset's agent: deterministic, it commits real changes when implementing,
requests changes once when reviewing, then approves.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


DEMO_DIR = "demo"


def _run(argv: list[str], cwd: Path, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, input=stdin, text=True, capture_output=True, check=check)


def _drover(*args: str, cwd: Path, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    return _run([sys.executable, "-m", "drover.cli", *args], cwd, stdin, check)


# --- the agent --------------------------------------------------------------------------


def agent() -> int:
    """One turn of the scripted agent, steered by the DROVER_* environment."""
    sys.stdin.read()  # the prompt: the script's behaviour is fixed, but a real agent reads it
    item_id, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
    work = Path.cwd()
    shown = json.loads(_drover("show", item_id, "--json", cwd=work).stdout)
    if slot == "implement":
        return _implement(work, item_id, shown)
    if slot == "review":
        return _review(work, item_id, shown)
    print(f"demo agent: nothing scripted for the {slot} slot")
    return 0


def _implement(work: Path, item_id: str, shown: dict) -> int:
    passes = sum(1 for run in shown["runs"] if run["slot"] == "implement")
    module = work / "greet" / f"{item_id.lower().replace('-', '_')}.py"
    module.parent.mkdir(exist_ok=True)
    lines = [f'"""{item_id}: {shown["title"]}"""', "", "",
             f"def {item_id.lower().replace('-', '_')}(name: str) -> str:",
             f'    return f"{shown["title"]}: {{name}}"']
    if passes > 1:
        lines += ["", "", f"def {item_id.lower().replace('-', '_')}_checked(name: str) -> str:",
                  "    if not name.strip():", '        raise ValueError("a name is required")',
                  f"    return {item_id.lower().replace('-', '_')}(name)"]
    module.write_text("\n".join(lines) + "\n")
    _run(["git", "add", str(module)], work)
    message = f"{item_id}: {shown['title']}" + (f" (pass {passes}: address review)" if passes > 1 else "")
    _run(["git", "commit", "-q", "-m", message], work)
    print(f"demo agent: committed {module.relative_to(work)} ({message})")
    return 0


def _review(work: Path, item_id: str, shown: dict) -> int:
    if not shown["rounds"]:
        findings = (
            f"# Empty names slip through\n\n"
            f"- `greet/{item_id.lower().replace('-', '_')}.py` accepts an empty name and greets nobody.\n"
            "- Reject an empty or blank name with a ValueError, and keep the happy path as it is.\n"
        )
        done = _drover("request-changes", item_id, cwd=work, stdin=findings, check=False)
        print(done.stdout + done.stderr, end="")
        return done.returncode
    done = _drover("audit", item_id, "--level", "reviewed",
                   "--note", "Blank names are rejected now; the greeting is unchanged.", cwd=work, check=False)
    print(done.stdout + done.stderr, end="")
    return done.returncode


# --- the demo project -------------------------------------------------------------------


def build_project(root: Path) -> None:
    """A git repository with a tiny program and three items: one depends on another, one is a finding."""
    root.mkdir(parents=True, exist_ok=True)
    env_git = ["git", "-c", "user.name=drover demo", "-c", "user.email=demo@drover.invalid"]
    _run(["git", "init", "-q", "-b", "main"], root)
    (root / "greet").mkdir()
    (root / "greet" / "__init__.py").write_text('"""A tiny greeting program for the drover demo."""\n')
    (root / "Makefile").write_text("test:\n\tpython3 -m compileall -q greet\n")
    _drover("init", cwd=root)
    config = (root / "drover.toml").read_text()
    config = re.sub(r'^preset = "claude"', 'preset = "demo"', config, count=1, flags=re.M)
    config = re.sub(r'^name = ""', 'name = "demo-implementer"', config, count=1, flags=re.M)
    config = re.sub(r'^# \[agent\.review\].*\n# preset = "codex"', '[agent.review]\npreset = "demo"\nname = "demo-reviewer"',
                    config, count=1, flags=re.M)
    (root / "drover.toml").write_text(config)
    _drover("new", "Greet a person by name", "--kind", "feature", cwd=root)
    _drover("new", "Greet loudly", "--kind", "feature", "--dep", "D-1", cwd=root)
    _drover("new", "Say goodbye too", "--kind", "feature", "-f", "D-1", cwd=root)
    _run([*env_git, "add", "-A"], root)
    _run([*env_git, "commit", "-q", "-m", "A tiny program and three drover items"], root)


def main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        return agent()
    root = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="drover-demo-")) / "project"
    print(f"drover demo: building a throw-away project in {root}")
    os.environ.setdefault("GIT_AUTHOR_NAME", "drover demo")
    os.environ.setdefault("GIT_AUTHOR_EMAIL", "demo@drover.invalid")
    os.environ.setdefault("GIT_COMMITTER_NAME", "drover demo")
    os.environ.setdefault("GIT_COMMITTER_EMAIL", "demo@drover.invalid")
    build_project(root)
    print("$ drover list")
    print(_drover("list", cwd=root).stdout, end="")
    print("$ drover drive --finish")
    drive = subprocess.run([sys.executable, "-m", "drover.cli", "drive", "--finish"], cwd=root, text=True)
    for item_id in ("D-1", "D-2", "D-3"):
        print(f"\n$ drover show {item_id}")
        print(_drover("show", item_id, cwd=root).stdout, end="")
    print(f"\nThe project is left in {root} to look around.")
    return drive.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
