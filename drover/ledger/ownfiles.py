"""drover's own files among the paths a branch changes.

Two kinds: its state (`.drover/`: the ledger, run logs, parked findings, worktrees), which no
branch may bring, ever; and what steers it (drover.toml, the `[prompts]` override files, the
items folder), which a branch brings only when the operator says so (`finish
--allow-drover-files`). Names compare without case: on a case-insensitive file system
`.Drover/ledger.db` is the ledger. docs/security.md has the promises.
"""
from __future__ import annotations

import os
import posixpath
from typing import TYPE_CHECKING

from drover.config import CONFIG_FILE
from drover.ledger.project import STATE_DIR

if TYPE_CHECKING:
    from drover.ledger.project import Project


def _normal(path: str) -> str:
    """A repository-relative path as a folded key: `./a//b/` and `A/B` both read `a/b`."""
    return posixpath.normpath(path.strip().replace("\\", "/")).strip("/").casefold()


def _within(path: str, folder: str) -> bool:
    key, top = _normal(path), _normal(folder)
    return bool(top) and top != "." and (key == top or key.startswith(top + "/"))


def state_paths(paths: list[str]) -> list[str]:
    """Those of `paths` that are drover's state: under .drover/ (or .drover itself)."""
    return [path for path in paths if _within(path, STATE_DIR)]


def steering_paths(project: "Project", paths: list[str]) -> list[str]:
    """Those of `paths` that steer drover: drover.toml, a configured prompt override file, the
    items folder or anything in it."""
    files = {_normal(CONFIG_FILE)} | _prompt_keys(project)
    items = project.config.items
    return [path for path in paths if _normal(path) in files or _within(path, items)
            or any(_within(file, path) for file in files)]


def item_paths(project: "Project", paths: list[str]) -> list[str]:
    """Those of `paths` in the items folder."""
    return [path for path in paths if _within(path, project.config.items)]


def _prompt_keys(project: "Project") -> set[str]:
    """Each [prompts] file as repository paths: as written, and as the checkout resolves it (an
    absolute path inside the repository, a path through a linked folder: the file rendered is
    the one the link leads to)."""
    from pathlib import Path

    root = Path(project.root)
    keys = set()
    for written in project.config.prompts.values():
        if not written:
            continue
        full = Path(written) if Path(written).is_absolute() else root / written
        for candidate, top in ((full, root), (Path(os.path.realpath(full)), Path(os.path.realpath(root)))):
            try:
                keys.add(_normal(candidate.relative_to(top).as_posix()))
            except ValueError:
                continue
    return keys
