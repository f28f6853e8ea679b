"""Branches, worktrees, merges, recent commits and the diff scope, through the git CLI."""
from __future__ import annotations

import os
import re
from pathlib import Path

from typing import TYPE_CHECKING, Callable, TypeVar

from drover.errors import GitError, Refused

T = TypeVar("T")

if TYPE_CHECKING:
    import subprocess

    from drover.prompts.fields import Recent

# Config that would change what drover parses (quoted paths, missing a/ b/ prefixes, colour,
# external diff drivers) is pinned per call, whatever the user's git config says.
_PINNED = ("-c", "core.quotePath=false", "-c", "color.ui=false")
_DEV_NULL = "/dev/null"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_DIFF_FLAGS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv", "--src-prefix=a/", "--dst-prefix=b/")


def _one_line(text: str) -> str:
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _env() -> dict[str, str]:
    # No editor and no prompts: drover runs git unattended.
    return dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no")


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    import subprocess

    env = _env()
    try:
        return subprocess.run(
            ["git", *_PINNED, *args], cwd=cwd, env=env, capture_output=True,
            text=True, encoding="utf-8", errors="replace",
        )
    except FileNotFoundError as exc:
        missing = "git is not installed" if exc.filename in ("git", None) else f"no such directory: {cwd}"
        raise GitError(missing) from None
    except NotADirectoryError:
        raise GitError(f"not a directory: {cwd}") from None


def git(args: list[str], cwd: Path, *, check: bool = True) -> str:
    """Run git with `args` in `cwd` and return its stdout; a failure raises GitError with git's words."""
    done = _run(args, cwd)
    if check and done.returncode != 0:
        said = _one_line(done.stderr) or _one_line(done.stdout) or f"exit status {done.returncode}"
        raise GitError(f"git {args[0]}: {said}")
    return done.stdout


def _ok(args: list[str], cwd: Path) -> bool:
    return _run(args, cwd).returncode == 0


def current_branch(cwd: Path) -> str:
    """The branch checked out in `cwd`; "" when HEAD is detached."""
    # not --short: that says `heads/x` when a tag or other ref is also called x
    done = _run(["symbolic-ref", "--quiet", "HEAD"], cwd)
    if done.returncode == 1:
        return ""
    if done.returncode != 0:
        raise GitError(f"git symbolic-ref: {_one_line(done.stderr)}")
    ref = done.stdout.strip()
    return ref.removeprefix("refs/heads/") if ref.startswith("refs/heads/") else ""


def inside_repository(cwd: Path) -> bool:
    """`cwd` lies inside a git repository (a checkout or one of its worktrees)."""
    try:
        return _ok(["rev-parse", "--git-dir"], cwd)
    except GitError:
        return False


def detect_base(root: Path) -> str:
    """The branch items should start from: origin/HEAD, else the current branch, else main or master."""
    done = _run(["symbolic-ref", "--quiet", "refs/remotes/origin/HEAD"], root)
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip().removeprefix("refs/remotes/origin/")
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


def local_ref(name: str) -> str:
    """The full name of the local branch `name`.

    git reads a short name as `refs/<name>` or the tag `<name>` before the branch, so a ref an
    agent plants with a branch's name would stand in for it: every call that names a branch
    drover works with spells it out (docs/security.md).
    """
    return f"refs/heads/{name}"


def branch_exists(root: Path, name: str) -> bool:
    """A local branch called `name` exists."""
    return bool(name) and _ok(["show-ref", "--verify", "--quiet", local_ref(name)], root)


def _exact_heads(root: Path, *names: str) -> list[str] | None:
    """The head of each local branch named, in one git call; None when any is missing.

    show-ref --verify takes exactly the names given: rev-parse would read `refs/heads/x`, when
    there is no such branch, as `refs/refs/heads/x`.
    """
    done = _run(["show-ref", "--verify", "--hash", *(local_ref(name) for name in names)], root)
    heads = done.stdout.split()
    if done.returncode != 0 or len(heads) != len(names) or not all(_SHA.fullmatch(sha) for sha in heads):
        return None
    return heads


