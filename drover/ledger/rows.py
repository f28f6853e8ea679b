"""The ledger's rows as named tuples: `Run`, `Round`, `Audit`, `Check` as the ledger reads them, and `NewRun`,
what starting a run writes. The fields are the tables' columns (migrations.py), in their order.

A row becomes plain data only where a command prints it (`as_json`, for `show --json`).
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple


def exited_zero(outcome: str | None, exit_status: Any) -> bool:
    """A run or a check that ended with its process exiting 0 (not a timeout, not a Ctrl-C)."""
    return outcome == "exited" and exit_status == 0


class Run(NamedTuple):
    """One row of `runs`; argv and base_hashes decoded from their JSON text."""

    id: str
    item: str
    slot: str
    agent: str
    argv: list[str] = []  # shared, never mutated: rows are read-only
    started: str = ""
    finished: str | None = None
    exit_status: int | None = None
    outcome: str | None = None
    pid: int | None = None
    log_path: str | None = None
    prompt_path: str | None = None
    branch: str | None = None
    worktree: str | None = None
    requested_source: str | None = None
    resolved_source: str | None = None
    base_hashes: dict[str, str] = {}  # shared, never mutated: rows are read-only
    template_sha256: str | None = None
    prompt_sha256: str | None = None
    pid_start: str | None = None
    head_start: str | None = None
    head: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int | None = None
    node: str | None = None
    reason: str | None = None
    failure: str | None = None
    reset_at: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> "Run":
        """From a sqlite3.Row of RUN_COLUMNS, in order."""
        values = list(row)
        argv, hashes = values[_ARGV], values[_BASE_HASHES]
        values[_ARGV] = json.loads(argv) if argv else []
        values[_BASE_HASHES] = json.loads(hashes) if hashes else {}
        return cls(*values)

    @property
    def exited_zero(self) -> bool:
        return exited_zero(self.outcome, self.exit_status)

    def as_json(self) -> dict[str, Any]:
        """Every column by name, in the table's order, as `show --json` prints it."""
        plain = _plain(self, _RUN_NAMES)
        plain["argv"], plain["base_hashes"] = list(self.argv), dict(self.base_hashes)
        return plain


class NewRun(NamedTuple):
    """What starting a run records; the rest of its row is filled in as it runs and ends."""

    id: str
    item: str
    slot: str
    agent: str
    argv: tuple[str, ...] = ()
    log_path: str = ""
    prompt_path: str = ""
    branch: str = ""
    worktree: str = ""
    requested_source: str = ""
    resolved_source: str = ""
    base_hashes: dict[str, str] = {}  # shared, never mutated: rows are read-only
    template_sha256: str = ""
    prompt_sha256: str = ""
    head_start: str = ""
    head: str = ""
    started: str = ""  # "" is now

    def as_row(self, started: str) -> dict[str, Any]:
        """The `runs` columns it sets, argv and base_hashes as JSON text."""
        row = _plain(self, self._fields)
        row["argv"] = json.dumps(list(self.argv))
        row["base_hashes"] = json.dumps(self.base_hashes)
        row["started"] = self.started or started
        return row


class Round(NamedTuple):
    """One row of `rounds`: a review's send-back."""

    item: str
    number: int
    digest: str
    headline: str | None = None
    path: str | None = None
    by: str | None = None
    at: str = ""
    cleared_at: str | None = None
    cleared_by: str | None = None

    def as_json(self) -> dict[str, Any]:
        """Every column by name, in the table's order, as `show --json` prints it."""
        return _plain(self, _ROUND_NAMES)


class Audit(NamedTuple):
    """One row of `audits`; authors decoded from its JSON text."""

    id: int
    item: str
    level: str
    by: str | None = None
    note: str | None = None
    at: str = ""
    authors: list[str] = []  # shared, never mutated: rows are read-only
    head: str | None = None
    run: str | None = None  # the run that gave it; "" the operator outside any run, None before 0012
    opens: int | None = None  # 1: it opens the gate (activity.opens_gate decided it when recorded)

    @classmethod
    def from_row(cls, row: Any) -> "Audit":
        """From a sqlite3.Row of AUDIT_COLUMNS, in order."""
        values = list(row)
        values[_AUTHORS] = json.loads(values[_AUTHORS] or "[]")
        return cls(*values)

    def as_json(self) -> dict[str, Any]:
        """Every column by name, in the table's order, as `show --json` prints it."""
        plain = _plain(self, _AUDIT_NAMES)
        plain["authors"] = list(self.authors)
        return plain


