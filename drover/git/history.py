"""History: a branch's commits that base lacks, the files they change, and the objects at a commit.

Commit and Recent are the rows recent_commits returns; the template data hands them to review
prompts as they are (drover/prompts/fields.py).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, NamedTuple

from drover.errors import GitError
from drover.git.branches import SHA, branch_exists, exact_heads, head_of, no_base
from drover.git.run import failure, git, one_command_line, run, succeeds


class Commit(NamedTuple):
    """One commit on the item's branch that base lacks, with its size."""

    Sha: str = ""
    Subject: str = ""
    Files: int = 0
    Insertions: int = 0
    Deletions: int = 0


class Recent(NamedTuple):
    """The branch's commits base lacks, or why git could not say."""

    Commits: tuple[Commit, ...] = ()
    Unavailable: str = ""
    Omitted: int = 0  # the oldest commits left out of Commits past LISTED_COMMITS


# What the review prompt lists of a branch's commits, each line short: an implementer's commit of a
# 100 MB subject was read whole (350 MB of drover's memory) and a few thousand commits of long
# subjects made a prompt over the render's cap, the review failing as `review.tmpl: template failed`
# (hostile review 35). git cuts a subject to SUBJECT_COLUMNS (ending it `..`); only the newest
# LISTED_COMMITS are listed, the head under review among them, and `Omitted` counts the rest.
SUBJECT_COLUMNS = 300
LISTED_COMMITS = 1000


# Every path a commit changes, a submodule's included: `diff.ignoreSubmodules = all` in the shared
# `.git/config`, or `ignore = all` for a submodule `.gitmodules` maps (read from the checkout, or
# `submodule.<name>.ignore` in that config), which an agent can write, hid a gitlink the branch added
# from every diff and log below, and a gitlink at `.drover/ledger.db` passed finish's check of
# drover's own files: the merge's checkout made it an empty folder, the ledger gone (hostile review
# 31). The option on the command line overrides both; `-c diff.ignoreSubmodules` would not the second.
SUBMODULES = "--ignore-submodules=none"


def submodule_names(worktree: Path) -> list[str]:
    """The names the `.gitmodules` of `worktree` gives its submodules ([] with none, or one git
    cannot read). A reviewer's git is told `submodule.<name>.ignore = none` for each
    (agents/environment.agent_git): `ignore = all` there, or in the shared config, hid from its
    `git diff`, `git show` and `git log -p` a submodule commit the branch moved, and
    `diff.ignoreSubmodules = none` overrides neither. No git runs where there is no `.gitmodules`."""
    path = worktree / ".gitmodules"
    if not os.path.lexists(path):
        return []
    done = run(["config", "--file", str(path), "--null", "--name-only", "--get-regexp", r"^submodule\..*\.path$"],
               worktree)
    if done.returncode != 0:
        return []
    return [key[len("submodule."):-len(".path")] for key in done.stdout.split("\0") if key.count(".") >= 2]


# No user attributes file, as a reviewer's git reads none (agents/environment.REVIEW_GIT): one the
# shared config names (`* -diff`) made drover's views differ from the reviewer's (hostile review 34).
NO_USER_ATTRIBUTES = ("-c", "core.attributesFile=" + os.devnull)


def compare(root: Path, branch: str, base: str) -> tuple[str, str, str]:
    """The heads of the branches `branch` and `base`, or why `base..branch` cannot be answered:
    (branch sha, base sha, "") or ("", "", why)."""
    if branch and base:
        # the usual case in one git call: both branches exist; the checks below only say which does not
        heads = exact_heads(root, branch, base)
        if heads is not None:
            return heads[0], heads[1], ""
    if not succeeds(["rev-parse", "--git-dir"], root):
        return "", "", f"{root} is not a git repository"
    if not branch:
        return "", "", "the item has no branch yet"
    if not branch_exists(root, branch):
        return "", "", f"branch {branch} does not exist"
    return "", "", f"base {base} does not exist"