def valid_branch_name(name: str) -> bool:
    """`name` is acceptable to git as a new branch name."""
    # `@{-1}` and friends are expansions, not names; a leading dash would read as an option.
    if not name or name.startswith("-") or "@{" in name or name == "HEAD":
        return False
    import subprocess

    try:
        done = subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True, text=True)
    except FileNotFoundError:
        raise GitError("git is not installed") from None
    return done.returncode == 0


def _require_base(root: Path, base: str) -> None:
    if not branch_exists(root, base):
        raise GitError(f"base branch {base!r} does not exist in {root}: check [run] base in drover.toml")


def _worktrees(root: Path) -> dict[Path, str]:
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


def ensure_worktree(root: Path, path: Path, branch: str, base: str) -> Path:
    """A worktree at `path` on `branch` (created from `base` if missing); an existing one is reused."""
    path = Path(path).resolve()
    registered = _worktrees(root)
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
    if branch_exists(root, branch):
        # the short name on purpose: an existing branch's name is checked out as that branch,
        # where `refs/heads/...` would give a detached HEAD
        git(["worktree", "add", str(path), branch], root)
    else:
        _require_base(root, base)
        git(["worktree", "add", "-b", branch, str(path), local_ref(base)], root)
    return path


def add_detached_worktree(root: Path, path: Path, commit: str) -> Path:
    """A new worktree at `path` on a detached HEAD at `commit`: a scratch checkout that no branch
    follows, so nothing done in it moves one (drover's checks, verify.py)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    git(["worktree", "add", "--quiet", "--detach", str(path), f"{commit}^{{commit}}"], root)
    return path


def private_dir(worktree: Path) -> Path:
    """The worktree's own folder inside git's common dir: it goes when the worktree is removed."""
    return Path(git(["rev-parse", "--absolute-git-dir"], worktree).strip())


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
        _require_base(root, base)
        git(["switch", "--quiet", "--no-track", "-c", branch, local_ref(base)], root)


def remove_worktree(root: Path, path: Path, *, force: bool = False) -> None:
    """Remove the worktree at `path`; refuse while it holds uncommitted changes to tracked files.

    Untracked files go with it: they were never part of the branch that was reviewed.
    """
    path = Path(path).resolve()
    if path not in _worktrees(root):
        git(["worktree", "prune"], root)
        return
    if not force and path.is_dir():
        changed = _status_paths(path, untracked=False)
        if changed:
            shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
            raise Refused(f"worktree {path} has uncommitted changes ({shown}): commit or discard them first")
    git(["worktree", "remove", "--force", str(path)], root)


def _status_paths(cwd: Path, *, untracked: bool) -> list[str]:
    return [path for path, _ in _status_entries(cwd, untracked=untracked)]


def _status_entries(cwd: Path, *, untracked: bool) -> list[tuple[str, bool]]:
    """(path, whether git tracks nothing of it) for each path `git status` names."""
    out = git(["status", "--porcelain", "-z", "--untracked-files=" + ("all" if untracked else "no")], cwd)
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
    return _status_paths(root, untracked=True)


def dirty_entries(root: Path) -> list[tuple[str, bool]]:
    """dirty_paths, each with whether it is untracked."""
    return _status_entries(root, untracked=True)


def _compare(root: Path, branch: str, base: str) -> tuple[str, str, str]:
    """The heads of the branches `branch` and `base`, or why `base..branch` cannot be answered:
    (branch sha, base sha, "") or ("", "", why)."""
    if branch and base:
        # the usual case in one git call: both branches exist; the checks below only say which does not
        heads = _exact_heads(root, branch, base)
        if heads is not None:
            return heads[0], heads[1], ""
    if not _ok(["rev-parse", "--git-dir"], root):
        return "", "", f"{root} is not a git repository"
    if not branch:
        return "", "", "the item has no branch yet"
    if not branch_exists(root, branch):
        return "", "", f"branch {branch} does not exist"
    return "", "", f"base {base} does not exist"


def recent_commits(root: Path, branch: str, base: str) -> Recent:
    """The commits on `branch` that `base` lacks, oldest first, with their sizes; or why not."""
    from drover.prompts.fields import Commit, Recent  # here: the template types cost a command that never asks

    head, base_head, problem = _compare(root, branch, base)
    if problem:
        return Recent(Unavailable=problem)
    try:
        out = git(["log", "--reverse", "-M", "--numstat", "--format=%x1e%H%x1f%s",
                   "--end-of-options", f"{base_head}..{head}"], root)
    except GitError as exc:
        return Recent(Unavailable=exc.message)
    commits = []
    for record in out.split("\x1e")[1:]:
        header, _, stats = record.partition("\n")
        sha, _, subject = header.partition("\x1f")
        files = insertions = deletions = 0
        for line in stats.splitlines():
            parts = line.split("\t", 2)
            if len(parts) != 3:
                continue
            files += 1
            # Binary files show "-" for both counts: a changed file with no line count.
            insertions += int(parts[0]) if parts[0].isdigit() else 0
            deletions += int(parts[1]) if parts[1].isdigit() else 0
        commits.append(Commit(Sha=sha[:12], Subject=subject, Files=files, Insertions=insertions, Deletions=deletions))
    return Recent(Commits=tuple(commits))


def modified_files(root: Path, branch: str, base: str) -> tuple[list[str], str]:
    """Files `branch` modified since it left `base` (added and deleted ones excluded): (paths, "") or ([], why)."""
    from unidiff.patch import PatchSet
    from unidiff.errors import UnidiffParseError

    head, base_head, problem = _compare(root, branch, base)
    if problem:
        return [], problem
    try:
        text = git(["diff", *_DIFF_FLAGS, "--end-of-options", f"{base_head}...{head}"], root)
        patch = PatchSet(text)
    except GitError as exc:
        return [], exc.message
    except UnidiffParseError as exc:
        return [], f"the diff of {base}...{branch} could not be parsed: {exc}"
    # git marks an added or deleted file with /dev/null on one side; unidiff's own is_added_file
    # also calls a once-empty file "added". A renamed file counts under its new name.
    paths = {
        patched.path for patched in patch
        if patched.source_file != _DEV_NULL and patched.target_file != _DEV_NULL
    }
    return sorted(paths), ""


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
    _require_base(root, base)
    original = current_branch(root)
    original_head = git(["rev-parse", "HEAD"], root).strip()
    if original != base:
        dirty = dirty_paths(root)
        if dirty:
            shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
            raise Refused(f"{root} is on {original or 'a detached HEAD'} with uncommitted changes ({shown}): "
                          f"switch it to {base} before merging")
        git(["switch", "--quiet", base], root)  # switch takes only a branch: no other ref stands in
    done = _run(["merge", "--no-ff", "--no-edit", "-m", message, "--end-of-options", head], root)
    if done.returncode == 0:
        return git(["rev-parse", "HEAD"], root).strip()
    unmerged = git(["diff", "--name-only", "--diff-filter=U"], root, check=False)
    conflicted = [line for line in unmerged.splitlines() if line]
    if _ok(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"], root):
        git(["merge", "--abort"], root)
    if original != base:
        # Back where the operator left it: their branch, or the very commit if HEAD was detached.
        git(["switch", "--quiet", original] if original else ["switch", "--quiet", "--detach", original_head], root)
    if conflicted:
        raise MergeConflict(f"merging {branch} into {base} conflicts in {', '.join(conflicted)}: "
                      f"the merge was aborted and {root} is as it was; resolve on {branch} and finish again")
    said = _one_line(done.stderr) or _one_line(done.stdout) or f"exit status {done.returncode}"
    raise GitError(f"git merge: {said}")


def rev_parse(cwd: Path, *args: str) -> str:
    """`git rev-parse ARGS` in `cwd`, stripped; "" when git fails or is not there (callers fall back)."""
    try:
        code, out = _stdout(["rev-parse", *args], cwd)
    except GitError:
        return ""
    return out.strip() if code == 0 else ""


def _stdout(args: list[str], cwd: Path) -> tuple[int, str]:
    """_run's exit status and stdout, its stderr dropped: git spawned with os.posix_spawnp, so a
    command that needs only these (opening a project, the actor's name) does not import
    subprocess (about 6 ms). The same git, arguments, environment, signals and decoding; a `cwd`
    git could not start in goes to _run, which says why as it always has."""
    folder = os.fspath(cwd)
    if not hasattr(os, "posix_spawnp") or not os.path.isdir(folder) or not os.access(folder, os.X_OK):
        done = _run(args, cwd)
        return done.returncode, done.stdout
    import signal

    read, write = os.pipe()  # both close on exec; the child's stdout is a copy of `write`
    try:
        try:
            pid = os.posix_spawnp("git", ["git", *_PINNED, "-C", folder, *args], _env(), file_actions=[
                (os.POSIX_SPAWN_DUP2, write, 1), (os.POSIX_SPAWN_OPEN, 2, _DEV_NULL, os.O_WRONLY, 0)],
                setsigdef=[signal.SIGPIPE, signal.SIGXFSZ])  # as subprocess's restore_signals
        except FileNotFoundError:
            raise GitError("git is not installed") from None
        os.close(write)
        write = -1
        chunks = []
        while chunk := os.read(read, 65536):
            chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read)
        if write != -1:
            os.close(write)
    # as text=True, encoding="utf-8", errors="replace" reads it: universal newlines
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    return os.waitstatus_to_exitcode(status), text


# How long a commit of drover's own waits out a lock another git holds (the operator's own git,
# or one a killed drover started and that is still finishing) before the step counts as failed.
LOCK_PATIENCE = 5.0
_HELD = ("File exists", "cannot lock ref")


def _plumb(args: list[str], root: Path, *, stdin: bytes = b"") -> bytes:
    """One plumbing step of a commit: its stdout, or GitError with the step and git's words."""
    import subprocess

    done = subprocess.run(["git", *_PINNED, *args], cwd=root, env=_env(), input=stdin, capture_output=True)
    if done.returncode != 0:
        said = _one_line(done.stderr.decode("utf-8", "replace")) or f"exit status {done.returncode}"
        raise GitError(f"git {args[0]}: {said}")
    return done.stdout


def _patiently(step: Callable[[], T]) -> T:
    """`step`, tried again while another git holds a lock it needs, for up to LOCK_PATIENCE."""
    import time

    deadline = time.monotonic() + LOCK_PATIENCE
    pause = 0.01
    while True:
        try:
            return step()
        except GitError as exc:
            if not any(mark in exc.message for mark in _HELD) or time.monotonic() > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.2)


