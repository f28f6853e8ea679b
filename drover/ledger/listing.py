"""`list`'s rows: every item of the catalogue with its state.

The facts of every item are read in bulk (one read of each ledger table, one git call for every
branch's head) and state.state_of decides each item's state from them, as it does for one item.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Container
from typing import NamedTuple

from drover import git
from drover.items import file as itemfile
from drover.ledger.catalogue import Entry, catalogue, collector_paused, with_missing
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.state import (NO_ACTIVITY, NOT_DRIVEN, Activity, Decided, ItemFacts, State, Verdict, running_notes,
                                 state_of, verdict_of)


class Listed(NamedTuple):
    entry: Entry
    state: State
    note: str = ""
    deps_done: bool = True


class LedgerFacts(NamedTuple):
    """What a list reads of the ledger and git, for every item at once."""

    done: set[str]
    parked: dict[str, str]  # item -> why, of the items parked and not done
    verdicts: dict[str, Verdict]  # item -> what its activity says; an item without activity has none here
    running: dict[str, str]  # item -> its live run's note (an orphan's, or "")


def list_items(project: Project, ledger: Ledger) -> list[Listed]:
    """Every item with its state; a bad file is one row, never a failure of the whole list, and
    so is an item the ledger has history of whose file is gone (catalogue.with_history)."""
    with collector_paused():
        return states_of(project, ledger, with_missing(project, ledger, catalogue(project, ledger)))


def states_of(project: Project, ledger: Ledger, entries: dict[str, Entry]) -> list[Listed]:
    """The state of each item of `entries` (catalogue entries by id), from the ledger read in bulk;
    a dep waited on that is none of `entries` is noted `(no such item)` (list's are with_missing's:
    every file, and every item the ledger has history of)."""
    facts = ledger_facts(project, ledger)
    match = itemfile.id_pattern(project.config.prefix).match
    done, parked, verdicts, running = facts.done, facts.parked, facts.verdicts, facts.running
    settled = set(filter(match, done))  # a dep is done when it is an id and its item is done
    decide = functools.cache(state_of)  # many items have the same facts
    listed = []
    for item_id, found in entries.items():
        deps_done = settled.issuperset(found.deps)
        decided = decide(ItemFacts(
            unreadable=found.problem if found.unreadable else "", done=item_id in done,
            parked=parked.get(item_id), running=running.get(item_id),
            activity=verdicts.get(item_id, NO_ACTIVITY), outstanding=found.outstanding,
            placeholder=found.placeholder, deps_done=deps_done,
        ))
        note = decided.reason
        if not deps_done and decided.state != State.UNREADABLE:
            note = _deps_note(found.deps, decided, done, match, parked, entries)
        listed.append(Listed(found, decided.state, note, deps_done))
    return listed


def ledger_facts(project: Project, ledger: Ledger) -> LedgerFacts:
    """The ids done, those parked (with why), what the activity of each item not done says
    against its branch's head, and the items whose run is alive."""
    done, parked = ledger.flags()
    rows = ledger.list_activity()  # only items not done: a done item's state needs none
    heads = git.branch_heads(project.root) if rows else {}
    verdicts = {}
    for item, row in rows.items():
        activity = Activity._make(row)
        verdicts[item] = verdict_of(activity, heads.get(activity.branch or "", ""))
    # only runs without an end: liveness costs nothing for the rest
    return LedgerFacts(done, parked, verdicts, running_notes(ledger.unfinished_runs(), project.runs_dir))


def _deps_note(deps: tuple[str, ...], decided: Decided, done: set[str], match: Callable[[str], object],
               parked: dict[str, str], known: Container[str]) -> str:
    """The note of an item whose deps are not all done: the deps that are no id, or (blocked) those
    it waits on, a parked one marked so (it waits on the operator, not on a drive) and one that
    names no item `known` (no file, no history: a typo or a deleted item) so (nothing will do it)."""
    bad = [dep for dep in deps if not match(dep)]
    if bad:
        return "; ".join(f"dep {dep} {itemfile.NOT_AN_ID}" for dep in bad)
    if decided.state == State.BLOCKED:
        return "waiting on " + ", ".join(dep + (" (parked)" if dep in parked else "" if dep in known else " (no such item)")
                                         for dep in deps if dep not in done)
    return decided.reason


def is_ready(listed: Listed) -> bool:
    """Work drive would take: readable, not done, parked or running, every dep done."""
    # a state that outranks "blocked" (changes requested, in review) must not hide a dep not done
    return listed.state not in NOT_DRIVEN | {State.BLOCKED, State.APPROVED} and listed.deps_done
