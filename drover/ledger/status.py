"""An item's state from the ledger and its file; the catalogue behind list, show and check."""
from __future__ import annotations

import gc
import json
import os
import re
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple, Sequence

from dataclasses import dataclass
from drover.items import forks, parsing
from drover.items import file as itemfile
from drover.items.deps import Dep  # not fields.py: show would build every template type
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import Audit, ItemRows, Run
from drover.vocabulary import LEVELS, State

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["State"]  # defined in vocabulary.py (the command line's choices derive from it), decided here

# Where drive's next step is an implementing run (in review: a review; approved: a finish),
# and the states it does not drive at all (needs requirements: someone writes them first).
IMPLEMENT_NEXT = frozenset({State.READY, State.BLOCKED, State.INTERRUPTED, State.FAILED, State.CHANGES_REQUESTED})
NOT_DRIVEN = frozenset({State.UNREADABLE, State.DONE, State.PARKED, State.RUNNING, State.NEEDS_REQUIREMENTS})


def slot_at(state: State) -> str:
    """The slot an item in `state` is at, as `prompt` without --slot takes it: review while a review
    is next (in review, approved), draft while it needs requirements, else implement."""
    if state in (State.IN_REVIEW, State.APPROVED):
        return "review"
    if state == State.NEEDS_REQUIREMENTS:
        return "draft"
    return "implement"


class Entry(NamedTuple):
    """What the catalogue knows of one item file, from the metadata cache or a fresh parse.

    A tuple, built positionally from a cache row: list and check build one per item (50,000 in
    a large project). The frontmatter stays JSON text until `meta` is asked for, and the
    catalogue's entries do not carry it at all (NO_META).
    """

    id: str
    rel: str
    title: str = ""
    kind: str = ""
    deps: tuple[str, ...] = ()
    meta_json: str = "{}"
    outstanding: bool = False
    cleared: bool = False
    unreadable: str = ""
    detail: str = ""
    line: int | None = None
    placeholder: bool = False  # the requirements are still `drover new`'s placeholder

    @property
    def meta(self) -> dict[str, Any]:
        """The frontmatter as JSON keeps it (dates and other values as text)."""
        return json.loads(self.meta_json) if self.meta_json != "{}" else {}

    @property
    def problem(self) -> str:
        """One line naming file and line: what check, list and show print for an unreadable item."""
        where = f"{self.rel}:{self.line}" if self.line else self.rel
        return f"{where}: {self.id} {self.unreadable}" + (f" ({self.detail})" if self.detail else "")


@dataclass(frozen=True)
class AuditProvenance:
    """The audit that best confirms an item (its level, who gave it), and whether nothing
    independent confirms it (see audit_provenance)."""

    level: str = ""
    by: str = ""
    weak: bool = True


def _entry_from_fields(found: parsing.Fields | tuple[Any, ...], rel: str, meta: bool = True) -> Entry:
    """An entry from what parsing gives of a file (parsing.Fields, perhaps with its digest after);
    meta=False: without its frontmatter, as the catalogue's entries are."""
    return Entry(found[0], rel, found[1], found[2], found[3], found[5] if meta else NO_META, found[6], found[7],
                 found[8], found[9], found[10], found[11])


def _cache_row(rel: str, size: int, mtime: int, found: parsing.Fields | tuple[Any, ...],
               digest: str | None, front: str | None = None) -> tuple[Any, ...]:
    """The item_files row (Ledger.CACHE_COLUMNS) for what parsing gives of a file of this size and
    mtime; `front`: its frontmatter's digest, when known."""
    return (rel, size, mtime, *found[:3], *found[4:6], int(found[6]), int(found[7]), *found[8:11], digest, front,
            int(found[11]))


def _entry_from_cache(row: Any) -> Entry:
    """An entry from an item_files row (Ledger.CACHE_COLUMNS, read by position)."""
    return Entry(row[3], row[0], row[4] or "", row[5] or "", _deps(row[6]), row[7] or "{}", bool(row[8]),
                 bool(row[9]), row[10] or "", row[11] or "", row[12], bool(row[15]))


def _entry_from_light(row: Any, body: tuple[Any, ...] | None = None) -> Entry:
    """A catalogue entry from a Ledger.cached_light row (LIGHT_COLUMNS, read by position); `body`:
    what parsing read of the file's body alone ((digest, front, outstanding, cleared, placeholder)),
    when the row's frontmatter is the file's."""
    outstanding, cleared, placeholder = (bool(row[7]), bool(row[8]), bool(row[12])) if body is None else body[2:5]
    return Entry(row[3], row[0], row[4] or "", row[5] or "", _deps(row[6]), NO_META, outstanding, cleared,
                 row[9] or "", row[10] or "", row[11], placeholder)


