"""The template data: one frozen type for every slot, filled per slot.

Field names are the template language (SPEC 9) and so are capitalised. A field a slot
does not fill keeps its empty default: present and empty, never absent.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

from .items import CHANGES_HEADING, truthy

SLOTS = ("implement", "review", "draft", "branch")


@dataclass(frozen=True)
class Round:
    N: int = 0
    Headline: str = ""
    Path: str = ""
    At: str = ""
    By: str = ""


@dataclass(frozen=True)
class Dep:
    Id: str = ""
    Title: str = ""
    Path: str = ""
    Done: bool = False
    Unreadable: str = ""
    Level: str = ""
    By: str = ""
    Weak: bool = False


@dataclass(frozen=True)
class FollowUp:
    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Mine: bool = False
    Unavailable: str = ""


@dataclass(frozen=True)
class OwnedIssue:
    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Mine: bool = False
    Unavailable: str = ""
    Labels: tuple[str, ...] = ()


@dataclass(frozen=True)
class Destination:
    Token: str = ""
    Where: str = ""
    Found: str = ""
    Do: str = ""

    def Wrap(self, indent: int = 0) -> str:  # noqa: N802 - template method name
        """This destination as one paragraph, every line indented by `indent` spaces."""
        pad = " " * int(indent)
        text = f"{self.Token}: {self.Where}. For {self.Found}. Do: {self.Do}"
        return textwrap.fill(text, width=88, initial_indent=pad, subsequent_indent=pad + "  ",
                             break_on_hyphens=False, break_long_words=False)


@dataclass(frozen=True)
class Commit:
    Sha: str = ""
    Subject: str = ""
    Files: int = 0
    Insertions: int = 0
    Deletions: int = 0


@dataclass(frozen=True)
class Recent:
    Commits: tuple[Commit, ...] = ()
    Unavailable: str = ""


@dataclass(frozen=True)
class Resolution:
    Number: int = 0
    Title: str = ""
    Body: str = ""
    State: str = ""
    Disposition: str = ""
    By: str = ""
    Note: str = ""
    Applied: str = ""
    Unavailable: str = ""
    Undisposed: bool = False


@dataclass(frozen=True)
class Origin:
    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Unavailable: str = ""


@dataclass(frozen=True)
class AuditNote:
    Level: str = ""
    By: str = ""
    Note: str = ""
    At: str = ""


@dataclass(frozen=True)
class Sibling:
    Id: str = ""
    Title: str = ""
    Kind: str = ""
    Done: bool = False


@dataclass(frozen=True)
class TemplateData:
    """Everything a template can name. `Get` and `Is` are methods, called as functions."""

    # every slot
    Id: str = ""
    Title: str = ""
    Kind: str = ""
    Path: str = ""
    Body: str = ""
    Meta: dict = field(default_factory=dict)
    Guarantees: str = ""
    Changes: str = ""
    ChangesHeading: str = CHANGES_HEADING
    Cleared: bool = False
    Trail: tuple[Round, ...] = ()
    Earlier: tuple[Round, ...] = ()
    Runs: int = 0
    Reviews: int = 0
    Audits: int = 0
    Rounds: int = 0
    MaxReviewRounds: int = 0
    Repeated: bool = False
    Deps: tuple[Dep, ...] = ()
    MergedDeps: tuple[Dep, ...] = ()
    UnmergedDeps: tuple[Dep, ...] = ()
    UnreadableDeps: tuple[Dep, ...] = ()
    FollowUps: tuple[FollowUp, ...] = ()
    RegisterUnreadable: str = ""
    Owned: tuple[OwnedIssue, ...] = ()
    OwnedUnreadable: str = ""
    Destinations: tuple[Destination, ...] = ()
    VerifyCommand: str = ""
    VerifyCommands: dict = field(default_factory=dict)
    Branch: str = ""
    Guidance: str = "detailed"
    # implement
    Posture: str = ""
    # review
    Unfinished: bool = False
    LogPath: str = ""
    Note: str = ""
    Recent: Recent = field(default_factory=Recent)
    Unnamed: tuple[str, ...] = ()
    ScopeUnavailable: str = ""
    Capped: bool = False
    Closes: tuple[Resolution, ...] = ()
    UndisposedCloses: tuple[Resolution, ...] = ()
    # draft
    Origin: Origin = field(default_factory=Origin)
    Finding: str = ""
    From: str = ""
    Notes: tuple[AuditNote, ...] = ()
    Siblings: tuple[Sibling, ...] = ()

    def Get(self, key: str) -> Any:  # noqa: N802 - template method name
        """A frontmatter value; "" when the item does not set the key."""
        value = self.Meta.get(key, "")
        return "" if value is None else value

    def Is(self, key: str) -> bool:  # noqa: N802 - template method name
        """The frontmatter key is set to yes (yes/true/on all count)."""
        return truthy(self.Meta.get(key))

    def context(self) -> dict[str, Any]:
        """The names a template sees: every field, plus Get and Is."""
        names = {f.name: getattr(self, f.name) for f in fields(self)}
        names["Get"] = self.Get
        names["Is"] = self.Is
        return names


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(TemplateData)) + ("Get", "Is")


# --- the builder -------------------------------------------------------------------------
#
# One call per prompt. On this path nothing reads every item file: the item itself is parsed,
# each dep comes from the metadata cache (status.entry), and only the draft slot's Siblings
# walk the catalogue, which is itself the cache. Tracker reads go through the tracker
# interface only, and the branch slot makes none.
#
# The builder imports status, git, trackers and templates inside its functions: templates
# imports this module for the field names, and should not pay for the ledger's imports.

def build(project, ledger, item_id: str, slot: str, *, guidance: str | None = None,
          tracker=None) -> TemplateData:
    """The template data for one item in one slot (implement, review, draft or branch)."""
    from . import status
    from .config import GUIDANCE_LEVELS
    from .errors import UsageError

    if slot not in SLOTS:
        raise UsageError(f"unknown slot {slot!r}: expected one of {', '.join(SLOTS)}")
    if guidance is not None and guidance not in GUIDANCE_LEVELS:
        raise UsageError(f"--guidance must be one of {', '.join(GUIDANCE_LEVELS)}, not {guidance!r}")
    item = status.require_item(project, item_id)
    deps, dep_entries = _deps(project, ledger, item)
    runs = ledger.runs(item.id)
    base = _every_slot(project, ledger, item, deps, runs)
    # The branch data is the same whichever slot asks (the branch slot's guidance, no tracker
    # reads), so run, review and finish always agree on the branch name.
    branch_data = TemplateData(**base, Guidance=project.config.agent_for("branch").guidance)
    if slot == "branch":
        return replace(branch_data, Guidance=guidance) if guidance else branch_data
    values = dict(base)
    values["Branch"] = render_item_branch(project, branch_data)
    values["Guidance"] = guidance or project.config.agent_for(slot).guidance
    if tracker is None:
        from .trackers import open_tracker

        tracker = open_tracker(project.config.tracker, project.root)
    values.update(_follow_ups(project, item, dep_entries, tracker))
    implementing = [run for run in runs if run["slot"] == "implement"]
    last = implementing[-1] if implementing else None
    if slot == "implement":
        values["Posture"] = _posture(item, last)
    elif slot == "review":
        values.update(_review(project, ledger, item, last, values["Branch"], base["Rounds"], tracker))
    elif slot == "draft":
        values.update(_draft(project, ledger, item, tracker))
    return TemplateData(**values)


def item_branch(project, ledger, item_id: str) -> str:
    """The item's branch name: `[run] branch` rendered from the branch slot's data."""
    return render_item_branch(project, build(project, ledger, item_id, "branch"))


def render_item_branch(project, data: TemplateData) -> str:
    """`[run] branch` rendered through the templates module (this module never imports jinja2)."""
    from .templates import render_branch

    return render_branch(data, project.config.branch)


def _every_slot(project, ledger, item, deps: list[Dep], runs: list[dict]) -> dict[str, Any]:
    """Every field the four slots share, none read from a tracker; Branch stays ""."""
    rounds = [
        Round(N=row["n"], Headline=row["headline"] or "", Path=_rel(project, row["path"]),
              At=row["at"] or "", By=row["by"] or "")
        for row in ledger.rounds(item.id)
    ]
    cleared = item.cleared
    audits = ledger.audits(item.id)
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
        "Runs": sum(1 for run in runs if run["slot"] == "implement"),
        "Reviews": sum(1 for run in runs if run["slot"] == "review"),
        "Audits": len(audits),
        "Rounds": len(rounds),
        "MaxReviewRounds": config.max_rounds,
        "Repeated": len(rounds) >= 2,
        "Deps": tuple(deps),
        "UnreadableDeps": tuple(dep for dep in deps if dep.Unreadable),
        "MergedDeps": tuple(dep for dep in deps if not dep.Unreadable and dep.Done),
        "UnmergedDeps": tuple(dep for dep in deps if not dep.Unreadable and not dep.Done),
        "Destinations": destinations(item.id),
        "VerifyCommand": verify_command(config.verify, item.meta),
        "VerifyCommands": dict(config.verify),
    }


def _deps(project, ledger, item) -> tuple[list[Dep], dict[str, Any]]:
    """Every dep with its done flag, readability and audit provenance; their cache entries by id."""
    from . import items as itemfile
    from . import status

    pattern = itemfile.id_pattern(project.config.prefix)
    deps: list[Dep] = []
    entries: dict[str, Any] = {}
    for dep_id in dict.fromkeys(item.deps):
        if not pattern.match(dep_id):
            deps.append(Dep(Id=dep_id, Unreadable=itemfile.NOT_AN_ID, Weak=True))
            continue
        found = status.entry(project, ledger, dep_id)
        entries[dep_id] = found
        provenance = status.audit_provenance(ledger.audits(dep_id))
        deps.append(Dep(
            Id=dep_id, Title=found.title, Path=found.rel,
            Done=bool(ledger.item_row(dep_id).get("done")), Unreadable=found.unreadable,
            Level=provenance.level, By=provenance.by, Weak=provenance.weak,
        ))
    return deps, entries


def verify_command(verify: dict[str, str], meta: dict[str, Any]) -> str:
    """`[verify] <key>` for the first key in sorted order the item sets to yes; else default."""
    for key in sorted(verify):
        if key != "default" and truthy(meta.get(key)):
            return verify[key]
    return verify.get("default", "")


@lru_cache(maxsize=1)
def _destination_table() -> tuple[dict[str, str], ...]:
    import tomllib

    from .resources import read_resource

    table = tomllib.loads(read_resource("destinations.toml")).get("destination", [])
    return tuple({key: str(row[key]) for key in ("token", "where", "found", "do")} for row in table)


def destinations(item_id: str) -> tuple[Destination, ...]:
    """The shipped destinations, `{id}` in each command replaced by the item id."""
    return tuple(
        Destination(Token=row["token"], Where=row["where"], Found=row["found"],
                    Do=row["do"].replace("{id}", item_id))
        for row in _destination_table()
    )


def _follow_ups(project, item, dep_entries: dict[str, Any], tracker) -> dict[str, Any]:
    """FollowUps and Owned for this item and its direct deps (one hop), through the tracker."""
    from .trackers import TrackerUnavailable

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
    asks += [(dep_id, _origin_of(found.meta), False) for dep_id, found in dep_entries.items()]
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


def _origin_of(meta: dict[str, Any]) -> int | None:
    value = meta.get("origin")
    try:
        return int(str(value).lstrip("#")) if value not in (None, "") else None
    except ValueError:
        return None


def _posture(item, last_run: dict | None) -> str:
    """The first that applies: resume, revise, build, continue."""
    if last_run is not None and last_run["finished"] is None:
        return "resume"
    if item.outstanding:
        return "revise"
    if last_run is None:
        return "build"
    return "continue"


def _review(project, ledger, item, last_run: dict | None, branch: str, rounds: int,
            tracker) -> dict[str, Any]:
    from . import git

    root, base = project.root, project.config.base
    notes = [row["note"] for row in ledger.audits(item.id) if row["note"]]
    recent = git.recent_commits(root, branch, base)
    modified, scope_unavailable = git.modified_files(root, branch, base)
    closes = _closes(ledger, item, tracker)
    return {
        "Unfinished": last_run is not None and last_run["finished"] is None,
        "LogPath": _rel(project, last_run.get("log_path")) if last_run else "",
        "Note": notes[-1] if notes else "",
        "Recent": recent,
        "Unnamed": tuple(path for path in modified if path not in item.body),
        "ScopeUnavailable": scope_unavailable or "",
        "Capped": rounds >= project.config.max_rounds,
        "Closes": closes,
        "UndisposedCloses": tuple(resolution for resolution in closes if resolution.Undisposed),
    }


def _closes(ledger, item, tracker) -> tuple[Resolution, ...]:
    """One Resolution per `closes` issue: the tracker's issue and the newest disposition."""
    from .trackers import TrackerUnavailable

    judged: dict[int, dict[str, Any]] = {}
    for row in ledger.dispositions(item.id):  # oldest first: the last one per issue stands
        judged[row["issue"]] = row
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


