"""The SQLite ledger: opening it, applying its migrations (migrations.py) here and nowhere else, events.

Each table's reads and writes live with the table (itemtable, filecache, runtable, verdicts, pooltable,
activity); Ledger is all of them over one connection. Reads are plain SQL; every row is written
through sqlite-utils' table API (Connection.db). Write transactions take the writers' lock
(journal.py), then begin IMMEDIATE; numbers such as a round's are allocated inside the transaction.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from drover.agents.procs import failpoint
from drover.errors import DroverError
from drover.ledger.activity import ActivityReads
from drover.ledger.connection import now
from drover.ledger.filecache import FileCache
from drover.ledger.journal import nonempty
from drover.ledger.migrations import MIGRATION_SET, MIGRATIONS, migrations
from drover.ledger.pooltable import PoolTable
from drover.ledger.verdicts import Verdicts


class Ledger(Verdicts, FileCache, ActivityReads, PoolTable):
    """One open ledger. Use as a context manager, or call close()."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            super().__init__(path)
            self._migrate()
            self._journal = True
            if any(self.unfinished()) or nonempty(self.tmp_dir):
                with self.locked():
                    pass  # taking the lock finishes what a killed writer left (a file, a commit)
        except sqlite3.DatabaseError as exc:
            raise DroverError(f"cannot open the ledger: {exc}", path=path) from None

    def _migrate(self) -> None:
        """The one place migrations are applied; a ledger from a newer drover is refused."""
        known = {name for name, _ in MIGRATIONS}
        applied = set(self.applied_migrations())
        newer = sorted(applied - known)
        if newer:
            raise DroverError(
                f"{self.path.name} is from a newer drover (migration {newer[-1]}): upgrade drover to use it"
            )
        if applied >= known:
            return  # the common case, answered without importing sqlite-utils
        with self.write():  # every pending migration in one transaction: a kill leaves none applied
            migrations().apply(self.db)
            failpoint("migrated")

    def applied_migrations(self) -> list[str]:
        """The names of the migrations applied, oldest first (none in a blank ledger)."""
        try:
            rows = self.conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY id", (MIGRATION_SET,)
            ).fetchall()
        except sqlite3.OperationalError:  # no migrations table yet: a blank ledger
            return []
        return [row["name"] for row in rows]

    def snapshot(self, dest: Path) -> None:
        """A consistent copy of the whole ledger in `dest`: what a worker validates against."""
        copy = sqlite3.connect(str(dest))
        try:
            self.conn.backup(copy)
        finally:
            copy.close()

    # events: what each command did, for people and for export --------------------------------

    def log_event(self, command: str, item: str | None, by: str = "", **detail: Any) -> None:
        with self.write():
            self.db.table("events").insert({"at": now(), "command": command, "item": item, "by": by,
                                            "detail": json.dumps(detail, sort_keys=True, default=str)})

    def events_of(self, command: str) -> list[dict[str, Any]]:
        """Every item's events of one command, oldest first."""
        return self._rows("SELECT * FROM events WHERE command = ? ORDER BY id", (command,))

    def events(self, item_id: str | None = None) -> list[dict[str, Any]]:
        if item_id is None:
            return self._rows("SELECT * FROM events ORDER BY id")
        return self._rows("SELECT * FROM events WHERE item = ? ORDER BY id", (item_id,))
