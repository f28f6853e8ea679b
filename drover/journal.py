"""The writers' lock and the intent journal, mixed into ledger.Ledger.

Writers take an exclusive flock on `ledger.db.lock` before their IMMEDIATE transaction, so they
queue for up to WRITE_WAIT_SECONDS instead of failing on SQLite's busy timeout, and so the item
file a command reads and rewrites cannot change under it. An intent (table `intents`) commits
with a write's rows and names the file text the rows count on; whoever next takes the lock
finishes any intent a killed writer left, and removes its staged files. docs/reliability.md.
"""
from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from .errors import DroverError

# How long a writer waits for the write lock before it gives up: far longer than any write
# (milliseconds), so only a stuck process holding the lock makes a writer fail.
WRITE_WAIT_SECONDS = 300.0


def sha256(text: str) -> str:
    import hashlib  # here: its OpenSSL load is a few ms a command that only reads does not need

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _nonempty(folder: Path) -> bool:
    try:
        return bool(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return False


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _intents(db: Any) -> None:
    """Migration 0005_intents (listed in migrations.MIGRATIONS)."""
    # An item-file write that its ledger rows already count on: committed with those rows before
    # the file is renamed into place, deleted after; one left behind is finished on the next open.
    db.execute(
        "CREATE TABLE IF NOT EXISTS intents (id INTEGER PRIMARY KEY, command TEXT NOT NULL, "
        "item TEXT, path TEXT NOT NULL, text TEXT NOT NULL, old_sha256 TEXT, at TEXT NOT NULL)"
    )


class Journal:
    """The lock and the journal; Ledger provides the connection, paths and row helpers."""

    conn: sqlite3.Connection
    path: Path
    lock_path: Path
    tmp_dir: Path
    _lock_fd: int | None
    _lock_depth: int
    _journal: bool

    if TYPE_CHECKING:
        def write(self) -> AbstractContextManager[Any]: ...
        def _rows(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]: ...
        def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False) -> int: ...

    @contextmanager
    def locked(self) -> Iterator["Journal"]:
        """Hold the writers' lock (re-entrant). Taking it first finishes any interrupted write."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield self
            finally:
                self._lock_depth -= 1
            return
        self._acquire()
        self._lock_depth = 1
        try:
            if self._journal and self.pending_intents():
                self.recover()
            self._sweep()
            yield self
        finally:
            self._lock_depth = 0
            self._release()

    def _acquire(self) -> None:
        import fcntl

        if self._lock_fd is None:
            self._lock_fd = os.open(str(self.lock_path), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + WRITE_WAIT_SECONDS
        pause = 0.002
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
            if time.monotonic() > deadline:
                raise DroverError(
                    f"another drover has held the ledger's write lock for {WRITE_WAIT_SECONDS:.0f} s; "
                    "gave up waiting", path=self.lock_path.name,
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _sweep(self) -> None:
        """Under the lock no write is under way: a staged file left here is a killed writer's."""
        try:
            left = os.listdir(self.tmp_dir)
        except FileNotFoundError:
            return
        for name in left:
            try:
                os.unlink(self.tmp_dir / name)
            except OSError:
                pass

    def staging(self, path: Path) -> Path:
        """Where a journaled write of `path` stages its text (same filesystem as the project)."""
        return self.tmp_dir / f"{os.getpid()}.{path.name}"

    def _release(self) -> None:
        import fcntl

        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    # the intent journal --------------------------------------------------------------------

    def add_intent(self, command: str, item: str | None, path: Path, text: str, old: str | None) -> int:
        """Record, inside the caller's transaction, that `path` is to hold `text`."""
        return self._insert("intents", {
            "command": command, "item": item, "path": str(path), "text": text,
            "old_sha256": sha256(old) if old is not None else None, "at": _now(),
        })

    def pending_intents(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM intents ORDER BY id")

    def finish_intents(self, ids: list[int]) -> None:
        if not ids:
            return
        with self.write():
            self.conn.executemany("DELETE FROM intents WHERE id = ?", [(i,) for i in ids])

    def recover(self) -> list[str]:
        """Finish every interrupted write (under the lock): the ledger already counts on it.

        A file edited by hand since the write began is left as it is (the edit wins); `check`
        then reports any disagreement it leaves.
        """
        from .items import write_atomic

        said = []
        for intent in self.pending_intents():
            path = Path(intent["path"])
            try:
                current = path.read_bytes().decode("utf-8", "surrogateescape")
            except FileNotFoundError:
                current = None
            except OSError:
                current = ""
            expected = intent["old_sha256"]
            ours = current is None if expected is None else current is not None and sha256(current) == expected
            if current == intent["text"]:
                line = ""  # the rename happened; only the journal entry was left
            elif ours and not path.is_symlink():
                write_atomic(path, intent["text"], tmp=self.staging(path))
                line = f"finished an interrupted {intent['command']}: {path.name}"
            else:
                line = f"an interrupted {intent['command']} left {path.name} as edited since"
            with self.write():
                self.conn.execute("DELETE FROM intents WHERE id = ?", (intent["id"],))
                if line:
                    said.append(line)
                    self._insert("events", {"at": _now(), "command": "recover", "item": intent["item"],
                                            "by": "drover", "detail": json.dumps({"said": line})})
        return said

    def _begin(self) -> None:
        """BEGIN IMMEDIATE, retried while another program (not a drover) holds SQLite's lock."""
        deadline = time.monotonic() + WRITE_WAIT_SECONDS
        while True:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
