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
from helpers import configure, drover, git, ledger_rows, made_once, new_item

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
    """drover configured, item D-1 (closes #7) committed
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_outbox",), lambda: _project(repo))
    return repo


def _project(repo: Path) -> None:
    configure(repo)
    item = new_item(repo, "Handle lists")
    path = repo / "items" / f"{item}.md"
    path.write_text(path.read_text().replace("deps: []", "deps: []\ncloses: [7]"))
    git(repo, "commit", "-qam", "closes #7")


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


def test_the_writing_commands_import_neither_the_executor_interface_nor_the_replays_reader(project):
    """An agent's writing command (a review's audit, above all) is a whole drover process, and a
    drive starts one for each review: it loads the outbox's writing side, not the executor interface
    (base.py) nor the ledger export's line reader that only a replay needs (docs/decisions.md)."""
    import subprocess
    import sys

    code = ("import sys\nfrom drover.cli.main import cli\n"
            "try:\n    cli(sys.argv[1:], prog_name='drover')\n"
            "finally:\n    print(' '.join(sorted(sys.modules)), file=sys.stderr)\n")
    for args in SEQUENCE[:5]:
        done = subprocess.run([sys.executable, "-c", code, *args], cwd=project, capture_output=True, text=True,
                              input=FINDINGS if args[0] == "request-changes" else None)
        assert done.returncode == 0, done.stderr[-2000:]
        modules = done.stderr.split()
        assert "drover.executors.outbox" in modules and "drover.ledger.writes" in modules
        assert [name for name in ("drover.executors.base", "drover.ledger.jsonl") if name in modules] == [], args


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


@pytest.mark.parametrize("text", [
    # what Python's json refused with a ValueError or a RecursionError, never caught (hostile review 27)
    '{"op": "park", "args": {"item_id": "D-1", "why": "x"}, "head": "", "run": "", "n": ' + "9" * 5000 + "}\n",
    "[" * 100_000 + "\n",
    # a key twice: Python reads the last, other tools the first
    '{"op": "park", "args": {"item_id": "D-1", "why": "a"}, "args": {"item_id": "D-1", "why": "b"}}\n',
])
def test_an_outbox_line_json_cannot_take_whole_is_refused_by_its_line(text):
    with pytest.raises(outbox.DroverError, match="outbox line 1: not JSON"):
        outbox.read(text)


# --- hostile review 27: the caps on one run's outbox, and files the worker reads ---------------

def park_line(why: str = "needs a decision") -> str:
    return json.dumps({"op": "park", "args": {"item_id": "D-1", "why": why}, "run": "", "head": ""}) + "\n"


def parked(root: Path) -> int:
    return sum(event["command"] == "park" for event in ledger_rows(root, "events", "rowid"))


def run_end(root: Path) -> tuple[str, str]:
    run = ledger_rows(root, "runs")[0]
    return run["outcome"], run["reason"]


@pytest.mark.parametrize("name, text", [
    ("bytes", park_line("x" * outbox.OUTBOX_BYTES)),
    ("lines", park_line() * (outbox.OUTBOX_OPERATIONS + 1)),
])
def test_an_outbox_past_a_cap_fails_its_run_and_replays_nothing(project, name, text):
    """A worker's agent wrote a huge outbox (one enormous line, or a million parks): the coordinator
    kept it and replayed every line into the ledger. Past a cap it is refused whole, the run fails."""
    from drover.loop import runs
    from helpers import InlineExecutor

    def tamper(result: dict) -> None:
        result["outbox"] = text

    coordinator = open_project(project)
    with Ledger(coordinator.ledger_path) as ledger:
        launch = runs.prepare(coordinator, ledger, "D-1", "implement")
        done = runs.execute(coordinator, ledger, launch, echo=False, executor=InlineExecutor(tamper=tamper))
    outcome, reason = run_end(project)
    assert done.outcome == outcome == "failed" and reason.startswith("the worker's outbox was refused: it holds"), reason
    assert "the cap" in reason and reason.endswith("nothing of it was replayed")
    assert parked(project) == 0
    assert not list((project / ".drover" / "runs").glob("*/outbox.jsonl")) or name == "lines"


def test_an_outbox_argument_past_its_cap_refuses_the_outbox(project):
    coordinator = open_project(project)
    entries = outbox.read(park_line() + park_line("y" * (outbox.ARGUMENT_BYTES + 1)))
    with Ledger(coordinator.ledger_path) as ledger, pytest.raises(outbox.Refused, match=":2: park why holds"):
        outbox.replay(coordinator, ledger, entries, run_id="", head_of=lambda item: "", source="box")
    assert parked(project) == 0