def recent_commits(root: Path, branch: str, base: str, *, compared: tuple[str, str, str] | None = None) -> Recent:
    """The commits on `branch` that `base` lacks, oldest first, with their sizes; or why not.

    `compared`: what `compare(root, branch, base)` just said, so a caller asking twice reads the
    heads once."""
    head, base_head, problem = compared or compare(root, branch, base)
    if problem:
        return Recent(Unavailable=problem)
    try:
        # no signature shown, no textconv, no external diff: each would run a program the
        # repository's shared config names, which an agent can write (run.py). A merge commit is
        # counted against its first parent, what it brought into the branch: git shows no figures
        # for a merge otherwise, and `(0 files)` hid a file an implementer's merge of base added of
        # its own (hostile review 19). Not against a merge made again (--remerge-diff): that runs
        # any merge driver the shared config names, as the operator.
        # the user's attributes file off, as for a reviewer's git: one the shared config names
        # (`* -diff`) counted every file binary, `+0 -0` (hostile review 34)
        out = git([*NO_USER_ATTRIBUTES, "log", "--reverse", "-M", "--numstat",
                   "--diff-merges=first-parent", "--no-show-signature",
                   "--no-textconv", "--no-ext-diff", SUBMODULES, f"--format=%x00%H%x00%<({SUBJECT_COLUMNS},trunc)%s%x00",
                   "--end-of-options",
                   f"{base_head}..{head}"],
                  root)
    except GitError as exc:
        return Recent(Unavailable=exc.message)
    commits = []
    # each commit is its id, its subject and its figures, each ended by a NUL, which no subject
    # can hold: %s is one line of the message to git, but a carriage return in it is a line break
    # to the text read here, and ended the subject there (the rest was read as figures)
    fields = out.split("\0")
    for sha, subject, stats in zip(fields[1::3], fields[2::3], fields[3::3]):
        files = insertions = deletions = 0
        for line in stats.splitlines():
            parts = line.split("\t", 2)
            if len(parts) != 3:
                continue
            files += 1
            # Binary files show "-" for both counts: a changed file with no line count.
            insertions += int(parts[0]) if parts[0].isdigit() else 0
            deletions += int(parts[1]) if parts[1].isdigit() else 0
        # git pads a shorter subject to the columns with spaces: its own ends in none (commit strips them).
        # git's cut counts columns, and a combining mark or a zero-width space takes none: megabytes of
        # them came out whole (hostile review 37), so the subject is cut to as many characters too
        subject = subject.rstrip(" ")
        if len(subject) > SUBJECT_COLUMNS:
            subject = subject[:SUBJECT_COLUMNS - 2] + ".."
        commits.append(Commit(Sha=sha[:12], Subject=subject, Files=files, Insertions=insertions,
                              Deletions=deletions))
    omitted = max(0, len(commits) - LISTED_COMMITS)
    return Recent(Commits=tuple(commits[omitted:]), Omitted=omitted)


def modified_files(root: Path, branch: str, base: str, *,
                   compared: tuple[str, str, str] | None = None) -> tuple[list[str], str]:
    """Files `branch` modified since it left `base` (added and deleted ones excluded): (paths, "") or
    ([], why). `compared` as recent_commits takes it."""
    head, base_head, problem = compared or compare(root, branch, base)
    if problem:
        return [], problem
    try:
        out = git(["diff", "--name-status", "-z", "-M", "--no-ext-diff", "--no-textconv", SUBMODULES,
                   "--end-of-options", f"{base_head}...{head}"], root)
    except GitError as exc:
        return [], exc.message
    # -z: each status, then its path, or for a rename (R<score>) the old path and the new one.
    # M is a change of content or mode; A, D and T (a file that became a link, or the reverse:
    # one path deleted and another added) do not count; a renamed file counts under its new name.
    fields = out.split("\0")
    paths = set()
    index = 0
    while index < len(fields) and fields[index]:
        status = fields[index]
        width = 2 if status[0] in "RC" else 1
        names = fields[index + 1:index + 1 + width]
        index += 1 + width
        if status[0] in "MR" and names:
            paths.add(names[-1])
    return sorted(paths), ""


