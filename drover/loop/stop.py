"""`drover stop`: end an item's live runs, and the mark that tells the drover attached to a run
that its end was asked for (runs.execute records it as interrupted)."""
from __future__ import annotations

import os
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from drover import git
from drover.agents.launch import GRACE_SECONDS
from drover.agents.locks import claimed_by, run_attached, run_live
from drover.agents.procs import end_orphan, marked_processes, run_alive
from drover.errors import Refused
from drover.git.files import folder_fd, regular_fd, replace_at
from drover.ledger.db import Ledger
from drover.ledger.rows import Run
from drover.ledger.project import Project

# `drover stop` leaves this file in the run's folder, so the drover attached to it records the
# end as interrupted (an agent ended by a signal would otherwise read as failed).
STOPPED = "stopped"
STOPPED_REASON = "stopped by `drover stop`"


def stopped(run_dir: Path) -> bool:
    """`drover stop` marked the run: a regular file, as stop writes it (not a link an agent left)."""
    return (run_dir / STOPPED).is_file() and not (run_dir / STOPPED).is_symlink()


@contextmanager
def _run_folder(project: Project, run_id: str) -> Iterator[int | None]:
    """A descriptor of the run's folder, reached without following a link (files.folder_fd), closed
    after; None when it is not a folder of drover's any more. The folder is the agent's to write,
    and to swap for a link in a loop: checked, then used by name, it let `stop` write its mark into
    the folder the link led to, or fail before it ended the agent (hostile review 20)."""
    try:
        folder = folder_fd(project.root, project.state_dir.name, project.runs_dir.name, run_id)
    except OSError:
        folder = None
    try:
        yield folder
    finally:
        if folder is not None:
            os.close(folder)


def _mark_stopped(folder: int | None) -> None:
    """Mark the run stopped for the drover that waits on it (runs.execute): a new file renamed over
    whatever is in its place, never written through a link nor waiting on a fifo (hostile review
    18). Nothing written where the folder is gone: the agent's end matters more than the word."""
    if folder is None:
        return
    try:
        replace_at(folder, STOPPED, f"{STOPPED_REASON} at {datetime.now(timezone.utc).isoformat()}\n".encode())
    except OSError:
        pass


def note_in_log(folder: int | None, said: str) -> None:
    """A last `[drover] ...` line at the end of the run's log, when it is a file drover wrote
    (an agent may have put a link, a fifo, a folder in its place: the ledger still says why)."""
    if folder is None:
        return
    try:
        fd = regular_fd("agent.log", os.O_WRONLY | os.O_APPEND, dir_fd=folder)
        with open(fd, "ab") as log:
            log.write(f"\n[drover] {said}\n".encode())
    except OSError:
        pass


def say_stopped_in_log(project: Project, run_id: str) -> None:
    """The attached drover's last line in the log of a run `drover stop` ended, as a timeout's is."""
    with _run_folder(project, run_id) as folder:
        note_in_log(folder, f"{STOPPED_REASON}: ended the agent's processes")


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
        unrecorded = [_stop_orphan(project, ledger, item_id, run, pid, " (its pid never recorded)")
                      for run in runs if run.finished is None and run.pid is None
                      for pid in _leader(marked_processes("DROVER_RUN", run.id))]
        if unrecorded:
            return unrecorded
        raise Refused(f"{item_id} has no live run: nothing to stop")
    lines = []
    for run in live:
        assert run.pid is not None  # run_alive
        if not run_attached(run, project.runs_dir):
            lines.append(_stop_orphan(project, ledger, item_id, run, run.pid))
            continue
        with _run_folder(project, run.id) as folder:
            _mark_stopped(folder)
            end_orphan(run.pid, run.id, GRACE_SECONDS)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ended = ledger.run(run.id)
            if ended is None or ended.finished is not None:
                break
            time.sleep(0.1)
        ledger.log_event("stop", item_id, run=run.id, pid=run.pid, orphaned=False)
        lines.append(f"{item_id}: stopped run {run.id} (agent pid {run.pid}); its drover recorded the end")
    return lines


def _stop_orphan(project: Project, ledger: Ledger, item_id: str, run: Run, pid: int, unknown: str = "") -> str:
    """End a run whose drover is gone (its agent's group, `pid`, and every process carrying its
    DROVER_RUN) and record it interrupted; the line `stop` says of it."""
    with _run_folder(project, run.id) as folder:
        _mark_stopped(folder)
        end_orphan(pid, run.id, GRACE_SECONDS)
        note_in_log(folder, f"{STOPPED_REASON}: its drover was gone; ended the agent's processes")
    head = git.head_of(project.root, run.branch) if run.slot == "implement" and run.branch else None
    ledger.set_run_node(run.id, run.node or "local", f"{STOPPED_REASON} (its drover was gone)")
    ledger.finish_run(run.id, None, "interrupted", head)
    ledger.set_failure(run.id, "interrupted", f"{STOPPED_REASON} (its drover was gone)")
    ledger.log_event("stop", item_id, run=run.id, pid=pid, orphaned=True)
    return f"{item_id}: stopped orphaned run {run.id} (agent pid {pid}{unknown}); recorded as interrupted"


def _leader(pids: list[int]) -> list[int]:
    """Of the processes carrying a run's mark, the agent: the one leading its own process group (an
    agent starts in a session of its own); [] when none is. A drover killed between starting the
    agent and recording its pid left a run no pid names, whose agent runs on."""
    return [pid for pid in pids if _pgid(pid) == pid][:1]


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except OSError:
        return -1
