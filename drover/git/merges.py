"""Merges: an item's branch into base (finish), base into an item's branch, and a merge's conflicts."""
from __future__ import annotations

from pathlib import Path

from drover.errors import GitError, Refused
from drover.git.branches import current_branch, head_of, local_ref, require_base
from drover.git.run import failure, git, run, succeeds
from drover.git.worktrees import dirty_paths


class MergeConflict(Refused):
    """finish met a conflict with base: `drive` hands it back to the loop, `finish` alone refuses."""


def merge(root: Path, branch: str, base: str, message: str, *, commit: str = "") -> str:
    """Merge `branch` into `base` in the checkout at `root` (--no-ff, never a push); return the merge sha.

    What merges is the commit the branch points at, by its id (`commit`, when given: Refused
    unless the branch is at exactly that commit). The checkout must be on `base`, or clean
    enough to switch to it. On a conflict the merge is aborted, the checkout is put back as it
    was, and Refused names the conflicting files.
    """
    head = head_of(root, branch)
    if not head:
        raise GitError(f"branch {branch} does not exist")
    if commit and head != commit:
        raise Refused(f"{branch} is at {head[:7]}, not at {commit[:7]}: nothing was merged")
    require_base(root, base)
    original = current_branch(root)
    original_head = git(["rev-parse", "HEAD"], root).strip()
    if original != base:
        dirty = dirty_paths(root)
        if dirty:
            shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
            raise Refused(f"{root} is on {original or 'a detached HEAD'} with uncommitted changes ({shown}): "
                          f"switch it to {base} before merging")
        git(["switch", "--quiet", base], root)  # switch takes only a branch: no other ref stands in
    args = ["merge", "--no-ff", "--no-edit", "-m", message, "--end-of-options", head]
    done = run(args, root)
    if done.returncode == 0:
        return git(["rev-parse", "HEAD"], root).strip()
    conflicted = _conflicted(root)
    if succeeds(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"], root):
        git(["merge", "--abort"], root)
    if original != base:
        # Back where the operator left it: their branch, or the very commit if HEAD was detached.
        git(["switch", "--quiet", original] if original else ["switch", "--quiet", "--detach", original_head], root)
    if conflicted:
        raise MergeConflict(f"merging {branch} into {base} conflicts in {', '.join(conflicted)}: "
                            f"the merge was aborted and {root} is as it was; resolve on {branch} and finish again")
    raise failure(args, done)


def merge_base_into(worktree: Path, base: str, *, commit: str = "") -> list[str]:
    """Merge the branch `base` (or, given, its `commit` by id) into what `worktree` has checked
    out: [] when it merged, else the conflicting files, the merge left in progress for an agent
    to complete."""
    args = ["merge", "--no-ff", "--no-edit", "-m", f"Merge {base} into the item branch",
            "--end-of-options", commit or local_ref(base)]
    done = run(args, worktree)
    if done.returncode == 0:
        return []
    conflicted = unmerged_files(worktree)
    if not conflicted:
        raise failure(args, done)
    return conflicted


def unmerged_files(checkout: Path) -> list[str]:
    """The conflicting files of a merge in progress in `checkout`; [] when none is."""
    if not Path(checkout).is_dir() or not succeeds(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"], checkout):
        return []
    return _conflicted(checkout)


def _conflicted(checkout: Path) -> list[str]:
    out = git(["diff", "--name-only", "--diff-filter=U"], checkout, check=False)
    return [line for line in out.splitlines() if line]
