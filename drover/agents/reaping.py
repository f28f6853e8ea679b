"""The child subreaper's duty: a drover that runs agents adopts what they leave behind, and ends it
all as it exits, so that nothing an agent started outlives its drover (docs/security.md)."""
from __future__ import annotations

import os
import signal
import sys
import time

from drover.agents.procs import _libc, _pids, _signal, _stat_fields

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Linux: orphaned descendants re-parent to this process instead of init. False elsewhere."""
    libc = _libc()
    if libc is None:
        return False
    try:
        answer: int = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except AttributeError:
        return False
    if answer == 0 and not _sweeping:
        import atexit

        _sweeping.append(os.getpid())
        atexit.register(end_adopted)
    return answer == 0


_sweeping: list[int] = []  # the pid that registered end_adopted (a fork does not inherit the duty)

FULL_SCAN_EVERY = 8  # rounds of end_adopted between two scans of the whole of /proc


def end_adopted(patience: float = 30.0) -> None:
    """At the exit of a drover that became a subreaper: every process still below it is one it
    adopted (or that one's), left by an agent, a check or a set-up in a session of its own without
    its run's mark. Once this drover is gone it would go to init, outside every drover, where
    acting.traced_run takes it for the operator: end them all. The tree is stopped first (a stopped
    process forks no more: a chain outgrew a kill a scan at a time), then killed, until this drover
    has no child left at all, which (every orphan below coming to it) holds only when nothing lives
    below it: a chain whose links fork and exit at once lives each link for less than a scan of
    /proc, and three empty scans in a row let it go to init (hostile review 23). Such a link is
    among the newest pids, looked at every round. `patience` bounds the whole."""
    if _sweeping != [os.getpid()]:
        return
    me = os.getpid()
    stopped: set[int] = set()
    deadline = time.monotonic() + patience
    rounds = 0
    growing = True  # while whole scans find processes each round scans the whole: a tree forking wide
    while time.monotonic() < deadline:
        fresh = [pid for pid in _newest_below(me, stopped) if pid not in stopped]
        if growing or rounds % FULL_SCAN_EVERY == 0:
            found = [pid for pid in _below(me) if pid not in stopped and pid not in fresh]
            growing = bool(found)
            fresh += found
        rounds += 1
        if fresh:
            _signal(fresh, signal.SIGSTOP)
            stopped.update(fresh)
            continue
        _signal(sorted(stopped), signal.SIGKILL)
        # forgotten once killed: reaped, a pid is given again (pid_max may be 32768, and a chain
        # spends thousands a second), and a kill sent to it again, or a walk up through it, would
        # reach a process that is none of drover's
        stopped.clear()
        if not _children_left():
            return
    print(f"drover: processes an agent left below drover (pid {me}) outlived its {patience:.0f} s to end them",
          file=sys.stderr)


def _children_left() -> bool:
    """Collect this process's exited children; True while one lives (a stopped one too)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


NEWEST = 16  # how many of the pids given last end_adopted looks at every round


def _newest_below(root: int, below: set[int]) -> list[int]:
    """The newest pids (given in turn, the last in ns_last_pid) whose ancestry runs through `root`
    or a process already known to be `below` it."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        return []
    return [pid for pid in range(last, max(last - NEWEST, 1), -1) if _descends(pid, root, below)]


def _descends(pid: int, root: int, below: set[int]) -> bool:
    """`pid` runs, and `root` is among its ancestors, or one of `below` that is still stopped (the
    sweep's own: a chain thousands deep is walked a link or two, not to its top each round)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        fields = _stat_fields(pid)
        if fields is None or len(fields) < 2 or fields[0] in ("Z", "X"):
            return False
        if pid in below and fields[0] == "T":
            return True
        pid = int(fields[1])
        if pid == root:
            return True
    return False


def _below(root: int) -> list[int]:
    """Every process whose ancestry runs through `root`, from one read of /proc."""
    children: dict[int, list[int]] = {}
    for name in _pids():
        fields = _stat_fields(name)
        if fields and len(fields) > 1 and fields[0] not in ("Z", "X"):
            children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    queue = list(children.get(root, []))
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found
