"""The way from ledger to prompt: typed ledger rows, each table read once per prompt, the item file
parsed once, drive's typed item-state query, and Project.require_item."""
from __future__ import annotations

import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from drover.items import file as itemfile
from drover.prompts import data as template_data
from drover.ledger import catalogue, depstate, itemstate, writes
from drover.ledger.catalogue import CacheRow
from drover.loop import drive as loop, driver, runs
from drover.errors import ItemError, UsageError
from drover.ledger.db import Ledger
from drover.ledger.project import Project, open_project
from drover.ledger.rows import Audit, NewRun, Round, Run
from drover.ledger.state import State
from helpers import configure, drover, git

TABLES = ("runs", "rounds", "audits", "dispositions", "items", "item_files", "events", "intents")


@pytest.fixture
def opened(repo):
    """A configured project whose D-3 depends on D-1 and D-2 and has a history of each kind of row."""
    configure(repo)
    project = open_project(repo)
    with Ledger(project.ledger_path) as ledger:
        writes.new_item(project, ledger, "first dep", "feature", [])
        writes.new_item(project, ledger, "second dep", "feature", [])
        writes.new_item(project, ledger, "the item", "feature", ["D-1", "D-2"])
        ledger.start_run(NewRun(id="i-1", item="D-3", slot="implement", agent="writer", argv=("a", "b"),
                                base_hashes={"intro": "abc"}, log_path=".drover/runs/i-1/agent.log"))
        ledger.finish_run("i-1", 0, "exited", "")
        ledger.add_round("D-3", "digest", "fix it", ".drover/runs/r-1/agent.log", "reviewer")
        ledger.clear_round("D-3", "writer")
        ledger.add_audit("D-3", "claimed", "writer", "done, I think")
        ledger.add_audit("D-1", "reviewed", "checker", "fine")
        ledger.start_run(NewRun(id="i-2", item="D-1", slot="implement", agent="writer"))
        ledger.finish_run("i-2", 0, "exited", "")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "items")
        yield project, ledger


# --- typed rows ------------------------------------------------------------------------------------


def test_the_ledger_answers_frozen_typed_rows(opened):
    _, ledger = opened
    (run,) = ledger.runs("D-3")
    assert isinstance(run, Run) and run.argv == ["a", "b"] and run.base_hashes == {"intro": "abc"}
    assert ledger.run("i-1") == run and ledger.run("nope") is None
    (round_,) = ledger.rounds("D-3")
    assert isinstance(round_, Round) and (round_.number, round_.headline, round_.cleared_by) == (1, "fix it", "writer")
    (audit,) = ledger.audits("D-3")
    assert isinstance(audit, Audit) and audit.authors == ["writer"] and audit.note == "done, I think"
    with pytest.raises(AttributeError):
        run.outcome = "changed"  # type: ignore[misc]
    assert ledger.unfinished_runs() == []


