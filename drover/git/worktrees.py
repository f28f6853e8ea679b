"""Checkouts: worktrees made and removed, the branch a checkout is switched to, what is uncommitted."""
from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from drover.errors import GitError, Refused, shown_paths
from drover.git.branches import branch_exists, current_branch, heads_of, local_ref, require_base
from drover.git.history import gitlinks_in, of_ids
from drover.git.run import WHOLE, failure, git, rev_parse, run


# What git reads of each worktree's private folder when it lists worktrees or checks whether a
# branch is checked out elsewhere (`worktree list`, `worktree add`): an agent can put a fifo there.
_ADMIN_FILES = ("HEAD", "gitdir", "commondir", "locked")


def require_no_fifo_in_worktree_folders(root: Path) -> None:
    """GitError naming the first file of a worktree's private folder (.git/worktrees/*/HEAD, gitdir,
    commondir, locked) that is there and is no regular file: git would wait on a fifo there for
    ever, and drover with it (an agent's worktree HEAD, replaced)."""
    import stat

    folder = Path(root) / ".git" / "worktrees"
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        for admin in _ADMIN_FILES:
            path = folder / name / admin
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if not stat.S_ISREG(mode):
                raise GitError(f"{path} is not a regular file: git would wait on it for ever (agents can "
                               "write there); remove it, then run `git worktree prune`")


def registered_worktrees(root: Path) -> dict[Path, str]:
    """Every registered worktree's path -> its branch ("" when detached)."""
    require_no_fifo_in_worktree_folders(root)
    found: dict[Path, str] = {}
    path: Path | None = None
    for line in git(["worktree", "list", "--porcelain"], root).splitlines():
        if line.startswith("worktree "):
            path = Path(os.path.realpath(line[len("worktree "):]))
            found[path] = ""
        elif line.startswith("branch ") and path is not None:
            found[path] = line[len("branch "):].removeprefix("refs/heads/")
    return found


def _as_named(root: Path, path: Path) -> Path:
    """`path`, a folder drover names below `root` (`.drover/worktrees/D-1`), with the links above
    `root` resolved (a project under a linked folder) and none between `root` and it followed:
    GitError naming a link in place of a folder on the way. A link an agent put in place of
    `.drover/worktrees` itself had the branch checked out, and the next agent run, in a folder it
    chose, outside the project (hostile review 43). A path not below `root`: its folder resolved."""
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        parts = ()
    if not parts:
        return Path(os.path.realpath(path.parent)) / path.name
    here = Path(os.path.realpath(root))
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink():
            raise GitError(f"{here} is a link, not a folder drover made: remove the link (`rm {here}`)")
    return here / parts[-1]


def ensure_worktree(root: Path, path: Path, branch: str, base: str, *,
                    lock: AbstractContextManager[Any] = nullcontext(), made: list[str] | None = None,
                    common: Path | None = None) -> Path:
    """A worktree at `path` on `branch` (created from `base` if missing); an existing one is reused.
    A branch created here starts at base's head as read here, by its id, which is put in `made`:
    the head the branch has, with no git call to ask it again. `common`: the repository's common git
    folder, when the caller knows it: a worktree there whose own files say it is this repository's,
    on `branch`, is reused with no git call (`worktree list` reads those same files).

    `lock` is held while the worktree is looked up and registered, and released before its files
    are written: under `drive --jobs N` a prune must not meet another thread's `worktree add`
    halfway, but the checkout of a big tree need not keep the others waiting.
    """
    # the folder drover names, never what a link in its place leads to: an agent's link there had
    # the branch checked out (and the next agent run) in a folder it chose (hostile review 42)
    path = _as_named(root, path)
    if path.is_symlink():
        raise GitError(f"{path} is a link, not a worktree drover made: remove the link (`rm {path}`)")
    # a worktree whose making a kill cut short (between `worktree add --no-checkout` and the checkout)
    # has no index: handed out as it was, its agent's `git add` of one file made a commit deleting
    # every other one. Any checkout, and any `git add` since, writes an index.
    private = _registered(path, common) if common is not None else None
    if private is not None and _head_is(private, branch):
        return path if (private / "index").exists() else _checked_out(root, path)
    with lock:
        registered = registered_worktrees(root)
        if path in registered:
            if registered[path] != branch:
                on = registered[path] or "a detached HEAD"
                raise GitError(f"worktree {path} is on {on}, not {branch}: remove it with `git worktree remove {path}`")
            if path.is_dir():
                private = own_git_dir(path)
                return _checked_out(root, path) if private is not None and not (private / "index").exists() else path
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
            git([*WHOLE, "worktree", "add", "--quiet", "--no-checkout", str(path), branch], root)
        else:
            if base not in heads:
                require_base(root, base)
            git([*WHOLE, "worktree", "add", "--quiet", "--no-checkout", "-b", branch, str(path), heads[base]], root)
            if made is not None:
                made.append(heads[base])
    return _checked_out(root, path)