def _deps(text: str | None) -> tuple[str, ...]:
    """The cache's JSON list of deps; a list without escapes is split rather than decoded."""
    if not text or text == "[]":
        return ()
    if "\\" not in text:
        # json.dumps writes ["a", "b"]: without a backslash no id holds a quote
        return tuple(text[2:-2].split('", "'))
    return tuple(json.loads(text))


# Fresh cache rows are written this many at a time, so a cold catalogue does not hold them all.
CACHE_BATCH = 2000


def catalogue(project: Project, ledger: Ledger, also: forks.Also | None = None) -> dict[str, Entry]:
    """Every item file, by id (its file name), parsing only files whose bytes changed.

    The entries leave the frontmatter out (meta_json is NO_META): nothing that walks the whole
    catalogue needs it, and it is the longest text of a cache row; entry() and entries_for()
    give it, and Ledger.cached_metas finds the rows whose frontmatter holds a text.

    `also`: work for the stat child to do once it has sent the stats (list reads the ledger's
    part so, while this process matches the files with their cache rows); its answer is the
    caller's to ask for, and none when there was no stat child.

    A file whose size and mtime are its cache row's is not read. One with a new mtime is read,
    and parsed only when its bytes' digest differs from the row's (a checkout or a touch gives
    every file a new mtime and few new bytes); the row then takes the new mtime. The loop runs
    once per file at 50,000 items: names come from one listdir, no Path is made, and
    fresh cache rows are written in batches as they come.
    """
    prefix = project.config.prefix
    entries: dict[str, Entry] = {}
    changed: list[tuple[str, int, int, Any]] = []
    folder = str(project.items_dir)
    base = project.item_rel("")
    try:
        # names only: os.stat on the joined path costs less than a DirEntry's stat()
        names = sorted_names(os.listdir(folder), prefix)
    except (FileNotFoundError, NotADirectoryError):
        names = []
    within = folder + os.sep
    elsewhere = parsing.stat_elsewhere(within, names, also)  # a child stats most while the cache is read
    ledger.cache_under(prefix)
    cache = ledger.cached_light()
    new_tuple = tuple.__new__
    for name, stat in parsing.stats_of(within, names, elsewhere):
        rel = base + name
        row = cache.pop(rel, None)  # what is left in the cache at the end is stale
        if stat is None:
            continue
        size, mtime = stat
        if row is not None and row[1] == size and row[2] == mtime:
            # _entry_from_light(row), inline: this line runs once per item on every list
            deps = row[6]
            if not deps or deps == "[]":
                deps = ()
            elif "\\" not in deps:
                deps = tuple(deps[2:-2].split('", "'))
            else:
                deps = _deps(deps)
            entries[name[:-3]] = new_tuple(Entry, (row[3], row[0], row[4] or "", row[5] or "", deps, NO_META,
                                                   bool(row[7]), bool(row[8]), row[9] or "", row[10] or "", row[11],
                                                   bool(row[12])))
            continue
        entries[name[:-3]] = _CHANGED  # its place in the order, filled by _refresh
        changed.append((name, size, mtime, row))
    _refresh(folder, base, prefix, changed, entries, ledger)
    ledger.store_files([], list(cache))
    return entries


_CHANGED = Entry("", "")
# The meta_json of a catalogue entry: not read (Entry.meta then fails loudly rather than say {}).
NO_META = ""


def _refresh(folder: str, base: str, prefix: str, changed: list[tuple[str, int, int, Any]],
             entries: dict[str, Entry], ledger: Ledger) -> None:
    """Entries and fresh cache rows for the files whose size or mtime changed: (name, size, mtime, cache row).

    A file is parsed only when its bytes' digest differs from its row's (a file of the size its
    row knows: a touch, a checkout); the row then takes the new mtime. Of a readable item whose
    frontmatter's digest is its row's (an edit of the body: findings requested or cleared, work
    written down), only the body is read: the row keeps what the frontmatter says. Many changed
    files are parsed in worker processes (parsing.parse_changed); the rows are written here, in
    batches as they come, so a cold catalogue does not hold them all.
    """
    known = ledger.cached_known([row[0] for _, _, _, row in changed if row is not None])
    jobs: list[parsing.Job] = []
    for name, size, _, row in changed:
        if row is None:
            jobs.append((name, None, None, size))
            continue
        digest, front = known.get(row[0], (None, None))
        # light rows: size at 1, unreadable at 9 (Ledger.LIGHT_COLUMNS)
        jobs.append((name, digest if row[1] == size else None, None if row[9] else front, size))
    fresh: list[tuple[Any, ...]] = []  # files the cache had no row for
    renewed: list[tuple[Any, ...]] = []  # files whose row is rewritten whole
    touched: list[tuple[int, str]] = []
    bodies: list[tuple[Any, ...]] = []
    changed.reverse()  # popped as parsed: each cache row is let go once its entry is made
    for found in parsing.parse_changed(folder, prefix, jobs):
        name, size, mtime, row = changed.pop()
        if len(found) == 1:
            entries[name[:-3]] = _entry_from_light(row)
            touched.append((mtime, row[0]))
        elif len(found) == 5:
            entries[name[:-3]] = _entry_from_light(row, found)
            bodies.append((size, mtime, int(found[2]), int(found[3]), int(found[4]), found[0], row[0]))
        else:
            rel = base + name
            entries[name[:-3]] = _entry_from_fields(found, rel, meta=False)
            (fresh if row is None else renewed).append(_cache_row(rel, size, mtime, found, found[12], found[13]))
        if len(fresh) + len(renewed) + len(touched) + len(bodies) >= CACHE_BATCH:
            ledger.store_files(fresh, mtimes=touched, bodies=bodies, renewed=renewed)
            fresh, renewed, touched, bodies = [], [], [], []
    ledger.store_files(fresh, mtimes=touched, bodies=bodies, renewed=renewed)


