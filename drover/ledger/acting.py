"""Who a command acts for: the run whose agent started it, traced through its ancestry (never
taken from its environment alone), the run a replayed outbox belongs to, or the operator.

The writing commands (writes.py) ask here before they check or write anything: a verdict given
inside a run may name only that run's item, and every action is recorded as its actor's.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import TYPE_CHECKING, Iterator

from drover.errors import Refused, headline
from drover.ledger.db import Ledger
from drover.ledger.project import Project

if TYPE_CHECKING:

    from drover.ledger.rows import Run


# The run an action is taken for when the coordinator replays a worker's outbox (outbox.py):
# per thread, because drive replays several items' outboxes at once. None: not replaying.
_acting = threading.local()


def acting_run(ledger: Ledger | None = None) -> str:
    """The run an action is taken for: the one an outbox being replayed belongs to ("" none),
    else, given the ledger, the run whose agent this process descends from (traced_run), else
    $DROVER_RUN ("" outside any run: the operator) while that run has not ended: a run that
    ended gives no more verdicts, whoever names it (a leftover of its agent, or an agent of a
    later run that claims it while its own agent's pid is not yet on record)."""
    replayed: str | None = getattr(_acting, "run", None)
    if replayed is not None:
        return replayed
    claimed = os.environ.get("DROVER_RUN", "")
    if ledger is None:
        return claimed
    traced = traced_run(ledger, claimed)
    if traced and claimed != traced:
        said = f"$DROVER_RUN names {claimed[:64]!r}" if claimed else "$DROVER_RUN is unset"
        raise Refused(f"{said}, but this process descends from the agent of run {traced!r}: "
                      "a command inside a run acts as that run")
    if not traced and claimed and ledger.run_ended(claimed):
        raise Refused(f"$DROVER_RUN names {claimed[:64]!r}, a run that has ended: it acts no more "
                      "(an operator outside any run: unset DROVER_RUN)")
    return traced or claimed


def traced_run(ledger: Ledger, claimed: str = "") -> str:
    """The live run whose agent process this process descends from ("" none), whatever its
    environment says: an agent can unset or rewrite $DROVER_RUN for the commands it starts, not
    its own ancestry. A process that descends from a drover that starts agents or runs their code
    (procs.LAUNCHING), but from none of the live agents' processes, cannot say which run it
    belongs to, and is refused (docs/security.md): a double fork of an agent (re-parented to
    drover, the subreaper), an agent whose pid drover has not recorded yet, what drover's own
    check or `[run] setup` runs (the branch's code). Only a process outside every such drover
    acts as the operator.
    `claimed` ($DROVER_RUN) is not believed: that run's agent pid is only waited for (live_agents)."""
    from drover.agents.locks import drover_attached, launcher_of, launcher_pids, live_launchers
    from drover.agents.procs import Untraceable, is_launching_drover, lineage, parent_of, process_start

    try:
        me, above = lineage()
    except Untraceable as exc:
        raise Refused(f"{exc}: it cannot act for a run, nor as the operator") from None
    live = ledger.live_agents(awaiting=claimed)  # the claimed run's pid, once drover has written it
    # this process first: an agent that execs drover (`exec drover audit ...`) is the agent process
    for pid in (me, *above):
        for run_id, agent, started in live:
            if agent == pid and (not started or process_start(pid) == started):
                return run_id
    runs_dir = ledger.runs_dir
    if os.path.isdir("/proc"):
        # a drover that runs an agent now is alive (it holds its run's lock), and so is one that runs
        # agents between its runs (its launcher lock, locks.hold_launcher): a process that does not see
        # it as it is (locks.Launcher.hidden) cannot say it is none of that drover's agents, nor a
        # leftover of one, living on below it in a namespace of its own
        seen = [launcher_of(runs_dir / run_id) for run_id, _, _ in live] + live_launchers(runs_dir.parent)
        for launcher in seen:
            if launcher is not None and launcher.hidden():
                raise Refused(f"this process cannot see the drover at pid {launcher.pid}, which runs agents (it "
                              "lives in a process or mount namespace of its own): it cannot act for a run, nor as "
                              "the operator")
    # an orphan's parent is whatever adopted it, not a drover: only an attached run names its launcher
    launchers = {parent_of(agent) for run_id, agent, _ in live if drover_attached(runs_dir / run_id)} - {0, 1}
    # a drover that has launched holds its launcher lock to its exit, whatever its command line (a
    # `python -um drover drive`, the console script through a link of another name): hostile review 18
    holding = launcher_pids(runs_dir.parent) - {0, 1}
    # only what this process descends from: drive itself, a launcher, records a finish while others run
    under = [pid for pid in above if pid in launchers or pid in holding or is_launching_drover(pid)]
    if under:
        doing = "which runs agents" if under[0] in launchers else "which has no agent running now"
        raise Refused(f"this process descends from the drover at pid {under[0]}, {doing}, but from none of its "
                      "agents' processes: it cannot act for a run, nor as the operator")
    return ""


@contextmanager
def acting_as(run_id: str) -> Iterator[None]:
    """Every action inside is taken for run `run_id` ("" none), whatever $DROVER_RUN says here:
    a coordinator replays a worker's outbox as the run it belongs to, never as its own environment."""
    previous = getattr(_acting, "run", None)
    _acting.run = run_id
    try:
        yield
    finally:
        _acting.run = previous


def verdict_run(ledger: Ledger, item_id: str, command: str) -> Run | None:
    """The run a verdict command (audit, request-changes, close-changes, dispose, park) is given
    in, None outside any run (the operator); inside one it may name only that run's item.

    An operator shell that inherited $DROVER_RUN acts as that run, so it is refused the same way
    and told to unset it (docs/security.md).
    """
    run_id = acting_run(ledger)
    if not run_id:
        return None
    run = ledger.run(run_id)
    shown = repr(run_id[:64])
    if run is None:
        raise Refused(f"{command} {item_id} refused: $DROVER_RUN names {shown}, which is no run in this "
                      "ledger (an operator outside any run: unset DROVER_RUN)")
    if run.item != item_id:
        raise Refused(f"{command} {item_id} refused: run {shown} ({run.slot} of {run.item}) gives verdicts "
                      f"on {run.item} only (an operator outside any run: unset DROVER_RUN)")
    return run


def require_operator(ledger: Ledger, command: str) -> None:
    """Refuse `command` unless the operator gives it, outside every run: the commands that launch
    agents or checks, merge, unpark or stop (run, review, draft, drive, verify, finish, unpark,
    stop, ledger import), and the one that writes what the prompts say (override: drover.toml's
    [prompts] and the override files). Inside a run an agent gives verdicts on its own item, nothing
    else: a review it launched would run an agent in the environment it chose (its PATH, its
    ANTHROPIC_BASE_URL), whose audit opens the gate (docs/security.md)."""
    run_id = acting_run(ledger)  # refuses a process under a launching drover but under none of its agents
    if run_id:
        raise Refused(f"{command} refused: this process acts for run {run_id[:64]!r}; inside a run only "
                      "the verdict commands on its own item are given (an operator outside any run: "
                      "unset DROVER_RUN)")


def actor(project: Project, ledger: Ledger) -> str:
    """Who is acting: the agent of the acting run (acting_run), else git's user.name."""
    run_id = acting_run(ledger)
    if run_id:
        run = ledger.run(run_id)
        if run and run.agent:
            return run.agent
    # one line, each character of it visible: git's user.name may come from the shared .git/config (an
    # agent's to write), and a line break in it wrote `## Guarantees` into close-changes' cleared block,
    # a section of the agent's in the item file, and lines of show's own (hostile review 45)
    return headline(project.user_name or os.environ.get("USER", "")) or "operator"
