"""The review loop's actions: new, request-changes, close-changes, audit, dispose, park, unpark.

Each action changes the item file and the ledger together: the ledger transaction stays open
while the file is written, and a failure on either side leaves both as they were.
"""
from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from . import items as itemfile
from .errors import GitError, Refused, UsageError
from .git import commit_only, head_of, user_name
from .ledger import LEVELS, Ledger, now
from .project import Project
from .status import not_an_id, require_item
from .vocabulary import DISPOSITIONS


# The run an action is taken for when the coordinator replays a worker's outbox (outbox.py):
# per thread, because drive replays several items' outboxes at once.
_acting = threading.local()


def acting_run() -> str:
    """The run an action is taken for: one being replayed from an outbox, else $DROVER_RUN."""
    return getattr(_acting, "run", "") or os.environ.get("DROVER_RUN", "")


@dataclass(frozen=True)
class Outcome:
    """What an action did, in the words the CLI prints."""

    lines: tuple[str, ...]


def actor(project: Project, ledger: Ledger) -> str:
    """Who is acting: the agent of the run named by $DROVER_RUN, else git's user.name."""
    run_id = acting_run()
    if run_id:
        run = ledger.run(run_id)
        if run and run["agent"]:
            return run["agent"]
    return user_name(project.root) or os.environ.get("USER", "") or "operator"


def _commit_items(project: Project, paths: list[Path], message: str) -> None:
    """With [project] commit_items, commit drover's own edits to item files, and only them."""
    if not project.config.commit_items:
        return
    rels = [project.relpath(path) for path in paths]
    failed = commit_only(project.root, rels, message)
    if failed:
        step, said = failed
        raise GitError(f"the edit is made but {step} failed ([project] commit_items): {said}")


def _write_item(path: Path, old: str, new: str, ledger_step) -> None:
    """Write the file inside the ledger transaction; if the ledger fails, put the file back."""
    itemfile.write_atomic(path, new)
    try:
        ledger_step()
    except BaseException:
        itemfile.write_atomic(path, old)
        raise


def new_item(project: Project, ledger: Ledger, title: str, kind: str, deps: list[str],
             finding_source: str = "") -> str:
    """Create the next item file; returns its id. Ids are never reused."""
    title = " ".join(title.split())  # one line: a title is a headline, and YAML-safe that way
    if not title:
        raise UsageError("an item needs a title")
    pattern = itemfile.id_pattern(project.config.prefix)
    for dep in [*deps, *([finding_source] if finding_source else [])]:
        if not pattern.match(dep):
            raise not_an_id(project, dep)
    on_disk = [
        itemfile.id_number(path.stem, project.config.prefix) or 0
        for path in project.items_dir.glob("*.md")
    ] if project.items_dir.is_dir() else []
    with ledger.write():
        item_id = ledger.allocate_item(project.config.prefix, max(on_disk, default=0))
        path = project.item_path(item_id)
        itemfile.write_atomic(path, itemfile.new_item_text(item_id, title, kind, deps, finding_source))
        try:
            ledger.log_event("new", item_id, actor(project, ledger), title=title, finding=finding_source)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    _commit_items(project, [path], f"drover: new item {item_id}: {title}")
    return item_id


def _review_log(ledger: Ledger) -> str:
    """The log of the review run that is acting, when one is."""
    run_id = acting_run()
    run = ledger.run(run_id) if run_id else None
    return (run or {}).get("log_path") or ""


def request_changes(project: Project, ledger: Ledger, item_id: str, findings: str) -> Outcome:
    """Replace the Changes section with the findings and record a round; refuse past the cap."""
    if not findings.strip():
        raise UsageError("no findings given: pass --file F or write them on standard input")
    item = require_item(project, item_id)
    by = actor(project, ledger)
    written = itemfile.as_findings(findings.strip("\n") + "\n")
    digest = hashlib.sha256(written.encode("utf-8")).hexdigest()
    cap = project.config.max_rounds
    with ledger.write():
        rounds = len(ledger.rounds(item_id))
        if rounds >= cap:
            kept = project.parked_dir / f"{item_id}-{rounds + 1}.md"
            extra = rounds + 1
            while kept.exists():  # an earlier refusal kept its findings here: never overwrite them
                extra += 1
                kept = project.parked_dir / f"{item_id}-{extra}.md"
            itemfile.write_atomic(kept, written)
            reason = f"review did not converge: {rounds} rounds of changes, the cap is {cap}"
            ledger.park(item_id, reason)
            ledger.log_event("request-changes", item_id, by, refused=True, kept=project.relpath(kept))
            refusal = Refused(
                f"{item_id} already has {rounds} rounds of changes ([review] max_rounds = {cap}): "
                f"refused; the findings are kept in {project.relpath(kept)}; "
                f"{item_id} is parked for the operator"
            )
        else:
            refusal = None
            new_text = itemfile.replace_section(item.text, itemfile.CHANGES_HEADING, written, item.body_offset)

            def record() -> None:
                ledger.add_round(item_id, digest, itemfile.headline(written), _review_log(ledger), by)
                ledger.log_event("request-changes", item_id, by, round=rounds + 1, digest=digest)

            _write_item(item.path, item.text, new_text, record)
    if refusal:
        raise refusal
    _commit_items(project, [item.path], f"drover: changes requested on {item_id} (round {rounds + 1})")
    return Outcome((
        f"{item_id}: round {rounds + 1} of {cap} recorded; {itemfile.CHANGES_HEADING.lstrip('# ')} "
        f"in {project.relpath(item.path)} now holds the findings",
        f"headline: {itemfile.headline(written)}",
    ))


