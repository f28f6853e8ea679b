"""The template data builder: fills drover.prompts.fields.TemplateData for one item and slot.

A field a slot does not fill keeps its empty default: present and empty, never absent.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple, Sequence, TYPE_CHECKING

from drover.prompts.fields import FIELD_NAMES, AuditNote, Check, Commit, Dep, Destination, FollowUp, NO_FOLLOW_UPS, Origin, OwnedIssue, Recent, Resolution, Round, Sibling, TemplateData, field_schema  # noqa: F401 - FIELD_NAMES, field_schema, Commit, Recent are read through this module too
from drover.errors import escaped
from drover.items.file import CHANGES_HEADING, origin_of, truthy
from drover.vocabulary import TEMPLATE_SLOTS as SLOTS

if TYPE_CHECKING:
    from drover.items.file import Item
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project
    from drover.ledger.rows import Audit, ItemRows, Run
    from drover.trackers import Tracker

# The review prompt lists at most this many modified files the body never names (`Unnamed`), the
# rest counted in `UnnamedOmitted`: a branch modifying 200,000 files made a prompt over the
# render's cap, and the review failed as `review.tmpl: template failed` (hostile review 35).
LISTED_UNNAMED = 1000


class ItemRecord(NamedTuple):
    """One item as its file and the ledger hold it, read once: `runs.prepare` reads it for its
    refusals and hands it to `build`, so nothing on the way to the prompt reads them again.

    `rows` holds the runs, audits and `items` rows of the item and of its deps, each table read once.
    """

    item: Item
    rows: ItemRows

    @property
    def runs(self) -> tuple[Run, ...]:
        return self.rows.runs_of(self.item.id)

    @property
    def audits(self) -> tuple[Audit, ...]:
        return self.rows.audits_of(self.item.id)

    @property
    def row(self) -> dict[str, Any]:
        """The item's row of `items` (done, parked, why)."""
        return self.rows.item_row(self.item.id)

    @classmethod
    def read(cls, project: Project, ledger: Ledger, item_id: str, slot: str = "") -> "ItemRecord":
        """The parsed item (or the one-line error `Project.require_item` gives), with the rows of it and its
        deps (for the draft slot, the `items` rows of every item: its Siblings say which are done)."""
        from drover.items.file import id_pattern
        from drover.ledger.catalogue import read_item

        item = read_item(project, ledger, item_id)
        pattern = id_pattern(project.config.prefix)
        # the deps, and the item a draft's finding came from, ride on the same reads
        source = [item.finding_source] if item.finding_source else []
        ids = [item.id, *(dep for dep in item.deps if pattern.match(dep)), *source]
        return cls(item, ledger.rows_of(ids, every_item=slot == "draft"))


# --- the builder -------------------------------------------------------------------------
#
# One call per prompt, reading each ledger table once: runs, audits and `items` rows of the item
# and its deps come in the ItemRecord (which `runs.prepare` reads for its refusals and passes in),
# rounds and dispositions are read here. On this path nothing reads every item file: the item
# itself is parsed once, the deps come from the metadata cache (catalogue.entries_for), and only the
# draft slot's Siblings walk the catalogue, which is itself the cache (the finding source's audits
# come with the item's). Tracker reads go through the tracker interface only, and the
# branch slot makes none.
#
# The builder imports itemstate, git, trackers and templates inside its functions, so a command
# that needs only the field schema does not pay for them.