def _checked_out(root: Path, path: Path) -> Path:
    """`path`, a worktree added with --no-checkout, with its branch's files and index written."""
    done = run([*WHOLE, "reset", "--hard", "--quiet"], path)
    if done.returncode != 0:  # a half-written worktree is never handed out: the next call makes it again
        git(["worktree", "remove", "--force", str(path)], root, check=False)
        raise failure(["worktree", "add"], done)
    return path


def _registered(path: Path, common: Path) -> Path | None:
    """The private folder of the worktree at `path`, registered in `common` as its own files say
    (cleaning.private_git_dir), each file git reads there (_ADMIN_FILES) a regular file or none; None
    when any of that is not so: then `worktree list` is asked, whose fifo check says which file."""
    import stat

    from drover.git.cleaning import Unfit, private_git_dir

    try:
        private = private_git_dir(path, common)
    except Unfit:
        return None
    for admin in _ADMIN_FILES:
        try:
            if not stat.S_ISREG(os.lstat(private / admin).st_mode):
                return None
        except FileNotFoundError:
            continue
        except OSError:
            return None
    return private


def _head_is(private: Path, branch: str) -> bool:
    """The HEAD in a worktree's private folder (_registered) is `branch`: what `worktree list` would
    say of it, read from the file git reads for it. False when it cannot be read (then git is
    asked, and says why)."""
    from drover.git.files import read_small_file

    try:
        return read_small_file(private / "HEAD").strip() == f"ref: {local_ref(branch)}"
    except OSError:
        return False


