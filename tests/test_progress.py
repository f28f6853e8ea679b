"""What drive says as it goes: each review's verdict, one status line per job on a terminal, and
the exit codes of a signal."""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from helpers import implemented, BIN, configure, drover, git, new_item, wait_for

FINDINGS = "- The parser accepts unknown keys.\n- The error names no line.\n- Nothing tests an empty file.\n"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def project(repo):
    configure(repo)
    return repo


def test_drive_names_each_verdict_with_its_findings_or_its_level_and_by(project):
    new_item(project, "Add a thing")
    done = drover(project, "drive", env={"AGENT_FINDINGS": FINDINGS})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "D-1: changes requested (3 findings)" in lines
    assert "D-1: approved (reviewed by reviewer)" in lines
    assert not any("review exit" in line for line in lines)
    assert "D-1: implement exit 0" in done.stdout  # an implementing run still says how it ended


def test_a_review_without_a_verdict_says_so_once(project):
    new_item(project, "Add a thing")
    done = drover(project, "drive", env={"AGENT_MODE": "silent"})
    assert done.returncode == 1
    # each silent review once, with what [retry] no_verdict (default: one fresh review, then park) did
    said = [line for line in done.stdout.splitlines() if line.startswith(("D-1 review: ", "D-1: the review"))]
    assert said == ["D-1: the review recorded no verdict (neither request-changes nor an approving audit)",
                    "D-1 review: no_verdict, fresh run 1 of 1",
                    "D-1: the review recorded no verdict (neither request-changes nor an approving audit)",
                    "D-1 review: no_verdict, parked: no verdict again after 1 fresh run ([retry] fresh_max)"]
    assert "review exit" not in done.stdout


def test_drover_review_says_the_verdict_as_drive_does(project):
    item = implemented(project, "Add a thing")
    done = drover(project, "review", item, env={"AGENT_FINDINGS": "One thing only.\n"})
    assert done.returncode == 0, done.stderr
    assert f"{item}: the review recorded: changes requested (1 finding)" in done.stdout


def test_the_findings_count_reads_list_entries_then_headings():
    from drover.items.file import count_findings

    assert count_findings(FINDINGS) == 3
    assert count_findings("### One\ntext\n### Two\n- a detail under it\n") == 1  # entries win over headings
    assert count_findings("### One\ntext\n### Two\nmore\n") == 2
    assert count_findings("```\n- not an entry\n- nor this\n```\n- one\n") == 1
    assert count_findings("Just prose.\n") == 1
    # fences as the section's headings read them: a shorter run, or one with words after it, closes none
    assert count_findings("````\n```\n- not an entry\n```\n````\n- one\n") == 1
    assert count_findings("```\n- not an entry\n```python\n- nor this\n```\n- one\n- two\n") == 2
    assert count_findings("\n") == 0


# --- one status line per job on a terminal ---------------------------------------------------

def _drive_on_a_terminal(project: Path, *args: str, env: dict[str, str]) -> tuple[int, list[tuple[float, str]]]:
    """Run drover under a pseudo-terminal 120 columns wide; its exit status and what it wrote, timed."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **env}
    proc = subprocess.Popen([str(BIN / "drover"), *args], cwd=project, env=full_env,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    heard: list[tuple[float, str]] = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the terminal's other side closed: drover ended
                    break
                if not data:
                    break
                heard.append((time.monotonic(), data.decode("utf-8", errors="replace")))
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=60), heard
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


@pytest.mark.slow
def test_on_a_terminal_each_job_has_its_own_status_line_redrawn_at_most_once_a_second(project):
    new_item(project, "First thing")
    new_item(project, "Second thing")
    code, heard = _drive_on_a_terminal(project, "drive", "--jobs", "2", env={"AGENT_QUIET": "7"})
    text = "".join(data for _, data in heard)
    assert code == 0, text
    for item in ("D-1", "D-2"):
        status = re.compile(rf"\[{item} implement \d+:\d\d\] silent for ")
        times = [at for at, data in heard for _ in status.finditer(data)]
        assert len(times) >= 2, text
        window = times[-1] - times[0]
        assert window >= 2.0, text
        # one redraw a second at most, and an extra one each time a progress line goes above the
        # block (each job's start and end, the other job's too: up to five with two jobs)
        assert len(times) <= window * 1.0 + 5, (item, len(times), window)
    # the two jobs' status lines are two lines, drawn together in one block
    assert re.search(r"\[D-1 implement [^\r\n]* silent for [^\r\n]*\r?\n\[D-2 implement [^\r\n]* silent for ", text) \
        or re.search(r"\[D-2 implement [^\r\n]* silent for [^\r\n]*\r?\n\[D-1 implement [^\r\n]* silent for ", text), text
    assert "\x1b[K[D-" not in text  # no status line rewritten over another on one line


def test_no_escape_an_agent_prints_reaches_the_operators_terminal(project):
    # its echo during the run and `drover log` on a terminal show each control character as "?":
    # an OSC 52 would write the clipboard, a CSI clear the screen; the log file keeps every byte
    new_item(project, "First thing")
    said = "x \x1b]52;c;ZWNobyBvd25lZA==\x07 \x1b[2J\x9b2J y"
    code, heard = _drive_on_a_terminal(project, "run", "D-1", env={"AGENT_SAY": said})
    text = "".join(data for _, data in heard)
    assert code == 0, text
    assert "] x ?]52;c;ZWNobyBvd25lZA==? ?[2J?2J y" in text, text
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x9b" not in text
    code, heard = _drive_on_a_terminal(project, "log", "D-1", env={})
    text = "".join(data for _, data in heard)
    assert code == 0 and "x ?]52;c;ZWNobyBvd25lZA==? ?[2J?2J y" in text, text
    assert f"\n{said}\n" in drover(project, "log", "D-1").stdout  # off a terminal: the bytes as written


def test_the_status_line_quotes_the_agents_last_line_without_its_escapes(project):
    """Hostile review 15: while an agent is silent, the status line drover redraws each second
    quotes its last line: an OSC 52 there wrote the operator's clipboard at every redraw."""
    new_item(project, "First thing")
    said = "x \x1b]52;c;ZWNobyBvd25lZA==\x07 \x1b[2J\x9b2J y"
    code, heard = _drive_on_a_terminal(project, "run", "D-1", env={"AGENT_SAY": said, "AGENT_QUIET": "5"})
    text = "".join(data for _, data in heard)
    assert code == 0, text
    assert "last: x ?]52;c;ZWNobyBvd25lZA==? ?[2J?2J y" in text, text
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x9b" not in text


