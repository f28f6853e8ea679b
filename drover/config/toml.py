"""drover.toml's text -> data, through a cache of the parsed TOML as JSON."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable


# The parsed TOML of each project's drover.toml (and of the shipped destinations.toml), kept in
# the user's cache folder as JSON beside the exact text it came from: importing tomllib is a few
# ms of every command, reading JSON is not. The cache is used only when the text is the same to
# the character (and the Python the same), so it cannot be stale; TOML that JSON cannot hold
# (dates, nan) is never kept. docs/decisions.md.


def parse_toml(path: Path, text: str, kind: str = "config") -> dict[str, Any]:
    """`text` (the file at `path`) parsed as TOML, through the cache; ValueError when it is not TOML
    (tomllib.TOMLDecodeError, or nesting too deep for tomllib, its line named)."""
    data = _cached_toml(path, text, kind)
    if data is None:
        import tomllib

        try:
            data = tomllib.loads(text)
        except RecursionError:  # tomllib recurses once a level: a few hundred arrays deep end it
            raise ValueError(f"arrays or inline tables nested too deeply to read (at line {_deep_line(text)})") from None
        _keep_toml(path, text, data, kind)
    return data


def _deep_line(text: str) -> int:
    """The line where brackets and braces first nest 100 deep (a string's own count too: for the
    message only), else the last line."""
    depth = 0
    lines = text.splitlines() or [""]
    for number, line in enumerate(lines, 1):
        for char in line:
            depth += (char in "[{") - (char in "]}")
            if depth > 100:
                return number
    return len(lines)


def toml_cache(path: Path, kind: str = "config") -> str:
    import os
    import zlib

    from drover.vocabulary import cache_dir

    where = zlib.crc32(os.path.abspath(path).encode("utf-8", "surrogateescape"))
    return os.path.join(cache_dir(), f"{kind}-{where:08x}.json")


def _cached_toml(path: Path, text: str, kind: str) -> dict[str, Any] | None:
    import json
    import sys

    try:
        with open(toml_cache(path, kind), encoding="utf-8") as handle:
            kept = json.load(handle)
        if kept["text"] == text and kept["python"] == sys.version and isinstance(kept["data"], dict):
            return kept["data"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):  # RecursionError: nested past the parser's depth
        pass
    return None


def _keep_toml(path: Path, text: str, data: dict[str, Any], kind: str) -> None:
    import json
    import os
    import sys

    try:
        dumped = json.dumps({"text": text, "python": sys.version, "data": data}, ensure_ascii=False)
        if json.loads(dumped)["data"] != data:
            return  # a value JSON would change (nan): parse it each time
        cache = toml_cache(path, kind)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        partial = f"{cache}.{os.getpid()}"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(dumped)
        os.replace(partial, cache)
    except (OSError, TypeError, ValueError):
        pass  # dates and times are not JSON; an unwritable cache costs only the speed


def line_of(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


def readable(message: str) -> str:
    """tomllib's message without its line (the caller names it), a key it shows as a Python tuple
    (`('run',)`) shown as TOML writes it (`[run]`)."""
    message = message.split(" (at line")[0]
    return re.sub(r"\(((?:'[^']*',? ?)+)\)",
                  lambda found: "[" + ".".join(re.findall(r"'([^']*)'", found.group(1))) + "]", message)


def overwritten(message: str, text: str, line: int | None) -> str:
    """tomllib's `Cannot overwrite a value` at `line`, in words naming the key written twice there
    (and where it was first): the message alone named neither. Any other message as readable() has it."""
    said = readable(message)
    if not said.startswith("Cannot overwrite a value") or not line:
        return said
    lines = text.splitlines()
    if line > len(lines):
        return said
    table = ""
    for before in lines[:line - 1]:
        header = _HEADER.match(before)
        if header:
            table = _dotted(header.group(1))
        elif before.lstrip().startswith("[["):
            table = "\0"
    header, written = _HEADER.match(lines[line - 1]), _KEY.match(lines[line - 1])
    if table == "\0" or not (header or written):
        return said
    name = _dotted((header or written).group(1))  # type: ignore[union-attr]
    *within, last = (name if header else ".".join(filter(None, [table, name]))).split(".")
    first = key_lines(text).get((".".join(within), last))
    if first is None or first >= line:
        return said
    where = f" in [{'.'.join(within)}]" if within else ""
    if header:
        return f"[{name}] is a table, but `{last}`{where} is set already (line {first}): rename one"
    return f"`{last}`{where} is set twice (first on line {first}): keep one"


_HEADER = re.compile(r"""^\s*\[\s*([^\[\]#]+?)\s*\]\s*(?:#.*)?$""")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'))*)\s*=""")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"([^"\n]*)"|'([^'\n]*)'""")


def key_lines(text: str) -> dict[tuple[str, str], int]:
    """Where each table and key of TOML `text` is written: (table, key) -> its first line, a table's
    header under (table, ""), a key above every table under ("", key). Dotted names are joined by
    "." (`[agent . review]` is "agent.review"); a value's own lines (a multi-line string or array)
    may be read as keys, and only the first line of a name counts, so a wrong guess is never preferred."""
    found: dict[tuple[str, str], int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = _dotted(header.group(1))
            found.setdefault((table, ""), number)
            continue
        if line.lstrip().startswith("[["):
            table = "\0"  # an array of tables: drover reads none, and its keys are not a table's
            continue
        written = _KEY.match(line)
        if written:
            *within, name = _dotted(written.group(1)).split(".")
            found.setdefault((".".join(filter(None, [table, *within])), name), number)
    return found


def _dotted(name: str) -> str:
    return ".".join(quoted[0] or quoted[1] or part.group(0)
                    for part in _PART.finditer(name) for quoted in [part.groups("")])


def locate(text: str) -> Callable[[str, str], int | None]:
    """A lookup of the line where `text` writes a table's key (`key` "": the table itself), read the
    first time it is asked. A key not written on a line of its own (inside an inline table) is
    placed at its table; a table written as a key (`review = {...}` under `[agent]`), at that key;
    a key written as a table (`[project.sub]`), at that table's header."""
    lines: dict[tuple[str, str], int] | None = None

    def line(table: str, key: str) -> int | None:
        nonlocal lines
        if lines is None:
            lines = key_lines(text)
        parent, _, last = table.rpartition(".")
        below = (f"{table}.{key}" if table and key else key, "")  # the key written as a table's header
        for place in ((table, key), below, (table, ""), (parent, last), (parent, "")):
            if place in lines and place != ("", ""):
                return lines[place]
        return None

    return line