def commits_beyond(root: Path, head: str, base_head: str) -> int:
    """Commits the commit `head` has that the commit `base_head` lacks."""
    return int(git(["rev-list", "--count", "--end-of-options", f"{base_head}..{head}"], root).strip() or 0)


def moved_only_under(root: Path, since: str, until: str, folder: str, *, head: str = "") -> bool:
    """Whether the commit `until` descends from `since` and its tree differs from it only under
    `folder`: what base gained is records in that folder and nothing else. With `head`, also whether
    merging `head` into `until` makes what merging it into `since` made, but under `folder`: a
    commit base gained can change the merge base (a merge of one of `head`'s ancestors, its tree
    base's own), and the merge then lands another tree than the one checked."""
    if not succeeds(["merge-base", "--is-ancestor", "--end-of-options", since, until], root):
        return False
    out = git(["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", SUBMODULES,
               "--end-of-options", since, until], root)
    top = folder.strip("/") + "/"
    if not all(path.startswith(top) for path in out.split("\0") if path):
        return False
    if not head:
        return True
    trees = []
    for onto in (since, until):
        done = run(["merge-tree", "--write-tree", "--no-messages", "--end-of-options", onto, head], root)
        if done.returncode != 0:  # a conflict, or a git too old to say: the check runs again
            return False
        trees.append(done.stdout.split()[0])
    out = git(["diff-tree", "-r", "--name-only", "-z", "--no-renames", SUBMODULES, "--end-of-options", *trees], root)
    return all(path.startswith(top) for path in out.split("\0") if path)


def count_commits(root: Path, since: str, until: str) -> int | None:
    """Commits `until` has that `since` lacks; None when `since` is not an ancestor (history rewritten)."""
    if not succeeds(["merge-base", "--is-ancestor", "--end-of-options", since, until], root):
        return None
    return commits_beyond(root, until, since)


def merge_bases(root: Path, base_head: str, commit: str) -> list[str]:
    """Every merge base of the commits `base_head` and `commit` ([] when they share no history).
    `[commit]` exactly when `commit` is `base_head` or one of its ancestors: nothing of it to merge."""
    return of_ids("merge-base", root, (base_head, commit), lambda: git(
        ["merge-base", "--all", "--end-of-options", base_head, commit], root, check=False).split(), keep_empty=False)


def merged_by(root: Path, base_head: str, commit: str) -> str:
    """The commit on base's first-parent line that merged `commit` (one of its later parents): the
    merge a finish makes, or one made by hand with a merge commit; "" when there is none."""
    out = git(["rev-list", "--first-parent", "--parents", "--end-of-options", f"{commit}..{base_head}"], root,
              check=False)
    for line in out.splitlines():
        ids = line.split()
        if commit in ids[2:]:
            return ids[0]
    return ""


def changed_paths(root: Path, base: str, commit: str, *, base_head: str = "", bases: list[str] | None = None) -> list[str]:
    """Every path `commit` changes since it left the branch `base` (the merge-base diff: what a
    merge would bring), both sides of a rename. `base_head`: base's head, when the caller has just
    read it; `bases`: merge_bases(base_head, commit), when the caller has just asked them."""
    base_head = base_head or head_of(root, base)
    if not base_head:
        raise no_base(root, base)
    return of_ids("changed", root, (base_head, commit), lambda: _changed_paths(root, base_head, commit, bases))


