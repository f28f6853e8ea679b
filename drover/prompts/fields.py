"""The template data type: one frozen type for every slot, its row types, and the field schema.

Field names are the template language (SPEC 9) and so are capitalised. A field a slot
does not fill keeps its empty default: present and empty, never absent. The builder that
fills it lives in data.py. Commit and Recent are git's own rows (drover/git/history.py).
"""
from __future__ import annotations

from typing import Any, NamedTuple

from drover.git.history import Commit as Commit, Recent as Recent  # the rows git returns, handed on as they are
from drover.items.deps import Dep as Dep  # a row type of TemplateData, in its own module for `show`
from drover.items.file import CHANGES_HEADING, truthy

from drover.vocabulary import TEMPLATE_SLOTS

SLOTS = TEMPLATE_SLOTS  # the four slots a template can fill


class Round(NamedTuple):
    """One round of requested changes, as `Trail` and `Earlier` list it."""

    N: int = 0
    Headline: str = ""
    Path: str = ""
    At: str = ""
    By: str = ""


class FollowUp(NamedTuple):
    """An open follow-up row on the tracker, owned by the item or a direct dep."""

    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Mine: bool = False
    Unavailable: str = ""


class OwnedIssue(NamedTuple):
    """An open issue naming the item or a direct dep as owner, without the follow-up label."""

    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Mine: bool = False
    Unavailable: str = ""
    Labels: tuple[str, ...] = ()


# The fields read from the tracker's register and owned issues (one call for the register, one for
# each of the item and its direct deps), empty. A template that names none of them (the built-in
# draft's) gets these and the tracker is not asked (rendering.names_follow_ups).
NO_FOLLOW_UPS: dict[str, object] = {"FollowUps": (), "RegisterUnreadable": "", "Owned": (), "OwnedUnreadable": ""}


class Destination(NamedTuple):
    """A place a finding can be sent, with this item's command."""

    Token: str = ""
    Where: str = ""
    Found: str = ""
    Do: str = ""

    def Wrap(self, indent: int = 0) -> str:  # noqa: N802 - template method name
        """This destination as one paragraph, every line indented by `indent` spaces."""
        import textwrap  # here: its patterns compile on import, and only prompts with Destinations wrap

        pad = " " * int(indent)
        return textwrap.fill(f"{self.Token}: {self.Where}. For {self.Found}. Do: {self.Do}", 88,
                             initial_indent=pad, subsequent_indent=pad + "  ",
                             break_on_hyphens=False, break_long_words=False)


class Check(NamedTuple):
    """One run of the verify command by drover itself, on a branch head with base merged in."""

    Command: str = ""
    Head: str = ""
    Passed: bool = False
    ExitStatus: int = -1
    Tail: str = ""


class Resolution(NamedTuple):
    """An issue the item closes, with the newest judgment recorded for it."""

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


class Origin(NamedTuple):
    """The issue the item came from, read fresh."""

    Number: int = 0
    Title: str = ""
    Body: str = ""
    Url: str = ""
    Unavailable: str = ""


class AuditNote(NamedTuple):
    """An audit on the provenance line's item that carries a note."""

    Level: str = ""
    By: str = ""
    Note: str = ""
    At: str = ""


class Sibling(NamedTuple):
    """Another item of the project, for routing a requirement to its owner."""

    Id: str = ""
    Title: str = ""
    Kind: str = ""
    Done: bool = False


_NO_RECENT = Recent()
_NO_ORIGIN = Origin()


class TemplateData(NamedTuple):
    """Everything a template can name. `Get` and `Is` are methods, called as functions."""

    # every slot
    Id: str = ""
    Title: str = ""
    Kind: str = ""
    Path: str = ""
    Body: str = ""
    Meta: dict[str, Any] = {}  # shared, never mutated: template data is read-only
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
    VerifyCommands: dict[str, str] = {}  # shared, never mutated
    Branch: str = ""
    Guidance: str = "detailed"
    # implement
    Posture: str = ""
    Conflicts: tuple[str, ...] = ()
    # review
    Unfinished: bool = False
    LogPath: str = ""
    Note: str = ""
    Recent: Recent = _NO_RECENT
    Unnamed: tuple[str, ...] = ()
    UnnamedOmitted: int = 0
    ScopeUnavailable: str = ""
    Capped: bool = False
    Closes: tuple[Resolution, ...] = ()
    UndisposedCloses: tuple[Resolution, ...] = ()
    Checks: tuple[Check, ...] = ()
    # draft
    Origin: Origin = _NO_ORIGIN
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
        names = self._asdict()
        names["Get"] = self.Get
        names["Is"] = self.Is
        return names


