"""The error hierarchy: the CLI turns each into one line and a chosen exit code."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Iterable, TextIO


class ProblemCode(StrEnum):
    """What a `drover check` finding is about: the `code` of `check --json`, the one list of them
    (docs/commands.md names each; tests/test_check_cli.py holds the two to each other)."""

    ITEM_UNREADABLE = "item-unreadable"
    DEP_MISSING = "dep-missing"
    DEP_UNREADABLE = "dep-unreadable"
    DEP_NOT_AN_ID = "dep-not-an-id"
    DEP_CYCLE = "dep-cycle"
    BASE_MISSING = "base-missing"
    REF_SHADOW = "ref-shadow"
    GIT_REWRITE = "git-rewrite"
    APPROVAL_MOVED = "approval-moved"
    CONFIG = "config"
    STALE_OVERRIDE = "stale-override"
    WHOLE_TEMPLATE = "whole-template"
    TEMPLATE_FIELD = "template-field"
    TEMPLATE_BLOCK = "template-block"
    TEMPLATE = "template"
    AGENT_MISSING = "agent-missing"
    AGENT_AS_ROOT = "agent-as-root"
    TRACKER_UNREACHABLE = "tracker-unreachable"
    LEDGER_ROW = "ledger-row"
    NEEDS_REQUIREMENTS = "needs-requirements"
    VERIFY_EMPTY = "verify-empty"
    VERIFY_CANNOT_RUN = "verify-cannot-run"
    VERIFY_TESTS_CHECKOUT = "verify-tests-checkout"  # a worktree's tests would import the main checkout's code
    NOT_AN_ITEM = "not-an-item"
    NO_TITLE = "no-title"
    ITEMS_FOLDER = "items-folder"
    MISSPELT_KEY = "misspelt-key"
    CHANGES_DISAGREE = "changes-disagree"  # an item's Changes section and the ledger's rounds tell different stories
    WRITE_INTERRUPTED = "write-interrupted"
    COMMIT_OWED = "commit-owed"
    REPO_TEMPLATES_OFF = "repo-templates-off"  # DROVER_REPO_TEMPLATES=0: launches ignore the override files
    HIDDEN_FROM_STATUS = "hidden-from-status"  # a steering file marked assume-unchanged or skip-worktree
    OTHER = "other"  # what no code above names


def located(path: str | None, line: int | None, text: str) -> str:
    """`path:line: text`, `path: text` without a line, `text` alone without a path: how every
    message that names a place names it."""
    if not path:
        return text
    return f"{path}:{line}: {text}" if line else f"{path}: {text}"


class DroverError(Exception):
    """A failure the user can act on. Printed as one line, never a traceback.
    `code`: what `check --json` calls it when check reports it."""

    exit_code = 2
    code = ProblemCode.OTHER

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line

    @property
    def lines(self) -> tuple[str, ...]:
        """What the CLI prints, one `drover: ` line each (several only for a config with several problems)."""
        return (str(self),)

    def __str__(self) -> str:
        return located(self.path, self.line, self.message)


class UsageError(DroverError):
    """The command line asked for something that cannot be done as asked (exit 2)."""


class ConfigError(DroverError):
    """drover.toml is missing, unreadable, or holds an unknown key or a wrong type (exit 2).

    One reading reports every problem it finds: `lines` holds them, one each, in file order.
    """

    code = ProblemCode.CONFIG

    @classmethod
    def several(cls, lines: list[str], places: list[int | None] | None = None) -> "ConfigError":
        """One error of every line; `places`: the line of drover.toml each names, where known."""
        error = cls(lines[0])
        error.extra = tuple(lines[1:])
        error.places = tuple(places or ())
        return error

    extra: tuple[str, ...] = ()
    places: tuple[int | None, ...] = ()  # the line of each of `lines` in drover.toml, when several() was told

    @property
    def lines(self) -> tuple[str, ...]:
        return (str(self), *self.extra)


class TemplateError(DroverError):
    """A template does not parse, names an unknown field or block, or renders empty (exit 2)."""

    code = ProblemCode.TEMPLATE


class FieldError(TemplateError):
    """A template names a field (or a field of a row) the data does not have."""

    code = ProblemCode.TEMPLATE_FIELD


class BlockError(TemplateError):
    """An override's block is unknown, defined twice, or written so drover cannot use it as meant."""

    code = ProblemCode.TEMPLATE_BLOCK


class ItemError(DroverError):
    """An item file cannot be used for the command at hand (exit 2)."""


class Refused(DroverError):
    """An action was refused on purpose: the round cap, outstanding changes, a live run (exit 1).

    `details`: what the refusal names, one indented line each after the message (`listing`)."""

    exit_code = 1
    details: tuple[str, ...] = ()

    @classmethod
    def listing(cls, message: str, details: Iterable[str]) -> "Refused":
        refused = cls(message)
        refused.details = tuple(details)
        return refused

    @property
    def lines(self) -> tuple[str, ...]:
        return (str(self), *(f"  {detail}" for detail in self.details))


