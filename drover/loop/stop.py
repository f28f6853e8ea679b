"""`drover stop`: end an item's live runs, and the mark that tells the drover attached to a run
that its end was asked for (runs.execute records it as interrupted)."""
from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

from drover import git
from drover.agents.launch import GRACE_SECONDS
from drover.agents.locks import claimed_by, drover_attached, run_live
from drover.agents.procs import end_orphan, run_alive
from drover.errors import Refused
from drover.git.files import open_regular, replace_file
from drover.ledger.db import Ledger
from drover.ledger.project import Project

# `drover stop` leaves this file in the run's folder, so the drover attached to it records the
# end as interrupted (an agent ended by a signal would otherwise read as failed).
STOPPED = "stopped"
STOPPED_REASON = "stopped by `drover stop`"


def stopped(run_dir: Path) -> bool:
    """`drover stop` marked the run: a regular file, as stop writes it (not a link an agent left)."""
    return (run_dir / STOPPED).is_file() and not (run_dir / STOPPED).is_symlink()


def _mark_stopped(run_dir: Path) -> None:
    """Mark the run stopped for the drover that waits on it (runs.execute). The run's folder is the
    agent's to write: the mark replaces whatever is in its place, never writing through a link nor
    waiting on a fifo (hostile review 18), and a run folder that is not a folder any more gets none."""
    if run_dir.is_symlink() or run_dir.exists() and not run_dir.is_dir():
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    replace_file(run_dir / STOPPED, f"{STOPPED_REASON} at {datetime.now(timezone.utc).isoformat()}\n".encode())


def _note_in_log(run_dir: Path) -> None:
    """Say at the end of an orphan's log that `drover stop` ended it, when the log is a file drover wrote."""
    try:
        with open_regular(run_dir / "agent.log", "ab") as log:
            log.write(f"\n[drover] {STOPPED_REASON}: its drover was gone; ended the agent's processes\n".encode())
    except OSError:
        pass  # a link, a fifo, a folder in its place: the ledger still says why


def stop(project: Project, ledger: Ledger, item_id: str) -> list[str]:
    """End the item's live runs (`drover stop`): each one's process group and marked processes.

    An orphan's end is recorded here (interrupted); a run whose drover is attached is recorded
    by that drover, which this waits for.
    """
    project.require_item(item_id)
    runs = ledger.runs(item_id)
    live = [run for run in runs if run_alive(run)]
    if not live:
        claimed = next((run for run in runs if run_live(run, project.runs_dir)), None)
        if claimed is not None:  # its drover makes the worktree ready or runs `[run] setup`: no agent yet
            raise Refused(f"{item_id}: run {claimed.id} is being set up ({claimed_by(claimed, project.runs_dir)}): "
                          "no agent to stop yet; Ctrl-C or SIGTERM to that drover ends the set-up")
        raise Refused(f"{item_id} has no live run: nothing to stop")
    lines = []
    for run in live:
        assert run.pid is not None  # run_alive
        run_dir = project.runs_dir / run.id
        orphan = not drover_attached(run_dir)
        _mark_stopped(run_dir)
        end_orphan(run.pid, run.id, GRACE_SECONDS)
        if orphan:
            _note_in_log(run_dir)
            head = git.head_of(project.root, run.branch) if run.slot == "implement" and run.branch else None
            ledger.set_run_node(run.id, run.node or "local", f"{STOPPED_REASON} (its drover was gone)")
            ledger.finish_run(run.id, None, "interrupted", head)
            ledger.set_failure(run.id, "interrupted", f"{STOPPED_REASON} (its drover was gone)")
            ledger.log_event("stop", item_id, run=run.id, pid=run.pid, orphaned=True)
            lines.append(f"{item_id}: stopped orphaned run {run.id} (agent pid {run.pid}); recorded as interrupted")
            continue
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ended = ledger.run(run.id)
            if ended is None or ended.finished is not None:
                break
            time.sleep(0.1)
        ledger.log_event("stop", item_id, run=run.id, pid=run.pid, orphaned=False)
        lines.append(f"{item_id}: stopped run {run.id} (agent pid {run.pid}); its drover recorded the end")
    return lines
