"""`list`'s rows: every item of the catalogue with its state, read from the ledger in bulk.

compute_state (status.py) is the definition of a state. A list asks the same two functions it
asks (status.judge and status.decide) of plain values read in bulk: judge makes of an item's
Ledger.list_activity row and branch head what the state needs, decide finishes it with the item
file's part, and tests/test_list_paths.py holds list_state to compute_state's answers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from drover.items import forks
from drover import git
from drover.items import file as itemfile
from drover.ledger.db import Ledger
from drover.agents.procs import run_alive
from drover.ledger.project import Project
from drover.ledger.status import NOTHING, NOT_DRIVEN, Entry, Judged, State, catalogue, collector_paused, decide, orphan_note
from drover.ledger.status import judge as judge_activity


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
    # the stat child reads the ledger's part once it has sent the stats, while this process
    # matches the files with their cache rows; without a stat child, it is read here
    also = forks.Also(lambda: _packed(_ledger_part(project.root, project.runs_dir, Ledger.beside(ledger.path))))
    try:
        entries = catalogue(project, ledger, also)
        got = also.answer()
    finally:
        also.close()  # a child whose answer was not read (this process failed midway) is ended
    done, parked, judged, live = _unpacked(got[0]) if got is not None else _ledger_part(project.root, project.runs_dir, ledger)
    match = itemfile.id_pattern(project.config.prefix).match
    settled = set(filter(match, done))  # a dep is done when it is an id and its item is done
    # decide's answer for each verdict, placeholder or not, outstanding or not, deps done or not
    # (few verdicts, many items)
    decided: dict[Judged, tuple[tuple[State, str], ...]] = {}
    listed: list[Listed] = []
    append = listed.append
    new_tuple = tuple.__new__  # Listed(...) is a Python-level call per item
    # State.X is a descriptor lookup on the enum class (about 0.2 µs in 3.11): read each once
    unreadable, done_state, parked_state, running, blocked = (State.UNREADABLE, State.DONE, State.PARKED,
                                                              State.RUNNING, State.BLOCKED)
    for item_id, found in entries.items():
        deps_done = settled.issuperset(found.deps)
        # compute_state's order, read from what flags and judge give (list_state)
        if found.unreadable:
            append(new_tuple(Listed, (found, unreadable, found.problem, deps_done)))
            continue
        if item_id in done:
            state, note = done_state, ""
        elif item_id in parked:
            state, note = parked_state, parked[item_id]
        elif item_id in live:
            state, note = running, live[item_id]
        else:
            verdict = judged.get(item_id, NOTHING)
            answers = decided.get(verdict)
            if answers is None:
                answers = decided[verdict] = tuple(decide(outstanding, verdict, ready, placeholder)
                                                   for placeholder in (False, True)
                                                   for outstanding in (False, True) for ready in (False, True))
            state, note = answers[4 * found.placeholder + 2 * found.outstanding + deps_done]
        if not deps_done:
            bad = [dep for dep in found.deps if not match(dep)]
            if bad:
                note = "; ".join(f"dep {dep} {itemfile.NOT_AN_ID}" for dep in bad)
            elif state == blocked:
                note = "waiting on " + ", ".join(dep for dep in found.deps if dep not in done)
        append(new_tuple(Listed, (found, state, note, deps_done)))
    return listed


def list_state(outstanding: bool, act: tuple[Any, ...] | None, deps_done: bool, head: str,
               placeholder: bool = False) -> tuple[State, str]:
    """compute_state past its first four states (unreadable, done, parked, running), from a row of
    Ledger.list_activity (None: no runs, rounds or audits). A test holds it to compute_state."""
    return decide(outstanding, NOTHING if act is None else judge(act, head), deps_done, placeholder)


def judge(act: tuple[Any, ...], head: str) -> Judged:
    """status.judge of an item's Ledger.list_activity row and its branch's head `head`."""
    _, _, newest_round, last_id, started, finished, outcome, exit_status, approval_at, approval_head = act
    return judge_activity(newest_round, last_id, started, finished, outcome, exit_status, approval_at, approval_head,
                          head)


def is_ready(listed: Listed) -> bool:
    """Work drive would take: readable, not done, parked or running, every dep done."""
    # a state that outranks "blocked" (changes requested, in review) must not hide a dep not done
    return listed.state not in NOT_DRIVEN | {State.BLOCKED, State.APPROVED} and listed.deps_done


def _ledger_part(root: Path, runs_dir: Path, ledger: Ledger) -> "LedgerPart":
    """What a list reads of the ledger and git: the ids done, those parked (with why), what judge
    makes of the activity of each item not done, and the items whose run is alive (with an
    orphan's note). Plain values
    throughout, small to send: a child computes it beside the catalogue."""
    done, parked = ledger.flags()
    activity = ledger.list_activity()  # only items not done: a done item's state needs none
    live: dict[str, str] = {}  # item -> its running note (an orphan's, or "")
    for run in ledger.unfinished_runs():  # only runs without an end: liveness costs nothing for the rest
        if run_alive(run):
            live[run.item] = live.get(run.item) or orphan_note(run, runs_dir)
    heads = git.branch_heads(root) if activity else {}
    judged = {item: judge(act, heads.get(act[1] or "", "") if heads else "") for item, act in activity.items()}
    return done, parked, judged, live


LedgerPart = tuple[set[str], dict[str, str], dict[str, Judged], dict[str, str]]


def _packed(part: LedgerPart) -> tuple[str, dict[str, str], list[tuple[Judged, str]], dict[str, str]]:
    """_ledger_part's answer as few objects for the pipe (marshal spends most of its time per
    object): the done ids joined by NUL, which no id holds, and the items grouped by what judge
    made of them (most items are judged alike), each group's ids joined. (An id with a NUL could
    only come from a hand-made ledger; it fails the child, and the parent then reads here.)"""
    done, parked, judged, live = part
    if "\0" in "".join(done) or "\0" in "".join(judged):
        raise ValueError("an id holds NUL")  # the child fails, and the parent reads the ledger itself
    groups: dict[Judged, list[str]] = {}
    for item, verdict in judged.items():
        groups.setdefault(verdict, []).append(item)
    return "\0".join(done), parked, [(verdict, "\0".join(items)) for verdict, items in groups.items()], live


def _unpacked(packed: tuple[str, dict[str, str], list[tuple[Judged, str]], dict[str, str]]) -> LedgerPart:
    done, parked, groups, live = packed
    judged: dict[str, Judged] = {}
    for verdict, items in groups:
        judged.update(dict.fromkeys(items.split("\0"), verdict))
    return set(done.split("\0")) if done else set(), parked, judged, dict(live)
