"""backend = "file": follow-ups are list lines in a Markdown register kept in the repository.

A row is a top-level list line naming its owner ids and a headline:

    - D-3: the parser drops a trailing newline
    - [ ] D-4, D-7: retry the flaky upload test
    - [x] D-2: a ticked row is done and no longer listed

Everything else (headings, prose, blank lines, indented notes, comments, code fences) is
for people and is skipped. A row's number is its line number, so `#7` is `follow-ups.md:7`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from drover.errors import headline
from drover.git.files import read_regular_text
from drover.trackers.base import ITEM_ID, Issue, TrackerUnavailable, cannot_apply, check_disposition, TrackerSettings

ROW_FORMAT = "- <owner id>[, <owner id>...]: <headline>"
_LIST_ITEM = re.compile(r"^[-*+][ \t]+(.*)$")
_CHECKBOX = re.compile(r"^\[( |x|X)\][ \t]+(.*)$")
_FENCE = re.compile(r"^[ \t]*(```|~~~)")


class FileTracker:
    name = "file"
    writes_back = False  # the register is the project's file: finish records judgments, edits nothing
    reads_issues = True  # a register row, by its line number

    @classmethod
    def from_config(cls, config: TrackerSettings, root: Path) -> FileTracker:
        return cls(config.register, root)

    def __init__(self, register: str, root: Path):
        self.register = register  # as written in drover.toml, so every reason names it that way
        self.path = root / register

    def follow_ups(self, owner_ids: Sequence[str]) -> list[Issue]:
        """Open register rows owned by any of `owner_ids`, in file order."""
        wanted = set(owner_ids)
        rows, problems = self._read()
        mine = [row for row in rows if row.state == "open" and wanted.intersection(row.owners)]
        if problems:
            first_line, first_problem = problems[0]
            more = f" (and {len(problems) - 1} more bad rows)" if len(problems) > 1 else ""
            raise TrackerUnavailable(f"{self.register}:{first_line}: {first_problem}{more}", found=mine)
        return mine

    def owned(self, item_id: str, origin: int | None) -> list[Issue]:
        """No rows: a register has only follow-ups; owned issues are a github read."""
        return []

    def issue(self, number: int) -> Issue:
        """Issue #`number` is the register row on line `number`, ticked or not: the row
        `new --issue N` took (intake), and what the item's Origin and Closes read."""
        rows, _ = self._read()
        for found in rows:
            if found.number == number:
                return found
        raise TrackerUnavailable(f"{self.register} has no row on line {number}")

    def intake(self, number: int) -> tuple[Issue, str]:
        """The register row on line `number`, named by where it is (`follow-ups.md:7`)."""
        found = self.issue(number)
        return found, f"the register row {found.url}"

    def apply(self, number: int, disposition: str, note: str) -> str:
        """`keep` needs no tracker; drover closes and comments on no row (people tick them)."""
        check_disposition(disposition)
        if disposition == "keep":
            return ""
        raise cannot_apply(number, disposition, self._not_written())

    def probe(self) -> str:
        """Empty when the register exists and every row parses; else the reason."""
        try:
            self.follow_ups(())
        except TrackerUnavailable as exc:
            return exc.reason
        return ""

    def _not_written(self) -> str:
        return f'the register {self.register} is edited by hand, not by drover ([tracker] backend = "file")'

    def _read(self) -> tuple[list[Issue], list[tuple[int, str]]]:
        """Every row (ticked ones included) and every (line, problem) for a list line that is not a row."""
        try:
            text = read_regular_text(self.path)  # never waiting on a fifo, nor reading a device
        except FileNotFoundError:
            raise TrackerUnavailable(f"register {self.register} does not exist") from None
        except UnicodeDecodeError:
            raise TrackerUnavailable(f"register {self.register} is not UTF-8 text") from None
        except OSError as exc:
            raise TrackerUnavailable(f"register {self.register} cannot be read: {exc.strerror}") from None
        no_body = f"the register {self.register} has no body column: a row is its headline only"
        rows: list[Issue] = []
        problems: list[tuple[int, str]] = []
        in_fence = in_comment = False
        for number, line in enumerate(text.splitlines(), start=1):
            # examples inside code fences and HTML comments are not rows
            if _FENCE.match(line):
                in_fence = not in_fence
                continue
            if in_fence:
                continue
            if in_comment or line.lstrip().startswith("<!--"):
                in_comment = "-->" not in line
                continue
            item = _LIST_ITEM.match(line)
            if not item:
                continue
            parsed = _parse_row(item.group(1))
            if isinstance(parsed, str):
                problems.append((number, parsed))
                continue
            owners, title, state = parsed
            rows.append(
                Issue(
                    number=number,
                    title=headline(title),  # one line, its escapes and bidi overrides written out
                    state=state,
                    url=f"{self.register}:{number}",
                    owners=owners,
                    body_unavailable=no_body,
                )
            )
        return rows, problems


def _parse_row(text: str) -> tuple[tuple[str, ...], str, str] | str:
    """(owners, headline, state) for a row's text after the list marker, or what is wrong with it."""
    state = "open"
    box = _CHECKBOX.match(text)
    if box:
        state = "open" if box.group(1) == " " else "closed"
        text = box.group(2)
    owners_text, colon, headline = text.partition(":")
    if not colon:
        return f'expected "{ROW_FORMAT}", found no colon after the owner ids'
    owners = tuple(word.strip() for word in owners_text.split(","))
    for owner in owners:
        if not owner:
            return f'expected "{ROW_FORMAT}", an owner id is missing'
        if not ITEM_ID.fullmatch(owner):
            return f'expected "{ROW_FORMAT}", "{owner}" is not an item id'
    headline = headline.strip()
    if not headline:
        return f'expected "{ROW_FORMAT}", no headline after the colon'
    return tuple(dict.fromkeys(owners)), headline, state
