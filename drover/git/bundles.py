"""Bundles: how the repository travels to a worker and its commits come back (executors)."""
from __future__ import annotations

from pathlib import Path

from drover.git.branches import current_branch, local_ref
from drover.git.run import failure, git, run


def bundle_create(root: Path, path: Path, ref: str, *, exclude: str = "") -> bool:
    """Write a bundle of `ref` (minus what `exclude` reaches); False when it would be empty."""
    args = ["bundle", "create", "--quiet", str(path), ref] + ([f"^{exclude}"] if exclude else [])
    done = run(args, root)
    if done.returncode == 0:
        return True
    if "empty bundle" in done.stderr:
        return False
    raise failure(args, done)


def bundle_heads(root: Path, path: Path) -> list[tuple[str, str]]:
    """(sha, ref) for every ref a bundle carries; GitError when it is not a usable bundle here."""
    git(["bundle", "verify", "--quiet", str(path)], root)
    heads = []
    for line in git(["bundle", "list-heads", str(path)], root).splitlines():
        sha, _, ref = line.partition(" ")
        heads.append((sha, ref.strip()))
    return heads


def clone_bundle(path: Path, dest: Path, branch: str) -> None:
    """A fresh repository in `dest` from a bundle, with `branch` checked out."""
    git(["clone", "--quiet", "--branch", branch, str(path), str(dest)], dest.parent)


def fetch_bundle(cwd: Path, path: Path, ref: str, *, into: str = "") -> None:
    """Fetch `ref` from a bundle; `into` names the local ref it updates (fast-forward only)."""
    git(["fetch", "--quiet", str(path), f"{ref}:{into}" if into else ref], cwd)


def advance_branch(cwd: Path, branch: str, new: str, bundle: Path) -> None:
    """Move the local branch `branch`, and no other ref, forward to `new` (a commit `bundle`
    carries as that branch), or refuse (GitError) if it cannot.

    Where `cwd` has the branch checked out, its files move too (a fast-forward merge there);
    otherwise only the ref moves, fetched from the bundle (git refuses a branch checked out in
    another worktree, and anything but a fast-forward).
    """
    ref = local_ref(branch)
    if current_branch(cwd) == branch:
        git(["merge", "--ff-only", "--quiet", "--end-of-options", new], cwd)
    else:
        git(["fetch", "--quiet", str(bundle), f"{ref}:{ref}"], cwd)
