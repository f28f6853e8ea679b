"""run, review, finish and drive on real git repositories with a real scripted agent."""
from __future__ import annotations

import json
import os
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import implemented, AGENT, BIN, configure, drover, git, ledger_rows, ledger_tables, new_item, one_line  # noqa: F401

def snapshot(root: Path) -> dict:
    """Everything a dry run must leave alone: ledger rows, git refs and worktrees, the file tree."""
    ledger = root / ".drover" / "ledger.db"
    # the metadata cache may refresh on a dry run (SPEC 6); nothing else may change
    rows = {name: table for name, table in ledger_tables(ledger).items() if name != "item_files"} \
        if ledger.exists() else {}
    files = sorted(
        str(path.relative_to(root)) for path in root.rglob("*")
        if ".git" not in path.parts and not path.name.startswith("ledger.db")
    )
    return {
        "rows": rows,
        "refs": git(root, "for-each-ref"),
        "worktrees": git(root, "worktree", "list", "--porcelain"),
        "status": git(root, "status", "--porcelain"),
        "files": files,
    }


@pytest.fixture
def project(repo):
    configure(repo)
    return repo


def test_dry_run_writes_nothing(project):
    item = new_item(project, "Add a thing")
    drover(project, "list", check=True)  # the metadata cache may refresh before the snapshot
    before = snapshot(project)
    done = drover(project, "run", item, "--dry-run", check=True)
    assert "argv: " in done.stdout and str(AGENT) in done.stdout
    assert f"env: DROVER_ITEM={item}" in done.stdout
    assert "branch: drover/d-1" in done.stdout
    assert "Add a thing" in done.stdout  # the prompt itself
    assert snapshot(project) == before


def test_dry_run_names_the_agents_time_limit_and_says_when_there_is_none(project):
    item = new_item(project, "Add a thing")
    assert "(timeout 2h)" in drover(project, "run", item, "--dry-run", check=True).stdout
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('timeout = "2h"', 'timeout = "0"', 1))
    shown = drover(project, "run", item, "--dry-run", check=True).stdout
    assert "(no timeout)" in shown and "(timeout 0" not in shown


