"""SIGKILL every writing command at random points, then check file and ledger agree.

The count per command is DROVER_STRESS_KILLS (default 50, so 300 kills over six commands); a
kill counts only when the process was still running when the signal was sent. Half the kill
times are uniform over the command's whole run, half fall in its last third, where the lock,
the commit and the rename happen.

With [project] commit_items the loop runs again over the four commands that write item files,
DROVER_STRESS_COMMIT_KILLS times each (default a fifth of DROVER_STRESS_KILLS): after every kill
nothing of drover's is uncommitted or staged, and at the end each write the ledger records is
one commit of its own text (helpers.assert_each_write_committed).
"""
from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

# Minutes, not seconds: only under `make test-stress` (DROVER_STRESS=1).
pytestmark = pytest.mark.skipif(not os.environ.get("DROVER_STRESS"), reason="make test-stress runs these")

from helpers import BIN, FINDINGS, assert_agrees, assert_each_write_committed, git, run, seed_four_items

KILLS = int(os.environ.get("DROVER_STRESS_KILLS", "50"))
COMMIT_KILLS = int(os.environ.get("DROVER_STRESS_COMMIT_KILLS", str(max(1, KILLS // 5))))
_unique = itertools.count()  # findings never repeat an item's text: each round changes the file
COMMANDS = {
    "new": lambda n: (["new", f"item {n}"], None),
    "request-changes": lambda n: (["request-changes", f"D-{1 + n % 4}"], f"## finding {n}.{next(_unique)}\nfix {n}\n"),
    "close-changes": lambda n: (["close-changes", f"D-{1 + n % 4}", "--note", f"n{n}"], None),
    "audit": lambda n: (["audit", f"D-{1 + n % 4}", "--level", "reviewed"], None),
    "park": lambda n: (["park", f"D-{1 + n % 4}", "--why", f"reason {n}"], None),
    "dispose": lambda n: (["dispose", "D-1", "7", "--as", "keep"], None),
}


def timed(root: Path, name: str, make) -> float:
    """How long one run of the command takes (with something to clear, for the clearing ones)."""
    if name in ("close-changes", "audit"):
        run(root, "request-changes", "D-1", stdin=f"{FINDINGS}{next(_unique)}\n")
    args, stdin = make(0)
    started = time.monotonic()
    run(root, *args, stdin=stdin, process=True)  # the kills below land in a process's lifetime
    return time.monotonic() - started


def kill_once(root: Path, args: list[str], stdin: str | None, after: float) -> bool:
    """Start the command, SIGKILL it after `after` seconds; True when it was killed mid-run.
    One that ran to its end must not have failed (exit 1, a refusal such as nothing to clear, is
    by design)."""
    process = subprocess.Popen([str(BIN / "drover"), *args], cwd=root, stdin=subprocess.PIPE,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    if stdin is not None:
        try:
            process.stdin.write(stdin)
        except BrokenPipeError:
            pass
    process.stdin.close()
    time.sleep(after)
    alive = process.poll() is None
    if alive:
        process.send_signal(signal.SIGKILL)
    process.wait()
    if alive and process.returncode == -signal.SIGKILL:
        return True
    assert process.returncode in (0, 1), f"drover {' '.join(args)} exited {process.returncode}"
    return False


def _commit_items(root: Path) -> str:
    """Turn [project] commit_items on (and the round cap up, so every request writes), commit
    that, and stage a file of the operator's; the base commit."""
    config = root / "drover.toml"
    lines = config.read_text().splitlines()
    for key, value in (("commit_items", "true"), ("max_rounds", "100000")):
        lines = [f"{key} = {value}" if line.split("=")[0].strip() == key else line for line in lines]
    config.write_text("\n".join(lines) + "\n")
    git(root, "commit", "-q", "-am", "commit_items")
    (root / "staged.txt").write_text("the operator's\n")
    git(root, "add", "staged.txt")
    return git(root, "rev-parse", "HEAD").strip()


@pytest.mark.parametrize("commit_items", [False, True], ids=["files", "commit_items"])
def test_sigkills_at_random_points_of_every_writing_command(repo, commit_items):
    rng = random.Random(int(os.environ.get("DROVER_STRESS_SEED", "11")))
    seed_four_items(repo)
    kills, commands = KILLS, COMMANDS
    if commit_items:
        base = _commit_items(repo)
        kills = COMMIT_KILLS
        commands = {name: COMMANDS[name] for name in ("new", "request-changes", "close-changes", "audit")}
    tally = {}
    for name, make in commands.items():
        whole = sorted(timed(repo, name, make) for _ in range(3))[1]  # one run alone can meet a load spike
        killed = attempts = 0
        while killed < kills:
            attempts += 1
            assert attempts < kills * 6, f"{name}: only {killed} of {attempts} runs were killed mid-run"
            args, stdin = make(attempts)
            if name in ("close-changes", "audit") and attempts % 2:
                # something to clear: alternate requests (also killable) with the clears
                kill_once(repo, *COMMANDS["request-changes"](attempts), after=rng.uniform(0, whole * 1.2))
            late = rng.random() < 0.5
            after = rng.uniform(whole * 0.66, whole * 1.05) if late else rng.uniform(0, whole)
            killed += kill_once(repo, args, stdin, after)
            assert_agrees(repo)
            if commit_items:  # opening the ledger made what a kill left owed: nothing is left over
                status = git(repo, "status", "--porcelain", "--untracked-files=all").splitlines()
                assert sorted(status) == ["A  staged.txt"], status
        tally[name] = killed
        print(f"{name}{' (commit_items)' if commit_items else ''}: {killed} kills in {attempts} runs")
    assert all(count >= kills for count in tally.values())
    if commit_items:
        print(f"commit_items: {assert_each_write_committed(repo, base, seeded=4)} commits, one per write")
    else:
        assert sum(tally.values()) >= 300 or KILLS < 50
