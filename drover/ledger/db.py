"""The SQLite ledger: opening it, applying its migrations (migrations.py) here and nowhere else, every query.

Write transactions take the writers' lock (journal.py), then begin IMMEDIATE; numbers such as
a round's are allocated inside the transaction.
"""
from __future__ import annotations

import json
import os
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from drover.errors import DroverError
from drover.ledger.journal import Journal, _nonempty, sha256  # noqa: F401 - sha256: the ledger's API
from drover.ledger.migrations import MIGRATION_SET, MIGRATIONS, migrations  # noqa: F401 - ledger_io and tests read them here
from drover.ledger.activity import ACTIVITY_KEYS, LIST_KEYS, ActivityRow, activity_sql, no_activity, opens_gate

if TYPE_CHECKING:
    import sqlite_utils

    from drover.ledger.rows import Audit, Check, ItemRows, NewRun, Round, Run

BUSY_TIMEOUT_MS = 30_000


def now() -> str:
    """UTC timestamps to the millisecond, sortable as text."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Ledger(Journal):
    """One open ledger. Use as a context manager, or call close()."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._journal = False  # the intents table exists (set once migrations are applied)
        try:
            self._connect(path)
            self._migrate()
            self._journal = True
            if any(self.unfinished()) or _nonempty(self.tmp_dir):
                with self.locked():
                    pass  # taking the lock finishes what a killed writer left (a file, a commit)
        except sqlite3.DatabaseError as exc:
            raise DroverError(f"cannot open the ledger: {exc}", path=path) from None

    def _connect(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")
        self.tmp_dir = path.parent / "tmp"  # staged item-file writes; any left here is a kill's
        self._lock_fd: int | None = None
        self._lock_depth = 0
        self._cache_prefix: str | None = None  # the prefix cache_under was told: store_files writes under it
        # isolation_level=None: drover issues BEGIN itself, so every write begins IMMEDIATE.
        self.conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA foreign_keys = ON")

    @cached_property
    def db(self) -> "sqlite_utils.Database":
        """sqlite-utils over the same connection, for schema changes and row writes."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn, execute_plugins=False)

    def _migrate(self) -> None:
        """The one place migrations are applied; a ledger from a newer drover is refused."""
        known = {name for name, _ in MIGRATIONS}
        applied = self._applied_migrations()
        newer = sorted(applied - known)
        if newer:
            raise DroverError(
                f"{self.path.name} is from a newer drover (migration {newer[-1]}): upgrade drover to use it"
            )
        if applied >= known:
            return  # the common case, answered without importing sqlite-utils
        with self.write():
            migrations().apply(self.db)

    def _applied_migrations(self) -> set[str]:
        try:
            rows = self.conn.execute(
                "SELECT name FROM _sqlite_migrations WHERE migration_set = ?", (MIGRATION_SET,)
            ).fetchall()
        except sqlite3.OperationalError:  # no migrations table yet: a blank ledger
            return set()
        return {row[0] for row in rows}

    def close(self) -> None:
        self.conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> "Ledger":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def write(self) -> Iterator["Ledger"]:
        """One IMMEDIATE transaction under the writers' lock; nested calls join the outer one."""
        conn = self.conn
        if conn.in_transaction:
            yield self
            return
        with self.locked():
            self._begin()
            try:
                yield self
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            else:
                conn.execute("COMMIT")

    def _insert(self, table: str, row: dict[str, Any], *, replace: bool = False) -> int:
        """One row by plain SQL: writes need not import sqlite-utils."""
        columns = ", ".join(f'"{name}"' for name in row)
        marks = ", ".join("?" for _ in row)
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        cursor = self.conn.execute(f'{verb} INTO "{table}" ({columns}) VALUES ({marks})', list(row.values()))
        return cursor.lastrowid or 0

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return [dict(row) for row in self.conn.execute(sql, params)]

    def _runs(self, where: str, params: Sequence[Any] = ()) -> list[Run]:
        # rows.py is imported where a row is read: its frozen types cost `new`, which reads none, 10 ms
        from drover.ledger.rows import RUN_COLUMNS, Run

        return [Run.from_row(row) for row in self.conn.execute(f"SELECT {RUN_COLUMNS} FROM runs {where}", params)]

    # items --------------------------------------------------------------------------------

    def allocate_item(self, prefix: str, floor: int, taken: "Callable[[int], bool] | None" = None, *,
                      peeked: str = "") -> str:
        """The next item id: above every id ever allocated and `floor`, skipping numbers `taken` says exist.

        `peeked`: the id next_item_id gave this caller under the writers' lock it still holds, so
        nobody can have taken it since (the items row's key refuses it if somebody did).
        """
        with self.write():
            item_id = peeked or self.next_item_id(prefix, floor, taken)
            self._insert("items", {"id": item_id, "number": int(item_id.rsplit("-", 1)[1]), "created_at": now()})
            return item_id

    def highest_number(self) -> int:
        """The highest number of an id allocate_item gave (0 before any)."""
        (highest,) = self.conn.execute("SELECT coalesce(max(number), 0) FROM items").fetchone()
        return int(highest)

    def highest_met(self, prefix: str) -> int:
        """The highest number of a `<prefix>-<number>` item file the cache or `new` has met (0
        before any), kept when the file and its cache row are gone."""
        return self.met(prefix)[0]

    def met(self, prefix: str) -> tuple[int, str | None]:
        """(highest_met, the items folder's state when none of its names was numbered higher:
        folder_state's text, or None when not known)."""
        row = self.conn.execute("SELECT highest, folder FROM ids_met WHERE prefix = ?", (prefix,)).fetchone()
        return (0, None) if row is None else (int(row[0]), row[1])

    def raise_met(self, prefix: str, highest: int, folder: str | None = None) -> None:
        """Raise the prefix's highest met to `highest` (it is never lowered); with `folder`, also
        record that no name in the items folder, in that state, is numbered above it."""
        with self.write():
            self.conn.execute("INSERT INTO ids_met (prefix, highest, folder) VALUES (?, ?, ?) ON CONFLICT (prefix) "
                              "DO UPDATE SET highest = max(highest, excluded.highest), "
                              "folder = coalesce(excluded.folder, folder)",
                              (prefix, min(highest, _INTEGER_MAX), folder))

    def next_item_id(self, prefix: str, floor: int, taken: "Callable[[int], bool] | None" = None) -> str:
        """The id allocate_item would give now (the same one, while the caller holds the lock)."""
        highest = max(self.highest_number(), self.highest_met(prefix), floor)
        # ids the ledger met without allocating them (hand-written files that were parked or
        # run; those listed are in ids_met) stay taken even after their files are gone: the
        # highest of them matters only above `highest`, so SQL keeps only ids longer than it,
        # or as long and greater as text (two cheap tests per row), before the id tests and
        # the number
        above = f"{prefix}-{highest}"
        (met,) = self.conn.execute(
            f"SELECT max(CAST(substr(id, :start) AS INTEGER)) FROM items WHERE number IS NULL AND {_ABOVE}",
            {"length": len(above), "above": above, "pattern": prefix + "-[1-9]*", "start": len(prefix) + 2},
        ).fetchone()
        number = max(highest, met or 0) + 1
        while taken is not None and taken(number):
            number += 1
        return f"{prefix}-{number}"

    def item_row(self, item_id: str) -> dict[str, Any]:
        rows = self._rows("SELECT * FROM items WHERE id = ?", (item_id,))
        return rows[0] if rows else {"id": item_id, "done": 0, "parked": 0}

    def has_item(self, item_id: str) -> bool:
        """Whether the items table has a row for `item_id` (one lookup, not item_rows' every row)."""
        return self.conn.execute("SELECT 1 FROM items WHERE id = ?", (item_id,)).fetchone() is not None

    def item_rows(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self._rows("SELECT * FROM items")}

    def _ensure_item(self, item_id: str) -> None:
        self.conn.execute("INSERT OR IGNORE INTO items (id, done, parked) VALUES (?, 0, 0)", (item_id,))

    def mark_done(self, item_id: str) -> None:
        with self.write():
            self._ensure_item(item_id)
            self.conn.execute("UPDATE items SET done = 1, done_at = ? WHERE id = ?", (now(), item_id))

    def park(self, item_id: str, reason: str) -> None:
        with self.write():
            self._ensure_item(item_id)
            self.conn.execute(
                "UPDATE items SET parked = 1, parked_reason = ?, parked_at = ? WHERE id = ?",
                (reason, now(), item_id),
            )

    def unpark(self, item_id: str) -> None:
        with self.write():
            self._ensure_item(item_id)
            self.conn.execute(
                "UPDATE items SET parked = 0, parked_reason = NULL, parked_at = NULL WHERE id = ?",
                (item_id,),
            )

    # the metadata cache ------------------------------------------------------------------

    def cache_under(self, prefix: str) -> None:
        """Drop every cache row when the rows were parsed under a prefix other than `prefix`: an id
        is readable or not by the prefix, which the file's bytes do not show. Rows this ledger
        stores from now on are written only while the cache is under `prefix`.

        item_files has rows only while item_files_prefix holds the one prefix they were parsed
        under: store_files records it with the first rows, the migration that made the table
        emptied the cache, and an import that leaves no single prefix empties it too."""
        self._cache_prefix = prefix
        under = self._parsed_under()
        if under is None or under == prefix:
            return  # None: no rows, so none to drop
        with self.write():
            if self._parsed_under() not in (None, prefix):
                self.drop_cache()

    def drop_cache(self) -> None:
        """Empty the cache: every item file is parsed again at the next catalogue."""
        with self.write():
            self.conn.execute("DELETE FROM item_files")
            self.conn.execute("DELETE FROM item_files_prefix")

    def _parsed_under(self) -> str | None:
        """The prefix the cache's rows were parsed under; None for an empty cache."""
        row = self.conn.execute("SELECT prefix FROM item_files_prefix").fetchone()
        return None if row is None else row[0]

    def cached_files(self) -> dict[str, Any]:
        """Cache rows by path, as sqlite3.Row in CACHE_COLUMNS order (read by position or name)."""
        return {row[0]: row for row in self.conn.execute(f"SELECT {_CACHE_SELECT} FROM item_files")}

    def cached_light(self) -> dict[str, tuple[Any, ...]]:
        """Every cache row by path as a plain tuple of LIGHT_COLUMNS: what a catalogue entry needs,
        without the frontmatter and the digests (long strings, read only when asked)."""
        cursor = self.conn.cursor()
        cursor.row_factory = None
        return {row[0]: row for row in cursor.execute(f"SELECT {_LIGHT_SELECT} FROM item_files")}

    def cached_known(self, paths: list[str]) -> dict[str, tuple[str | None, str | None]]:
        """(digest of the bytes, digest of the frontmatter) of each of `paths` the cache has a row
        for (of every row, when there are many)."""
        if len(paths) > _IN_CHUNK:  # most of the cache: one pass costs less than a lookup each
            cursor = self.conn.cursor()
            cursor.row_factory = None  # plain tuples: a sqlite3.Row each costs twice the time
            return {row[0]: row[1:] for row in cursor.execute("SELECT path, digest, front FROM item_files")}
        found: dict[str, tuple[str | None, str | None]] = {}
        for at in range(0, len(paths), _IN_CHUNK):
            part = paths[at:at + _IN_CHUNK]
            marks = ", ".join("?" for _ in part)
            found.update((row[0], row[1:]) for row in self.conn.execute(
                f"SELECT path, digest, front FROM item_files WHERE path IN ({marks})", part))
        return found

    def cached_metas(self, containing: str) -> list[str]:
        """The frontmatter (as JSON) of each cache row whose JSON text holds `containing`."""
        return [row[0] for row in self.conn.execute("SELECT meta FROM item_files WHERE instr(meta, ?) > 0", (containing,))]

    def cached_files_for(self, paths: list[str]) -> dict[str, Any]:
        marks = ", ".join("?" for _ in paths)
        return {row[0]: row for row in
                self.conn.execute(f"SELECT {_CACHE_SELECT} FROM item_files WHERE path IN ({marks})", paths)}

    def store_files(self, rows: Sequence[Sequence[Any]], stale_paths: Sequence[str] = (),
                    mtimes: Sequence[tuple[int, str]] = (), bodies: Sequence[tuple[Any, ...]] = (),
                    renewed: Sequence[Sequence[Any]] = ()) -> None:
        """Refresh cache rows (tuples of every column, in CACHE_COLUMNS order; `renewed`: rows for
        paths the cache had a row for when it was read), give rows whose files' bytes did not
        change their new mtimes ((mtime_ns, path) each), and rows whose files' body alone changed
        what the body decides ((size, mtime_ns, outstanding, cleared, placeholder, digest, path) each); drop
        vanished paths. Nothing is written when the cache has gone to a prefix other than the one
        cache_under was told since (a `[project] prefix` edited meanwhile)."""
        if not rows and not stale_paths and not mtimes and not bodies and not renewed:
            return
        with self.write():
            if rows or mtimes or bodies or renewed:
                if self._cache_prefix is None:
                    raise RuntimeError("store_files: cache_under was not called")
                under = self._parsed_under()
                if under is None:
                    self.conn.execute("INSERT INTO item_files_prefix (prefix) VALUES (?)", (self._cache_prefix,))
                elif under != self._cache_prefix:
                    return  # another process took the cache to another prefix: these rows are stale there
            if mtimes:
                self.conn.executemany("UPDATE item_files SET mtime_ns = ? WHERE path = ?", mtimes)
            if bodies:
                self.conn.executemany("UPDATE item_files SET size = ?, mtime_ns = ?, outstanding = ?, cleared = ?, "
                                      "placeholder = ?, digest = ? WHERE path = ?", bodies)
            if renewed:
                # a row updated in place costs about a fifth less than one replaced (deleted and
                # inserted again, with its key); one gone since the read (another process
                # dropped it) is inserted
                done = self.conn.executemany(_RENEW, [(*row[1:], row[0]) for row in renewed]).rowcount
                if done != len(renewed):
                    self.conn.executemany(_INSERT_NEW, renewed)
            if rows:
                self.conn.executemany(_INSERT, rows)
                self._meet([row[3] for row in rows])
            self.conn.executemany("DELETE FROM item_files WHERE path = ?", [(path,) for path in stale_paths])

    def _meet(self, ids: list[str]) -> None:
        """Raise the prefix's highest met to the highest of `ids` (cache rows' ids: their files'
        names), within the caller's transaction. Renewed rows need not: their paths had rows."""
        from drover.items.ids import highest_number

        prefix = self._cache_prefix or ""
        met = self.highest_met(prefix)
        highest = highest_number(ids, prefix, met)
        if highest > met:
            self.raise_met(prefix, highest)

    # runs ----------------------------------------------------------------------------------

    def start_run(self, run: NewRun) -> None:
        with self.write():
            self._ensure_item(run.item)
            self._insert("runs", run.as_row(now()))

    def set_run_pid(self, run_id: str, pid: int, started: str = "") -> None:
        with self.write():
            self.conn.execute("UPDATE runs SET pid = ?, pid_start = ? WHERE id = ?", (pid, started, run_id))

    def finish_run(self, run_id: str, exit_status: int | None, outcome: str, head: str | None = None) -> None:
        """Record a run's end; `head` (the branch head it left) only when given."""
        with self.write():
            self.conn.execute(
                "UPDATE runs SET finished = ?, exit_status = ?, outcome = ? WHERE id = ?",
                (now(), exit_status, outcome, run_id),
            )
            if head is not None:
                self.conn.execute("UPDATE runs SET head = ? WHERE id = ?", (head, run_id))

    def item_branch(self, item_id: str) -> str:
        """The branch the item's newest implementing run worked on; "" before any."""
        row = self.conn.execute(
            "SELECT branch FROM runs WHERE item = ? AND slot = 'implement' AND branch != '' "
            "ORDER BY started DESC, rowid DESC LIMIT 1", (item_id,)
        ).fetchone()
        return row[0] if row else ""

    def record_usage(self, run_id: str, usage: dict[str, Any]) -> None:
        """A run's model, tokens in and out, cost and tool calls (see drover/agents/usage.py)."""
        with self.write():
            self.conn.execute(
                "UPDATE runs SET model = ?, input_tokens = ?, output_tokens = ?, cost_usd = ?, tool_calls = ? "
                "WHERE id = ?",
                (usage.get("model") or None, usage.get("input_tokens"), usage.get("output_tokens"),
                 usage.get("cost_usd"), usage.get("tool_calls"), run_id),
            )

    def set_run_node(self, run_id: str, node: str, reason: str = "") -> None:
        """Where a run ran, and (for an interrupted one) why it ended."""
        with self.write():
            self.conn.execute("UPDATE runs SET node = ?, reason = ? WHERE id = ?", (node, reason, run_id))

    def snapshot(self, dest: Path) -> None:
        """A consistent copy of the whole ledger in `dest`: what a worker validates against."""
        copy = sqlite3.connect(str(dest))
        try:
            self.conn.backup(copy)
        finally:
            copy.close()

    def run(self, run_id: str) -> Run | None:
        found = self._runs("WHERE id = ?", (run_id,))
        return found[0] if found else None

    def runs(self, item_id: str, slot: str | None = None) -> list[Run]:
        """An item's runs, oldest first, optionally of one slot."""
        if slot:
            return self._runs("WHERE item = ? AND slot = ? ORDER BY started, rowid", (item_id, slot))
        return self._runs("WHERE item = ? ORDER BY started, rowid", (item_id,))

    def rows_of(self, item_ids: Sequence[str], *, every_item: bool = False) -> ItemRows:
        """Several items' runs, audits and `items` rows, one read of each table (a prompt's item and its
        deps); every_item: the `items` rows of every item (a draft's siblings need whether each is done)."""
        from drover.ledger.rows import AUDIT_COLUMNS, Audit, ItemRows

        ids = list(dict.fromkeys(item_ids))
        if not ids:
            return ItemRows()
        marks = ", ".join("?" for _ in ids)
        runs: dict[str, list[Run]] = {}
        for run in self._runs(f"WHERE item IN ({marks}) ORDER BY started, rowid", ids):
            runs.setdefault(run.item, []).append(run)
        audits: dict[str, list[Audit]] = {}
        for row in self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE item IN ({marks}) ORDER BY at, id", ids):
            audit = Audit.from_row(row)
            audits.setdefault(audit.item, []).append(audit)
        which = ("SELECT * FROM items", []) if every_item else (f"SELECT * FROM items WHERE id IN ({marks})", ids)
        items = {row["id"]: row for row in self._rows(*which)}
        return ItemRows({item: tuple(found) for item, found in runs.items()},
                        {item: tuple(found) for item, found in audits.items()}, items)

    def activity(self, *, done: bool = True) -> dict[str, "ActivityRow"]:
        """Per item, what its state needs: the last implementing run, newest round, newest approval.

        activity_for's row for every item in items, runs or rounds (done=False: but done items,
        whose state needs none of it), read from the activity table its triggers keep
        (drover/ledger/activity.py): one row per item rather than every run.
        """
        conn = self.conn.cursor()
        conn.row_factory = None  # plain tuples: cheaper than sqlite3.Row
        also = "" if done else " WHERE item NOT IN (SELECT id FROM items WHERE done)"
        ids = {row[0] for row in conn.execute("SELECT id FROM items" + ("" if done else " WHERE NOT done"))}
        found = {row[0]: ActivityRow(row[:-1]) for row in conn.execute(f"SELECT {_ACTIVITY_SELECT}, listed FROM activity{also}")
                 if row[-1] or row[0] in ids}
        found.update((item, no_activity(item)) for item in ids.difference(found))
        return found

    def list_activity(self, *, approved: bool = False) -> dict[str, tuple[Any, ...]]:
        """activity(done=False)'s rows but only the columns a state reads (LIST_KEYS), as plain tuples.

        An item without a row here has no runs, rounds or audits, which a state reads as
        activity() reads no_activity's row: `list` reads half the columns and makes no ActivityRow.
        `approved`: only the rows with an approving audit (check asks whether its branch moved).
        """
        cursor = self.conn.cursor()
        cursor.row_factory = None
        only = "approval_head IS NOT NULL AND " if approved else ""
        return {row[0]: row for row in cursor.execute(
            f"SELECT {', '.join(LIST_KEYS)} FROM activity WHERE {only}"
            "(listed OR item IN (SELECT id FROM items WHERE NOT done))"
            " AND item NOT IN (SELECT id FROM items WHERE done)")}

    def flags(self) -> tuple[set[str], dict[str, str]]:
        """The ids of items done, and of items parked and not done with their reason, as
        state.state_of reads them, without a dict per row."""
        done: set[str] = set()
        parked: dict[str, str] = {}
        cursor = self.conn.cursor()
        cursor.row_factory = None
        for item, is_done, is_parked, reason in cursor.execute(
                "SELECT id, done, parked, parked_reason FROM items WHERE done OR parked"):
            if is_done:
                done.add(item)
            elif is_parked:
                parked[item] = reason or ""
        return done, parked

    def activity_for(self, item_id: str) -> dict[str, Any]:
        """One item's activity row (as activity() has it), without scanning every item."""
        return self._rows(activity_sql("SELECT ? AS id"), (item_id,))[0]

    def unfinished_runs(self) -> list[Run]:
        return self._runs("WHERE finished IS NULL")

    def live_agents(self) -> list[tuple[str, int, str]]:
        """(run id, agent pid, the pid's start) of each unfinished run that recorded its agent's
        pid: plain tuples, for the commands that must not load the row types (writes.traced_run)."""
        return [(row["id"], row["pid"], row["pid_start"] or "") for row in
                self._rows("SELECT id, pid, pid_start FROM runs WHERE finished IS NULL AND pid IS NOT NULL")]

    def authors(self, item_id: str) -> list[str]:
        """The agent identities of implementing runs plus the `by` of claimed audits (ItemRows.authors)."""
        return self.rows_of([item_id]).authors(item_id)

    # rounds --------------------------------------------------------------------------------

    def rounds(self, item_id: str) -> list[Round]:
        from drover.ledger.rows import ROUND_COLUMNS, Round

        return [Round(*row) for row in
                self.conn.execute(f"SELECT {ROUND_COLUMNS} FROM rounds WHERE item = ? ORDER BY number", (item_id,))]

    def newest_rounds(self, *, uncleared: bool, items: Sequence[str] | None = None) -> dict[str, int]:
        """Per item whose rounds are all cleared (uncleared=False) or not (True), its newest round's
        number; items: only these (check asks about few, of 50,000)."""
        where = ""
        if items is not None:
            where = f" WHERE item IN ({', '.join('?' for _ in items)})"
        cursor = self.conn.cursor()
        cursor.row_factory = None
        sql = (f"SELECT item, max(number) FROM rounds{where} GROUP BY item "
               f"HAVING sum(cleared_at IS NULL) {'!=' if uncleared else '='} 0")
        return dict(cursor.execute(sql, list(items or ())))

    def add_round(self, item_id: str, digest: str, headline: str, path: str, by: str) -> int:
        """Record the next round; the number is taken inside the transaction."""
        with self.write():
            (highest,) = self.conn.execute(
                "SELECT coalesce(max(number), 0) FROM rounds WHERE item = ?", (item_id,)
            ).fetchone()
            number: int = highest + 1
            self._ensure_item(item_id)
            self._insert("rounds",
                {"item": item_id, "number": number, "digest": digest, "headline": headline,
                 "path": path, "by": by, "at": now()}
            )
            return number

    def clear_round(self, item_id: str, by: str) -> int | None:
        """Mark every uncleared round cleared; returns the newest one's number.

        Earlier uncleared rounds were replaced by the newest one's findings, so discharging the
        newest discharges them too: once the Changes section is cleared no round is outstanding.
        """
        with self.write():
            row = self.conn.execute(
                "SELECT max(number) FROM rounds WHERE item = ? AND cleared_at IS NULL", (item_id,)
            ).fetchone()
            newest: int | None = row[0]
            if newest is None:
                return None
            self.conn.execute(
                "UPDATE rounds SET cleared_at = ?, cleared_by = ? WHERE item = ? AND cleared_at IS NULL",
                (now(), by, item_id),
            )
            return newest

    # audits and dispositions ---------------------------------------------------------------

    def add_audit(self, item_id: str, level: str, by: str, note: str, head: str = "", *, run: str = "",
                  require_independent: bool = False) -> Audit:
        """Record an audit given in run `run` ("" the operator outside any run); whether it opens the
        gate is decided here, against the item's authors as they stand (activity.opens_gate)."""
        from drover.ledger.rows import AUDIT_COLUMNS, Audit

        with self.write():
            self._ensure_item(item_id)
            authors = self.authors(item_id)
            acting = self.run(run) if run else None
            opens = opens_gate(item_id, level, run, acting, by, authors, require_independent)
            rowid = self._insert("audits",
                {"item": item_id, "level": level, "by": by, "note": note, "at": now(),
                 "authors": json.dumps(authors), "head": head, "run": run, "opens": int(opens)}
            )
            return Audit.from_row(self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE id = ?",
                                                    (rowid,)).fetchone())

    def audits(self, item_id: str) -> list[Audit]:
        from drover.ledger.rows import AUDIT_COLUMNS, Audit

        return [Audit.from_row(row) for row in
                self.conn.execute(f"SELECT {AUDIT_COLUMNS} FROM audits WHERE item = ? ORDER BY at, id", (item_id,))]

    def add_disposition(self, item_id: str, issue: int, disposition: str, by: str, note: str) -> None:
        with self.write():
            self._ensure_item(item_id)
            self._insert("dispositions",
                {"item": item_id, "issue": issue, "disposition": disposition, "by": by,
                 "note": note, "at": now(), "applied": ""}
            )

    def newest_dispositions(self, item_id: str) -> dict[int, dict[str, Any]]:
        """The judgment in force per issue: the newest disposition recorded for it."""
        return {row["issue"]: row for row in self.dispositions(item_id)}

    def dispositions(self, item_id: str) -> list[dict[str, Any]]:
        """Every disposition recorded, oldest first (the newest per issue is the judgment)."""
        return self._rows("SELECT * FROM dispositions WHERE item = ? ORDER BY at, id", (item_id,))

    def set_applied(self, disposition_id: int, applied: str) -> None:
        with self.write():
            self.conn.execute("UPDATE dispositions SET applied = ? WHERE id = ?", (applied, disposition_id))

    # checks: drover's runs of the verify command (verify.py) ------------------------------

    def add_check(self, check: Check) -> None:
        with self.write():
            self._ensure_item(check.item)
            self._insert("checks", check.as_row())

    def checks(self, item_id: str, head: str | None = None) -> list[Check]:
        """An item's checks, oldest first; `head`: only those of that commit."""
        from drover.ledger.rows import CHECK_COLUMNS, Check

        where, params = ("item = ?", [item_id]) if head is None else ("item = ? AND head = ?", [item_id, head])
        return [Check(*row) for row in
                self.conn.execute(f"SELECT {CHECK_COLUMNS} FROM checks WHERE {where} ORDER BY started, rowid", params)]

    # events ---------------------------------------------------------------------------------

    def log_event(self, command: str, item: str | None, by: str = "", **detail: Any) -> None:
        with self.write():
            self._insert("events",
                {"at": now(), "command": command, "item": item, "by": by,
                 "detail": json.dumps(detail, sort_keys=True, default=str)}
            )

    def events(self, item_id: str | None = None) -> list[dict[str, Any]]:
        if item_id is None:
            return self._rows("SELECT * FROM events ORDER BY id")
        return self._rows("SELECT * FROM events WHERE item = ? ORDER BY id", (item_id,))