def _tree_with(root: Path, tree: bytes, parts: list[bytes], blob: bytes) -> tuple[bytes, bytes, bytes]:
    """The tree `tree` (b"": none yet) with `blob` at the path `parts`, folders made as needed;
    returns (the new tree, the entry's mode, the blob it held before, b"" when none). Only the
    folders on the path are listed and written again; no index is involved."""
    entries: dict[bytes, bytes] = {}
    if tree:
        for line in _plumb(["ls-tree", "-z", tree.decode()], root).split(b"\0"):
            if line:
                meta, _, name = line.partition(b"\t")
                entries[name] = meta  # b"<mode> <type> <sha>"
    name, held = parts[0], entries.get(parts[0], b"").split(b" ")
    if len(parts) == 1:
        mode, before = (held[0], held[2]) if len(held) == 3 and held[1] == b"blob" else (b"100644", b"")
        if before == blob:
            return tree, mode, before
        entries[name] = b"%s blob %s" % (mode, blob)
    else:
        inner = held[2] if len(held) == 3 and held[1] == b"tree" else b""
        sub, mode, before = _tree_with(root, inner, parts[1:], blob)
        if sub == inner:
            return tree, mode, before
        entries[name] = b"040000 tree " + sub
    listing = b"".join(b"%s\t%s\0" % (meta, entry) for entry, meta in entries.items())
    return _plumb(["mktree", "-z", "--missing"], root, stdin=listing).strip(), mode, before


