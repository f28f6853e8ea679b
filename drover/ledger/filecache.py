"""The metadata cache (tables `item_files` and `item_files_prefix`): what each item file said when it
had its size, mtime and digests, so an unchanged file is not parsed again (drover/ledger/catalogue.py)."""
from __future__ import annotations

import json
import sqlite3
from typing import Any, Sequence

from drover.ledger.itemtable import ItemTable

# The metadata cache's columns, in the order cached_files gives and store_files takes them.
CACHE_COLUMNS = ("path", "size", "mtime_ns", "id", "title", "kind", "deps", "meta", "outstanding", "cleared",
                 "unreadable", "detail", "line", "digest", "front", "placeholder", "exact")
_CACHE_SELECT = ", ".join(f'"{name}"' for name in CACHE_COLUMNS)
_ID = CACHE_COLUMNS.index("id")
# What a catalogue entry needs of a row (cached_light): every column but the frontmatter and the digests.
LIGHT_COLUMNS = tuple(name for name in CACHE_COLUMNS if name not in ("meta", "digest", "front", "exact"))
_LIGHT_SELECT = ", ".join(f'"{name}"' for name in LIGHT_COLUMNS)
# The columns of store_files' `mtimes` and `bodies` tuples, in their order.
_MTIME_COLUMNS = ("mtime_ns", "path")
_BODY_COLUMNS = ("size", "mtime_ns", "outstanding", "cleared", "placeholder", "digest", "path")
_IN_CHUNK = 10000  # paths named in one query (SQLite's variable limit is 32,766)


