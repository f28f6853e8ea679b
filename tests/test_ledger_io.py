"""drover ledger export / import: JSON Lines with the schema first; a round trip keeps every table."""
from __future__ import annotations

import json
import sqlite3

import pytest

from helpers import FINDINGS, git, ledger_tables, one_line, run


@pytest.fixture
def busy(repo):
    """A project whose ledger has a row in every table: items, rounds, audits, dispositions, runs, events."""
    assert run(repo, "init").returncode == 0
    for title in ("one", "two", "three"):
        assert run(repo, "new", title).returncode == 0
    path = repo / "items" / "D-1.md"
    path.write_text(path.read_text().replace("deps: []", "deps: []\ncloses: [7]"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")
    assert run(repo, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    assert run(repo, "audit", "D-1", "--level", "reviewed", "--note", "ok \u2713").returncode == 0
    assert run(repo, "dispose", "D-1", "7", "--as", "keep").returncode == 0
    assert run(repo, "park", "D-2", "--why", "needs a decision").returncode == 0
    ledger = repo / ".drover" / "ledger.db"
    with sqlite3.connect(ledger) as conn:
        conn.execute("INSERT INTO runs (id, item, slot, agent, argv, started, finished, exit_status, outcome) "
                     "VALUES ('r1', 'D-3', 'implement', 'a', '[\"x\"]', '2026-01-01T00:00:00.000Z', "
                     "'2026-01-01T00:00:00.000Z', 0, 'ok')")
        conn.execute("INSERT INTO checks (id, item, head, base, command, exit_status, outcome, started, duration, "
                     "tail, log_path, at) VALUES ('c1', 'D-3', 'abc', 'def', 'make test', 0, 'exited', "
                     "'2026-01-01T00:00:00.000Z', 1.5, 'ok', '.drover/runs/c1/check.log', '2026-01-01T00:00:00.000Z')")
    conn.close()
    assert run(repo, "list").returncode == 0  # fills the metadata cache
    return repo


def test_export_starts_with_the_schema_and_names_each_rows_table(busy):
    done = run(busy, "ledger", "export")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["format"] == "drover-ledger" and lines[0]["schema"] == lines[0]["migrations"][-1]
    tables = {line["table"] for line in lines[1:]}
    assert {"items", "rounds", "audits", "dispositions", "runs", "events", "item_files", "activity", "checks"} <= tables
    with sqlite3.connect(busy / ".drover" / "ledger.db") as conn:
        every = {name for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    conn.close()
    # the header states the schema; nothing is pending; a trigger's scratch row lives only inside a write
    assert every - tables <= {"_sqlite_migrations", "intents", "owed_commits", "worktree_pool", "activity_pending"}


def test_a_round_trip_keeps_every_table(busy, tmp_path):
    with sqlite3.connect(busy / ".drover" / "ledger.db") as conn:  # an item whose id sorts before D-2, seen last
        conn.execute("INSERT INTO runs (id, item, slot, agent, argv, started) "
                     "VALUES ('r10', 'D-10', 'implement', 'a', '[]', '2026-01-02T00:00:00.000Z')")
    conn.close()
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    original = ledger_tables(busy / ".drover" / "ledger.db")
    (busy / ".drover" / "ledger.db").unlink()
    for extra in ("-wal", "-shm"):
        (busy / ".drover" / f"ledger.db{extra}").unlink(missing_ok=True)
    done = run(busy, "ledger", "import", str(dump))
    assert done.returncode == 0, done.stderr
    restored = ledger_tables(busy / ".drover" / "ledger.db")
    assert set(restored) == set(original)
    assert original["activity"]  # filled once the rows loaded (its triggers paused meanwhile), compared below
    with sqlite3.connect(busy / ".drover" / "ledger.db") as conn:
        triggers = conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'activity_%'")
        assert triggers.fetchone()[0] == 9  # back in place after the import
    conn.close()
    for table in original:
        if table == "_sqlite_migrations":  # applied again on the new ledger: names kept, times new
            assert [row[2] for row in restored[table]] == [row[2] for row in original[table]]
        else:
            assert restored[table] == original[table], table
    # and its export is the same file, line for line, the rebuilt tables included
    again = tmp_path / "again.jsonl"
    assert run(busy, "ledger", "export", "-o", str(again)).returncode == 0
    assert again.read_text().splitlines()[1:] == dump.read_text().splitlines()[1:]


def test_export_to_a_folder_names_the_folder_and_writes_nothing(busy, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    done = run(busy, "ledger", "export", "-o", str(folder))
    assert one_line(done) == f"drover: {folder}: a folder, not a file: name the file to write, e.g. ledger.jsonl"
    assert list(folder.iterdir()) == [] and list(tmp_path.glob(".out.*")) == []
    # a file where a folder of the path should be: named, not mkdir's `File exists`
    (tmp_path / "afile").write_text("")
    done = run(busy, "ledger", "export", "-o", str(tmp_path / "afile" / "x.jsonl"))
    assert done.returncode == 2
    assert one_line(done) == f"drover: {tmp_path / 'afile' / 'x.jsonl'}: {tmp_path / 'afile'} is a file, not a folder"
    # a missing folder on the way is made, as docs/commands.md says
    deeper = tmp_path / "missing" / "deeper" / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(deeper)).returncode == 0
    assert json.loads(deeper.read_text().splitlines()[0])["format"] == "drover-ledger"


def test_an_import_drops_cache_rows_parsed_under_no_one_prefix(busy, tmp_path):
    """Cache rows merged from a ledger under another prefix, or exported without their prefix
    (a drover before migration 0010), cannot say whose ids they read: the import drops them, and
    the next list parses the files again."""
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines()
    assert sum('"table": "item_files_prefix"' in line for line in lines) == 1
    other = [line.replace('"prefix": "D"', '"prefix": "T"') if '"table": "item_files_prefix"' in line else line
             for line in lines]
    (tmp_path / "other.jsonl").write_text("\n".join(other) + "\n")
    merged = run(busy, "ledger", "import", str(tmp_path / "other.jsonl"), "--merge")
    assert merged.returncode == 0, merged.stderr
    tables = ledger_tables(busy / ".drover" / "ledger.db")
    assert tables["item_files"] == [] and tables["item_files_prefix"] == []
    # without its prefix row, into an empty ledger
    for extra in ("", "-wal", "-shm"):
        (busy / ".drover" / f"ledger.db{extra}").unlink(missing_ok=True)
    bare = [line for line in lines if '"table": "item_files_prefix"' not in line]
    (tmp_path / "bare.jsonl").write_text("\n".join(bare) + "\n")
    assert run(busy, "ledger", "import", str(tmp_path / "bare.jsonl")).returncode == 0
    assert ledger_tables(busy / ".drover" / "ledger.db")["item_files"] == []
    listed = run(busy, "list")
    assert listed.returncode == 0 and "D-1" in listed.stdout
    assert len(ledger_tables(busy / ".drover" / "ledger.db")["item_files"]) == 3


def test_the_highest_id_met_only_rises_through_an_import(busy, tmp_path):
    """ids_met is a mark, not a row to disagree about: a merge keeps the higher of the two, and an
    export from before it existed (cache rows, no mark) gives the mark its cache's highest."""
    ledger = busy / ".drover" / "ledger.db"
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines()
    (mark,) = [json.loads(line)["row"] for line in lines if '"table": "ids_met"' in line]
    assert (mark["prefix"], mark["highest"]) == ("D", 3)
    for highest, kept in ((90, 90), (5, 90)):
        marked = [line.replace('"highest": 3', f'"highest": {highest}') for line in lines]
        (tmp_path / "marked.jsonl").write_text("\n".join(marked) + "\n")
        merged = run(busy, "ledger", "import", str(tmp_path / "marked.jsonl"), "--merge")
        assert merged.returncode == 0 and "differs" not in merged.stdout + merged.stderr
        assert [row[:2] for row in ledger_tables(ledger)["ids_met"]] == [("D", kept)]
    assert run(busy, "new", "after").stdout.split()[0] == "D-91"
    # an export without the mark, into an empty ledger
    for extra in ("", "-wal", "-shm"):
        (busy / ".drover" / f"ledger.db{extra}").unlink(missing_ok=True)
    bare = [line for line in lines if '"table": "ids_met"' not in line]
    (tmp_path / "bare.jsonl").write_text("\n".join(bare) + "\n")
    assert run(busy, "ledger", "import", str(tmp_path / "bare.jsonl")).returncode == 0
    assert ledger_tables(ledger)["ids_met"] == [("D", 3, None)]


def test_import_refuses_a_non_empty_ledger_and_merge_adds_what_is_missing(busy, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    before = ledger_tables(busy / ".drover" / "ledger.db")
    line = one_line(run(busy, "ledger", "import", str(dump)), code=1)
    assert "already holds rows" in line and "--merge" in line
    assert ledger_tables(busy / ".drover" / "ledger.db") == before
    # the same rows again: nothing to add, nothing in conflict
    same = run(busy, "ledger", "import", str(dump), "--merge")
    assert same.returncode == 0 and same.stdout.strip() == "imported rows: none"
    # a row this ledger lacks is added; a row it has with other values is a conflict, kept as it is
    lines = dump.read_text().splitlines()
    extra = json.loads(next(line for line in lines if '"table": "items"' in line))
    extra["row"].update(id="D-40", number=40)
    changed = json.loads(next(line for line in lines if '"table": "audits"' in line))
    changed["row"]["note"] = "rewritten elsewhere"
    (tmp_path / "other.jsonl").write_text("\n".join([lines[0], json.dumps(extra), json.dumps(changed)]) + "\n")
    merged = run(busy, "ledger", "import", str(tmp_path / "other.jsonl"), "--merge")
    assert merged.returncode == 1
    assert "imported rows: items 1" in merged.stdout
    assert "conflict: other.jsonl:3: audits id 1 differs from this ledger's row (kept)" in merged.stdout
    after = ledger_tables(busy / ".drover" / "ledger.db")
    assert after["audits"] == before["audits"]
    assert len(after["items"]) == len(before["items"]) + 1


def test_an_import_into_a_clone_whose_cache_another_command_filled_has_no_conflicts(busy, tmp_path):
    """A fresh clone where `list` ran first holds its own metadata cache of the same files (other
    mtimes): the cache is rebuilt from the files, so its rows conflict with nothing and every record loads."""
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    git(busy, "add", "-A")
    git(busy, "commit", "-qm", "the items")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(busy), str(clone))
    assert run(clone, "list").returncode == 0  # fills the clone's cache from its own files
    done = run(clone, "ledger", "import", str(dump))
    assert done.returncode == 0 and "conflict" not in done.stdout, done.stdout + done.stderr
    records = ("runs", "rounds", "audits", "dispositions", "items", "checks")
    mine, theirs = ledger_tables(clone / ".drover" / "ledger.db"), ledger_tables(busy / ".drover" / "ledger.db")
    assert {table: mine[table] for table in records} == {table: theirs[table] for table in records}


def test_a_key_repeated_in_one_file_is_loaded_once_and_a_different_repeat_is_a_conflict(repo, tmp_path):
    """Rows load in batches: a later line that repeats a waiting row's key is judged against it as
    against a row the ledger holds; a row that leaves a column out takes the column's default."""
    assert run(repo, "init").returncode == 0
    rows = [{"table": "items", "row": {"id": f"D-{n}", "number": n}} for n in range(1, 4)]
    rows += [{"table": "items", "row": {"id": "D-2", "number": 2}},
             {"table": "items", "row": {"id": "D-3", "number": 30}},
             {"table": "items", "row": {"id": "D-4", "number": 4, "done": 1}}]
    dump = tmp_path / "repeats.jsonl"
    dump.write_text("\n".join(json.dumps(line) for line in [{"format": "drover-ledger", "migrations": []}, *rows]) + "\n")
    done = run(repo, "ledger", "import", str(dump))
    assert done.returncode == 1
    assert "imported rows: items 4" in done.stdout
    assert "conflict: repeats.jsonl:6: items id D-3 differs from this ledger's row (kept)" in done.stdout
    items = {row[0]: row for row in ledger_tables(repo / ".drover" / "ledger.db")["items"]}
    assert [(item, row[1], row[3], row[5]) for item, row in sorted(items.items())] == [
        ("D-1", 1, 0, 0), ("D-2", 2, 0, 0), ("D-3", 3, 0, 0), ("D-4", 4, 1, 0)]


def test_a_conflicts_key_reaches_the_terminal_without_its_escapes(repo, tmp_path):
    """A conflict line names the row's key as the file has it: a crafted export put OSC 52 (the
    clipboard) and a window title on the operator's terminal (hostile review 19)."""
    assert run(repo, "init").returncode == 0
    key = "\x1b]52;c;cm0gLXJmIH4K\x07\x1b]0;pwned\x07R-1"
    row = {"id": key, "item": "D-1", "slot": "implement", "agent": "a", "started": "2026-01-01T00:00:00.000Z"}
    rows = [{"table": "runs", "row": row}, {"table": "runs", "row": dict(row, agent="b")}]
    dump = tmp_path / "crafted.jsonl"
    dump.write_text("\n".join(json.dumps(line) for line in [{"format": "drover-ledger", "migrations": []}, *rows]) + "\n")
    done = run(repo, "ledger", "import", str(dump), process=True)
    assert done.returncode == 1 and "conflict: crafted.jsonl:3: runs id " in done.stdout, done.stdout + done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr


@pytest.mark.parametrize("content, said", [
    ("", "not a drover ledger export"),
    ('{"format": "drover-ledger", "migrations": ["0099_future"]}\n', "newer drover (migration 0099_future)"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "nope", "row": {}}\n', ":2: no table 'nope'"),
    ('{"format": "drover-ledger", "migrations": []}\nnot json\n', ":2: not JSON"),
    # a file cut short says where its last line ends
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "items", "row": {"id": "D-1", "ti',
     ":2: not JSON (Unterminated string starting at, column 41)"),
    # times are ordered as text (the newest approval): one that is no time would sort after them all
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "audits", "row": {"id": 1, "item": "D-1", '
     '"level": "reviewed", "at": "9999"}}\n', ':2: audits at must be a UTC time (2026-01-31T09:30:00.000Z), not "9999"'),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "runs", "row": {"id": "r1", "item": "D-1", '
     '"slot": "review", "agent": "a", "started": "2026-01-01T00:00:00Z", "finished": "soon"}}\n',
     ":2: runs finished must be a UTC time"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "items", "row": {"id": "D-1", "x": 1}}\n',
     ":2: table items has no column 'x'"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "ids_met", "row": {"prefix": "D", "highest": "9"}}\n',
     ":2: ids_met highest must be a whole number"),
    # the words drover acts on: an audit level, a slot, a failure class, a disposition, an item id
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "audits", "row": {"id": 1, "item": "D-1", '
     '"level": "bogus", "at": "2026-01-01T00:00:00Z"}}\n', ":2: audits level must be one of claimed, reviewed, verified"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "runs", "row": {"id": "r1", "item": "D-1", '
     '"slot": "hack", "agent": "a", "started": "2026-01-01T00:00:00Z"}}\n', ":2: runs slot must be one of implement"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "runs", "row": {"id": "r1", "item": "D-1", '
     '"slot": "review", "agent": "a", "started": "2026-01-01T00:00:00Z", "failure": "oops"}}\n', ":2: runs failure must be one of"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "dispositions", "row": {"id": 1, "item": "D-1", '
     '"issue": 5, "disposition": "burn", "at": "2026-01-01T00:00:00Z"}}\n', ":2: dispositions disposition must be one of close"),
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "rounds", "row": {"item": "../x", "number": 1}}\n',
     ":2: rounds item must be an item id"),

    # what Python's json raised past the import's handling, a traceback (hostile review 27)
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "items", "row": {"id": "D-1", "number": '
     + "9" * 5000 + '}}\n', ":2: not JSON drover writes (a number of too many digits)"),
    ('{"format": "drover-ledger", "migrations": []}\n' + "[" * 100_000 + "\n", ":2: not JSON drover writes (nested"),
    # and a JSON column's text nested as deep: the line parses, the column's own JSON did not
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "audits", "row": {"id": 1, "item": "D-1", '
     '"level": "reviewed", "at": "2026-01-01T00:00:00.000Z", "authors": "' + "[" * 100_000 + '"}}\n',
     ":2: audits authors must be JSON text (an array)"),
    # a key twice: Python imports the last, a reader's tool may show the first
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "items", "row": {"id": "D-1", "parked": 0, '
     '"parked": 1}}\n', ":2: not JSON drover writes (the key 'parked' twice in one object)"),
    # a name drover compares (who approved, who wrote the work): folded it would be someone else's
    ('{"format": "drover-ledger", "migrations": []}\n{"table": "audits", "row": {"id": 1, "item": "D-1", '
     '"level": "reviewed", "by": "op\\nstate: approved", "at": "2026-01-01T00:00:00Z"}}\n',
     ":2: audits by must be one line with no control character"),
])
def test_a_bad_export_is_one_line_and_imports_nothing(repo, tmp_path, content, said):
    assert run(repo, "init").returncode == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    before = ledger_tables(repo / ".drover" / "ledger.db")
    line = one_line(run(repo, "ledger", "import", str(bad)))
    assert said in line
    assert ledger_tables(repo / ".drover" / "ledger.db") == before


def test_an_export_carries_no_terminal_escape_a_row_holds(busy):
    """Hostile review 15: JSON needs only C0 controls escaped, and the export kept other text as it
    is, so a C1 CSI an agent put in a note reached the terminal the export was printed to. DEL and
    C1 are escaped as JSON escapes them: the same value, read back."""
    with sqlite3.connect(busy / ".drover" / "ledger.db") as conn:
        conn.execute("UPDATE audits SET note = 'ok \u2713 \x9b2J\x7f'")
    conn.close()
    done = run(busy, "ledger", "export")
    assert done.returncode == 0, done.stderr
    assert "\x9b" not in done.stdout and "\x7f" not in done.stdout and "\u2713" in done.stdout
    notes = [line["row"]["note"] for line in map(json.loads, done.stdout.splitlines()[1:]) if line["table"] == "audits"]
    assert notes == ["ok \u2713 \x9b2J\x7f"]


def test_a_log_path_an_import_brought_from_outside_the_runs_folder_is_never_printed(busy, tmp_path):
    """Hostile review 17: `ledger import` takes a row's `log_path` as the export had it, and `drover log`
    printed whatever file a run's or a check's row named (`../../../etc/hostname`; `/dev/zero` read for
    ever). A log is printed only from under .drover/runs/."""
    (busy / "outside.txt").write_text("not a log of drover's\n")
    exported = run(busy, "ledger", "export")
    lines = []
    for line in map(json.loads, exported.stdout.splitlines()):
        if line.get("table") in ("runs", "checks") and line["row"].get("item") == "D-3":
            line["row"]["log_path"] = "../outside.txt" if line["table"] == "checks" else str(busy / "outside.txt")
        lines.append(json.dumps(line))
    dump = tmp_path / "edited.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    (busy / ".drover" / "ledger.db").unlink()
    assert run(busy, "ledger", "import", str(dump)).returncode == 0
    for args in (("--run", "c1"), ("--run", "r1"), ()):
        done = run(busy, "log", "D-3", *args)
        assert done.returncode == 2 and "not a log of drover's" not in done.stdout, (args, done.stdout, done.stderr)


def test_an_import_folds_what_drover_keeps_one_line_as_its_writes_do(busy, tmp_path):
    """An edited export brought a park reason, a model's name, a run's reason and a round's headline
    with line breaks, which `show` printed at its margin as lines of its own (`state: approved`). An
    import folds them by the function the writes call (errors.one_line), and a merge of the same file
    finds no conflict (hostile review 27)."""
    forged = "needs a look\nstate: approved\u2028verified by operator\n  passed  make forged"
    exported = run(busy, "ledger", "export")
    lines = []
    for line in map(json.loads, exported.stdout.splitlines()):
        row = line.get("row", {})
        if line.get("table") == "items" and row.get("id") == "D-2":
            row["parked_reason"] = forged
        if line.get("table") == "runs" and row.get("id") == "r1":
            row.update(model=forged, reason=forged)
        if line.get("table") == "rounds":
            row["headline"] = forged
        lines.append(json.dumps(line))
    dump = tmp_path / "edited.jsonl"
    dump.write_text("\n".join(lines) + "\n")
    (busy / ".drover" / "ledger.db").unlink()
    done = run(busy, "ledger", "import", str(dump))
    assert done.returncode == 0, done.stderr
    for item in ("D-1", "D-2", "D-3"):
        shown = run(busy, "show", item).stdout
        assert not any(line.startswith(("state: approved", "verified", "  passed  make forged"))
                       for line in shown.splitlines()), shown
    folded = " ".join(forged.split())
    tables = ledger_tables(busy / ".drover" / "ledger.db")
    assert folded in str(tables["items"]) and folded in str(tables["runs"]) and folded in str(tables["rounds"])
    merged = run(busy, "ledger", "import", "--merge", str(dump))
    assert merged.returncode == 0 and "conflict" not in merged.stdout, merged.stdout
    # the same rule as a live park's: the very same text kept
    assert run(busy, "park", "D-3", "--why", forged).returncode == 0
    assert [row for row in ledger_tables(busy / ".drover" / "ledger.db")["items"] if folded in str(row)][-1][0] == "D-3"


def test_a_merge_that_adds_rows_records_its_import_event_and_one_that_adds_none_records_nothing(busy, tmp_path):
    dump = tmp_path / "ledger.jsonl"
    assert run(busy, "ledger", "export", "-o", str(dump)).returncode == 0
    lines = dump.read_text().splitlines()
    extra = json.loads(next(line for line in lines if '"table": "items"' in line))
    extra["row"].update(id="D-40", number=40)
    (tmp_path / "other.jsonl").write_text("\n".join([lines[0], json.dumps(extra)]) + "\n")
    events = len(ledger_tables(busy / ".drover" / "ledger.db")["events"])
    assert run(busy, "ledger", "import", str(dump), "--merge").stdout.strip() == "imported rows: none"
    assert len(ledger_tables(busy / ".drover" / "ledger.db")["events"]) == events  # it changed nothing
    assert run(busy, "ledger", "import", str(tmp_path / "other.jsonl"), "--merge").returncode == 0
    with sqlite3.connect(busy / ".drover" / "ledger.db") as conn:
        rows = conn.execute("SELECT command, item, by, detail FROM events ORDER BY id").fetchall()
    conn.close()
    assert len(rows) == events + 1
    command, item, by, detail = rows[-1]
    assert (command, item, by) == ("import", None, "Test Operator")  # git's user.name: the operator
    assert json.loads(detail) == {"file": "other.jsonl", "added": {"items": 1}, "conflicts": 0}
