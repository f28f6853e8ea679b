"""SIGKILL every writing command at random points, then check file and ledger agree.

The count per command is DROVER_STRESS_KILLS (default 50, so 300 kills over six commands); a
kill counts only when the process was still running when the signal was sent. Half the kill
times are uniform over the command's whole run, half fall in its last third, where the lock,
the commit and the rename happen.
"""
from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

# Minutes, not seconds: only under `make test-stress` (DROVER_STRESS=1).
pytestmark = pytest.mark.skipif(not os.environ.get("DROVER_STRESS"), reason="make test-stress runs these")

from helpers import BIN, FINDINGS, assert_agrees, run, seed_four_items

KILLS = int(os.environ.get("DROVER_STRESS_KILLS", "50"))
COMMANDS = {
    "new": lambda n: (["new", f"item {n}"], None),
    "request-changes": lambda n: (["request-changes", f"D-{1 + n % 4}"], f"## finding {n}\nfix {n}\n"),
    "close-changes": lambda n: (["close-changes", f"D-{1 + n % 4}", "--note", f"n{n}"], None),
    "audit": lambda n: (["audit", f"D-{1 + n % 4}", "--level", "reviewed"], None),
    "park": lambda n: (["park", f"D-{1 + n % 4}", "--why", f"reason {n}"], None),
    "dispose": lambda n: (["dispose", "D-1", "7", "--as", "keep"], None),
}


def timed(root: Path, args: list[str], stdin: str | None) -> float:
    started = time.monotonic()
    run(root, *args, stdin=stdin)
    return time.monotonic() - started


def kill_once(root: Path, args: list[str], stdin: str | None, after: float) -> bool:
    """Start the command, SIGKILL it after `after` seconds; True when it was killed mid-run."""
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
    return alive and process.returncode == -signal.SIGKILL


def test_sigkills_at_random_points_of_every_writing_command(repo):
    rng = random.Random(int(os.environ.get("DROVER_STRESS_SEED", "11")))
    seed_four_items(repo)
    tally = {}
    for name, make in COMMANDS.items():
        args, stdin = make(0)
        if name in ("close-changes", "audit"):
            run(repo, "request-changes", "D-1", stdin=FINDINGS)
        whole = timed(repo, args, stdin)
        killed = attempts = 0
        while killed < KILLS:
            attempts += 1
            assert attempts < KILLS * 6, f"{name}: only {killed} of {attempts} runs were killed mid-run"
            args, stdin = make(attempts)
            if name in ("close-changes", "audit") and attempts % 2:
                # something to clear: alternate requests (also killable) with the clears
                kill_once(repo, *COMMANDS["request-changes"](attempts), after=rng.uniform(0, whole * 1.2))
            late = rng.random() < 0.5
            after = rng.uniform(whole * 0.66, whole * 1.05) if late else rng.uniform(0, whole)
            killed += kill_once(repo, args, stdin, after)
            assert_agrees(repo)
        tally[name] = killed
        print(f"{name}: {killed} kills in {attempts} runs")
    assert all(count >= KILLS for count in tally.values())
    assert sum(tally.values()) >= 300 or KILLS < 50
