"""`drover ledger export` / `import`: the whole ledger as JSON Lines, for backups and moves.

The first line names the format and the schema (the migrations applied, newest last); then one
object per row: {"table": name, "row": {column: value}}. Import loads a file into an empty
ledger, or with merge adds the rows the ledger lacks, keyed by each table's primary key, and
reports rows whose key it has with different values (conflicts: the ledger's row is kept).
This module reads tables by name in SQL and writes their rows through sqlite-utils' table API.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from drover.ledger.activity import create_activity_triggers, drop_activity_triggers, fill_activity
from drover.errors import Refused, UsageError, is_one_line, one_line
from drover.vocabulary import ANY_ID_PATTERN, DISPOSITIONS, FAILURE_CLASSES, LEVELS, MAX_ITEM_NUMBER, SLOTS
from drover.ledger.db import Ledger
from drover.ledger.migrations import MIGRATIONS, meet_cached, open_as_before_0012

FORMAT = "drover-ledger"
VERSION = 1
# The schema bookkeeping is the header; pending intents and owed commits are finished when the
# ledger opens and name absolute paths on the machine that wrote them, so they never travel; the
# worktree pool is this machine's folders and processes (drover/ledger/pooltable.py).
SKIPPED = ("_sqlite_migrations", "intents", "owed_commits", "activity", "activity_pending", "worktree_pool")
# The metadata cache is rebuilt from the item files, and the activity table by its triggers as
# the rows load (drover/ledger/activity.py): neither makes a ledger non-empty. Export writes the activity
# rows (every table is in the file) and import skips them, filling the table from what it loaded.
CACHE = ("item_files", "item_files_prefix", "activity")
# The highest id each prefix's files have had: a mark that only rises, so an import raises it to
# the higher of the two rather than report a conflict, and it alone does not make a ledger
# non-empty (a ledger that only listed its items has it).
MARKS = ("ids_met",)


# What a value may be beyond its column's declared type (the schema, migrations.py, gives the type
# and NOT NULL): the columns whose text is JSON, with the JSON type it holds (rows.py, catalogue.py
# and the journal decode them; "" is also read as empty), and the columns with a range.
JSON_COLUMNS = {
    ("runs", "argv"): "array", ("runs", "base_hashes"): "object", ("audits", "authors"): "array",
    ("events", "detail"): "object", ("item_files", "deps"): "array", ("item_files", "meta"): "object",
}
# The columns that hold one of drover's closed sets of words (vocabulary.py), and those that hold
# an item's id: drover acts on these words, so an imported row may hold no other.
CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("audits", "level"): LEVELS, ("runs", "slot"): SLOTS, ("runs", "failure"): FAILURE_CLASSES,
    ("dispositions", "disposition"): DISPOSITIONS,
}
# Text drover prints inside a line of its own (`show`, `list`, the drive's lines, a prompt): its
# writes keep it one line (errors.one_line: a park reason, a model's name, a run's reason; a round's
# headline is its findings' first line; a cached title and kind are new's), and an import folds it
# by that same function before the row is compared or loaded (hostile review 27). Folded, not
# refused: a ledger written before hostile review 24 may hold a park reason with its line breaks.
FOLDED = {("items", "parked_reason"), ("runs", "model"), ("runs", "reason"), ("rounds", "headline"),
          ("item_files", "title"), ("item_files", "kind")}
# Names drover compares as well as prints (who wrote the work, who gave a verdict, where a run
# ran): one line with no control character (errors.is_one_line, the rule a worker's node is held
# to), or the row is refused; folded they would name someone else, an author not the reviewer.
NAMES = {("runs", "agent"), ("runs", "node"), ("audits", "by"), ("rounds", "by"), ("rounds", "cleared_by"),
         ("dispositions", "by")}
ITEM_COLUMNS = {("runs", "item"), ("audits", "item"), ("rounds", "item"), ("dispositions", "item"),
                ("checks", "item"), ("items", "id")}
_ANY_ID = re.compile(ANY_ID_PATTERN).fullmatch
# A time drover wrote (connection.now, or a rate limit's reset in seconds): ISO 8601 in UTC. Times
# are compared as text (the newest approval, a run's end), so "x" or "9999" would sort after them all.
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|\+00:00)").fullmatch
INT64 = (-(2**63), 2**63 - 1)
# An item number `new` gives, and the highest an item file's name raises ids_met to, is at most
# MAX_ITEM_NUMBER (vocabulary).
COUNT = (0, math.inf)  # and within SQLite's integers, as every integer
RANGES: dict[tuple[str, str], tuple[float, float]] = {
    ("runs", "pid"): (1, 2**31 - 1), ("runs", "input_tokens"): COUNT, ("runs", "output_tokens"): COUNT,
    ("runs", "tool_calls"): COUNT, ("runs", "cost_usd"): (0, math.inf),
    ("rounds", "number"): (1, math.inf), ("dispositions", "issue"): (1, math.inf),
    ("items", "number"): (1, MAX_ITEM_NUMBER), ("items", "done"): (0, 1), ("items", "parked"): (0, 1),
    ("ids_met", "highest"): (0, MAX_ITEM_NUMBER), ("item_files", "size"): COUNT,
}


@dataclass(frozen=True)
class Column:
    """What one column may hold: its type as SQLite stores it, whether null is allowed, and more."""

    table: str
    name: str
    kind: str  # "text", "integer" or "real" (integers are taken too); "" for any
    required: bool  # NOT NULL or part of the key
    json: str  # "array", "object" or ""
    least: float
    most: float
    choices: tuple[str, ...] = ()  # the words it may hold; () for any
    item_id: bool = False  # it holds an item's id
    time: bool = False  # it holds a UTC time (connection.now), which drover orders as text
    compared: bool = False  # it holds a name drover compares: one line, no control character (NAMES)


def _holds_time(name: str) -> bool:
    """A column of drover's times, by the names it gives them (`at`, `started`, `finished`, `*_at`)."""
    return name in ("at", "started", "finished") or name.endswith("_at")


