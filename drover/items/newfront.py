"""The frontmatter `drover new` writes, as `yaml.safe_dump` writes it, without importing yaml.

`front(meta)` gives exactly what `yaml.safe_dump(meta, sort_keys=False, allow_unicode=True,
default_flow_style=None)` gives for new's keys (id, title, kind, deps, origin) when every value
is one this module is sure of: a str that PyYAML's emitter writes plain or in single quotes on
one line, a list of item ids, an int. For anything else (a value that reads as a number, a date
or null, a line break, a control character, a line long enough to be folded) it returns None
and the caller asks yaml. tests/test_fast_paths.py checks it against yaml.safe_dump.
"""
from __future__ import annotations

import re
from typing import Any

# PyYAML's emitter folds a scalar or a flow sequence at a space past this column (best_width):
# a line no longer than this is written whole.
WIDTH = 80

# The first characters of the values yaml's implicit resolvers may read as something other than
# a string (int, float, timestamp, merge, value, null, and the "yaml" tag of ! & *): left to yaml.
_RESOLVED_FIRST = frozenset("-+.0123456789<=~!&*")
# A value starting with a letter resolves to something else only when it is one of these words
# (YAML 1.1 booleans and null): yaml quotes them.
_WORDS = frozenset(
    "yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF null Null NULL".split()
)
# A value with one of these first is quoted (an indicator at the start of a plain scalar).
_INDICATOR_FIRST = frozenset("#,[]{}&*!|>'\"%@`")
_ID = re.compile(r"[A-Za-z][A-Za-z0-9]*-[1-9][0-9]*")


def scalar(value: str) -> str | None:
    """`value` as the emitter writes a str in a block mapping's value: plain, or single-quoted."""
    if not value or value[0] in _RESOLVED_FIRST or not _printable(value):
        return None
    if value[0] == " " or value[-1] == " ":
        return None  # a leading or trailing space: quoted (left to yaml)
    if value in _WORDS or value.startswith(("---", "...")) or _block_indicator(value):
        return "'" + value.replace("'", "''") + "'"
    return value


def _printable(value: str) -> bool:
    """Whether the emitter writes every character as it is (allow_unicode): printable ASCII and the
    printable non-ASCII ranges, less the BOM, NEL and the line and paragraph separators (breaks).
    (A loop rather than a character-class regex: compiling one over these ranges costs 4 ms.)"""
    if value.isascii():
        return value.isprintable()  # for ASCII: exactly \x20-\x7e
    for ch in value:
        if not ("\x20" <= ch <= "\x7e" or "\xa0" <= ch <= "\ud7ff" or "\ue000" <= ch <= "\ufffd"
                or "\U00010000" <= ch <= "\U0010fffe") or ch in "\ufeff\u2028\u2029":
            return False
    return True


def _block_indicator(value: str) -> bool:
    """analyze_scalar's block_indicators, for a value without tabs, line breaks or NUL."""
    first = value[0]
    if first in _INDICATOR_FIRST:
        return True
    if first in "?:-" and (len(value) == 1 or value[1] == " "):
        return True
    # ": " or a ":" at the end; " #"
    return ": " in value or value.endswith(":") or " #" in value


def front(meta: dict[str, Any]) -> str | None:
    """safe_dump's text for new's frontmatter, or None when yaml must write it."""
    lines = []
    for key, value in meta.items():
        if type(value) is str:
            written = scalar(value)
        elif type(value) is int:
            written = str(value)
        elif type(value) is list and all(type(one) is str and _ID.fullmatch(one) for one in value):
            written = "[" + ", ".join(value) + "]"
        else:
            return None
        if written is None:
            return None
        line = f"{key}: {written}"
        if len(line) > WIDTH:
            return None
        lines.append(line)
    return "\n".join(lines) + "\n"