def commit_file(root: Path, path: str, text: str, message: str) -> tuple[str, str, str]:
    """Commit `text` as the file `path` (relative to `root`) onto HEAD with `message`, and nothing
    else: the tree is HEAD's with that one entry replaced, built with `git mktree` (never in the
    operator's index, nor in any index file a killed drover's git could still be writing); HEAD
    moves only from the commit it was built on (compare and swap). Returns (the new commit, ""
    when HEAD already holds the text; the blob; its mode).

    The text is hashed as `git add` would hash the file (its attributes' filters apply); the
    operator's index is not touched here (set_index_entry does that).
    """
    blob = _plumb(["hash-object", "-w", "--stdin", f"--path={path}"], root,
                  stdin=text.encode("utf-8", "surrogateescape")).strip()
    parts = path.encode("utf-8", "surrogateescape").split(b"/")

    def attempt() -> tuple[str, bytes]:
        code, out = _stdout(["rev-parse", "--quiet", "--verify", "HEAD^{commit}"], root)
        old = out.strip() if code == 0 else ""  # "": an unborn branch, this is its first commit
        tree = _plumb(["rev-parse", f"{old}^{{tree}}"], root).strip() if old else b""
        new_tree, mode, _ = _tree_with(root, tree, parts, blob)
        if old and new_tree == tree:
            return "", mode
        new = _plumb(["commit-tree", new_tree.decode(), *(["-p", old] if old else []), "-F", "-"], root,
                     stdin=message.encode("utf-8")).decode().strip()
        # an old value of "" means HEAD's branch must not exist yet
        _plumb(["update-ref", "-m", message, "HEAD", new, old], root)
        return new, mode

    new, mode = _patiently(attempt)  # a HEAD that moved meanwhile is "cannot lock ref": built again
    return new, blob.decode(), mode.decode()


