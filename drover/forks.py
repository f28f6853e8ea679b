"""Work done in a forked child process while this one goes on, its answer back through a pipe.

The catalogue's helpers use it: the parse workers (parsing.py), the child that stats every item
file and the one that reads a list's ledger rows (listing.py). A child runs one function, sends
what it returns as one marshal, and ends with os._exit: no atexit, no finalizer, no buffer of
this process flushed twice, and the ledger connection it inherited never touched. Whatever goes
wrong on the way (no fork, a child killed, garbage in the pipe) the caller learns as "no answer"
and does the work itself, so a child only ever saves time.
"""
from __future__ import annotations

import marshal
import os
import sys
from typing import Any, Callable, NamedTuple


class Child(NamedTuple):
    """A started child: the read end of its pipe and its pid."""

    read_end: int
    pid: int


def forking(count: int, variable: str, default: int) -> bool:
    """Whether `count` is enough to fork for (the threshold `default`, or $`variable` when set)."""
    try:
        at = int(os.environ.get(variable, ""))
    except ValueError:
        at = default
    if count < max(at, 1) or not hasattr(os, "fork"):
        return False
    threading = sys.modules.get("threading")
    # a fork copies one thread of several: a lock another holds would never be released
    return threading is None or threading.active_count() == 1


def forked_with_pipe() -> tuple[int, int, int] | None:
    """A pipe and a fork: (read end, write end, pid: 0 in the child); None when either failed."""
    try:
        read_end, write_end = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    return read_end, write_end, pid


def start(work: Callable[[], Any], count: int, variable: str, default: int) -> Child | None:
    """A child computing work() (see forking for when there is one), or None: do it here."""
    if not forking(count, variable, default):
        return None
    forked = forked_with_pipe()
    if forked is None:
        return None
    read_end, write_end, pid = forked
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            data = memoryview(marshal.dumps(work()))
            while data:
                data = data[os.write(write_end, data):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return Child(read_end, pid)


def answer(child: Child) -> tuple[Any] | None:
    """(what the child's work returned,) once it has ended well; None if it did not."""
    chunks: list[bytes] = []
    failed = False
    try:
        while data := os.read(child.read_end, 1 << 20):
            chunks.append(data)
    except OSError:
        failed = True
    finally:
        os.close(child.read_end)
    try:
        _, status = os.waitpid(child.pid, 0)
    except ChildProcessError:
        return None
    if failed or not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    try:
        return (marshal.loads(b"".join(chunks)),)
    except (EOFError, ValueError, TypeError):
        return None
