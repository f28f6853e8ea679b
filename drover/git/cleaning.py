"""A pooled worktree made fit for its next holder (docs/worktrees.md): checked that it is still the
worktree git registered, forced onto a branch or a commit, cleaned of everything untracked but the
kept paths; and one that cannot be, removed whatever it holds."""
from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

from drover.errors import GitError
from drover.git.files import folder_fd, open_regular, read_small_file, remove_at, remove_below, remove_path, replace_at
from drover.git.branches import heads_of, require_base
from drover.git.history import gitlinks_in
from drover.git.run import WHOLE, git, said_line, run

# An operation in progress, as a worktree's private git folder shows it: work not on the branch yet.
IN_PROGRESS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "BISECT_LOG", "rebase-merge", "rebase-apply",
               "sequencer")
# What an agent can leave in the worktree's private git folder that would change what the next
# holder's git does or says: an operation in progress (and its other files), per-worktree config,
# a sparse checkout, the worktree's own refs (refs/worktree/*, refs/bisect/*) and their logs.
_LEFT_STATE = IN_PROGRESS + ("MERGE_MSG", "MERGE_MODE", "BISECT_START", "BISECT_TERMS", "BISECT_NAMES",
                             "BISECT_EXPECTED_REV", "BISECT_ANCESTORS_OK", "config.worktree", "info", "refs",
                             "logs/refs")


class Unfit(GitError):
    """A pooled worktree that cannot be made clean: it is removed, never handed out."""


def common_dir(root: Path) -> Path:
    """The repository's common git folder (where `worktrees/` lives)."""
    found = git(["rev-parse", "--git-common-dir"], root).strip()
    return Path(os.path.realpath(root / found))


def private_git_dir(worktree: Path, common: Path) -> Path:
    """The worktree's own git folder, read from its `.git` file without running git in it; Unfit
    unless the file is a plain file naming a folder of `common`/worktrees/ that names it back (an
    agent may rewrite `.git` so that git in it works on another repository)."""
    # a link in place of the worktree (or of the pool's folder) leads wherever the holder chose: to
    # the operator's own linked worktree, whose `.git` names this repository's folder for it, which
    # names it back, and the next taking forced and cleaned that one (hostile review 43)
    linked = _linked(worktree)
    if linked is not None:
        raise Unfit(f"{linked} is a link, not a worktree drover made")
    dot_git = worktree / ".git"
    try:
        if not stat.S_ISREG(os.lstat(dot_git).st_mode):
            raise Unfit(f"{dot_git} is not a file")
        text = read_small_file(dot_git).strip()
    except OSError as exc:
        raise Unfit(f"{dot_git}: {exc.strerror}") from None
    if not text.startswith("gitdir: "):
        raise Unfit(f"{dot_git} does not name a git folder")
    # as git reads it: from the worktree, through whatever links lie on the way (a relative path
    # read from drover's own folder named the real private folder while git, from the worktree,
    # followed the implementer's link elsewhere)
    private = Path(os.path.realpath(worktree / text[len("gitdir: "):]))
    try:
        named_back = Path(read_small_file(private / "gitdir").strip())
    except OSError:
        raise Unfit(f"{dot_git} names {private}, which is not a worktree's folder") from None
    if (Path(os.path.realpath(private)).parent != common / "worktrees"
            or os.path.realpath(named_back) != os.path.realpath(dot_git)):
        raise Unfit(f"{dot_git} names {private}, not this repository's folder for {worktree}")
    # the private folder names the common one it shares: rewritten, git in the worktree would
    # work on another repository's objects, refs and config
    try:
        shared = Path(os.path.realpath(private / read_small_file(private / "commondir").strip()))
    except OSError:
        raise Unfit(f"{private} names no common git folder") from None
    if shared != Path(os.path.realpath(common)):
        raise Unfit(f"{private}/commondir names {shared}, not this repository's git folder")
    return private


def clear_leftovers(worktree: Path, private: Path, keep: tuple[str, ...], kept_index: Path) -> None:
    """Before a pooled worktree is switched: an operation in progress and per-worktree settings
    gone from its private folder, each kept path that is a symbolic link removed, and the index
    drover's last checkout there wrote put back (restore_index). Everything is reached from a
    descriptor of the private folder (opened from the common one, `worktrees/<name>` never through
    a link; Unfit when it cannot be) or of the worktree, never through a link (files.remove_below)."""
    try:
        folder = folder_fd(private.parent.parent, private.parent.name, private.name)
    except OSError as exc:
        raise Unfit(f"{private}: {exc.strerror}") from None
    try:
        for name in _LEFT_STATE:
            # `logs` made a link by the holder: `logs/refs` would be a folder anywhere the operator
            # may write (hostile review 15); the link goes, never what it leads to
            remove_below(folder, name)
        restore_index(folder, kept_index)
    finally:
        os.close(folder)
    # a link, at a kept path or on the way to it, would make the next holder's kept folder any folder at all
    _remove_kept(worktree, keep, links_only=True)


