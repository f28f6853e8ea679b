"""Checkouts: worktrees made and removed, the branch a checkout is switched to, what is uncommitted."""
from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from drover.errors import GitError, Refused
from drover.git.branches import branch_exists, current_branch, heads_of, local_ref, require_base
from drover.git.run import failure, git, rev_parse, run


def registered_worktrees(root: Path) -> dict[Path, str]:
    """Every registered worktree's path -> its branch ("" when detached)."""
    found: dict[Path, str] = {}
    path: Path | None = None
    for line in git(["worktree", "list", "--porcelain"], root).splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):]).resolve()
            found[path] = ""
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch "):].removeprefix("refs/heads/")
    return found


def ensure_worktree(root: Path, path: Path, branch: str, base: str, *,
                    lock: AbstractContextManager[Any] = nullcontext()) -> Path:
    """A worktree at `path` on `branch` (created from `base` if missing); an existing one is reused.

    `lock` is held while the worktree is looked up and registered, and released before its files
    are written: under `drive --jobs N` a prune must not meet another thread's `worktree add`
    halfway, but the checkout of a big tree need not keep the others waiting.
    """
    path = Path(path).resolve()
    with lock:
        registered = registered_worktrees(root)
        if path in registered:
            if registered[path] != branch:
                on = registered[path] or "a detached HEAD"
                raise GitError(f"worktree {path} is on {on}, not {branch}: remove it with `git worktree remove {path}`")
            if path.is_dir():
                return path
        # A worktree whose folder was deleted by hand is still registered; forget it, then recreate.
        # Only then is there anything to prune: skipping the call otherwise saves a git process per run.
        if any(not known.is_dir() for known in registered):
            git(["worktree", "prune"], root)
        if path.exists() and any(path.iterdir()):
            raise GitError(f"{path} exists and is not a git worktree: move it aside")
        path.parent.mkdir(parents=True, exist_ok=True)
        heads = heads_of(root, branch, base)
        if branch in heads:
            # the short name on purpose: an existing branch's name is checked out as that branch,
            # where `refs/heads/...` would give a detached HEAD
            git(["worktree", "add", "--quiet", "--no-checkout", str(path), branch], root)
        else:
            if base not in heads:
                require_base(root, base)
            git(["worktree", "add", "--quiet", "--no-checkout", "-b", branch, str(path), local_ref(base)], root)
    done = run(["reset", "--hard", "--quiet"], path)
    if done.returncode != 0:  # a half-written worktree is never handed out: the next call makes it again
        git(["worktree", "remove", "--force", str(path)], root, check=False)
        raise failure(["worktree", "add"], done)
    return path


def add_detached_worktree(root: Path, path: Path, commit: str) -> Path:
    """A new worktree at `path` on a detached HEAD at `commit`: a scratch checkout that no branch
    follows, so nothing done in it moves one (drover's checks, verify.py)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    git(["worktree", "add", "--quiet", "--detach", str(path), f"{commit}^{{commit}}"], root)
    return path


def remove_worktree(root: Path, path: Path, *, force: bool = False) -> None:
    """Remove the worktree at `path`; refuse while it holds uncommitted changes to tracked files.

    Untracked files go with it: they were never part of the branch that was reviewed.
    """
    path = Path(path).resolve()
    if not path.is_dir() or path not in registered_worktrees(root):
        git(["worktree", "prune"], root)
        return
    if not force:
        changed = [changed for changed, _ in _status_entries(path, untracked=False)]
        if changed:
            shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
            raise Refused(f"worktree {path} has uncommitted changes ({shown}): commit or discard them first")
    git(["worktree", "remove", "--force", str(path)], root)


def private_dir(worktree: Path) -> Path:
    """The worktree's own folder inside git's common dir: it goes when the worktree is removed."""
    return Path(git(["rev-parse", "--absolute-git-dir"], worktree).strip())


def own_git_dir(checkout: Path) -> Path | None:
    """The git dir of the checkout at `checkout`, as git names it; None when git cannot say."""
    found = rev_parse(Path(checkout), "--absolute-git-dir")
    return Path(found) if found else None


def _under(path: str, prefixes: list[str] | tuple[str, ...]) -> bool:
    for prefix in prefixes:
        prefix = prefix.strip("/")
        if prefix and (path == prefix or path.startswith(prefix + "/")):
            return True
    return False


def checkout_branch(root: Path, branch: str, base: str, *, ignore: list[str] | tuple[str, ...] = ()) -> None:
    """Switch the checkout at `root` to `branch`, creating it from `base`; refuse if it is dirty.

    Paths under an `ignore` prefix (drover's own item edits) do not count as dirty and travel
    with the switch. Already being on `branch` is fine however dirty: that is work in progress.
    """
    if current_branch(root) == branch:
        return
    dirty = [path for path in dirty_paths(root) if not _under(path, ignore)]
    if dirty:
        shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
        raise Refused(f"cannot switch {root} to {branch}: uncommitted changes ({shown}); commit or stash them first")
    if branch_exists(root, branch):
        git(["switch", "--quiet", branch], root)
    else:
        require_base(root, base)
        git(["switch", "--quiet", "--no-track", "-c", branch, local_ref(base)], root)


def _status_entries(cwd: Path, *, untracked: bool, ignored: bool = False,
                    pathspecs: tuple[str, ...] = ()) -> list[tuple[str, bool]]:
    """(path, whether git tracks nothing of it) for each path `git status` names; `ignored`: ignored
    files too; `pathspecs`: only under these paths, taken literally."""
    args = ["status", "--porcelain", "-z", "--untracked-files=" + ("all" if untracked else "no")]
    if ignored:
        args.append("--ignored=matching")
    if pathspecs:
        args = ["--literal-pathspecs", *args, "--", *pathspecs]
    out = git(args, cwd)
    paths: list[tuple[str, bool]] = []
    entries = out.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        paths.append((path, code == "??"))
        # A rename or copy is followed by the path it came from, which changed too.
        if "R" in code or "C" in code:
            if index < len(entries) and entries[index]:
                paths.append((entries[index], False))
            index += 1
    return paths


def dirty_paths(root: Path) -> list[str]:
    """Repo-relative paths with uncommitted changes, untracked files included (ignored ones not)."""
    return [path for path, _ in _status_entries(root, untracked=True)]


def dirty_entries(root: Path) -> list[tuple[str, bool]]:
    """dirty_paths, each with whether it is untracked."""
    return _status_entries(root, untracked=True)


def unclean_paths(cwd: Path, pathspecs: tuple[str, ...]) -> list[str]:
    """The paths under `pathspecs` (literal) where the checkout at `cwd` is not its HEAD's commit:
    changed, staged, untracked or ignored files, and tracked ones the index hides from status
    (assume-unchanged, a lowercase letter in `ls-files -v`; skip-worktree, `S`)."""
    if not pathspecs:
        return []
    paths = [path.rstrip("/") for path, _ in _status_entries(cwd, untracked=True, ignored=True, pathspecs=pathspecs)]
    for entry in git(["--literal-pathspecs", "ls-files", "-v", "-z", "--", *pathspecs], cwd).split("\0"):
        if len(entry) > 2 and (entry[0].islower() or entry[0] == "S"):
            paths.append(entry[2:])
    return paths