def test_show_json_prints_every_column_in_the_tables_order(opened):
    project, _ = opened
    shown = __import__("json").loads(drover(project.root, "show", "D-3", "--json", check=True).stdout)
    conn = sqlite3.connect(project.ledger_path)
    columns = {table: [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
               for table in ("runs", "rounds", "audits")}
    conn.close()
    # then what show adds: the price (docs/budgets.md) and the liveness
    assert list(shown["runs"][0]) == columns["runs"] + ["usd", "usd_source", "unfinished", "live", "orphaned"]
    assert list(shown["rounds"][0]) == columns["rounds"]
    assert list(shown["audits"][0]) == columns["audits"]
    assert shown["runs"][0]["argv"] == ["a", "b"] and shown["audits"][0]["authors"] == ["writer"]


def test_every_field_of_a_row_type_is_a_column_of_its_table(opened):
    project, _ = opened
    conn = sqlite3.connect(project.ledger_path)
    for kind, table in ((Run, "runs"), (Round, "rounds"), (Audit, "audits")):
        assert list(kind._fields) == \
            [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
    conn.close()


# --- the way from ledger to prompt, walked once ------------------------------------------------------


def _tables_read(statements: list[str]) -> Counter:
    """How many SELECT statements name each table."""
    counts: Counter = Counter()
    for sql in statements:
        if not sql.lstrip().upper().startswith("SELECT"):
            continue
        for table in TABLES:
            if re.search(rf'\b(FROM|JOIN)\s+"?{table}"?\b', sql, re.I):
                counts[table] += 1
    return counts


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_a_prompt_reads_each_ledger_table_once_and_parses_the_item_once(opened, monkeypatch, slot):
    project, ledger = opened
    parsed: list[Path] = []
    real_parse = itemfile.parse_item

    def counting_parse(text, path, *args, **kwargs):
        parsed.append(Path(path))
        return real_parse(text, path, *args, **kwargs)

    monkeypatch.setattr(itemfile, "parse_item", counting_parse)
    statements: list[str] = []
    ledger.conn.set_trace_callback(statements.append)
    try:
        launch = runs.prepare(project, ledger, "D-3", slot)
    finally:
        ledger.conn.set_trace_callback(None)
    assert "D-3" in launch.prompt
    read = _tables_read(statements)
    assert {"runs", "audits", "items"} <= set(read), statements  # the refusals and the data need them
    assert {table: count for table, count in read.items() if count > 1} == {}, "\n".join(statements)
    assert parsed.count(project.item_path("D-3")) == 1


def test_a_draft_prompt_reads_each_ledger_table_once(opened):
    """The draft slot also names its finding's source (its audit notes) and every sibling (done or not):
    those ride on the same reads."""
    project, ledger = opened
    ledger.add_audit("D-3", "reviewed", "checker", "the cache is never invalidated")
    ledger.mark_done("D-1")
    drafted = writes.new_item(project, ledger, "follow the finding", "feature", [], finding_source="D-3")
    statements: list[str] = []
    ledger.conn.set_trace_callback(statements.append)
    try:
        launch = runs.prepare(project, ledger, drafted, "draft")
    finally:
        ledger.conn.set_trace_callback(None)
    assert "the cache is never invalidated" in launch.prompt
    read = _tables_read(statements)
    assert {table: count for table, count in read.items() if count > 1} == {}, "\n".join(statements)
    data = template_data.build(project, ledger, drafted, "draft")
    assert [(sibling.Id, sibling.Done) for sibling in data.Siblings] == [("D-1", True), ("D-2", False), ("D-3", False)]


def test_the_deps_of_a_prompt_have_the_same_provenance_as_one_read_per_dep(opened):
    project, ledger = opened
    one_by_one = [
        (dep_id, depstate.audit_provenance(ledger.audits(dep_id), ledger.authors(dep_id)),
         bool(ledger.item_row(dep_id).get("done")))
        for dep_id in ("D-1", "D-2")
    ]
    described = depstate.describe_deps(project, ledger, ["D-1", "D-2", "D-1"])
    assert [(dep.Id, depstate.AuditProvenance(dep.Level, dep.By, dep.Weak), dep.Done)
            for dep in (one.dep for one in described)] == one_by_one
    assert ledger.authors("D-1") == ["writer"]
    ledger.add_audit("D-1", "claimed", "helper", "")
    # oldest first; recorded `started` later than the audit (now() is to the millisecond: a tie could order either way)
    ledger.start_run(NewRun(id="i-3", item="D-1", slot="implement", agent="second", started="2999-01-01T00:00:00.000Z"))
    ledger.start_run(NewRun(id="r-3", item="D-1", slot="review", agent="not an author"))
    assert ledger.authors("D-1") == ["writer", "helper", "second"]


# --- drive's item-state query ---------------------------------------------------------------------------


def test_item_state_is_what_show_says(opened):
    project, ledger = opened
    known = itemstate.item_state(project, ledger, "D-3")
    shown = itemstate.show_item(project, ledger, "D-3")
    assert isinstance(known.state, State)
    assert (str(known.state), known.reason, known.parked, known.parked_reason) == \
        (shown["state"], shown["reason"], shown["parked"], shown["parked_reason"])
    assert [run.id for run in known.runs] == [run["id"] for run in shown["runs"]]
    assert len(known.rounds) == len(shown["rounds"]) and known.usage == shown["usage"]
    assert known.log == shown["runs"][-1]["log_path"]
    ledger.park("D-3", "stuck")
    assert itemstate.item_state(project, ledger, "D-3").parked_reason == "stuck"
    with pytest.raises(UsageError, match="no item D-9"):
        itemstate.item_state(project, ledger, "D-9")


def test_drive_asks_the_typed_query_never_the_show_view(opened, monkeypatch):
    project, ledger = opened
    asked: list[str] = []
    real = itemstate.item_state

    def counting(project: Project, ledger: Ledger, item_id: str) -> itemstate.ItemState:
        asked.append(item_id)
        return real(project, ledger, item_id)

    def refuse(*args, **kwargs):
        raise AssertionError("drive asked for the show view")

    for module in (loop, driver):  # the drive checks the ids given; the driver drives each
        monkeypatch.setattr(module, "item_state", counting)
        monkeypatch.setattr(module, "show_item", refuse, raising=False)
    monkeypatch.setattr(itemstate, "show_item", refuse)
    ledger.mark_done("D-1")
    ledger.mark_done("D-2")
    ledger.park("D-3", "not now")
    (driven,) = loop.drive(project, ["D-3"], say=lambda line: None)
    assert (driven.result, driven.note, driven.rounds, driven.runs) == ("skipped", "parked", 1, 1)
    assert asked == ["D-3", "D-3"]  # the id check before anything starts, then one per pass


# --- require_item lives with Project ---------------------------------------------------------------


def test_project_require_item_says_what_is_wrong_in_one_line(opened):
    project, _ = opened
    assert project.require_item("D-3").title == "the item"
    with pytest.raises(UsageError, match=r"^x-1 does not resolve to an item id \(ids look like D-1\)$"):
        project.require_item("x-1")
    with pytest.raises(UsageError, match=r"no item D-4"):
        project.require_item("D-4")
    project.item_path("D-2").write_text("---\nid: D-2\n---\n")
    with pytest.raises(ItemError) as raised:
        project.require_item("D-2")
    assert "D-2" in str(raised.value) and raised.value.path == "items/D-2.md"
    assert not hasattr(itemstate, "require_item")


# --- the prompt's frontmatter from the metadata cache ------------------------------------------------


def _exact(project: Project, ledger: Ledger, item_id: str) -> int:
    rel = project.item_rel(project.item_path(item_id).name)
    return CacheRow(*ledger.cached_files_for([rel])[rel]).exact


def test_a_prompt_takes_plain_frontmatter_from_the_cache_and_parses_the_rest(opened):
    """A row holding the frontmatter exactly (plain data) stands in for YAML; a date, or a number as a
    key, is more than JSON holds, so that item is parsed again; either way the item is the parsed one."""
    project, ledger = opened
    path = project.item_path("D-2")
    text = path.read_text()
    path.write_text(text.replace("\n---\n", "\nwhen: 2026-12-04\nsizes: {1: small}\n---\n", 1))
    assert drover(project.root, "list").returncode == 0  # fills the cache
    for item_id, exact in (("D-1", 1), ("D-2", 0), ("D-3", 1)):
        assert _exact(project, ledger, item_id) == exact
        parsed = project.require_item(item_id)
        cached = catalogue.read_item(project, ledger, item_id)
        assert (cached.meta, cached.body, cached.text, cached.body_offset, cached.bad_deps) == \
            (parsed.meta, parsed.body, parsed.text, parsed.body_offset, parsed.bad_deps)
    assert itemfile.parse_item(path.read_text(), path, "D").meta["sizes"] == {1: "small"}


def test_a_cache_row_stands_in_only_for_the_file_it_was_made_from(opened):
    """An edit that keeps the size is caught by the mtime; the cached frontmatter is not used then."""
    project, ledger = opened
    assert drover(project.root, "list").returncode == 0
    path = project.item_path("D-1")
    text = path.read_text()
    path.write_text(text.replace("title: first dep", "title: first dap"))
    assert catalogue.read_item(project, ledger, "D-1").meta["title"] == "first dap"