def sorted_names(names: list[str], prefix: str) -> list[str]:
    """The `.md` names of `names` in _sort_key's order of their ids, sorted in C rather than by a key per name.

    A numbered name (prefix, dash, a number of up to 18 digits without leading zero) sorts by its
    number, which for such names is the order of (length, name), and before any other; the
    others follow in _sort_key's order.
    """
    numbered_name = re.compile(re.escape(prefix) + r"-[1-9][0-9]{0,17}\.md").fullmatch
    numbered = list(filter(numbered_name, names))
    numbered.sort()
    numbered.sort(key=len)  # stable: by length, then by name
    if len(numbered) != len(names):
        taken = set(numbered)
        rest = [name for name in names if name.endswith(".md") and name not in taken]
        numbered += sorted(rest, key=lambda name: _sort_key(name[:-3], prefix))
    return numbered




def entry(project: Project, ledger: Ledger, item_id: str) -> Entry:
    """One item's entry, through the cache, without reading any other file."""
    path = project.item_path(item_id)
    rel = project.item_rel(path.name)
    try:
        stat = path.stat()
    except FileNotFoundError:
        return Entry(id=item_id, rel=rel, unreadable=itemfile.MISSING)
    ledger.cache_under(project.config.prefix)
    row = ledger.cached_files_for([rel]).get(rel)
    if row and row[1] == stat.st_size and row[2] == stat.st_mtime_ns:
        return _entry_from_cache(row)
    data = parsing.read(str(path))
    found = parsing.fields(str(path), path.name, project.config.prefix, data)
    digest = None if data is None else parsing.digest(data)
    ledger.store_files([_cache_row(rel, stat.st_size, stat.st_mtime_ns, found, digest)])
    return _entry_from_fields(found, rel)


def entries_for(project: Project, ledger: Ledger, item_ids: Iterable[str]) -> dict[str, Entry]:
    """Several items' entries by id, as entry() gives each, through one read of the cache (a prompt's deps)."""
    paths = {item_id: project.item_path(item_id) for item_id in item_ids}
    rels = {item_id: project.item_rel(path.name) for item_id, path in paths.items()}
    ledger.cache_under(project.config.prefix)
    cached = ledger.cached_files_for(list(rels.values())) if rels else {}
    found: dict[str, Entry] = {}
    fresh: list[tuple[Any, ...]] = []
    for item_id, path in paths.items():
        rel = rels[item_id]
        try:
            stat = path.stat()
        except FileNotFoundError:
            found[item_id] = Entry(id=item_id, rel=rel, unreadable=itemfile.MISSING)
            continue
        row = cached.get(rel)
        if row and row[1] == stat.st_size and row[2] == stat.st_mtime_ns:
            found[item_id] = _entry_from_cache(row)
        else:
            fields = parsing.fields(str(path), path.name, project.config.prefix)
            found[item_id] = _entry_from_fields(fields, rel)
            fresh.append(_cache_row(rel, stat.st_size, stat.st_mtime_ns, fields, None))
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

    independent = [
        row for row in audits
        if row.opens and row.by not in {*row.authors, *authors}
    ]
    best = max(independent or audits, key=rank)
    return AuditProvenance(level=best.level, by=best.by or "", weak=not independent)


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
    approvals = [audit.at for audit in audits if audit.opens]
    return run_trouble(last.as_json() if last else None, False, approvals[-1] if approvals else "")


def approval_current(activity: dict[str, Any] | None) -> bool:
    """An audit that opens the gate (the activity row's approval: activity.OPENS_GATE) is newer
    than the newest round (whatever commit it covers)."""
    activity = activity or {}
    approval: str = activity.get("approval_at") or ""
    newest_round: str = activity.get("newest_round") or ""
    return bool(approval) and approval > newest_round


