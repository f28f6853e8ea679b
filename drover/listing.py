"""`list`'s rows: every item of the catalogue with its state, read from the ledger in bulk.

compute_state (status.py) is the definition of a state; list_state is its tail over the plain
tuples Ledger.list_activity gives, and tests/test_list_paths.py holds the two to the same answers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from . import forks, git
from . import items as itemfile
from .ledger import Ledger
from .procs import run_alive
from .project import Project
from .status import NOT_DRIVEN, Entry, State, catalogue, collector_paused, run_trouble

# From this many items in the ledger, a forked child reads the ledger's part of a list (which
# items are done or parked, their activity, the runs still alive, the branches' heads) while this
# process reads and stats the item files, so the two halves use both cores. Fewer: read here.
# DROVER_LEDGER_CHILD_AT overrides it (the tests force both paths with it).
LEDGER_CHILD_AT = 5000


class Listed(NamedTuple):
    entry: Entry
    state: State
    note: str = ""
    deps_done: bool = True


def list_items(project: Project, ledger: Ledger) -> list[Listed]:
    """Every item with its state; a bad file is one row, never a failure of the whole list."""
    with collector_paused():
        return _list_items(project, ledger)


def _list_items(project: Project, ledger: Ledger) -> list[Listed]:
    # the ledger's part is read by a child while this process builds the catalogue
    child = forks.start(lambda: _ledger_part(project.root, Ledger.beside(ledger.path)), ledger.known_items(),
                        "DROVER_LEDGER_CHILD_AT", LEDGER_CHILD_AT)
    entries = catalogue(project, ledger)
    got = forks.answer(child) if child is not None else None
    done, parked, activity, live, heads = got[0] if got is not None else _ledger_part(project.root, ledger)
    match = itemfile.id_pattern(project.config.prefix).match
    # every dep once, matched in one C loop: the ids, and those done (most deps)
    ids = set(filter(match, set().union(*[found.deps for found in entries.values()])))
    settled = ids & done
    listed: list[Listed] = []
    append = listed.append
    new_tuple = tuple.__new__  # Listed(...) is a Python-level call per item
    # State.X is a descriptor lookup on the enum class (about 0.2 µs in 3.11): read each once
    unreadable, done_state, parked_state, running, blocked = (State.UNREADABLE, State.DONE, State.PARKED,
                                                              State.RUNNING, State.BLOCKED)
    for item_id, found in entries.items():
        deps_done = True
        for dep in found.deps:
            if dep not in settled:
                deps_done = False
        # compute_state's order, read from the tuples list_activity and flags give (list_state)
        if found.unreadable:
            append(new_tuple(Listed, (found, unreadable, found.problem, deps_done)))
            continue
        if item_id in done:
            state, note = done_state, ""
        elif item_id in parked:
            state, note = parked_state, parked[item_id]
        elif item_id in live:
            state, note = running, ""
        else:
            act = activity.get(item_id)
            state, note = list_state(found.outstanding, act, deps_done,
                                     heads.get(act[1] or "", "") if act is not None and heads else "")
        if not deps_done:
            bad = [dep for dep in found.deps if dep not in ids]
            if bad:
                note = "; ".join(f"dep {dep} {itemfile.NOT_AN_ID}" for dep in bad)
            elif state == blocked:
                note = "waiting on " + ", ".join(dep for dep in found.deps if dep not in done)
        append(new_tuple(Listed, (found, state, note, deps_done)))
    return listed


# list_state's answers, read once (a State.X lookup costs a descriptor call in 3.11)
_CHANGES_REQUESTED, _READY, _BLOCKED, _APPROVED, _IN_REVIEW = (State.CHANGES_REQUESTED, State.READY, State.BLOCKED,
                                                              State.APPROVED, State.IN_REVIEW)


def list_state(outstanding: bool, act: tuple[Any, ...] | None, deps_done: bool, head: str) -> tuple[State, str]:
    """compute_state past its first four states (unreadable, done, parked, running), from a row of
    Ledger.list_activity (None: no runs, rounds or audits). A test holds it to compute_state."""
    if act is None:
        if outstanding:
            return _CHANGES_REQUESTED, ""
        return (_READY, "") if deps_done else (_BLOCKED, "")
    _, _, newest_round, last_id, started, finished, outcome, exit_status, approval_at, approval_head = act
    ran = bool(last_id)
    if ran and not (outcome == "exited" and exit_status == 0 and finished is not None):
        run = {"id": last_id, "started": started, "finished": finished, "outcome": outcome, "exit_status": exit_status}
        trouble, why = run_trouble(run, False, approval_at or "")
        if trouble:
            return trouble, why
    if outstanding:
        return _CHANGES_REQUESTED, ""
    approval: str = approval_at or ""
    current = bool(approval) and approval > (newest_round or "")
    covered: str = approval_head or ""
    if current and head and covered == head:
        return _APPROVED, f"at {covered[:7]}"
    if ran:
        moved = f"the branch moved since the approval at {approval_head[:7]}" if current and approval_head else ""
        return _IN_REVIEW, moved
    if not deps_done:
        return _BLOCKED, ""
    return _READY, ""


def is_ready(listed: Listed) -> bool:
    """Work drive would take: readable, not done, parked or running, every dep done."""
    # a state that outranks "blocked" (changes requested, in review) must not hide a dep not done
    return listed.state not in NOT_DRIVEN | {State.BLOCKED, State.APPROVED} and listed.deps_done


def _ledger_part(root: Path, ledger: Ledger) -> tuple[set[str], dict[str, str], dict[str, tuple[Any, ...]],
                                                      set[str], dict[str, str]]:
    """What a list reads of the ledger and git: the ids done, those parked (with why), the activity
    of items not done, the items whose run is alive, and every branch's head."""
    done, parked = ledger.flags()
    activity = ledger.list_activity()  # only items not done: a done item's state needs none
    live = {run.item for run in ledger.unfinished_runs() if run_alive(run)}
    heads = git.branch_heads(root) if activity else {}
    return done, parked, activity, live, heads
