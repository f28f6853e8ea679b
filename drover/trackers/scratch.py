"""backend = "scratch": a throwaway backend to see what adding one touches."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from .base import Issue, TrackerUnavailable, cannot_apply, check_disposition

if TYPE_CHECKING:
    from ..config import TrackerConfig


class ScratchTracker:
    name = "scratch"
    writes_back = True
    reads_issues = True

    @classmethod
    def from_config(cls, config: TrackerConfig, root: Path) -> ScratchTracker:
        return cls()

    def follow_ups(self, owner_ids: Sequence[str]) -> list[Issue]:
        return []

    def owned(self, item_id: str, origin: int | None) -> list[Issue]:
        return []

    def issue(self, number: int) -> Issue:
        return Issue(number, title=f"Scratch {number}", body="From the scratch tracker.", state="open")

    def intake(self, number: int) -> tuple[Issue, str]:
        return self.issue(number), f"scratch issue {number}"

    def apply(self, number: int, disposition: str, note: str) -> str:
        check_disposition(disposition)
        if disposition == "keep":
            return ""
        raise cannot_apply(number, disposition, "scratch")

    def probe(self) -> str:
        return ""


__all__ = ["ScratchTracker", "TrackerUnavailable"]