ESCAPES = "x \x1b]52;c;ZWNobyBvd25lZA==\x07 \x1b[2J y"
SHOWN = "x ?]52;c;ZWNobyBvd25lZA==? ?[2J y"


@pytest.mark.parametrize("args", [("prompt", "D-1", "--slot", "implement"), ("run", "D-1", "--dry-run"),
                                  ("review", "D-1", "--print")])
def test_a_prompt_on_a_terminal_carries_no_escape_an_agent_wrote(project, args):
    """A prompt quotes what agents wrote (requirements an agent drafted, findings, commit subjects).
    Shown on a terminal each control character is `?`; piped, the prompt keeps every byte."""
    item = new_item(project, "First thing")
    path = project / "items" / f"{item}.md"
    path.write_text(path.read_text().replace("1. Do what the title says.", f"1. Do it. {ESCAPES}"))
    git(project, "commit", "-q", "-am", "requirements an agent drafted")
    if args[0] == "review":
        drover(project, "run", item, check=True)
    code, heard = _drive_on_a_terminal(project, *args, env={})
    text = "".join(data for _, data in heard)
    assert code == 0 and SHOWN in text, text
    assert "\x1b]" not in text and "\x1b[2J" not in text
    # piped, the prompt's bytes (click itself drops a CSI into a pipe, not an OSC)
    assert "x \x1b]52;c;ZWNobyBvd25lZA==\x07 " in drover(project, *args, check=True).stdout


def test_a_failed_check_on_a_terminal_shows_no_escape_the_branchs_tests_printed(project):
    """`drover verify` prints the end of the check's output: the branch's own tests wrote it."""
    (project / "tests.sh").write_text(f"printf '%s\\n' '{ESCAPES}'\nexit 1\n")
    config = project / "drover.toml"
    config.write_text(re.sub(r'^default = ".*?"', 'default = "sh tests.sh"', config.read_text(), count=1, flags=re.M))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a check that prints escapes")
    item = new_item(project, "First thing")
    drover(project, "run", item, check=True)
    code, heard = _drive_on_a_terminal(project, "verify", item, env={})
    text = "".join(data for _, data in heard)
    assert code == 1 and SHOWN in text, text
    assert "\x1b]" not in text and "\x1b[2J" not in text


def test_off_a_terminal_drive_keeps_the_heartbeat_lines_beside_the_verdicts(project):
    new_item(project, "First thing")
    done = drover(project, "drive", env={"AGENT_QUIET": "1.5", "DROVER_PROGRESS_SECONDS": "0.5"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^D-1: implement by implementer, \ds, log \d+ B$", done.stdout, re.M), done.stdout
    assert "D-1: changes requested (1 finding)" in done.stdout.splitlines()
    assert "\x1b[" not in done.stdout


# --- signals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "signum", "code", "said"), [
    ("run", signal.SIGTERM, 143, "terminated"), ("run", signal.SIGINT, 130, "interrupted"),
    ("drive", signal.SIGTERM, 143, "terminated")])  # drive after Ctrl-C exited 130 already
def test_a_signal_ends_drover_with_128_plus_its_number(project, command, signum, code, said):
    item = new_item(project, "Add a thing")
    pidfile = project.parent / "pids"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "AGENT_MODE": "sleep",
           "AGENT_PIDFILE": str(pidfile)}
    args = ["run", item] if command == "run" else ["drive"]
    proc = subprocess.Popen([str(BIN / "drover"), *args], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(pidfile)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, out + err
    if command == "drive":
        assert f"drover: {said}" in err
    shown = drover(project, "show", item, "--json", check=True).stdout
    assert '"outcome": "interrupted"' in shown


def test_the_exit_code_table_lists_130_and_143():
    table = (ROOT / "docs" / "commands.md").read_text().split("## Exit codes and errors", 1)[1].split("\n\n")[1]
    assert "| `130` |" in table and "SIGINT" in table
    assert "| `143` |" in table and "SIGTERM" in table
