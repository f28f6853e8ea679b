"""`drover drive`: the items to drive (given, or every ready one and, with --finish, those that
become ready), each through driver.py's loop on a job of its own, the orphans named, the summary's
rows and exit status; Ctrl-C and SIGTERM end the items in flight and still give the summary."""
from __future__ import annotations

import signal
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable

from drover import git
from drover.loop.driver import Driven, Driver
from drover.loop.preview import Step, dry_run_plan, following_ids, header, item_rows, not_reached, queue_of, ready_ids
from drover.errors import UsageError
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.itemstate import item_state
from drover.agents.launch import say_above_status
from drover.agents.procs import run_alive
from drover.ledger.state import ORPHANED, orphan_note
from drover.executors import open_executor
from drover.executors.base import Executor

__all__ = ["DriveInterrupted", "Driven", "drive", "exit_status", "orphans"]


def orphans(project: Project) -> list[Driven]:
    """The items whose run's drover is gone while its agent runs on, as summary rows naming the pid."""
    found: list[Driven] = []
    with Ledger(project.ledger_path) as ledger:
        for run in ledger.unfinished_runs():
            note = orphan_note(run, project.runs_dir) if run_alive(run) else ""
            if note and run.item not in {row.item_id for row in found}:
                known = item_state(project, ledger, run.item)
                found.append(Driven(run.item, ORPHANED, len(known.rounds), len(known.runs), note))
    return found


def exit_status(results: list[Driven]) -> int:
    """0 when every item driven was approved (and finished, if asked); 1 otherwise, and when the
    only items were orphans: drive could do nothing, and something still runs unattended. An item
    given by id that was done already is not driven: nothing to do is no failure (docs/decisions.md)."""
    driven = [row for row in results if row.counted]
    if not driven:
        return 1 if any(row.result == ORPHANED for row in results) else 0
    return 0 if all(row.ok for row in driven) else 1


def drive(project: Project, ids: list[str], *, jobs: int = 1, finish: bool = False,
          say: Callable[[str], None] = print, echo: bool = False, executor: str | None = None,
          dry_run: bool = False, planned: Callable[[list[Step], str, str], None] = lambda steps, executor, where: None,
          left: list[str] | None = None) -> list[Driven]:
    """Drive the given ids, or every ready item (and, with finish, those that become ready).
    A dry run says the work ahead and hands it to `planned` (the steps, the executor's name and where its runs go), and
    launches nothing. `left` gets the items it never started (a stop, Ctrl-C), for the report the drive ends with."""
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if jobs > 1 and not project.config.worktree:
        raise UsageError("--jobs above 1 needs worktrees: set [run] worktree = true")
    explicit = bool(ids)
    from drover.loop.checks import require_no_errors

    with Ledger(project.ledger_path) as ledger:
        for item_id in ids:  # an id that names no item is a usage error before anything starts, not a row in the table
            item_state(project, ledger, item_id)
        require_no_errors(project, ledger, "drive", tuple(ids) if explicit else ())
    if finish:  # it would spend agent time, then fail every merge: refused before any launch
        from drover.loop.finish import refuse_dirty

        refuse_dirty(project, "first", "; no agent was launched", command="drive --finish")
    rows = item_rows(project) if not explicit or dry_run else None  # one listing: queue, followers, plan
    queue = queue_of(project, ids, finish, rows)
    # given ids speak for themselves (a row each); otherwise the orphans are named here and in the summary
    orphaned = [] if explicit else orphans(project)
    runner = open_executor(project, executor)
    then = following_ids(rows, queue) if finish and not explicit and rows is not None else []
    for line in header(project, queue, jobs, finish, then, rows if not explicit else None):
        say(line)
    say(f"  executor: {runner.name}: runs go to {runner.where()}")
    for row in orphaned:
        say(f"  {row.item_id}: {row.note}")
    if dry_run:
        steps = dry_run_plan(project, queue, rows or {}, explicit=explicit, finish=finish, where=runner.where())
        for step in steps:
            say(f"  {step.id}: {step.said}")
        planned(steps, runner.name, runner.where())
        say("--- drover: dry run; nothing was launched or written")
        return []
    try:
        if queue:
            runner.start()
        # one connection held open for the drive: each item's own (one a job) closing would otherwise be the
        # ledger's last, and SQLite then copies the whole log into the database, syncs it and deletes the log,
        # which the next item's first write makes again (four fsyncs and the copy an item; docs/performance.md)
        with Ledger(project.ledger_path):
            results, interrupted = _drive_queue(project, queue, explicit, jobs=jobs, finish=finish, say=say, echo=echo,
                                                runner=runner)
        # the items the drive started, and those left on its queue, which its stop or Ctrl-C named already
        accounted, stopped = {row.item_id for row in results} | set(queue), bool(queue) or interrupted is not None
        unreached = not_reached(rows or {}, then, accounted, stopped)  # then: [] unless --finish took them; Ctrl-C too
        results += [Driven(item_id, "skipped", 0, 0, note) for item_id, note in unreached]
    finally:
        runner.close()
        if left is not None:
            left.extend(queue)  # _drive_queue took the items it started off the queue
    if interrupted is not None:
        raise DriveInterrupted(results, interrupted)
    if queue:
        git.housekeeping(project.root)
    return results + [row for row in orphaned if row.item_id not in {done.item_id for done in results}]


