"""Merges: an item's branch into base (finish), base into an item's branch, and a merge's conflicts."""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

from drover.errors import GitError, Refused, escaped, shown_paths
from drover.git.branches import current_branch, heads_and_checked_out, heads_of, local_ref, require_base
from drover.git.history import of_ids
from drover.git.run import failure, git, one_command_line, said_line, run, run_capped, succeeds
from drover.git.worktrees import dirty_paths


class MergeConflict(Refused):
    """finish met a conflict with base: `drive` hands it back to the loop, `finish` alone refuses."""


def merge(root: Path, branch: str, base: str, message: str, *, commit: str = "",
          carried: Callable[[str], bool] = lambda path: False, switched: Callable[[str], None] = lambda was: None) -> str:
    """Merge `branch` into `base` in the checkout at `root` (--no-ff, never a push); return the merge sha.

    What merges is the commit the branch points at, by its id (`commit`, when given: Refused
    unless the branch is at exactly that commit). The checkout must be on `base`, or clean
    enough to switch to it but for the uncommitted paths `carried` accepts (drover's own item
    edits), which the switch takes along as git does when they do not differ between the two.
    The merge is made apart from the checkout (`git merge-tree`, then the merge commit), and the
    checkout then moves to it as a fast-forward: on a conflict nothing was touched, and Refused
    names the conflicting files. No git hook runs (run.py). `switched` hears of a checkout that
    was on another branch (its name; "" a detached HEAD) and now is on `base`.
    """
    # the heads, and the branch checked out when it is base (the usual case) or the item's, in one git call
    heads, checked_out = heads_and_checked_out(root, branch, base)
    original = checked_out if checked_out is not None else current_branch(root)
    if original != base:
        dirty = [path for path in dirty_paths(root) if not carried(path)]
        if dirty:
            raise Refused(f"{root} is on {original or 'a detached HEAD'} with uncommitted changes ({shown_paths(dirty)}): "
                          f"switch it to {base} before merging")
    for attempt in range(MERGE_TRIES):
        if attempt:
            heads = heads_of(root, branch, base)
        head = heads.get(branch, "")
        if not head:
            raise GitError(f"branch {branch} does not exist")
        if commit and head != commit:
            raise Refused(f"{branch} is at {head[:7]}, not at {commit[:7]}: nothing was merged")
        if base not in heads:
            require_base(root, base)  # says so in the words every caller uses
        made = _merged_tree(root, heads[base], head)
        if made is None:  # a git older than 2.38
            return _merge_in_checkout(root, branch, base, message, head, original, switched)
        tree, conflicted = made
        if conflicted:
            raise MergeConflict(f"merging {branch} into {base} conflicts in {', '.join(map(escaped, conflicted))}: "
                                f"nothing was merged and {root} is as it was; resolve on {branch} and finish again")
        merged = git(["commit-tree", "-p", heads[base], "-p", head, "-m", message, tree], root).strip()
        if original != base and attempt == 0:
            # switch takes only a branch: no other ref stands in; it refuses to overwrite a carried edit
            moved = run(["switch", "--quiet", "--no-overwrite-ignore", base], root)
            if moved.returncode != 0:
                raise Refused(f"{root} is on {original or 'a detached HEAD'} and git would not switch it to "
                              f"{base} ({said_line(moved.stderr)}): switch it to {base} before merging")
            switched(original)
        # no ignored file is written over (git takes one for expendable): finish refused any first
        # (hostile review 33), and this holds where one appeared since
        # only forward from the base head the merge was made on; when base moved meanwhile (drover's
        # own item commits land on it), the merge is made again on the new head
        args = ["merge", "--ff-only", "--quiet", "--no-overwrite-ignore", "--end-of-options", merged]
        done = run(args, root)
        if done.returncode == 0:
            return merged
        if heads_of(root, base).get(base) == heads[base]:
            raise failure(args, done)
    raise GitError(f"{base} kept moving while {branch} was merged into it: nothing was merged; finish again")


MERGE_TRIES = 5  # merges made again because base moved under them


def _merged_tree(root: Path, base_head: str, head: str) -> tuple[str, list[str]] | None:
    """The tree of the merge of `head` into `base_head`, made without the checkout, and the
    conflicting files ([] when it merged cleanly); None when git is too old to make it (2.38)."""
    args = ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", "--end-of-options", base_head, head]
    done = run(args, root)
    if done.returncode == USAGE and "--write-tree" not in done.stdout + done.stderr:
        return None  # an older merge-tree: it knows no such option (its usage does not name it)
    if done.returncode not in (0, 1):
        raise failure(args, done)
    # -z: the tree, then each conflicting path, each ended by a NUL
    tree, *paths = [field for field in done.stdout.split("\0") if field]
    return tree, paths if done.returncode == 1 else []


USAGE = 129  # git's exit status for options it does not know


