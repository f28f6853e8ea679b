"""Outbox mode (a worker's commands) and its replay on the coordinator, for every operation."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from drover.executors import outbox
from drover.ledger.db import Ledger
from drover.ledger.rows import NewRun
from drover.ledger.project import open_project
from helpers import configure, drover, git, new_item

# Every writing command an agent may call, with arguments that succeed in this order.
SEQUENCE = [
    ("new", "A follow-up found in review", "-f", "D-1"),
    ("request-changes", "D-1", "--file", "-"),
    ("close-changes", "D-1", "--note", "fixed"),
    ("request-changes", "D-1", "--file", "-"),
    ("audit", "D-1", "--level", "reviewed", "--note", "looks right"),
    ("dispose", "D-1", "7", "--as", "close"),
    ("park", "D-2", "--why", "needs a decision"),
    ("unpark", "D-2"),
]
FINDINGS = "# The edge case is missing\n\nHandle the empty list.\n"


def view(root: Path) -> dict:
    """What the operations decide, without the times they ran at."""
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    try:
        def rows(sql: str) -> list[tuple]:
            return conn.execute(sql).fetchall()
        shown = {
            "rounds": rows("SELECT item, number, digest, headline, by, cleared_at IS NOT NULL, cleared_by "
                           "FROM rounds ORDER BY item, number"),
            "audits": rows("SELECT item, level, by, note FROM audits ORDER BY id"),
            "dispositions": rows("SELECT item, issue, disposition, by, note FROM dispositions ORDER BY id"),
            "items": rows("SELECT id, parked, parked_reason, done FROM items ORDER BY id"),
            "events": rows("SELECT command, item, by FROM events ORDER BY id"),
        }
    finally:
        conn.close()
    stamp = re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z")
    shown["files"] = {path.name: stamp.sub("<time>", path.read_text()) for path in sorted((root / "items").glob("*.md"))}
    return shown


@pytest.fixture
def project(repo):
    configure(repo)
    item = new_item(repo, "Handle lists")
    path = repo / "items" / f"{item}.md"
    path.write_text(path.read_text().replace("deps: []", "deps: []\ncloses: [7]"))
    git(repo, "commit", "-qam", "closes #7")
    return repo


def run_all(root: Path, env: dict | None = None) -> None:
    for args in SEQUENCE:
        drover(root, *args, stdin=FINDINGS if args[0] == "request-changes" else None,
               env={"DROVER_REPO": str(root), **(env or {})}, check=True)


def test_replaying_a_workers_outbox_equals_running_the_commands_here(project, tmp_path):
    worker = tmp_path / "worker"
    local = tmp_path / "local"
    shutil.copytree(project, worker, symlinks=True)
    shutil.copytree(project, local, symlinks=True)
    box = tmp_path / "outbox.jsonl"
    run_all(worker, {"DROVER_OUTBOX": str(box)})
    run_all(local)
    entries = outbox.read(box.read_text())
    assert [entry["op"] for entry in entries] == [args[0] for args in SEQUENCE]
    assert view(project) != view(local)  # nothing reached the coordinator before the replay
    coordinator = open_project(project)
    with Ledger(coordinator.ledger_path) as ledger:
        refused = outbox.replay(coordinator, ledger, entries, run_id="", head_of=lambda item: "")
    assert refused == []
    assert view(project) == view(local)
    assert view(project)["audits"] == [("D-1", "reviewed", "Test Operator", "looks right")]


def test_outbox_mode_validates_as_today_and_records_nothing_refused(project, tmp_path):
    box = tmp_path / "outbox.jsonl"
    env = {"DROVER_OUTBOX": str(box)}
    assert drover(project, "close-changes", "D-1", env=env).returncode == 1  # nothing outstanding
    assert drover(project, "dispose", "D-1", "8", "--as", "close", env=env).returncode == 2  # not closed by D-1
    assert drover(project, "park", "D-1", "--why", " ", env=env).returncode == 2
    assert not box.exists() or box.read_text() == ""
    drover(project, "park", "D-1", "--why", "operator call", env=env, check=True)
    [entry] = outbox.read(box.read_text())
    assert entry["op"] == "park" and entry["args"] == {"item_id": "D-1", "why": "operator call"}
    assert entry["head"] == git(project, "rev-parse", "HEAD").strip()


def test_an_audit_on_a_branch_that_moved_is_refused_on_replay(project):
    coordinator = open_project(project)
    seen = git(project, "rev-parse", "HEAD").strip()
    (project / "later.txt").write_text("a commit after the review looked\n")
    git(project, "add", "later.txt")
    git(project, "commit", "-qm", "later")
    moved = git(project, "rev-parse", "HEAD").strip()
    entries = [{"op": "audit", "args": {"item_id": "D-1", "level": "reviewed", "by": "", "note": ""},
                "run": "", "head": seen}]
    with Ledger(coordinator.ledger_path) as ledger:
        refused = outbox.replay(coordinator, ledger, entries, run_id="", head_of=lambda item: moved)
    assert len(refused) == 1 and "refused" in refused[0] and seen[:12] in refused[0] and moved[:12] in refused[0]
    assert view(project)["audits"] == []
    # the same audit at the head the worker saw is recorded
    with Ledger(coordinator.ledger_path) as ledger:
        assert outbox.replay(coordinator, ledger, entries, run_id="", head_of=lambda item: seen) == []
    assert [row[1] for row in view(project)["audits"]] == ["reviewed"]


def test_new_from_an_issue_on_a_worker_is_refused_not_lost(project, tmp_path):
    """`new --issue` makes its item in the ledger it opens, and no outbox line: on a worker that is
    the scratch ledger, thrown away with the worker. Refused there, nothing written."""
    box = tmp_path / "outbox.jsonl"
    before = sorted(path.name for path in (project / "items").iterdir())
    done = drover(project, "new", "--issue", "7", env={"DROVER_OUTBOX": str(box)})
    assert done.returncode == 1 and "new --issue is the operator's on a worker" in done.stderr
    assert sorted(path.name for path in (project / "items").iterdir()) == before and not box.exists()


def test_replay_acts_as_the_run_and_reports_what_the_ledger_refuses(project):
    coordinator = open_project(project)
    with Ledger(coordinator.ledger_path) as ledger:
        ledger.start_run(NewRun(id="r1", item="D-1", slot="review", agent="remote-reviewer"))
        refused = outbox.replay(coordinator, ledger, [
            {"op": "audit", "args": {"item_id": "D-1", "level": "claimed", "by": "", "note": ""}, "head": "abc"},
            {"op": "close-changes", "args": {"item_id": "D-1", "note": ""}, "head": ""},
        ], run_id="r1", head_of=lambda item: "")
    assert view(project)["audits"] == [("D-1", "claimed", "remote-reviewer", "")]
    assert len(refused) == 1  # an argument drover does not take refuses the whole outbox: test_validation.py
    assert "no outstanding changes" in refused[0]


@pytest.mark.parametrize("text", ["not json\n", json.dumps({"op": "rm -rf", "args": {}}) + "\n",
                                  json.dumps({"op": "park", "args": []}) + "\n"])
def test_an_outbox_line_that_is_no_operation_is_refused(text):
    with pytest.raises(Exception, match="outbox line 1"):
        outbox.read(text)
