"""Item file and ledger agree after a kill at every window of a write (the intent journal),
checks happen under the lock, and `check` names the repair for any disagreement."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import BIN, FINDINGS, assert_agrees, git, made_once, run
from drover.items.file import CLEARED_MARKER, read_item
from drover.ledger.db import Ledger
@pytest.fixture
def project(repo):
    """drover init, items D-1 and D-2 committed
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_recovery",), lambda: _project(repo))
    return repo


def _project(repo) -> None:
    assert run(repo, "init").returncode == 0
    for title in ("one", "two"):
        assert run(repo, "new", title).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")


WRITES = {
    "new": (["new", "three"], None),
    "request-changes": (["request-changes", "D-1"], FINDINGS),
    "close-changes": (["close-changes", "D-1", "--note", "done"], None),
    "audit": (["audit", "D-1", "--level", "reviewed"], None),
}


@pytest.mark.parametrize("point", ["staged", "committed", "renamed"])
@pytest.mark.parametrize("command", list(WRITES))
def test_a_kill_at_each_window_of_a_write_is_finished_or_undone(project, command, point):
    if command in ("close-changes", "audit"):
        assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    args, stdin = WRITES[command]
    killed = run(project, *args, stdin=stdin, env={"DROVER_FAILPOINT": point}, process=True)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    before_recovery = read_item(project / "items" / "D-1.md", "D").text
    seen = assert_agrees(project)
    after = read_item(project / "items" / "D-1.md", "D")
    if point == "staged":  # nothing committed: nothing happened
        assert after.text == before_recovery
        assert not (project / "items" / "D-3.md").exists()
    elif command == "new":
        assert (project / "items" / "D-3.md").exists()
    elif command == "request-changes":
        assert after.outstanding and seen["outstanding"] == 1
    else:
        assert after.cleared and seen["cleared"] == 1
    # and the next command works as usual
    assert run(project, "list").returncode == 0


def test_a_killed_write_past_the_round_cap_keeps_the_findings_and_parks(project):
    for _ in range(3):
        assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    killed = run(project, "request-changes", "D-1", stdin="fourth\n", env={"DROVER_FAILPOINT": "committed"}, process=True)
    assert killed.returncode == -9
    assert_agrees(project)
    kept = list((project / ".drover" / "parked").glob("D-1-*.md"))
    assert [path.read_text() for path in kept] == ["fourth\n"]
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        assert ledger.item_row("D-1")["parked"] == 1


def test_a_file_edited_by_hand_after_a_kill_keeps_the_edit_and_check_names_the_repair(project):
    assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    killed = run(project, "close-changes", "D-1", env={"DROVER_FAILPOINT": "committed"}, process=True)
    assert killed.returncode == -9
    path = project / "items" / "D-1.md"
    path.write_text(path.read_text() + "\nA line the operator added.\n")
    assert run(project, "list").returncode == 0  # recovery: the edit wins, the round stays cleared
    assert "A line the operator added." in path.read_text()
    checked = run(project, "check")
    assert checked.returncode == 1
    assert "D-1 Changes holds findings but the ledger has every round cleared" in checked.stdout
    assert "`drover close-changes D-1`" in checked.stdout
    problems = json.loads(run(project, "check", "--json").stdout)["problems"]
    assert [problem["code"] for problem in problems
            if problem["path"] == "items/D-1.md" and problem["severity"] == "error"] == ["changes-disagree"]
    assert run(project, "close-changes", "D-1").returncode == 0
    assert "D-1 Changes" not in run(project, "check").stdout


def test_a_cleared_file_with_an_uncleared_round_is_reported_and_close_changes_repairs_it(project):
    assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    path = project / "items" / "D-1.md"
    text = path.read_text()
    path.write_text(text.replace(FINDINGS.replace("## ", "### ").strip(), CLEARED_MARKER + "\nNothing is outstanding: round 1 was discharged by hand."))
    checked = run(project, "check")
    assert "D-1 Changes is cleared but the ledger has round 1 uncleared" in checked.stdout
    assert "`drover close-changes D-1`" in checked.stdout
    problems = json.loads(run(project, "check", "--json").stdout)["problems"]
    assert [problem["code"] for problem in problems
            if problem["path"] == "items/D-1.md" and problem["severity"] == "error"] == ["changes-disagree"]
    repaired = run(project, "close-changes", "D-1")
    assert repaired.returncode == 0 and "cleared in the ledger" in repaired.stdout
    assert_agrees(project)


def test_concurrent_close_changes_clear_once(project):
    """"Outstanding" is read under the lock: of many racing close-changes, exactly one clears."""
    assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    racers = [subprocess.Popen([str(BIN / "drover"), "close-changes", "D-1", "--note", f"racer {n}"],
                               cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for n in range(8)]
    codes = [racer.wait() for racer in racers]
    for racer in racers:
        racer.stdout.close()
        racer.stderr.close()
    assert sorted(codes) == [0] + [1] * 7
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        cleared = [e for e in ledger.events("D-1") if e["command"] == "close-changes"]
    assert len(cleared) == 1
    assert_agrees(project)


def test_concurrent_audits_clear_once_and_record_every_audit(project):
    assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    racers = [subprocess.Popen([str(BIN / "drover"), "audit", "D-1", "--level", "reviewed", "--by", f"r{n}"],
                               cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for n in range(6)]
    outs = [racer.communicate()[0] for racer in racers]
    assert [racer.returncode for racer in racers] == [0] * 6
    assert sum("cleared by the approval" in out for out in outs) == 1
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        assert len(ledger.audits("D-1")) == 6
    assert_agrees(project)


def _imported(project, args, stdin=None) -> list[str]:
    code = "import sys; from drover.cli.main import main; sys.argv = ['drover', *sys.argv[1:]]; main()"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code, *args], cwd=project,
                          input=stdin, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]


@pytest.mark.parametrize("args", [["show", "D-1"], ["prompt", "D-1", "--slot", "implement"], ["list"]])
def test_reads_of_a_migrated_ledger_do_not_import_sqlite_utils(project, args):
    """sqlite-utils writes the ledger's rows and is imported at the first write: a command that
    writes nothing (its items' cache rows are current) does not pay for the import."""
    assert run(project, "list").returncode == 0  # every item file's cache row written
    imported = _imported(project, args)
    assert "drover.ledger.db" in imported
    assert not [name for name in imported if name.startswith("sqlite_utils")]


@pytest.mark.parametrize("args, stdin", [
    (["new", "four"], None),
    (["request-changes", "D-1"], FINDINGS),
    (["audit", "D-1", "--level", "reviewed"], None),
    (["park", "D-2", "--why", "later"], None),
])
def test_writes_write_their_rows_through_sqlite_utils(project, args, stdin):
    imported = _imported(project, args, stdin)
    assert "drover.ledger.writes" in imported and "sqlite_utils.db" in imported