def _merge_in_checkout(root: Path, branch: str, base: str, message: str, head: str, original: str,
                       switched: Callable[[str], None]) -> str:
    """merge for a git older than 2.38: `merge --no-ff` in the checkout; on a conflict the merge is
    aborted and the checkout put back as it was."""
    original_head = git(["rev-parse", "HEAD"], root).strip()
    if original != base:
        git(["switch", "--quiet", base], root)
    args = ["merge", "--no-ff", "--no-edit", "--no-overwrite-ignore", "-m", message, "--end-of-options", head]
    done = run(args, root)
    if done.returncode == 0:
        if original != base:
            switched(original)
        return git(["rev-parse", "HEAD"], root).strip()
    conflicted = _conflicted(root)
    if merge_in_progress(root):
        git(["merge", "--abort"], root)
    if original != base:
        # Back where the operator left it: their branch, or the very commit if HEAD was detached.
        git(["switch", "--quiet", original] if original else ["switch", "--quiet", "--detach", original_head], root)
    if conflicted:
        raise MergeConflict(f"merging {branch} into {base} conflicts in {', '.join(map(escaped, conflicted))}: "
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


def merge_in_progress(checkout: Path) -> bool:
    """A merge was begun in `checkout` and not concluded (its MERGE_HEAD is there)."""
    return Path(checkout).is_dir() and succeeds(["rev-parse", "--verify", "--quiet", "MERGE_HEAD"], checkout)


def unmerged_files(checkout: Path) -> list[str]:
    """The conflicting files of a merge in progress in `checkout`; [] when none is."""
    return _conflicted(checkout) if merge_in_progress(checkout) else []


def _conflicted(checkout: Path) -> list[str]:
    # -z: each path as it is (git quotes a name holding `"`, `\` or a control character, whatever
    # core.quotePath says, and a quoted name names no file)
    out = git(["diff", "--name-only", "-z", "--diff-filter=U"], checkout, check=False)
    return [path for path in out.split("\0") if path]


# The lines git writes around each side of a conflict: `<<<<<<< HEAD` and `>>>>>>> main`, seven long
# unless a `conflict-marker-size` attribute says otherwise, and whatever the size, the first names
# HEAD (git merge's name for the side merged into). The attributes are not asked: the merge read
# them from the disk as it was then (a subfolder's .gitattributes the branch committed and took off
# the disk said 3 to `git check-attr` and nothing to the merge). A CRLF file's markers end in CR, as
# its lines do (a real CR in the patterns). The `=======` between is left out, as it is also a
# heading's underline in reStructuredText. _OPENING is a whole line, for grep and for re alike.
_OPENING = "<+ HEAD\r?"
# What the marker look reads of git's answer, and the most marker lines it names: a branch decides both
# (a file of gigabytes of marker lines packs in a few megabytes), and read whole they took minutes and
# gigabytes before each check (hostile review 39). The lines past them are there for the next round.
MARKERS_READ_BYTES = 32 << 20
MOST_MARKERS = 1000
_MARKER = f"^(<{{7,}}|>{{7,}})( |\r?$)|^{_OPENING}$"


def conflict_markers(checkout: Path, commit: str, paths: list[str]) -> list[str]:
    """`path:line` of each conflict marker line that `paths` hold in `commit`: a merge committed with
    its conflicts left in the files."""
    if not paths:
        return []
    # each path as named (a conflicted file may be called `:(glob)*`): no pathspec magic; and every
    # file as text (-a), whatever a committed .gitattributes says of it (`-diff` makes it binary)
    # more paths than one command line holds (git grep reads none from standard input): every file of
    # `commit` grepped, and the lines of those paths kept
    named = ["--", *paths] if one_command_line(paths) else []
    # at most MOST_MARKERS lines a file (-m, git 2.38, as conflicts_merged needs): git grep holds a
    # file's matches until the file ends
    done, cut = run_capped(["--literal-pathspecs", "grep", "-n", "-a", "-z", "-m", str(MOST_MARKERS), "-E", _MARKER,
                            commit, *named], checkout, MARKERS_READ_BYTES)
    if not cut and done.returncode not in (0, 1):  # 1: no line matched
        raise failure(["grep"], done)
    wanted = set(paths)
    found = []
    for where, number in _grepped(done.stdout):
        path = where.removeprefix(commit + ":")
        if named or path in wanted:
            found.append(f"{path}:{number}")
            if len(found) == MOST_MARKERS:
                break
    return found


def _grepped(out: str) -> Iterator[tuple[str, str]]:
    """(`<commit>:<path>`, line number) of each match `git grep -n -z` wrote: `<commit>:<path>` NUL
    `<number>` NUL `<text>` LF, read in that order, since a path may hold a line break (or any of the
    breaks splitlines takes: `\\x1c`, U+2028) and a matched line any character but LF, NUL among
    them (hostile review 39: a path's markers were cut in two or dropped, a line's text gave names)."""
    at = 0
    while (name_end := out.find("\0", at)) >= 0 and (number_end := out.find("\0", name_end + 1)) >= 0:
        yield out[at:name_end], out[name_end + 1:number_end]
        text_end = out.find("\n", number_end + 1)
        if text_end < 0:
            return
        at = text_end + 1


def conflicts_merged(root: Path, base: str, head: str) -> list[str]:
    """The files that conflicted in the merges `head` holds since it left `base` (the merges of base
    drover handed the implementer), each merge made again from its parents (`git merge-tree`): the
    branch says it, whichever drive or run concluded the merge; [] with a git older than 2.38."""
    found: list[str] = []
    out = git(["rev-list", "--merges", "--parents", "--end-of-options", head, f"^{local_ref(base)}"], root)
    for line in out.splitlines():
        _, *parents = line.split()
        # an octopus is each of its other parents merged into its first
        for other in parents[1:]:
            merged = _merged_tree(root, parents[0], other)
            found += [path for path in (merged[1] if merged else []) if path not in found]
    return found


_HEAD_MARKER = re.compile(_OPENING)  # the opening marker (above), whatever its size
_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def head_markers(root: Path, base: str, head: str, *, base_head: str = "") -> list[str]:
    """`path:line` of each `<<<<<<< HEAD` line that `head` adds to what `base` has, in any file: a
    merge's conflicts carried on under another name, or in a commit that is no longer a two-parent
    merge (squashed, an octopus). The files whose changes add or remove such a line first (git's
    `-G`, no text read here), then their diff, read hunk by hunk (every file as text): what a branch
    adds elsewhere, however large, neither costs the read nor pushes a marker past its bound.
    `base_head`: base's head, when the caller has just read it; with `head` an id too, the answer is
    kept for the process (a drive asks before its review and again at its finish)."""
    return of_ids("markers", root, (base_head, head), lambda: _head_markers(root, base_head or local_ref(base), head))


def _head_markers(root: Path, base: str, head: str) -> list[str]:
    common = ["--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "-a"]
    marked = git(["diff", *common, "--name-only", "-z", f"-G^{_OPENING}$", "--end-of-options", base, head],
                 root)
    paths = [path for path in marked.split("\0") if path]
    if not paths:
        return []
    named = ["--", *paths] if one_command_line(paths) else []
    # no context between hunks either: `diff.interHunkContext` in the shared config joined nearby hunks
    # with context lines, which the hunk's counts include and the read below takes for none, so it read
    # on into the next file's header and hunks, a marker there unseen (hostile review 41)
    args = ["--literal-pathspecs", "diff", *common, "-U0", "--inter-hunk-context=0", "--src-prefix=a/",
            "--dst-prefix=b/", "--end-of-options",
            base, head, *named]
    done, cut = run_capped(args, root, MARKERS_READ_BYTES)
    if not cut and done.returncode != 0:
        raise failure(["diff"], done)
    out = done.stdout
    found: list[str] = []
    path, removed, added, number = "", 0, 0, 0
    for line in out.split("\n"):
        if removed or added:  # inside a hunk: its lines, whatever they begin with
            if line.startswith("-"):
                removed -= 1
            elif line.startswith("+"):
                if _HEAD_MARKER.fullmatch(line[1:]):
                    found.append(f"{path}:{number}")
                    if len(found) == MOST_MARKERS:
                        return found
                added, number = added - 1, number + 1
            continue
        if line.startswith("+++ "):
            path = _diff_name(line[4:]).removeprefix("b/")
        elif hunk := _HUNK.match(line):
            removed = int(hunk.group(1) if hunk.group(1) is not None else 1)
            number = int(hunk.group(2))
            added = int(hunk.group(3) if hunk.group(3) is not None else 1)
    return found


def _diff_name(name: str) -> str:
    """A file's name as a patch's `+++ ` line writes it: git ends a name holding a space with a tab,
    and quotes one holding `"`, `\\` or a control character, escaped as C does (hostile review 40:
    `a b.txt` was named `a b.txt<TAB>`, `q"x.txt` as `q\\"x.txt"`)."""
    if name.endswith("\t"):
        name = name[:-1]
    if not (len(name) > 1 and name.startswith('"') and name.endswith('"')):
        return name
    simple = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
    out, at, text = bytearray(), 0, name[1:-1]
    while at < len(text):
        char = text[at]
        if char == "\\" and at + 1 < len(text):
            if text[at + 1] in simple:
                out.append(simple[text[at + 1]])
                at += 2
                continue
            if re.fullmatch("[0-3][0-7][0-7]", text[at + 1:at + 4]):
                out.append(int(text[at + 1:at + 4], 8))
                at += 4
                continue
        out += char.encode()
        at += 1
    return out.decode("utf-8", "replace")