def clear_kept(worktree: Path, keep: tuple[str, ...]) -> None:
    """Remove the kept paths themselves, before a set-up that runs where the last one failed or was
    killed: what they hold may be half made (a `.venv` without its `bin/pip`), and a set-up that
    finds them there may pass over them (`python -m venv .venv` exits 0 on a broken one). A link on
    the way to a kept path is removed, never what it leads to (files.remove_below)."""
    _remove_kept(worktree, keep)


def _remove_kept(worktree: Path, keep: tuple[str, ...], *, links_only: bool = False) -> None:
    """files.remove_below each of `keep` from one descriptor of the worktree."""
    top = folder_fd(worktree)
    try:
        for entry in keep:
            remove_below(top, entry, links_only=links_only)
    finally:
        os.close(top)


def kept_index_of(worktree: Path) -> Path:
    """Where drover keeps the index it left in a pooled worktree when it last made it ready
    (keep_index): beside the worktree in drover's own folder (.drover/pool/w1.index), never in the
    worktree's private git folder, which the holder writes as it commits (a copy there was the
    holder's to replace: a skip-worktree mark in it reached the next holder)."""
    return worktree.with_name(worktree.name + ".index")


def keep_index(private: Path, kept: Path) -> None:
    """Keep a copy of the index drover's checkout and clean just wrote, for restore_index."""
    index = private / "index"
    scratch = kept.with_name(kept.name + ".new")
    shutil.copyfile(index, scratch)
    os.replace(scratch, kept)


def restore_index(private: int, kept: Path) -> None:
    """Put back the index keep_index kept (none kept: no index at all) in the private folder
    `private` (a descriptor), so the next checkout reads nothing the last holder wrote into the index.

    The index is the holder's to write: a tracked file marked skip-worktree or assume-unchanged
    (which git trusts as it checks out, once the index has 1000 entries), or an entry whose stat
    data the holder wrote for content other than its blob, makes a forced checkout pass over the
    file, keeping the holder's text for the next holder's agent, or for a check. The kept index
    says what drover's checkout wrote, with the stat data it wrote it with: every file the holder
    changed since has a newer ctime, which no process can set back, so the checkout writes it
    again (run.PINNED has git compare ctimes, whatever the repository's config says), and git
    hashes anything whose times leave it in doubt. Without a kept index git writes every tracked
    file again (a worktree made ready before drover kept one)."""
    try:
        if stat.S_ISREG(os.lstat(kept).st_mode):
            # a new file renamed over the index: a link the holder put in its place is replaced, not
            # written through (it may lead anywhere the operator may write, and the holder nowhere)
            with open_regular(kept) as source:
                replace_at(private, "index", source.read())
            return
        remove_path(kept)  # a link or a folder in its place: not drover's
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise Unfit(f"{kept}: {exc.strerror}") from None
    try:
        remove_at(private, "index")
    except OSError as exc:
        raise Unfit(f"the index (none kept at {kept}): {exc.strerror}") from None


def clean_worktree(worktree: Path, keep: tuple[str, ...]) -> None:
    """Remove every untracked and ignored path outside `keep` (each entry from the worktree's top),
    after the forced checkout that made tracked files and the index the target's. Unfit when git fails."""
    said = _must([*_as_the_disk_is(worktree), "clean", "-ffdxq", *_sparing(keep)], worktree, "clean")
    if "failed to remove" in said:  # git says so and may still exit 0: the path is still there
        raise Unfit(f"git clean in {worktree} left files: {said.strip().splitlines()[0]}")


def empty_submodules(worktree: Path, private: Path) -> bool:
    """After the clean: each submodule's folder (a gitlink the index records) emptied, as `git
    worktree add` leaves it, and the submodules' own git folders (`modules/` in the worktree's
    private folder) removed; True when there was anything to remove. Neither the forced checkout
    nor the clean goes into a submodule (no recursion, run.py): the commit a holder checked out
    there, its edits and builds, and its git folder's hooks and config reached the next holder and
    its check. A `[run] setup` (`git submodule update --init`) checks them out again. Unfit when
    git or the removal fails. A repository with no `.gitmodules` (and no submodule git folder left)
    costs no git: a gitlink no `.gitmodules` declares is no submodule git checks out."""
    if not os.path.lexists(worktree / ".gitmodules") and not os.path.lexists(private / "modules"):
        return False
    listed = _must(["ls-files", "--stage", "-z"], worktree, "ls-files", out=True)
    gitlinks = gitlinks_in(listed)
    emptied = False
    try:
        top = folder_fd(worktree)
        try:
            for path in gitlinks:
                inside = worktree / path
                if inside.is_symlink() or inside.exists() and not (inside.is_dir() and not os.listdir(inside)):
                    remove_below(top, path)
                    inside.mkdir(parents=True, exist_ok=True)
                    emptied = True
        finally:
            os.close(top)
        folder = folder_fd(private.parent.parent, private.parent.name, private.name)
        try:
            if os.path.lexists(private / "modules"):
                remove_at(folder, "modules")
                emptied = True
        finally:
            os.close(folder)
    except OSError as exc:
        raise Unfit(f"a submodule's folder in {worktree}: {exc.strerror}") from None
    return emptied


