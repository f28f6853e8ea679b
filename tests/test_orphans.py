"""Orphans: a run whose drover died while its agent runs on is named, with its pid, by list, show
and drive, and `drover stop` ends it."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import BIN, configure, drover, git, ledger_rows, new_item, wait_for


@pytest.fixture
def project(repo):
    configure(repo)
    return repo



def _alive(pid: int) -> bool:
    from drover.agents.procs import pid_alive

    return pid_alive(pid)


def _gone(*pids: int, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
        time.sleep(0.1)
    return not any(_alive(pid) for pid in pids)


def _start_run(project: Path, item: str, pidfile: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    return subprocess.Popen([str(BIN / "drover"), "run", item], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def orphan(project):
    """D-1 with an implementing run whose drover was SIGKILLed: its agent (and a grandchild) run on."""
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    agent, grandchild = map(int, wait_for(pidfile).split())
    # killed once its run records the agent's pid, as an orphan's does: the agent can write its pids
    # first, and a drover killed in between leaves a run no pid names (on a loaded machine, now and then)
    deadline = time.monotonic() + 60
    while [row["pid"] for row in ledger_rows(project, "runs")] != [agent] and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.kill()
    proc.communicate(timeout=30)
    assert _alive(agent)
    yield item, agent, grandchild
    for pid in (agent, grandchild):  # whatever the test did, nothing outlives it
        try:
            os.killpg(pid, signal.SIGKILL) if pid == agent else os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def test_list_and_show_name_an_orphan_with_its_agents_pid(project, orphan):
    item, agent, _ = orphan
    note = f"orphaned: agent pid {agent} runs with no drover attached (`drover stop {item}` ends it)"
    listed = drover(project, "list", check=True).stdout
    assert f"{item}  running" in listed and note in listed
    for args in (("show", item), ("--color", "never", "show", item)):  # the fast path and click's
        shown = drover(project, *args, check=True).stdout
        assert "state: running" in shown and f"why:   {note}" in shown
    data = json.loads(drover(project, "show", item, "--json", check=True).stdout)
    assert data["state"] == "running" and data["reason"] == note
    (run,) = data["runs"]
    assert run["live"] and run["orphaned"] and run["pid"] == agent
    (row,) = json.loads(drover(project, "list", "--json", check=True).stdout)
    assert (row["state"], row["note"]) == ("running", note)
    again = drover(project, "run", item)  # refused, and told how to end it
    assert again.returncode == 1 and again.stderr.strip().endswith(f"(pid {agent}): {note}")


def test_a_live_run_with_its_drover_attached_is_not_an_orphan(project):
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    try:
        wait_for(pidfile)
        data = json.loads(drover(project, "show", item, "--json", check=True).stdout)
        assert data["state"] == "running" and data["reason"] == ""
        assert not data["runs"][0]["orphaned"]
        assert "orphaned" not in drover(project, "list", check=True).stdout
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def test_drive_names_the_orphan_and_exits_1_when_nothing_else_could_be_driven(project, orphan):
    item, agent, _ = orphan
    done = drover(project, "drive", "--finish")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "nothing to drive" not in done.stdout
    assert f"{item}: orphaned: agent pid {agent} runs with no drover attached" in done.stdout  # the header
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"{item} ") and " orphaned " in line]
    assert f"agent pid {agent}" in row  # the summary's row
    assert done.stdout.splitlines()[-1] == "nothing driven: an orphaned run holds its item; `drover stop <id>` ends it"
    assert "0 of 0 approved" not in done.stdout
    named = drover(project, "drive", item)  # given by id: its row says the same
    assert named.returncode == 1 and f"orphaned: agent pid {agent}" in named.stdout


def test_drive_drives_the_other_items_and_still_names_the_orphan(project, orphan):
    item, agent, _ = orphan
    other = new_item(project, "Another thing")
    done = drover(project, "drive")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{other}: approved (reviewed by reviewer)" in done.stdout
    assert f"agent pid {agent}" in done.stdout and "1 of 1 approved" in done.stdout


def test_stop_ends_an_orphan_and_records_it_interrupted(project, orphan):
    item, agent, grandchild = orphan
    done = drover(project, "stop", item, process=True)
    assert done.returncode == 0, done.stderr
    assert "stopped orphaned run" in done.stdout and f"agent pid {agent}" in done.stdout
    assert _gone(agent, grandchild)
    data = json.loads(drover(project, "show", item, "--json", check=True).stdout)
    (run,) = data["runs"]
    assert run["finished"] and run["outcome"] == "interrupted" and "drover stop" in run["reason"]
    assert run["failure"] == "interrupted"
    assert data["state"] == "interrupted"
    assert "drover stop" in (project / run["log_path"]).read_text()
    again = drover(project, "stop", item, process=True)
    assert again.returncode == 1 and "no live run" in again.stderr


def _stop_a_live_run(project: Path) -> tuple[str, subprocess.CompletedProcess, int, int]:
    """D-1's run started by a `drover run` that stays attached, then `drover stop D-1`: (the item,
    what stop did, the agent's pid, its grandchild's), once the drover has recorded the end."""
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    agent, grandchild = map(int, wait_for(pidfile).split())
    done = drover(project, "stop", item, process=True)
    proc.communicate(timeout=30)
    return item, done, agent, grandchild


def test_stop_ends_a_live_run_and_its_drover_records_it_interrupted(project):
    item, done, agent, grandchild = _stop_a_live_run(project)
    assert done.returncode == 0, done.stderr
    assert "its drover recorded the end" in done.stdout
    assert _gone(agent, grandchild)
    (run,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
    assert run["outcome"] == "interrupted" and "drover stop" in run["reason"]


def test_a_run_whose_lock_the_agent_renamed_away_is_still_its_drovers_not_an_orphan(project):
    """The run's lock is a file in a folder the agent may write: renamed away (its drover still
    holds it under the new name) with an unlocked one put in its place, the run read as an orphan,
    and `drover stop` recorded that its drover was gone while that drover lived on (hostile review
    22). The agent's parent, a drover named as one that launches, says it is attached."""
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    try:
        agent, _ = map(int, wait_for(pidfile).split())
        (run_dir,) = (project / ".drover" / "runs").iterdir()
        (run_dir / "drover.lock").rename(run_dir / "kept.lock")  # as the agent, which may write here
        (run_dir / "drover.lock").write_text("")
        data = json.loads(drover(project, "show", item, "--json", check=True).stdout)
        assert data["reason"] == "" and not data["runs"][0]["orphaned"], data
        done = drover(project, "stop", item, process=True)
        assert done.returncode == 0 and "its drover recorded the end" in done.stdout, done.stdout + done.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    assert _gone(agent)
    (run,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
    assert run["outcome"] == "interrupted" and "its drover was gone" not in run["reason"], run


def test_stop_refuses_an_item_without_a_live_run(project):
    item = new_item(project, "Add a thing")
    done = drover(project, "stop", item, process=True)
    assert done.returncode == 1 and done.stderr.strip() == f"drover: {item} has no live run: nothing to stop"
    assert drover(project, "stop", "D-9", process=True).returncode == 2


def _stop_within(project: Path, item: str, seconds: float = 60) -> subprocess.CompletedProcess:
    """`drover stop` as a process that must end by itself (a fifo it opened would hold it)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([str(BIN / "drover"), "stop", item], cwd=project, env=env, capture_output=True, text=True,
                          timeout=seconds)


def test_stop_ends_the_agent_of_a_drover_killed_before_it_recorded_the_agents_pid(project):
    """A drover SIGKILLed between starting its agent and recording the agent's pid (a moment a loaded
    machine widens) left a run no pid names: `drover stop` said there was no live run, and the agent
    ran on. The agent carries the run's mark: stop finds it by that, ends it and records the run."""
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile), "DROVER_FAILPOINT": "agent-started"}
    killed = subprocess.run([str(BIN / "drover"), "run", item], cwd=project, env=env, capture_output=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL
    agent, grandchild = map(int, wait_for(pidfile).split())
    try:
        (run,) = ledger_rows(project, "runs")
        assert run["pid"] is None and run["finished"] is None and _alive(agent)
        done = _stop_within(project, item)
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout == (f"{item}: stopped orphaned run {run['id']} (agent pid {agent} (its pid never recorded)); "
                               "recorded as interrupted\n")
        assert _gone(agent, grandchild)
        (ended,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
        assert ended["outcome"] == "interrupted" and "drover stop" in ended["reason"]
    finally:
        for pid in (agent, grandchild):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("planted", ["link", "fifo", "folder"])
def test_stop_writes_its_mark_in_place_of_what_an_agent_left_in_its_run_folder(project, orphan, planted):
    """The run's folder is the agent's to write: a link named `stopped` to the ledger had `drover
    stop` overwrite the ledger through it, and a fifo there held stop for ever (hostile review 18);
    the orphan's log, a fifo too, held it again."""
    item, agent, grandchild = orphan
    (run,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
    run_dir = project / Path(run["log_path"]).parent
    ledger_before = (project / ".drover" / "ledger.db").read_bytes()[:16]
    mark = run_dir / "stopped"
    if planted == "link":
        mark.symlink_to(project / ".drover" / "ledger.db")
    elif planted == "fifo":
        os.mkfifo(mark)
    else:
        (mark / "inside").mkdir(parents=True)
    log = run_dir / "agent.log"
    log.unlink()
    os.mkfifo(log)
    done = _stop_within(project, item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stopped orphaned run" in done.stdout
    assert _gone(agent, grandchild)
    assert (project / ".drover" / "ledger.db").read_bytes()[:16] == ledger_before == b"SQLite format 3\0"
    assert mark.is_file() and not mark.is_symlink() and "drover stop" in mark.read_text()
    (ended,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
    assert ended["outcome"] == "interrupted" and "drover stop" in ended["reason"]


def test_a_stopped_mark_an_agent_links_to_a_file_does_not_read_as_drover_stop(tmp_path):
    from drover.loop.stop import stopped

    (tmp_path / "real").write_text("stopped by `drover stop`\n")
    assert not stopped(tmp_path)
    (tmp_path / "stopped").symlink_to(tmp_path / "real")
    assert not stopped(tmp_path)
    (tmp_path / "stopped").unlink()
    (tmp_path / "stopped").write_text("stopped by `drover stop`\n")
    assert stopped(tmp_path)


def test_stops_mark_goes_into_the_run_folder_it_opened_whatever_its_name_leads_to_since(project, tmp_path):
    """An agent that swapped its run folder for a link, in a loop, between stop's check of the name
    and its use had stop fail before it ended the agent, or write into the folder the link led to
    (hostile review 20): the mark is written through the descriptor of the folder stop opened."""
    from drover.ledger.project import open_project
    from drover.loop.stop import STOPPED, _mark_stopped, _run_folder

    opened = open_project(project)
    (opened.runs_dir / "r-1").mkdir(parents=True)
    victim = tmp_path / "operator"
    victim.mkdir()
    with _run_folder(opened, "r-1") as folder:
        assert folder is not None
        (opened.runs_dir / "r-1").rename(opened.runs_dir / "swapped")
        (opened.runs_dir / "r-1").symlink_to(victim)
        _mark_stopped(folder)
    assert list(victim.iterdir()) == [] and (opened.runs_dir / "swapped" / STOPPED).is_file()
    (opened.runs_dir / "r-1").unlink()
    (opened.runs_dir / "r-1").symlink_to(victim)
    with _run_folder(opened, "r-1") as folder:
        assert folder is None  # a link in its place: no folder of drover's, no mark


def test_a_run_stop_ends_while_its_drover_runs_has_drovers_last_line_in_its_log(project):
    """agents.md: a timeout or an interruption adds a last line to the log; `drover stop` of a run
    whose drover was attached added none (a new user, overnight on tabulate)."""
    item, done, agent, grandchild = _stop_a_live_run(project)
    assert done.returncode == 0 and _gone(agent, grandchild), done.stderr
    (run,) = json.loads(drover(project, "show", item, "--json", check=True).stdout)["runs"]
    last = (project / run["log_path"]).read_text().rstrip("\n").splitlines()[-1]
    assert last == "[drover] stopped by `drover stop`: ended the agent's processes", last


def test_report_gives_an_orphan_the_drives_status_and_reason_not_open(project, orphan):
    """The morning `drover report` after a drive was SIGKILLed: the item whose agent runs on is failed,
    with the orphan's note and the way to end it, as the drive that met it said; not `open` and silent."""
    item, agent, _ = orphan
    note = f"orphaned: agent pid {agent} runs with no drover attached (`drover stop {item}` ends it)"
    data = json.loads(drover(project, "report", "--json", check=True).stdout)
    (line,) = [one for one in data["items"] if one["id"] == item]
    assert (line["status"], line["reason"]) == ("failed", note)
    assert data["failed"] == [item]
    text = drover(project, "report", "--since", "1h", check=True).stdout
    assert f"{item}  Add a thing: {note}" in text


def test_a_drive_after_a_sigkilled_one_reports_the_night_from_the_killed_drives_start(project):
    """A new user's night: `drive --finish --report night.html` was SIGKILLed after it merged D-1, and
    `drover drive` again resumed D-2. The page (and [notify]) covered only the second drive: D-1's merge,
    the killed drive's work, was missing from the morning's record. The drive that follows a drive
    which never ended covers from that drive's start, and says so."""
    first, second = new_item(project, "First thing"), new_item(project, "Second thing")
    until = project.parent / "go-on"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "approving",
           "AGENT_SLOW_ITEM": f"{second}:120", "AGENT_SLOW_UNTIL": str(until)}
    page = project.parent / "night.html"
    killed = subprocess.Popen([str(BIN / "drover"), "drive", "--finish", "--report", str(page)], cwd=project,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        shown = json.loads(drover(project, "show", second, "--json", check=True).stdout)
        if shown["runs"]:
            break
        time.sleep(0.1)
    assert json.loads(drover(project, "show", first, "--json", check=True).stdout)["done"]
    killed.kill()
    killed.communicate(timeout=30)
    drover(project, "stop", second)  # its agent, when it outlived its drover
    until.write_text("go on\n")
    done = subprocess.run([str(BIN / "drover"), "drive", "--finish", "--report", str(page)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    merged = re.findall(r"<tr><td>merged</td><td>(D-\d)</td>", page.read_text())
    assert merged == [first, second], page.read_text()
    said = [line for line in done.stdout.splitlines() if line.startswith("report written to")]
    assert len(said) == 1 and "an earlier drive that ended without its report" in said[0], done.stdout


def test_a_worktree_whose_making_a_kill_cut_short_is_checked_out_before_an_agent_works_in_it(project):
    """A drive SIGKILLed between `git worktree add --no-checkout` and the checkout that follows left
    D-2's worktree registered with no index and no files; the next drive reused it as it was, the
    agent's `git add` of its one file made a commit deleting every other file of the repository, and
    the finish refused it for changing drover's own files. A worktree never checked out is checked
    out before anything runs in it."""
    item = new_item(project, "Add a thing")
    worktree = project / ".drover" / "worktrees" / item
    git(project, "worktree", "add", "--quiet", "--no-checkout", "-b", f"drover/{item.lower()}", str(worktree), "main")
    assert not (worktree / "drover.toml").exists()  # what the kill left: registered, nothing checked out
    drover(project, "run", item, check=True)
    changed = git(project, "diff", "--name-only", "main", f"drover/{item.lower()}").split()
    assert changed == [f"{item.lower()}.txt"], changed
    assert (worktree / "drover.toml").exists()
