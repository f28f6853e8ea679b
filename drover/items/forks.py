"""Work done in a forked child process while this one goes on, its answer back through a pipe.

The catalogue's helpers use it: the parse workers (parsing.py), and the child that stats every
item file and then, for a list, reads the ledger's part (listing.py). A child runs its functions
in turn, sends what each returns as one length-prefixed marshal, and ends with os._exit: no
atexit, no finalizer, no buffer of this process flushed twice, and the ledger connection it
inherited never touched. Whatever goes wrong on the way (no fork, a child killed, garbage in the
pipe) the caller learns as "no answer" and does the work itself, so a child only ever saves time.
"""
from __future__ import annotations

import marshal
import os
import signal
import sys
from typing import Any, Callable, Sequence


class Child:
    """A started child: the read end of its pipe, its pid, and how many answers are still to come."""

    def __init__(self, read_end: int, pid: int, answers: int = 1):
        self.read_end = read_end
        self.pid = pid
        self.answers = answers  # 0: the pipe is closed and the child reaped


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


def child(body: Callable[[int], None], prepare: Callable[[int], None] | None = None) -> tuple[int, int] | None:
    """Fork a child that runs prepare(w) then body(w), `w` its pipe's write end, and ends by
    os._exit (0 when body returned, 1 when it raised); here: (the pipe's read end, the child's
    pid), or None when no pipe or no fork could be had."""
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
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            if prepare is not None:
                prepare(write_end)
            body(write_end)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    return read_end, pid


def reap(read_end: int, pid: int, kill: bool) -> bool:
    """Close a child's pipe and wait for it (ended first when `kill`): whether it ended well."""
    os.close(read_end)
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        return False
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


def widen(fd: int) -> None:
    """Let the pipe hold up to 1 MiB (Linux; 64 KiB by default), so a child writing a long answer
    goes on working while the parent is busy elsewhere instead of waiting for it to read."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, 1 << 20)
    except (ImportError, AttributeError, OSError):
        pass  # another system, or a limit set lower: the default size works, only slower


def send(fd: int, value: Any) -> None:
    """One answer down the pipe: its length in 8 bytes, then its marshal."""
    data = marshal.dumps(value)
    message = memoryview(len(data).to_bytes(8, "little") + data)
    while message:
        message = message[os.write(fd, message):]


def start(works: Sequence[Callable[[], Any]], count: int, variable: str, default: int) -> Child | None:
    """A child computing each of works() in turn (see forking for when there is one), each answer
    sent as soon as it is made; None: do the work here."""
    if not forking(count, variable, default):
        return None

    def answer_each(out: int) -> None:
        widen(out)
        for work in works:
            send(out, work())

    forked = child(answer_each)
    return None if forked is None else Child(*forked, len(works))


def answer(child: Child) -> tuple[Any] | None:
    """(the child's next answer,), or None when it has none to give (it failed, died, or sent
    something cut short or garbled): then none of its later answers is read either. The child
    is reaped after its last answer, or at its first failure."""
    if child.answers <= 0:
        return None
    child.answers -= 1
    got = None
    try:
        size = int.from_bytes(_exactly(child.read_end, 8), "little")
        got = (marshal.loads(_exactly(child.read_end, size)),)
    except (OSError, EOFError, ValueError, TypeError, MemoryError):
        child.answers = 0
    if child.answers == 0 and not reap(child.read_end, child.pid, kill=False):
        return None
    return got


def close(child: Child | None) -> None:
    """End a child whose answers were not all read (the caller failed midway), and reap it."""
    if child is not None and child.answers > 0:
        child.answers = 0
        reap(child.read_end, child.pid, kill=True)


def _exactly(fd: int, size: int) -> bytes:
    """`size` bytes from the pipe; EOFError if it ends first."""
    chunks = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("the child's pipe ended")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class Also:
    """Work for the catalogue's stat child to do once it has sent the stats (status.catalogue),
    and its answer when the caller asks; the caller does the work itself when there is none."""

    def __init__(self, work: Callable[[], Any]):
        self.work = work
        self.child: Child | None = None  # set by the catalogue when its stat child took the work

    def answer(self) -> tuple[Any] | None:
        return answer(self.child) if self.child is not None else None

    def close(self) -> None:
        close(self.child)