class FileCache(ItemTable):
    """The cache's rows, read as plain tuples where a catalogue of 50,000 files reads them all."""

    _cache_prefix: str | None = None  # the prefix cache_under was told: store_files writes under it

    def cache_under(self, prefix: str) -> bool:
        """Drop every cache row when the rows were parsed under a prefix other than `prefix`: an id
        is readable or not by the prefix, which the file's bytes do not show. Rows this ledger
        stores from now on are written only while the cache is under `prefix`.

        item_files has rows only while item_files_prefix holds the one prefix they were parsed
        under: store_files records it with the first rows, the migration that made the table
        emptied the cache, and an import that leaves no single prefix empties it too.

        True when the cache holds rows parsed under `prefix`."""
        self._cache_prefix = prefix
        under = self._parsed_under()
        if under is None or under == prefix:
            return under is not None  # None: no rows, so none to drop
        with self.write():
            if self._parsed_under() not in (None, prefix):
                self.drop_cache()
        return False

    def drop_cache(self) -> None:
        """Empty the cache: every item file is parsed again at the next catalogue."""
        self._ahead = None
        with self.write():
            self.db.table("item_files").delete_where()
            self.db.table("item_files_prefix").delete_where()

    def _parsed_under(self) -> str | None:
        """The prefix the cache's rows were parsed under; None for an empty cache."""
        row = self.conn.execute("SELECT prefix FROM item_files_prefix").fetchone()
        return None if row is None else str(row["prefix"])

    def cached_files(self) -> dict[str, Any]:
        """Cache rows by path, as sqlite3.Row in CACHE_COLUMNS order (read by position or name)."""
        return {row["path"]: row for row in self.conn.execute(f"SELECT {_CACHE_SELECT} FROM item_files")}

    def cached_light(self) -> dict[str, tuple[Any, ...]]:
        """Every cache row by path as a plain tuple of LIGHT_COLUMNS: what a catalogue entry needs,
        without the frontmatter and the digests (long strings, read only when asked)."""
        cursor = self.conn.cursor()
        cursor.row_factory = None  # plain tuples: a sqlite3.Row each costs twice the time
        return {row[0]: row for row in cursor.execute(f"SELECT {_LIGHT_SELECT} FROM item_files")}

    def cached_known(self, paths: list[str]) -> dict[str, tuple[str | None, str | None]]:
        """(digest of the bytes, digest of the frontmatter) of each of `paths` the cache has a row
        for (of every row, when there are many)."""
        cursor = self.conn.cursor()
        cursor.row_factory = None
        if len(paths) > _IN_CHUNK:  # most of the cache: one pass costs less than a lookup each
            return {path: (digest, front) for path, digest, front in
                    cursor.execute("SELECT path, digest, front FROM item_files")}
        found: dict[str, tuple[str | None, str | None]] = {}
        for at in range(0, len(paths), _IN_CHUNK):
            part = paths[at:at + _IN_CHUNK]
            marks = ", ".join("?" for _ in part)
            found.update((path, (digest, front)) for path, digest, front in cursor.execute(
                f"SELECT path, digest, front FROM item_files WHERE path IN ({marks})", part))
        return found

    def cached_keys(self) -> set[str]:
        """Every frontmatter key some cache row holds (SQLite reads the JSON: no row comes to Python).
        drover writes each row's JSON; a row that is not JSON (written by another hand) is passed
        over, in a second read that checks every row first (half again the time)."""
        query = "SELECT DISTINCT j.key FROM item_files f, json_each(f.meta) j"
        try:
            return {row[0] for row in self.conn.execute(query)}
        except sqlite3.OperationalError:  # malformed JSON
            return {row[0] for row in self.conn.execute(query + " WHERE json_valid(f.meta)")}

    def cached_ids_with_keys(self, keys: list[str]) -> list[tuple[str, str]]:
        """(the id, the key) of each cache row holding one of `keys` in its frontmatter."""
        marks = ", ".join("?" for _ in keys)
        return [(str(row[0]), row[1]) for row in self.conn.execute(
            "SELECT f.id, j.key FROM item_files f, json_each(f.meta) j "
            f"WHERE json_valid(f.meta) AND j.key IN ({marks})", keys)]

    def cached_metas(self, containing: str) -> list[str]:
        """The frontmatter (as JSON) of each cache row whose JSON text holds `containing`."""
        return [row["meta"] for row in
                self.conn.execute("SELECT meta FROM item_files WHERE instr(meta, ?) > 0", (containing,))]

    # rows read ahead by cached_file_and_deps, and every path that read asked for: a prompt reads its
    # item's row and its dependencies' rows in one statement; any write forgets them
    _ahead: tuple[dict[str, Any], frozenset[str]] | None = None

    def cached_file_and_deps(self, path: str) -> dict[str, Any]:
        """The cache rows of `path` and of the items its row names as deps (files beside it), in one
        read; cached_files_for answers from it for any of those paths until the next write."""
        folder = path.rpartition("/")[0]
        folder = f"{folder}/" if folder else ""
        rows = {row["path"]: row for row in self.conn.execute(
            f"SELECT {_CACHE_SELECT} FROM item_files WHERE path = :path OR path IN "
            "(SELECT :folder || value || '.md' FROM json_each((SELECT CASE WHEN json_valid(deps) "
            "THEN deps ELSE '[]' END FROM item_files WHERE path = :path)))", {"path": path, "folder": folder})}
        own = rows.get(path)
        asked = {path}
        if own is not None:
            try:
                asked |= {f"{folder}{dep}.md" for dep in json.loads(own["deps"] or "[]") if isinstance(dep, str)}
            except ValueError:
                pass
        self._ahead = (rows, frozenset(asked))
        return rows

    def cached_files_for(self, paths: list[str]) -> dict[str, Any]:
        if self._ahead is not None and self._ahead[1].issuperset(paths):
            return {path: self._ahead[0][path] for path in paths if path in self._ahead[0]}
        marks = ", ".join("?" for _ in paths)
        return {row["path"]: row for row in
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
        self._ahead = None
        with self.write():
            files = self.db.table("item_files")
            if rows or mtimes or bodies or renewed:
                if self._cache_prefix is None:
                    raise RuntimeError("store_files: cache_under was not called")
                under = self._parsed_under()
                if under is None:
                    self.db.table("item_files_prefix").insert({"prefix": self._cache_prefix})
                elif under != self._cache_prefix:
                    return  # another process took the cache to another prefix: these rows are stale there
            if mtimes or bodies:
                # a part of a row: only a row still here takes it (another process may have dropped
                # one since the read, and an upsert would make a row of that part alone)
                here = self._present([path for _, path in mtimes] + [body[-1] for body in bodies])
                for columns, changes in ((_MTIME_COLUMNS, mtimes), (_BODY_COLUMNS, bodies)):
                    kept = [change for change in changes if change[-1] in here]
                    if kept:
                        files.upsert_all([columns, *kept], pk="path")
            if renewed:
                # a row updated in place costs about a fifth less than one replaced (deleted and
                # inserted again, with its key); one gone since the read (another process
                # dropped it) is inserted
                files.upsert_all([CACHE_COLUMNS, *renewed], pk="path")
            if rows:
                files.insert_all([CACHE_COLUMNS, *rows], replace=True)
                self._meet([row[_ID] for row in rows])
            for at in range(0, len(stale_paths), _IN_CHUNK):
                part = list(stale_paths[at:at + _IN_CHUNK])
                files.delete_where(f"path IN ({', '.join('?' for _ in part)})", part)

    def _present(self, paths: list[str]) -> set[str]:
        """Which of `paths` the cache has a row for."""
        cursor = self.conn.cursor()
        cursor.row_factory = None
        if len(paths) > _IN_CHUNK:  # most of the cache: one pass costs less than a lookup each
            return {path for (path,) in cursor.execute("SELECT path FROM item_files")}.intersection(paths)
        found: set[str] = set()
        for at in range(0, len(paths), _IN_CHUNK):
            part = paths[at:at + _IN_CHUNK]
            found.update(path for (path,) in cursor.execute(
                f"SELECT path FROM item_files WHERE path IN ({', '.join('?' for _ in part)})", part))
        return found

    def _meet(self, ids: list[str]) -> None:
        """Raise the prefix's highest met to the highest of `ids` (cache rows' ids: their files'
        names), within the caller's transaction. Renewed rows need not: their paths had rows."""
        from drover.items.ids import highest_number

        prefix = self._cache_prefix or ""
        met = self.highest_met(prefix)
        highest = highest_number(ids, prefix, met)
        if highest > met:
            self.raise_met(prefix, highest)
