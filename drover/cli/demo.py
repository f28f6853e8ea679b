"""The demo: a throw-away repository, three items, and a scripted agent that needs no network.

`python -m drover.cli.demo` builds the repository and drives it; `python -m drover.cli.demo agent`
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
from typing import Any

from drover.items.file import REQUIREMENTS_PLACEHOLDER


def _run(argv: list[str], cwd: Path, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, input=stdin, text=True, capture_output=True, check=check)


def _drover(*args: str, cwd: Path, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
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


# What the scripted agent does per demo item (by title): the first implementation, the one
# finding the reviewer raises against it, the fix the second pass adds, and the audit note.
_SCRIPT: dict[str, dict[str, Any]] = {
    "Greet a person by name": {
        "body": 'return f"Hello, {name}!"',
        "finding": "Empty names slip through",
        "detail": "accepts an empty name and greets nobody",
        "ask": "Reject an empty or blank name with a ValueError; keep the happy path as it is.",
        "fix": ['if not name.strip():', '    raise ValueError("a name is required")', 'return {plain}(name)'],
        "note": "Blank names are rejected with a ValueError; `Hello, Ada!` is unchanged.",
    },
    "Greet loudly": {
        "body": 'return f"Hello, {name}!"',
        "finding": "The loud greeting is not loud",
        "detail": "returns the ordinary greeting: nothing is raised to upper case",
        "ask": "Upper-case the whole greeting, name included, and end it with two exclamation marks.",
        "fix": ['return {plain}(name).upper().rstrip("!") + "!!"'],
        "note": "`HELLO, ADA!!` as asked; D-1's greeting is reused, not copied.",
    },
    "Say goodbye too": {
        "body": 'return f"Goodbye, {name}."',
        "finding": "Goodbye ignores surrounding whitespace",
        "detail": "keeps the spaces around a name, so `  Ada ` gives `Goodbye,   Ada .`",
        "ask": "Strip the name before using it, as the greeting does.",
        "fix": ['return {plain}(name.strip())'],
        "note": "Names are stripped before the farewell; raised while reviewing D-1, now closed.",
    },
}
_GENERIC: dict[str, Any] = {
    "body": 'return f"{title}: {name}"',
    "finding": "Empty input slips through",
    "detail": "accepts an empty argument",
    "ask": "Reject an empty or blank argument with a ValueError.",
    "fix": ['if not name.strip():', '    raise ValueError("a value is required")', 'return {plain}(name)'],
    "note": "Empty input is rejected now.",
}


def _script(title: str) -> dict[str, Any]:
    return _SCRIPT.get(title, _GENERIC)


def _implement(work: Path, item_id: str, shown: dict[str, Any]) -> int:
    passes = sum(1 for run in shown["runs"] if run["slot"] == "implement")
    plain = item_id.lower().replace("-", "_")
    script = _script(shown["title"])
    module = work / "greet" / f"{plain}.py"
    module.parent.mkdir(exist_ok=True)
    body = script["body"].replace("{title}", shown["title"])
    lines = [f'"""{item_id}: {shown["title"]}"""', "", "", f"def {plain}(name: str) -> str:", f"    {body}"]
    if passes > 1:
        lines += ["", "", f"def {plain}_checked(name: str) -> str:"]
        lines += [f"    {line.replace('{plain}', plain)}" for line in script["fix"]]
    module.write_text("\n".join(lines) + "\n")
    _run(["git", "add", str(module)], work)
    message = f"{item_id}: {shown['title']}" + (f" (pass {passes}: {script['finding'].lower()})" if passes > 1 else "")
    if passes > 2:  # the fix is in since pass 2: a pass after it (a failed check, a drive again) has nothing new
        message = f"{item_id}: {shown['title']} (pass {passes}: nothing left to change)"
    _run(["git", "commit", "-q", "--allow-empty", "-m", message], work)
    print(f"demo agent: committed {module.relative_to(work)} ({message})")
    return 0


def _review(work: Path, item_id: str, shown: dict[str, Any]) -> int:
    script = _script(shown["title"])
    if not shown["rounds"]:
        findings = (
            f"# {script['finding']}\n\n"
            f"- `greet/{item_id.lower().replace('-', '_')}.py` {script['detail']}.\n"
            f"- {script['ask']}\n"
        )
        done = _drover("request-changes", item_id, cwd=work, stdin=findings, check=False)
        print(done.stdout + done.stderr, end="")
        return done.returncode
    done = _drover("audit", item_id, "--level", "reviewed", "--note", script["note"], cwd=work, check=False)
    print(done.stdout + done.stderr, end="")
    return done.returncode


# --- the demo project -------------------------------------------------------------------


def build_project(root: Path) -> None:
    """A git repository with a tiny program and three items: one depends on another, one is a finding.

    The drover commands here and after (main's list, drive and show) are the demo project's: a
    $DROVER_REPO the caller has (an agent's run, an operator's export) named another project, whose
    checkout the demo's init wrote to before the demo failed on a drover.toml it never wrote."""
    os.environ.pop("DROVER_REPO", None)
    root.mkdir(parents=True, exist_ok=True)
    env_git = ["git", "-c", "user.name=drover demo", "-c", "user.email=demo@drover.invalid"]
    _run(["git", "init", "-q", "-b", "main"], root)
    (root / "greet").mkdir()
    (root / "greet" / "__init__.py").write_text('"""A tiny greeting program for the drover demo."""\n')
    (root / "Makefile").write_text("test:\n\tpython3 -m compileall -q greet\n")
    _drover("init", cwd=root)
    config = (root / "drover.toml").read_text()
    config = re.sub(r'^preset = "claude"', 'preset = "demo"', config, count=1, flags=re.MULTILINE)
    config = re.sub(r'^name = ""', 'name = "demo-implementer"', config, count=1, flags=re.MULTILINE)
    config = re.sub(r'^# \[agent\.review\].*\n# preset = "codex"', '[agent.review]\npreset = "demo"\nname = "demo-reviewer"',
                    config, count=1, flags=re.MULTILINE)
    # drover checks each item with the Makefile's test before its review and its merge
    config = re.sub(r'^default = .*$', 'default = "make test"', config, count=1, flags=re.MULTILINE)
    (root / "drover.toml").write_text(config)
    _drover("new", "Greet a person by name", "--kind", "feature", cwd=root)
    _drover("new", "Greet loudly", "--kind", "feature", "--dep", "D-1", cwd=root)
    _drover("new", "Say goodbye too", "--kind", "feature", "-f", "D-1", cwd=root)
    # an item whose requirements are still new's placeholder needs requirements before drive takes it
    for item_id, requirement in REQUIREMENTS.items():
        path = root / "items" / f"{item_id}.md"
        text = path.read_text()
        path.write_text(text.replace(REQUIREMENTS_PLACEHOLDER.format(id=item_id), requirement))
    _run([*env_git, "add", "-A"], root)
    _run([*env_git, "commit", "-q", "-m", "A tiny program and three drover items"], root)


# What a person writes under each demo item's Requirements heading.
REQUIREMENTS = {
    "D-1": "1. `greet NAME` prints `Hello, NAME!`.",
    "D-2": "1. `greet --loud NAME` prints the greeting in capitals.",
    "D-3": "1. `greet --bye NAME` prints `Goodbye, NAME!`.",
}


USAGE = """usage: python -m drover.cli.demo [FOLDER]     (or: drover demo [FOLDER])

Build a throw-away git repository with a tiny program and three items in FOLDER (default: a
new temporary folder), then drive it to the end with the scripted demo agent: no network, no
API key. `python -m drover.cli.demo agent` is that agent, launched by the `demo` preset.
"""


def main(argv: list[str]) -> int:
    if argv[:1] == ["agent"]:
        return agent()
    if argv[:1] and argv[0].startswith("-"):
        wanted = argv[0] in ("-h", "--help")
        print(USAGE, end="", file=sys.stdout if wanted else sys.stderr)
        return 0 if wanted else 2
    if argv and Path(argv[0]).exists() and any(Path(argv[0]).iterdir()):
        print(f"drover demo: {argv[0]} exists and is not empty: give a new folder", file=sys.stderr)
        return 2
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