# What git says of commits named by their ids never changes: an id names a commit's content and
# parents (and so its tree), and drover's git reads no replacements or grafts (run.AS_COMMITTED). A
# drive asks the same of each item before its review and again at its finish (the merge base, the
# paths changed, the markers the branch adds, what the reviewer's files are in the commit): the
# answers are kept for the process. Never an answer of a question by a ref's name, which an agent
# moves at will; nor one asked while a shallow file (`shallow` in the common git folder, which an
# agent can write too, and which no variable of git's turns off without breaking a true shallow
# clone) cuts commits from their parents: a merge base it leaves, and the paths changed since that
# base, would stand after the file went, when the merge, asked afresh, brings more (hostile review 50).
_ANSWERS: dict[tuple[object, ...], list[str]] = {}
_MOST_ANSWERS = 2048


def of_ids(question: str, root: Path, ids: tuple[str, ...], ask: Callable[[], list[str]], *,
           about: tuple[str, ...] = (), keep_empty: bool = True) -> list[str]:
    """ask(), or the answer it gave before for the same commits named by their ids (`about`: the
    rest of the question, its paths). An empty answer is kept only when `keep_empty`: "no merge
    base" may be a git that failed, or objects that arrive later (a worker's bundle)."""
    if not all(SHA.fullmatch(commit) for commit in ids) or _cut(root):
        return ask()
    key = (question, root, ids, about)
    known = _ANSWERS.get(key)
    if known is None:
        known = ask()
        if known or keep_empty:
            if len(_ANSWERS) >= _MOST_ANSWERS:
                _ANSWERS.clear()
            _ANSWERS[key] = known
    return list(known)


def cut_merge_bases(root: Path, base_head: str, commit: str) -> bool:
    """Whether the repository's shallow file gives `base_head` and `commit` other merge bases than
    their whole history does: what a merge of them brings then depends on the file, which an agent
    can write and remove (hostile review 50). False without the file, and where the history past
    the cut is not there to read (a true shallow clone): git's merge reads the cut there as well."""
    if not os.path.lexists(root / ".git" / "shallow"):
        return False
    whole = run(["merge-base", "--all", "--end-of-options", base_head, commit], root, env_add={"GIT_SHALLOW_FILE": ""})
    if whole.returncode != 0:
        return False
    return sorted(whole.stdout.split()) != sorted(merge_bases(root, base_head, commit))


def _cut(root: Path) -> bool:
    """Whether history at `root` may be cut (a shallow file), or where it is kept is not known here
    (no `.git` folder: a linked worktree's common folder is elsewhere)."""
    dot_git = root / ".git"
    return not dot_git.is_dir() or os.path.lexists(dot_git / "shallow")


def _changed_paths(root: Path, base_head: str, commit: str, bases: list[str] | None) -> list[str]:
    # Every merge base, not the one `A...B` picks: with two (a criss-cross the branch's own merges
    # can make), a path the branch left as one base has it can still differ from the virtual base
    # the merge uses, and the merge brings it (docs/security.md). A path counts when the commit
    # differs from any base.
    if bases is None:
        bases = merge_bases(root, base_head, commit)
    if not bases:  # no common history: git's own words
        git(["diff", "--name-only", "--end-of-options", f"{base_head}...{commit}"], root)
    changed: dict[str, None] = {}
    for merge_base in bases:
        out = git(["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", SUBMODULES, "--end-of-options",
                   merge_base, commit], root)
        changed.update(dict.fromkeys(path for path in out.split("\0") if path))
    return list(changed)


def commits_paths(root: Path, since: str, until: str) -> list[str]:
    """Every path some commit of `since..until` changes; a merge commit counts where it differs
    from all its parents (what it brought of its own, an evil merge's additions included)."""
    out = git(["log", "--format=", "--name-only", "-z", "--no-renames", "-c", SUBMODULES, "--end-of-options",
               f"{since}..{until}"], root)
    return sorted({path.strip("\n") for path in out.split("\0") if path.strip("\n")})


