"""The shipped files: builtin_templates/ in the source tree, drover/builtin_templates/ in a wheel."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent.parent  # the drover package folder


@lru_cache(maxsize=1)
def builtin_dir() -> Path:
    """The folder of shipped templates and data files, wherever this install keeps it."""
    for candidate in (_HERE / "builtin_templates", _HERE.parent / "builtin_templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("drover's builtin_templates folder is missing from this install")


# `drover help TOPIC`: the reference pages of docs/, shipped in the wheel as drover/help/.
# A new topic also joins pyproject.toml's force-include list (tests/test_packaging.py checks the wheel).
HELP_TOPICS = ("configuration", "items", "states", "templates", "fields", "agents", "trackers", "executors",
               "commands", "ledger", "report", "budgets", "failures", "unattended", "verify", "worktrees",
               "security")


@lru_cache(maxsize=1)
def help_dir() -> Path:
    """The folder of reference pages, wherever this install keeps it."""
    for candidate in (_HERE / "help", _HERE.parent / "docs"):
        if (candidate / "configuration.md").is_file():
            return candidate
    raise FileNotFoundError("drover's reference pages are missing from this install")


# The cog machinery of a generated table (`make docs`): the code that writes it and the end mark, on
# lines of their own. A reader of `drover help` wants the table, not how the docs build it.
_COG_LINES = re.compile(r"^<!-- \[\[\[cog\n.*?^\]\]\] -->\n|^<!-- \[\[\[end\]\]\] -->\n", re.M | re.S)


def help_page(topic: str) -> str:
    """A reference page as `drover help TOPIC` prints it: the docs page, its cog machinery left out."""
    return _COG_LINES.sub("", (help_dir() / f"{topic}.md").read_text(encoding="utf-8"))
