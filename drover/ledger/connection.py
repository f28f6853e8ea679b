"""The ledger's SQLite connection: its settings, plain SQL for reads, sqlite-utils over it for writes."""
from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, Sequence

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_MS = 30_000


def now() -> str:
    """UTC timestamps to the millisecond, sortable as text."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds_since(stamp: str, at: datetime | None = None) -> float:
    """How long before `at` (now) a ledger stamp (`now()`'s) was."""
    return ((at or datetime.now(timezone.utc)) - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).total_seconds()


class Connection:
    """One open connection to the ledger file. Use as a context manager, or call close()."""

    def __init__(self, path: Path):
        self.path = path
        # isolation_level=None: drover issues BEGIN itself, so every write begins IMMEDIATE.
        self.conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._wal()
        self.conn.execute("PRAGMA foreign_keys = ON")

    def _wal(self) -> None:
        """WAL mode. Turning a new ledger to it takes an exclusive lock, and SQLite answers a
        contended switch with "database is locked" at once, its busy handler not asked (several
        drovers opening a ledger no one has opened yet): tried again within the busy timeout."""
        import time

        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    @cached_property
    def db(self) -> "sqlite_utils.Database":
        """sqlite-utils over the same connection: migrations and every row written go through it.

        Imported at the first write: a command that only reads (show, prompt, a warm list) does not
        pay its import. Inside drover's own transaction (Journal.write) its writes nest as savepoints.
        recursive_triggers=False keeps SQLite's default, under which the activity triggers were written.
        """
        import sqlite_utils

        return sqlite_utils.Database(self.conn, execute_plugins=False, recursive_triggers=False)

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self.conn.execute(sql, params)]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