def add_detached_worktree(root: Path, path: Path, commit: str) -> Path:
    """A new worktree at `path` on a detached HEAD at `commit`: a scratch checkout that no branch
    follows, so nothing done in it moves one (drover's checks, verify.py)."""
    path = Path(os.path.realpath(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    require_no_fifo_in_worktree_folders(root)
    git([*WHOLE, "worktree", "add", "--quiet", "--detach", str(path), f"{commit}^{{commit}}"], root)
    return path


def remove_worktree(root: Path, path: Path, *, force: bool = False, common: Path | None = None) -> None:
    """Remove the worktree at `path`; refuse while it holds uncommitted changes to tracked files.

    Untracked files go with it: they were never part of the branch that was reviewed. `common`: the
    repository's common git folder, when the caller knows it: a worktree whose own files say it is
    registered there (_registered) needs no `worktree list` to say so.
    """
    # the folder drover made, never what a link in its place leads to: an agent made the item's
    # worktree a link to another registered worktree (the operator's own, another item's while its
    # agent worked there), and finish removed that one, its untracked files with it (hostile review 42)
    path = _as_named(root, path)
    if path.is_symlink():
        path.unlink()
        git(["worktree", "prune"], root)  # the registration of the folder the link took the place of
        return
    known = common is not None and _registered(path, common) is not None
    if not path.is_dir() or not (known or path in registered_worktrees(root)):
        git(["worktree", "prune"], root)
        return
    if not force:
        changed = [changed for changed, _ in _status_entries(path, untracked=False)]
        if changed:
            raise Refused(f"worktree {path} has uncommitted changes ({shown_paths(changed)}): commit or discard them first")
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
        raise Refused(f"cannot switch {root} to {branch}: uncommitted changes ({shown_paths(dirty)}); "
                      "commit or stash them first")
    if branch_exists(root, branch):
        git(["switch", "--quiet", branch], root)
    else:
        require_base(root, base)
        git(["switch", "--quiet", "--no-track", "-c", branch, local_ref(base)], root)


# git's `--no-optional-locks`, for one git: no index written back by a command that only reads
NO_OPTIONAL_LOCKS = {"GIT_OPTIONAL_LOCKS": "0"}


def _status_entries(cwd: Path, *, untracked: bool, ignored: list[str] | None = None,
                    submodules: bool = True) -> list[tuple[str, bool]]:
    """(path, whether git tracks nothing of it) for each path `git status` names; `ignored`, when
    given, gets each ignored path that matches an ignore rule (an ignored folder once, with its
    slash, and nothing in it), in the same git. Without `submodules`, a submodule whose only change
    is in its own checkout (another commit checked out, edits or untracked files inside it) is
    left out (_submodule_checkouts); a staged change of its commit still counts. It writes nothing:
    git's status otherwise writes the index it refreshed whenever an entry is as new as the index
    file, which every finish's merge leaves in the main checkout (9-10 ms an item on the pool
    benchmark's 20,000 files, under the merge lock, and the operator's `index.lock` taken
    meanwhile); what it prints is the same."""
    args = ["status", "--porcelain", "-z", "--untracked-files=" + ("all" if untracked else "no")]
    out = git(args + (["--ignored=matching"] if ignored is not None else []), cwd, env_add=NO_OPTIONAL_LOCKS)
    paths: list[tuple[str, bool]] = []
    unstaged: list[str] = []  # changed in the checkout only: a submodule's own checkout among them
    entries = out.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        code, path = entry[:2], entry[3:]
        if code == "!!":
            if ignored is not None:
                ignored.append(path)
            continue
        paths.append((path, code == "??"))
        if code == " M":
            unstaged.append(path)
        # A rename or copy is followed by the path it came from, which changed too.
        if "R" in code or "C" in code:
            if index < len(entries) and entries[index]:
                paths.append((entries[index], False))
            index += 1
    if not submodules and unstaged:
        inside = _submodule_checkouts(cwd, unstaged)
        return [entry for entry in paths if entry[0] not in inside]
    return paths


def _submodule_checkouts(cwd: Path, paths: list[str]) -> set[str]:
    """Those of `paths` the index records as a submodule (a gitlink, mode 160000): `status` names
    one when the commit checked out in its folder is not the recorded one, or the folder holds
    edits or untracked files. drover's merge never writes inside a submodule's folder (no
    recursion, run.py), so none of that is a change a merge would trip on or lose; and a merge that
    moves the recorded commit leaves the folder at the old one, which `status` then names."""
    out = git(["--literal-pathspecs", "ls-files", "--stage", "-z", "--", *paths], cwd)
    return set(gitlinks_in(out))


def dirty_paths(root: Path) -> list[str]:
    """Repo-relative paths with uncommitted changes, untracked files included (ignored ones not)."""
    return [path for path, _ in _status_entries(root, untracked=True)]


def dirty_entries(root: Path, *, ignored: list[str] | None = None, submodules: bool = True) -> list[tuple[str, bool]]:
    """dirty_paths, each with whether it is untracked; `ignored` and `submodules` as _status_entries takes them."""
    return _status_entries(root, untracked=True, ignored=ignored, submodules=submodules)


def ignores(root: Path, path: str) -> bool:
    """Whether git ignores `path` in the checkout at `root` (every ignore file it reads, negations
    too), tracked or not: what a line of the .gitignore cannot say by itself."""
    return run(["check-ignore", "--no-index", "-q", "--", path], root).returncode == 0  # it takes no pathspec magic


def hidden_from_status(root: Path, pathspecs: list[str]) -> dict[str, str]:
    """path -> `assume-unchanged` or `skip-worktree`, for each file under `pathspecs` (literal) that
    the index of `root` marks so: git's status, and so a dirty check, passes over an edit of it.
    One `git ls-files -v`; a pathspec outside the repository is left out by the caller."""
    if not pathspecs:
        return {}
    out = git(["--literal-pathspecs", "ls-files", "-v", "-z", "--", *pathspecs], root)
    marked = {}
    for entry in out.split("\0"):
        tag, _, path = entry.partition(" ")
        if path and (tag == "S" or tag.islower()):
            marked[path] = "skip-worktree" if tag.upper() == "S" else "assume-unchanged"
    return marked


def _on_disk(folder: Path, paths: tuple[str, ...]) -> tuple[dict[str, str], list[str]]:
    """Under each of `paths` in `folder`: path -> "file" or "link" for what is there, and the paths
    that are neither (a fifo, a device), are reached through a linked folder, or cannot be listed."""
    found: dict[str, str] = {}
    odd: list[str] = []

    def unlisted(exc: OSError) -> None:
        # a folder that can be entered but not listed (mode 0311) hides nothing from a program that
        # opens a file in it by its name (`.claude/settings.json`): it is odd, never empty
        odd.append(os.path.relpath(exc.filename, folder) if exc.filename else str(exc))

    for path in paths:
        parts = path.split("/")
        if any(os.path.islink(folder.joinpath(*parts[:end])) for end in range(1, len(parts))):
            odd.append(path)  # a linked folder on the way leads out of the checkout
            continue
        full = folder / path
        if full.is_symlink() or full.is_file():
            found[path] = "link" if full.is_symlink() else "file"
        elif full.is_dir():
            # never into a linked folder: listed as a link
            for top, folders, files in os.walk(full, onerror=unlisted):
                shown = Path(top).relative_to(folder).as_posix()
                for name in folders + files:
                    entry = os.path.join(top, name)
                    if os.path.islink(entry):
                        found[f"{shown}/{name}"] = "link"
                    elif name in files:
                        found[f"{shown}/{name}"] = "file" if os.path.isfile(entry) else "odd"
        elif os.path.lexists(full):
            odd.append(path)
    return found, odd


def differing_on_disk(root: Path, folder: Path, commit: str, paths: tuple[str, ...]) -> list[str]:
    """Of `paths` (files or folders) in the checkout at `folder`, every file or link under them
    that `commit` does not hold as it is there, byte for byte (a link by its target), every one
    `commit` holds that is gone from there (settings with deny rules), and any reached through a
    linked folder. The checkout's own git (its index, which says what it
    believes unchanged, and its `.git` file) is not asked: whoever works there can write both.
    `commit` is read in the repository at `root`; no filter program runs."""
    found, odd = _on_disk(folder, paths)
    held: dict[str, tuple[str, str]] = {}
    # the commit's side, by its id, asked once a process: a review compares its worktree with the
    # commit before it starts and again once it ended, most often the same commit (tests/test_git_calls.py)
    listed = of_ids("ls-tree", root, (commit,), lambda: git(
        ["--literal-pathspecs", "ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit, "--", *paths],
        root).split("\0"), about=paths)
    for entry in listed:
        meta, _, path = entry.partition("\t")
        if path:
            mode, _, object_id = meta.split()
            held[path] = (mode, object_id)
    files = [path for path, kind in found.items() if kind == "file" and held.get(path, ("",))[0].startswith("100")]
    hashed = git(["hash-object", "--no-filters", "--", *(str(folder / path) for path in files)], root).split() if files else []
    same = {path for path, object_id in zip(files, hashed) if object_id == held[path][1]}
    for path, kind in found.items():
        if kind == "link" and held.get(path, ("",))[0] == "120000":
            if git(["cat-file", "blob", held[path][1]], root) == os.readlink(folder / path):
                same.add(path)
    gone = [path for path in held if path not in found and not any(path.startswith(bad + "/") for bad in odd)]
    return odd + [path for path in found if path not in same] + gone



INDEX_BYTES = 1 << 30  # the most of a checkout's index differing_in_index reads (a sparse file of terabytes is no index)


def differing_in_index(root: Path, folder: Path, index: Path, commit: str, paths: tuple[str, ...]) -> list[str]:
    """Of `paths` (files), those the checkout's index file `index` holds otherwise than `commit`
    does (another blob or mode, or an entry `commit` has not). git reads an attributes file from the
    index where the checkout has none on disk (hostile review 36): whoever works there can write an
    entry alone, so the look at the disk (differing_on_disk) cannot see it. The index is read as a
    regular file, copied, and listed by drover's git in `root`: git in the checkout would wait for
    ever on a fifo put in its place (or on the checkout's HEAD). No index: nothing differs. Only the
    paths that are no regular file in the checkout at `folder` count (git reads the index for those
    alone), and no git is asked when an index of version 2 or 3, which spells each path whole, names
    none of them: the usual case costs a drive no git process (tests/test_git_calls.py)."""
    import stat
    import tempfile

    from drover.git.files import read_regular

    def regular(path: str) -> bool:
        try:
            return stat.S_ISREG(os.lstat(folder / path).st_mode)
        except OSError:
            return False

    paths = tuple(path for path in paths if not regular(path))
    if not paths:
        return []
    try:  # read_regular refuses an index past INDEX_BYTES by its size, before reading it
        data = read_regular(index, largest=INDEX_BYTES)  # not the 16 MB of a file drover's steering reads
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise GitError(f"{index}: {exc.strerror}") from None
    # a split index (its `link` extension) keeps entries in another file, a sparse one (`sdir`) a
    # folder's as one entry, its tree, which git expands on reading (hostile review 37): git is asked then
    spelled_whole = (data[:4] == b"DIRC" and int.from_bytes(data[4:8], "big") in (2, 3)
                     and b"link" not in data and b"sdir" not in data)
    if spelled_whole and not any(path.encode("utf-8", "surrogateescape") + b"\0" in data for path in paths):
        return []
    with tempfile.TemporaryDirectory(prefix="drover-index-") as scratch:
        copy = Path(scratch) / "index"
        copy.write_bytes(data)
        done = run(["--literal-pathspecs", "ls-files", "-s", "-z", "--", *paths], root,
                   env_add={"GIT_INDEX_FILE": str(copy)})
    if done.returncode != 0:
        raise failure(["ls-files"], done)
    listed = git(["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *paths], root)
    held = {path: meta.split()[0] + " " + meta.split()[2]
            for meta, _, path in (entry.partition("\t") for entry in listed.split("\0")) if path}
    found: list[str] = []
    for meta, _, path in (entry.partition("\t") for entry in done.stdout.split("\0")):
        mode, object_id = (meta.split() + ["", ""])[:2]
        if path and held.get(path) != f"{mode} {object_id}" and path not in found:
            found.append(path)
    return found
