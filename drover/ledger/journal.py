"""The writers' lock, their transactions and the intent journal: the base of every ledger table's writes.

Writers take an exclusive flock on `ledger.db.lock` before their IMMEDIATE transaction, so they
queue for up to WRITE_WAIT_SECONDS instead of failing on SQLite's busy timeout, and so the item
file a command reads and rewrites cannot change under it. An intent (table `intents`) commits
with a write's rows and names the file text the rows count on; whoever next takes the lock
finishes any intent a killed writer left, and removes its staged files. With [project]
commit_items a write also owes a commit (table `owed_commits`, in the same transaction as its
rows), made under the same lock right after the rename, or by whoever next takes the lock when
a kill came first. docs/reliability.md.
"""
from __future__ import annotations

import errno
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from drover.agents.procs import failpoint
from drover.errors import DroverError
from drover.ledger.connection import Connection, now

# How long a writer waits for the write lock before it gives up: far longer than any write
# (milliseconds), so only a stuck process holding the lock makes a writer fail.
WRITE_WAIT_SECONDS = 300.0


def sha256(text: str) -> str:
    import hashlib  # here: its OpenSSL load is a few ms a command that only reads does not need

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def nonempty(folder: Path) -> bool:
    try:
        return bool(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return False


def _intents(db: Any) -> None:
    """Migration 0005_intents (listed in migrations.MIGRATIONS)."""
    # An item-file write that its ledger rows already count on: committed with those rows before
    # the file is renamed into place, deleted after; one left behind is finished on the next open.
    db.execute(
        "CREATE TABLE IF NOT EXISTS intents (id INTEGER PRIMARY KEY, command TEXT NOT NULL, "
        "item TEXT, path TEXT NOT NULL, text TEXT NOT NULL, old_sha256 TEXT, at TEXT NOT NULL)"
    )


def _owed_commits(db: Any) -> None:
    """Migration 0014_owed_commits (listed in migrations.MIGRATIONS)."""
    # A commit of an item-file write that [project] commit_items owes: committed with the write's
    # rows, deleted once HEAD and the operator's index hold the text. `path` is relative to
    # `root` (the repository); `failed`: git's words when the last try failed.
    db.execute(
        "CREATE TABLE IF NOT EXISTS owed_commits (id INTEGER PRIMARY KEY, item TEXT, root TEXT NOT NULL, "
        "path TEXT NOT NULL, text TEXT NOT NULL, message TEXT NOT NULL, at TEXT NOT NULL, failed TEXT)"
    )


class Journal(Connection):
    """The lock, the transactions it guards and the journal, over the ledger's connection."""

    _lock_fd: int | None = None
    _lock_depth = 0
    _journal = False  # the intents table exists (set once migrations are applied)

    def __init__(self, path: Path):
        super().__init__(path)
        self.lock_path = path.with_name(path.name + ".lock")
        self.tmp_dir = path.parent / "tmp"  # staged item-file writes; any left here is a kill's
        self.runs_dir = path.parent / "runs"  # Project.runs_dir: the ledger lies in the state folder

    def close(self) -> None:
        super().close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @contextmanager
    def write(self) -> Iterator[None]:
        """One IMMEDIATE transaction under the writers' lock; nested calls join the outer one."""
        conn = self.conn
        if conn.in_transaction:
            yield
            return
        with self.locked():
            self._begin()
            try:
                yield
            except BaseException:
                # SQLite may have ended the transaction itself (a full disk, an I/O error): a
                # ROLLBACK then fails, and its error would stand in for the one that says why
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except BaseException:
                # a COMMIT SQLite refused leaves the transaction open: the next write would join it,
                # outside the lock, and nothing would ever commit it
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def _insert_row(self, table: str, row: dict[str, Any]) -> int:
        """Insert one row (inside the caller's transaction); its rowid."""
        return self.db.table(table).insert(row).last_rowid or 0

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the writers' lock (re-entrant). Taking it first finishes any interrupted write."""
        if self._lock_depth:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        # Every write goes through sqlite-utils (Connection.db), imported at the first one: here,
        # before the lock, so that no other writer waits the 30-40 ms of that import (a reviewer's
        # `drover audit` held the lock that long while the drive's jobs waited to record theirs).
        _ = self.db
        self._acquire()
        self._lock_depth = 1
        try:
            intents, owed = self.unfinished() if self._journal else (False, False)
            if intents:
                self.recover()
            self._sweep()
            if owed:
                self.settle_commits(retry_failed=False)
            yield
        finally:
            self._lock_depth = 0
            self._release()

    def _acquire(self) -> None:
        import fcntl

        if self._lock_fd is None:
            self._lock_fd = os.open(str(self.lock_path), os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.monotonic() + WRITE_WAIT_SECONDS
        pause = 0.0005
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
            # a write holds the lock for milliseconds: a long pause would be paid by every waiter
            pause = min(pause * 2, 0.002)

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
        return self._insert_row("intents", {
            "command": command, "item": item, "path": str(path), "text": text,
            "old_sha256": sha256(old) if old is not None else None, "at": now(),
        })

    def unfinished(self) -> tuple[bool, bool]:
        """Whether an intent is pending, and whether a commit is owed that no try has failed
        (one that failed waits for the next write: trying at every read would slow every read)."""
        try:
            intents, owed = self.conn.execute(
                "SELECT EXISTS (SELECT 1 FROM intents), EXISTS (SELECT 1 FROM owed_commits) "
                "AND NOT EXISTS (SELECT 1 FROM owed_commits WHERE failed IS NOT NULL)"
            ).fetchone()
        except sqlite3.OperationalError:  # migrated only as far as before 0014 (a migration's test)
            return bool(self.pending_intents()), False
        return bool(intents), bool(owed)

    def pending_intents(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM intents ORDER BY id")

    def finish_intents(self, ids: list[int]) -> None:
        if not ids:
            return
        with self.write():
            self.db.table("intents").delete_where(f"id IN ({', '.join('?' for _ in ids)})", ids)

    def recover(self) -> None:
        """Finish every interrupted write (under the lock): the ledger already counts on it. What each
        finished or left is a `recover` event.

        A file edited by hand since the write began is left as it is (the edit wins); `check`
        then reports any disagreement it leaves.
        """
        from drover.items.file import write_atomic

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
            edited = False
            if current == intent["text"]:
                line = ""  # the rename happened; only the journal entry was left
            elif ours and not path.is_symlink():
                write_atomic(path, intent["text"], tmp=self.staging(path))
                line = f"finished an interrupted {intent['command']}: {path.name}"
            else:
                edited = True
                line = f"an interrupted {intent['command']} left {path.name} as edited since"
            with self.write():
                self.db.table("intents").delete_where("id = ?", [intent["id"]])
                if edited:
                    # the file never held the text: no commit may say it did
                    self._drop_owed(path, intent["text"])
                if line:
                    self.db.table("events").insert({"at": now(), "command": "recover", "item": intent["item"],
                                                     "by": "drover", "detail": json.dumps({"said": line})})

    # commits owed by writes ([project] commit_items) ------------------------------------------

    def owe_commit(self, item: str | None, root: Path, path: Path, text: str, message: str) -> int:
        """Record, inside the caller's transaction, that `text` at `path` is to be committed."""
        return self._insert_row("owed_commits", {
            "item": item, "root": str(root), "path": path.relative_to(root).as_posix(), "text": text,
            "message": message, "at": now(), "failed": None,
        })

    def owed_commits(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM owed_commits ORDER BY id")

    def _drop_owed(self, path: Path, text: str) -> None:
        for row in self.owed_commits():
            if Path(row["root"]) / row["path"] == path and row["text"] == text:
                self.db.table("owed_commits").delete_where("id = ?", [row["id"]])

    def settle_commits(self, *, retry_failed: bool) -> list[str]:
        """Make every owed commit, oldest first, under the lock; returns what failed, one line.

        Each commits its own text (kept here), whatever the file holds now, so a commit never
        carries another write's text. The first failure stops the rest (a later commit made
        before an earlier one would have the earlier undo it) and is kept for the next write;
        `retry_failed` False leaves a kept failure, and all after it, alone.
        """
        from drover.errors import GitError
        from drover.git import commit_file, set_index_entry

        for row in self.owed_commits():
            if row["failed"] is not None and not retry_failed:
                return []
            root = Path(row["root"])
            try:
                _, blob, mode = commit_file(root, row["path"], row["text"], row["message"])
                failpoint("git-committed")
                set_index_entry(root, row["path"], mode, blob)
            except GitError as exc:
                with self.write():
                    self.db.table("owed_commits").update(row["id"], {"failed": str(exc)})
                waiting = len(self.owed_commits())
                return [f"{row['path']}: the edit is made and recorded but not committed ([project] "
                        f"commit_items): {exc}; {waiting} commit{'s wait' if waiting > 1 else ' waits'} for "
                        "the next write to try again"]
            with self.write():
                self.db.table("owed_commits").delete_where("id = ?", [row["id"]])
        return []

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