class Check(NamedTuple):
    """One row of `checks`: drover's own run of the item's verify command (verify.py)."""

    id: str
    item: str
    head: str  # the branch head checked: the commit a finish would merge
    base: str  # the base commit merged into it for the check
    command: str
    exit_status: int | None = None  # None when the command never exited (outcome says why)
    outcome: str = ""  # exited | timeout | interrupted | conflict (the scratch merge) | setup failed
    started: str = ""
    duration: float = 0.0  # seconds
    tail: str = ""  # the end of the output, or why nothing ran
    log_path: str = ""  # the whole output
    at: str = ""  # when it ended

    @property
    def passed(self) -> bool:
        return exited_zero(self.outcome, self.exit_status)

    @property
    def judged(self) -> bool:
        """Whether the check said anything of the item's branch: not one of base's own commit recorded
        under the item (head is base: basecheck.BaseChecks.of_base), nor one a Ctrl-C or a stop ended.
        What `report` counts and `log`'s note of a later failed check reads."""
        return self.head != self.base and self.outcome != "interrupted"

    def as_row(self) -> dict[str, Any]:
        """The `checks` columns by name, as Ledger.add_check writes them."""
        return _plain(self, _CHECK_NAMES)

    def as_json(self) -> dict[str, Any]:
        """Every column by name, in the table's order, and `passed`, as `show --json` prints it."""
        plain = self.as_row()
        plain["passed"] = self.passed
        return plain


class ItemRows(NamedTuple):
    """Several items' runs, audits and `items` rows by item id, each table read once (Ledger.rows_of)."""

    runs: dict[str, tuple[Run, ...]] = {}  # shared, never mutated: rows are read-only
    audits: dict[str, tuple[Audit, ...]] = {}  # shared, never mutated: rows are read-only
    items: dict[str, dict[str, Any]] = {}  # shared, never mutated: rows are read-only

    def runs_of(self, item_id: str) -> tuple[Run, ...]:
        return self.runs.get(item_id, ())

    def audits_of(self, item_id: str) -> tuple[Audit, ...]:
        return self.audits.get(item_id, ())

    def item_row(self, item_id: str) -> dict[str, Any]:
        """As Ledger.item_row: an item the ledger has no row of is neither done nor parked."""
        return self.items.get(item_id) or {"id": item_id, "done": 0, "parked": 0}

    def authors(self, item_id: str) -> list[str]:
        """As Ledger.authors: the agents of implementing runs plus the `by` of claimed audits, oldest first."""
        found: list[tuple[str, str | None]] = [
            (run.started, run.agent) for run in self.runs_of(item_id) if run.slot == "implement"]
        found += [(audit.at, audit.by) for audit in self.audits_of(item_id) if audit.level == "claimed"]
        seen: list[str] = []
        for _, who in sorted(found, key=lambda pair: pair[0] or ""):
            if who and who not in seen:
                seen.append(who)
        return seen


def _plain(row: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """The row's fields by name (dataclasses.asdict copies deeply, ten times slower)."""
    return {name: getattr(row, name) for name in names}


_RUN_NAMES, _ROUND_NAMES, _AUDIT_NAMES, _CHECK_NAMES = Run._fields, Round._fields, Audit._fields, Check._fields
CHECK_COLUMNS = ", ".join(f'"{name}"' for name in _CHECK_NAMES)
RUN_COLUMNS = ", ".join(f'"{name}"' for name in _RUN_NAMES)
ROUND_COLUMNS = ", ".join(f'"{name}"' for name in _ROUND_NAMES)
AUDIT_COLUMNS = ", ".join(f'"{name}"' for name in _AUDIT_NAMES)
_ARGV, _BASE_HASHES = _RUN_NAMES.index("argv"), _RUN_NAMES.index("base_hashes")
_AUTHORS = _AUDIT_NAMES.index("authors")
