"""An item's state: `state_of` decides it from an item's facts (`ItemFacts`), for every command.

list gathers the facts of every item from the ledger read in bulk (listing.py); show, drive,
finish, log and prompt gather one item's (itemstate.py); check reads `verdict_of` of the
approved items. docs/states.md is the rule in prose, in the order `state_of` applies it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from drover.ledger.rows import exited_zero
from drover.vocabulary import State

if TYPE_CHECKING:
    from pathlib import Path

    from drover.ledger.rows import Audit, Run

__all__ = ["State"]  # defined in vocabulary.py (the command line's choices derive from it), decided here

# Where drive's next step is an implementing run (in review: a review; approved: a finish),
# and the states it does not drive at all (needs requirements: someone writes them first).
IMPLEMENT_NEXT = frozenset({State.READY, State.BLOCKED, State.INTERRUPTED, State.FAILED, State.CHANGES_REQUESTED})
NOT_DRIVEN = frozenset({State.UNREADABLE, State.DONE, State.PARKED, State.RUNNING, State.NEEDS_REQUIREMENTS})

# The word that opens a running item's note when its drover is gone (a reason on `running`, not a state).
ORPHANED = "orphaned"


class Activity(NamedTuple):
    """What an item's state reads of its row of the activity table (activity.LIST_KEYS, in order)."""

    item: str
    branch: str | None = None
    newest_round: str | None = None
    last_id: str | None = None
    last_started: str | None = None
    last_finished: str | None = None
    last_outcome: str | None = None
    last_exit_status: Any = None
    approval_at: str | None = None
    approval_head: str | None = None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> "Activity":
        """From a row read by name (Ledger.activity_for's)."""
        return cls._make(row.get(key) for key in cls._fields)


class Verdict(NamedTuple):
    """What an item's state makes of its activity and its branch's head (verdict_of)."""

    trouble: State | None = None  # INTERRUPTED or FAILED: the last implementing run left unfinished work
    why: str = ""  # why, naming that run
    approved: str = ""  # the short sha an approval covers, when it covers the branch's head
    ran: bool = False  # an implementing run was recorded
    moved: str = ""  # of a current approval: that the branch moved since the commit it covers, or is gone


NO_ACTIVITY = Verdict()  # an item without runs, rounds or audits


class ItemFacts(NamedTuple):
    """Everything an item's state depends on, from its file, the ledger and its branch's head."""

    unreadable: str = ""  # the problem line of an unreadable item file; "" when it reads
    done: bool = False
    parked: str | None = None  # why it is parked (perhaps ""); None when it is not
    running: str | None = None  # its live run's note (an orphan's, or ""); None when no run is live
    activity: Verdict = NO_ACTIVITY
    outstanding: bool = False  # its Changes section holds findings nobody has discharged
    placeholder: bool = False  # its requirements are still `drover new`'s placeholder
    deps_done: bool = True  # every dep is an id and done


class Decided(NamedTuple):
    state: State
    reason: str = ""  # why, or "" (list's note; show says it for running, interrupted, failed, in review)


def state_of(facts: ItemFacts) -> Decided:
    """The first state that applies, in the order an operator cares about, and why (docs/states.md)."""
    if facts.unreadable:
        return Decided(State.UNREADABLE, facts.unreadable)
    if facts.done:
        return Decided(State.DONE)
    if facts.parked is not None:
        return Decided(State.PARKED, facts.parked)
    if facts.running is not None:
        return Decided(State.RUNNING, facts.running)
    verdict = facts.activity
    if verdict.trouble is not None:
        return Decided(verdict.trouble, verdict.why)
    if facts.outstanding:
        return Decided(State.CHANGES_REQUESTED)
    if verdict.approved:
        return Decided(State.APPROVED, f"at {verdict.approved}")
    if verdict.ran:
        return Decided(State.IN_REVIEW, verdict.moved)
    if facts.placeholder:
        return Decided(State.NEEDS_REQUIREMENTS)
    if not facts.deps_done:
        return Decided(State.BLOCKED)
    return Decided(State.READY)


def verdict_of(activity: Activity | None, head: str) -> Verdict:
    """What an item's activity row (None: it has none) says, against its branch's head `head`
    ("" when it has no branch)."""
    if activity is None:
        return NO_ACTIVITY
    trouble = Trouble()
    if activity.last_id:
        last = LastRun(activity.last_id, activity.last_started or "", activity.last_finished,
                       activity.last_outcome, activity.last_exit_status)
        trouble = run_trouble(last, activity.approval_at or "")
    covered = activity.approval_head or ""
    current = _approval_newer(activity.approval_at, activity.newest_round)
    return Verdict(
        trouble=trouble.state, why=trouble.why,
        approved=covered[:7] if current and head and covered == head else "",
        ran=bool(activity.last_id),
        moved=_moved(activity.branch or "", head, covered) if current and covered else "",
    )