HOSTILE_AGENT = """import os, sys
from pathlib import Path
sys.stdin.read()
box = Path(os.environ["DROVER_OUTBOX"])
how = os.environ["PLANT"]
if how == "fifo":
    os.mkfifo(box)
    log = box.parent / "agent.log"
    log.unlink()
    os.mkfifo(log)
elif how == "link":
    box.symlink_to("/dev/zero")
    log = box.parent / "agent.log"
    log.unlink()
    log.symlink_to("/dev/zero")
elif how == "huge":
    with open(box, "wb") as handle:
        handle.truncate(%d)
else:
    box.write_bytes(b'{"op": "park", "args": {"item_id": "D-1", "why": "\\xff"}}\\n')
""" % (outbox.OUTBOX_BYTES + 1)


@pytest.mark.parametrize("plant, said", [
    ("fifo", "it is not a regular file"), ("link", "it is a symbolic link"),
    ("huge", "it holds more than 8,388,608 bytes"), ("bytes", "it is not UTF-8 text"),
])
def test_a_worker_takes_no_outbox_or_log_through_a_fifo_a_link_or_past_the_cap(project, tmp_path, monkeypatch,
                                                                              plant, said):
    """The agent owns the worker's scratch folder: a fifo in the outbox's or the log's place held the
    worker, and so the drive, for ever; a link to /dev/zero read until memory ran out; text that is
    not UTF-8 raised in the worker (the run `interrupted`, resumed by the next pass)."""
    import sys
    import threading

    from drover.loop import runs
    from helpers import InlineExecutor

    agent = tmp_path / "hostile.py"
    agent.write_text(HOSTILE_AGENT)
    config = project / "drover.toml"
    config.write_text(config.read_text() + f'\n[agent.implement]\ncommand = "{sys.executable} {agent}"\n')
    git(project, "commit", "-qam", "a hostile implementer")
    monkeypatch.setenv("PLANT", plant)
    done: list = []

    def drive() -> None:
        coordinator = open_project(project)
        with Ledger(coordinator.ledger_path) as ledger:
            launch = runs.prepare(coordinator, ledger, "D-1", "implement")
            done.append(runs.execute(coordinator, ledger, launch, echo=False, executor=InlineExecutor()))

    worker = threading.Thread(target=drive, daemon=True)
    worker.start()
    worker.join(60)
    assert done, "the worker is still reading what the agent planted"
    outcome, reason = run_end(project)
    assert done[0].outcome == outcome == "failed" and reason.startswith(f"the worker's outbox was refused: {said}"), reason
    assert parked(project) == 0


LONG_LOG_AGENT = """import os, sys
from pathlib import Path
sys.stdin.read()
log = Path(os.environ["DROVER_OUTBOX"]).parent / "agent.log"
with open(log, "r+b") as handle:
    handle.truncate(3 << 20)  # three MiB of NULs, no disk spent
with open(log, "ab") as handle:
    handle.write(b"the agent's last words\\n")
"""


def test_a_worker_sends_home_only_the_end_of_an_agents_log_past_its_cap(project, tmp_path, monkeypatch):
    """An agent can write its log without end, and the worker sent it home whole, held in the
    worker's, Ray's and the coordinator's memory: it sends its last LOG_BYTES after a line saying so."""
    import sys

    from drover.executors import worker
    from drover.loop import runs
    from helpers import InlineExecutor

    monkeypatch.setattr(worker, "LOG_BYTES", 1 << 20)
    agent = tmp_path / "long.py"
    agent.write_text(LONG_LOG_AGENT)
    config = project / "drover.toml"
    config.write_text(config.read_text() + f'\n[agent.implement]\ncommand = "{sys.executable} {agent}"\n')
    git(project, "commit", "-qam", "an implementer with a long log")
    coordinator = open_project(project)
    with Ledger(coordinator.ledger_path) as ledger:
        launch = runs.prepare(coordinator, ledger, "D-1", "implement")
        runs.execute(coordinator, ledger, launch, echo=False, executor=InlineExecutor())
    kept = launch.log_path.read_bytes()
    assert len(kept) < (1 << 20) + 4096, len(kept)
    assert b"[drover] the agent's log held 3,145,7" in kept and b"than the 1,048,576 a worker sends" in kept
    assert b"the agent's last words\n" in kept