def _draft(project, ledger, item, tracker) -> dict[str, Any]:
    from . import status
    from .trackers import TrackerUnavailable

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
        AuditNote(Level=row["level"], By=row["by"] or "", Note=row["note"], At=row["at"])
        for row in (ledger.audits(source) if source else []) if row["note"]
    )
    done = ledger.done_ids()
    siblings = tuple(
        Sibling(Id=sibling_id, Title=found.title, Kind=found.kind, Done=sibling_id in done)
        for sibling_id, found in status.catalogue(project, ledger).items() if sibling_id != item.id
    )
    return {"Origin": origin, "Finding": item.finding, "From": source, "Notes": notes,
            "Siblings": siblings}


def _rel(project, path: str | None) -> str:
    """A recorded path as the user sees it: repo-relative where it lies inside the checkout."""
    if not path:
        return ""
    from pathlib import Path

    return project.relpath(path) if Path(path).is_absolute() else path


# --- the field schema (`drover schema --fields`, docs/fields.md) --------------------------

_ALL = SLOTS
_LAUNCH = ("implement", "review", "draft")  # the slots that read the tracker and have a branch

_MEMBERS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "Round": (
        ("N", "int", "the round's number, from 1"),
        ("Headline", "str", "the first non-empty line of the findings"),
        ("Path", "str", "the log of the review run that wrote the round, \"\" when none"),
        ("At", "str", "when the round was recorded (UTC, ISO 8601)"),
        ("By", "str", "who requested the changes"),
    ),
    "Dep": (
        ("Id", "str", "the dep's id as the frontmatter lists it"),
        ("Title", "str", "its title, from the metadata cache"),
        ("Path", "str", "its file, relative to the repository root"),
        ("Done", "bool", "the ledger records it merged"),
        ("Unreadable", "str", "why its file cannot be used (check's wording), \"\" when readable"),
        ("Level", "str", "level of its best audit (claimed, reviewed, verified), \"\" when none"),
        ("By", "str", "who made that audit"),
        ("Weak", "bool", "unconfirmed: no audit, a claim only, a self-audit, or one before authorship was recorded"),
    ),
    "FollowUp": (
        ("Number", "int", "the tracker row's number"),
        ("Title", "str", "its headline"),
        ("Body", "str", "the report that filed it, \"\" when the row carries none"),
        ("Url", "str", "where it lives"),
        ("Mine", "bool", "this item owns it (false: a direct dep does)"),
        ("Unavailable", "str", "why its text could not be reached"),
    ),
    "OwnedIssue": (
        ("Number", "int", "the issue's number"),
        ("Title", "str", "its title"),
        ("Body", "str", "its text, \"\" when it has none"),
        ("Url", "str", "where it lives"),
        ("Mine", "bool", "it names this item (false: a direct dep)"),
        ("Unavailable", "str", "why its text could not be reached"),
        ("Labels", "list[str]", "every label on the issue"),
    ),
    "Destination": (
        ("Token", "str", "a short name for the place"),
        ("Where", "str", "the place a finding goes"),
        ("Found", "str", "what kind of finding belongs there"),
        ("Do", "str", "the command that puts it there, for this item"),
        ("Wrap(indent)", "str", "this destination as one paragraph indented by `indent` spaces"),
    ),
    "Recent": (
        ("Commits", "list[Commit]", "the branch's commits base lacks, oldest first: Sha, Subject, Files, Insertions, Deletions"),
        ("Unavailable", "str", "why git could not answer; never set together with Commits"),
    ),
    "Resolution": (
        ("Number", "int", "the issue the item closes"),
        ("Title", "str", "its title as the tracker has it now"),
        ("Body", "str", "its text"),
        ("State", "str", "open or closed, the tracker's own"),
        ("Disposition", "str", "the newest judgment recorded: close, comment or keep"),
        ("By", "str", "who recorded it"),
        ("Note", "str", "the judgment's note"),
        ("Applied", "str", "what finish already wrote to the tracker"),
        ("Unavailable", "str", "why the issue could not be read"),
        ("Undisposed", "bool", "nobody has judged it yet"),
    ),
    "Origin": (
        ("Number", "int", "the origin issue's number, 0 when the item has none"),
        ("Title", "str", "its title, read fresh"),
        ("Body", "str", "its text, read fresh"),
        ("Url", "str", "where it lives"),
        ("Unavailable", "str", "why it could not be read"),
    ),
    "AuditNote": (
        ("Level", "str", "the audit's level"),
        ("By", "str", "who audited"),
        ("Note", "str", "the note, verbatim"),
        ("At", "str", "when (UTC, ISO 8601)"),
    ),
    "Sibling": (
        ("Id", "str", "another item's id"),
        ("Title", "str", "its title"),
        ("Kind", "str", "its kind"),
        ("Done", "bool", "the ledger records it merged"),
    ),
}

