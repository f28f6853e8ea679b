"""The SQLite ledger: WAL, busy timeout, migrations applied once in one place, transactions,
the metadata cache, and concurrent writers in real processes."""
from __future__ import annotations

import multiprocessing
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlite_utils

from helpers import ledger_tables
from drover.ledger import db as ledger_module
from drover.config import Config
from drover.ledger.activity import ACTIVITY_KEYS
from drover.ledger.connection import BUSY_TIMEOUT_MS
from drover.ledger.db import Ledger
from drover.ledger.runtable import _usage
from drover.ledger.migrations import MIGRATIONS, migrations
from drover.ledger.project import Project
from drover.ledger.rows import NewRun
from drover.ledger.catalogue import catalogue

# Every table and column a blank ledger gets. A new migration changes this on purpose.
EXPECTED_COLUMNS = {
    "_sqlite_migrations": ["id", "migration_set", "name", "applied_at"],
    "runs": ["id", "item", "slot", "agent", "argv", "started", "finished", "exit_status", "outcome",
             "pid", "log_path", "prompt_path", "branch", "worktree", "requested_source",
             "resolved_source", "base_hashes", "template_sha256", "prompt_sha256", "pid_start",
             "head_start", "head", "model", "input_tokens", "output_tokens", "cost_usd", "tool_calls", "node", "reason", "failure", "reset_at"],
    "rounds": ["item", "number", "digest", "headline", "path", "by", "at", "cleared_at", "cleared_by"],
    "audits": ["id", "item", "level", "by", "note", "at", "authors", "head", "run", "opens"],
    "dispositions": ["id", "item", "issue", "disposition", "by", "note", "at", "applied"],
    "items": ["id", "number", "created_at", "done", "done_at", "parked", "parked_reason", "parked_at"],
    "item_files": ["path", "size", "mtime_ns", "id", "title", "kind", "deps", "meta", "outstanding",
                   "cleared", "unreadable", "detail", "line", "digest", "front", "placeholder", "exact"],
    "item_files_prefix": ["prefix"],
    "ids_met": ["prefix", "highest", "folder"],
    "events": ["id", "at", "command", "item", "by", "detail"],
    "checks": ["id", "item", "head", "base", "command", "exit_status", "outcome", "started", "duration", "tail",
               "log_path", "at"],
}
EXPECTED_COLUMNS["intents"] = ["id", "command", "item", "path", "text", "old_sha256", "at"]
EXPECTED_COLUMNS["owed_commits"] = ["id", "item", "root", "path", "text", "message", "at", "failed"]
EXPECTED_COLUMNS["activity"] = [*ACTIVITY_KEYS, "listed"]
EXPECTED_COLUMNS["activity_pending"] = ["id"]  # the item a trigger recomputes, empty between writes
EXPECTED_COLUMNS["worktree_pool"] = ["path", "holder", "state", "pid", "pid_start", "created", "used", "setup_at",
                                     "setup_digest"]


def schema(path: Path) -> dict[str, list[str]]:
    db = sqlite_utils.Database(path)
    try:
        return {table.name: [column.name for column in table.columns] for table in db.tables}
    finally:
        db.close()


dump = ledger_tables


@pytest.fixture
def ledger(tmp_path):
    opened = Ledger(tmp_path / ".drover" / "ledger.db")
    yield opened
    opened.close()


# --- opening and migrations -------------------------------------------------------------------


def test_a_blank_ledger_gets_every_table_and_column(tmp_path):
    path = tmp_path / ".drover" / "ledger.db"
    Ledger(path).close()
    assert schema(path) == EXPECTED_COLUMNS


