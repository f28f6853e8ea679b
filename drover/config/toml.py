"""drover.toml's text -> data, through a cache of the parsed TOML as JSON."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any


# The parsed TOML of each project's drover.toml (and of the shipped destinations.toml), kept in
# the user's cache folder as JSON beside the exact text it came from: importing tomllib is a few
# ms of every command, reading JSON is not. The cache is used only when the text is the same to
# the character (and the Python the same), so it cannot be stale; TOML that JSON cannot hold
# (dates, nan) is never kept. docs/decisions.md.


def parse_toml(path: Path, text: str, kind: str = "config") -> dict[str, Any]:
    """`text` (the file at `path`) parsed as TOML, through the cache; raises tomllib.TOMLDecodeError."""
    data = _cached_toml(path, text, kind)
    if data is None:
        import tomllib

        data = tomllib.loads(text)
        _keep_toml(path, text, data, kind)
    return data


def toml_cache(path: Path, kind: str = "config") -> str:
    import os
    import zlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    where = zlib.crc32(os.path.abspath(path).encode("utf-8", "surrogateescape"))
    return os.path.join(base, "drover", f"{kind}-{where:08x}.json")


def _cached_toml(path: Path, text: str, kind: str) -> dict[str, Any] | None:
    import json
    import sys

    try:
        with open(toml_cache(path, kind), encoding="utf-8") as handle:
            kept = json.load(handle)
        if kept["text"] == text and kept["python"] == sys.version and isinstance(kept["data"], dict):
            return kept["data"]
    except (OSError, ValueError, KeyError, TypeError):
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