def _kind(declared: str) -> str:
    """SQLite's type affinity of a declared column type (https://sqlite.org/datatype3.html 3.1)."""
    declared = declared.upper()
    if "INT" in declared:
        return "integer"
    if any(word in declared for word in ("CHAR", "CLOB", "TEXT")):
        return "text"
    if any(word in declared for word in ("REAL", "FLOA", "DOUB")):
        return "real"
    return ""


def column_rules(ledger: Ledger) -> dict[str, dict[str, Column]]:
    """Every table's columns and what each may hold, from the schema itself plus JSON_COLUMNS and RANGES."""
    rules: dict[str, dict[str, Column]] = {}
    for table in tables(ledger):
        rules[table] = {}
        for info in ledger.conn.execute(f'PRAGMA table_info("{table}")'):
            name, kind = info["name"], _kind(info["type"] or "")
            least, most = RANGES.get((table, name), INT64 if kind == "integer" else (-math.inf, math.inf))
            rules[table][name] = Column(table, name, kind, bool(info["notnull"] or info["pk"]),
                                        JSON_COLUMNS.get((table, name), ""), least, most,
                                        CHOICES.get((table, name), ()), (table, name) in ITEM_COLUMNS,
                                        _holds_time(name) and table not in CACHE, (table, name) in NAMES)
    return rules


_JSON_TYPES = {"array": list, "object": dict}


def value_problem(column: Column, value: Any) -> str:
    """What is impossible about `value` in `column` ("" when nothing is): the Python side of
    impossible_sql, for rows that have not reached the ledger yet."""
    if value is None:
        return "must not be null" if column.required else ""
    if column.kind == "text" and not isinstance(value, str):
        return f"must be text, not {json.dumps(value)[:40]}"
    if column.kind == "integer" and type(value) is not int:
        return f"must be a whole number, not {json.dumps(value)[:40]}"
    if type(value) is int and not INT64[0] <= value <= INT64[1]:
        return f"{value} is beyond SQLite's 64-bit integers"
    if column.kind == "real" and (type(value) not in (int, float) or not math.isfinite(value)):
        return f"must be a number, not {json.dumps(value)[:40]}"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must be UTF-8 text (it holds a lone surrogate)"
        if column.choices and value not in column.choices:
            return f"must be one of {', '.join(column.choices)}, not {json.dumps(value)[:40]}"
        if column.item_id and not _ANY_ID(value):
            return f"must be an item id (PREFIX-NUMBER), not {json.dumps(value)[:40]}"
        if column.compared and not is_one_line(value):
            return f"must be one line with no control character, not {json.dumps(value)[:40]}"
        if column.time and not _TIME(value):
            return f"must be a UTC time (2026-01-31T09:30:00.000Z), not {json.dumps(value)[:40]}"
        if column.json and value:
            try:
                decoded = json.loads(value)
            except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser recurses
                return f"must be JSON text (an {column.json})"
            if not isinstance(decoded, _JSON_TYPES[column.json]):
                return f"must be JSON text of an {column.json}"
    if type(value) in (int, float) and not column.least <= value <= column.most:
        return f"{value} is out of range: {_range(column)}"
    return ""