# name, type, slots that fill it, one-line meaning. A test keeps this, FIELD_NAMES and
# docs/fields.md in step.
_SCHEMA: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("Id", "str", _ALL, "the item's id"),
    ("Title", "str", _ALL, "the item's title"),
    ("Kind", "str", _ALL, "the item's kind (a free word: bug, feature, ...)"),
    ("Path", "str", _ALL, "the item file, relative to the repository root"),
    ("Body", "str", _ALL, "the item's Markdown below the frontmatter, blank edge lines removed"),
    ("Meta", "dict", _ALL, "the whole frontmatter"),
    ("Get", "method(key)", _ALL, "Get(\"key\"): a frontmatter value, \"\" when the item does not set the key"),
    ("Is", "method(key)", _ALL, "Is(\"key\"): true when the frontmatter key is set to yes (yes/true/on)"),
    ("Guarantees", "str", _ALL, "the Guarantees section, heading excluded: invariants that accumulate"),
    ("Changes", "str", _ALL, "the Changes section, heading excluded; \"\" when absent"),
    ("ChangesHeading", "str", _ALL, "the Changes section's heading, the one constant drover writes"),
    ("Cleared", "bool", _ALL, "the Changes section holds a cleared block, not findings"),
    ("Trail", "list[Round]", _ALL, "every kept round, oldest first"),
    ("Earlier", "list[Round]", _ALL, "rounds before the newest; once Cleared, every kept round"),
    ("Runs", "int", _ALL, "implementing launches recorded"),
    ("Reviews", "int", _ALL, "review launches recorded"),
    ("Audits", "int", _ALL, "audit rows recorded"),
    ("Rounds", "int", _ALL, "rounds of requested changes recorded"),
    ("MaxReviewRounds", "int", _ALL, "the cap on rounds ([review] max_rounds)"),
    ("Repeated", "bool", _ALL, "Rounds >= 2: the same kind of defect keeps coming back"),
    ("Deps", "list[Dep]", _ALL, "every dep in frontmatter order, with done flag, readability and audit provenance"),
    ("MergedDeps", "list[Dep]", _ALL, "readable deps the ledger records done"),
    ("UnmergedDeps", "list[Dep]", _ALL, "readable deps not yet done"),
    ("UnreadableDeps", "list[Dep]", _ALL, "deps whose file cannot be used, whatever Done says"),
    ("FollowUps", "list[FollowUp]", _LAUNCH, "open follow-up rows owned by this item or a direct dep"),
    ("RegisterUnreadable", "str", _LAUNCH, "why the follow-up list could not be read (FollowUps is then a floor)"),
    ("Owned", "list[OwnedIssue]", _LAUNCH, "issues naming this item or a direct dep as owner, without the follow-up label (github)"),
    ("OwnedUnreadable", "str", _LAUNCH, "why the owned issues could not be read"),
    ("Destinations", "list[Destination]", _ALL, "where a finding can go, one row per place"),
    ("VerifyCommand", "str", _ALL, "the one verify command for this item: the first yes key in sorted order, else default"),
    ("VerifyCommands", "dict", _ALL, "the whole [verify] table"),
    ("Branch", "str", _LAUNCH, "the item's branch, [run] branch rendered (\"\" in the branch template)"),
    ("Guidance", "str", _ALL, "lean or detailed"),
    ("Posture", "str", ("implement",), "resume, revise, build or continue: the first that applies"),
    ("Unfinished", "bool", ("review",), "the last implementing run never recorded an exit"),
    ("LogPath", "str", ("review",), "the last implementing run's log, \"\" when there was no run"),
    ("Note", "str", ("review",), "the note of the newest audit that carries one, verbatim"),
    ("Recent", "Recent", ("review",), "the commits on the item's branch that base lacks, or why git could not say"),
    ("Unnamed", "list[str]", ("review",), "files the branch modified (not added) whose path the body never mentions"),
    ("ScopeUnavailable", "str", ("review",), "why git could not say which files the branch modified"),
    ("Capped", "bool", ("review",), "Rounds >= MaxReviewRounds: request-changes will refuse"),
    ("Closes", "list[Resolution]", ("review",), "one row per issue the item closes, with its judgment"),
    ("UndisposedCloses", "list[Resolution]", ("review",), "the Closes rows nobody has judged: the dispose worklist"),
    ("Origin", "Origin", ("draft",), "the issue the item came from, read fresh, or why it could not be"),
    ("Finding", "str", ("draft",), "the provenance line, \"\" when the body has none"),
    ("From", "str", ("draft",), "the item the provenance line names"),
    ("Notes", "list[AuditNote]", ("draft",), "every audit on From that carries a note, oldest first"),
    ("Siblings", "list[Sibling]", ("draft",), "every other item, so a requirement can go to its owner"),
)


def field_schema() -> list[dict[str, Any]]:
    """Every template field: name, type, the slots that fill it, a one-line meaning, members."""
    schema = []
    for name, kind, slots, meaning in _SCHEMA:
        row_type = kind.removeprefix("list[").rstrip("]")
        members = [
            {"name": member, "type": member_type, "meaning": member_meaning}
            for member, member_type, member_meaning in _MEMBERS.get(row_type, ())
        ]
        schema.append({"name": name, "type": kind, "slots": list(slots), "meaning": meaning,
                       "members": members})
    return schema
