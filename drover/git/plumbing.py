"""drover's own commits of item files, built with git's plumbing: never in the operator's index."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

from drover.errors import GitError
from drover.git.run import said_line, run, run_bytes

T = TypeVar("T")

# How long a commit of drover's own waits out a lock another git holds (the operator's own git,
# or one a killed drover started and that is still finishing) before the step counts as failed.
LOCK_PATIENCE = 5.0
_HELD = ("File exists", "cannot lock ref")


def _plumb(args: list[str], root: Path, *, stdin: bytes = b"") -> bytes:
    """One plumbing step of a commit: its stdout, or GitError with the step and git's words."""
    done = run_bytes(args, root, stdin)
    if done.returncode != 0:
        said = said_line(done.stderr.decode("utf-8", "replace")) or f"exit status {done.returncode}"
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
        done = run(["rev-parse", "--quiet", "--verify", "HEAD^{commit}"], root)
        old = done.stdout.strip() if done.returncode == 0 else ""  # "": an unborn branch, this is its first commit
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
