"""`[run] setup`: a command run once in each new worktree before its first agent.

A fresh worktree has the code but none of what the code needs (a virtualenv, node_modules);
worse, an editable install made in the main checkout makes the worktree's tests import the
main checkout's code. The setup command (`uv sync`, `npm ci`, `pip install -e .`) runs in the
worktree itself, so the agent's verify command tests the branch it is on.
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from drover import git
from drover.errors import DroverError

MARKER = "drover-setup-done"


class SetupFailed(DroverError):
    """The setup command exited non-zero or could not run (exit 1: the item stops)."""

    exit_code = 1


def run_setup(command: str, worktree: Path, log_path: Path, *, item_id: str, shown_log: str,
              timeout: float | None = None, once: bool = True) -> bool:
    """Run `command` in `worktree` unless it already ran there (`once`); True when it ran now.

    Its output goes to `log_path` (the run's log, which the agent then appends to). The marker
    lives in the worktree's private git folder, so a worktree removed and made again runs it again.
    A pooled worktree (pool.py) passes once=False: the ledger's digest of its inputs decides.
    """
    if not command.strip():
        return False
    marker = git.private_dir(worktree) / MARKER if once else None
    if marker is not None and marker.exists():
        return False
    log_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DROVER_ITEM=item_id, DROVER_WORKTREE=str(worktree))
    # setup runs the branch's code, often before this drover's first agent: what it double-forks must
    # be re-parented to drover, not to init, where it would pass for the operator (acting.traced_run)
    from drover.agents.locks import launching

    launching()
    with open(log_path, "ab") as log:
        log.write(f"$ {command}    # [run] setup, in {worktree}\n".encode())
        log.flush()
        # the operator's own command line, like a Makefile recipe: through the shell
        try:
            done = subprocess.run(["/bin/sh", "-c", command], cwd=worktree, env=env, stdin=subprocess.DEVNULL,
                                  stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False)
            status = f"exit {done.returncode}"
            failed = done.returncode != 0
        except subprocess.TimeoutExpired:
            status, failed = "timed out", True
        log.write(f"# [run] setup ended: {status}\n".encode())
    if failed:
        raise SetupFailed(f"{item_id}: worktree setup failed ({status}); log: {shown_log}")
    if marker is not None:
        marker.write_text(command + "\n", encoding="utf-8")
    return True
