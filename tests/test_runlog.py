"""`drover log ID [--run RUN] [--follow]`, progress lines off a terminal, and the drive summary's log paths."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import helpers
from helpers import git, write_requirements

BIN = Path(sys.executable).parent
AGENT = Path(__file__).parent / "agents" / "echo_agent.py"


def drover(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return helpers.drover(root, *args, env=env)


def use_command(root: Path, command: str) -> None:
    config = root / "drover.toml"
    text = config.read_text().replace('preset = "claude" ', 'preset = "script" ', 1)
    text = text.replace('command = ""  ', f"command = {json.dumps(command)}", 1)  # a TOML basic string
    config.write_text(text)


@pytest.fixture
def project(repo):
    assert drover(repo, "init").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    assert drover(repo, "new", "A thing").returncode == 0
    write_requirements(repo, "D-1")
    return repo


def test_log_prints_the_newest_run_or_the_one_named(project):
    use_command(project, f"{sys.executable} -c \"import os; print('run of', os.environ['DROVER_RUN'])\"")
    first = drover(project, "run", "D-1")
    second = drover(project, "run", "D-1")
    assert first.returncode == 0 and second.returncode == 0
    runs = [run["id"] for run in json.loads(drover(project, "show", "D-1", "--json").stdout)["runs"]]
    assert len(runs) == 2
    newest = drover(project, "log", "D-1")
    assert (newest.returncode, newest.stdout) == (0, f"run of {runs[1]}\n")
    named = {run: drover(project, "log", "D-1", "--run", run).stdout for run in runs}
    assert named == {run: f"run of {run}\n" for run in runs}


def test_log_without_runs_or_with_an_unknown_run_is_a_usage_error(project):
    done = drover(project, "log", "D-1")
    assert (done.returncode, done.stderr) == (2, "drover: D-1 has no runs yet\n")
    use_command(project, "true")
    drover(project, "run", "D-1")
    done = drover(project, "log", "D-1", "--run", "nope")
    assert done.returncode == 2 and done.stderr.startswith("drover: D-1 has no run nope (its runs: ")


def test_log_follow_prints_until_the_run_ends(project, tmp_path):
    go = tmp_path / "go"
    use_command(project, f"{sys.executable} {AGENT} --wait-for {go}")
    running = subprocess.Popen([str(BIN / "drover"), "run", "D-1"], cwd=project, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                               env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    follower = None
    try:
        runs_dir = project / ".drover" / "runs"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (runs_dir.exists() and any(runs_dir.glob("*/agent.log"))):
            time.sleep(0.05)
        follower = subprocess.Popen([str(BIN / "drover"), "log", "D-1", "--follow"], cwd=project,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        assert follower.poll() is None  # still following: the run is alive
        go.write_text("")
        out, err = follower.communicate(timeout=60)
    finally:
        go.write_text("")
        running.wait(timeout=60)
        if follower is not None and follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert out.startswith("first\n") and "second\n" in out  # second was written after following began


def test_log_follow_of_an_item_with_no_run_yet_follows_its_first_run_however_short(project, monkeypatch):
    """`drover log D-1 --follow` for a queued item waits for its first run. A short implementing
    run could end, and the next start, between two of the follower's polls: the follower then
    took the newest run, and the first one's log was never shown."""
    import io
    import types

    from drover.cli import runlog
    from drover.ledger.project import open_project

    use_command(project, f"{sys.executable} -c \"import os; print('run of', os.environ['DROVER_RUN'])\"")
    polls = []

    def between_polls(seconds: float) -> None:  # two whole runs start and end while the follower sleeps
        if not polls:
            for _ in range(2):
                assert helpers.drover(project, "run", "D-1", process=True).returncode == 0
        polls.append(seconds)

    monkeypatch.setattr(runlog, "time", types.SimpleNamespace(sleep=between_polls))
    out = io.BytesIO()
    runlog.show_log(open_project(project), "D-1", None, follow=True, out=out)
    runs = json.loads(drover(project, "show", "D-1", "--json").stdout)["runs"]
    assert len(runs) == 2, runs
    assert out.getvalue().decode() == f"run of {runs[0]['id']}\n"  # the first, not the newest


def test_drive_off_a_terminal_says_it_is_alive_and_names_the_log_of_a_failure(project):
    use_command(project, f"{sys.executable} -c \"import sys, time; time.sleep(1.2); sys.exit(3)\"")
    done = drover(project, "drive", "D-1", env={"DROVER_PROGRESS_SECONDS": "0.3"})
    assert done.returncode == 1
    alive = [line for line in done.stdout.splitlines() if line.startswith("D-1: implement by script, ")]
    assert alive and all(line.endswith(", log 0 B") for line in alive), done.stdout
    # the crash got its one fresh run ([retry] crashed = "fresh"): the summary names the newest log
    newest = max((project / ".drover" / "runs").iterdir(), key=lambda run_dir: run_dir.name)
    assert f"D-1: log .drover/runs/{newest.name}/agent.log" in done.stdout.splitlines()


def test_a_character_split_between_two_reads_of_a_followed_log_is_cleaned_whole():
    """Hostile review 13: an agent writes C2, and a second later 9B (C1's CSI as UTF-8) and the rest
    of an escape. `log --follow` read them apart: each byte alone is no character, so each went to
    the terminal as it was, and the terminal put them together into a working CSI. One decoder
    across reads holds the C2 until its 9B comes, then shows the pair as `?`; a raw byte of C1's
    range that is no UTF-8 at all is `?` too; off a terminal every byte stays."""
    import io
    import pty
    import select

    from drover.cli.runlog import log_writer

    master, slave = pty.openpty()
    try:
        with open(slave, "wb", buffering=0, closefd=False) as terminal:
            write = log_writer(terminal)
            for chunk in (b"working\nx\xc2", b"\x9b2J\x9b31mhijacked \xe2\x82", b"\xac ok\xc2"):
                write(chunk)
            write(b"", final=True)
        shown = b""
        while True:
            if not select.select([master], [], [], 0.5)[0]:
                break
            shown += os.read(master, 4096)
    finally:
        os.close(master)
        os.close(slave)
    assert b"\xc2\x9b" not in shown and b"\x9b" not in shown, shown
    assert shown.replace(b"\r\n", b"\n") == "working\nx?2J?31mhijacked € ok".encode() + b"\xc2", shown
    piped = io.BytesIO()
    write = log_writer(piped)
    write(b"x\xc2")
    write(b"\x9b2J")
    assert piped.getvalue() == b"x\xc2\x9b2J"


def test_log_copies_a_log_of_any_size_a_piece_at_a_time(project):
    """Hostile review 35: `drover log` read the log whole, and the agent decides its size: an agent's
    1 GB of output cost the operator's `drover log` 1 GB of memory. Here 128 MB (a sparse file, as
    an agent that printed that much left it): drover's own peak (VmHWM, of the process as it is
    after exec) is read once it has written its first bytes, which the whole read came before."""
    use_command(project, "true")
    assert drover(project, "run", "D-1").returncode == 0
    (log,) = (project / ".drover" / "runs").glob("*/agent.log")
    size = 128 << 20
    with log.open("r+b") as handle:
        handle.truncate(size)
    process = subprocess.Popen([str(BIN / "drover"), "log", "D-1"], cwd=project, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    copied = len(process.stdout.read(1 << 16))
    status = Path(f"/proc/{process.pid}/status").read_text()
    peak = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:")))  # kB
    while chunk := process.stdout.read(1 << 20):
        copied += len(chunk)
    assert (process.wait(), copied) == (0, size)
    assert peak < 64 << 10, peak  # drover's own start is far less; the log whole would be more
