"""An item's state from the ledger and its file; the catalogue behind list, show and check."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import git
from . import items as itemfile
from .fields import Dep
from .items import Unreadable
from .ledger import Ledger
from .procs import run_alive
from .project import Project
from .rows import Audit, ItemRows, Run
from .vocabulary import LEVELS


class State(StrEnum):
    """An item's state; docs/states.md is the table of what moves an item out of each."""

    READY = "ready"
    BLOCKED = "blocked"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    IN_REVIEW = "in review"
    CHANGES_REQUESTED = "changes requested"
    APPROVED = "approved"
    PARKED = "parked"
    DONE = "done"
    UNREADABLE = "unreadable"


# Where drive's next step is an implementing run (in review: a review; approved: a finish),
# and the states it does not drive at all.
IMPLEMENT_NEXT = frozenset({State.READY, State.BLOCKED, State.INTERRUPTED, State.FAILED, State.CHANGES_REQUESTED})
NOT_DRIVEN = frozenset({State.UNREADABLE, State.DONE, State.PARKED, State.RUNNING})


@dataclass(frozen=True)
class Entry:
    """What the catalogue knows of one item file, from the metadata cache or a fresh parse."""

    id: str
    rel: str
    title: str = ""
    kind: str = ""
    deps: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    outstanding: bool = False
    cleared: bool = False
    unreadable: str = ""
    detail: str = ""
    line: int | None = None

    @property
    def problem(self) -> str:
        """One line naming file and line: what check, list and show print for an unreadable item."""
        where = f"{self.rel}:{self.line}" if self.line else self.rel
        return f"{where}: {self.id} {self.unreadable}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class AuditProvenance:
    level: str = ""
    by: str = ""
    weak: bool = True


def _entry_from_file(project: Project, path: Path) -> tuple[Entry, dict[str, Any]]:
    rel = project.item_rel(path.name)
    try:
        item = itemfile.read_item(path, project.config.prefix)
    except Unreadable as exc:
        entry = Entry(id=path.stem, rel=rel, unreadable=exc.wording, detail=exc.detail, line=exc.line)
    else:
        entry = Entry(
            id=item.id, rel=rel, title=item.title, kind=item.kind, deps=item.deps,
            meta=_jsonable(item.meta), outstanding=item.outstanding, cleared=item.cleared,
        )
    return entry, _cache_row(entry, path)


def _jsonable(meta: dict[str, Any]) -> dict[str, Any]:
    plain: dict[str, Any] = json.loads(json.dumps(meta, default=str))
    return plain