def _moved(branch: str, head: str, covered: str) -> str:
    """Why a current approval does not cover the branch's head: it moved, or there is no branch."""
    if not head:
        return f"its branch {branch} is gone since the approval at {covered[:7]}"
    return f"the branch moved since the approval at {covered[:7]}"


class RunEnd(Protocol):
    """What run_trouble reads of a run: a Run row, or the activity's last implementing run."""

    @property
    def id(self) -> str: ...
    @property
    def started(self) -> str: ...
    @property
    def finished(self) -> str | None: ...
    @property
    def outcome(self) -> str | None: ...
    @property
    def exit_status(self) -> Any: ...


class LastRun(NamedTuple):
    id: str
    started: str
    finished: str | None
    outcome: str | None
    exit_status: Any


class Trouble(NamedTuple):
    """What an implementing run left: INTERRUPTED or FAILED and why, or no state and ""."""

    state: State | None = None
    why: str = ""


def run_trouble(run: RunEnd, approval_at: str = "") -> Trouble:
    """Whether an implementing run that is not live left unfinished work.

    An approving audit given after that run ended means someone judged the work as it stands,
    so the trouble is behind it.
    """
    ended, outcome = run.finished, run.outcome or ""
    if ended is None:
        state, why = State.INTERRUPTED, f"implementing run {run.id} never recorded an end (killed or died)"
    elif outcome == "timeout":
        state, why = State.INTERRUPTED, f"implementing run {run.id} timed out"
    elif outcome == "interrupted":
        state, why = State.INTERRUPTED, f"implementing run {run.id} was interrupted"
    elif exited_zero(outcome, run.exit_status):
        return Trouble()
    elif outcome == "exited":
        state, why = State.FAILED, f"implementing run {run.id} exited {run.exit_status}"
    else:
        state, why = State.FAILED, f"implementing run {run.id} {outcome}"
    if approval_at and approval_at > (ended or run.started or ""):
        return Trouble()
    return Trouble(state, why)


def unfinished_work(runs: Iterable[Run], audits: Iterable[Audit]) -> Trouble:
    """run_trouble of the newest implementing run of `runs` against the newest approval of
    `audits`: what the state reads of the activity, from an item's rows already read."""
    last = None
    for run in runs:
        if run.slot == "implement":
            last = run
    approvals = [audit.at for audit in audits if audit.opens]
    return run_trouble(last, approvals[-1] if approvals else "") if last is not None else Trouble()


def _approval_newer(approval_at: str | None, newest_round: str | None) -> bool:
    return bool(approval_at) and (approval_at or "") > (newest_round or "")


def approval_current(activity: Mapping[str, Any] | None) -> bool:
    """An audit that opens the gate (the activity row's approval: activity.OPENS_GATE) is newer
    than the newest round (whatever commit it covers)."""
    activity = activity or {}
    return _approval_newer(activity.get("approval_at"), activity.get("newest_round"))


def running_notes(runs: Iterable[Run], runs_dir: "Path") -> dict[str, str]:
    """Per item with a live run of `runs` (locks.run_live: one being set up counts), its running
    note: an orphan's, or ""."""
    from drover.agents.locks import run_live

    notes: dict[str, str] = {}
    for run in runs:
        if run.finished is None and run_live(run, runs_dir):
            notes[run.item] = notes.get(run.item) or orphan_note(run, runs_dir)
    return notes


def orphan_note(run: Run, runs_dir: "Path") -> str:
    """Of a live run: "" while the drover that launched it is attached; else what list, show and
    drive say of the orphan, with its agent's pid (docs/states.md)."""
    from drover.agents.locks import run_attached

    if run_attached(run, runs_dir):
        return ""
    return f"{ORPHANED}: agent pid {run.pid} runs with no drover attached (`drover stop {run.item}` ends it)"


def slot_at(state: State) -> str:
    """The slot an item in `state` is at, as `prompt` without --slot takes it: review while a review
    is next (in review, approved), draft while it needs requirements, else implement."""
    if state in (State.IN_REVIEW, State.APPROVED):
        return "review"
    if state == State.NEEDS_REQUIREMENTS:
        return "draft"
    return "implement"
