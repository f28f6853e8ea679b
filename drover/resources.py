"""The shipped files: builtin_templates/ in the source tree, drover/builtin_templates/ in a wheel."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def builtin_dir() -> Path:
    """The folder of shipped templates and data files, wherever this install keeps it."""
    for candidate in (_HERE / "builtin_templates", _HERE.parent / "builtin_templates"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("drover's builtin_templates folder is missing from this install")


def read_resource(name: str) -> str:
    return (builtin_dir() / name).read_text(encoding="utf-8")
