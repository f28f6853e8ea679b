"""What comes from outside is validated (issue 23, "Also found"): outbox lines, worker results,
`ledger import` rows, the ledger's own rows (check), non-UTF-8 arguments and deep template nesting.

Each is refused with one line naming where, and nothing of it is written.
"""
from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from drover import outbox, runs
from drover.errors import Refused
from drover.executors import Collected
from drover.executors.ray import base_bundle, bring_home, make_payload
from drover.executors.worker import work
from drover.ledger import Ledger
from drover.project import open_project
from drover.rows import NewRun
from helpers import configure, drover, git, ledger_tables, new_item


@pytest.fixture
def project(repo):
    configure(repo)
    new_item(repo, "Handle lists")
    return repo


# --- outbox lines --------------------------------------------------------------------------

def replay(root: Path, entries: list[dict[str, Any]], run_id: str = "") -> list[str]:
    coordinator = open_project(root)
    with Ledger(coordinator.ledger_path) as ledger:
        if run_id:
            ledger.start_run(NewRun(id=run_id, item="D-1", slot="review", agent="remote-reviewer"))
        return outbox.replay(coordinator, ledger, entries, run_id=run_id, head_of=lambda item: "",
                             source=".drover/runs/r1/outbox.jsonl")


PARK = {"op": "park", "args": {"item_id": "D-1", "why": "a fine first line"}, "run": "", "head": ""}
BAD_LINES = {
    "findings-not-text": {"op": "request-changes", "args": {"item_id": "D-1", "findings": 7}},
    "item-id-a-list": {"op": "close-changes", "args": {"item_id": ["D-1"], "note": ""}},
    "item-id-not-an-id": {"op": "park", "args": {"item_id": "../../etc/passwd", "why": "x"}},
    "origin-an-object": {"op": "new", "args": {"title": "t", "kind": "feature", "deps": [], "finding_source": "",
                                               "origin": {"a": 1}}},
    "dep-not-an-id": {"op": "new", "args": {"title": "t", "kind": "feature", "deps": ["D-1", 5],
                                            "finding_source": ""}},
    "issue-huge": {"op": "dispose", "args": {"item_id": "D-1", "issue": 10**23, "disposition": "close"}},
    "issue-a-bool": {"op": "dispose", "args": {"item_id": "D-1", "issue": True, "disposition": "close"}},
    "note-a-lone-surrogate": {"op": "close-changes", "args": {"item_id": "D-1", "note": "x\udcff"}},
    "unknown-argument": {"op": "park", "args": {"item_id": "D-1", "why": "x", "extra": 1}},
    "missing-argument": {"op": "park", "args": {"item_id": "D-1"}},
    "head-not-a-commit": {"op": "park", "args": {"item_id": "D-1", "why": "x"}, "head": ["HEAD"]},
    "audit-by-someone-else": {"op": "audit", "args": {"item_id": "D-1", "level": "claimed", "by": "Test Operator",
                                                      "note": ""}},
}


@pytest.mark.parametrize("name", sorted(BAD_LINES))
def test_a_bad_outbox_line_refuses_the_whole_outbox_naming_its_line(project, name):
    before = ledger_tables(project / ".drover" / "ledger.db")
    files = sorted(path.name for path in (project / "items").iterdir())
    with pytest.raises(Refused) as refused:
        replay(project, [PARK, BAD_LINES[name]], run_id="r1")
    assert str(refused.value).startswith(".drover/runs/r1/outbox.jsonl:2: ")
    assert "\n" not in str(refused.value)
    after = ledger_tables(project / ".drover" / "ledger.db")
    for table in ("runs", "activity"):  # what starting the acting run wrote
        after[table] = before[table]
    assert after == before  # not even the good first line was replayed
    assert sorted(path.name for path in (project / "items").iterdir()) == files


def test_an_outbox_audit_may_name_the_runs_own_agent(project):
    entry = {"op": "audit", "args": {"item_id": "D-1", "level": "claimed", "by": "remote-reviewer", "note": ""}}
    assert replay(project, [entry], run_id="r1") == []
    conn = sqlite3.connect(project / ".drover" / "ledger.db")
    assert conn.execute("SELECT by FROM audits").fetchall() == [("remote-reviewer",)]


