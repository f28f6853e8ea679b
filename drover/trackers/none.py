"""backend = "none": no tracker. Nothing to follow up, nothing to read, nothing to write."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from drover.trackers.base import Issue, TrackerUnavailable, cannot_apply, check_disposition, TrackerSettings

NOT_CONFIGURED = 'no tracker is configured ([tracker] backend = "none")'


class NoTracker:
    name = "none"
    writes_back = False
    reads_issues = False

    @classmethod
    def from_config(cls, config: TrackerSettings, root: Path) -> NoTracker:
        return cls()

    def follow_ups(self, owner_ids: Sequence[str]) -> list[Issue]:
        """No rows: a project that declared no list has failed nothing."""
        return []

    def owned(self, item_id: str, origin: int | None) -> list[Issue]:
        """No rows: only the github backend reads owned issues."""
        return []

    def issue(self, number: int) -> Issue:
        """Always unavailable: there is nowhere to read issue #number from."""
        raise TrackerUnavailable(f"issue #{number} cannot be read: {NOT_CONFIGURED}")

    def intake(self, number: int) -> tuple[Issue, str]:
        """Never asked (reads_issues is false): there is nowhere to read issue #number from."""
        raise TrackerUnavailable(f"issue #{number} cannot be read: {NOT_CONFIGURED}")

    def apply(self, number: int, disposition: str, note: str) -> str:
        """`keep` needs no tracker; anything else cannot be written anywhere."""
        check_disposition(disposition)
        if disposition == "keep":
            return ""
        raise cannot_apply(number, disposition, NOT_CONFIGURED)

    def probe(self) -> str:
        """Always reachable: there is nothing to reach."""
        return ""