def test_dry_run_works_without_the_agent_binary(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('preset = "script"', 'preset = "claude"')
                      .replace(f'command = "{sys.executable} {AGENT}"', 'command = ""'))
    item = new_item(project, "Add a thing")
    done = drover(project, "run", item, "--dry-run", env={"PATH": str(BIN) + os.pathsep + "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "not installed" in done.stdout


def test_missing_binary_refuses_and_records_nothing(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('preset = "script"', 'preset = "claude"')
                      .replace(f'command = "{sys.executable} {AGENT}"', 'command = ""'))
    item = new_item(project, "Add a thing")
    drover(project, "list", check=True)
    before = snapshot(project)
    done = drover(project, "run", item, env={"PATH": str(BIN) + os.pathsep + "/usr/bin:/bin"})
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "claude" in done.stderr
    assert snapshot(project) == before
    # an item still holding the placeholder: the refusal alone, not the warning a run would give
    unwritten = drover(project, "new", "Unwritten", check=True).stdout.split()[0]
    done = drover(project, "run", unwritten, env={"PATH": str(BIN) + os.pathsep + "/usr/bin:/bin"})
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "claude" in done.stderr, done.stderr


def test_run_records_the_run_with_its_prompt_log_and_provenance(project):
    item = new_item(project, "Add a thing")
    marker = project.parent / "env.json"
    done = drover(project, "run", item, env={"AGENT_MARKER": str(marker)}, check=True)
    assert "exited 0" in done.stdout
    shown = json.loads(drover(project, "show", item, "--json", check=True).stdout)
    (run,) = shown["runs"]
    assert run["slot"] == "implement" and run["agent"] == "implementer" and run["exit_status"] == 0
    assert run["finished"] and run["resolved_source"] and len(run["prompt_sha256"]) == 64
    prompt = (project / run["prompt_path"]).read_text()
    assert "Add a thing" in prompt
    import hashlib
    assert hashlib.sha256(prompt.encode()).hexdigest() == run["prompt_sha256"]
    assert "script agent: implement D-1" in (project / run["log_path"]).read_text()
    env = json.loads(marker.read_text())
    assert env["DROVER_ITEM"] == item and env["DROVER_SLOT"] == "implement" and env["DROVER_RUN"] == run["id"]
    assert Path(env["DROVER_REPO"]).resolve() == project.resolve()
    assert Path(env["DROVER_PROMPT_FILE"]).read_text() == prompt
    # the agent's commit is on the item's branch, in its worktree, not on main
    assert "D-1: pass 1" in git(project, "log", "--format=%s", "drover/d-1")
    assert "D-1: pass 1" not in git(project, "log", "--format=%s", "main")
    assert (project / ".drover" / "worktrees" / item / "d-1.txt").exists()


def test_agent_failure_is_recorded_and_reported(project):
    item = new_item(project, "Add a thing")
    done = drover(project, "run", item, env={"AGENT_MODE": "fail"})
    assert done.returncode == 1 and "exited 3" in done.stdout
    (run,) = json.loads(drover(project, "show", item, "--json").stdout)["runs"]
    assert run["exit_status"] == 3 and run["outcome"] == "exited"


def test_invalid_branch_template_fails_before_anything_is_created(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('branch = "drover/{{ Id | lower }}"', 'branch = "bad name..{{ Id }}"'))
    item = new_item(project, "Add a thing")
    drover(project, "list", check=True)
    before = snapshot(project)
    done = drover(project, "run", item)
    assert done.returncode == 2 and "branch" in done.stderr and "Traceback" not in done.stderr
    assert snapshot(project) == before


def _wait_for(path: Path, seconds: float = 20) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _start_run(project: Path, item: str, pidfile: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    return subprocess.Popen([str(BIN / "drover"), "run", item], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_or_sigterm_ends_the_agents_whole_process_group(project, signum):
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    agent_pid, grandchild = map(int, _wait_for(pidfile).split())
    proc.send_signal(signum)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(agent_pid) or _alive(grandchild)):
        time.sleep(0.1)
    assert not _alive(agent_pid) and not _alive(grandchild)
    assert proc.returncode != 0
    (run,) = json.loads(drover(project, "show", item, "--json").stdout)["runs"]
    assert run["finished"] and run["outcome"] == "interrupted"


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_drive_a_signal_stops_still_gives_its_summary_report_and_notify(project, signum):
    first, second = new_item(project, "Add a thing"), new_item(project, "Another thing")
    pidfile, page, notified = project.parent / "pids", project.parent / "night.html", project.parent / "notified"
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('[notify]\ncommand = ""', f'[notify]\ncommand = "tee {notified}"', 1))
    git(project, "commit", "-qam", "notify")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--report", str(page)], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(pidfile)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, out + err
    assert f"drive interrupted; not started: {second}" in out
    (row,) = [line for line in out.splitlines() if line.startswith(f"{first} ") and " failed " in line]
    assert "interrupted" in row and "0 of 1 approved" in out
    assert out.count("interrupted: not tried again: the drive is ending") == 1, out  # the row's note, once
    assert out.splitlines()[-1] == f"interrupted: `drover drive` again resumes {first}, {second}", out
    assert page.is_file() and first in page.read_text()
    assert json.loads(notified.read_text())["items"][0]["id"] == first
    # the item the drive never started is in the morning's report too, not only in the summary
    assert [row["id"] for row in json.loads(notified.read_text())["items"]] == [first, second]


def test_the_items_a_drive_said_would_follow_are_named_when_a_signal_stops_it(project):
    """Ctrl-C in a `drive --finish`: the item its header said would follow its dep was in no summary
    row, no `--report` page and no `[notify]` JSON (a new user's night on click: the header named the
    follower, the morning's page and chat did not), where a drive a policy stops names it `skipped`."""
    first = new_item(project, "Add a thing")
    second = new_item(project, "Then another", "--dep", first)
    pidfile, page, notified = project.parent / "pids", project.parent / "night.html", project.parent / "notified"
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('[notify]\ncommand = ""', f'[notify]\ncommand = "tee {notified}"', 1))
    git(project, "add", "-A")
    git(project, "commit", "-qm", "notify")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--finish", "--report", str(page)], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(pidfile)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert f"then, as their deps are finished: {second}" in out
    rows = [line for line in out.splitlines() if line.startswith(f"{second} ")]
    assert len(rows) == 1, out
    assert rows[0].split()[1] == "skipped" and rows[0].endswith("not started: the drive stopped"), out
    assert "0 of 2 approved, 0 finished" in out
    assert f">{second}<" in page.read_text()
    said = {row["id"]: row for row in json.loads(notified.read_text())["items"]}
    assert list(said) == [first, second] and said[second]["reason"] == "not started: the drive stopped"


def test_a_run_killed_from_outside_stays_unfinished(project):
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    agent_pid, grandchild = map(int, _wait_for(pidfile).split())
    proc.kill()  # SIGKILL: drover records nothing more
    proc.communicate(timeout=30)
    os.killpg(os.getpgid(agent_pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _alive(agent_pid):
        time.sleep(0.1)
    shown = json.loads(drover(project, "show", item, "--json").stdout)
    (run,) = shown["runs"]
    assert run["finished"] is None and run["unfinished"] and not run["live"]
    assert shown["state"] != "running"
    # the review sees Unfinished and the log; the implement posture resumes
    done = drover(project, "prompt", item, "--slot", "review", "--template",
                  "{{ Unfinished }} {{ LogPath }}", check=True)
    assert done.stdout.startswith("True .drover/runs/")
    done = drover(project, "prompt", item, "--slot", "implement", "--template", "{{ Posture }}", check=True)
    assert done.stdout.strip() == "resume"


def test_drive_takes_an_item_through_a_send_back_to_approval_and_finish(project):
    item = new_item(project, "Add a thing")
    done = drover(project, "drive", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(drover(project, "show", item, "--json").stdout)
    assert shown["state"] == "done"
    assert [run["slot"] for run in shown["runs"]] == ["implement", "review", "implement", "review"]
    assert len(shown["rounds"]) == 1 and shown["rounds"][0]["cleared_at"]
    assert shown["audits"][-1]["level"] == "reviewed" and shown["audits"][-1]["by"] == "reviewer"
    assert "D-1: pass 2" in git(project, "log", "--format=%s", "main")
    assert "finished" in done.stdout and "1 of 1 approved" in done.stdout


def test_a_drive_that_parked_items_ends_saying_they_wait_for_a_person_and_the_way_back(project):
    """A new user's morning: the summary's rows said `parked` and why, and nothing said what to do
    about it (the interrupted and the approved-not-merged each have a last line with their command)."""
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("max_rounds = 3", "max_rounds = 1"))
    first, second = new_item(project, "Add a thing"), new_item(project, "Add another")
    done = drover(project, "drive", env={"AGENT_MODE": "stubborn"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == (f"parked: {first}, {second} wait for a person: `drover show ID` says "
                                            "why; `drover unpark ID` once it is mended, and the next drive takes it")


def test_drive_parks_an_item_that_does_not_converge(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("max_rounds = 3", "max_rounds = 2"))
    item = new_item(project, "Add a thing")
    done = drover(project, "drive", env={"AGENT_MODE": "stubborn"})
    assert done.returncode == 1
    shown = json.loads(drover(project, "show", item, "--json").stdout)
    assert shown["state"] == "parked" and len(shown["rounds"]) == 2
    assert (project / ".drover" / "parked" / f"{item}-3.md").exists()
    assert "parked" in done.stdout
    # the capped send-back is how the review ended: no failure class, no fresh run promised
    assert f"{item} review: crashed" not in done.stdout and "fresh run" not in done.stdout, done.stdout
    assert f"{item}   parked " in done.stdout and "review did not converge: 2 rounds of changes" in done.stdout
    # where the refused findings went is said wherever the park reason is
    assert shown["parked_reason"].endswith(f"; the findings refused are kept in .drover/parked/{item}-3.md")
    assert [run["failure"] for run in ledger_rows(project, "runs")] == [None] * len(shown["runs"])
    # the report counts that review as what it was, no failure of any class ("unclassified" before)
    runs = json.loads(drover(project, "report", "--json").stdout)["runs"]
    assert [(run["slot"], run["outcome"], run["failure"]) for run in runs][-1] == ("review", "parked", ""), runs
    assert not [run for run in runs if run["outcome"] == "failed"], runs


@pytest.mark.skipif(not Path("/usr/bin/time").exists(), reason="no /usr/bin/time here")
def test_drive_under_a_wrapper_that_waits_on_it_is_the_operators(project):
    """`/usr/bin/time drover drive` (what `time` is under sh, as in cron) forks drover and waits: the
    wrapper's command line names drover drive, but it is no drover, and the drive goes on."""
    item = new_item(project, "Add a thing")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "approving"}
    done = subprocess.run(["/usr/bin/time", "drover", "drive", "--finish"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "done"


def test_drive_two_jobs_finishes_two_independent_items(project):
    first = new_item(project, "First thing")
    second = new_item(project, "Second thing")
    done = drover(project, "drive", "--jobs", "2", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "database is locked" not in done.stdout + done.stderr
    for item in (first, second):
        assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "done"
    log = git(project, "log", "--format=%s", "main")
    assert "D-1: pass 2" in log and "D-2: pass 2" in log


def test_an_item_whose_drive_breaks_fails_alone_and_the_drive_goes_on_to_its_summary(project, monkeypatch):
    """What drover does not expect of an item's drive (here a bug, raised in one item's job) fails
    that item in one line naming the kept traceback; the other item finishes, and the drive still
    gives its summary and its --json report. Before, it ended the drive with a traceback."""
    from drover.loop.driver import Driver

    first = new_item(project, "Breaks")
    second = new_item(project, "Goes on")
    drive = Driver._drive

    def breaks_on_the_first(self, ledger, item_id):
        if item_id == first:
            raise RuntimeError("a bug\nof drover's own")
        return drive(self, ledger, item_id)

    monkeypatch.setattr(Driver, "_drive", breaks_on_the_first)
    done = drover(project, "drive", "--jobs", "2", "--finish", "--json", env={"AGENT_MODE": "approving"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    report = {row["id"]: row for row in json.loads(done.stdout)["items"]}
    assert report[second]["result"] == "finished"
    assert report[first]["result"] == "failed"
    note = report[first]["note"]
    assert note.startswith("drover could not go on with it: RuntimeError: a bug of drover's own (the traceback is in "
                           ".drover/errors/"), note
    kept = project / note.rsplit("(the traceback is in ", 1)[1].rstrip(")")
    assert "Traceback (most recent call last)" in kept.read_text() and "RuntimeError: a bug" in kept.read_text()
    assert f"{first}: stopped: drover could not go on with it: RuntimeError" in done.stderr


def test_a_kept_traceback_is_never_written_through_a_link_in_drovers_folder(project, tmp_path):
    """.drover/errors is drover's: a link an agent put in its place is not followed."""
    from drover.ledger.project import open_project
    from drover.loop.driver import keep_traceback

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".drover").mkdir(exist_ok=True)
    (project / ".drover" / "errors").symlink_to(elsewhere)
    here = os.getcwd()
    os.chdir(project)
    try:
        kept = keep_traceback(open_project(), "D-1", RuntimeError("x"))
    finally:
        os.chdir(here)
    assert kept == "" and list(elsewhere.iterdir()) == []


def test_drive_finishes_an_item_while_another_items_agent_runs(project):
    """drive is the launcher of every agent: its own finish of one item, while another item's agent
    still runs, is the operator's, never refused as a process descending from a launcher."""
    first = new_item(project, "Fast")
    second = new_item(project, "Slow")
    # the slow one's agent works till the fast one is merged (a minute at most)
    done = drover(project, "drive", "--jobs", "2", "--finish", env={
        "AGENT_SLOW_ITEM": f"{second}:60", "AGENT_SLOW_UNTIL": f"merged:{first}", "AGENT_MODE": "approving"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cannot act for a run" not in done.stdout + done.stderr
    for item in (first, second):
        assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "done"
    merged = git(project, "log", "--format=%s", "main")
    assert merged.index(f"{first}") > merged.index(f"{second}")  # the fast one merged first


def test_a_signal_while_the_drive_looks_for_ready_items_still_ends_the_agents_in_flight(project, monkeypatch):
    """Only the drive's wait for its jobs turned a signal into ending the launches in flight: one
    that came while the drive did anything else (here, asking which items are ready after a
    finish) left the other job's agent running, and the drive waited for it to the end (a
    SIGTERMed drive held by a set-up's `sleep 60`, once, on CI)."""
    import signal

    from drover.cli.exits import Interrupted
    from drover.loop import drive as driving

    first = new_item(project, "Fast")
    second = new_item(project, "Slow")

    def signalled(*args, **kwargs):
        raise Interrupted(signal.SIGINT)

    monkeypatch.setattr(driving, "ready_ids", signalled)
    done = drover(project, "drive", "--jobs", "2", "--finish",
                  env={"AGENT_SLOW_ITEM": f"{second}:60", "AGENT_MODE": "approving"})
    assert done.returncode == 130, done.stdout + done.stderr
    runs = json.loads(drover(project, "show", second, "--json", check=True).stdout)["runs"]
    assert runs[-1]["outcome"] == "interrupted", runs  # ended with the drive, not left to run its minute
    assert json.loads(drover(project, "show", first, "--json", check=True).stdout)["state"] == "done"


def test_drive_takes_a_dependent_item_once_its_dep_is_finished(project):
    first = new_item(project, "First thing")
    second = new_item(project, "Second thing", "--dep", first)
    done = drover(project, "drive", "--finish", env={"AGENT_MODE": "approving"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(drover(project, "show", second, "--json").stdout)["state"] == "done"


def test_the_items_a_drive_said_would_follow_are_named_when_it_never_starts_them(project, tmp_path):
    """The header said `then, as their deps are finished: D-2, D-3`; when D-1 failed, they were
    in no summary row, no `--report` page and no `[notify]` JSON (a new user, overnight on
    tabulate: a page of 12 items where the header had announced 15)."""
    first = new_item(project, "First thing")
    second = new_item(project, "Second thing", "--dep", first)
    third = new_item(project, "Third thing", "--dep", second)
    page = tmp_path / "night.html"
    done = drover(project, "drive", "--finish", "--report", str(page), env={"AGENT_MODE": "fail"})
    assert done.returncode == 1, done.stdout
    assert f"then, as their deps are finished: {second}, {third}" in done.stdout
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("D-")
            and len(line.split()) > 3 and line.split()[1] in ("failed", "skipped")}
    assert rows[second].split()[1] == "skipped" and rows[second].endswith(
        f"not started: it waits on {first}, which this drive did not finish"), done.stdout
    assert rows[third].endswith(f"not started: it waits on {second}, which this drive did not finish")
    # the count, then the parked line (D-1 crashed twice: [retry] parked it), then the page's line
    assert done.stdout.splitlines()[-3] == "0 of 3 approved, 0 finished"
    assert done.stdout.splitlines()[-2].startswith(f"parked: {first} waits for a person: ")
    assert second in page.read_text() and third in page.read_text()


def test_finish_refuses_outstanding_changes_and_leaves_everything(project):
    item = implemented(project, "Add a thing")
    drover(project, "request-changes", item, stdin="Not yet.\n", check=True)
    head = git(project, "rev-parse", "main")
    done = drover(project, "finish", item)
    assert done.returncode == 1 and "outstanding" in done.stderr
    assert git(project, "rev-parse", "main") == head
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] != "done"


def test_finish_refuses_a_dirty_checkout(project):
    item = implemented(project, "Add a thing")
    drover(project, "audit", item, "--level", "reviewed", check=True)
    (project / "README.md").write_text("edited by hand\n")
    head = git(project, "rev-parse", "main")
    done = drover(project, "finish", item)
    assert done.returncode == 1 and "uncommitted" in done.stderr
    assert git(project, "rev-parse", "main") == head
    assert (project / "README.md").read_text() == "edited by hand\n"


def test_finish_removes_the_items_worktree_never_what_a_link_in_its_place_leads_to(project, tmp_path):
    """An agent (any of them: it is a folder under .drover/) moved an item's worktree away and put a
    link to another registered worktree in its place, the operator's own here; finish removed that
    one, with the untracked notes in it (hostile review 42). The link goes, the worktree it names stays."""
    item = new_item(project, "Add a thing")
    drover(project, "run", item, check=True)
    drover(project, "audit", item, "--level", "reviewed", check=True)
    mine = tmp_path / "mine"
    git(project, "worktree", "add", "-q", str(mine), "-b", "mine")
    (mine / "notes.txt").write_text("the operator's notes, never committed\n")
    own = project / ".drover" / "worktrees" / item
    own.rename(tmp_path / "moved")
    own.symlink_to(mine)
    done = drover(project, "finish", item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (mine / "notes.txt").read_text() == "the operator's notes, never committed\n"
    assert str(mine) in git(project, "worktree", "list")
    assert not os.path.lexists(own)
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "done"


def test_a_link_in_place_of_an_items_worktree_is_refused_never_followed(project, tmp_path):
    """A link an agent put where an item's worktree goes (before its first run, or in place of the
    one it had) had drover check the branch out in the folder the link named, outside the project,
    and run the next agent there (hostile review 42): refused in one line, nothing made there."""
    item = new_item(project, "Add a thing")
    elsewhere = tmp_path / "elsewhere" / "w"
    own = project / ".drover" / "worktrees" / item
    own.parent.mkdir(parents=True, exist_ok=True)
    own.symlink_to(elsewhere)
    done = drover(project, "run", item)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "is a link, not a worktree drover made" in one_line(done, done.returncode)
    assert not elsewhere.parent.exists()


def test_a_link_in_place_of_the_worktrees_folder_is_refused_never_followed(project, tmp_path):
    """A link an agent put in place of `.drover/worktrees` itself (hostile review 43): the item's
    worktree was made in the folder the link named, outside the project, the branch checked out
    and the next agent run there. Refused in one line, nothing made there."""
    item = new_item(project, "Add a thing")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    folder = project / ".drover" / "worktrees"
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(elsewhere)
    done = drover(project, "run", item)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "is a link, not a folder drover made" in one_line(done, done.returncode)
    assert list(elsewhere.iterdir()) == []


def test_finish_refuses_an_undisposed_closes_issue(project):
    item = new_item(project, "Add a thing")
    path = project / "items" / f"{item}.md"
    path.write_text(path.read_text().replace("deps: []", "deps: []\ncloses: [7]"))
    drover(project, "run", item, check=True)
    drover(project, "audit", item, "--level", "reviewed", check=True)
    done = drover(project, "finish", item)
    assert done.returncode == 1 and "#7" in done.stderr
    drover(project, "dispose", item, "7", "--as", "keep", check=True)
    done = drover(project, "finish", item)
    assert done.returncode == 0, done.stderr
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "done"


@pytest.mark.slow  # it runs the demo first, so that test_operator's use of it later finds it run
def test_demo_runs_the_whole_loop(demo_run, tmp_path):
    folder, done = demo_run  # `drover demo`, run once for the whole test run
    root = tmp_path / "demo"
    shutil.copytree(folder, root, symlinks=True)
    assert done.returncode == 0, done.stdout + done.stderr
    for item in ("D-1", "D-2", "D-3"):
        assert f"$ drover show {item}" in done.stdout
        shown = json.loads(drover(root, "show", item, "--json").stdout)
        assert shown["state"] == "done"
        assert len(shown["rounds"]) == 1 and shown["rounds"][0]["cleared_at"]
        assert [audit["level"] for audit in shown["audits"]][-1] == "reviewed"
        # what merged is what drover's own check passed (docs/verify.md)
        assert shown["checks"] and shown["checks"][-1]["passed"]
        assert shown["checks"][-1]["head"] == shown["approved_head"]
    assert (root / "greet" / "d_1.py").exists()
    shown = json.loads(drover(root, "show", "D-3", "--json").stdout)
    assert shown["finding"].startswith("Finding: D-1")
    assert "from:  Finding: D-1" in done.stdout


def test_a_second_run_refuses_while_the_first_is_alive(project):
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    proc = _start_run(project, item, pidfile)
    try:
        _wait_for(pidfile)
        done = drover(project, "run", item)
        assert done.returncode == 1 and "live run" in done.stderr
        assert len(json.loads(drover(project, "show", item, "--json").stdout)["runs"]) == 1
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


@pytest.mark.parametrize("command", [("review",), ("draft",), ("review", "--print")])
def test_review_and_draft_previews_write_nothing(project, command):
    item = new_item(project, "Add a thing")
    drover(project, "list", check=True)
    before = snapshot(project)
    args = (command[0], item, *command[1:]) if len(command) > 1 else (command[0], item, "--dry-run")
    done = drover(project, *args, check=True)
    assert "Add a thing" in done.stdout
    assert snapshot(project) == before


def test_draft_runs_in_the_main_checkout_and_is_recorded(project):
    item = new_item(project, "Add a thing")
    done = drover(project, "draft", item, check=True)
    assert "exited 0" in done.stdout
    (run,) = json.loads(drover(project, "show", item, "--json").stdout)["runs"]
    assert run["slot"] == "draft" and run["worktree"] == "" and run["branch"] == ""
    assert not (project / ".drover" / "worktrees" / item).exists()
    assert "script agent: draft D-1 in project" in (project / run["log_path"]).read_text()


def test_a_draft_that_writes_no_requirements_exits_1_and_says_the_item_still_needs_them(project):
    drover(project, "new", "Needs a draft", check=True)  # the placeholder: `needs requirements`
    done = drover(project, "draft", "D-1")  # the script agent's draft writes nothing
    assert done.returncode == 1, done.stdout + done.stderr
    assert "exited 0" in done.stdout
    assert done.stderr.splitlines() == ["drover: D-1: the draft wrote no requirements: D-1 needs requirements: "
                                        "items/D-1.md still holds the placeholder"]
    assert json.loads(drover(project, "show", "D-1", "--json").stdout)["state"] == "needs requirements"


def test_commands_act_on_the_main_checkout_from_a_subfolder_and_a_worktree(project):
    item = implemented(project, "Add a thing")
    sub = project / "items"
    assert item in drover(sub, "list", check=True).stdout
    worktree = project / ".drover" / "worktrees" / item
    drover(worktree, "request-changes", item, stdin="From the worktree.\n", check=True)
    assert "From the worktree." in (project / "items" / f"{item}.md").read_text()
    assert not (worktree / "items" / f"{item}.md").read_text().count("From the worktree.")


def test_ctrl_c_during_drive_ends_every_agent_and_records_the_runs(project):
    items = [new_item(project, "First thing"), new_item(project, "Second thing")]
    pidfile = project.parent / "pids"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--jobs", "2"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    agent_pid, grandchild = map(int, _wait_for(pidfile).split())
    time.sleep(0.5)  # let the second item's agent start too
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(agent_pid) or _alive(grandchild)):
        time.sleep(0.1)
    assert not _alive(agent_pid) and not _alive(grandchild)
    for item in items:
        runs = json.loads(drover(project, "show", item, "--json").stdout)["runs"]
        assert runs and all(run["finished"] and run["outcome"] == "interrupted" for run in runs)


def test_the_drive_summary_aligns_its_columns_and_right_aligns_the_counts():
    from drover.cli.views import drive_summary as summary
    from drover.loop.driver import Driven

    lines = summary([Driven("D-1", "finished", 2, 4), Driven("D-10", "failed", 1, 12, "implement agent exited 1",
                                                             log=".drover/runs/r/agent.log")])
    assert lines[:3] == [
        "item  result      rounds  runs  note",
        "D-1   finished         2     4",
        "D-10  failed           1    12  implement agent exited 1",
    ]
    assert lines[3] == "D-10: log .drover/runs/r/agent.log"
    assert lines[-1] == "1 of 2 approved"


def trace_starts(trace: Path) -> list[tuple[str, list[str]]]:
    """(session id, argv without `-c` pairs or a `--work-tree=` drover gives a main checkout's git)
    of each git process GIT_TRACE2_EVENT recorded; a process git started has its parent's session id
    before a `/`."""
    found = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        if event["event"] == "start":
            words, argv = event["argv"][1:], []
            while words:
                if words[0] == "-c":
                    words = words[2:]
                    continue
                if words[0].startswith("--work-tree="):
                    words = words[1:]
                    continue
                argv.append(words.pop(0))
            found.append((event["sid"], argv))
    return found


def test_gits_maintenance_runs_once_the_command_ends_never_from_an_agents_commit(project, tmp_path):
    """A `gc --auto` an agent's commit started would outlive the run and be ended with its other
    processes, half-way; drover asks git for maintenance itself once the command ends."""
    git(project, "config", "gc.auto", "1")  # a loose object or two call for a gc
    git(project, "config", "gc.autoDetach", "false")  # so the gc is done when the command is
    item = new_item(project, "Pack me")
    loose = tmp_path / "loose"
    loose.mkdir()
    for n in range(600):  # git counts one folder of 256 and scales up: these fill every folder
        (loose / str(n)).write_text(f"object {n}\n")
    subprocess.run(["git", "hash-object", "-w", "--stdin-paths"], cwd=project, check=True, capture_output=True,
                   input="\n".join(str(loose / str(n)) for n in range(600)), text=True)
    trace = tmp_path / "trace.json"
    packed = int(git(project, "count-objects", "-v").split("in-pack: ")[1].split()[0])

    drover(project, "run", item, env={"GIT_TRACE2_EVENT": str(trace)}, check=True)

    starts = trace_starts(trace)
    commits = [sid for sid, argv in starts if argv[:1] == ["commit"]]
    assert commits  # the agent committed
    maintenance = [(sid, argv) for sid, argv in starts if argv[:1] in (["maintenance"], ["gc"])]
    assert not [sid for sid, _ in maintenance if any(sid.startswith(commit + "/") for commit in commits)], maintenance
    (first, argv), *_ = maintenance
    assert argv[:3] == ["maintenance", "run", "--auto"] and "/" not in first  # drover's own, at the end
    assert any(sid.startswith(first + "/") and argv[:1] == ["gc"] for sid, argv in maintenance)
    # the run's commit and its objects are packed, as a commit's own gc would have
    assert int(git(project, "count-objects", "-v").split("in-pack: ")[1].split()[0]) > packed


def test_a_review_of_an_item_no_implementing_run_touched_is_refused_before_anything_starts(project):
    item = new_item(project, "Add a thing")
    before = git(project, "for-each-ref", "--format=%(refname)")
    done = drover(project, "review", item)
    assert done.returncode == 1
    assert done.stderr.strip() == f"drover: {item} has no implementing run to review: `drover run {item}` first"
    assert ledger_rows(project, "runs") == [] and ledger_rows(project, "audits", "id") == []
    assert git(project, "for-each-ref", "--format=%(refname)") == before  # no branch made for it


def test_ctrl_c_in_a_drive_says_each_item_once_and_how_to_resume(project):
    """A new user's Ctrl-C in `drover drive`: the summary said `D-1 failed ... implement agent
    interrupted; interrupted: not tried again: the drive is ending`, then the same again on a line
    of its own, and never that `drover drive` again resumes the items. It says each once, and ends
    with the way on."""
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    proc = subprocess.Popen([str(BIN / "drover"), "drive"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(pidfile)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert out.count("not tried again: the drive is ending") == 1, out
    assert out.splitlines()[-1] == f"interrupted: `drover drive` again resumes {item}", out
