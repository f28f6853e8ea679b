"""`drover new --issue N`: an item from a tracker issue (github) or register row (file).

The title comes from the issue, `origin: N` links back to it, the kind comes from its labels
through `[tracker] kinds`, and the issue's text is quoted in the body as the scaffold the
drafting agent turns into numbered requirements (the draft prompt reads the issue afresh).
"""
from __future__ import annotations

from dataclasses import dataclass

from drover.items import file as itemfile
from drover.errors import Refused, UsageError
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.trackers import Issue, TrackerUnavailable, open_tracker


@dataclass(frozen=True)
class Intake:
    issue: Issue
    kind: str  # "" when no label maps to one (new_item then gives its default)
    scaffold: str
    named: str  # how the tracker names the row: `issue #42 (<url>)`, `the register row follow-ups.md:6`


def existing_item(project: Project, number: int) -> str:
    """The id of an item whose frontmatter says `origin: number`; "" when none does."""
    if not project.items_dir.is_dir():
        return ""
    for path in sorted(project.items_dir.glob("*.md")):
        try:
            found = itemfile.read_item(path, project.config.prefix)
        except itemfile.Unreadable:
            continue
        if found.origin == number:
            return path.stem
    return ""


def kind_for(labels: tuple[str, ...], kinds: dict[str, str]) -> str:
    """The kind of the first label `[tracker] kinds` maps (labels compared without case); "" when
    none does, which new_item reads as its default kind."""
    lowered = {label.lower(): kind for label, kind in kinds.items()}
    for label in labels:
        if label.lower() in lowered:
            return lowered[label.lower()]
    return ""


def quoted(issue: Issue, label: str) -> str:
    """The scaffold: where the item came from, then the issue's text as a Markdown quote."""
    lines = [f"From {label}, as it read at intake:", ""]
    body = issue.body.strip("\n") or issue.title
    lines += [f"> {line}".rstrip() for line in body.splitlines()]
    return "\n".join(lines) + "\n"


def read_issue(project: Project, number: int) -> Intake:
    """The issue and what the item takes from it; refuses a second item for the same issue."""
    tracker_config = project.config.tracker
    # opening a backend reads nothing; the backend, not its name, says whether it has rows to take
    tracker = open_tracker(tracker_config, project.root)
    if not tracker.reads_issues:
        raise UsageError('new --issue needs a tracker: set [tracker] backend = "github" or "file" in drover.toml')
    already = existing_item(project, number)
    if already:
        raise Refused(f"issue #{number} already has an item: {already} "
                      f"({project.relpath(project.item_path(already))})")
    try:
        issue, label = tracker.intake(number)
    except TrackerUnavailable as exc:
        raise UsageError(f"issue #{number}: {exc.reason}") from None
    return Intake(issue, kind_for(issue.labels, tracker_config.kinds), quoted(issue, label), label)


def new_from_issue(project: Project, ledger: Ledger, number: int, kind: str | None,
                   deps: list[str]) -> tuple[str, str]:
    """Create the item for issue `number`; returns its id, and a warning ("" when none): a closed issue (a
    ticked row) is taken as asked, and said to be closed (docs/trackers.md, "Intake")."""
    from drover.ledger.writes import new_item

    intake = read_issue(project, number)
    title = intake.issue.title or f"Issue #{number}"
    item_id = new_item(project, ledger, title, kind or intake.kind, deps, origin=number, scaffold=intake.scaffold)
    closed = intake.issue.state == "closed"
    return item_id, f"{intake.named} is closed: {item_id} is made from it all the same" if closed else ""