# How long the drive's main thread sleeps at most between two looks for a signal. The kernel hands a
# signal sent to drover to any thread that does not block it, and a thread that changes its mask just
# then (one starting, one that has just started a process) can take it from the main thread it woke:
# Python runs the handler only when its main thread runs again, and a wait on the jobs' futures alone
# slept on until the item's job ended (a SIGTERM during a minute's set-up went unheard for the minute).
HEARS_SIGNALS_EVERY = 0.5


def _drive_queue(project: Project, queue: list[str], explicit: bool, *, jobs: int, finish: bool,
                 say: Callable[[str], None], echo: bool, runner: "Executor") -> tuple[list[Driven], KeyboardInterrupt | None]:
    lock = threading.Lock()
    if echo:
        say = say_above_status(say)  # on a terminal the jobs' status lines stay below the progress

    def locked_say(line: str) -> None:
        with lock:
            say(line)

    driver = Driver(project, finish=finish, say=locked_say, echo=echo, executor=runner)
    results: list[Driven] = []
    attempted: set[str] = set()
    with ThreadPoolExecutor(max_workers=jobs) as threads:
        running: dict[Future[Driven], str] = {}
        # the whole loop: a signal outside its wait() left the launches uncancelled for the pool to wait on
        try:
            while queue or running:
                while queue and len(running) < jobs and not driver.retries.stopped.is_set():
                    item_id = queue.pop(0)
                    if item_id in attempted:
                        continue
                    attempted.add(item_id)
                    running[threads.submit(driver.drive_item, item_id)] = item_id
                if not running:
                    if queue and driver.retries.stopped.is_set():
                        say(f"drive stopped: {driver.retries.stop_note}; not started: {', '.join(queue)}")
                    break
                done, _ = wait(running, timeout=HEARS_SIGNALS_EVERY, return_when=FIRST_COMPLETED)
                if not done:
                    continue  # no job ended: the main thread only looked for a signal
                for future in done:
                    results.append(future.result())
                    running.pop(future)
                if not explicit and finish:
                    # finishing an item can make the items that depend on it ready
                    queue += [item for item in ready_ids(project, finish) if item not in attempted and item not in queue]
        except KeyboardInterrupt as exc:
            driver.cancel.set()  # each launch in flight ends its agent and records the run
            wait(running)
            for future in running:
                try:
                    results.append(future.result())
                except Exception as error:  # noqa: BLE001 - said in the summary, as any item's end
                    results.append(Driven(running[future], "failed", 0, 0, f"interrupted: {error}"))
            if queue:
                say(f"drive interrupted; not started: {', '.join(queue)}")
            return results, exc  # drive raises it once the items it said would follow are among them
    return results, None


class DriveInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM ended a drive once its items in flight had ended: what it drove, for the
    summary, the `--report` page and `[notify]`, which an interrupted drive still gives."""

    def __init__(self, results: list[Driven], cause: KeyboardInterrupt) -> None:
        super().__init__(*cause.args)
        self.results = results
        self.signum = getattr(cause, "signum", signal.SIGINT)