def approved_head(activity: dict[str, Any] | None, head: str) -> str:
    """The commit the item's approval covers when it covers the branch's current head `head`; else ""."""
    activity = activity or {}
    covered = activity.get("approval_head") or ""
    return covered if approval_current(activity) and head and covered == head else ""


def orphan_note(run: Run, runs_dir: "Path") -> str:
    """Of a live run: "" while the drover that launched it is attached; else what list, show and
    drive say of the orphan, with its agent's pid (docs/states.md)."""
    from drover.agents.procs import drover_attached

    if drover_attached(runs_dir / run.id):
        return ""
    return f"{ORPHANED}: agent pid {run.pid} runs with no drover attached (`drover stop {run.item}` ends it)"


# The word that opens a running item's note when its drover is gone (a reason on `running`, not a state).
ORPHANED = "orphaned"


def compute_state(entry: Entry, row: dict[str, Any], activity: dict[str, Any] | None,
                  live: bool, deps_done: bool, head: str = "", running_note: str = "") -> tuple[State, str]:
    """The first state that applies, in the order an operator cares about, and why (or "").

    `head` is the current head of the item's branch ("" when it has none); `running_note` is
    orphan_note of the live run. Past the first four states, decide gives the answer from what
    judge makes of the activity: list asks those two of every item, from the ledger read in bulk
    (listing.py).
    """
    if entry.unreadable:
        return State.UNREADABLE, entry.problem
    if row.get("done"):
        return State.DONE, ""
    if row.get("parked"):
        return State.PARKED, row.get("parked_reason") or ""
    if live:
        return State.RUNNING, running_note
    activity = activity or {}
    judged = judge(activity.get("newest_round"), activity.get("last_id"), activity.get("last_started"),
                   activity.get("last_finished"), activity.get("last_outcome"), activity.get("last_exit_status"),
                   activity.get("approval_at"), activity.get("approval_head"), head)
    return decide(entry.outstanding, judged, deps_done, entry.placeholder)


# What judge makes of an item's activity and its branch's head, in plain values (list's child
# sends them through a pipe): the trouble its last implementing run left (a State's value, or
# ""), and why; the short sha an approval covers when it covers the head, else ""; whether an
# implementing run was recorded; why an approval no longer counts ("" when none).
Judged = tuple[str, str, str, bool, str]
NOTHING: Judged = ("", "", "", False, "")  # an item without runs, rounds or audits


def judge(newest_round: str | None, last_id: str | None, started: str | None, finished: str | None,
          outcome: str | None, exit_status: Any, approval_at: str | None, approval_head: str | None,
          head: str) -> Judged:
    """What an item's state needs of its activity (its newest round, its newest implementing
    run, its newest approval) and its branch's head `head`."""
    ran = bool(last_id)
    trouble, why = "", ""
    # a run that exited 0 leaves no trouble: the common case decides without run_trouble
    if ran and not (outcome == "exited" and exit_status == 0 and finished is not None):
        run = {"id": last_id, "started": started, "finished": finished, "outcome": outcome, "exit_status": exit_status}
        found, why = run_trouble(run, False, approval_at or "")
        trouble = found.value if found else ""
    approval: str = approval_at or ""
    current = bool(approval) and approval > (newest_round or "")
    covered: str = approval_head or ""
    approved = covered[:7] if current and head and covered == head else ""
    moved = f"the branch moved since the approval at {covered[:7]}" if current and covered else ""
    return trouble, why, approved, ran, moved


# decide's answers, read once (a State.X lookup costs a descriptor call in 3.11)
_CHANGES_REQUESTED, _READY, _BLOCKED, _APPROVED, _IN_REVIEW, _NEEDS_REQUIREMENTS = (
    State.CHANGES_REQUESTED, State.READY, State.BLOCKED, State.APPROVED, State.IN_REVIEW, State.NEEDS_REQUIREMENTS)
_TROUBLE = {State.INTERRUPTED.value: State.INTERRUPTED, State.FAILED.value: State.FAILED}


def decide(outstanding: bool, judged: Judged, deps_done: bool, placeholder: bool = False) -> tuple[State, str]:
    """An item's state and why, past the first four, from the Changes section, what judge made of
    its activity, its deps, and whether its requirements are still the placeholder."""
    trouble, why, approved, ran, moved = judged
    if trouble:
        return _TROUBLE[trouble], why
    if outstanding:
        return _CHANGES_REQUESTED, ""
    if approved:
        return _APPROVED, f"at {approved}"
    if ran:
        return _IN_REVIEW, moved
    if placeholder:
        return _NEEDS_REQUIREMENTS, ""
    if not deps_done:
        return _BLOCKED, ""
    return _READY, ""


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: the catalogue makes tuples by the hundred thousand and
    no cycles, and the collector's passes over them took a third of `list` at 50,000 items."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


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