FIELD_NAMES: tuple[str, ...] = TemplateData._fields + ("Get", "Is")


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
        ("Unavailable", "str", "why its text could not be reached, or why its title and text are left out "
         "(its author is not the repository's owner, a member or a collaborator: `[tracker] authors`)"),
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
        ("Commits", "list[Commit]", "the branch's commits base lacks, oldest first: Sha, Subject, Files, Insertions, Deletions "
         "(a merge's against its first parent: what it brought into the branch)"),
        ("Unavailable", "str", "why git could not answer; never set together with Commits"),
        ("Omitted", "int", "how many of the oldest commits Commits leaves out (it lists the newest 1,000; "
         "a subject past 300 columns ends `..`)"),
    ),
    "Check": (
        ("Command", "str", "the verify command drover ran"),
        ("Head", "str", "the branch head it ran on (a full commit id), base merged in"),
        ("Passed", "bool", "it exited 0"),
        ("ExitStatus", "int", "its exit status; -1 when it never exited (timed out, interrupted, or the merge of base conflicted)"),
        ("Tail", "str", "the end of its output (about 40 lines), or why it never ran"),
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

# name, type, slots that fill it, one-line meaning (`schema --fields`), and the explanation
# docs/fields.md's table gives (generated from here by `make docs`). A test keeps this and
# FIELD_NAMES in step: adding a field is its line in TemplateData above and its row here.
_SCHEMA: tuple[tuple[str, str, tuple[str, ...], str, str], ...] = (
    ("Id", "str", _ALL, "the item's id",
     "The item's id, such as `D-12`."),
    ("Title", "str", _ALL, "the item's title",
     "The `title` from the frontmatter."),
    ("Kind", "str", _ALL, "the item's kind (a free word: bug, feature, ...)",
     "The `kind` from the frontmatter, a word the project chooses (bug, feature, chore...)."),
    ("Path", "str", _ALL, "the item file, relative to the repository root",
     "The item file relative to the repository root (`items/D-12.md`), so an instruction can point at it."),
    ("Body", "str", _ALL, "the item's Markdown below the frontmatter, blank edge lines removed",
     "Everything below the frontmatter, with blank lines at its two ends dropped; passed through as text, "
     "never as a template."),
    ("Meta", "dict", _ALL, "the whole frontmatter",
     "The whole frontmatter as parsed, project keys included."),
    ("Get", "method(key)", _ALL, "Get(\"key\"): a frontmatter value, \"\" when the item does not set the key",
     "`Get(\"key\")`: that frontmatter value, or `\"\"` when the item does not set it. Never an error."),
    ("Is", "method(key)", _ALL, "Is(\"key\"): true when the frontmatter key is set to yes (yes/true/on)",
     "`Is(\"key\")`: true when the value reads as yes (`yes`, `true`, `on`, `y`, or a YAML true)."),
    ("Guarantees", "str", _ALL, "the Guarantees section, heading excluded: invariants that accumulate",
     "The text of the `## Guarantees` section, heading left out: properties that must keep holding, added "
     "to round after round."),
    ("Changes", "str", _ALL, "the Changes section, heading excluded; \"\" when absent",
     "The text of the Changes section, heading left out: the findings exactly as the last "
     "`request-changes` wrote them, or the cleared block. `\"\"` without the section."),
    ("ChangesHeading", "str", _ALL, "the Changes section's heading, the one constant drover writes",
     "The Changes section's heading (`## Changes requested`). Templates use this rather than spelling it, "
     "so reader and writer cannot drift apart."),
    ("Cleared", "bool", _ALL, "the Changes section holds a cleared block, not findings",
     "The Changes section holds the block `close-changes` (or an approving audit) wrote, not findings."),
    ("Trail", "list[Round]", _ALL, "every kept round, oldest first",
     "Every round the ledger holds, oldest first. For reference; prompts render `Earlier`."),
    ("Earlier", "list[Round]", _ALL, "rounds before the newest; once Cleared, every kept round",
     "The history to render: every round except the newest, whose findings are already `Changes`. Once "
     "`Cleared`, every round including the newest, since the section no longer shows it."),
    ("Runs", "int", _ALL, "implementing launches recorded",
     "How many implementing runs were launched."),
    ("Reviews", "int", _ALL, "review launches recorded",
     "How many review runs were launched (a piped `review --print` launches none)."),
    ("Audits", "int", _ALL, "audit rows recorded",
     "How many audit rows the item has, at any level."),
    ("Rounds", "int", _ALL, "rounds of requested changes recorded",
     "How many rounds of changes were requested."),
    ("MaxReviewRounds", "int", _ALL, "the cap on rounds ([review] max_rounds)",
     "`[review] max_rounds`: the number of rounds after which `request-changes` refuses."),
    ("Repeated", "bool", _ALL, "Rounds >= 2: the same kind of defect keeps coming back",
     "`Rounds` is 2 or more: a defect class is recurring, so look past the one instance."),
    ("Deps", "list[Dep]", _ALL, "every dep in frontmatter order, with done flag, readability and audit provenance",
     "Every dep, in the order the frontmatter lists them, with its done flag, readability and audit "
     "provenance."),
    ("MergedDeps", "list[Dep]", _ALL, "readable deps the ledger records done",
     "Deps that are readable and recorded done."),
    ("UnmergedDeps", "list[Dep]", _ALL, "readable deps not yet done",
     "Deps that are readable and not yet done."),
    ("UnreadableDeps", "list[Dep]", _ALL, "deps whose file cannot be used, whatever Done says",
     "Deps whose file cannot be used (missing, empty, broken, shelved, or not an id at all), done or not. "
     "Each dep is in exactly one of the three lists."),
    ("FollowUps", "list[FollowUp]", _LAUNCH, "open follow-up rows owned by this item or a direct dep",
     "Open follow-up rows on the tracker owned by this item (`Mine`) or by one of its direct deps."),
    ("RegisterUnreadable", "str", _LAUNCH, "why the follow-up list could not be read (FollowUps is then a floor)",
     "Why the follow-up list could not be read; then `FollowUps` holds only what was read before the "
     "failure. `\"\"` when it was read, or when no list is configured."),
    ("Owned", "list[OwnedIssue]", _LAUNCH, "issues naming this item or a direct dep as owner, without the follow-up label (github)",
     "Open issues that name this item or a direct dep as owner but carry no follow-up label (sub-issues of"
     " the origin, `Owner: <id>` lines). Only the github backend reads them."),
    ("OwnedUnreadable", "str", _LAUNCH, "why the owned issues could not be read",
     "Why some owned issues could not be read (reasons joined by `; `)."),
    ("Destinations", "list[Destination]", _ALL, "where a finding can go, one row per place",
     "The places a finding can be sent, as shipped in `builtin_templates/destinations.toml`, with this "
     "item's id in each command."),
    ("VerifyCommand", "str", _ALL, "the one verify command for this item: the first yes key in sorted order, else default",
     "The single verify command for this item: `[verify] <key>` for the first key, in sorted order, that "
     "the item sets to yes; otherwise `[verify] default`."),
    ("VerifyCommands", "dict", _ALL, "the whole [verify] table",
     "The whole `[verify]` table, for a template that chooses for itself."),
    ("Branch", "str", _LAUNCH, "the item's branch, [run] branch rendered (\"\" in the branch template)",
     "The item's git branch: `[run] branch` rendered from the branch slot's data, until an implementing run "
     "has worked on a branch; from then on that branch (a later change of `[run] branch`, or of a title it "
     "renders, names new items' branches only). Empty inside the branch template itself."),
    ("Guidance", "str", _ALL, "lean or detailed",
     "`lean` or `detailed`: the slot agent's `guidance`, or `--guidance`."),
    ("Posture", "str", ("implement",), "resume, conflict, revise, build or continue: the first that applies",
     "How the implementing agent starts: `resume` (the last implementing run never finished, was "
     "interrupted, timed out or failed, and no approval came after it), `conflict` (a merge of base into "
     "the branch is in progress with conflicts: `drive --finish` started it), `revise` (changes are "
     "outstanding), `build` (no implementing run yet), else `continue`. The first that applies."),
    ("Conflicts", "list[str]", ("implement",), "the files a merge of base into the branch left conflicting (posture conflict)",
     "The files the merge of base into the branch left conflicting (posture `conflict`); empty otherwise."),
    ("Unfinished", "bool", ("review",), "the last implementing run never recorded an exit",
     "The last implementing run has no finish time: it is still running or it died. Tells that apart from "
     "\"never ran\" (no run: false, and `LogPath` is empty)."),
    ("LogPath", "str", ("review",), "the last implementing run's log, \"\" when there was no run",
     "The last implementing run's log, relative to the repository root; `\"\"` when there was no run."),
    ("Note", "str", ("review",), "the note of the newest audit that carries one, verbatim",
     "The note of the newest audit that has one, exactly as written."),
    ("Recent", "Recent", ("review",), "the commits on the item's branch that base lacks, or why git could not say",
     "The commits on `Branch` that base lacks, with sizes, or in `Unavailable` the reason git could not "
     "say (never both)."),
    ("Unnamed", "list[str]", ("review",), "files the branch modified (not added) whose path the body never mentions",
     "Files the branch changed (added and deleted files excluded) whose repository path appears nowhere in"
     " the body; the first 1,000 in path order."),
    ("UnnamedOmitted", "int", ("review",), "how many more such files Unnamed leaves out past its first 1,000",
     "How many more files `Unnamed` would hold past its first 1,000 (in path order), which it leaves out: "
     "a branch that modifies 200,000 files made a prompt over the render's cap."),
    ("ScopeUnavailable", "str", ("review",), "why git could not say which files the branch modified",
     "Why git could not list the branch's modified files; `Unnamed` is then empty for that reason, not "
     "because all is named."),
    ("Capped", "bool", ("review",), "Rounds >= MaxReviewRounds: request-changes will refuse",
     "`Rounds` has reached `MaxReviewRounds`: the next `request-changes` will refuse, keep the findings "
     "and park the item."),
    ("Closes", "list[Resolution]", ("review",), "one row per issue the item closes, with its judgment",
     "One row per issue in the item's `closes`: the issue as the tracker has it now, plus the newest "
     "disposition recorded for it."),
    ("UndisposedCloses", "list[Resolution]", ("review",), "the Closes rows nobody has judged: the dispose worklist",
     "The `Closes` rows with no disposition yet: what the reviewer must `drover dispose` before `finish`."),
    ("Checks", "list[Check]", ("review",), "drover's own runs of the verify command on the branch, base merged in, oldest first",
     "Every check drover ran of the item (`drover verify`, or `drive` before each review), oldest first: the"
     " verify command run on the branch head with base merged in, whether it passed, its exit status and the "
     "end of its output. Only a passing check of the head that merges lets `finish` merge it."),
    ("Origin", "Origin", ("draft",), "the issue the item came from, read fresh, or why it could not be",
     "The item's `origin` issue, read from the tracker at render time; `Unavailable` says why not. All "
     "empty when the item has no origin."),
    ("Finding", "str", ("draft",), "the provenance line, \"\" when the body has none",
     "The provenance line (`Finding: D-3 ...`) when the body opens with one; else `\"\"`."),
    ("From", "str", ("draft",), "the item the provenance line names",
     "The item the provenance line names."),
    ("Notes", "list[AuditNote]", ("draft",), "every audit on From that carries a note, oldest first",
     "Every audit on `From` that has a note, oldest first: where a finding filed during review is "
     "described."),
    ("Siblings", "list[Sibling]", ("draft",), "every other item, so a requirement can go to its owner",
     "Every other item in the project, so a requirement that belongs elsewhere can be routed to its owner."),
)


def field_explanations() -> dict[str, str]:
    """Each field's explanation for people (docs/fields.md), longer than its schema meaning."""
    return {name: explained for name, _, _, _, explained in _SCHEMA}


def field_schema() -> list[dict[str, Any]]:
    """Every template field: name, type, the slots that fill it, a one-line meaning, members."""
    schema = []
    for name, kind, slots, meaning, _ in _SCHEMA:
        row_type = kind.removeprefix("list[").rstrip("]")
        members = [
            {"name": member, "type": member_type, "meaning": member_meaning}
            for member, member_type, member_meaning in _MEMBERS.get(row_type, ())
        ]
        schema.append({"name": name, "type": kind, "slots": list(slots), "meaning": meaning,
                       "members": members})
    return schema
