"""`drover ledger export` / `import`: the whole ledger as JSON Lines, for backups and moves.

The first line names the format and the schema (the migrations applied, newest last); then one
object per row: {"table": name, "row": {column: value}}. Import loads a file into an empty
ledger, or with merge adds the rows the ledger lacks, keyed by each table's primary key, and
reports rows whose key it has with different values (conflicts: the ledger's row is kept).
This module reads and writes tables by name, so it is the one place besides ledger.py with SQL.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from .activity import create_activity_triggers, drop_activity_triggers, fill_activity
from .errors import Refused, UsageError
from .ledger import Ledger
from .migrations import MEET_CACHED, MIGRATIONS, OPENED_BEFORE_0012

FORMAT = "drover-ledger"
VERSION = 1
# The schema bookkeeping is the header; pending intents are finished when the ledger opens and
# name absolute paths on the machine that wrote them, so they never travel.
SKIPPED = ("_sqlite_migrations", "intents", "activity")
# The metadata cache is rebuilt from the item files, and the activity table by its triggers as
# the rows load (drover/activity.py): neither makes a ledger non-empty. Export writes the activity
# rows (every table is in the file) and import skips them, filling the table from what it loaded.
CACHE = ("item_files", "item_files_prefix", "activity")
# The highest id each prefix's files have had: a mark that only rises, so an import raises it to
# the higher of the two rather than report a conflict, and it alone does not make a ledger
# non-empty (a ledger that only listed its items has it).
MARKS = ("ids_met",)


@dataclass(frozen=True)
class Imported:
    added: dict[str, int]
    conflicts: list[str]


def tables(ledger: Ledger) -> list[str]:
    rows = ledger.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [row[0] for row in rows]


def columns(ledger: Ledger, table: str) -> tuple[list[str], list[str]]:
    """(every column, the primary-key columns) of a table."""
    info = ledger.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    names = [row[1] for row in info]
    keys = [row[1] for row in sorted(info, key=lambda row: row[5]) if row[5]]
    return names, keys or ["rowid"]


def applied(ledger: Ledger) -> list[str]:
    rows = ledger.conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = 'drover' ORDER BY id"
    ).fetchall()
    return [row[0] for row in rows]


def export(ledger: Ledger, out: IO[str]) -> dict[str, int]:
    """Write the header and every row; returns rows written per table. One read transaction,
    so a concurrent writer cannot make the export half old and half new."""
    counts: dict[str, int] = {}
    ledger.conn.execute("BEGIN")
    try:
        names = applied(ledger)
        out.write(json.dumps({"format": FORMAT, "version": VERSION, "schema": names[-1] if names else "",
                              "migrations": names}) + "\n")
        for table in tables(ledger):
            if table == "_sqlite_migrations":
                continue  # the header states the schema
            cursor = ledger.conn.execute(f'SELECT * FROM "{table}" ORDER BY rowid')
            counts[table] = 0
            for row in cursor:
                out.write(json.dumps({"table": table, "row": dict(row)}, ensure_ascii=False) + "\n")
                counts[table] += 1
    finally:
        ledger.conn.execute("COMMIT")
    return counts


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read: {exc.strerror}", path=path) from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"not JSON ({exc.msg})", path=path, line=number) from None
                if not isinstance(value, dict):
                    raise UsageError("each line must be a JSON object", path=path, line=number)
                yield number, value
        except UnicodeDecodeError as exc:
            raise UsageError(f"not UTF-8 text ({exc.reason})", path=path) from None


def _header(path: Path, first: tuple[int, dict[str, Any]] | None) -> None:
    if first is None or first[1].get("format") != FORMAT:
        raise UsageError(f"not a drover ledger export (the first line names no {FORMAT!r} format)", path=path, line=1)
    known = {name for name, _ in MIGRATIONS}
    newer = [name for name in first[1].get("migrations", []) if name not in known]
    if newer:
        raise UsageError(f"exported by a newer drover (migration {newer[-1]}): upgrade drover to import it",
                         path=path, line=1)


def is_empty(ledger: Ledger) -> bool:
    for table in tables(ledger):
        if table in SKIPPED or table in CACHE or table in MARKS:
            continue
        if ledger.conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone():
            return False
    return True


def import_file(ledger: Ledger, path: Path, merge: bool = False) -> Imported:
    """Load an export; everything in one transaction, so a bad line leaves the ledger as it was."""
    lines = _lines(path)
    first = next(lines, None)
    _header(path, first)
    exported_by = first[1].get("migrations") if first else None
    shapes = {table: columns(ledger, table) for table in tables(ledger)}
    added: dict[str, int] = {}
    conflicts: list[str] = []
    with ledger.write():
        if not merge and not is_empty(ledger):
            raise Refused(f"{ledger.path.name} already holds rows: import into an empty ledger, "
                          "or pass --merge to add the rows it lacks")
        # the activity table's triggers would recompute an item per row loaded: fill it once instead
        drop_activity_triggers(ledger.conn.execute)
        for number, entry in lines:
            table, row = entry.get("table"), entry.get("row")
            if table in SKIPPED:
                continue
            if table not in shapes or not isinstance(row, dict):
                raise UsageError(f"no table {table!r} in this ledger" if table not in shapes
                                 else "a row must be a JSON object", path=path, line=number)
            names, keys = shapes[table]
            unknown = [name for name in row if name not in names]
            if unknown:
                raise UsageError(f"table {table} has no column {unknown[0]!r}", path=path, line=number)
            if any(key not in row for key in keys):
                raise UsageError(f"a {table} row without its key ({', '.join(keys)})", path=path, line=number)
            if table in MARKS and (type(row.get("highest")) is not int or row["highest"] < 0):
                raise UsageError(f"{table} highest must be a whole number", path=path, line=number)
            where = " AND ".join(f'"{key}" IS ?' for key in keys)
            have = ledger.conn.execute(f'SELECT * FROM "{table}" WHERE {where}', [row[k] for k in keys]).fetchone()
            if have is not None and table in MARKS:
                ledger.raise_met(row["prefix"], row["highest"])  # this ledger's folder note is kept
                continue
            if have is not None:
                mine = dict(have)
                if any(mine.get(name) != value for name, value in row.items()):
                    said = ", ".join(f"{key} {row[key]}" for key in keys)
                    conflicts.append(f"{path.name}:{number}: {table} {said} differs from this ledger's row (kept)")
                continue
            marks = ", ".join("?" for _ in row)
            quoted = ", ".join(f'"{name}"' for name in row)
            ledger.conn.execute(f'INSERT INTO "{table}" ({quoted}) VALUES ({marks})', list(row.values()))
            added[table] = added.get(table, 0) + 1
        if not isinstance(exported_by, list) or "0012_audit_run" not in exported_by:
            ledger.conn.execute(OPENED_BEFORE_0012)  # its approvals open the gate as they did there
        fill_activity(ledger.conn.execute)
        # cache rows from a ledger before migration 0010, or from two under different prefixes,
        # were parsed under no one prefix: they are dropped rather than trusted (Ledger.cache_under)
        if ledger.conn.execute("SELECT count(*) FROM item_files_prefix").fetchone()[0] != 1:
            ledger.drop_cache()
        ledger.conn.execute(MEET_CACHED)  # an export from before 0011 has the cache's ids but no mark
        create_activity_triggers(ledger.conn.execute)
    return Imported(added=added, conflicts=conflicts)
