"""The error hierarchy: the CLI turns each into one line and a chosen exit code."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, NamedTuple, TextIO


class DroverError(Exception):
    """A failure the user can act on. Printed as one line, never a traceback."""

    exit_code = 2

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
        where = ""
        if self.path:
            where = f"{self.path}:{self.line}: " if self.line else f"{self.path}: "
        return f"{where}{self.message}"


class UsageError(DroverError):
    """The command line asked for something that cannot be done as asked (exit 2)."""


class ConfigError(DroverError):
    """drover.toml is missing, unreadable, or holds an unknown key or a wrong type (exit 2).

    One reading reports every problem it finds: `lines` holds them, one each, in file order.
    """

    @classmethod
    def several(cls, lines: list[str]) -> "ConfigError":
        error = cls(lines[0])
        error.extra = tuple(lines[1:])
        return error

    extra: tuple[str, ...] = ()

    @property
    def lines(self) -> tuple[str, ...]:
        return (str(self), *self.extra)


class TemplateError(DroverError):
    """A template does not parse, names an unknown field or block, or renders empty (exit 2)."""


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


class Finding(NamedTuple):
    """One line `drover check` prints; `error` findings make it exit 1, the rest are warnings.
    `item`: the item it is about, when it is about one item's file alone."""

    message: str
    error: bool = True
    item: str = ""


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
    tab and newline shown as `?`, so an escape it tried stays visible and does nothing."""
    import re

    return re.sub(CONTROL_CHARACTER, "?", text)