def set_index_entry(root: Path, path: str, mode: str, blob: str) -> None:
    """Make the operator's index hold `blob` at `path` (what HEAD now holds), so the file shows
    neither staged nor modified; every other entry stays as the operator left it."""
    _patiently(lambda: _plumb(["update-index", "-z", "--index-info"], root,
                              stdin=f"{mode} {blob}\t{path}\0".encode("utf-8", "surrogateescape")))


def user_name(root: Path) -> str:
    """git's user.name for the repository at `root`; "" when unset."""
    return _stdout(["config", "user.name"], root)[1].strip()


def all_refs(root: Path, *patterns: str) -> dict[str, str]:
    """Every ref (under `patterns`, when given) by its full name -> the object it names, in one git call."""
    out = git(["for-each-ref", "--format=%(refname)%00%(objectname)", *patterns], root, check=False)
    found: dict[str, str] = {}
    for line in out.splitlines():
        name, _, sha = line.partition("\0")
        if sha:
            found[name] = sha
    return found


def branch_heads(root: Path) -> dict[str, str]:
    """Every local branch -> the full sha of its head, in one git call."""
    # full names cut here: refname:short says `heads/x` when a tag or other ref is also called x
    return {name.removeprefix("refs/heads/"): sha for name, sha in all_refs(root, "refs/heads/").items()}


def shadowing_refs(name: str) -> tuple[str, str]:
    """The refs git reads a short `name` as before the branch `refs/heads/<name>` (gitrevisions:
    `$GIT_DIR/<name>` first, then these two)."""
    return f"refs/{name}", f"refs/tags/{name}"


def head_of(root: Path, branch: str) -> str:
    """The full sha the local branch `branch` points at; "" when there is no such branch."""
    if not branch:
        return ""
    code, out = _stdout(["show-ref", "--verify", "--hash", local_ref(branch)], root)
    sha = out.strip()
    return sha if code == 0 and _SHA.fullmatch(sha) else ""


def count_commits(root: Path, since: str, until: str) -> int | None:
    """Commits `until` has that `since` lacks; None when `since` is not an ancestor (history rewritten)."""
    if not _ok(["merge-base", "--is-ancestor", since, until], root):
        return None
    return int(git(["rev-list", "--count", f"{since}..{until}"], root).strip() or 0)