def test_migrations_are_recorded_by_name_and_applying_twice_is_a_no_op(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    first = dump(path)
    names = [row[2] for row in sorted(first["_sqlite_migrations"])]  # by id: 10 after 9
    assert names == [name for name, _ in MIGRATIONS]
    assert "0001_initial" in names
    assert all(row[1] == "drover" for row in first["_sqlite_migrations"])
    with Ledger(path) as again:
        assert migrations().pending(again.db) == []
        migrations().apply(again.db)  # explicitly, too: still nothing to do
    assert dump(path) == first
    assert schema(path) == EXPECTED_COLUMNS


def test_a_ledger_from_before_a_migration_is_upgraded_with_its_rows(tmp_path):
    import sqlite_utils

    path = tmp_path / "ledger.db"
    old = sqlite_utils.Database(path)
    migrations().apply(old, stop_before="0002_run_pid_start")  # the schema as 0.1 first shipped it
    old["runs"].insert({"id": "r1", "item": "D-1", "slot": "implement", "agent": "claude",
                        "started": "2026-01-01T00:00:00.000Z", "pid": 4242})
    old.conn.close()
    assert "pid_start" not in schema(path)["runs"]
    with Ledger(path) as upgraded:
        (run,) = upgraded.runs("D-1")
        assert run.pid == 4242 and run.pid_start is None
    assert schema(path) == EXPECTED_COLUMNS
    assert [row[2] for row in sorted(dump(path)["_sqlite_migrations"])] == [name for name, _ in MIGRATIONS]


def test_cache_rows_from_before_the_prefix_was_recorded_are_dropped(tmp_path):
    """Rows cached before migration 0010 were parsed under a prefix nobody wrote down: the upgrade
    drops them, and the next catalogue parses the files again."""
    import sqlite_utils

    project = _project(tmp_path)
    _item(project, "D-1", "one")
    project.ledger_path.parent.mkdir()
    old = sqlite_utils.Database(project.ledger_path)
    migrations().apply(old, stop_before="0010_item_files_prefix")
    old["item_files"].insert({"path": "items/D-1.md", "size": 1, "mtime_ns": 1, "id": "D-1", "title": "stale"})
    old["items"].insert({"id": "D-1", "number": 1, "created_at": "2026-01-01T00:00:00.000Z"})
    old.conn.close()
    with Ledger(project.ledger_path) as upgraded:
        assert upgraded.cached_files() == {} and upgraded.has_item("D-1")
        assert catalogue(project, upgraded)["D-1"].title == "one"
    assert dump(project.ledger_path)["item_files_prefix"] == [("D",)]


def test_the_ids_a_cache_met_before_0011_stay_taken(tmp_path):
    """The upgrade that keeps the highest id met takes it from the rows cached before it, under
    the prefix they were parsed under: those ids stay taken once the cache drops the rows."""
    import sqlite_utils

    project = _project(tmp_path)
    project.ledger_path.parent.mkdir()
    old = sqlite_utils.Database(project.ledger_path)
    migrations().apply(old, stop_before="0011_ids_met")
    old["item_files_prefix"].insert({"prefix": "D"})
    for item_id in ("D-7", "D-30", "D-030", "D-9x", "E-500", "D-4"):
        old["item_files"].insert({"path": f"items/{item_id}.md", "size": 1, "mtime_ns": 1, "id": item_id})
    old.conn.close()
    with Ledger(project.ledger_path) as upgraded:
        assert upgraded.highest_met("D") == 30 and upgraded.highest_met("E") == 0
        upgraded.drop_cache()
        assert upgraded.next_item_id("D", 0) == "D-31"


def test_a_reused_pid_is_not_a_live_run():

    from drover.agents.procs import process_start, run_alive
    from drover.ledger.rows import Run

    me = Run(id="r", item="D-1", slot="implement", agent="a", pid=os.getpid(), pid_start=process_start(os.getpid()))
    assert run_alive(me)
    assert not run_alive(me._replace(pid_start="1"))  # the same pid, another process
    assert not run_alive(me._replace(finished="2026-01-01T00:00:00.000Z"))


def test_a_frozen_slotted_ledger_row_pickles():
    import pickle

    from drover.ledger.rows import Round

    row = Round("D-1", 2, "digest", headline="Commas split rows")
    assert pickle.loads(pickle.dumps(row)) == row


def test_a_ledger_with_data_survives_reopening(tmp_path):
    path = tmp_path / "ledger.db"
    with Ledger(path) as one:
        one.add_round("D-1", "d" * 64, "headline", "", "me")
    with Ledger(path) as two:
        assert [row.number for row in two.rounds("D-1")] == [1]


def test_migrations_are_applied_in_exactly_one_place():
    package = Path(ledger_module.__file__).parent
    applies = re.compile(r"migrations(\(\))?\.apply\(")
    callers = {
        path.relative_to(package).as_posix(): len(applies.findall(path.read_text(encoding="utf-8")))
        for path in package.rglob("*.py")
        if applies.search(path.read_text(encoding="utf-8"))
    }
    assert callers == {"db.py": 1}


def test_rows_are_written_only_through_sqlite_utils():
    """No module of drover writes a row in SQL of its own: sqlite-utils' table API writes every
    row. The activity table alone is written in SQL, by the triggers that keep it (activity.py)."""
    package = Path(ledger_module.__file__).parent.parent
    writes = re.compile(r"\b(INSERT\s+(OR\s+\w+\s+)?INTO|REPLACE\s+INTO|UPDATE\s+\S+\s+SET|DELETE\s+FROM)\b"
                        r"|\.executemany\(|\.executescript\(", re.IGNORECASE)
    found = {
        path.relative_to(package).as_posix(): [line.strip() for line in path.read_text(encoding="utf-8").splitlines()
                                               if writes.search(line) and ('"' in line or "'" in line)]
        for path in package.rglob("*.py")
    }
    assert {path: lines for path, lines in found.items() if lines and path != "ledger/activity.py"} == {}


def test_wal_mode_and_busy_timeout(ledger):
    assert ledger.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ledger.db.execute("PRAGMA busy_timeout").fetchone()[0] == BUSY_TIMEOUT_MS
    assert BUSY_TIMEOUT_MS >= 5000
    # WAL is a property of the file: a plain connection sees it too
    conn = sqlite3.connect(ledger.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_a_file_that_is_not_a_ledger_is_a_one_line_error(tmp_path):
    from drover.errors import DroverError

    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is not a database, just text that goes on for a while\n" * 20)
    with pytest.raises(DroverError) as caught:
        Ledger(path)
    assert "ledger.db" in str(caught.value)
    assert "\n" not in str(caught.value)


# --- transactions -------------------------------------------------------------------------------


def test_a_failed_write_rolls_back_every_row(ledger, tmp_path):
    before = dump(ledger.path)
    with pytest.raises(RuntimeError):
        with ledger.write():
            ledger.add_round("D-1", "a" * 64, "one", "", "me")
            ledger.log_event("request-changes", "D-1", "me")
            ledger.park("D-1", "why")
            raise RuntimeError("boom")
    assert dump(ledger.path) == before
    assert not ledger.db.conn.in_transaction


def test_a_write_sqlite_rolled_back_itself_says_why_and_the_next_write_goes_through(ledger):
    """SQLite ends the transaction itself on a full disk: the error is that, not the ROLLBACK after it
    ("cannot rollback - no transaction is active", which is what a command printed on a full disk)."""
    ledger.log_event("new", "D-1", "me")
    before = dump(ledger.path)
    (pages,) = ledger.conn.execute("PRAGMA page_count").fetchone()
    ledger.conn.execute(f"PRAGMA max_page_count = {pages}")  # this connection's disk is full
    with pytest.raises(sqlite3.OperationalError, match="full"):
        with ledger.write():
            ledger.add_round("D-1", "a" * 64, "one", "", "me")
            ledger.log_event("request-changes", "D-1", "me", findings="x" * 100_000)
    assert not ledger.conn.in_transaction
    assert dump(ledger.path) == before
    ledger.conn.execute("PRAGMA max_page_count = 1073741823")
    ledger.log_event("request-changes", "D-1", "me")
    assert [event["command"] for event in ledger.events("D-1")] == ["new", "request-changes"]


def test_a_commit_sqlite_refuses_leaves_no_transaction_for_the_next_write_to_join(ledger):
    """A refused COMMIT (here a deferred foreign key; a full disk at the commit too) keeps SQLite's
    transaction open: the next write joined it, outside the writers' lock, and was never committed."""
    ledger.conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    ledger.conn.execute("CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError):
        with ledger.write():
            ledger.log_event("new", "D-1", "me")
            ledger.conn.execute("INSERT INTO child VALUES (5)")
    assert not ledger.conn.in_transaction
    ledger.log_event("park", "D-1", "me")
    other = sqlite3.connect(ledger.path)
    try:
        assert [row[0] for row in other.execute("SELECT command FROM events")] == ["park"]
    finally:
        other.close()


def test_writes_begin_immediate_so_a_second_writer_waits_instead_of_failing(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    holding = threading.Event()

    def hold() -> None:
        # a connection belongs to the thread that opened it
        with Ledger(path) as holder, holder.write():
            holder.add_round("D-1", "a" * 64, "held", "", "one")
            holding.set()
            time.sleep(0.6)

    thread = threading.Thread(target=hold)
    thread.start()
    assert holding.wait(10)
    started = time.monotonic()
    with Ledger(path) as other:
        number = other.add_round("D-1", "b" * 64, "waited", "", "two")
    waited = time.monotonic() - started
    thread.join(10)
    assert number == 2  # allocated after the first writer committed, inside its own transaction
    assert waited >= 0.3


def test_round_numbers_are_allocated_inside_the_transaction(ledger):
    assert [ledger.add_round("D-1", "a" * 64, f"r{n}", "", "me") for n in range(3)] == [1, 2, 3]
    assert ledger.add_round("D-2", "a" * 64, "other item", "", "me") == 1


def test_item_ids_are_never_reused(ledger):
    assert ledger.allocate_item("D", 0) == "D-1"
    assert ledger.allocate_item("D", 0) == "D-2"
    # a file on disk numbered higher raises the floor
    assert ledger.allocate_item("D", 7) == "D-8"
    # a lower floor (files deleted) never brings an old number back
    assert ledger.allocate_item("D", 0) == "D-9"


def test_ids_the_ledger_saw_without_allocating_them_are_not_reused(ledger):
    # an item written by hand and parked, then its file deleted: its number stays taken
    ledger.park("D-12", "hand-written")
    assert ledger.allocate_item("D", 0) == "D-13"


def _add_rounds(path: str, who: str, count: int) -> None:
    with Ledger(Path(path)) as opened:
        for _ in range(count):
            opened.add_round("D-1", "c" * 64, who, "", who)
            opened.log_event("request-changes", "D-1", who)


def test_concurrent_processes_allocate_distinct_round_numbers(tmp_path):
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_rounds, args=(str(path), f"w{n}", 15)) for n in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0, 0, 0]
    with Ledger(path) as opened:
        numbers = [row.number for row in opened.rounds("D-1")]
        assert numbers == list(range(1, 46))
        assert len(opened.events("D-1")) == 45


def test_concurrent_first_opens_migrate_once(tmp_path):
    path = tmp_path / "fresh.db"
    code = "import sys; from pathlib import Path; from drover.ledger.db import Ledger; Ledger(Path(sys.argv[1])).close()"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    errors = [proc.communicate(timeout=120)[1] for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], errors
    rows = dump(path)["_sqlite_migrations"]
    assert len(rows) == len(MIGRATIONS)


def test_a_drover_killed_mid_migration_leaves_the_ledger_as_it_was_and_the_next_open_migrates_it(tmp_path):
    """Every pending migration and its record commit together: a drover SIGKILLed after applying
    them, before the commit, leaves the old schema and rows, and the next open applies them once."""
    path = tmp_path / "ledger.db"
    old = sqlite_utils.Database(path)
    migrations().apply(old, stop_before="0012_audit_run")
    old["audits"].insert({"item": "D-1", "level": "reviewed", "by": "op", "note": "", "at": "2026-01-01T00:00:00.000Z",
                          "authors": "[]", "head": "a" * 40})
    old.conn.close()
    before = dump(path)
    code = "import sys; from pathlib import Path; from drover.ledger.db import Ledger; Ledger(Path(sys.argv[1]))"
    killed = subprocess.run([sys.executable, "-c", code, str(path)], env={**os.environ, "DROVER_FAILPOINT": "migrated"},
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    assert dump(path) == before
    with Ledger(path) as upgraded:
        (audit,) = upgraded.audits("D-1")
        assert audit.opens == 1 and audit.head == "a" * 40
        assert upgraded.activity_for("D-1")["approval_head"] == "a" * 40
    assert schema(path) == EXPECTED_COLUMNS
    assert [row[2] for row in sorted(dump(path)["_sqlite_migrations"])] == [name for name, _ in MIGRATIONS]


# A process whose first write this is: does it hold the writers' lock while sqlite-utils imports?
_FIRST_WRITE = """
import sys
from pathlib import Path
from drover.ledger.db import Ledger
from drover.ledger.journal import Journal

ledger = Ledger(Path(sys.argv[1]))
assert "sqlite_utils" not in sys.modules, "opening a migrated ledger imported sqlite-utils"
taken = Journal._acquire

def acquire(self):
    print("imported before the lock:", "sqlite_utils" in sys.modules)
    taken(self)

Journal._acquire = acquire
ledger.log_event("audit", "D-1", "reviewer")
ledger.close()
"""


def test_a_first_write_imports_sqlite_utils_before_it_takes_the_writers_lock(tmp_path):
    """Other writers wait on that lock: a reviewer's `drover audit` once held it through the
    30-40 ms import while the drive's jobs waited to record their runs."""
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    done = subprocess.run([sys.executable, "-c", _FIRST_WRITE, str(path)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["imported before the lock: True"]
    with Ledger(path) as opened:
        assert [event["command"] for event in opened.events("D-1")] == ["audit"]


# --- the metadata cache ----------------------------------------------------------------------------


def _project(tmp_path: Path) -> Project:
    (tmp_path / "items").mkdir(exist_ok=True)
    return Project(root=tmp_path, config=Config())


def _item(project: Project, item_id: str, title: str) -> Path:
    path = project.item_path(item_id)
    path.write_text(f"---\nid: {item_id}\ntitle: {title}\n---\n\nbody\n", encoding="utf-8")
    return path


def test_the_cache_is_keyed_by_path_size_and_mtime(tmp_path, monkeypatch):
    project = _project(tmp_path)
    one = _item(project, "D-1", "one")
    _item(project, "D-2", "two")
    with Ledger(project.ledger_path) as opened:
        assert {key: entry.title for key, entry in catalogue(project, opened).items()} == {"D-1": "one", "D-2": "two"}
        rows = opened.cached_files()
        assert set(rows) == {"items/D-1.md", "items/D-2.md"}
        assert rows["items/D-1.md"]["size"] == one.stat().st_size
        assert rows["items/D-1.md"]["mtime_ns"] == one.stat().st_mtime_ns

        # unchanged files are not parsed again
        from drover.items import file as itemfile

        parsed: list[str] = []
        real = itemfile.read_summary
        monkeypatch.setattr(itemfile, "read_summary", lambda path, name, prefix, data=None, known=None:
                            parsed.append(path) or real(path, name, prefix, data, known))
        catalogue(project, opened)
        assert parsed == []

        # a changed size refreshes the row
        _item(project, "D-1", "one, renamed")
        assert catalogue(project, opened)["D-1"].title == "one, renamed"
        assert parsed == [str(one)]
        assert opened.cached_files()["items/D-1.md"]["title"] == "one, renamed"

        # the same size with a new mtime refreshes it too
        one.write_text(one.read_text().replace("one, renamed", "one, RENAMED"))
        stamp = one.stat().st_mtime_ns + 5_000_000_000
        os.utime(one, ns=(stamp, stamp))
        assert catalogue(project, opened)["D-1"].title == "one, RENAMED"
        assert opened.cached_files()["items/D-1.md"]["mtime_ns"] == stamp

        # a new mtime on the same bytes (a touch, a checkout): read, not parsed; the row takes the mtime
        parsed.clear()
        os.utime(one, ns=(stamp + 10**9, stamp + 10**9))
        assert catalogue(project, opened)["D-1"].title == "one, RENAMED"
        assert parsed == [] and opened.cached_files()["items/D-1.md"]["mtime_ns"] == stamp + 10**9

        # a deleted file's row goes
        project.item_path("D-2").unlink()
        assert list(catalogue(project, opened)) == ["D-1"]
        assert set(opened.cached_files()) == {"items/D-1.md"}


def test_the_cache_remembers_unreadable_files_with_their_wording(tmp_path):
    project = _project(tmp_path)
    project.item_path("D-3").write_text("---\nid: D-3\ntitle: [\n---\nbody\n")
    with Ledger(project.ledger_path) as opened:
        first = catalogue(project, opened)["D-3"]
        second = catalogue(project, opened)["D-3"]  # from the cache this time
    assert first == second
    assert second.unreadable == "will not parse"
    assert second.line == 3


def test_the_cache_is_dropped_when_the_prefix_changes(tmp_path):
    """Whether an id is readable depends on the prefix, which a file's bytes do not show: rows
    parsed under another prefix are not trusted, by the catalogue or by one entry."""
    from drover.ledger.catalogue import entry

    project = _project(tmp_path)
    _item(project, "D-1", "one")
    renamed = Project(root=tmp_path, config=Config(prefix="T"))
    with Ledger(project.ledger_path) as opened:
        assert catalogue(project, opened)["D-1"].unreadable == ""
        under_t = catalogue(renamed, opened)["D-1"]
        assert (under_t.unreadable, under_t.detail) == ("does not resolve to an item id", "id D-1 is not T-<number>")
        assert catalogue(project, opened)["D-1"].title == "one"  # and back
        assert set(opened.cached_files()) == {"items/D-1.md"}
        assert entry(renamed, opened, "D-1").detail == "id D-1 is not T-<number>"
        assert entry(project, opened, "D-1").detail == ""


def test_rows_parsed_under_another_prefix_are_not_stored(tmp_path):
    """Every cache row was parsed under the prefix the cache records: a process still under the
    old prefix does not write its rows into a cache another process took to the new one."""
    readable = ("items/D-1.md", 1, 1, "D-1", "one", "", "[]", "{}", 0, 0, "", "", None, None, None, 0, 0)
    unreadable = ("items/D-1.md", 1, 1, "D-1", "", "", "[]", "{}", 0, 0, "does not resolve to an item id",
                  "id D-1 is not T-<number>", None, None, None, 0)
    project = _project(tmp_path)
    with Ledger(project.ledger_path) as old, Ledger(project.ledger_path) as new:
        old.cache_under("D")
        old.store_files([readable])
        assert dump(project.ledger_path)["item_files_prefix"] == [("D",)]
        new.cache_under("T")
        assert new.cached_files() == {}
        new.store_files([unreadable])
        old.store_files([readable])
        assert new.cached_files()["items/D-1.md"]["detail"] == "id D-1 is not T-<number>"
        assert dump(project.ledger_path)["item_files_prefix"] == [("T",)]


def test_a_row_renewed_in_place_takes_every_column_and_one_gone_since_is_inserted(tmp_path):
    project = _project(tmp_path)
    first = ("items/D-1.md", 1, 1, "D-1", "one", "", "[]", "{}", 0, 0, "", "", None, "a" * 32, "b" * 32, 0, 1)
    with Ledger(project.ledger_path) as opened:
        opened.cache_under("D")
        opened.store_files([first])
        again = ("items/D-1.md", 2, 3, "D-1", "two", "bug", '["D-2"]', '{"kind": "bug"}', 1, 0, "", "", None,
                 "c" * 32, "d" * 32, 1, 0)
        gone = ("items/D-2.md", 5, 6, "D-2", "dropped meanwhile", "", "[]", "{}", 0, 1, "", "", None, None, None, 0, 0)
        opened.store_files([], renewed=[again, gone])
        rows = opened.cached_files()
    assert {path: tuple(row) for path, row in rows.items()} == {"items/D-1.md": again, "items/D-2.md": gone}


def test_a_new_mtime_or_body_takes_its_columns_and_makes_no_row_for_a_path_gone_since(tmp_path):
    project = _project(tmp_path)
    first = ("items/D-1.md", 1, 1, "D-1", "one", "", "[]", "{}", 0, 0, "", "", None, "a" * 32, "b" * 32, 0, 1)
    with Ledger(project.ledger_path) as opened:
        opened.cache_under("D")
        opened.store_files([first])
        opened.store_files([], mtimes=[(7, "items/D-1.md"), (8, "items/D-2.md")])
        assert {path: tuple(row) for path, row in opened.cached_files().items()} == {
            "items/D-1.md": (*first[:2], 7, *first[3:])}
        opened.store_files([], bodies=[(9, 10, 1, 0, 1, "c" * 32, "items/D-1.md"), (9, 10, 1, 0, 1, "d", "items/D-3.md")])
        (row,) = opened.cached_files().values()
    assert (row["size"], row["mtime_ns"], row["outstanding"], row["cleared"], row["placeholder"], row["digest"],
            row["title"], row["front"]) == (9, 10, 1, 0, 1, "c" * 32, "one", "b" * 32)


def test_asking_which_runs_are_live_reads_only_the_unfinished_ones(ledger):
    """Every writing command asks (acting.traced_run): at 50,000 items a scan of every run cost 30 ms."""
    ledger.start_run(NewRun(id="r1", item="D-1", slot="implement", agent="claude"))
    ledger.set_run_pid("r1", 4242, "77")
    ledger.start_run(NewRun(id="r2", item="D-1", slot="review", agent="codex"))
    ledger.set_run_pid("r2", 4343, "78")
    ledger.finish_run("r2", 0, "exited")
    asked: list[str] = []
    ledger.conn.set_trace_callback(asked.append)
    try:
        assert ledger.live_agents() == [("r1", 4242, "77")]
    finally:
        ledger.conn.set_trace_callback(None)
    (query,) = asked
    plan = " ".join(row[-1] for row in ledger.conn.execute("EXPLAIN QUERY PLAN " + query))
    assert "USING INDEX runs_unfinished" in plan


def test_activity_for_every_item_agrees_with_activity_for_one(ledger):
    """activity() (one pass per table) gives each item the row activity_for's query gives it:
    ties on the start time go to the later row, branchless and review runs do not count."""
    stamp, later = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
    for n, (item, slot, started, finished, outcome, status, branch) in enumerate([
        ("D-1", "implement", stamp, stamp, "exited", 0, "drover/d-1"),
        ("D-1", "implement", stamp, None, None, None, ""),  # same start, later row: the newest
        ("D-1", "review", later, later, "exited", 0, "drover/d-1-review"),
        ("D-2", "implement", later, later, "timeout", None, "drover/d-2"),
        ("D-2", "implement", stamp, stamp, "exited", 3, "drover/d-2-old"),
        ("D-4", "review", stamp, stamp, "exited", 0, ""),
    ]):
        ledger.start_run(NewRun(id=f"r{n}", item=item, slot=slot, agent="claude", started=started, branch=branch))
        if finished:
            with ledger.write():
                ledger.conn.execute("UPDATE runs SET finished = ?, outcome = ?, exit_status = ? WHERE id = ?",
                                    (finished, outcome, status, f"r{n}"))
    ledger.add_round("D-3", "0" * 64, "a finding", "", "codex")
    ledger.add_round("D-3", "1" * 64, "another", "", "codex")
    for level in ("reviewed", "verified", "claimed"):
        ledger.add_audit("D-2", level, "codex", "", head=level)
    ledger.mark_done("D-5")
    every = ledger.activity()
    assert set(every) == {"D-1", "D-2", "D-3", "D-4", "D-5"}
    for item, row in every.items():
        one = ledger.activity_for(item)
        assert {key: row.get(key) for key in row.keys()} == one, item
        assert all(row[key] == one[key] for key in one)
    assert every["D-1"]["last_id"] == "r1" and every["D-1"]["branch"] == "drover/d-1"
    assert every["D-2"]["approval_level"] == "verified" and every["D-4"]["implement_runs"] == 0
    ledger.mark_done("D-1")
    skipping = ledger.activity(done=False)
    assert set(skipping) == {"D-2", "D-3", "D-4"}
    assert all({key: row.get(key) for key in row.keys()} == ledger.activity_for(item) for item, row in skipping.items())


def _agrees_with_activity_for(ledger: Ledger) -> None:
    """activity() has a row for exactly the items activity_for's query lists, each equal to it."""
    every = ledger.activity()
    listed = {row[0] for row in ledger.conn.execute(
        "SELECT id FROM items UNION SELECT item FROM runs UNION SELECT item FROM rounds")}
    assert set(every) == listed
    for item, row in every.items():
        assert {key: row.get(key) for key in row.keys()} == ledger.activity_for(item), item


def _seed_activity(ledger: Ledger) -> None:
    stamp, later = "2026-01-01T00:00:00.000Z", "2026-01-02T00:00:00.000Z"
    for n, (item, slot, started, branch) in enumerate([
        ("D-1", "implement", stamp, "drover/d-1"), ("D-1", "implement", stamp, ""), ("D-1", "review", later, "x"),
        ("D-2", "implement", later, "drover/d-2"), ("D-2", "implement", stamp, "drover/d-2-old"),
    ]):
        ledger.start_run(NewRun(id=f"r{n}", item=item, slot=slot, agent="claude", started=started, branch=branch))
    ledger.add_round("D-3", "0" * 64, "a finding", "", "codex")
    with ledger.write():  # the columns every schema since 0003 has (a ledger before 0007 is seeded too)
        ledger.conn.execute("INSERT INTO audits (item, level, by, note, at, authors, head) "
                            "VALUES ('D-2', 'reviewed', 'codex', '', ?, '[]', 'abc')", (later,))


def test_the_activity_table_follows_every_insert_update_and_delete(ledger):
    """The triggers recompute an item's row on any write to its runs, rounds or audits,
    including a row moved from one item to another and the last row of an item deleted."""
    _seed_activity(ledger)
    _agrees_with_activity_for(ledger)
    writes = [
        "UPDATE runs SET finished = '2026-01-03T00:00:00.000Z', outcome = 'exited', exit_status = 7 WHERE id = 'r1'",
        "UPDATE runs SET pid = 42, pid_start = 'x', head = 'def' WHERE id = 'r3'",
        "UPDATE runs SET item = 'D-7' WHERE id = 'r4'",  # moves a run: both items change
        "DELETE FROM runs WHERE id = 'r0'",
        "UPDATE audits SET level = 'claimed' WHERE item = 'D-2'",
        "DELETE FROM rounds WHERE item = 'D-3'",  # its only round: D-3 stays (an items row), newest_round gone
        # an audit of an item the ledger has no row for lists nothing, as activity_for's ids; its items row does
        "INSERT INTO audits (item, level, by, at, opens) VALUES ('D-8', 'verified', 'codex', '2026-01-05T00:00:00.000Z', 1)",
        "INSERT INTO items (id, number) VALUES ('D-8', 8)",
        "DELETE FROM runs WHERE item = 'D-7'",
    ]
    for sql in writes:
        with ledger.write():
            ledger.conn.execute(sql)
        _agrees_with_activity_for(ledger)
    assert ledger.activity()["D-8"]["approval_level"] == "verified"
    assert ledger.activity()["D-3"]["newest_round"] is None and "D-7" not in ledger.activity()


def test_migration_0007_fills_the_activity_table_for_a_ledger_that_has_rows(tmp_path, monkeypatch):
    from drover.ledger import migrations as migrations_module

    path = tmp_path / ".drover" / "ledger.db"
    before = MIGRATIONS[:MIGRATIONS.index(next(m for m in MIGRATIONS if m[0] == "0007_activity"))]
    monkeypatch.setattr(migrations_module, "MIGRATIONS", before)
    monkeypatch.setattr(ledger_module, "MIGRATIONS", before)
    with Ledger(path) as old:
        _seed_activity(old)
        assert "activity" not in dump(path)
    monkeypatch.undo()
    with Ledger(path) as migrated:
        assert dump(path)["activity"]
        _agrees_with_activity_for(migrated)
        # the approval given before 0012 recorded who gave it still approves (migration 0012)
        assert migrated.activity()["D-2"]["approval_head"] == "abc"


def test_a_runs_end_is_one_update_of_its_row_as_the_three_were(ledger):
    """A launched run's end (runs.execute) wrote its node, its usage and its finish as three updates
    of its row, each refreshing the item's activity row twice (the triggers) and each through
    sqlite-utils' look-ups: 2-3 ms a run. end_run writes the same columns in one."""
    usage = {"model": "claude\nsonnet", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.01, "tool_calls": 2}
    for run_id in ("r1", "r2"):
        ledger.start_run(NewRun(id=run_id, item="D-1", slot="implement", agent="claude"))
    ledger.set_run_node("r1", "local", "why")
    ledger._set_run("r1", _usage(usage))  # the usage's own update, as runs.execute wrote it
    ledger.finish_run("r1", 0, "exited", "a" * 40)
    asked: list[str] = []
    ledger.conn.set_trace_callback(asked.append)
    try:
        ledger.end_run("r2", 0, "exited", "a" * 40, node="local", reason="why", usage=usage)
    finally:
        ledger.conn.set_trace_callback(None)
    # one write of sqlite-utils' (its savepoint), and the item's activity refreshed once for it
    assert len([sql for sql in asked if sql.startswith("SAVEPOINT")]) == 1
    three, one = (ledger.conn.execute("SELECT * FROM runs WHERE id = ?", [run_id]).fetchone() for run_id in ("r1", "r2"))
    differ = {key for key in three.keys() if three[key] != one[key]}
    assert differ <= {"id", "started", "finished"} and one["model"] == "claude sonnet" and one["head"] == "a" * 40
