"""`drover --help` from the user's cache: importing click's whole command tree is most of its time.

The text click rendered last time is kept in $XDG_CACHE_HOME/drover/help.txt (default
~/.cache), keyed on the package's location, the stat of every module in it, the Python version
and the terminal width (capped at 80, as click caps it), so any change to the code that builds
the help, another install, or a resized terminal renders afresh. docs/decisions.md.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click


def _fingerprint(package: str) -> str:
    """Every module of the package by path, mtime and size, folded into one number (~1 ms)."""
    import zlib

    parts = [package, sys.version]
    for folder, dirs, files in os.walk(package):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                info = os.stat(os.path.join(folder, name))
                parts.append(f"{folder}/{name}:{info.st_mtime_ns}:{info.st_size}")
    return f"{zlib.crc32(chr(0).join(parts).encode()):08x}-{len(parts)}"


def _key_and_path(source: str) -> tuple[str, str]:
    try:
        width = int(os.environ.get("COLUMNS") or 0) or os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        width = 80
    key = f"drover-help {_fingerprint(os.path.dirname(os.path.abspath(source)))} {min(width, 80)}\n"
    cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "drover", "help.txt")
    return key, cache


def cached(source: str) -> str | None:
    """The cached help text when its key matches `source` (cli.py) and this terminal, else None."""
    try:
        key, cache = _key_and_path(source)
        with open(cache, encoding="utf-8") as handle:
            if handle.readline() == key:
                return handle.read()
    except (OSError, UnicodeDecodeError, ValueError):
        pass
    return None


def print_help(cli: "click.Group", source: str) -> bool:
    """Render the help with click, print it, and keep it for next time; False: let click do it."""
    try:
        with cli.context_class(cli, info_name="drover", **cli.context_settings) as ctx:
            text = cli.get_help(ctx) + "\n"
    except Exception:  # rendering for the cache must never break help: click will say it
        return False
    sys.stdout.write(text)
    try:
        key, cache = _key_and_path(source)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        partial = f"{cache}.{os.getpid()}"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(key + text)
        os.replace(partial, cache)
    except OSError:
        pass
    return True
