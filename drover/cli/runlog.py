"""`drover log`: a run's agent log, printed or followed while the run is alive, a piece at a time."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import BinaryIO, Callable

from drover.errors import UsageError, printable
from drover.git.files import open_regular
from drover.ledger.db import Ledger
from drover.agents.locks import run_live
from drover.ledger.project import Project
from drover.ledger.rows import Check, Run
from drover.ledger.itemstate import item_state

FOLLOW_POLL = 0.25
# A log is copied a piece at a time: read whole, an agent's 1 GB log cost `drover log` 1 GB of
# memory, and the agent decides how much it prints (hostile review 35).
READ_BYTES = 1 << 20


def pick_run(project: Project, ledger: Ledger, item_id: str, run_id: str | None) -> Run:
    """The named run of the item, or its newest; a usage error when there is none."""
    runs = item_state(project, ledger, item_id).runs
    if not runs:
        raise UsageError(f"{item_id} has no runs yet")
    if run_id is None:
        return runs[-1]
    for run in runs:
        if run.id == run_id:
            return run
    checks = [check.id for check in ledger.checks(item_id)][-3:]
    raise UsageError(f"{item_id} has no run {run_id} (its runs: {', '.join(run.id for run in runs)}"
                     + (f"; its latest checks: {', '.join(checks)}" if checks else "") + ")")


def copy_log(path: Path, write: Callable[[bytes], None], *, follow: bool,
             still_running: Callable[[], bool]) -> None:
    """Write the log, then, with `follow`, what is appended to it until the run has ended."""
    offset = 0
    while True:
        running = still_running() if follow else False  # asked before reading: nothing is missed
        try:
            handle = open_regular(path, "rb")  # a fifo an agent put in its place: no wait
        except FileNotFoundError:
            handle = None
        except OSError as exc:  # a fifo, a link or a folder an agent put in its place
            raise UsageError(f"{path}: {exc.strerror or exc}") from None
        if handle is not None:
            with handle:
                handle.seek(offset)
                while data := handle.read(READ_BYTES):
                    write(data)
                    offset += len(data)
        if not running:
            return
        time.sleep(FOLLOW_POLL)


def first_run(project: Project, item_id: str, say: Callable[[str], None]) -> str | None:
    """Wait until the item has a run (a queued item's, once drive starts it): the id of its first
    run, which may have ended and have others after it by the time a poll sees it (a short
    implementing run, its review started); "" when it had runs already (the newest is followed);
    None on Ctrl-C."""
    with Ledger(project.ledger_path) as ledger:
        if item_state(project, ledger, item_id).runs:  # also: an item that does not exist is said now
            return ""
        say(f"drover: {item_id} has no run yet; waiting for its first (Ctrl-C to stop)")
        try:
            # until a run has a process (or has ended): before, its log may not exist yet
            runs = ledger.runs(item_id)
            while not any(run.pid or run.finished is not None for run in runs):
                time.sleep(FOLLOW_POLL)
                runs = ledger.runs(item_id)
        except KeyboardInterrupt:
            return None
    return runs[0].id


def _in_runs(project: Project, path: Path) -> bool:
    """The log is drover's: a file under .drover/runs/ (a ledger row brought by `ledger import` may
    name any path, absolute or through `..`)."""
    return Path(os.path.normpath(path)).is_relative_to(os.path.normpath(project.runs_dir))


def show_log(project: Project, item_id: str, run_id: str | None, *, follow: bool, out: BinaryIO) -> None:
    """Print the run's log to `out`; with `follow`, until the run ends or Ctrl-C (the run goes on),
    and for an item without a run yet, from its first run on."""
    if follow and run_id is None:
        waited = first_run(project, item_id, lambda line: print(line, file=sys.stderr, flush=True))
        if waited is None:
            return
        run_id = waited or None
    with Ledger(project.ledger_path) as ledger:
        check = next((check for check in ledger.checks(item_id) if check.id == run_id), None) if run_id else None
        if check is not None:  # a check's log (drive's summary names it), whole: it is recorded once ended
            path = project.root / (check.log_path or "")
            if not check.log_path or not _in_runs(project, path) or not path.exists():
                raise UsageError(f"{check.id}: no log at {check.log_path}")
            write = log_writer(out)
            copy_log(path, write, follow=False, still_running=lambda: False)
            write(b"", final=True)
            return
        run = pick_run(project, ledger, item_id, run_id)
        failed = _check_failed_since(ledger, item_id, run) if run_id is None else None
    if failed is not None:  # the item's newest word is a check's: its log is not the run's (a new user, on cJSON)
        print(f"drover: note: {item_id}'s check {failed.id} failed after this run; its output: "
              f"drover log {item_id} --run {failed.id}", file=sys.stderr, flush=True)
    path = project.root / (run.log_path or "")
    if not _in_runs(project, path):  # a row an import brought may name any file
        raise UsageError(f"{run.id}: its log {run.log_path} is not under {project.relpath(project.runs_dir)}")
    if not path.exists() and not (follow and run_live(run, project.runs_dir)):
        raise UsageError(f"{run.id}: no log at {run.log_path}")

    def still_running() -> bool:
        # until its end is recorded: the agent may have exited while its drover still writes the
        # last of its output to the log (a drover gone, the agent alone says: an orphan's log)
        with Ledger(project.ledger_path) as ledger:
            latest = ledger.run(run.id)
        return latest is not None and run_live(latest, project.runs_dir)

    write = log_writer(out)
    try:
        copy_log(path, write, follow=follow, still_running=still_running)
    except KeyboardInterrupt:
        pass
    write(b"", final=True)  # a last byte held for a character that never came


def _check_failed_since(ledger: Ledger, item_id: str, run: Run) -> Check | None:
    """The item's newest check that judged the branch (Check.judged: not base's own, not interrupted),
    when it failed and started after `run` did."""
    newest = max((check for check in ledger.checks(item_id) if check.judged), key=lambda check: check.started,
                 default=None)
    return newest if newest is not None and not newest.passed and newest.started > run.started else None


def log_writer(out: BinaryIO) -> Callable[..., None]:
    """write(data, final=False): a log's bytes to `out` as they are read. On a terminal no escape the
    agent wrote acts (errors.printable; bytes that are not UTF-8 pass through as they are, but those
    of C1's range); piped or redirected, the log's bytes as they are. One decoder serves every read:
    a character the agent split between two writes (C2, a second later 9B: C1's CSI) is held until
    its last byte comes, then shown whole, and cleaned."""
    import codecs

    terminal = out.isatty()
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")

    def write(data: bytes, *, final: bool = False) -> None:
        if terminal:
            data = printable(decoder.decode(data, final)).encode("utf-8", "surrogateescape")
        if data:
            out.write(data)
            out.flush()

    return write
