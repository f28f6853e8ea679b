"""How many git processes drover itself starts to drive an item through implement, review and
finish: each costs 2-3 ms, and the count crept up between the sessions that cut it
(docs/performance.md, issue 27). A git on PATH notes its parent's pid; drover's own are those
whose parent is the drive's process (the agents' git and their `drover audit` have other parents)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import BIN, drover, git

# the trivial agent the drive and pool benchmarks drive (one file committed, then an approving
# review), taken from there: this counts the git calls of the drive they time
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from drive_bench import AGENT  # noqa: E402

# One line a git: its parent's pid and its arguments, each after a unit separator ("$*" joins them
# with IFS's first character), a line break in an argument (drover's merge.default pin) made a space.
NOTING_GIT = """#!/bin/sh
IFS=$(printf '\\037')
printf '%s\n' "$PPID$IFS$(printf '%s' "$*" | tr '\n' ' ')" >> "{log}"
exec "{git}" "$@"
"""
SEPARATOR = "\x1f"
ITEMS = 3
# per item, as measured (2026-12-06: 31.0 and 26.3; 34.0 and 29.3 the day before; then 29.0 and 24.3 once a
# branch's name was checked without git and a branch made for a run gave its head without a show-ref; 28.0 once
# a review reused its worktree without `worktree list`, 27.0 once the finish removed it without one): with
# fresh worktrees, and with a pool (its worktree switched, not added; none removed). A change that adds a git call to every
# item fails here: count again, and say in docs/performance.md what it buys. (The finish reads the
# heads it merges again, just before the merge, rather than reuse its refusals' read: one an item.)
# 2026-12-08: 24.0 and 21.4, once the listing of the reviewer's files in the commit (ls-tree) and the
# marker diff were asked by ids and kept for the process, the finish took the heads the drive read
# under its merge lock for the marker check, and the review's prompt those of the implementing run's end.
MOST = {0: 24.0, 2: 21.4}
# What an item asks once: questions of commits by their ids (git/history.of_ids keeps the answer),
# the review's start and end comparing the worktree with the same commit (`ls-tree -r`), the marker
# check before the review and at the finish diffing the same two commits (`diff -G`); and the heads
# the review's prompt is built on, which the implementing run's end read (no `show-ref` at all).
ONCE = {"ls-tree -r": (ITEMS, lambda args: args[0] == "ls-tree" and "-r" in args),
        "diff -G": (ITEMS, lambda args: args[0] == "diff" and any(arg.startswith("-G") for arg in args)),
        "show-ref": (0, lambda args: args[0] == "show-ref")}


@pytest.mark.slow
@pytest.mark.parametrize("pool", [0, 2])
def test_a_driven_item_costs_drover_no_more_git_processes_than_measured(repo, tmp_path, pool):
    drover(repo, "init", check=True)
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    config = (repo / "drover.toml").read_text().replace('preset = "claude" ', 'preset = "script" ', 1)
    config = config.replace('command = ""  ', f'command = "{agent}"', 1).replace("pool = 0", f"pool = {pool}", 1)
    (repo / "drover.toml").write_text(config)
    for number in range(1, ITEMS + 1):
        (repo / "items" / f"D-{number}.md").write_text(
            f"---\nid: D-{number}\ntitle: Item {number}\n---\n\n## Requirements\n1. Write d-{number}.txt.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")
    shims, log = tmp_path / "shims", tmp_path / "git.log"
    shims.mkdir()
    (shims / "git").write_text(NOTING_GIT.format(log=log, git=shutil.which("git")))
    (shims / "git").chmod(0o755)
    env = {**os.environ, "PATH": os.pathsep.join([str(shims), str(BIN), os.environ["PATH"]])}
    drive = subprocess.Popen([str(BIN / "drover"), "drive", "--finish"], cwd=repo, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    said, _ = drive.communicate(timeout=300)
    assert drive.returncode == 0, said
    assert git(repo, "log", "--format=%s", "main").count(": done") == ITEMS, said
    noted = [line.split(SEPARATOR) for line in log.read_text().splitlines()]
    calls = [_past_options(fields[1:]) for fields in noted if fields[0] == str(drive.pid)]
    own = [args[0] if args else "" for args in calls]
    assert own, "no git of the drive's was noted: the drive did not run the git on PATH"
    shown = ", ".join(f"{own.count(name)} {name}" for name in sorted(set(own), key=own.count, reverse=True))
    assert len(own) / ITEMS <= MOST[pool], f"{len(own)} git processes for {ITEMS} items: {shown}"
    for question, (most, asks) in ONCE.items():
        assert sum(1 for args in calls if args and asks(args)) == most, f"{question} asked again: {shown}"


def _past_options(args: list[str]) -> list[str]:
    """git's command and its arguments, past the `-c name=value` pairs drover pins (git/run.py)
    and git's own options (`--literal-pathspecs`)."""
    while args and args[0].startswith("-"):
        args = args[2:] if args[0] in ("-c", "-C") else args[1:]
    return args


@pytest.mark.slow
def test_a_drive_keeps_the_ledgers_log_between_its_items(repo, tmp_path):
    """Each item of a drive has a ledger connection of its own, and closing it was the ledger's last:
    SQLite then copied the whole log (ledger.db-wal) into the database, synced both and deleted the
    log, which the next item made again (four fsyncs and the copy an item). The drive holds one open:
    the log an item's agent finds holds the items before it (it grows, where it started afresh)."""
    drover(repo, "init", check=True)
    sizes = tmp_path / "sizes"
    agent = tmp_path / "agent.sh"
    agent.write_text(AGENT.replace('if [ "$DROVER_SLOT" = implement ]; then\n',
                                   'if [ "$DROVER_SLOT" = implement ]; then\n'
                                   f'  wc -c < "$DROVER_REPO/.drover/ledger.db-wal" >> {sizes}\n', 1))
    agent.chmod(0o755)
    config = (repo / "drover.toml").read_text().replace('preset = "claude" ', 'preset = "script" ', 1)
    (repo / "drover.toml").write_text(config.replace('command = ""  ', f'command = "{agent}"', 1))
    for number in (1, 2, 3):
        (repo / "items" / f"D-{number}.md").write_text(
            f"---\nid: D-{number}\ntitle: Item {number}\n---\n\n## Requirements\n1. Write d-{number}.txt.\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")
    done = subprocess.run([str(BIN / "drover"), "drive", "--finish"], cwd=repo, text=True, capture_output=True,
                          env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    found = [int(size) for size in sizes.read_text().split()]
    assert len(found) == 3 and found[0] < found[1] < found[2], found