def _cache_row(entry: Entry, path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {
        "path": entry.rel, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "id": entry.id,
        "title": entry.title, "kind": entry.kind, "deps": json.dumps(list(entry.deps)),
        "meta": json.dumps(entry.meta), "outstanding": int(entry.outstanding),
        "cleared": int(entry.cleared), "unreadable": entry.unreadable, "detail": entry.detail,
        "line": entry.line,
    }


def _entry_from_cache(row: dict[str, Any]) -> Entry:
    return Entry(
        id=row["id"], rel=row["path"], title=row["title"] or "", kind=row["kind"] or "",
        deps=tuple(json.loads(row["deps"])) if row["deps"] not in (None, "[]") else (),
        meta=json.loads(row["meta"]) if row["meta"] not in (None, "{}") else {},
        outstanding=bool(row["outstanding"]), cleared=bool(row["cleared"]),
        unreadable=row["unreadable"] or "", detail=row["detail"] or "", line=row["line"],
    )


def catalogue(project: Project, ledger: Ledger) -> dict[str, Entry]:
    """Every item file, by id (its file name), parsing only files whose size or mtime changed.

    The loop runs once per file at 50,000 items: names and stats come from one scandir, and a
    Path is made only for a file that must be parsed again.
    """
    import os

    cache = ledger.cached_files()
    entries: dict[str, Entry] = {}
    fresh: list[dict[str, Any]] = []
    seen: set[str] = set()
    folder = project.items_dir
    base = project.item_rel("")
    try:
        scanned = [(found.name, found) for found in os.scandir(folder) if found.name.endswith(".md")]
    except (FileNotFoundError, NotADirectoryError):
        scanned = []
    scanned.sort()
    for name, found in scanned:
        rel = base + name
        seen.add(rel)
        try:
            stat = found.stat()
        except FileNotFoundError:
            continue
        row = cache.get(rel)
        if row and row["size"] == stat.st_size and row["mtime_ns"] == stat.st_mtime_ns:
            entry = _entry_from_cache(row)
        else:
            entry, cache_row = _entry_from_file(project, folder / name)
            fresh.append(cache_row)
        entries[name[:-3]] = entry
    ledger.store_files(fresh, [rel for rel in cache if rel not in seen])
    return dict(sorted(entries.items(), key=lambda pair: _sort_key(pair[0], project.config.prefix)))


def entry(project: Project, ledger: Ledger, item_id: str) -> Entry:
    """One item's entry, through the cache, without reading any other file."""
    path = project.item_path(item_id)
    rel = project.item_rel(path.name)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return Entry(id=item_id, rel=rel, unreadable=itemfile.MISSING)
    row = ledger.cached_files_for([rel]).get(rel)
    if row and row["size"] == stat.st_size and row["mtime_ns"] == stat.st_mtime_ns:
        return _entry_from_cache(row)
    found, cache_row = _entry_from_file(project, path)
    ledger.store_files([cache_row])
    return found


def entries_for(project: Project, ledger: Ledger, item_ids: Iterable[str]) -> dict[str, Entry]:
    """Several items' entries by id, as entry() gives each, through one read of the cache (a prompt's deps)."""
    paths = {item_id: project.item_path(item_id) for item_id in item_ids}
    rels = {item_id: project.item_rel(path.name) for item_id, path in paths.items()}
    cached = ledger.cached_files_for(list(rels.values())) if rels else {}
    found: dict[str, Entry] = {}
    fresh: list[dict[str, Any]] = []
    for item_id, path in paths.items():
        rel = rels[item_id]
        try:
            stat = path.stat()
        except FileNotFoundError:
            found[item_id] = Entry(id=item_id, rel=rel, unreadable=itemfile.MISSING)
            continue
        row = cached.get(rel)
        if row and row["size"] == stat.st_size and row["mtime_ns"] == stat.st_mtime_ns:
            found[item_id] = _entry_from_cache(row)
        else:
            found[item_id], cache_row = _entry_from_file(project, path)
            fresh.append(cache_row)
    ledger.store_files(fresh)
    return found


def _sort_key(item_id: str, prefix: str) -> tuple[int, str]:
    # string tests before the regex: this runs once per item on every list
    number = item_id[len(prefix) + 1:]
    if item_id.startswith(prefix + "-") and number.isdigit() and number[0] != "0" and number.isascii():
        return (int(number), item_id)
    return (1 << 62, item_id)


def audit_provenance(audits: Sequence[Audit], authors: Sequence[str] = ()) -> AuditProvenance:
    """The audit that best confirms an item, and whether nothing independent confirms it (Weak).

    Independent: at `reviewed` or above, by someone who is not one of the item's authors (those
    recorded when the audit was given, and `authors`, the item's authors now). An item with no
    recorded author has no self-audits. Level/By name the best independent audit (highest
    level, newest on ties), or the best audit of all when none is independent.
    """
    if not audits:
        return AuditProvenance()

    def rank(row: Audit) -> tuple[int, str, int]:
        return (LEVELS.index(row.level), row.at, row.id)

    independent = [
        row for row in audits
        if LEVELS.index(row.level) >= LEVELS.index("reviewed")
        and row.by not in {*row.authors, *authors}
    ]
    best = max(independent or audits, key=rank)
    return AuditProvenance(level=best.level, by=best.by or "", weak=not independent)


def last_implement(activity: dict[str, Any] | None) -> dict[str, Any] | None:
    """The item's newest implementing run, as the activity query reports it; None before any."""
    activity = activity or {}
    if not activity.get("last_id"):
        return None
    return {key: activity.get(f"last_{key}") for key in
            ("id", "started", "finished", "outcome", "exit_status", "pid", "pid_start", "head_start", "head")}


def run_trouble(run: dict[str, Any] | None, live: bool, approval_at: str = "") -> tuple[State | None, str]:
    """Whether the last implementing run left unfinished work: (INTERRUPTED or FAILED, why) or (None, "").

    An approving audit given after that run ended means someone judged the work as it stands,
    so the trouble is behind it.
    """
    if run is None or live:
        return None, ""
    ended = run.get("finished")
    outcome = run.get("outcome") or ""
    if ended is None:
        state, why = State.INTERRUPTED, f"implementing run {run['id']} never recorded an end (killed or died)"
    elif outcome == "timeout":
        state, why = State.INTERRUPTED, f"implementing run {run['id']} timed out"
    elif outcome == "interrupted":
        state, why = State.INTERRUPTED, f"implementing run {run['id']} was interrupted"
    elif outcome == "exited" and run.get("exit_status") == 0:
        return None, ""
    elif outcome == "exited":
        state, why = State.FAILED, f"implementing run {run['id']} exited {run.get('exit_status')}"
    else:
        state, why = State.FAILED, f"implementing run {run['id']} {outcome}"
    if approval_at and approval_at > (ended or run.get("started") or ""):
        return None, ""
    return state, why


def unfinished_work(runs: Sequence[Run], audits: Sequence[Audit]) -> tuple[State | None, str]:
    """run_trouble for the newest implementing run of `runs`, against the newest approval of `audits`:
    what compute_state reads from the activity query, from an item's rows already read."""
    last = next((run for run in reversed(runs) if run.slot == "implement"), None)
    approvals = [audit.at for audit in audits if audit.level in ("reviewed", "verified")]
    return run_trouble(last.as_json() if last else None, False, approvals[-1] if approvals else "")


def approval_current(activity: dict[str, Any] | None) -> bool:
    """An approving audit is newer than the newest round (whatever commit it covers)."""
    activity = activity or {}
    approval: str = activity.get("approval_at") or ""
    newest_round: str = activity.get("newest_round") or ""
    return bool(approval) and approval > newest_round


def approved_head(activity: dict[str, Any] | None, head: str) -> str:
    """The commit the item's approval covers when it covers the branch's current head `head`; else ""."""
    activity = activity or {}
    covered = activity.get("approval_head") or ""
    return covered if approval_current(activity) and head and covered == head else ""


def compute_state(entry: Entry, row: dict[str, Any], activity: dict[str, Any] | None,
                  live: bool, deps_done: bool, head: str = "") -> tuple[State, str]:
    """The first state that applies, in the order an operator cares about, and why (or "").

    `head` is the current head of the item's branch ("" when it has none).
    """
    if entry.unreadable:
        return State.UNREADABLE, entry.problem
    if row.get("done"):
        return State.DONE, ""
    if row.get("parked"):
        return State.PARKED, row.get("parked_reason") or ""
    if live:
        return State.RUNNING, ""
    activity = activity or {}
    last = last_implement(activity)
    trouble, why = run_trouble(last, False, activity.get("approval_at") or "")
    if trouble:
        return trouble, why
    if entry.outstanding:
        return State.CHANGES_REQUESTED, ""
    covered = approved_head(activity, head)
    if covered:
        return State.APPROVED, f"at {covered[:7]}"
    if last is not None:
        moved = ""
        if approval_current(activity) and activity.get("approval_head"):
            moved = f"the branch moved since the approval at {activity['approval_head'][:7]}"
        return State.IN_REVIEW, moved
    if not deps_done:
        return State.BLOCKED, ""
    return State.READY, ""


@dataclass(frozen=True)
class Listed:
    entry: Entry
    state: State
    note: str = ""
    deps_done: bool = True


def list_items(project: Project, ledger: Ledger) -> list[Listed]:
    """Every item with its state; a bad file is one row, never a failure of the whole list."""
    entries = catalogue(project, ledger)
    rows = ledger.item_rows()
    activity = ledger.activity()
    live = {run.item for run in ledger.unfinished_runs() if run_alive(run)}
    done = {item_id for item_id, row in rows.items() if row.get("done")}
    heads = git.branch_heads(project.root) if activity else {}
    pattern = itemfile.id_pattern(project.config.prefix)
    listed = []
    for item_id, found in entries.items():
        bad = [dep for dep in found.deps if not pattern.match(dep)]
        missing = [dep for dep in found.deps if pattern.match(dep) and dep not in done]
        act = activity.get(item_id) or {}
        state, note = compute_state(found, rows.get(item_id, {}), act, item_id in live,
                                    not bad and not missing, heads.get(act.get("branch") or "", ""))
        if state == State.UNREADABLE:
            pass
        elif bad:
            note = "; ".join(f"dep {dep} {itemfile.NOT_AN_ID}" for dep in bad)
        elif state == State.BLOCKED:
            note = "waiting on " + ", ".join(missing)
        listed.append(Listed(found, state, note, deps_done=not bad and not missing))
    return listed


def is_ready(listed: Listed) -> bool:
    """Work drive would take: readable, not done, parked or running, every dep done."""
    # a state that outranks "blocked" (changes requested, in review) must not hide a dep not done
    return listed.state not in NOT_DRIVEN | {State.BLOCKED, State.APPROVED} and listed.deps_done


def describe_deps(project: Project, ledger: Ledger, dep_ids: Iterable[str],
                  rows: ItemRows | None = None) -> list[tuple[Dep, Entry | None]]:
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
    described: list[tuple[Dep, Entry | None]] = []
    for dep_id in ids:
        if not pattern.match(dep_id):
            described.append((Dep(Id=dep_id, Unreadable=itemfile.NOT_AN_ID, Weak=True), None))
            continue
        found = found_all[dep_id]
        provenance = audit_provenance(rows.audits_of(dep_id), rows.authors(dep_id))
        described.append((Dep(
            Id=dep_id, Title=found.title, Path=found.rel,
            Done=bool(rows.item_row(dep_id).get("done")), Unreadable=found.unreadable,
            Level=provenance.level, By=provenance.by, Weak=provenance.weak,
        ), found))
    return described
