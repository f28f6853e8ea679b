"""How a drover.toml key is declared: `key(...)` gives a field of a table's NamedTuple its default and
the key's table, meaning, allowed values and checks (KeyInfo), and `@keyed` reads them back; the checks
and conversions keys share."""
from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator
from typing import Any, NamedTuple, TypeVar

from drover.vocabulary import PREFIX_PATTERN

_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")

T = TypeVar("T")


class KeyInfo(NamedTuple):
    """One key of drover.toml, as its field declares it."""

    table: str
    name: str
    type: type
    default: Any
    meaning: str
    # the allowed values; for a preset or a tracker backend the registry's live keys, so that an
    # entry added to presets.PRESETS or trackers.BACKENDS is accepted (and documented) with nothing else
    choices: Collection[str] = ()
    # returns "" when the value is fine, else what was expected ("an integer of at least 1")
    check: Callable[[Any], str] | None = None
    # turns an accepted other spelling into the declared type before the checks (e.g. 45 -> "45s")
    convert: Callable[[Any], Any] | None = None


class Holds(NamedTuple):
    """A field of Config that is a whole table: its keys are `table`'s, declared there."""

    table: type
    default: Any


class Live:
    """A registry's names, read when asked: `[agent] preset` and `[tracker] backend` accept what
    the registry holds, and a command that never checks them never imports it. A Collection by
    its methods (a plain class: an ABC subclass costs more to define)."""

    def __init__(self, names: Callable[[], Collection[str]]) -> None:
        self._names = names

    def __contains__(self, word: object) -> bool:
        return word in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


# a table's NamedTuple -> its keys in field order, nested tables expanded where they sit (see keyed)
DECLARED: dict[type, list[KeyInfo]] = {}


def key(table: str, default: Any, meaning: str, *, choices: Collection[str] = (),
        check: Callable[[Any], str] | None = None, convert: Callable[[Any], Any] | None = None) -> Any:
    """A field's default that is also a drover.toml key: the one place its facts are written.
    The class is decorated with `@keyed`, which puts the plain default in its place.

    A dict default is a table of strings; what the user writes is laid over it. A tuple default
    is a list of strings: TOML's array arrives as a list and is kept as a tuple (Config is read-only).
    """
    if isinstance(default, tuple) and convert is None:
        convert = as_tuple
    return KeyInfo(table, "", type(default), default, meaning, choices, check, convert)


def holds(table: type, default: Any = None) -> Any:
    """A field's default for a whole table (`table()` unless given): Config holds [agent] so."""
    return Holds(table, table() if default is None else default)


def keyed(cls: type[T]) -> type[T]:
    """Finish a NamedTuple whose defaults `key(...)` and `holds(...)` wrote: each default becomes the
    plain value (a dict copied once: the tables are read-only, never mutated), and DECLARED[cls]
    lists the keys. Setting `__new__.__defaults__` is how collections.namedtuple's defaults change."""
    table: Any = cls
    defaults: dict[str, Any] = {}
    found: list[KeyInfo] = []
    for name, value in table._field_defaults.items():
        if isinstance(value, KeyInfo):
            found.append(value._replace(name=name))
            value = dict(value.default) if isinstance(value.default, dict) else value.default
        elif isinstance(value, Holds):
            found += DECLARED[value.table]
            value = value.default
        defaults[name] = value
    table.__new__.__defaults__ = tuple(defaults.values())
    table._field_defaults = defaults
    DECLARED[cls] = found
    return cls


def parse_duration(text: str) -> int:
    """'2h', '90m', '1h30m', '45s' or a bare number of seconds -> seconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    match = _DURATION.match(text)
    if not text or not match:
        raise ValueError(text)
    hours, minutes, seconds = (int(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def check_duration(value: str) -> str:
    try:
        parse_duration(value)
    except ValueError:
        return "a duration such as 2h, 90m or 45s"
    return ""


def check_optional_duration(value: str) -> str:
    """"" (unset: another key's value stands) or a duration."""
    return check_duration(value) if value.strip() else ""


def check_prefix(value: str) -> str:
    return "" if re.fullmatch(PREFIX_PATTERN, value) else "letters and digits, starting with a letter"


def check_repo(value: str) -> str:
    """[tracker] repo: "" (gh infers it) or owner/name, the one form every use of it takes: gh's
    `--repo`, the REST path `repos/<repo>/...` and the search's `repo:` qualifier (a URL suits the first alone)."""
    parts = value.split("/")
    if not value or (re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", value) and not {".", ".."} & set(parts)):
        return ""
    return f"owner/name such as acme/widgets (or \"\": gh infers it), not {value!r}"


def check_label(value: str) -> str:
    """[tracker] follow_up_label: one label. An empty one made `gh issue list --label ""` list every
    open issue as a follow-up, and gh splits a comma's two sides into two labels."""
    if value.strip() and "," not in value:
        return ""
    return f"one label, not {value!r}"


def as_seconds(value: Any) -> Any:
    """`timeout = 45` is seconds, as the documentation says."""
    return f"{value}s" if isinstance(value, int) and not isinstance(value, bool) else value


def check_items_folder(value: str) -> str:
    """The items folder lies inside the repository, outside drover's and git's own state."""
    from pathlib import PurePosixPath

    parts = PurePosixPath(value.strip()).parts if value.strip() else ()
    if not parts or parts == (".",) or PurePosixPath(value).is_absolute() or ".." in parts:
        return f"a folder inside the repository, not {value!r}"
    if parts[0] in (".drover", ".git"):
        return f"a folder outside {parts[0]}/ (drover's and git's state), not {value!r}"
    return ""


def as_tuple(value: Any) -> Any:
    """A TOML array -> a tuple; anything else is left for the type check to refuse."""
    return tuple(value) if isinstance(value, list) else value


def at_least_zero(value: int) -> str:
    return "" if value >= 0 else "an integer of at least 0"


def check_relative_paths(value: tuple[str, ...]) -> str:
    """Each entry a path inside the worktree: not empty, not absolute, no `..`, nothing of git's."""
    from pathlib import PurePosixPath

    for entry in value:
        parts = PurePosixPath(entry.strip()).parts if entry.strip() else ()
        if not parts or PurePosixPath(entry).is_absolute() or ".." in parts or parts == (".",):
            return f"paths inside the worktree, not {entry!r}"
        if ".git" in parts:
            return f"paths outside git's own files, not {entry!r}"
    return ""


def at_least_one(value: int) -> str:
    return "" if value >= 1 else "an integer of at least 1"


def table_of_strings(value: dict[str, Any]) -> str:
    """Each entry's value a string; the first that is not is named (SPEC 3: the error names the key)."""
    for name, word in value.items():
        if not isinstance(word, str):
            return f"a string for {name!r}, not {word!r}"
    return ""
