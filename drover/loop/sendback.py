"""A failed check goes back to the implementer: its findings (the command, the end of its output,
the first error when the tail does not hold it, the review's findings still open) as a round of
changes, through request-changes (builtin_templates/checks.toml words them), as is a merge of base
concluded with conflict markers left in.
"""
from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import Check
from drover.loop.firsterror import first_error
from drover.vocabulary import CHECKER

if TYPE_CHECKING:
    from drover.ledger.writes import Outcome


@functools.cache
def _words() -> dict[str, Any]:
    """builtin_templates/checks.toml, read once a process (every round of drover's reads it twice)."""
    from drover.config.toml import parse_toml
    from drover.prompts.resources import builtin_dir

    path = builtin_dir() / "checks.toml"
    return parse_toml(path, path.read_text(encoding="utf-8"), kind="checks")


def _fill(text: str, values: dict[str, str]) -> str:
    """`{name}` replaced by its value in one pass, so a value's own braces stay as they are."""
    return re.sub(r"\{([a-z_]+)\}", lambda found: values.get(found.group(1), found.group(0)), text)


def first_error_of(project: Project, check: Check) -> tuple[int, list[str]] | None:
    """firsterror.first_error of a check whose command ran to its exit (its line number, the lines)."""
    return first_error(project.root / check.log_path, check.tail or "") if check.outcome == "exited" else None


def findings(project: Project, ledger: Ledger, item_id: str, check: Check) -> str:
    """The findings a failed check writes into the Changes section (builtin_templates/checks.toml):
    the command and the end of its output, and the review's findings that were still open."""
    words = _words()
    values = {key: str(value) for key, value in check.as_row().items()}
    values.update(head=check.head[:12], base=f"{project.config.base} ({check.base[:12]})",
                  # the main checkout's path: an agent in a worktree has no `.drover/` of its own
                  log=str(project.root / check.log_path), tail=_quoted(check.tail or "(no output)"))
    values["ending"] = _fill(words["ending"].get(check.outcome, check.outcome), values)
    found = first_error_of(project, check)
    values["first"] = "\n" + _fill(words["first_error"], {"line": str(found[0]), "lines": _quoted(
        "\n".join(found[1]))}).strip("\n") + "\n\n" if found else ""
    return _with_still_open(project, ledger, item_id, _fill(words["findings"], values).strip("\n") + "\n")


def _quoted(output: str) -> str:
    """The check's output indented as a block: each line at every break a reader of the item file
    can see (a carriage return, which it reads with universal newlines; U+2028, \\x1c and the rest
    splitlines breaks at), so no line the branch's code printed starts a line of drover's own, a
    heading or a list entry (hostile review 40)."""
    return "\n".join("    " + line for line in output.splitlines() or [""])


def _with_still_open(project: Project, ledger: Ledger, item_id: str, text: str) -> str:
    """`text`, a round of drover's own, and below it the review's findings the Changes section still
    held (the section is replaced whole, so they travel with it)."""
    still_open = _still_open(project, ledger, item_id)
    if still_open:
        text += "\n" + _fill(_words()["still_open"], {"changes": still_open}).strip("\n") + "\n"
    return text


def _still_open(project: Project, ledger: Ledger, item_id: str) -> str:
    """The review findings the Changes section still holds: the whole section, or when a check wrote
    it, only the review findings that check carried (the new check's own replace its)."""
    item = project.require_item(item_id)
    changes = item.changes.strip("\n")
    if not item.outstanding or not changes.strip():
        return ""
    rounds = ledger.rounds(item_id)
    if not rounds or rounds[-1].by != CHECKER:
        return changes
    from drover.items.file import headline

    marker = headline(_words()["still_open"])
    lines = changes.split("\n")
    # drover's own heading, at the start of its line: the output it quoted is indented (_quoted)
    at = next((number for number, line in enumerate(lines) if line.startswith("#") and headline(line) == marker),
              None)
    return "" if at is None else "\n".join(lines[at + 1:]).strip("\n")


def send_back(project: Project, ledger: Ledger, item_id: str, check: Check) -> "Outcome":
    """A failed check as a round of changes, through request-changes: it counts against
    `max_rounds`, and past the cap it is refused and the item parked (Refused)."""
    from drover.ledger.writes import request_changes

    return request_changes(project, ledger, item_id, findings(project, ledger, item_id, check), by=CHECKER,
                           log=check.log_path)


def send_back_markers(project: Project, ledger: Ledger, item_id: str, branch: str, lines: list[str]) -> "Outcome":
    """A merge of base concluded with conflict markers left in (`path:line` each) as a round of
    changes, as send_back sends a failed check."""
    from drover.ledger.writes import request_changes

    text = _fill(_words()["markers"], {"base": project.config.base, "branch": branch,
                                       "lines": "\n".join("    " + line for line in lines)}).strip("\n") + "\n"
    return request_changes(project, ledger, item_id, _with_still_open(project, ledger, item_id, text), by=CHECKER)
