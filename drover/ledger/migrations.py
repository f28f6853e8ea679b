"""The ledger's schema: its named migrations, in order. Ledger._migrate (db.py) applies them,
and nothing else does."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drover.ledger.activity import APPROVED_BEFORE_0012, APPROVING_LEVEL, create_activity_table, renew_activity
from drover.ledger.journal import _intents, _owed_commits
from drover.ledger.pooltable import _pool
from drover.vocabulary import MAX_ITEM_NUMBER

if TYPE_CHECKING:
    import sqlite_utils
    import sqlite_utils.migrations

MIGRATION_SET = "drover"


def _initial(db: "sqlite_utils.Database") -> None:
    db["runs"].create(
        {
            "id": str, "item": str, "slot": str, "agent": str, "argv": str,
            "started": str, "finished": str, "exit_status": int, "outcome": str,
            "pid": int, "log_path": str, "prompt_path": str, "branch": str, "worktree": str,
            "requested_source": str, "resolved_source": str, "base_hashes": str,
            "template_sha256": str, "prompt_sha256": str,
        },
        pk="id",
        not_null={"item", "slot", "agent", "started"},
    )
    db["runs"].create_index(["item", "slot"])
    db["rounds"].create(
        {
            "item": str, "number": int, "digest": str, "headline": str, "path": str,
            "by": str, "at": str, "cleared_at": str, "cleared_by": str,
        },
        pk=("item", "number"),
        not_null={"item", "number", "digest", "at"},
    )
    db["audits"].create(
        {"id": int, "item": str, "level": str, "by": str, "note": str, "at": str, "authors": str},
        pk="id",
        not_null={"item", "level", "at"},
    )
    db["audits"].create_index(["item"])
    db["dispositions"].create(
        {
            "id": int, "item": str, "issue": int, "disposition": str, "by": str,
            "note": str, "at": str, "applied": str,
        },
        pk="id",
        not_null={"item", "issue", "disposition", "at"},
    )
    db["dispositions"].create_index(["item", "issue"])
    db["items"].create(
        {
            "id": str, "number": int, "created_at": str, "done": int, "done_at": str,
            "parked": int, "parked_reason": str, "parked_at": str,
        },
        pk="id",
        defaults={"done": 0, "parked": 0},
    )
    db["items"].create_index(["number"])
    # The metadata cache: what an item file said when it had this size and mtime.
    db["item_files"].create(
        {"path": str, "size": int, "mtime_ns": int, "id": str, "title": str, "kind": str,
         "deps": str, "meta": str, "outstanding": int, "cleared": int, "unreadable": str,
         "detail": str, "line": int},
        pk="path",
    )
    db["events"].create(
        {"id": int, "at": str, "command": str, "item": str, "by": str, "detail": str},
        pk="id",
    )
    db["events"].create_index(["item"])


def _run_pid_start(db: "sqlite_utils.Database") -> None:
    # With the pid alone, a pid the system reused after an agent died would look like a live run.
    db["runs"].add_column("pid_start", str)


def _approval_heads(db: "sqlite_utils.Database") -> None:
    # An approval covers one commit: a review run records the branch head it reviewed, an
    # implementing run the head before and after it, an audit the head it covers.
    db["runs"].add_column("head_start", str)
    db["runs"].add_column("head", str)
    db["audits"].add_column("head", str)


def _run_usage(db: "sqlite_utils.Database") -> None:
    # What a run cost, where the agent CLI reports it (drover/agents/usage.py); NULL when unknown.
    for column, kind in (("model", str), ("input_tokens", int), ("output_tokens", int),
                         ("cost_usd", float), ("tool_calls", int)):
        db["runs"].add_column(column, kind)


def _run_node(db: "sqlite_utils.Database") -> None:
    # Which machine ran each run (executors), and why a run ended that its exit status cannot say.
    db["runs"].add_column("node", str)
    db["runs"].add_column("reason", str)


def _activity(db: "sqlite_utils.Database") -> None:
    # Each item's activity (what its state needs), kept by triggers: list reads one row per item.
    # Approvals as they were then (0012 adds the audits' `opens` and builds the triggers anew).
    create_activity_table(db.execute, APPROVING_LEVEL)


def _item_files_digest(db: "sqlite_utils.Database") -> None:
    # A digest of the file's bytes (drover/ledger/catalogue.py): a file touched but unchanged is not parsed again.
    db["item_files"].add_column("digest", str)


def _item_files_front(db: "sqlite_utils.Database") -> None:
    # A digest of the frontmatter's text (drover/items/parsing.py): a file whose body alone changed is
    # not parsed again for what its frontmatter says.
    db["item_files"].add_column("front", str)


def _item_files_prefix(db: "sqlite_utils.Database") -> None:
    # The project prefix item_files' rows were parsed under (Ledger.cache_under): whether an id is
    # readable depends on it, so rows parsed under another prefix are dropped, not trusted. The
    # rows already cached were parsed under a prefix nobody recorded: they go.
    db.execute("CREATE TABLE item_files_prefix (prefix TEXT PRIMARY KEY NOT NULL)")
    db["item_files"].delete_where()


def _ids_met(db: "sqlite_utils.Database") -> None:
    # The highest number of an id each prefix's item files have had (Ledger.highest_met): an id
    # the cache or `new` met stays taken after its file is gone and the cache has forgotten it;
    # `folder`: the items folder's state when no name in it was higher (Ledger.met), so
    # `new` need not list a folder as it left it.
    db.execute("CREATE TABLE ids_met (prefix TEXT PRIMARY KEY NOT NULL, highest INTEGER NOT NULL, folder TEXT)")
    meet_cached(db)


def _checks(db: "sqlite_utils.Database") -> None:
    # drover's own runs of an item's verify command (verify.py): the branch head it checked, the
    # base commit merged into it for the check, how the command ended, and the end of its output
    # (the whole of it stays in log_path). `finish` asks for a passing one of the approved head.
    db["checks"].create(
        {
            "id": str, "item": str, "head": str, "base": str, "command": str, "exit_status": int,
            "outcome": str, "started": str, "duration": float, "tail": str, "log_path": str, "at": str,
        },
        pk="id",
        not_null={"item", "head", "command", "outcome", "started", "at"},
    )
    db["checks"].create_index(["item", "head"])


def _audit_run(db: "sqlite_utils.Database") -> None:
    # Which run gave each audit ("" the operator outside any run) and whether it opens the gate
    # (activity.opens_gate, decided when it is recorded; docs/security.md). No run was
    # recorded before: each approval keeps the power it had (open_as_before_0012).
    db["audits"].add_column("run", str)
    db["audits"].add_column("opens", int)
    open_as_before_0012(db)
    renew_activity(db.execute)


def open_as_before_0012(db: "sqlite_utils.Database") -> None:
    """An audit recorded before 0012 (or exported before it) opens the gate as it did then: at its level."""
    db.table("audits").convert("level", _opened_before_0012, output="opens", where="opens IS NULL")


def _opened_before_0012(level: str | None) -> int:
    return int(level in APPROVED_BEFORE_0012)


def _item_files_placeholder(db: "sqlite_utils.Database") -> None:
    # Whether an item's requirements are still `drover new`'s placeholder (state `needs
    # requirements`, drover/ledger/catalogue.py). The rows cached before it never read that: they go.
    db["item_files"].add_column("placeholder", int)
    db["item_files"].delete_where()


def _unfinished_runs(db: "sqlite_utils.Database") -> None:
    # Every writing command asks which runs are live (acting.traced_run, up to three times): without
    # this index each ask scans every run, 30 ms at 150,000 runs (50,000 items), with it none.
    db.execute("CREATE INDEX runs_unfinished ON runs (pid) WHERE finished IS NULL")


def _failure_classes(db: "sqlite_utils.Database") -> None:
    # Why a run did not end well (vocabulary.FAILURE_CLASSES; its words stay in `reason`), and when
    # a rate limit the CLI named resets (ISO 8601, UTC).
    db["runs"].add_column("failure", str)
    db["runs"].add_column("reset_at", str)


def _item_files_exact(db: "sqlite_utils.Database") -> None:
    # Whether a cache row's `meta` is the frontmatter exactly (YAML gave only what JSON holds: text
    # keys; strings, numbers, booleans, null, lists, mappings): a prompt then takes it from the
    # cache rather than import the YAML parser. The cache is emptied once, so every row says.
    db["item_files"].add_column("exact", int, not_null_default=0)
    db["item_files"].delete_where()
    db["item_files_prefix"].delete_where()


def _activity_view(db: "sqlite_utils.Database") -> None:
    # The activity triggers read their item's row from one view (activity.ACTIVITY_REFRESH), not
    # each from a copy of its query: a connection's first statement parses the schema, 36 KB of it
    # those copies (activity.py).
    renew_activity(db.execute)


def _item_files_requirements(db: "sqlite_utils.Database") -> None:
    # `placeholder` now also holds for a Requirements section of only whitespace
    # (state `needs requirements`, docs/states.md). The rows cached before it never read that: they go.
    db["item_files"].delete_where()


def _item_files_one_line(db: "sqlite_utils.Database") -> None:
    # A title, a kind and a dep are now read as one line (items.file._line: hostile review 44), and
    # an unreadable item's detail is one line whatever of the file it quotes (its id, a `deps:` that is
    # no list: items.file.Unreadable, hostile review 45), and an issue number in `closes` or `origin`
    # is ASCII digits above 0 and at most 2^53, after one `#` (frontmatter_rules.issue_number), and an
    # id ends at its last digit (a final line break matched `$`: ids.id_pattern). The rows cached
    # before kept the line breaks a file's YAML wrote, and took "²", "0", 23 digits or "D-2\n" as
    # readable: they go.
    db["item_files"].delete_where()


# The highest number among the cache's ids under the prefix they were parsed under, per prefix,
# raised to the highest already met, and no higher than the highest an id drover gives
# (vocabulary.MAX_ITEM_NUMBER).
_CACHED_HIGHEST = (
    "SELECT p.prefix, min(max(coalesce(max(CAST(substr(f.id, length(p.prefix) + 2) AS INTEGER)), 0), "
    "coalesce((SELECT highest FROM ids_met m WHERE m.prefix = p.prefix), 0)), %d) " % MAX_ITEM_NUMBER +
    "FROM item_files f, item_files_prefix p "
    "WHERE substr(f.id, 1, length(p.prefix) + 1) = p.prefix || '-' "
    "AND substr(f.id, length(p.prefix) + 2) GLOB '[1-9]*' "
    "AND substr(f.id, length(p.prefix) + 2) NOT GLOB '*[^0-9]*' "
    "GROUP BY p.prefix"
)


def meet_cached(db: "sqlite_utils.Database") -> None:
    """The cache's ids (under the prefix they were parsed under) raise that prefix's highest met."""
    found = db.execute(_CACHED_HIGHEST).fetchall()
    if found:
        db.table("ids_met").upsert_all([("prefix", "highest"), *(tuple(row) for row in found)], pk="prefix")


# Named migrations, applied in this order by Ledger._migrate and nowhere else. Append only.
MIGRATIONS: tuple[tuple[str, Any], ...] = (
    ("0001_initial", _initial), ("0002_run_pid_start", _run_pid_start),
    ("0003_approval_heads", _approval_heads), ("0004_run_usage", _run_usage),
    ("0005_intents", _intents), ("0006_run_node", _run_node),
    ("0007_activity", _activity), ("0008_item_files_digest", _item_files_digest),
    ("0009_item_files_front", _item_files_front), ("0010_item_files_prefix", _item_files_prefix),
    ("0011_ids_met", _ids_met), ("0012_audit_run", _audit_run), ("0013_checks", _checks),
    ("0014_owed_commits", _owed_commits),
    ("0015_item_files_placeholder", _item_files_placeholder), ("0016_unfinished_runs", _unfinished_runs),
    ("0017_failure_classes", _failure_classes), ("0018_item_files_exact", _item_files_exact),
    ("0019_worktree_pool", _pool), ("0020_activity_view", _activity_view),
    ("0021_item_files_requirements", _item_files_requirements),
    ("0022_item_files_one_line", _item_files_one_line),
)


def migrations() -> "sqlite_utils.migrations.Migrations":
    """The migration set, built on demand: sqlite-utils is imported only when one is pending."""
    from sqlite_utils.migrations import Migrations

    registered = Migrations(MIGRATION_SET)
    for name, function in MIGRATIONS:
        registered(name=name)(function)
    return registered
