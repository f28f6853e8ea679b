"""Branches and refs: which exist, where they point, which one is checked out, and the base."""
from __future__ import annotations

import os
import re
import stat
from functools import cache
from pathlib import Path
from typing import NamedTuple

from drover.errors import GitError
from drover.git.run import failure, git, run, succeeds

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# Branch names that git's rules (`git check-ref-format --branch`) accept whatever git's version:
# components of letters, digits, `_` and `-`, dots only between them, joined by single slashes, no
# leading dash. What else git accepts (a `+`, a non-ASCII letter) is asked of git.
_PLAIN_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*(?:/[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)*")


def local_ref(name: str) -> str:
    """The full name of the local branch `name`.

    git reads a short name as `refs/<name>` or the tag `<name>` before the branch, so a ref an
    agent plants with a branch's name would stand in for it: every call that names a branch
    drover works with spells it out (docs/security.md).
    """
    return f"refs/heads/{name}"


def reads_as_ref(path: Path) -> bool:
    """`path` is a file git would take for a ref when it reads a short name (`$GIT_DIR/<name>`,
    before `refs/<name>`): an object id, in either case, or `ref:` and a ref's name, with or without
    the space (hostile review 14: git 2.39 reads all three, from a linked worktree too)."""
    from drover.git.files import read_small_file

    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            return False
        if not stat.S_ISREG(mode):
            return True  # a fifo or a device: git would wait on it, and so would a reader here
        head = read_small_file(path, 200).split("\n", 1)[0].strip()  # should a fifo take its place since
    except OSError:  # no such file
        return False
    return head.startswith("ref:") or (len(head) in (40, 64) and all(c in "0123456789abcdefABCDEF" for c in head))


def shadowing_refs(name: str) -> tuple[str, str]:
    """The refs git reads a short `name` as before the branch `refs/heads/<name>` (gitrevisions:
    `$GIT_DIR/<name>` first, then these two)."""
    return f"refs/{name}", f"refs/tags/{name}"


def current_branch(cwd: Path) -> str:
    """The branch checked out in `cwd`; "" when HEAD is detached."""
    # not --short: that says `heads/x` when a tag or other ref is also called x
    args = ["symbolic-ref", "--quiet", "HEAD"]
    done = run(args, cwd)
    if done.returncode == 1:
        return ""
    if done.returncode != 0:
        raise failure(args, done)
    ref = done.stdout.strip()
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ""


def branch_exists(root: Path, name: str) -> bool:
    """A local branch called `name` exists."""
    return bool(name) and succeeds(["show-ref", "--verify", "--quiet", local_ref(name)], root)


def require_base(root: Path, base: str) -> None:
    """GitError unless the base branch exists."""
    if not branch_exists(root, base):
        raise no_base(root, base)


def no_base(root: Path, base: str) -> GitError:
    """The failure of a step that needs the base branch `base` and finds none, in the words every
    command says it."""
    return GitError(f"base branch {base!r} does not exist in {root}: check [run] base in drover.toml")


def detect_base(root: Path) -> str:
    """The branch items should start from: origin/HEAD when the clone has a branch of that name, else
    the current branch, else main or master. (`git clone -b develop` of a project published from
    master has no `master`: a base it has no branch of was refused by `drover check`.)"""
    done = run(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], root)
    published = done.stdout.strip().removeprefix("refs/remotes/origin/") if done.returncode == 0 else ""
    if published and branch_exists(root, published):
        return published
    try:
        current = current_branch(root)
    except GitError:
        current = ""
    if current:
        return current
    for name in ("main", "master"):
        if branch_exists(root, name):
            return name
    return "main"


@cache  # git's answer depends on the name alone: a drive asks it for every run
def valid_branch_name(name: str) -> bool:
    """`name` is acceptable to git as a new branch name."""
    # `@{-1}` and friends are expansions, not names; a leading dash would read as an option; a NUL
    # (a title's `"\0"` in YAML, through `{{ Title }}`) no argument can hold, and git refuses control
    # characters: asked, the launch ended in a traceback (hostile review 37)
    if not name or name.startswith("-") or "@{" in name or name == "HEAD" or "\0" in name:
        return False
    if _PLAIN_BRANCH.fullmatch(name) and not any(part.endswith(".lock") for part in name.split("/")):
        return True  # `drover/d-1`: no git process for it, one a drive's item
    return run(["check-ref-format", "--branch", name], None).returncode == 0


