"""`drover ledger export` / `import`: the whole ledger as JSON Lines, for backups and moves.

The first line names the format and the schema (the migrations applied, newest last); then one
object per row: {"table": name, "row": {column: value}}. Import loads a file into an empty
ledger, or with merge adds the rows the ledger lacks, keyed by each table's primary key, and
reports rows whose key it has with different values (conflicts: the ledger's row is kept).
This module reads tables by name in SQL and writes their rows through sqlite-utils' table API.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from drover.ledger.activity import create_activity_triggers, drop_activity_triggers, fill_activity
from drover.errors import Refused, UsageError, one_line
from drover.ledger.column_rules import CACHE, SKIPPED, column_rules, columns, tables, value_problem
from drover.ledger.db import Ledger
from drover.ledger.migrations import MIGRATIONS, meet_cached, open_as_before_0012

FORMAT = "drover-ledger"
VERSION = 1
# The highest id each prefix's files have had: a mark that only rises, so an import raises it to
# the higher of the two rather than report a conflict, and it alone does not make a ledger
# non-empty (a ledger that only listed its items has it).
MARKS = ("ids_met",)
# Text drover prints inside a line of its own (`show`, `list`, the drive's lines, a prompt): its
# writes keep it one line (errors.one_line: a park reason, a model's name, a run's reason; a round's
# headline is its findings' first line; a cached title and kind are new's), and an import folds it
# by that same function before the row is compared or loaded (hostile review 27). Folded, not
# refused: a ledger written before hostile review 24 may hold a park reason with its line breaks.
FOLDED = {("items", "parked_reason"), ("runs", "model"), ("runs", "reason"), ("rounds", "headline"),
          ("item_files", "title"), ("item_files", "kind")}


@dataclass(frozen=True)
class Imported:
    added: dict[str, int]
    conflicts: list[str]


# JSON needs only the C0 controls escaped; DEL and C1 (the one-character CSI among them) are
# escaped too, so an export printed to a terminal carries no escape an agent wrote into the ledger.
_C1 = re.compile("[\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def export(ledger: Ledger, out: IO[str]) -> dict[str, int]:
    """Write the header and every row; returns rows written per table. One read transaction,
    so a concurrent writer cannot make the export half old and half new."""
    counts: dict[str, int] = {}
    ledger.conn.execute("BEGIN")
    try:
        names = ledger.applied_migrations()
        out.write(json.dumps({"format": FORMAT, "version": VERSION, "schema": names[-1] if names else "",
                              "migrations": names}) + "\n")
        for table in tables(ledger):
            if table == "_sqlite_migrations":
                continue  # the header states the schema
            # a table rebuilt on import is in its key's order: its rowids are the rebuild's, not the history's
            order = ", ".join(f'"{name}"' for name in columns(ledger, table)[1]) if table in CACHE else "rowid"
            cursor = ledger.conn.execute(f'SELECT * FROM "{table}" ORDER BY {order}')
            counts[table] = 0
            for row in cursor:
                out.write(_C1.sub(_escaped, json.dumps({"table": table, "row": dict(row)}, ensure_ascii=False)) + "\n")
                counts[table] += 1
    finally:
        ledger.conn.execute("COMMIT")
    return counts


class _Repeated(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    made = dict(pairs)
    if len(made) != len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for n, key in enumerate(keys) if key in keys[:n])
        raise _Repeated(f"the key {twice[:40]!r} twice in one object")
    return made


def parse_line(text: str) -> Any:
    """One line of JSON as drover writes it (an export's, an outbox's); else ValueError saying
    what it is instead: not JSON, an object that names a key twice (tools read that differently:
    Python keeps the last, others the first, so what a reader of the file sees need not be what
    is imported), a number of more digits than Python converts, or nesting deeper than the
    parser recurses (each raised a traceback before: hostile review 27)."""
    try:
        return json.loads(text, object_pairs_hook=_unique)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}, column {exc.colno})") from None
    except _Repeated as exc:
        raise ValueError(f"not JSON drover writes ({exc})") from None
    except RecursionError:
        raise ValueError("not JSON drover writes (nested too deeply)") from None
    except ValueError:  # Python's limit on an integer's digits (sys.get_int_max_str_digits)
        raise ValueError("not JSON drover writes (a number of too many digits)") from None


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
                    value = parse_line(line)
                except ValueError as exc:
                    raise UsageError(str(exc), path=path, line=number) from None
                if not isinstance(value, dict):
                    raise UsageError("each line must be a JSON object", path=path, line=number)
                yield number, value
        except UnicodeDecodeError as exc:
            raise UsageError(f"not UTF-8 text ({exc.reason})", path=path) from None


def _header(path: Path, first: tuple[int, dict[str, Any]] | None) -> None:
    if first is None or first[1].get("format") != FORMAT:
        raise UsageError(f"not a drover ledger export (the first line names no {FORMAT!r} format)", path=path, line=1)
    said = first[1].get("migrations", [])
    if not isinstance(said, list) or not all(isinstance(name, str) for name in said):
        raise UsageError("the header's migrations must be a list of migration names", path=path, line=1)
    if first[1].get("version", VERSION) != VERSION:
        raise UsageError(f"a format version this drover does not read (it reads {VERSION})", path=path, line=1)
    known = {name for name, _ in MIGRATIONS}
    newer = [name for name in said if name not in known]
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


class _Loader:
    """Rows waiting to be loaded, per table in the file's order, LOAD_BATCH at a time through
    sqlite-utils' insert_all (an insert each cost three times as long); by key as well, since a
    later line may repeat a waiting row's key."""

    def __init__(self, ledger: Ledger):
        self.ledger = ledger
        self.keys: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.batches: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {}

    def waiting(self, table: str, key: tuple[Any, ...]) -> dict[str, Any] | None:
        return self.keys.get(table, {}).get(key)

    def add(self, table: str, key: tuple[Any, ...], row: dict[str, Any]) -> None:
        batch = self.batches.setdefault(table, [])
        if batch and batch[0][1].keys() != row.keys():
            # one set of columns per batch: a column a row leaves out takes its default, not NULL
            self._load(table, batch)
        self.keys.setdefault(table, {})[key] = row
        batch.append((key, row))
        if len(batch) >= LOAD_BATCH:
            self._load(table, batch)

    def flush(self) -> None:
        for table, batch in self.batches.items():
            self._load(table, batch)

    def _load(self, table: str, batch: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> None:
        self.ledger.db.table(table).insert_all([row for _, row in batch], batch_size=LOAD_BATCH)
        for key, _ in batch:
            del self.keys[table][key]
        batch.clear()


def _folded(table: str, name: str, value: Any) -> Any:
    """A value as an import loads and compares it: one line where its column is FOLDED, the file's
    and this ledger's row's alike (a row written before its column was folded is the same row as
    the file's folded one)."""
    return one_line(value) if (table, name) in FOLDED and isinstance(value, str) else value


# Rows loaded by one insert_all (sqlite-utils splits it below SQLite's variable limit).
LOAD_BATCH = 2000


def import_file(ledger: Ledger, path: Path, merge: bool = False, by: str = "") -> Imported:
    """Load an export; everything in one transaction, so a bad line leaves the ledger as it was. A
    merge that added rows records its `import` event, `by` acting; an import into an empty ledger
    records none: it restores the file's ledger, whose own events it holds, row for row (docs/ledger.md)."""
    lines = _lines(path)
    first = next(lines, None)
    _header(path, first)
    exported_by = first[1].get("migrations") if first else None
    shapes = {table: columns(ledger, table) for table in tables(ledger)}
    rules = column_rules(ledger)
    added: dict[str, int] = {}
    conflicts: list[str] = []
    with ledger.write():
        if not merge and not is_empty(ledger):
            raise Refused(f"{ledger.path.name} already holds rows: import into an empty ledger, "
                          "or pass --merge to add the rows it lacks")
        # the activity table's triggers would recompute an item per row loaded: fill it once instead
        drop_activity_triggers(ledger.conn.execute)
        loader = _Loader(ledger)
        for number, entry in lines:
            table, row = entry.get("table"), entry.get("row")
            if not isinstance(table, str):
                raise UsageError("a line's table must be a table's name", path=path, line=number)
            if table in SKIPPED:
                continue
            if table not in shapes or not isinstance(row, dict):
                raise UsageError(f"no table {table[:40]!r} in this ledger" if table not in shapes
                                 else "a row must be a JSON object", path=path, line=number)
            names, keys = shapes[table]
            unknown = [name for name in row if name not in names]
            if unknown:
                raise UsageError(f"table {table} has no column {unknown[0][:40]!r}", path=path, line=number)
            if any(key not in row for key in keys):
                raise UsageError(f"a {table} row without its key ({', '.join(keys)})", path=path, line=number)
            for name, value in row.items():
                problem = value_problem(rules[table][name], value) if name in rules[table] else ""
                if problem:
                    raise UsageError(f"{table} {name} {problem}", path=path, line=number)
                row[name] = _folded(table, name, value)
            key = tuple(row[name] for name in keys)
            have = loader.waiting(table, key)
            if have is None:
                where = " AND ".join(f'"{name}" IS ?' for name in keys)
                found = ledger.conn.execute(f'SELECT * FROM "{table}" WHERE {where}', key).fetchone()
                have = None if found is None else dict(found)
            if have is not None and table in MARKS:
                ledger.raise_met(row["prefix"], row["highest"])  # this ledger's folder note is kept
                continue
            if have is not None and table in CACHE:
                continue  # this checkout's own parse of its files stands: a cache row is no record to conflict over
            if have is not None:
                if any(_folded(table, name, have.get(name)) != value for name, value in row.items()):
                    said = ", ".join(f"{name} {row[name]}" for name in keys)
                    conflicts.append(f"{path.name}:{number}: {table} {said} differs from this ledger's row (kept)")
                continue
            if table in MARKS:
                ledger.db.table(table).insert(row)  # raise_met reads it from the ledger
            else:
                loader.add(table, key, row)
            added[table] = added.get(table, 0) + 1
        loader.flush()
        if not isinstance(exported_by, list) or "0012_audit_run" not in exported_by:
            open_as_before_0012(ledger.db)  # its approvals open the gate as they did there
        fill_activity(ledger.conn.execute)
        # cache rows from a ledger before migration 0010, or from two under different prefixes,
        # were parsed under no one prefix: they are dropped rather than trusted (Ledger.cache_under)
        (prefixes,) = ledger.conn.execute("SELECT count(*) FROM item_files_prefix").fetchone()
        if prefixes != 1:
            ledger.drop_cache()
        meet_cached(ledger.db)  # an export from before 0011 has the cache's ids but no mark
        if not isinstance(exported_by, list) or "0022_item_files_one_line" not in exported_by:
            # its rows' `placeholder` predates the empty Requirements section (0021), their titles,
            # kinds, deps and unreadable details one line (0022)
            ledger.drop_cache()
        create_activity_triggers(ledger.conn.execute)
        if merge and added:
            ledger.log_event("import", None, by, file=path.name, added=added, conflicts=len(conflicts))
    return Imported(added=added, conflicts=conflicts)