def shown_as_binary(cwd: Path, base_head: str, head: str) -> set[str]:
    """The paths `git diff base_head...head` run in `cwd` shows as binary (`Binary files ...
    differ`, numstat's `-`): the attributes git reads there (the `.gitattributes` files of that
    checkout, at every depth, and the shared `info/attributes`) decide it as much as the content."""
    # the user's attributes file is off, as it is for a reviewer's git (agents/environment.REVIEW_GIT): one
    # the shared config names, saying `* -diff`, showed drover's checkout the binary the reviewer saw (review 34)
    out = git([*NO_USER_ATTRIBUTES, "diff", "--numstat", "-z", "--no-renames", "--no-ext-diff",
               "--no-textconv", SUBMODULES,
               "--end-of-options", f"{base_head}...{head}"], cwd)
    # -z without renames: `added TAB deleted TAB path`, each ended by a NUL
    return {fields[2] for fields in (entry.split("\t", 2) for entry in out.split("\0"))
            if len(fields) == 3 and fields[0] == "-"}


def blobs_at(root: Path, commit: str, paths: list[str]) -> dict[str, str]:
    """path -> the object id `commit` holds at that path, for those of `paths` it holds (a gitlink's
    commit too). More paths than one command line holds (a branch of 100,000 files): the whole of
    `commit` listed once and the paths picked from it (ls-tree reads no paths from standard input,
    and cat-file, which does, has no answer for a gitlink, whose commit is no object here)."""
    if not paths:
        return {}
    if one_command_line(paths):
        out, wanted = git(["ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *paths], root), None
    else:
        out, wanted = git(["ls-tree", "-r", "-t", "-z", "--full-tree", "--end-of-options", commit], root), set(paths)
    found: dict[str, str] = {}
    for entry in out.split("\0"):
        meta, _, path = entry.partition("\t")
        if path and (wanted is None or path in wanted):
            found[path] = meta.split()[-1]
    return found


def gitlinks_at(root: Path, commit: str, paths: list[str]) -> list[str]:
    """Those of `paths` that `commit` records as a submodule (a gitlink); [] for more paths than one
    command line holds (what finish says of them is a courtesy, not a check)."""
    if not paths or not one_command_line(paths):
        return []
    return gitlinks_in(git(["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--",
                            *paths], root))


def gitlinks_in(listing: str) -> list[str]:
    """The paths a `-z` listing of `ls-tree` or `ls-files --stage` names as a submodule (a gitlink,
    mode 160000)."""
    return [entry.partition("\t")[2] for entry in listing.split("\0") if entry.startswith("160000 ")]


def blobs_on_disk(root: Path, paths: list[str]) -> dict[str, str]:
    """path -> the object id git would give the file at that path in the checkout, for those that are files."""
    present = [path for path in paths if (root / path).is_file() and not (root / path).is_symlink()]
    if not present:
        return {}
    # the paths on standard input, one a line, each quoted as git quotes a name: hash-object takes a
    # line as a path unless it begins with `"`, and then unquotes it, and drops a line's last CR
    # (`items/a.md\r` hashed `items/a.md`); quoted, a name with a line break goes there too, however
    # many a branch adds (hostile review 39)
    done = run(["hash-object", "--stdin-paths"], root, stdin="".join(c_quoted(path) + "\n" for path in present))
    if done.returncode != 0:
        raise failure(["hash-object"], done)
    return dict(zip(present, done.stdout.split()))


def c_quoted(path: str) -> str:
    """`path` as git writes a name it quotes (`"a\\"b\\r"`): a backslash and a `"` escaped, every
    control character (a line break, a CR) and each byte a name's non-UTF-8 holds (surrogateescape) as
    its octal escape, and the rest as it is (UTF-8)."""
    out = []
    for char in path:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\{ord(char):03o}")
        elif 0xDC80 <= ord(char) <= 0xDCFF:
            out.append(f"\\{ord(char) - 0xDC00:03o}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
