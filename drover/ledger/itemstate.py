"""One item's state as show, drive, finish, log and prompt ask it (`item_state`: state.state_of of
the item's facts, with the rows they were read from), show's plain data built on it (`show_item`),
and the description of an item's deps (`describe_deps`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence

from drover import git
from drover.agents import usage
from drover.agents.procs import run_alive
from drover.items import file as itemfile
from drover.items.deps import Dep  # not fields.py: show would build every template type
from drover.items.file import Unreadable
from drover.ledger.catalogue import Entry, entries_for, entry
from drover.ledger.db import Ledger
from drover.ledger.project import Project, missing_item, not_an_id
from drover.ledger.rows import Audit, ItemRows, Round, Run
from drover.ledger.state import Activity, ItemFacts, State, orphan_note, running_notes, state_of, verdict_of
from drover.vocabulary import LEVELS


@dataclass(frozen=True)
class ItemState:
    """One item's state and the ledger rows it was computed from: what drive asks once per pass."""

    id: str
    entry: Entry
    state: State
    reason: str  # why, for interrupted, failed and in review, and an orphaned run; "" otherwise (as show says it)
    row: dict[str, Any]  # the item's row of `items`
    runs: tuple[Run, ...]
    rounds: tuple[Round, ...]
    deps: tuple[DescribedDep, ...]
    branch: str = ""
    head: str = ""
    approved_head: str = ""

    @property
    def parked(self) -> bool:
        return bool(self.row.get("parked"))

    @property
    def parked_reason(self) -> str:
        return str(self.row.get("parked_reason") or "")

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens in and out, cost and tool calls over the item's runs (drover/agents/usage.py)."""
        return usage_total(self.runs)

    @property
    def log(self) -> str:
        """The newest run's agent log ("" before any run)."""
        return (self.runs[-1].log_path or "") if self.runs else ""


def item_state(project: Project, ledger: Ledger, item_id: str) -> ItemState:
    """The item's state, from its file (through the cache), its ledger rows and its branch head."""
    found = entry(project, ledger, item_id)
    runs = ledger.runs(item_id)
    rounds = ledger.rounds(item_id)
    if found.unreadable == itemfile.MISSING and not runs and not rounds:
        if itemfile.id_number(item_id, project.config.prefix) is None:
            raise not_an_id(project, item_id)
        raise missing_item(project, ledger, item_id)
    row = ledger.item_row(item_id)
    deps = describe_deps(project, ledger, found.deps)
    activity = Activity.of(ledger.activity_for(item_id))
    branch = activity.branch or ""
    head = git.head_of(project.root, branch) if branch else ""
    decided = state_of(ItemFacts(
        unreadable=found.problem if found.unreadable else "", done=bool(row.get("done")),
        parked=(row.get("parked_reason") or "") if row.get("parked") else None,
        running=running_notes(runs, project.runs_dir).get(item_id), activity=verdict_of(activity, head),
        outstanding=found.outstanding, placeholder=found.placeholder, deps_done=all(described.dep.Done for described in deps),
    ))
    state = decided.state
    return ItemState(
        id=item_id, entry=found, state=state,
        reason=decided.reason if state in (State.RUNNING, State.INTERRUPTED, State.FAILED, State.IN_REVIEW) else "",
        row=row, runs=tuple(runs), rounds=tuple(rounds), deps=tuple(deps), branch=branch, head=head,
        # the commit the approval covers (its branch's head), while it is what an approved item
        # would merge; once done, the commit the approval in force at the merge covered
        approved_head=(activity.approval_head or "") if state in (State.APPROVED, State.DONE) else "",
    )


def show_item(project: Project, ledger: Ledger, item_id: str) -> dict[str, Any]:
    """Everything the ledger and the file say of one item, as plain data (show and show --json)."""
    known = item_state(project, ledger, item_id)
    found, row = known.entry, known.row
    return {
        "id": item_id,
        "path": found.rel,
        "title": found.title,
        "kind": found.kind,
        "state": str(known.state),
        "reason": known.reason,
        "branch": known.branch,
        "head": known.head,
        "approved_head": known.approved_head,
        "unreadable": found.problem if found.unreadable else "",
        "meta": found.meta,
        "cleared": found.cleared,
        "outstanding": found.outstanding,
        "finding": _finding(project, item_id) if not found.unreadable else "",
        "done": bool(row.get("done")),
        "done_at": row.get("done_at") or "",
        "parked": known.parked,
        "parked_reason": known.parked_reason,
        "authors": ledger.authors(item_id),
        "deps": [
            {"id": dep.Id, "title": dep.Title, "path": dep.Path, "done": dep.Done, "unreadable": dep.Unreadable,
             "level": dep.Level, "by": dep.By, "weak": dep.Weak}
            for dep in (described.dep for described in known.deps)
        ],
        "runs": [_run_view(run, project.runs_dir) for run in known.runs],
        "usage": known.usage,
        "rounds": [round_.as_json() for round_ in known.rounds],
        "audits": [audit.as_json() for audit in ledger.audits(item_id)],
        "dispositions": ledger.dispositions(item_id),
        "checks": [check.as_json() for check in ledger.checks(item_id)],
    }