def exact_heads(root: Path, *names: str) -> list[str] | None:
    """The head of each local branch named, in one git call; None when any is missing.

    show-ref --verify takes exactly the names given: rev-parse would read `refs/heads/x`, when
    there is no such branch, as `refs/refs/heads/x`.
    """
    done = run(["show-ref", "--verify", "--hash", *(local_ref(name) for name in names)], root)
    heads = done.stdout.split()
    if done.returncode != 0 or len(heads) != len(names) or not all(SHA.fullmatch(sha) for sha in heads):
        return None
    return heads


def head_of(root: Path, branch: str) -> str:
    """The full sha the local branch `branch` points at; "" when there is no such branch."""
    if not branch:
        return ""
    heads = exact_heads(root, branch)
    return heads[0] if heads else ""


def all_refs(root: Path, *patterns: str) -> dict[str, str]:
    """Every ref (under `patterns`, when given) by its full name -> the object it names, in one git call."""
    out = git(["for-each-ref", "--format=%(refname)%00%(objectname)", *patterns], root, check=False)
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, _, sha = line.partition("\0")
        if sha:
            found[name] = sha
    return found


def heads_of(root: Path, *names: str) -> dict[str, str]:
    """Those of the local branches `names` that exist -> the full sha of each head, in one git call."""
    # for-each-ref also takes `refs/heads/<name>/...` for a pattern: only the exact names count
    wanted = {local_ref(name): name for name in names if name}
    return {wanted[ref]: sha for ref, sha in all_refs(root, *wanted).items() if ref in wanted} if wanted else {}


class Refs(NamedTuple):
    """What one `git for-each-ref` said of some local branches at one moment: the head of each that
    exists, and the refs git would read one of their short names as before the branch itself
    (shadowing_refs). A snapshot for one step: read again after any code of an agent's or a
    branch's has run (docs/security.md)."""

    heads: dict[str, str]
    shadows: tuple[str, ...]


def branch_refs(root: Path, *names: str) -> Refs:
    """The heads of the local branches `names` and the refs that shadow their names, in one git call."""
    wanted = {local_ref(name): name for name in names if name}
    shadowing = {ref for name in names if name for ref in shadowing_refs(name)}
    found = all_refs(root, *wanted, *shadowing) if wanted else {}
    # for-each-ref also takes `refs/heads/<name>/...` for a pattern: only the exact names count
    return Refs({wanted[ref]: sha for ref, sha in found.items() if ref in wanted},
                tuple(ref for ref in found if ref in shadowing))


def heads_and_checked_out(root: Path, *names: str) -> tuple[dict[str, str], str | None]:
    """heads_of(root, *names), and which of `names` is the branch checked out at `root` (None when
    none of them is), in one git call."""
    wanted = {local_ref(name): name for name in names if name}
    if not wanted:
        return {}, None
    # %(HEAD) is `*` for the branch HEAD names (git 2.8): current_branch's answer, when it is one of these
    out = git(["for-each-ref", "--format=%(refname)%00%(objectname)%00%(HEAD)", *wanted], root, check=False)
    found: dict[str, str] = {}
    checked_out = None
    for line in out.splitlines():
        ref, _, rest = line.partition("\0")
        sha, _, mark = rest.partition("\0")
        if ref in wanted and sha:
            found[wanted[ref]] = sha
            if mark == "*":
                checked_out = wanted[ref]
    return found, checked_out


def branch_heads(root: Path) -> dict[str, str]:
    """Every local branch -> the full sha of its head, in one git call."""
    # full names cut here: refname:short says `heads/x` when a tag or other ref is also called x
    return {name.removeprefix("refs/heads/"): sha for name, sha in all_refs(root, "refs/heads/").items()}
