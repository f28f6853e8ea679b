"""A review run's verdict, in words: what it recorded since it started (`review_verdict`), for
people (`describe_verdict`), and why it gave none (`no_verdict`). `drover review`, `drive` and a
finished run's failure class (runs.record_failure) judge a review by these, so they say one thing."""
from __future__ import annotations

from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.state import State
from drover.vocabulary import APPROVING_LEVELS, counted


NO_VERDICT = "the review recorded no verdict (neither request-changes nor an approving audit)"
NO_VERDICT_SHORT = "no verdict"


def no_verdict(ledger: Ledger, run_id: str) -> str:
    """Why a review run gave no verdict, in words: NO_VERDICT, or, when it approved and the approval
    opened nothing, that `[review] require_independent` refused it (the reviewer is an author)."""
    run = ledger.run(run_id)
    refused = [row for row in ledger.audits(run.item) if row.run == run_id and row.level in APPROVING_LEVELS
               and not row.opens] if run is not None else []
    if not refused:
        return NO_VERDICT
    return (f"the review's approval ({refused[-1].level} by {refused[-1].by or 'nobody named'}) opened no gate: "
            "[review] require_independent refuses an approval by an author of the work; give the review "
            "slot an agent of another name, or audit by hand")


def review_verdict(ledger: Ledger, run_id: str) -> str:
    """What a review run recorded since it started: "changes requested", "approved", "parked", or "" (none).

    `drover review` and `drive` both judge a review by this right after it ends, so they say
    the same thing.
    """
    run = ledger.run(run_id)
    if run is None:
        return ""
    item_id, started = run.item, run.started
    if any(started <= (row.at or "") for row in ledger.rounds(item_id)):
        return State.CHANGES_REQUESTED
    if any(started <= (row.at or "") and row.opens for row in ledger.audits(item_id)):
        return State.APPROVED
    row = ledger.item_row(item_id)
    if row.get("parked") and started <= (row.get("parked_at") or ""):
        return State.PARKED
    return ""


def describe_verdict(project: Project, ledger: Ledger, run_id: str) -> str:
    """What a review run decided, for people: `changes requested (3 findings)`, `approved (reviewed by
    reviewer)`, `parked (why)`, or `no verdict`. `drive`'s progress and `drover review` say it so."""
    verdict = review_verdict(ledger, run_id)
    run = ledger.run(run_id)
    if not verdict or run is None:
        return NO_VERDICT_SHORT
    if verdict == State.CHANGES_REQUESTED:
        from drover.items.file import Unreadable, count_findings, read_item

        try:
            count = count_findings(read_item(project.item_path(run.item), project.config.prefix).changes)
        except Unreadable:
            return str(verdict)
        return f"{verdict} ({counted(count, 'finding')})"
    if verdict == State.APPROVED:
        approving = [row for row in ledger.audits(run.item)
                     if run.started <= (row.at or "") and row.level in APPROVING_LEVELS]
        best = approving[-1]
        return f"{verdict} ({best.level} by {best.by or 'nobody named'})"
    reason = ledger.item_row(run.item).get("parked_reason") or ""
    return f"{verdict} ({reason})" if reason else str(verdict)