def _range(column: Column) -> str:
    least, most = (str(int(bound)) if math.isfinite(bound) else "" for bound in (column.least, column.most))
    return f"it must be {least} or more" if column.most == math.inf else f"it must be from {least} to {most}"


_TYPEOF = {"text": "'text'", "integer": "'integer'", "real": "'real', 'integer'"}


def impossible_sql(column: Column) -> str:
    """An SQL expression over `column`'s table: NULL when its value is possible, else what is wrong."""
    name = f'"{column.name}"'
    cases = []
    if column.kind:
        cases.append(f"WHEN typeof({name}) NOT IN ({_TYPEOF[column.kind]}, 'null') "
                     f"THEN 'holds ' || typeof({name}) || ', not {column.kind}'")
    if column.json:
        cases.append(f"WHEN typeof({name}) = 'text' AND {name} != '' AND NOT (json_valid({name}) "
                     f"AND json_type({name}) = '{column.json}') THEN 'is not JSON text of an {column.json}'")
    bounds = [f"{name} {test} {bound!r}" for test, bound in (("<", column.least), (">", column.most))
              if math.isfinite(bound) and not (column.kind == "integer" and bound in INT64)]
    if bounds:
        cases.append(f"WHEN typeof({name}) IN ('integer', 'real') AND ({' OR '.join(bounds)}) "
                     f"THEN 'is ' || {name} || ', out of range: {_range(column)}'")
    return f"CASE {' '.join(cases)} END" if cases else "NULL"


# Written for people and for export, never read back by drover: an odd value there breaks nothing.
UNREAD = ("events",)


def impossible_rows(ledger: Ledger, limit: int = 20) -> list[str]:
    """Ledger rows whose values no drover writes (a string pid, argv that is not JSON, a negative
    token count, an ids_met mark beyond any id): `table key: column what`, at most `limit` per table.

    The cheap part of value_problem's rules, one scan per table: the tables drover reads as its
    record (not the cache, rebuilt from the files, nor UNREAD), and the columns whose values
    drover computes with or decodes. A plain text column is left out: its affinity stores a
    number written into it as text, so it holds text or a blob, and a blob reads as bytes.
    """
    found = []
    for table, rules in column_rules(ledger).items():
        if table in SKIPPED or table in CACHE or table in UNREAD:
            continue
        checks = [(name, impossible_sql(column)) for name, column in rules.items()
                  if column.kind != "text" or column.json]
        checks = [(name, sql) for name, sql in checks if sql != "NULL"]
        if not checks:
            continue
        _, keys = columns(ledger, table)
        key = " || ' ' || ".join(f'quote("{name}")' for name in keys)
        said = ", ".join(sql for _, sql in checks)
        where = " OR ".join(f"({sql}) IS NOT NULL" for _, sql in checks)
        for shown, *said_of in ledger.conn.execute(f'SELECT {key}, {said} FROM "{table}" WHERE {where} LIMIT {limit}'):
            for (name, _), what in zip(checks, said_of):
                if what is not None:
                    found.append(f"{table} {shown}: {name} {what}")
    return found


@dataclass(frozen=True)
class Imported:
    added: dict[str, int]
    conflicts: list[str]


def tables(ledger: Ledger) -> list[str]:
    rows = ledger.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [row["name"] for row in rows]


def columns(ledger: Ledger, table: str) -> tuple[list[str], list[str]]:
    """(every column, the primary-key columns) of a table."""
    info = ledger.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    names = [row["name"] for row in info]
    keys = [row["name"] for row in sorted(info, key=lambda row: row["pk"]) if row["pk"]]
    return names, keys or ["rowid"]


def applied(ledger: Ledger) -> list[str]:
    rows = ledger.conn.execute(
        "SELECT name FROM _sqlite_migrations WHERE migration_set = 'drover' ORDER BY id"
    ).fetchall()
    return [row["name"] for row in rows]


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
        names = applied(ledger)
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


def import_file(ledger: Ledger, path: Path, merge: bool = False) -> Imported:
    """Load an export; everything in one transaction, so a bad line leaves the ledger as it was."""
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
        if not isinstance(exported_by, list) or "0021_item_files_requirements" not in exported_by:
            ledger.drop_cache()  # its rows' `placeholder` predates the empty Requirements section
        create_activity_triggers(ledger.conn.execute)
    return Imported(added=added, conflicts=conflicts)