def clean_would_remove(worktree: Path, keep: tuple[str, ...]) -> list[str]:
    """What clean_worktree would remove from `worktree` now, as `git clean -n` names it (a folder
    once, with its slash; an odd name in git's quotes). Unfit when git fails."""
    said = _must([*_as_the_disk_is(worktree), "clean", "-ffdxn", *_sparing(keep)], worktree, "clean", out=True)
    return [line.removeprefix(WOULD_REMOVE) for line in said.splitlines() if line.startswith(WOULD_REMOVE)]


WOULD_REMOVE = "Would remove "  # how `git clean -n` names each path (git does not translate it)


def _sparing(keep: tuple[str, ...]) -> list[str]:
    """git clean's excludes for `keep`: each entry anchored at the worktree's top, and the path it
    names alone: git reads an exclude as a pattern, so `keep*` spared `keep-other/` and `*` spared
    everything an earlier item left, while the set-up digest and its removal read each as a path."""
    return [arg for entry in keep for arg in ("-e", "/" + _literal(entry.strip("/")))]


def _literal(path: str) -> str:
    """`path` as a gitignore pattern that matches that path only: its wildcards, backslashes and a
    trailing space escaped (gitignore(5))."""
    escaped = re.sub(r"([\\*?\[])", r"\\\1", path)
    return escaped[:-1] + "\\ " if escaped.endswith(" ") else escaped


# A pooled checkout writes every tracked file: with a sparse checkout (which the shared config may
# turn on) git would mark the files it leaves out skip-worktree, in the index keep_index keeps.
_WHOLE = WHOLE


def _as_the_disk_is(worktree: Path) -> tuple[str, ...]:
    """Config that says what the worktree's file system does, whatever the shared config claims (an
    agent can set it there): core.ignoreCase=true on a file system that tells case apart makes the
    clean pass over an untracked `makefile` beside a tracked `Makefile` (make reads it first), and
    core.fileMode=false makes the forced checkout keep a mode the holder gave a tracked file."""
    try:
        folds = os.path.samefile(worktree / ".git", worktree / ".GIT")
    except OSError:
        folds = False
    return ("-c", f"core.ignoreCase={'true' if folds else 'false'}", "-c", "core.fileMode=true")


def switch_worktree(worktree: Path, root: Path, branch: str, base: str, made: list[str] | None = None) -> None:
    """A pooled worktree onto `branch` (created from `base` when missing), whatever its tracked files
    and index held: `checkout --force` makes both the target's, as `reset --hard` would (one git
    process fewer per item: docs/worktrees.md). A branch created here starts at base's head as read
    here, by its id, which is put in `made` (ensure_worktree's)."""
    heads = heads_of(root, branch, base)
    if branch in heads:
        # the short name on purpose: checked out as that branch (ensure_worktree says why)
        _must([*_WHOLE, *_as_the_disk_is(worktree), "checkout", "--force", "--quiet", branch], worktree, "checkout")
    else:
        if base not in heads:
            require_base(root, base)
        _must([*_WHOLE, *_as_the_disk_is(worktree), "checkout", "--force", "--quiet", "--no-track", "-b", branch,
               heads[base]],
              worktree, "checkout")
        if made is not None:
            made.append(heads[base])


def detach_worktree(worktree: Path, commit: str) -> None:
    """A pooled worktree onto a detached HEAD at `commit` (a check's), tracked files forced as above."""
    _must([*_WHOLE, *_as_the_disk_is(worktree), "checkout", "--force", "--quiet", "--detach", f"{commit}^{{commit}}"],
          worktree, "checkout")


def _must(args: list[str], cwd: Path, what: str, *, out: bool = False) -> str:
    """Run git; Unfit with git's words when it fails; else what it said on stderr (on stdout, with `out`)."""
    done = run(args, cwd)
    if done.returncode != 0:
        said = said_line(done.stderr or done.stdout)
        raise Unfit(f"git {what} in {cwd} failed: {said or f'exit status {done.returncode}'}")
    return done.stdout if out else done.stderr


def _linked(worktree: Path) -> Path | None:
    """The pool's folder or the pooled worktree, the first of them that is a link; None when neither is."""
    return next((place for place in (worktree.parent, worktree) if os.path.islink(place)), None)


def discard_worktree(root: Path, worktree: Path) -> None:
    """Remove a pooled worktree whatever it holds (a locked one, unwritable folders) and forget it.
    A link in its place (or in place of the pool's folder) is removed as a link: git's `worktree
    remove` would remove the worktree it leads to, the operator's own (hostile review 43)."""
    linked = _linked(worktree)
    if linked is not None:
        remove_path(linked)
        kept_index_of(worktree).unlink(missing_ok=True)
        git(["worktree", "prune"], root)
        return
    done = run(["worktree", "remove", "--force", "--force", str(worktree)], root)
    if done.returncode != 0 or worktree.exists():
        remove_path(worktree)
    kept_index_of(worktree).unlink(missing_ok=True)
    git(["worktree", "prune"], root)