def usage_total(runs: Sequence[Run]) -> dict[str, Any]:
    """Tokens in and out, cost and tool calls over the item's runs (drover/agents/usage.py)."""
    return usage.total([{"input_tokens": run.input_tokens, "output_tokens": run.output_tokens,
                         "cost_usd": run.cost_usd, "tool_calls": run.tool_calls} for run in runs])


def _run_view(run: Run, runs_dir: Path) -> dict[str, Any]:
    view = run.as_json()
    view["unfinished"] = run.finished is None
    view["live"] = run_alive(run)
    view["orphaned"] = view["live"] and bool(orphan_note(run, runs_dir))
    return view


def _finding(project: Project, item_id: str) -> str:
    """The provenance line: show reads the one file, the cache does not keep the body."""
    try:
        return itemfile.read_item(project.item_path(item_id), project.config.prefix).finding
    except Unreadable:
        return ""


@dataclass(frozen=True)
class AuditProvenance:
    """The audit that best confirms an item (its level, who gave it), and whether nothing
    independent confirms it (see audit_provenance)."""

    level: str = ""
    by: str = ""
    weak: bool = True


def audit_provenance(audits: Sequence[Audit], authors: Sequence[str] = ()) -> AuditProvenance:
    """The audit that best confirms an item, and whether nothing independent confirms it (Weak).

    Independent: an audit that opens the gate (activity.opens_gate: at `reviewed` or above, by a
    review run of the item or the operator), by someone who is not one of the item's authors
    (those recorded when the audit was given, and `authors`, the item's authors now). An item
    with no recorded author has no self-audits. Level/By name the best independent audit (highest
    level, newest on ties), or the best audit of all when none is independent.
    """
    if not audits:
        return AuditProvenance()

    def rank(row: Audit) -> tuple[int, str, int]:
        return (LEVELS.index(row.level), row.at, row.id)

    independent = [row for row in audits if row.opens and row.by not in {*row.authors, *authors}]
    best = max(independent or audits, key=rank)
    return AuditProvenance(level=best.level, by=best.by or "", weak=not independent)


class DescribedDep(NamedTuple):
    dep: Dep
    entry: Entry | None  # None for a dep that is not an id


def describe_deps(project: Project, ledger: Ledger, dep_ids: Iterable[str],
                  rows: ItemRows | None = None) -> list[DescribedDep]:
    """Each dep once: done (the ledger), readable (its file, through the cache), its best audit.

    A dep that is not an id has no entry. `show` and the template data both describe deps so.
    The ledger's tables and the cache are each read once for every dep together; `rows` are the
    deps' rows when the caller has read them (Ledger.rows_of).
    """
    pattern = itemfile.id_pattern(project.config.prefix)
    ids = list(dict.fromkeys(dep_ids))
    valid = [dep_id for dep_id in ids if pattern.match(dep_id)]
    if rows is None:
        rows = ledger.rows_of(valid)
    found_all = entries_for(project, ledger, valid)
    described: list[DescribedDep] = []
    for dep_id in ids:
        if not pattern.match(dep_id):
            described.append(DescribedDep(Dep(Id=dep_id, Unreadable=itemfile.NOT_AN_ID, Weak=True), None))
            continue
        found = found_all[dep_id]
        provenance = audit_provenance(rows.audits_of(dep_id), rows.authors(dep_id))
        described.append(DescribedDep(Dep(
            Id=dep_id, Title=found.title, Path=found.rel,
            Done=bool(rows.item_row(dep_id).get("done")), Unreadable=found.unreadable,
            Level=provenance.level, By=provenance.by, Weak=provenance.weak,
        ), found))
    return described
