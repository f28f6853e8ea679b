"""Finding the project: the main checkout's root, its config and its local state folders."""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from dataclasses import dataclass
from functools import cached_property
from drover import git
from drover.config import CONFIG_FILE, Config, load_config
from drover.errors import ConfigError, DroverError, GitError, ItemError, UsageError

if TYPE_CHECKING:
    from drover.items.file import Item, Unreadable
    from drover.ledger.db import Ledger

STATE_DIR = ".drover"


@dataclass(frozen=True)
class Project:
    """The main checkout: items and the ledger live here, whichever worktree a command runs in."""

    root: Path
    config: Config

    @cached_property
    def user_name(self) -> str:
        """git's user.name here, read once per command (a drive asks it at every finish)."""
        return git.user_name(self.root)

    @cached_property
    def git_common_dir(self) -> Path:
        """The repository's common git folder (where `worktrees/` lives), asked of git once per
        command: each pooled worktree taken and each review checks a worktree's git against it."""
        from drover.git.cleaning import common_dir

        return common_dir(self.root)

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
            return Path(os.path.realpath(path)).relative_to(os.path.realpath(self.root)).as_posix()
        except ValueError:
            return str(path)

    def require_item(self, item_id: str) -> "Item":
        """The parsed item, or a one-line error naming file and line (exit 2)."""
        from drover.items import file as itemfile

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

    def needs_requirements_words(self, item_id: str, subject: str = "", lack: str = "") -> str:
        """`ID needs requirements: items/ID.md has an empty ... section` (or still holds the
        placeholder): why an item is in state `needs requirements`, in the words every command gives
        (`subject` instead of the file's path where the line names it already; `lack`: the item's
        `requirements_lack`, when the caller has parsed it)."""
        return f"{item_id} needs requirements: {self.requirements_lack_words(item_id, subject, lack)}"

    def requirements_lack_words(self, item_id: str, subject: str = "", lack: str = "") -> str:
        """`items/ID.md still holds the placeholder`: needs_requirements_words without its lead."""
        from drover.items import file as itemfile

        try:
            lack = lack or itemfile.read_item(self.item_path(item_id), self.config.prefix).requirements_lack
        except itemfile.Unreadable:
            lack = ""
        return f"{subject or self.item_rel(item_id + '.md')} {lack or 'asks nothing'}"

    def needs_requirements_note(self, item_id: str) -> str:
        """Why drive does not take an item whose Requirements section asks nothing, and the way on: the
        drive's header, its dry run and the morning's report say it in these words."""
        return f"needs requirements: {self.requirements_lack_words(item_id)}; write them there or run `drover draft {item_id}`"


def not_an_id(project: Project, word: str) -> UsageError:
    """The usage error for a word that is not an item id of this project."""
    from drover.items.file import NOT_AN_ID

    return UsageError(f"{word} {NOT_AN_ID} (ids look like {project.config.prefix}-1)")


def missing_item(project: Project, ledger: "Ledger | None", item_id: str) -> UsageError:
    """`no item D-13 (did you mean D-12?)`: the nearest id with a file or a ledger row."""
    from drover.items.ids import no_item

    known = ledger.item_rows().keys() if ledger is not None else ()
    return no_item(item_id, project.relpath(project.item_path(item_id)), project.items_dir,
                   project.config.prefix, known)


def itemfile_error(project: Project, path: Path, exc: "Unreadable", item_id: str, detail: str) -> ItemError:
    return ItemError(f"{item_id} {exc.wording}{detail}", path=project.relpath(path), line=exc.line)


def find_root(start: Path | None = None) -> Path:
    """The main checkout's root: the one git finds from $DROVER_REPO, else from `start` (its common
    directory's parent; a submodule's own top). $DROVER_REPO naming an item's worktree or a folder
    inside the checkout leads to the same main checkout, never to a second ledger. Outside a git
    repository, or in one git will not trust, a one-line error: drover never walks up to a
    drover.toml git does not lead to."""
    env = os.environ.get("DROVER_REPO")
    if env:
        named = Path(os.path.realpath(env))
        missing = (f"$DROVER_REPO is {env}, which is not inside a git repository: unset it to use the "
                   "repository you are in, or point it at a repository's checkout")
        if not named.is_dir():
            raise UsageError(missing.replace("not inside a git repository", "not a folder"))
        root = main_checkout(named)
        if root is None:
            raise no_repository(named, missing=missing)
        return root
    start = Path(os.path.realpath(start or Path.cwd()))
    root = main_checkout(start)
    if root is None:
        raise no_repository(start)
    return root


def main_checkout(start: Path) -> Path | None:
    """The main checkout of the repository git finds from `start`; None when git finds none."""
    common = git.rev_parse(start, "--path-format=absolute", "--git-common-dir")
    if common:
        # a worktree's common directory is the main checkout's .git; a submodule's lies in its
        # superproject's .git/modules, so its own top is the checkout
        if Path(common).name == ".git":
            return Path(os.path.realpath(Path(common).parent))
        toplevel = git.rev_parse(start, "--show-toplevel")
        if toplevel:
            return Path(os.path.realpath(toplevel))
    return None


