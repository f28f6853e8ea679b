"""Branches, worktrees, merges, recent commits and the diff scope, through the git CLI."""
from __future__ import annotations

import os
import re
from pathlib import Path

from typing import TYPE_CHECKING

from .errors import GitError, Refused

if TYPE_CHECKING:
    import subprocess

    from .fields import Recent

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
    done = _run(["symbolic-ref", "--quiet", "--short", "HEAD"], cwd)
    if done.returncode == 1:
        return ""
    if done.returncode != 0:
        raise GitError(f"git symbolic-ref: {_one_line(done.stderr)}")
    return done.stdout.strip()


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


def branch_exists(root: Path, name: str) -> bool:
    """A local branch called `name` exists."""
    return bool(name) and _ok(["show-ref", "--verify", "--quiet", f"refs/heads/{name}"], root)


def _commit_exists(root: Path, rev: str) -> bool:
    return bool(rev) and _ok(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"], root)


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
    if not _commit_exists(root, base):
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
        git(["worktree", "add", str(path), branch], root)
    else:
        _require_base(root, base)
        git(["worktree", "add", "-b", branch, str(path), base], root)
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
        git(["switch", "--quiet", "--no-track", "-c", branch, base], root)


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


def _compare_problem(root: Path, branch: str, base: str) -> str:
    """Why `base..branch` cannot be answered, or "" when it can."""
    if branch and base:
        # the usual case in one git call: both name commits; the checks below only say which does not
        done = _run(["rev-parse", "--end-of-options", f"{branch}^{{commit}}", f"{base}^{{commit}}"], root)
        shas = done.stdout.split()
        if done.returncode == 0 and len(shas) == 2 and all(_SHA.fullmatch(sha) for sha in shas):
            return ""
    if not _ok(["rev-parse", "--git-dir"], root):
        return f"{root} is not a git repository"
    if not branch:
        return "the item has no branch yet"
    if not _commit_exists(root, branch):
        return f"branch {branch} does not exist"
    if not _commit_exists(root, base):
        return f"base {base} does not exist"
    return ""


def recent_commits(root: Path, branch: str, base: str) -> Recent:
    """The commits on `branch` that `base` lacks, oldest first, with their sizes; or why not."""
    from .fields import Commit, Recent  # here: the template types cost a command that never asks

    problem = _compare_problem(root, branch, base)
    if problem:
        return Recent(Unavailable=problem)
    try:
        out = git(["log", "--reverse", "-M", "--numstat", "--format=%x1e%H%x1f%s",
                   "--end-of-options", f"{base}..{branch}"], root)
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

    problem = _compare_problem(root, branch, base)
    if problem:
        return [], problem
    try:
        text = git(["diff", *_DIFF_FLAGS, "--end-of-options", f"{base}...{branch}"], root)
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


def merge(root: Path, branch: str, base: str, message: str) -> str:
    """Merge `branch` into `base` in the checkout at `root` (--no-ff, never a push); return the merge sha.

    The checkout must be on `base`, or clean enough to switch to it. On a conflict the merge is
    aborted, the checkout is put back as it was, and Refused names the conflicting files.
    """
    if not branch_exists(root, branch):
        raise GitError(f"branch {branch} does not exist")
    _require_base(root, base)
    original = current_branch(root)
    original_head = git(["rev-parse", "HEAD"], root).strip()
    if original != base:
        dirty = dirty_paths(root)
        if dirty:
            shown = ", ".join(dirty[:5]) + (" ..." if len(dirty) > 5 else "")
            raise Refused(f"{root} is on {original or 'a detached HEAD'} with uncommitted changes ({shown}): "
                          f"switch it to {base} before merging")
        git(["switch", "--quiet", base], root)
    done = _run(["merge", "--no-ff", "--no-edit", "-m", message, "--end-of-options", branch], root)
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


def commit_only(root: Path, paths: list[str], message: str) -> tuple[str, str] | None:
    """Commit exactly `paths` (add, then `commit --only`), leaving the rest of the index alone.

    None when done, or when the paths hold no change; else the step that failed (`git add`,
    `git commit`) and git's last line.
    """
    if not _run(["status", "--porcelain", "--untracked-files=all", "--", *paths], root).stdout.strip():
        return None  # the same text written again: nothing to commit
    for args in (["add", "--", *paths], ["commit", "-q", "-m", message, "--only", "--", *paths]):
        done = _run(args, root)
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            return f"git {args[0]}", said[-1] if said else f"exit {done.returncode}"
    return None


def user_name(root: Path) -> str:
    """git's user.name for the repository at `root`; "" when unset."""
    return _stdout(["config", "user.name"], root)[1].strip()


def branch_heads(root: Path) -> dict[str, str]:
    """Every local branch -> the full sha of its head, in one git call."""
    out = git(["for-each-ref", "--format=%(refname:short)%00%(objectname)", "refs/heads/"], root, check=False)
    heads: dict[str, str] = {}
    for line in out.splitlines():
        name, _, sha = line.partition("\0")
        if sha:
            heads[name] = sha
    return heads


def head_of(root: Path, branch: str) -> str:
    """The full sha `branch` points at; "" when there is no such branch."""
    if not branch:
        return ""
    code, out = _stdout(["rev-parse", "--verify", "--quiet", "--end-of-options", f"refs/heads/{branch}^{{commit}}"],
                        root)
    return out.strip() if code == 0 else ""


def count_commits(root: Path, since: str, until: str) -> int | None:
    """Commits `until` has that `since` lacks; None when `since` is not an ancestor (history rewritten)."""
    if not _ok(["merge-base", "--is-ancestor", since, until], root):
        return None
    return int(git(["rev-list", "--count", f"{since}..{until}"], root).strip() or 0)


def ahead_of(root: Path, branch: str, base: str) -> int:
    """Commits on `branch` that `base` lacks."""
    return int(git(["rev-list", "--count", "--end-of-options", f"{base}..{branch}"], root).strip() or 0)


def merge_base_into(worktree: Path, base: str) -> list[str]:
    """Merge `base` into the branch checked out in `worktree`: [] when it merged (a commit on the
    branch), else the conflicting files, the merge left in progress for an agent to complete."""
    done = _run(["merge", "--no-ff", "--no-edit", "-m", f"Merge {base} into the item branch",
                 "--end-of-options", base], worktree)
    if done.returncode == 0:
        return []
    conflicted = unmerged_files(worktree)
    if not conflicted:
        said = _one_line(done.stderr) or _one_line(done.stdout) or f"exit status {done.returncode}"
        raise GitError(f"git merge: {said}")
    return conflicted


def _own_git_dir(checkout: Path) -> Path | None:
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
    own = _own_git_dir(checkout)
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


def fast_forward(cwd: Path, rev: str) -> None:
    """Move the branch checked out in `cwd` forward to `rev`, or refuse (GitError) if it cannot."""
    git(["merge", "--ff-only", "--quiet", rev], cwd)
