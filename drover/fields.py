"""The template data type: one frozen type for every slot, its row types, and the field schema.

Field names are the template language (SPEC 9) and so are capitalised. A field a slot
does not fill keeps its empty default: present and empty, never absent. The builder that
fills it lives in data.py; this module stays free of imports so that templates, git and the
builder can all use it.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, fields
from typing import Any

from .deps import Dep  # noqa: F401 - a row type of TemplateData, in its own module for `show`
from .items import CHANGES_HEADING, truthy

from .vocabulary import TEMPLATE_SLOTS as SLOTS  # the four slots a template can fill


@dataclass(frozen=True)
class Round:
    N: int = 0
    Headline: str = ""
    Path: str = ""
    At: str = ""
    By: str = ""


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
    Conflicts: tuple[str, ...] = ()
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
    ("Posture", "str", ("implement",), "resume, conflict, revise, build or continue: the first that applies"),
    ("Conflicts", "list[str]", ("implement",), "the files a merge of base into the branch left conflicting (posture conflict)"),
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