def build(project: Project, ledger: Ledger, item_id: str, slot: str, *, guidance: str | None = None,
          tracker: Tracker | None = None, record: ItemRecord | None = None,
          heads: dict[str, str] | None = None, follow_ups: bool = True) -> TemplateData:
    """The template data for one item in one slot (implement, review, draft or branch).

    `record` is the item's file and rows when the caller has read them (ItemRecord.read).
    `heads`, when given, gets the branch and base heads (name -> sha) a review's data was built
    on, when both exist: the launch's refusals judge the same commits without asking git again.
    When it holds both already (a drive's implementing run read them at its end, and nothing of an
    agent's or of the branch's ran since), the review's data is built on those.
    `follow_ups` false: the template names no field of fields.NO_FOLLOW_UPS, which stay empty.
    """
    from drover.vocabulary import GUIDANCE_LEVELS
    from drover.errors import UsageError

    if slot not in SLOTS:
        raise UsageError(f"unknown slot {slot!r}: expected one of {', '.join(SLOTS)}")
    if guidance is not None and guidance not in GUIDANCE_LEVELS:
        raise UsageError(f"--guidance must be one of {', '.join(GUIDANCE_LEVELS)}, not {guidance!r}")
    record = record or ItemRecord.read(project, ledger, item_id, slot)
    item, runs = record.item, record.runs
    deps, dep_entries = _deps(project, ledger, record)
    base = _every_slot(project, ledger, record, deps)
    # The branch data is the same whichever slot asks (the branch slot's guidance, no tracker
    # reads), so run, review and finish always agree on the branch name.
    branch_data = TemplateData(**base, Guidance=project.config.agent_for("branch").guidance)
    if slot == "branch":
        return branch_data._replace(Guidance=guidance) if guidance else branch_data
    values = dict(base)
    # An item keeps the branch its implementing runs worked on: a later `[run] branch` (or a title
    # it renders) names new items' branches, never a second one for this item from base.
    worked = [run.branch for run in runs if run.slot == "implement" and run.branch]
    values["Branch"] = worked[-1] if worked else render_item_branch(project, branch_data)
    values["Guidance"] = guidance or project.config.agent_for(slot).guidance
    if tracker is None:
        from drover.trackers import open_tracker

        tracker = open_tracker(project.config.tracker, project.root)
    values.update(_follow_ups(item, dep_entries, tracker) if follow_ups else NO_FOLLOW_UPS)
    implementing = [run for run in runs if run.slot == "implement"]
    last = implementing[-1] if implementing else None
    if slot == "implement":
        conflicts = _conflicts(project, item.id, implementing)
        posture = _posture(record, last)
        # SPEC 9.2's order: resume, then conflict, then the rest
        values["Posture"] = "conflict" if conflicts and posture != "resume" else posture
        values["Conflicts"] = conflicts
    elif slot == "review":
        values.update(_review(project, ledger, record, last, values["Branch"], base["Rounds"], tracker, heads))
    elif slot == "draft":
        values.update(_draft(project, ledger, record, tracker))
    return TemplateData(**values)


def item_branch(project: Project, ledger: Ledger, item_id: str) -> str:
    """The item's branch name: `[run] branch` rendered from the branch slot's data."""
    return render_item_branch(project, build(project, ledger, item_id, "branch"))


def render_item_branch(project: Project, data: TemplateData) -> str:
    """`[run] branch` rendered through the templates module (this module never imports jinja2)."""
    from drover.prompts import render_branch

    return render_branch(data, project.config.branch)


def _every_slot(project: Project, ledger: Ledger, record: ItemRecord, deps: list[Dep]) -> dict[str, Any]:
    """Every field the four slots share, none read from a tracker; Branch stays ""."""
    item, runs, audits = record.item, record.runs, record.audits
    rounds = [
        Round(N=row.number, Headline=row.headline or "", Path=_rel(project, row.path),
              At=row.at or "", By=row.by or "")
        for row in ledger.rounds(item.id)
    ]
    cleared = item.cleared
    config = project.config
    return {
        "Id": item.id,
        "Title": item.title,
        "Kind": item.kind,
        "Path": project.relpath(item.path),
        "Body": item.body.strip("\n"),
        "Meta": dict(item.meta),
        "Guarantees": item.guarantees,
        "Changes": item.changes,
        "ChangesHeading": CHANGES_HEADING,
        "Cleared": cleared,
        "Trail": tuple(rounds),
        "Earlier": tuple(rounds if cleared else rounds[:-1]),
        "Runs": sum(1 for run in runs if run.slot == "implement"),
        "Reviews": sum(1 for run in runs if run.slot == "review"),
        "Audits": len(audits),
        "Rounds": len(rounds),
        "MaxReviewRounds": config.max_rounds,
        "Repeated": len(rounds) >= 2,
        "Deps": tuple(deps),
        "UnreadableDeps": tuple(dep for dep in deps if dep.Unreadable),
        "MergedDeps": tuple(dep for dep in deps if not dep.Unreadable and dep.Done),
        "UnmergedDeps": tuple(dep for dep in deps if not dep.Unreadable and not dep.Done),
        "Destinations": destinations(item.id, config.tracker),
        "VerifyCommand": verify_command(config.verify, item.meta),
        "VerifyCommands": dict(config.verify),
    }


def _deps(project: Project, ledger: Ledger, record: ItemRecord) -> tuple[list[Dep], dict[str, Any]]:
    """Every dep with its done flag, readability and audit provenance; their cache entries by id."""
    from drover.ledger import depstate

    described = depstate.describe_deps(project, ledger, record.item.deps, record.rows)
    return ([one.dep for one in described],
            {one.dep.Id: one.entry for one in described if one.entry is not None})


def verify_command(verify: dict[str, str], meta: dict[str, Any]) -> str:
    """`[verify] <key>` for the first key in sorted order the item sets to yes; else default."""
    return verify.get(verify_key(verify, meta), "")