def open_ledger(path: Path) -> Ledger:
    return Ledger(path)


# The metadata cache's columns, in the order cached_files gives and store_files takes them.
CACHE_COLUMNS = ("path", "size", "mtime_ns", "id", "title", "kind", "deps", "meta", "outstanding", "cleared",
                 "unreadable", "detail", "line", "digest", "front", "placeholder")
_CACHE_SELECT = ", ".join(f'"{name}"' for name in CACHE_COLUMNS)
_CACHE_VALUES = f"INTO item_files ({_CACHE_SELECT}) VALUES ({', '.join('?' for _ in CACHE_COLUMNS)})"
_INSERT = f"INSERT OR REPLACE {_CACHE_VALUES}"
_INSERT_NEW = f"INSERT OR IGNORE {_CACHE_VALUES}"  # a renewed row that another process dropped
_RENEW = "UPDATE item_files SET " + ", ".join(f'"{name}" = ?' for name in CACHE_COLUMNS[1:]) + " WHERE path = ?"
# What a catalogue entry needs of a row (cached_light): every column but the frontmatter and the digests.
LIGHT_COLUMNS = tuple(name for name in CACHE_COLUMNS if name not in ("meta", "digest", "front"))
_LIGHT_SELECT = ", ".join(f'"{name}"' for name in LIGHT_COLUMNS)
_IN_CHUNK = 10000  # paths named in one query (SQLite's variable limit is 32,766)
_ACTIVITY_SELECT = ", ".join(ACTIVITY_KEYS)
# next_item_id's test of an id (:pattern is "<prefix>-[1-9]*", :start where the number starts):
# longer than `above`, or as long and greater as text, then an id. Named parameters: numbered
# ones given as a sequence are deprecated from Python 3.12.
_INTEGER_MAX = 2**63 - 1
_ABOVE = ("(length(id) > :length OR (length(id) = :length AND id > :above)) AND id GLOB :pattern "
          "AND substr(id, :start) NOT GLOB '*[^0-9]*'")
