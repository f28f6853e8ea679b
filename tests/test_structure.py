"""The project's structure: the module table, one definition per closed set, shared test helpers."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def _listed() -> list[str]:
    """The paths in the first column of the module table."""
    return re.findall(r"^\| `([^`]+)` \|", ARCHITECTURE.read_text(encoding="utf-8"), re.M)


def test_architecture_lists_every_module_of_the_package():
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "drover").rglob("*.py")}
    missing = sorted(modules - set(_listed()))
    assert not missing, f"docs/architecture.md has no row for {', '.join(missing)}"


def test_architecture_lists_nothing_that_is_absent():
    listed = _listed()
    assert len(listed) == len(set(listed)), "a module is listed twice"
    absent = [path for path in listed if not (ROOT / path).exists()]
    assert not absent, f"docs/architecture.md lists {', '.join(absent)}, which does not exist"


def test_each_closed_set_is_the_vocabulary_one():
    from drover.loop import checks, runs
    from drover.cli import main as cli
    from drover import config, prompts as templates, vocabulary
    from drover.prompts import fields
    from drover.ledger import itemstate, writes
    from drover.trackers import base

    assert config.SLOTS is runs.LAUNCH_SLOTS is templates.SLOTS is checks.SLOTS is vocabulary.SLOTS
    assert fields.SLOTS is vocabulary.TEMPLATE_SLOTS
    assert config.GUIDANCE_LEVELS is vocabulary.GUIDANCE_LEVELS
    assert itemstate.LEVELS is writes.LEVELS is vocabulary.LEVELS
    assert writes.DISPOSITIONS is base.DISPOSITIONS is vocabulary.DISPOSITIONS
    choices = {(command.name, param.name): tuple(param.type.choices)
               for command in cli.cli.commands.values() for param in command.params
               if hasattr(param.type, "choices") and param.name in ("level", "disposition", "slot", "guidance")}
    assert choices == {
        ("audit", "level"): vocabulary.LEVELS,
        ("dispose", "disposition"): vocabulary.DISPOSITIONS,
        ("prompt", "slot"): vocabulary.TEMPLATE_SLOTS,
        ("prompt", "guidance"): vocabulary.GUIDANCE_LEVELS,
        ("override", "slot"): vocabulary.SLOTS,
    }


def test_tests_share_helpers_through_helpers_py_not_each_other():
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(from\s+(tests\.)?test_\w*\s+import|import\s+(tests\.)?test_)", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "import shared helpers from tests/helpers.py:\n" + "\n".join(offenders)


def test_no_module_runs_git_but_git_py():
    # demo.py plays an outside agent in a scratch repository; agents.py and the github tracker
    # run other programs, never git.
    allowed = {"drover/git/__init__.py", "drover/cli/demo.py"}
    offenders = []
    for path in sorted((ROOT / "drover").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in allowed and re.search(r"""["']git["']\s*,""", path.read_text(encoding="utf-8")):
            offenders.append(rel)
    assert not offenders, f"git is run outside git.py in {', '.join(offenders)}"