def verify_key(verify: dict[str, str], meta: dict[str, Any]) -> str:
    """The `[verify]` key an item runs: the first in sorted order its frontmatter sets to yes, else
    `default`."""
    return next((key for key in sorted(verify) if key != "default" and truthy(meta.get(key))), "default")


@lru_cache(maxsize=1)
def _destination_table() -> tuple[dict[str, Any], ...]:
    from drover.config.toml import parse_toml
    from drover.prompts.resources import builtin_dir

    path = builtin_dir() / "destinations.toml"
    table = parse_toml(path, path.read_text(encoding="utf-8"), kind="destinations").get("destination", [])
    return tuple(dict(row) for row in table)


def destinations(item_id: str, tracker: Any = None) -> tuple[Destination, ...]:
    """The shipped destinations in the configured tracker's words, `{id}` and [tracker] values filled in."""
    backend = getattr(tracker, "backend", "")
    # no repo named: gh takes the checkout's own remote, which the agent's worktree shares
    values = {"id": item_id, "repo": getattr(tracker, "repo", "") or "this repository",
              "label": getattr(tracker, "follow_up_label", ""),
              "register": getattr(tracker, "register", "")}

    def fill(text: str) -> str:
        for key, value in values.items():
            text = text.replace("{" + key + "}", str(value))
        return text

    rows = []
    for row in _destination_table():
        words = {**row, **row.get(backend, {})} if isinstance(row.get(backend), dict) else row
        rows.append(Destination(Token=str(row["token"]), Where=fill(str(words["where"])),
                                Found=str(row["found"]), Do=fill(str(words["do"]))))
    return tuple(rows)


def _follow_ups(item: Item, dep_entries: dict[str, Any], tracker: Tracker) -> dict[str, Any]:
    """FollowUps and Owned for this item and its direct deps (one hop), through the tracker."""
    from drover.trackers import TrackerUnavailable

    owners = [item.id, *dep_entries]
    register_unreadable = ""
    try:
        rows = tracker.follow_ups(owners)
    except TrackerUnavailable as exc:
        rows, register_unreadable = list(exc.found), exc.reason
    follow_ups = tuple(
        FollowUp(Number=row.number, Title=row.title, Body="" if row.body_unavailable else row.body,
                 Url=row.url, Mine=item.id in row.owners, Unavailable=row.body_unavailable)
        for row in rows
    )
    owned: dict[int, OwnedIssue] = {}
    reasons: list[str] = []
    asks = [(item.id, item.origin, True)]
    asks += [(dep_id, origin_of(found.meta), False) for dep_id, found in dep_entries.items()]
    for owner, origin, mine in asks:
        try:
            found_rows = tracker.owned(owner, origin)
        except TrackerUnavailable as exc:
            found_rows = list(exc.found)
            if exc.reason not in reasons:
                reasons.append(exc.reason)
        for row in found_rows:
            if row.number not in owned:
                owned[row.number] = OwnedIssue(
                    Number=row.number, Title=row.title, Body="" if row.body_unavailable else row.body,
                    Url=row.url, Mine=mine, Unavailable=row.body_unavailable, Labels=tuple(row.labels),
                )
    return {
        "FollowUps": follow_ups,
        "RegisterUnreadable": register_unreadable,
        "Owned": tuple(owned.values()),
        "OwnedUnreadable": "; ".join(reasons),
    }


def _conflicts(project: Project, item_id: str, implementing: Sequence[Run]) -> tuple[str, ...]:
    """Files a merge of base into the item's branch left conflicting in its checkout."""
    from drover import git

    if project.config.worktree:
        # the worktree the item's runs worked in: its own folder, or the pooled one it holds
        held = next((run.worktree for run in reversed(implementing) if run.worktree), "")
        return tuple(git.unmerged_files(project.root / held if held else project.worktrees_dir / item_id))
    # without worktrees, a merge in the main checkout is this item's only while its branch is out;
    # the branch is the newest implementing run's (Ledger.item_branch, from the runs read already)
    branch = next((run.branch for run in reversed(implementing) if run.branch), "")
    if not branch or git.current_branch(project.root) != branch:
        return ()
    return tuple(git.unmerged_files(project.root))


def _posture(record: ItemRecord, last_run: Run | None) -> str:
    """The first that applies: resume, revise, build, continue (conflict is decided by the caller).

    `resume` follows the same rule as the interrupted and failed states (state.run_trouble),
    so list, drive and the prompt agree on it.
    """
    from drover.ledger import state

    # a live run counts as unfinished work too: its prompt would be the one resuming it
    trouble = state.unfinished_work(record.runs, record.audits).state
    if trouble:
        return "resume"
    if record.item.outstanding:
        return "revise"
    if last_run is None:
        return "build"
    return "continue"


