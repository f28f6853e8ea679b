"""An item's activity as Ledger.activity gives it for every item at once (list reads one per item).

The keys are those of Ledger.activity_for's row; ActivityRow reads them from the rows it was
built from (the newest implementing run with the run totals, the newest round, the newest
approving audit) instead of copying them into a dict per item.
"""
from __future__ import annotations

from typing import Any, Callable

# the columns of the newest implementing run, each an activity key as last_<column>
LAST_RUN_COLUMNS = ("id", "started", "finished", "outcome", "exit_status", "pid", "pid_start", "head_start", "head")
ACTIVITY_KEYS = ("item", "implement_runs", "implement_finished", "branch", "newest_round", "newest_approval",
                  *(f"last_{col}" for col in LAST_RUN_COLUMNS), "approval_at", "approval_head", "approval_level", "approval_by")


def _from_run(at: int) -> Callable[["ActivityRow"], Any]:
    return lambda row: row.runs[0][at] if row.runs is not None else None


def _from_audit(at: int) -> Callable[["ActivityRow"], Any]:
    return lambda row: row.audit[at] if row.audit is not None else None


# How ActivityRow reads each key of activity_for's row from the rows it keeps.
_ACTIVITY_GET: dict[str, Callable[["ActivityRow"], Any]] = {
    "item": lambda row: row.item,
    "implement_runs": lambda row: row.runs[1] if row.runs is not None else 0,
    "implement_finished": lambda row: row.runs[2] if row.runs is not None else None,
    "branch": lambda row: row.runs[3][1] if row.runs is not None else None,
    "newest_round": lambda row: row.round,
    "newest_approval": _from_audit(1),
    **{f"last_{col}": _from_run(at) for at, col in enumerate(LAST_RUN_COLUMNS, start=1)},
    **{f"approval_{col}": _from_audit(at) for at, col in enumerate(("at", "head", "level", "by"), start=1)},
}


class ActivityRow:
    """One item's row of Ledger.activity, read with get() and [] as activity_for's dict is.

    It keeps the rows it was built from (newest implementing run with the run totals, newest
    round, newest approving audit) rather than a dict of 19 keys: list holds one per item.
    """

    __slots__ = ("item", "runs", "round", "audit")
    item: str
    runs: list[Any] | None
    round: str | None
    audit: Any

    def __init__(self, item: str, runs: list[Any] | None, newest_round: str | None, audit: Any):
        self.item, self.runs, self.round, self.audit = item, runs, newest_round, audit

    def get(self, key: str, default: Any = None) -> Any:
        read = _ACTIVITY_GET.get(key)
        return default if read is None else read(self)

    def __getitem__(self, key: str) -> Any:
        return _ACTIVITY_GET[key](self)

    def keys(self) -> tuple[str, ...]:
        return ACTIVITY_KEYS
