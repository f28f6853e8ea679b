"""An item's activity (what its state needs from the ledger), and the table that keeps it.

The ledger's `activity` table holds, per item with runs, rounds or audits, the row
Ledger.activity_for computes: migration 0007 fills it and SQLite triggers recompute an item's
row with that same query whenever one of its runs, rounds or audits is written, so `list` reads
one row per item instead of every run (500,000 rows at 50,000 items). ActivityRow is one such
row, read with get() and [] as activity_for's dict is.

An approval is an audit that opens the gate: `opens_gate` decides it once, when the audit is
recorded, and every query reads what it decided (OPENS_GATE); see docs/security.md.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drover.ledger.connection import Connection
from drover.vocabulary import APPROVING_LEVELS

if TYPE_CHECKING:
    from drover.ledger.rows import Run


def opens_gate(item_id: str, level: str, run: str, acting: "Run | None", by: str, authors: list[str],
               require_independent: bool) -> bool:
    """Whether an audit opens the gate: the one definition, stored on the audit as `opens` (gate_shut)."""
    return not gate_shut(item_id, level, run, acting, by, authors, require_independent)


def gate_shut(item_id: str, level: str, run: str, acting: "Run | None", by: str, authors: list[str],
              require_independent: bool) -> str:
    """Why an audit does not open the gate, "" when it does.

    It does at `reviewed` or above, given by a review run of this item (`run`, whose row is
    `acting`) or by the operator outside any run (`run` ""); with `[review] require_independent`,
    also not by one of the item's `authors` (a Weak approval). An implementing or draft run's
    audit, or one in a run the ledger does not know, is recorded and opens nothing.
    """
    if level not in APPROVING_LEVELS:
        return f"a {level} audit approves nothing"
    if run and acting is None:
        return f"run {run!r} is no run in this ledger"
    if acting is not None and (acting.slot != "review" or acting.item != item_id):
        return (f"it was given in {acting.slot} run {acting.id} of {acting.item}; only a review run of "
                f"{item_id}, or the operator outside any run, approves")
    if require_independent and by in authors:
        return f"{by} is one of the item's authors and [review] require_independent is true"
    return ""


# The audits that open the gate, as SQL over an audits row aliased `a` (what opens_gate decided).
OPENS_GATE = "a.opens = 1"
# What approved before migration 0012 recorded `opens`: 0007 builds the table with it, as it did.
APPROVED_BEFORE_0012 = ("reviewed", "verified")
APPROVING_LEVEL = f"a.level IN ({', '.join(repr(level) for level in APPROVED_BEFORE_0012)})"

# the columns of the newest implementing run, each an activity key as last_<column>
LAST_RUN_COLUMNS = ("id", "started", "finished", "outcome", "exit_status", "pid", "pid_start", "head_start", "head")
ACTIVITY_KEYS = ("item", "implement_runs", "implement_finished", "branch", "newest_round", "newest_approval",
                  *(f"last_{col}" for col in LAST_RUN_COLUMNS), "approval_at", "approval_head", "approval_level", "approval_by")
_AT = {key: at for at, key in enumerate(ACTIVITY_KEYS)}
# what an item's state reads of its row (Ledger.list_activity's columns, in this order)
LIST_KEYS = ("item", "branch", "newest_round", "last_id", "last_started", "last_finished", "last_outcome",
             "last_exit_status", "approval_at", "approval_head")
# every item activity_for answers for: in items, runs or rounds (an audit alone does not list one)
ACTIVITY_IDS = "SELECT id FROM items UNION SELECT item FROM runs UNION SELECT item FROM rounds"
# the items the activity table has a row for: those with runs, rounds or audits
_SOURCES = ("runs", "rounds", "audits")
ACTIVE_IDS = " UNION ".join(f"SELECT item AS id FROM {table}" for table in _SOURCES)


def activity_sql(ids: str = ACTIVITY_IDS, approval: str = OPENS_GATE) -> str:
    """activity_for's query: one row per id of `ids` (a query of one column), columns ACTIVITY_KEYS;
    `approval`: which audits approve (OPENS_GATE but in migration 0007)."""
    last_run = ("(SELECT r.{col} FROM runs r WHERE r.item = i.id AND r.slot = 'implement' "
                "ORDER BY r.started DESC, r.rowid DESC LIMIT 1) AS last_{col}")
    newest = ("(SELECT a.{col} FROM audits a WHERE a.item = i.id AND {approval} "
              "ORDER BY a.at DESC, a.id DESC LIMIT 1) AS approval_{col}")
    columns = [last_run.format(col=col) for col in LAST_RUN_COLUMNS]
    columns += [newest.format(col=col, approval=approval) for col in ("at", "head", "level", "by")]
    return f"""
    SELECT i.id AS item,
      (SELECT count(*) FROM runs r WHERE r.item = i.id AND r.slot = 'implement') AS implement_runs,
      (SELECT max(finished) FROM runs r WHERE r.item = i.id AND r.slot = 'implement') AS implement_finished,
      (SELECT r.branch FROM runs r WHERE r.item = i.id AND r.slot = 'implement' AND r.branch != ''
         ORDER BY r.started DESC, r.rowid DESC LIMIT 1) AS branch,
      (SELECT max(at) FROM rounds o WHERE o.item = i.id) AS newest_round,
      (SELECT max(at) FROM audits a WHERE a.item = i.id AND {approval}) AS newest_approval,
      {", ".join(columns)}
    FROM ({ids}) i
    """


def _listed(item: str) -> str:
    # whether activity_for's id set has the item for its runs or rounds (its items row aside)
    return f"(EXISTS (SELECT 1 FROM runs WHERE item = {item}) OR EXISTS (SELECT 1 FROM rounds WHERE item = {item}))"


def _fill(ids: str, approval: str = OPENS_GATE) -> str:
    # no column types: the rows keep each value as the runs, rounds and audits tables hold it
    return (f"INSERT OR REPLACE INTO activity ({', '.join(ACTIVITY_KEYS)}, listed) "
            f"SELECT s.*, {_listed('s.item')} FROM ({activity_sql(ids, approval)}) s")


# The item a trigger recomputes is named in ACTIVITY_PENDING, and its row read from the view
# ACTIVITY_REFRESH: the query is in the schema once. Written out in each of nine triggers (migrations
# 0007-0019), it was 36 KB of SQL that every connection parsed at its first statement, about 5 ms
# of every drover process, and that every ALTER TABLE checked again.
ACTIVITY_PENDING, ACTIVITY_REFRESH = "activity_pending", "activity_refresh"
_COLUMNS = ", ".join((*ACTIVITY_KEYS, "listed"))


def _refresh(item: str) -> str:
    # the row goes with the item's last run, round and audit: the table holds exactly ACTIVE_IDS
    has = " OR ".join(f"EXISTS (SELECT 1 FROM {table} WHERE item = {item})" for table in _SOURCES)
    return (f"DELETE FROM activity WHERE item = {item}; "
            f"INSERT INTO {ACTIVITY_PENDING} (id) SELECT {item} WHERE {has}; "
            f"INSERT OR REPLACE INTO activity ({_COLUMNS}) SELECT {_COLUMNS} FROM {ACTIVITY_REFRESH}; "
            f"DELETE FROM {ACTIVITY_PENDING};")


def create_activity_table(execute: Any, approval: str = OPENS_GATE) -> None:
    """The activity table, its triggers and its rows for the ledger as it stands (migration 0007)."""
    execute(f"CREATE TABLE activity ({', '.join(ACTIVITY_KEYS)}, listed, PRIMARY KEY (item))")
    create_activity_triggers(execute, approval)
    fill_activity(execute, approval)


def create_activity_triggers(execute: Any, approval: str = OPENS_GATE) -> None:
    execute(f"CREATE TABLE IF NOT EXISTS {ACTIVITY_PENDING} (id PRIMARY KEY)")
    execute(f"CREATE VIEW {ACTIVITY_REFRESH} AS SELECT s.*, {_listed('s.item')} AS listed "
            f"FROM ({activity_sql(f'SELECT id FROM {ACTIVITY_PENDING}', approval)}) s")
    for table in _SOURCES:
        execute(f"CREATE TRIGGER activity_{table}_insert AFTER INSERT ON {table} BEGIN {_refresh('NEW.item')} END")
        execute(f"CREATE TRIGGER activity_{table}_delete AFTER DELETE ON {table} BEGIN {_refresh('OLD.item')} END")
        execute(f"CREATE TRIGGER activity_{table}_update AFTER UPDATE ON {table} BEGIN "
                f"{_refresh('OLD.item')} {_refresh('NEW.item')} END")


def drop_activity_triggers(execute: Any) -> None:
    """For a bulk load (ledger import): then fill_activity and create_activity_triggers, in its transaction."""
    for table in _SOURCES:
        for event in ("insert", "delete", "update"):
            execute(f"DROP TRIGGER IF EXISTS activity_{table}_{event}")
    execute(f"DROP VIEW IF EXISTS {ACTIVITY_REFRESH}")


def fill_activity(execute: Any, approval: str = OPENS_GATE) -> None:
    """Every item's row, computed afresh."""
    execute("DELETE FROM activity")
    execute(_fill(ACTIVE_IDS, approval))


