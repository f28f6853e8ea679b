"""Each dep of an item as `show` and the template data describe it (`describe_deps`): done (the
ledger), readable (its file, through the cache), its best audit (`audit_provenance`). Apart from
itemstate.py, so a prompt does not import what an item's state needs (processes, usage)."""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from drover.items import file as itemfile
from drover.items.deps import Dep
from drover.ledger.catalogue import Entry, entries_for
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import Audit, ItemRows
from drover.vocabulary import LEVELS


class AuditProvenance(NamedTuple):
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