def _review(project: Project, ledger: Ledger, record: ItemRecord, last_run: Run | None, branch: str, rounds: int,
            tracker: Tracker, heads: dict[str, str] | None = None) -> dict[str, Any]:
    from drover import git

    root, base, item = project.root, project.config.base, record.item
    # the note a reviewer reads first is a reviewer's or the operator's: an implementing (or draft)
    # run's own audit is recorded, but its note would reach the review unattributed (docs/security.md)
    slots = {run.id: run.slot for run in record.runs}
    notes = [row.note for row in record.audits if row.note and (not row.run or slots.get(row.run) == "review")]
    if heads and heads.get(branch) and heads.get(base):  # read a moment ago by the caller
        compared = (heads[branch], heads[base], "")
    else:
        compared = git.compare(root, branch, base)  # both heads read once for the two questions below
        if heads is not None and not compared[2]:
            heads.update({branch: compared[0], base: compared[1]})
    recent = git.recent_commits(root, branch, base, compared=compared)
    modified, scope_unavailable = git.modified_files(root, branch, base, compared=compared)
    closes = _closes(ledger, item, tracker)
    unnamed = [path for path in modified if path not in item.body]
    return {
        "Unfinished": last_run is not None and last_run.finished is None,
        "LogPath": _rel(project, last_run.log_path) if last_run else "",
        "Note": notes[-1] if notes else "",
        "Recent": recent,
        # a path is one line of the prompt: one holding a newline would write sections of its own
        "Unnamed": tuple(escaped(path) for path in unnamed[:LISTED_UNNAMED]),
        "UnnamedOmitted": max(0, len(unnamed) - LISTED_UNNAMED),
        "ScopeUnavailable": scope_unavailable or "",
        "Capped": rounds >= project.config.max_rounds,
        "Closes": closes,
        "UndisposedCloses": tuple(resolution for resolution in closes if resolution.Undisposed),
        "Checks": tuple(Check(Command=row.command, Head=row.head, Passed=row.passed,
                              ExitStatus=-1 if row.exit_status is None else row.exit_status, Tail=row.tail)
                        for row in ledger.checks(item.id) if row.head != row.base),  # base's own check is no check of the branch
    }


def _closes(ledger: Ledger, item: Item, tracker: Tracker) -> tuple[Resolution, ...]:
    """One Resolution per `closes` issue: the tracker's issue and the newest disposition."""
    from drover.trackers import TrackerUnavailable

    judged = ledger.newest_dispositions(item.id)
    resolutions = []
    for number in dict.fromkeys(item.closes):
        row = judged.get(number)
        judgment = {
            "Disposition": row["disposition"], "By": row["by"] or "", "Note": row["note"] or "",
            "Applied": row["applied"] or "",
        } if row else {}
        try:
            issue = tracker.issue(number)
        except TrackerUnavailable as exc:
            read = {"Unavailable": exc.reason}
        else:
            read = {"Title": issue.title, "Body": "" if issue.body_unavailable else issue.body,
                    "State": issue.state, "Unavailable": issue.body_unavailable}
        resolutions.append(Resolution(Number=number, Undisposed=row is None, **read, **judgment))
    return tuple(resolutions)


def _draft(project: Project, ledger: Ledger, record: ItemRecord, tracker: Tracker) -> dict[str, Any]:
    from drover.ledger import catalogue
    from drover.trackers import TrackerUnavailable

    item = record.item

    origin = Origin()
    if item.origin is not None:
        try:
            issue = tracker.issue(item.origin)
        except TrackerUnavailable as exc:
            origin = Origin(Number=item.origin, Unavailable=exc.reason)
        else:
            origin = Origin(Number=issue.number, Title=issue.title,
                            Body="" if issue.body_unavailable else issue.body, Url=issue.url,
                            Unavailable=issue.body_unavailable)
    source = item.finding_source
    notes = tuple(
        AuditNote(Level=row.level, By=row.by or "", Note=row.note, At=row.at)
        for row in (record.rows.audits_of(source) if source else ()) if row.note
    )
    done = {sibling_id for sibling_id, row in record.rows.items.items() if row["done"]}
    siblings = tuple(
        Sibling(Id=sibling_id, Title=found.title, Kind=found.kind, Done=sibling_id in done)
        for sibling_id, found in catalogue.catalogue(project, ledger).items() if sibling_id != item.id
    )
    return {"Origin": origin, "Finding": item.finding, "From": source, "Notes": notes,
            "Siblings": siblings}


def _rel(project: Project, path: str | None) -> str:
    """A recorded path as the user sees it: repo-relative where it lies inside the checkout."""
    if not path:
        return ""
    from pathlib import Path

    return project.relpath(path) if Path(path).is_absolute() else path
