"""The processes of a run: is a pid alive, and ending everything an agent started.

An agent runs in its own process group, but the CLIs start tool commands in sessions of their
own (`setsid`, a double fork), outside that group. So a run's processes are found two ways:
its process group, and, where /proc exists (Linux), every process whose environment carries
the run's `DROVER_RUN` value, which each descendant inherits. On Linux drover is also a child
subreaper, so an orphaned descendant is re-parented to drover (and reaped by it) instead of init.
"""
from __future__ import annotations

import functools
import os
import signal
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import subprocess


class RunProcess(Protocol):
    """What this module reads of a ledger run (drover.ledger.rows.Run has it)."""

    @property
    def id(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def pid_start(self) -> str | None: ...
    @property
    def finished(self) -> str | None: ...


def failpoint(name: str, signum: int = signal.SIGKILL) -> None:
    """$DROVER_FAILPOINT=<name> sends this process `signum` here (SIGKILL: killed; SIGINT: a Ctrl-C
    landing just then), so tests reach each window of a write or a launch."""
    if os.environ.get("DROVER_FAILPOINT") == name:
        os.kill(os.getpid(), signum)


def _stat_fields(pid: int | str) -> list[str] | None:
    """/proc/<pid>/stat after the command name (state, ppid, pgrp, ...); None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _pids() -> list[str]:
    """Every process id /proc lists ([] without /proc)."""
    if not os.path.isdir("/proc"):
        return []
    return [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]


def pid_namespace(pid: int | str = "self") -> str:
    """The pid namespace `pid` lives in, as /proc names it (`pid:[4026531836]`); "" where unknown."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return ""


_STATX_MNT_ID = 0x1000


def proc_mount() -> str:
    """The mount id of /proc as this process sees it (statx, a system call: no file says it), "" where
    unknown. A mount namespace of its own (`unshare -Urm`, no privilege needed) copies every mount
    under a new id, and a folder or file bound over /proc, or over an entry in it, is a mount of its
    own: so a process whose /proc is the launching drover's mount lives where drover does, and
    what it reads there the kernel wrote."""
    statx = getattr(_libc(), "statx", None)  # None: no C library, or one without statx
    if statx is None:
        return ""
    import ctypes

    buf = ctypes.create_string_buffer(256)
    AT_FDCWD, AT_SYMLINK_NOFOLLOW = -100, 0x100
    if statx(AT_FDCWD, b"/proc", AT_SYMLINK_NOFOLLOW, _STATX_MNT_ID, buf) != 0:
        return ""
    mask = int.from_bytes(buf.raw[0:4], "little")
    return str(int.from_bytes(buf.raw[144:152], "little")) if mask & _STATX_MNT_ID else ""


@functools.cache
def _libc() -> Any:
    """Linux's C library through ctypes (a few ms to import, paid only by what needs it); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


@functools.cache
def own_place() -> tuple[str, str]:
    """(pid namespace, /proc's mount id) of this process: neither changes while it lives."""
    return pid_namespace(), proc_mount()


def pid_alive(pid: int | None) -> bool:
    """A process with this id exists (it may belong to someone else)."""
    if not pid or pid <= 0:
        return False  # 0 and negatives would address process groups, not one process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A killed agent whose parent died lingers as a zombie until init reaps it: it is not running.
    fields = _stat_fields(pid)
    return fields is None or fields[0] != "Z"


def process_start(pid: int) -> str:
    """When the process started, in the kernel's clock ticks since boot; "" where unknown."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else ""


class Untraceable(Exception):
    """This process's ancestry could not be read to its end."""


def lineage() -> tuple[int, list[int]]:
    """(this process's id as /proc numbers it, its ancestors: its parent first, up to and not
    including init); (getpid(), []) without /proc.

    /proc numbers them all in the operator's pid namespace: in one of its own (`unshare -p`)
    getpid() says 1 and getppid() 0, but /proc (unless the process mounted one of its own) still
    shows every ancestor. The walk has no bound (an agent may nest its shells as deep as it likes).
    An ancestor that cannot be read is where the walk stops when it is there to stay (a process of
    another user that `hidepid` hides, whose child still names it); one that went away during the
    walk (its children are adopted: the chain changed) makes the walk start again, and Untraceable
    when it will not hold still."""
    for _ in range(3):
        try:
            with open("/proc/self/stat", encoding="ascii", errors="replace") as handle:
                text = handle.read()
            me, pid = int(text.split(" ", 1)[0]), int(text.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return os.getpid(), []
        chain: list[int] = []
        child = "self"
        while pid > 1:
            if pid in chain:
                raise Untraceable(f"the ancestry of this process loops at pid {pid}")
            chain.append(pid)
            fields = _stat_fields(pid)
            if fields is None:
                again = _stat_fields(child)
                if again is not None and int(again[1]) == pid:
                    return me, chain  # there, but not this process's to read
                break
            child, pid = str(pid), int(fields[1])
        else:
            return me, chain
    raise Untraceable("the ancestry of this process changed while it was read")


# The commands that start agents, drover's own check or `[run] setup`: programs that run code an
# agent wrote. (`demo` only calls drover commands as the operator would; its drive is one of these.)
LAUNCHING = frozenset({b"drive", b"run", b"review", b"draft", b"verify"})


def is_launching_drover(pid: int) -> bool:
    """The process runs a drover command that starts agents or runs their code (LAUNCHING), through
    drover's console script (as its interpreter runs it) or `python -m drover[.cli]`, or has started
    one (its name, mark_launcher: whatever its command line). False where /proc cannot say."""
    if is_marked_launcher(pid):
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().rstrip(b"\0").split(b"\0")
    except OSError:
        return False
    # the script run directly, or by its interpreter (a shebang's python, or one the operator
    # started with options of its own: `python3 -u .venv/bin/drover drive`, `python -X dev -m
    # drover drive`, `python -um drover drive`): not by a wrapper that waits on it (`/usr/bin/time
    # drover drive`, `strace drover drive`), which is the operator's
    if os.path.basename(argv[0]) == b"drover":
        return not LAUNCHING.isdisjoint(argv[1:])
    if not os.path.basename(argv[0]).startswith((b"python", b"pypy")):
        return False
    how, what, rest = _python_runs(argv)
    if how == b"-m":
        return what in (b"drover", b"drover.cli") and not LAUNCHING.isdisjoint(argv[rest:])
    return how == b"script" and os.path.basename(what) == b"drover" and not LAUNCHING.isdisjoint(argv[rest:])


def _python_runs(argv: list[bytes]) -> tuple[bytes, bytes, int]:
    """What a python command line runs, read as python reads its options: (b"-m", the module, the
    index of its first argument), (b"-c", the code, ...), (b"script", its path, ...), or (b"", b"",
    len(argv)) for none. Letters combine (`-um drover`, `-Wignore`), and -c, -m, -W and -X take the
    rest of their word or else the next word as their value."""
    at = 1
    while at < len(argv):
        word = argv[at]
        if word == b"--check-hash-based-pycs":
            at += 2
            continue
        if word == b"--":
            at += 1
            break
        if not word.startswith(b"-") or word == b"-":
            break
        at += 1
        if word.startswith(b"--"):
            continue  # --help, --version: no value
        for place in range(1, len(word)):
            letter = word[place:place + 1]
            if letter in (b"c", b"m", b"W", b"X"):
                value = word[place + 1:]
                if not value:
                    value, at = (argv[at] if at < len(argv) else b""), at + 1
                if letter in (b"c", b"m"):
                    return b"-" + letter, value, at
                break
    if at < len(argv) and argv[at] != b"-":
        return b"script", argv[at], at + 1
    return b"", b"", len(argv)


def parent_of(pid: int) -> int:
    """The parent of `pid` (0 when unknown)."""
    fields = _stat_fields(pid)
    return int(fields[1]) if fields else 0


def run_alive(run: RunProcess) -> bool:
    """An unfinished run whose agent is still that same process (a reused pid is not it)."""
    if run.finished or run.pid is None or not pid_alive(run.pid):
        return False
    recorded = run.pid_start or ""
    return not recorded or process_start(run.pid) in ("", recorded)


def end_orphan(pid: int, run_id: str, grace: float) -> None:
    """End a run's processes when they are not this process's children (`drover stop`): its agent's
    group and every process carrying its DROVER_RUN; SIGTERM, then SIGKILL after `grace` seconds."""

    def left() -> list[int]:
        return marked_processes("DROVER_RUN", run_id)

    def alive() -> bool:
        return _group_alive(pid) or bool(left())

    for signum, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        if not alive():
            return
        _signal_group(pid, signum)
        _signal(left(), signum)
        deadline = time.monotonic() + patience
        while alive() and time.monotonic() < deadline:
            time.sleep(0.05)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):
        return True
    # Killed members linger as zombies until init reaps them, and a signal still "reaches"
    # a zombie; where /proc can tell, only members that still run count.
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields and len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


# A drover that starts agents, checks or set-ups names its process this (`/proc/<pid>/comm`): only a
# process itself may write its name, so no agent can take the mark off, as it can rename the lock
# files (hostile review 22). A child keeps the name only until it runs a program of its own.
LAUNCHER_NAME = b"drover-launch"
_named: list[bytes] = []  # the name this process had before (tests put it back: unmark_launcher)


def mark_launcher() -> None:
    """Name this process LAUNCHER_NAME, for every process to see in `/proc/<pid>/comm` (the main
    thread's: /proc/self is the process, from any of its threads). Nothing where /proc cannot."""
    if _named:
        return
    try:
        with open("/proc/self/comm", "r+b", buffering=0) as handle:
            before = handle.read().rstrip(b"\n")
            handle.seek(0)
            handle.write(LAUNCHER_NAME)
    except OSError:
        return
    _named.append(before)


def unmark_launcher() -> None:
    """The process's name as it was before mark_launcher (for a test harness that runs commands in
    its own process: a command's end would take the mark away)."""
    if _named:
        try:
            with open("/proc/self/comm", "wb", buffering=0) as handle:
                handle.write(_named.pop())
        except OSError:
            pass


def is_marked_launcher(pid: int) -> bool:
    """`pid` is a drover that has started agents, checks or set-ups (mark_launcher)."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as handle:
            return handle.read().rstrip(b"\n") == LAUNCHER_NAME
    except OSError:
        return False


def _running(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def marked_processes(key: str, value: str, also: tuple[tuple[str, str], ...] = ()) -> list[int]:
    """Running processes (not this one) whose environment holds key=value (and each key=value of
    `also`); [] without /proc. The entry is looked for between NULs in the text as read, never in a
    list of its entries: a process may write megabytes of NULs over its own environment, each an
    entry (hostile review 48)."""
    # a path as the environment holds it, undecodable bytes too
    needles = [os.fsencode(f"\0{name}={held}\0") for name, held in ((key, value), *also)]
    found = []
    for pid in map(int, _pids()):
        if pid == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
        except OSError:
            continue  # gone, or another user's
        environ = b"\0" + environ + b"\0"
        if all(needle in environ for needle in needles) and _running(pid):
            found.append(pid)
    return found


def end_marked(key: str, value: str, grace: float, also: tuple[tuple[str, str], ...] = ()) -> list[int]:
    """End every running process (not this one) whose environment holds key=value (and `also`, as
    marked_processes): SIGTERM, then SIGKILL after `grace` seconds; the pids found at first ([]
    when none, or without /proc)."""
    found = left = marked_processes(key, value, also)  # each scan reads every process's environment: one a wait
    for signum, patience in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        if not left:
            break
        _signal(left, signum)
        deadline = time.monotonic() + patience
        while (left := marked_processes(key, value, also)) and time.monotonic() < deadline:
            time.sleep(0.05)
    return found


def _signal(pids: list[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _reap(pgid: int, pids: set[int]) -> None:
    """Collect the exit of the run's orphans we adopted as subreaper, so no zombie stays.

    Only the run's own processes (its group, its marked ones): a child of drover's that is
    another launch's agent belongs to that launch's Popen.
    """
    me = str(os.getpid())
    for name in _pids():
        fields = _stat_fields(name)
        pid = int(name)
        if fields and len(fields) > 2 and fields[0] == "Z" and fields[1] == me and (fields[2] == str(pgid) or pid in pids):
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass


def end_run_processes(proc: subprocess.Popen[bytes], grace: float, marker: tuple[str, str] | None = None) -> None:
    """End the agent's process group and every process carrying the run's marker in its environment.

    SIGTERM first, then SIGKILL to whatever is left after `grace` seconds; a second Ctrl-C
    skips the rest of the grace period.
    """
    pgid = proc.pid

    def strays() -> list[int]:
        return [pid for pid in marked_processes(*marker) if pid != proc.pid] if marker else []

    def alive() -> bool:
        proc.poll()  # reap the leader, or its zombie would keep the group "alive"
        return _group_alive(pgid) or bool(strays())

    seen: set[int] = set()
    if alive():
        _signal_group(pgid, signal.SIGTERM)
        found = strays()
        seen.update(found)
        _signal(found, signal.SIGTERM)
        deadline = time.monotonic() + grace
        try:
            while alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C skips the rest of the grace period
        if alive():
            _signal_group(pgid, signal.SIGKILL)
            found = strays()
            seen.update(found)
            _signal(found, signal.SIGKILL)
            # SIGKILL cannot be ignored; wait the moment it takes to land, so the reap below sees them
            deadline = time.monotonic() + 2.0
            while alive() and time.monotonic() < deadline:
                time.sleep(0.02)
    proc.wait()
    _reap(pgid, seen)