def ahead_of(root: Path, branch: str, base: str) -> int:
    """Commits on the branch `branch` that the branch `base` lacks."""
    head, base_head, problem = _compare(root, branch, base)
    if problem:
        raise GitError(problem)
    return int(git(["rev-list", "--count", "--end-of-options", f"{base_head}..{head}"], root).strip() or 0)


def changed_paths(root: Path, base: str, commit: str) -> list[str]:
    """Every path `commit` changes since it left the branch `base` (the merge-base diff: what a
    merge would bring), both sides of a rename."""
    base_head = head_of(root, base)
    if not base_head:
        raise GitError(f"base branch {base!r} does not exist in {root}: check [run] base in drover.toml")
    out = git(["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--end-of-options",
               f"{base_head}...{commit}"], root)
    return [path for path in out.split("\0") if path]


def commits_paths(root: Path, since: str, until: str) -> list[str]:
    """Every path some commit of `since..until` changes; a merge commit counts where it differs
    from all its parents (what it brought of its own, an evil merge's additions included)."""
    out = git(["log", "--format=", "--name-only", "-z", "--no-renames", "-c", "--end-of-options",
               f"{since}..{until}"], root)
    return sorted({path.strip("\n") for path in out.split("\0") if path.strip("\n")})


def blobs_at(root: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """path -> the object id `commit` holds at that path, for those of `paths` it holds."""
    out = git(["ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *paths], root)
    found: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path:
            found[path] = meta.split()[-1]
    return found


def blobs_on_disk(root: Path, paths: list[str]) -> dict[str, str]:
    """path -> the object id git would give the file at that path in the checkout, for those that are files."""
    present = [path for path in paths if (root / path).is_file() and not (root / path).is_symlink()]
    if not present:
        return {}
    out = git(["hash-object", "--", *present], root)
    return dict(zip(present, out.split()))


def merge_base_into(worktree: Path, base: str, *, commit: str = "") -> list[str]:
    """Merge the branch `base` (or, given, its `commit` by id) into what `worktree` has checked
    out: [] when it merged, else the conflicting files, the merge left in progress for an agent
    to complete."""
    done = _run(["merge", "--no-ff", "--no-edit", "-m", f"Merge {base} into the item branch",
                 "--end-of-options", commit or local_ref(base)], worktree)
    if done.returncode == 0:
        return []
    conflicted = unmerged_files(worktree)
    if not conflicted:
        said = _one_line(done.stderr) or _one_line(done.stdout) or f"exit status {done.returncode}"
        raise GitError(f"git merge: {said}")
    return conflicted


def own_git_dir(checkout: Path) -> Path | None:
    """The git dir of the checkout whose top is `checkout`, read from its `.git`; None when unsure."""
    dot_git = Path(checkout) / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    found = Path(checkout) / text[len("gitdir:"):].strip()  # an absolute path replaces `checkout`
    return found if found.is_dir() else None


def unmerged_files(checkout: Path) -> list[str]:
    """The conflicting files of a merge in progress in `checkout`; [] when none is."""
    if not Path(checkout).is_dir():
        return []
    # Asked before every prompt: a look for MERGE_HEAD in the git dir spares a git process.
    own = own_git_dir(checkout)
    if own is not None and not (own / "MERGE_HEAD").is_file():
        return []
    if own is None and not _ok(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"], checkout):
        return []
    out = git(["diff", "--name-only", "--diff-filter=U"], checkout, check=False)
    return [line for line in out.splitlines() if line]


# --- bundles: how the repository travels to a worker and commits come back (executors) ---


def bundle_create(root: Path, path: Path, ref: str, *, exclude: str = "") -> bool:
    """Write a bundle of `ref` (minus what `exclude` reaches); False when it would be empty."""
    args = ["bundle", "create", "--quiet", str(path), ref] + ([f"^{exclude}"] if exclude else [])
    done = _run(args, root)
    if done.returncode == 0:
        return True
    if "empty bundle" in done.stderr:
        return False
    raise GitError(f"git bundle: {_one_line(done.stderr)}")


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
