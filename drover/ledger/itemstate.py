"""One item's state as show, drive, finish, log and prompt ask it (`item_state`: state.state_of of
the item's facts, with the rows they were read from) and show's plain data built on it (`show_item`);
its deps are described by depstate.py."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from drover import git
from drover.agents import usage
from drover.agents.locks import run_live
from drover.items import file as itemfile
from drover.ledger.catalogue import Entry, entry
from drover.ledger.depstate import DescribedDep, describe_deps
from drover.ledger.db import Ledger
from drover.ledger.project import Project, missing_item, not_an_id
from drover.ledger.rows import Round, Run
from drover.ledger.state import Activity, ItemFacts, State, orphan_note, running_notes, state_of, verdict_of


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
    rates: dict[str, tuple[float, float]] | None = None  # [budget.rates] as usage.price reads them

    @property
    def parked(self) -> bool:
        return bool(self.row.get("parked"))

    @property
    def parked_reason(self) -> str:
        return str(self.row.get("parked_reason") or "")

    @property
    def usage(self) -> dict[str, Any]:
        """Tokens in and out, cost and tool calls over the item's runs (drover/agents/usage.py)."""
        return usage_total(self.runs, self.rates or {})

    @property
    def log(self) -> str:
        return newest_log(self.runs)


def newest_log(runs: Sequence[Run]) -> str:
    """The newest run's agent log ("" before any run)."""
    return (runs[-1].log_path or "") if runs else ""


def item_state(project: Project, ledger: Ledger, item_id: str, *, heads: Mapping[str, str] | None = None) -> ItemState:
    """The item's state, from its file (through the cache), its ledger rows and its branch head
    (from `heads`, branch -> sha, when the caller has just read it; a branch it does not name is
    asked of git)."""
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
    head = "" if not branch else heads[branch] if heads and branch in heads else git.head_of(project.root, branch)
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
        rates=project.config.budget.rate_card,
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
        "runs": [_run_view(run, project.runs_dir, known.rates or {}) for run in known.runs],
        "usage": known.usage,
        "rounds": [round_.as_json() for round_ in known.rounds],
        "audits": [audit.as_json() for audit in ledger.audits(item_id)],
        "dispositions": ledger.dispositions(item_id),
        "checks": [check.as_json() for check in ledger.checks(item_id)],
        "worktree": "" if row.get("done") else _worktree(project, ledger, item_id),
    }


def _worktree(project: Project, ledger: Ledger, item_id: str) -> str:
    """The worktree the item holds, relative to the root (the pooled one, else its own folder); ""
    when it holds none: where an operator resolves a parked item's conflict by hand."""
    if not project.config.worktree:
        return ""
    held = ledger.held_worktree(item_id)
    if held is not None:
        return held.path
    own = project.worktrees_dir / item_id
    return os.path.relpath(own, project.root) if own.is_dir() else ""


def usage_total(runs: Sequence[Run], rates: dict[str, tuple[float, float]] | None = None) -> dict[str, Any]:
    """Tokens in and out, cost and tool calls over the item's runs, and what they cost (`usd`, priced
    from `rates` where they name the run's model, else the CLI's figure: drover/agents/usage.py)."""
    return usage.total([usage.priced({"model": run.model, "input_tokens": run.input_tokens,
                                      "output_tokens": run.output_tokens, "cost_usd": run.cost_usd,
                                      "tool_calls": run.tool_calls}, rates or {}) for run in runs])


def _run_view(run: Run, runs_dir: Path, rates: dict[str, tuple[float, float]]) -> dict[str, Any]:
    view = usage.priced(run.as_json(), rates)
    view["unfinished"] = run.finished is None
    view["live"] = run_live(run, runs_dir)
    view["orphaned"] = view["live"] and bool(orphan_note(run, runs_dir))
    return view


def _finding(project: Project, item_id: str) -> str:
    """The provenance line: show reads the one file's body (the cache does not keep it), not its
    frontmatter, which the cache has read (and which would cost show the YAML parser)."""
    return itemfile.body_finding(project.item_path(item_id))