def no_repository(start: Path, missing: str = "") -> DroverError:
    """Why git finds no repository at `start` (asked again, for its words: a refusal's path only):
    one owned by another user that safe.directory does not list, or none at all (said as `missing`
    when the caller has words of its own for that)."""
    try:
        git.git(["rev-parse", "--git-dir"], start)
    except GitError as exc:
        dubious = _DUBIOUS.search(str(exc))
        if dubious:
            return _foreign(Path(dubious.group(1)), Path(dubious.group(1)), None)
        if not str(exc).startswith("git rev-parse:"):
            return exc  # no git to ask
    else:
        return UsageError(f"{start}: git finds a repository without a checkout here (bare, or GIT_DIR "
                          f"without a work tree); drover works in a checkout")
    return UsageError(missing or f"{start} is not inside a git repository: run `git init` first, then `drover init`")


_DUBIOUS = re.compile(r"dubious ownership in repository at '([^']*)'")

# --- ownership: what git's safe.directory guards, drover guards too ---------------------------


def owned_by_me(uid: int) -> bool:
    """git's test of an owner (is_path_owned_by_current_uid): this user's; under uid 0, also the
    uid sudo recorded in SUDO_UID (so `sudo drover` works where `sudo git` does)."""
    me = os.geteuid()
    if uid == me:
        return True
    if me != 0:
        return False
    sudo = os.environ.get("SUDO_UID", "")
    return sudo.isdigit() and int(sudo) == uid


def trusted_stat(path: Path, root: Path) -> os.stat_result | None:
    """`path`'s stat (None when it is not there), refused when another user owns it and git's
    safe.directory does not list `root`: that user could make drover run their command or write
    their state as this one. One os.stat; git is asked only about a path that is not ours."""
    try:
        found = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=str(path)) from None
    if not owned_by_me(found.st_uid) and not safe_directory(root):
        raise _foreign(path, root, found.st_uid)
    return found


def _foreign(path: Path, root: Path, uid: int | None) -> ConfigError:
    owner = f" (uid {uid})" if uid is not None else ""
    return ConfigError(f"owned by another user{owner}, so not trusted: if you trust it, run "
                       f"`git config --global --add safe.directory {root}`", path=str(path))


def safe_directory(root: Path) -> bool:
    """Whether git's safe.directory, as git reads it (system, global and command-line scopes only:
    a repository cannot vouch for itself), lists `root`: `*`, the path itself, or (as git 2.46
    and later read it) a `path/*` above it. An empty value drops what came before. Asked of git
    once per root and environment: a project another user owns, trusted, has several paths."""
    real = os.path.realpath(root)
    key = (real, *sorted((name, value) for name, value in os.environ.items()
                         if name.startswith("GIT_") or name in ("HOME", "XDG_CONFIG_HOME")))
    if key not in _SAFE:
        _SAFE[key] = _listed(real, _safe_directories(root))
    return _SAFE[key]


_SAFE: dict[tuple[object, ...], bool] = {}


def _safe_directories(root: Path) -> list[tuple[str, str]]:
    """safe.directory's values with their scopes, in git's order, `~/` expanded by git."""
    try:
        said = git.git(["config", "--show-scope", "-z", "--type=path", "--get-all", "safe.directory"],
                       root, check=False)
    except GitError:
        return []
    fields = said.split("\0")
    return list(zip(fields[0::2], fields[1::2]))


def _listed(real: str, entries: list[tuple[str, str]]) -> bool:
    safe = False
    for scope, value in entries:
        if scope not in ("system", "global", "command"):
            continue
        if not value:
            safe = False
        elif value == "*":
            safe = True
        elif value.endswith("/*"):
            above = os.path.realpath(value[:-2] or "/")
            safe = safe or real.startswith(above.rstrip("/") + "/")
        else:
            safe = safe or real == os.path.realpath(value)
    return safe


def open_project(start: Path | None = None) -> Project:
    """The project around `start` (default: the working directory), its config loaded."""
    root = find_root(start)
    trusted_stat(root, root)
    config_path = root / CONFIG_FILE
    found = trusted_stat(config_path, root)
    if found is None:
        raise ConfigError(f"no {CONFIG_FILE} in {root}: run `drover init` first")
    if not stat.S_ISREG(found.st_mode):  # never read: a fifo would hold drover until a writer came
        raise ConfigError(f"{CONFIG_FILE} is no regular file (a fifo, a device or a folder) in {root}: "
                          "put drover's configuration back in its place (`drover init` writes one)")
    project = Project(root=root, config=load_config(config_path))
    items, top = Path(os.path.realpath(project.items_dir)), Path(os.path.realpath(root))
    if items != top and top not in items.parents:
        raise ConfigError(f"[project] items: {project.config.items!r} leads outside the repository "
                          f"(to {items})", path=CONFIG_FILE)
    check_state(project.root, project.config.items)
    return project


def check_state(root: Path, items: str) -> None:
    """Refuse an items folder, .drover/ or ledger another user owns (see trusted_stat)."""
    for path in (root / items, root / STATE_DIR, root / STATE_DIR / "ledger.db"):
        trusted_stat(path, root)