@dataclass(frozen=True)
class Finding:
    """One line `drover check` prints; `error` findings make it exit 1, the rest are warnings.
    `item`: the item it is about, when it is about one item's file alone. `code`, `path` and
    `line` say what it is and where, for `check --json`: set where the finding is made, never read
    back off the message. Findings compare by what check prints (message, error, item)."""

    message: str
    error: bool = True
    item: str = ""
    code: ProblemCode = field(default=ProblemCode.OTHER, compare=False, kw_only=True)
    path: str | None = field(default=None, compare=False, kw_only=True)
    line: int | None = field(default=None, compare=False, kw_only=True)

    @classmethod
    def at(cls, code: ProblemCode, path: str, text: str, *, line: int | None = None, error: bool = True,
           item: str = "") -> "Finding":
        """A finding about `path` (at `line`), its message `text` with the place in front, as located() writes it."""
        return cls(located(path, line, text), error, item, code=code, path=path, line=line)

    @classmethod
    def of(cls, exc: DroverError, error: bool = True) -> "Finding":
        """An error found as an exception: its line, code and place."""
        return cls(str(exc), error, code=exc.code, path=exc.path, line=exc.line)


def did_you_mean(word: str, choices: Iterable[str], *, cutoff: float = 0.6, fold_case: bool = False) -> str:
    """The choice nearest to `word` ("" when none is within `cutoff`), for a did-you-mean hint.

    `fold_case` takes a choice that differs from `word` only in case first; `cutoff=0.0`
    always names one.
    """
    choices = list(choices)
    if fold_case:
        for choice in choices:
            if choice.lower() == word.lower():
                return choice
    import difflib

    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return close[0] if close else ""


class GitError(DroverError):
    """git did not do what drover asked; carries git's own words."""


# Any control character but tab and newline: ESC starts a terminal's escapes (colours, cursor moves,
# a cleared screen, a window title, the clipboard through OSC 52), C1's CSI is one byte of them,
# and so is a byte of C1's range that is not UTF-8 (surrogateescape keeps it as U+DC80-U+DC9F), which
# a terminal that reads 8-bit controls would act on.
CONTROL_CHARACTER = r"[\x00-\x08\x0b-\x1f\x7f-\x9f\udc80-\udc9f]"
# The bidirectional controls (embeddings, overrides, isolates, the implicit marks, Arabic's letter mark):
# on a terminal that orders text both ways, an agent's U+202E reorders the rest of the line it is in,
# drover's own words after it too (hostile review 38)
BIDI_CONTROL = r"[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
_UNPRINTABLE = CONTROL_CHARACTER[:-1] + BIDI_CONTROL[1:]


def shortened(text: str, most: int) -> str:
    """`text` at most `most` characters long, a cut one ending in `…`: a headline, a quoted line, a
    label that must fit its place."""
    return text if len(text) <= most else text[:most - 1] + "…"


def one_line(text: str) -> str:
    """`text` kept as one line, its whitespace (every line break among it) folded to single spaces:
    a name or a reason drover prints inside a line of its own (a title, a kind, a park reason, an
    audit's `--by`, a model's name, a run's reason). Every write of those calls this, and so does
    `ledger import` (hostile reviews 24, 25, 27); an escape stays, for printable() to show as `?`."""
    return " ".join(text.split())


def is_one_line(text: str) -> bool:
    """Whether `text` is one line with no control character (no tab either): what a name that is
    compared, not only shown (a node, a run's agent, a `by`), must be, since folding it would make
    it another name (hostile reviews 25, 27)."""
    import re

    return not re.search(CONTROL_CHARACTER + r"|[\t\n\u2028\u2029]", text)


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal; False for one that cannot say (closed, or no file at all)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def on_screen(text: str, stream: TextIO | None = None) -> str:
    """`text` as printable() makes it when `stream` (stdout by default) is a terminal; as it is into a
    pipe or a file, where a prompt or a log keeps every byte."""
    return printable(text) if is_terminal(stream if stream is not None else sys.stdout) else text


def printable(text: str) -> str:
    """`text` an agent may have written, safe for the operator's terminal: each control character but
    tab and newline, and each bidirectional control, shown as `?`, so an escape it tried stays
    visible and does nothing, and nothing it wrote reorders the rest of the line."""
    import re

    return re.sub(_UNPRINTABLE, "?", text)


def whole_text(text: str) -> str:
    """`text` with each lone surrogate (JSON's "\\udc80") as U+FFFD: what the log, the screen, the
    ledger (a model's name, a failure's reason) and a prompt (an issue's text) can hold."""
    import re

    return re.sub("[\ud800-\udfff]", "\ufffd", text)


def escaped(text: str) -> str:
    """`text` with each character that is not printable (a line break, an escape, a bidi override, a
    lone surrogate) written as its Python escape (`\\n`, `\\x1b`, `\\u202e`): one line, every
    character of it visible, none acting on a terminal or starting a line of a prompt."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def shown_paths(paths: list[str], most: int = 5) -> str:
    """Paths for a one-line message: at most `most`, each on one line whatever its characters (a
    path is an agent's to name: a line break in it would write a line of its own), then "and K
    more". The project's one such list."""
    def one(path: str) -> str:
        return path if path.isprintable() else ascii(path)[1:-1]
    listed = ", ".join(one(path) for path in paths[:most])
    return listed + (f" and {len(paths) - most} more" if len(paths) > most else "")


def headline(text: str) -> str:
    """One line of text someone else wrote (an issue's title, a label, a register row's headline):
    one_line(), and escaped() for the rest."""
    return escaped(one_line(text))