def _clear(project: Project, ledger: Ledger, item: itemfile.Item, by: str, note: str) -> int:
    """Write the cleared block and mark the newest round cleared (inside the caller's transaction)."""
    rounds = ledger.rounds(item.id)
    number = rounds[-1]["number"] if rounds else 0
    block = itemfile.cleared_block(number, now(), by, note)
    new_text = itemfile.replace_section(item.text, itemfile.CHANGES_HEADING, block, item.body_offset)
    _write_item(item.path, item.text, new_text, lambda: ledger.clear_round(item.id, by))
    return number


def close_changes(project: Project, ledger: Ledger, item_id: str, note: str = "") -> Outcome:
    """Discharge the outstanding changes: a cleared block in the file, the round marked cleared."""
    item = require_item(project, item_id)
    if not item.outstanding:
        what = "were already cleared" if item.cleared else "have not been requested"
        raise Refused(f"{item_id}: no outstanding changes to close (changes {what})")
    by = actor(project, ledger)
    with ledger.write():
        number = _clear(project, ledger, item, by, note)
        ledger.log_event("close-changes", item_id, by, round=number, note=note)
    _commit_items(project, [item.path], f"drover: changes on {item_id} cleared (round {number})")
    return Outcome((f"{item_id}: round {number} cleared; nothing is outstanding",))


def audit_head(project: Project, ledger: Ledger, item_id: str) -> str:
    """The commit an audit covers: the head a review run of this item reviewed, when one is
    acting ($DROVER_RUN), else the branch's head now ("" when the item has no branch)."""
    run_id = os.environ.get("DROVER_RUN", "")
    run = ledger.run(run_id) if run_id else None
    if run and run["item"] == item_id and run["slot"] == "review":
        return run.get("head") or ""
    return head_of(project.root, ledger.item_branch(item_id))


def audit(project: Project, ledger: Ledger, item_id: str, level: str, by: str = "", note: str = "") -> Outcome:
    """Record an audit, bound to the commit it covers; at reviewed or above it also clears
    outstanding changes."""
    if level not in LEVELS:
        raise UsageError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    item = require_item(project, item_id)
    by = by or actor(project, ledger)
    head = audit_head(project, ledger, item_id)
    lines = []
    with ledger.write():
        if LEVELS.index(level) >= LEVELS.index("reviewed") and item.outstanding:
            number = _clear(project, ledger, item, by, note or f"approved at {level}")
            lines.append(f"{item_id}: round {number} cleared by the approval")
        ledger.add_audit(item_id, level, by, note, head)
        ledger.log_event("audit", item_id, by, level=level, note=note, head=head)
    if lines:
        _commit_items(project, [item.path], f"drover: changes on {item_id} cleared by a {level} audit")
    covers = f" (covers {head[:7]})" if head else " (the item has no branch: it covers no commit)"
    return Outcome((f"{item_id}: audited {level} by {by}{covers}", *lines))


def dispose(project: Project, ledger: Ledger, item_id: str, issue: int, disposition: str, note: str = "") -> Outcome:
    """Record the reviewer's judgment of one issue the item closes."""
    if disposition not in DISPOSITIONS:
        raise UsageError(f"--as must be one of {', '.join(DISPOSITIONS)}, not {disposition!r}")
    if disposition == "comment" and not note.strip():
        raise UsageError("--as comment needs --note: the note is the comment finish writes")
    item = require_item(project, item_id)
    if issue not in item.closes:
        closes = ", ".join(f"#{n}" for n in item.closes) or "none"
        raise UsageError(f"{item_id} does not close #{issue} (its closes: {closes})")
    by = actor(project, ledger)
    with ledger.write():
        ledger.add_disposition(item_id, issue, disposition, by, note)
        ledger.log_event("dispose", item_id, by, issue=issue, disposition=disposition, note=note)
    return Outcome((f"{item_id}: #{issue} disposed as {disposition}",))


def park(project: Project, ledger: Ledger, item_id: str, why: str) -> Outcome:
    """Hand an item to the operator."""
    if not why.strip():
        raise UsageError("--why needs a reason the operator can act on")
    _require_known(project, ledger, item_id)
    by = actor(project, ledger)
    with ledger.write():
        ledger.park(item_id, why.strip())
        ledger.log_event("park", item_id, by, why=why.strip())
    return Outcome((f"{item_id}: parked for the operator: {why.strip()}",))


def unpark(project: Project, ledger: Ledger, item_id: str) -> Outcome:
    """Take an item back from the operator."""
    _require_known(project, ledger, item_id)
    if not ledger.item_row(item_id).get("parked"):
        raise Refused(f"{item_id} is not parked")
    by = actor(project, ledger)
    with ledger.write():
        ledger.unpark(item_id)
        ledger.log_event("unpark", item_id, by)
    return Outcome((f"{item_id}: unparked",))


def _require_known(project: Project, ledger: Ledger, item_id: str) -> None:
    if itemfile.id_number(item_id, project.config.prefix) is None:
        raise not_an_id(project, item_id)
    if not project.item_path(item_id).exists() and not ledger.runs(item_id):
        raise UsageError(f"no item {item_id} (no file {project.relpath(project.item_path(item_id))})")