def test_every_operation_argument_has_a_type_rule():
    import inspect

    for op, function in outbox.OPERATIONS.items():
        for parameter in list(inspect.signature(function).parameters.values())[2:]:
            assert str(parameter.annotation) in outbox._RULES, (op, parameter.name)


# --- worker results ------------------------------------------------------------------------

class TamperedHandle:
    """Runs the real worker in this process, then hands bring_home what `tamper` made of its result."""

    def __init__(self, project, ledger, launch, tamper: Callable[[dict[str, Any]], None]):
        self.args = (project, ledger, launch)
        self.tamper = tamper

    def stream(self):
        return iter(())

    def cancel(self) -> None:
        pass

    def collect(self, cancel: threading.Event | None = None) -> Collected:
        project, ledger, launch = self.args
        base = base_bundle(project.root, project.config.base)
        base_sha = git(project.root, "rev-parse", project.config.base).strip()
        result = work(make_payload(project, ledger, launch, base_sha), base)
        result["node"] = "inline"
        self.tamper(result)
        return bring_home(project, ledger, launch, result)


class TamperedExecutor:
    name = "inline"

    def __init__(self, tamper: Callable[[dict[str, Any]], None]):
        self.tamper = tamper

    def submit(self, project, ledger, launch, *, echo, on_start, progress=None):
        return TamperedHandle(project, ledger, launch, self.tamper)

    def where(self) -> str:
        return "this process"

    def close(self) -> None:
        pass


def launch_tampered(root: Path, tamper: Callable[[dict[str, Any]], None]) -> runs.RunResult:
    project = open_project(root)
    with Ledger(project.ledger_path) as ledger:
        launch = runs.prepare(project, ledger, "D-1", "implement")
        return runs.execute(project, ledger, launch, echo=False, executor=TamperedExecutor(tamper))


def run_row(root: Path) -> tuple:
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    try:
        return conn.execute("SELECT finished IS NOT NULL, outcome, reason, input_tokens FROM runs").fetchone()
    finally:
        conn.close()


@pytest.mark.parametrize("field, value", [
    ("usage", {"input_tokens": "lots"}), ("usage", {"output_tokens": -5}), ("usage", {"cost_usd": "free"}),
    ("exit_code", "0"), ("outcome", "approved"), ("log", "text, not bytes"), ("elapsed", float("nan")),
])
def test_a_bad_worker_result_ends_the_run_failed_and_takes_nothing(project, field, value):
    def tamper(result: dict[str, Any]) -> None:
        result[field] = value

    done = launch_tampered(project, tamper)
    assert done.outcome == "failed"
    finished, outcome, reason, tokens = run_row(project)
    assert (finished, outcome, tokens) == (1, "failed", None)
    assert reason.startswith(f"the worker's result was refused: {field}")
    assert git(project, "branch", "--list", "drover/d-1", "--format=%(objectname)").strip() == \
        git(project, "rev-parse", "main").strip()  # the worker's commit was not taken
    shown = drover(project, "show", "D-1")
    assert shown.returncode == 0 and "failed" in shown.stdout, shown.stderr


def test_a_bad_outbox_line_in_a_worker_result_is_a_note_naming_the_kept_outbox(project):
    def tamper(result: dict[str, Any]) -> None:
        result["outbox"] = json.dumps({"op": "request-changes", "args": {"item_id": "D-1", "findings": 7},
                                       "run": "", "head": ""}) + "\n"

    done = launch_tampered(project, tamper)
    assert (done.outcome, done.exit_code) == ("exited", 0)
    [note] = done.notes
    kept = next((project / ".drover" / "runs").glob("*/outbox.jsonl"))
    assert f"{kept.relative_to(project)}:1: request-changes findings must be a string" in note
    assert sqlite3.connect(project / ".drover" / "ledger.db").execute("SELECT count(*) FROM rounds").fetchone() == (0,)
