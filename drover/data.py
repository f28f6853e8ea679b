"""The template data: one frozen type for every slot, filled per slot.

Field names are the template language (SPEC 9) and so are capitalised. A field a slot
does not fill keeps its empty default: present and empty, never absent.
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass, field, fields
from typing import Any

from .items import CHANGES_HEADING

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
        return textwrap.fill(text, width=88, initial_indent=pad, subsequent_indent=pad + "  ")


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


def _truthy(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in ("yes", "true", "on", "1")
    return value == 1


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
        return _truthy(self.Meta.get(key))

    def context(self) -> dict[str, Any]:
        """The names a template sees: every field, plus Get and Is."""
        names = {f.name: getattr(self, f.name) for f in fields(self)}
        names["Get"] = self.Get
        names["Is"] = self.Is
        return names


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(TemplateData)) + ("Get", "Is")
