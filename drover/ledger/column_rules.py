"""What each ledger column may hold: its type as the schema declares it, and drover's rules beyond it
(JSON text, a closed set of words, an item's id, a UTC time, one line, a range). Checked in Python
for a row an import brings (`value_problem`) and in SQL for the rows a ledger holds (`impossible_rows`,
for `drover check`); the tables by name and their keys, as SQLite has them.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from drover.errors import is_one_line
from drover.vocabulary import ANY_ID_PATTERN, DISPOSITIONS, FAILURE_CLASSES, LEVELS, MAX_ITEM_NUMBER, SLOTS
from drover.ledger.db import Ledger

# The schema bookkeeping is the header; pending intents and owed commits are finished when the
# ledger opens and name absolute paths on the machine that wrote them, so they never travel; the
# worktree pool is this machine's folders and processes (drover/ledger/pooltable.py).
SKIPPED = ("_sqlite_migrations", "intents", "owed_commits", "activity", "activity_pending", "worktree_pool")
# The metadata cache is rebuilt from the item files, and the activity table by its triggers as
# the rows load (drover/ledger/activity.py): neither makes a ledger non-empty. Export writes the activity
# rows (every table is in the file) and import skips them, filling the table from what it loaded.
CACHE = ("item_files", "item_files_prefix", "activity")


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
ITEM_COLUMNS = {("runs", "item"), ("audits", "item"), ("rounds", "item"), ("dispositions", "item"),
                ("checks", "item"), ("items", "id")}
_ANY_ID = re.compile(ANY_ID_PATTERN).fullmatch
# Names drover compares as well as prints (who wrote the work, who gave a verdict, where a run
# ran): one line with no control character (errors.is_one_line, the rule a worker's node is held
# to), or the row is refused; folded (as an import folds jsonl.FOLDED's text) they would name
# someone else, an author not the reviewer.
NAMES = {("runs", "agent"), ("runs", "node"), ("audits", "by"), ("rounds", "by"), ("rounds", "cleared_by"),
         ("dispositions", "by")}
# A time drover wrote (connection.now, or a rate limit's reset in seconds): ISO 8601 in UTC. Times
# are compared as text (the newest approval, a run's end), so "x" or "9999" would sort after them all.
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|\+00:00)").fullmatch
INT64 = (-(2**63), 2**63 - 1)
COUNT = (0, math.inf)  # and within SQLite's integers, as every integer
# An item number `new` gives, and the highest an item file's name raises ids_met to, is at most
# MAX_ITEM_NUMBER (vocabulary).
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