def renew_activity(execute: Any) -> None:
    """The triggers and rows again, with what approves now (migrations 0012 and 0020)."""
    drop_activity_triggers(execute)
    create_activity_triggers(execute)
    fill_activity(execute)


class ActivityRow:
    """One item's row of the activity table, read with get() and [] as activity_for's dict is."""

    __slots__ = ("values",)
    values: tuple[Any, ...]

    def __init__(self, values: tuple[Any, ...]):
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        at = _AT.get(key)
        return default if at is None else self.values[at]

    def __getitem__(self, key: str) -> Any:
        return self.values[_AT[key]]

    def keys(self) -> tuple[str, ...]:
        return ACTIVITY_KEYS


def no_activity(item: str) -> ActivityRow:
    """activity_for's row for an item with no runs, rounds or audits."""
    return ActivityRow((item, 0, *(None for _ in ACTIVITY_KEYS[2:])))


_ACTIVITY_SELECT = ", ".join(ACTIVITY_KEYS)


class ActivityReads(Connection):
    """The ledger's reads of the activity table: one row per item rather than every run."""

    def activity(self, *, done: bool = True) -> dict[str, ActivityRow]:
        """Per item, what its state needs: the last implementing run, newest round, newest approval.

        activity_for's row for every item in items, runs or rounds (done=False: but done items,
        whose state needs none of it), read from the activity table its triggers keep.
        """
        cursor = self.conn.cursor()
        cursor.row_factory = None  # plain tuples: cheaper than sqlite3.Row
        also = "" if done else " WHERE item NOT IN (SELECT id FROM items WHERE done)"
        ids = {row[0] for row in cursor.execute("SELECT id FROM items" + ("" if done else " WHERE NOT done"))}
        # each row is (*ACTIVITY_KEYS, listed): the item first
        found = {row[0]: ActivityRow(row[:-1]) for row in
                 cursor.execute(f"SELECT {_ACTIVITY_SELECT}, listed FROM activity{also}") if row[-1] or row[0] in ids}
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

    def activity_for(self, item_id: str) -> dict[str, Any]:
        """One item's activity row (as activity() has it), without scanning every item."""
        return self._rows(activity_sql("SELECT ? AS id"), (item_id,))[0]
