"""What every tracker backend answers: the Issue row, the one failure, the Tracker protocol."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, NamedTuple, Protocol, Sequence

from drover.errors import DroverError, headline
from drover.vocabulary import ANY_ID_PATTERN, DISPOSITIONS

class TrackerSettings(Protocol):
    """What a backend reads of the [tracker] table (drover.config.TrackerConfig has it)."""

    @property
    def backend(self) -> str: ...
    @property
    def repo(self) -> str: ...
    @property
    def follow_up_label(self) -> str: ...
    @property
    def register(self) -> str: ...
    @property
    def authors(self) -> str: ...


# An item id as a tracker row may name it; the tracker cannot know the project's prefix.
ITEM_ID = re.compile(ANY_ID_PATTERN)
# `Owner: D-3`, also `owner: D-3, D-5`, `**Owner:** D-3` and as a list item; ids follow the colon.
_OWNER_LINE = re.compile(
    r"^[ \t]*(?:[-*][ \t]+)?(?:\*\*|__)?owner(?:\*\*|__)?:(?:\*\*|__)?[ \t]*(.*)$",
    re.IGNORECASE | re.MULTILINE,
)


class Issue(NamedTuple):
    """One tracker row, as the tracker gave it; `title` and `labels` are one line each (headline())."""

    number: int
    title: str = ""
    body: str = ""  # "" when the tracker row carries none
    state: str = ""  # "open" / "closed", lower-cased whatever the tracker's spelling
    url: str = ""
    labels: tuple[str, ...] = ()
    owners: tuple[str, ...] = ()  # item ids named by `Owner: <id>` lines (or the register row)
    body_unavailable: str = ""  # why the text could not be reached


class TrackerUnavailable(DroverError):
    """The tracker could not answer; `reason` is one line saying why.

    `found` holds the rows read before the failure, so a caller can render them as a floor
    of the list rather than as the list (SPEC 9.1: FollowUps under RegisterUnreadable).
    """

    exit_code = 1

    def __init__(self, reason: str, *, found: Iterable[Issue] = ()):
        reason = headline(reason)  # one line, whatever a subprocess printed
        super().__init__(reason)
        self.reason = reason
        self.found = tuple(found)


class Tracker(Protocol):
    name: str  # the `[tracker] backend` value that picks it
    writes_back: bool  # whether `finish` can write a close or a comment to it
    reads_issues: bool  # whether `new --issue N` can make an item from one of its rows (`intake`)

    @classmethod
    def from_config(cls, config: TrackerSettings, root: Path) -> Tracker:
        """The backend as `[tracker]` configures it, rooted at the main checkout."""
        ...

    def follow_ups(self, owner_ids: Sequence[str]) -> list[Issue]:
        """Open follow-up rows owned by any of `owner_ids`; raises TrackerUnavailable."""
        ...

    def owned(self, item_id: str, origin: int | None) -> list[Issue]:
        """Open issues owned by `item_id` that are not follow-ups; raises TrackerUnavailable."""
        ...

    def issue(self, number: int) -> Issue:
        """One issue read fresh; raises TrackerUnavailable."""
        ...

    def intake(self, number: int) -> tuple[Issue, str]:
        """Row `number` for `new --issue N`, and how the item names where it came from; raises TrackerUnavailable."""
        ...

    def apply(self, number: int, disposition: str, note: str) -> str:
        """Write a disposition to the tracker; returns what was applied ("" for keep)."""
        ...

    def probe(self) -> str:
        """Empty when the tracker can be reached; else a one-line reason."""
        ...


def owners_in(body: str) -> tuple[str, ...]:
    """The item ids named by `Owner:` lines in an issue body, in order, without repeats."""
    found: list[str] = []
    for match in _OWNER_LINE.finditer(body or ""):
        for word in re.split(r"[,\s]+", match.group(1)):
            word = word.strip("`*_.;()")
            if ITEM_ID.fullmatch(word) and word not in found:
                found.append(word)
    return tuple(found)


def cannot_apply(number: int, disposition: str, why: str) -> TrackerUnavailable:
    """The failure for a disposition a backend has nowhere to write."""
    verb = "comment on" if disposition == "comment" else disposition
    return TrackerUnavailable(f"cannot {verb} issue #{number}: {why}")


def check_disposition(disposition: str) -> None:
    """Refuse a disposition drover does not know; callers validate earlier, so this is a bug."""
    if disposition not in DISPOSITIONS:
        raise ValueError(f"unknown disposition {disposition!r}; expected one of {', '.join(DISPOSITIONS)}")
