"""Finding the project: the main checkout's root, its config and its local state folders."""
from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from .records import dataclass
from . import git
from .config import CONFIG_FILE, Config, load_config
from .errors import ConfigError, ItemError, UsageError

if TYPE_CHECKING:
    from .items import Item, Unreadable
    from .ledger import Ledger

STATE_DIR = ".drover"


@dataclass(frozen=True)
class Project:
    """The main checkout: items and the ledger live here, whichever worktree a command runs in."""

    root: Path
    config: Config

    @property
    def items_dir(self) -> Path:
        return self.root / self.config.items

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def ledger_path(self) -> Path:
        return self.state_dir / "ledger.db"

    @property
    def runs_dir(self) -> Path:
        return self.state_dir / "runs"

    @property
    def worktrees_dir(self) -> Path:
        return self.state_dir / "worktrees"

    @property
    def parked_dir(self) -> Path:
        return self.state_dir / "parked"

    def item_path(self, item_id: str) -> Path:
        return self.items_dir / f"{item_id}.md"

    def item_rel(self, name: str) -> str:
        """An item file's path as the user sees it, without touching the disk (a hot path)."""
        base = self.__dict__.get("_items_rel")
        if base is None:
            base = PurePosixPath(self.config.items).as_posix().rstrip("/") + "/"
            object.__setattr__(self, "_items_rel", base)  # frozen: cache beside the fields
        return base + name

    def relpath(self, path: Path | str) -> str:
        """A path as the user sees it: relative to the repository root where it lies inside."""
        path = Path(path)
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path)

    def require_item(self, item_id: str) -> "Item":
        """The parsed item, or a one-line error naming file and line (exit 2)."""
        from . import items as itemfile

        if itemfile.id_number(item_id, self.config.prefix) is None:
            raise not_an_id(self, item_id)
        path = self.item_path(item_id)
        try:
            return itemfile.read_item(path, self.config.prefix)
        except itemfile.Unreadable as exc:
            if exc.wording == itemfile.MISSING:
                raise missing_item(self, None, item_id) from None
            detail = f" ({exc.detail})" if exc.detail else ""
            raise itemfile_error(self, path, exc, item_id, detail) from None


def not_an_id(project: Project, word: str) -> UsageError:
    """The usage error for a word that is not an item id of this project."""
    from .items import NOT_AN_ID

    return UsageError(f"{word} {NOT_AN_ID} (ids look like {project.config.prefix}-1)")


def missing_item(project: Project, ledger: "Ledger | None", item_id: str) -> UsageError:
    """`no item D-13 (did you mean D-12?)`: the nearest id with a file or a ledger row."""
    from .ids import no_item

    known = ledger.item_rows().keys() if ledger is not None else ()
    return no_item(item_id, project.relpath(project.item_path(item_id)), project.items_dir,
                   project.config.prefix, known)


def itemfile_error(project: Project, path: Path, exc: "Unreadable", item_id: str, detail: str) -> ItemError:
    return ItemError(f"{item_id} {exc.wording}{detail}", path=project.relpath(path), line=exc.line)


def find_root(start: Path | None = None) -> Path:
    """The main checkout's root: $DROVER_REPO, else git's common directory (main_checkout's when
    it can say it without git), else a drover.toml above."""
    env = os.environ.get("DROVER_REPO")
    if env:
        return Path(env).resolve()
    start = (start or Path.cwd()).resolve()
    found = main_checkout(str(start))
    if found is not None:
        return Path(found)
    common = git.rev_parse(start, "--path-format=absolute", "--git-common-dir")
    if common:
        common_path = Path(common)
        if common_path.name == ".git":
            return common_path.parent.resolve()
        toplevel = git.rev_parse(start, "--show-toplevel")
        if toplevel:
            return Path(toplevel).resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
    return start


# What changes where git looks for a repository, or which one it takes: main_checkout leaves the
# answer to git when any is set.
GIT_DISCOVERY = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_CEILING_DIRECTORIES",
                 "GIT_DISCOVERY_ACROSS_FILESYSTEM")


def main_checkout(start: str) -> str | None:
    """The folder at or above `start` (absolute, resolved) whose `.git` is the repository's own
    folder, found without running git (about 2 ms of every command) when git could answer no
    other way; None: ask git.

    git takes the nearest folder with a `.git`. When that `.git` is a folder holding a repository
    (its HEAD, objects and refs), owned by this user (so git's safe.directory check passes), and
    no variable in GIT_DISCOVERY is set, git's common directory is that `.git` and the main
    checkout is its parent: the answer here. Anything else is git's to say: a `.git` file (a
    worktree's or a submodule's), a `.git` that holds no repository, a folder on another file
    system than `start` before any `.git` (git stops there), `start` inside a `.git` folder."""
    if any(os.environ.get(name) for name in GIT_DISCOVERY) or "/.git/" in start + "/":
        return None
    folder = start
    try:
        device = os.stat(folder).st_dev
        while True:
            dot = os.path.join(folder, ".git")
            try:
                found = os.lstat(dot)
            except FileNotFoundError:
                parent = os.path.dirname(folder)
                if parent == folder or os.stat(parent).st_dev != device:
                    return None
                folder = parent
                continue
            me = os.geteuid()
            if not stat.S_ISDIR(found.st_mode) or found.st_uid != me or os.stat(folder).st_uid != me:
                return None
            if not (os.path.isfile(os.path.join(dot, "HEAD")) and os.path.isdir(os.path.join(dot, "objects"))
                    and os.path.isdir(os.path.join(dot, "refs"))):
                return None
            return folder
    except OSError:
        return None


def open_project(start: Path | None = None) -> Project:
    """The project around `start` (default: the working directory), its config loaded."""
    root = find_root(start)
    config_path = root / CONFIG_FILE
    if not config_path.is_file():
        raise ConfigError(f"no {CONFIG_FILE} in {root}: run `drover init` first")
    project = Project(root=root, config=load_config(config_path))
    items = project.items_dir.resolve()
    if items != root.resolve() and root.resolve() not in items.parents:
        raise ConfigError(f"[project] items: {project.config.items!r} leads outside the repository "
                          f"(to {items})", path=CONFIG_FILE)
    return project
