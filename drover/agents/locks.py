"""Who launched: the locks a drover holds while it runs agents or their code, and what they record
of it, so that a verdict can tell an agent's process from the operator's (ledger/acting.py).

A lock is a file held with `flock`: the kernel lets go of it when its drover dies, however it dies
(SIGKILL included), so a lock that can be taken names no live drover. Each names its drover as
`Launcher` records it: pid, start, pid namespace and /proc mount.
"""
from __future__ import annotations

import errno
import fcntl
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from drover.agents import procs, reaping

# In a run's folder: the drover that launched the run holds a lock on this file until it has
# recorded the run's end. A live agent whose lock is free has no drover attached: an orphan.
ATTACHED = "drover.lock"
UNREADABLE = "?"  # a held lock whose text is no record a drover wrote: its place matches no process's
# In .drover/: one lock for each live drover that runs agents or their code (procs.LAUNCHING), held
# from its start to its exit, the gaps between its runs included.
LAUNCHERS = "launchers"


class Launcher(NamedTuple):
    """A drover that holds a lock, as it recorded itself in the lock file: its pid, its start, its
    pid namespace and the mount /proc is to it (the last three "" from an older drover)."""

    pid: int
    start: str = ""
    pid_namespace: str = ""
    proc_mount: str = ""

    @classmethod
    def here(cls) -> "Launcher":
        pid = os.getpid()
        return cls(pid, procs.process_start(pid), *procs.own_place())

    def hidden(self) -> bool:
        """This process does not see that drover as it is. A process whose /proc does not show it
        lives in a pid namespace of its own (`unshare -p --mount-proc`), where its ancestry is
        hidden from it. A pid it sees is that drover only as the same process (its start) in the
        same pid namespace: in a namespace of its own an agent can make any pid number exist (by
        writing ns_last_pid). And /proc must be the mount drover reads: in a mount namespace of its
        own an agent can bind a folder it wrote over /proc, or over an entry of it. A place this
        process can tell is compared whatever the record says, an empty field included: the record
        is a file an agent can write, and fields it emptied skipped the comparison (hostile review 21)."""
        mine = procs.own_place()
        return (not os.path.exists(f"/proc/{self.pid}")
                or bool(self.start) and procs.process_start(self.pid) != self.start
                or bool(mine[0]) and mine[0] != self.pid_namespace
                or bool(mine[1]) and mine[1] != self.proc_mount)


def _record(fd: int) -> None:
    """Write this drover into the lock file it holds at `fd` ("-" for a field /proc could not say,
    so the fields after it keep their places)."""
    os.ftruncate(fd, 0)
    os.write(fd, f"{' '.join(str(field) or '-' for field in Launcher.here())}\n".encode())


@contextmanager
def attached(run_dir: Path) -> Iterator[None]:
    """Hold the run's lock while this drover waits for its agent and records its end."""
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / ATTACHED, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        _record(fd)
        yield
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """A lock file, opened as every file agents can replace is (drover/git/files.py): a fifo in a
    lock's place would hold drover's open() for ever, a link loop or a folder in the way would read
    as a lock no one can take; OSError for each."""
    from drover.git.files import regular_fd

    return regular_fd(path)


def launcher_of(run_dir: Path, name: str = ATTACHED) -> Launcher | None:
    """The drover that holds the lock `name` in `run_dir` now, as it recorded itself; None when none
    holds it. The pid is the kernel's (/proc/locks) where it can say: the file's text is anyone's to
    write, and a pid written there that no process has made every operator command refuse, as if
    drover could not be seen (hostile review 20). The place recorded beside it stays, and is
    compared (Launcher.hidden)."""
    if not drover_attached(run_dir, unlocked=False, name=name):
        return None
    holder = lock_holder(run_dir / name)
    try:
        fd = _open_lock(run_dir / name)
        try:
            text = os.read(fd, 4096)
        finally:
            os.close(fd)
    except OSError:
        # gone since the lock was found held (its drover ended, or an agent swapped the folder in a
        # loop): no lock to read now, as drover_attached would say; taken for one no process sees,
        # it made the operator's `drover stop` of that agent refuse (the last read of hostile review 21)
        return None
    try:
        pid, *where = text.decode("ascii").split()[:4]
        recorded = Launcher(int(pid), *("" if field == "-" else field for field in where))
    except (ValueError, UnicodeDecodeError):
        # held, and no record a drover wrote: which drover, and where, cannot be told, so it is one
        # no process sees as it is (hidden), never none at all (that skipped the check)
        return Launcher(holder or 0, "", UNREADABLE, UNREADABLE)
    if holder is None or holder == recorded.pid:  # no /proc/locks to ask, or it agrees
        return recorded
    # the kernel's pid (a pid written in the text that no process has made every operator command
    # refuse: hostile review 20), and the place the drover recorded, still checked: dropped, a
    # mount namespace of the agent's own with a /proc/locks of its own naming pid 1 passed for the
    # operator's (hostile review 21). Text rewritten whole refuses until that drover ends.
    return recorded._replace(pid=holder, start="")


def drover_attached(run_dir: Path, *, unlocked: bool = True, name: str = ATTACHED) -> bool:
    """The drover that launched the run still holds its lock; `unlocked` when the run has no lock
    file (one launched before drover kept the lock, or not by a drover here: nothing says)."""
    try:
        fd = _open_lock(run_dir / name)
    except OSError:
        # missing, or no lock drover made (a fifo, a link, a folder in the way): no drover holds it
        return unlocked
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # held: its drover is alive
    finally:
        os.close(fd)  # closing lets go of the shared lock taken just now
    return False


def run_attached(run: procs.RunProcess, runs_dir: Path) -> bool:
    """The drover that launched the live run `run` is still with it: it holds the run's lock, or the
    agent's parent is a drover that launches (procs.is_marked_launcher). The lock alone is a file
    in a folder the agent may write: renamed away, with an unlocked one put in its place, it made
    an attached run an orphan, and `drover stop` wrote that its drover was gone (hostile review 22).
    An orphan's parent is whatever adopted it."""
    return drover_attached(runs_dir / run.id) or (
        run.pid is not None and procs.is_marked_launcher(procs.parent_of(run.pid)))


def run_live(run: procs.RunProcess, runs_dir: Path) -> bool:
    """An unfinished run whose agent lives, or whose drover holds its lock: from the moment a drover
    claims the run (before its worktree and `[run] setup`) until it has recorded the end. The kernel
    lets go of the lock when that drover dies, so a claim never outlives it."""
    return run.finished is None and (procs.run_alive(run) or drover_attached(runs_dir / run.id, unlocked=False))


def claimed_by(run: procs.RunProcess, runs_dir: Path) -> str:
    """Who a live run is, for a refusal: its agent's pid, or the drover setting it up before its agent
    starts, as the kernel names the holder of the run's lock (the file's text is anyone's to write:
    the set-up runs the branch's code)."""
    if run.pid is not None and procs.run_alive(run):
        return f"pid {run.pid}"
    holder = lock_holder(runs_dir / run.id / ATTACHED)
    return f"drover pid {holder if holder is not None else '?'}, before its agent starts"


def lock_holder(path: Path) -> int | None:
    """The pid /proc/locks names as holding a flock on `path`; None when none does or it cannot say."""
    return lock_holders([path]).get(path)


def lock_holders(paths: list[Path]) -> dict[Path, int]:
    """Each of `paths` that the kernel (/proc/locks) says a process holds a flock on -> that
    process's pid, in one read of the table. A link is not what it leads to: an agent's link to
    another program's lock names no drover."""
    wanted: dict[str, Path] = {}
    for path in paths:
        try:
            found = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        wanted[f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}"] = path
    held: dict[Path, int] = {}
    if not wanted:
        return held
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            for line in table:
                fields = line.split()
                if "->" not in fields and len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] in wanted:
                    held.setdefault(wanted[fields[5]], int(fields[4]))
    except (OSError, ValueError):
        pass
    return held


_holding: dict[Path, int] = {}  # .drover/ -> the descriptor of this drover's lock in its launchers/
# The jobs of a drive launch from threads of one process. A flock belongs to an open file, not to
# the process: two threads that each opened the lock file and locked it would wait on each other
# for ever (the second job's first launch hung, and Ctrl-C with it). One thread at a time takes it.
_TAKING = threading.Lock()
_launches_for: set[Path] = set()  # the .drover/ of the command that will run agents (will_launch)


def will_launch(state_dir: Path) -> None:
    """This command runs agents or their code for the project whose state is in `state_dir`: from
    the first it starts (launching) to its exit, it holds its launcher lock there. One command a
    process: a later one (tests run many in one process) names its own project alone."""
    _launches_for.clear()
    _launches_for.add(state_dir)


def launching() -> None:
    """This drover starts an agent, a check or a set-up now: what they leave behind is re-parented to
    it (reaping.become_subreaper), and it holds its launcher lock (will_launch) and its process's
    name (procs.mark_launcher) until it exits."""
    reaping.become_subreaper()
    if _launches_for:  # a drover command's process (not a Ray worker's, whose name is Ray's)
        procs.mark_launcher()
    for state_dir in _launches_for:
        hold_launcher(state_dir)


def hold_launcher(state_dir: Path) -> None:
    """Hold this drover's lock in `state_dir`/launchers/ until it exits. Between two runs no run's
    lock names the drive, and an agent's leftover lives on below it (in a namespace of its own,
    where it sees no drover above it): acting.traced_run refuses a process that cannot see any
    live launcher. The file stays when its drover ends (its agents' leftovers are ended first, at
    its exit: reaping.end_adopted), and the next drover to hold a lock here takes it away."""
    if state_dir in _holding:
        return
    with _TAKING:
        if state_dir not in _holding:  # another job's thread may have taken it while this one waited
            _hold_launcher(state_dir)


TAKING_TRIES = 20  # attempts at this drover's own launcher lock before it says what is in the way


def _hold_launcher(state_dir: Path) -> None:
    folder = _launchers_folder(state_dir)
    try:
        _sweep(folder)
        fd = _own_lock(folder, f"{os.getpid()}.lock")
    finally:
        os.close(folder)
    _record(fd)
    _holding[state_dir] = fd  # held until this process ends: the kernel lets go of it then


def _own_lock(folder: int, name: str) -> int:
    """This drover's lock file `name` (its pid's) in `folder` (a descriptor), made when missing and
    held, without waiting. No other live drover has this pid, and a live drover's lock is never
    anything but a regular file of one name: whatever else is under the name goes, and the file is
    made again. A folder, a fifo or a link an agent put there (hostile review 18: folders for every
    pid made each later launch fail); a hard link to another file, the operator's (review 20: it
    would have been written); a file its leftover made and holds (it would hold this drover in
    flock() as long as the leftover lived). A sweeping drover holds a lock file a moment too, and
    may take it away between the open and the lock: the name then names another file, and the
    lock is taken again."""
    from drover.git.files import regular_fd, remove_at

    for _ in range(TAKING_TRIES):
        try:
            fd = regular_fd(name, os.O_RDWR | os.O_CREAT, dir_fd=folder)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
            remove_at(folder, name)
            continue
        if not (_lock_of_drovers(fd) and _taken(fd)):
            os.close(fd)
            remove_at(folder, name)  # the name only: a file it shares its contents with stays
            continue
        try:
            if os.stat(name, dir_fd=folder, follow_symlinks=False).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    raise OSError(errno.EBUSY, f"could not take a lock file of its own, {name}: something else keeps its place")


def _launchers_folder(state_dir: Path) -> int:
    """A descriptor of .drover/launchers/, a folder of drover's own, reached without following a
    link (files.folder_fd): the sweep and the lock work through it, so a link an agent puts in
    its place, or swaps in for it meanwhile, never leads them into another folder, whose files
    the sweep would remove (hostile reviews 18, 20). A link or a file in its place is removed."""
    from drover.git.files import folder_fd, remove_at

    try:
        return folder_fd(state_dir.parent, state_dir.name, LAUNCHERS, make=True)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    state = folder_fd(state_dir.parent, state_dir.name)
    try:
        remove_at(state, LAUNCHERS)
    finally:
        os.close(state)
    return folder_fd(state_dir.parent, state_dir.name, LAUNCHERS, make=True)


def _taken(fd: int) -> bool:
    """This drover now holds the lock on the open file; False when another holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _lock_of_drovers(fd: int) -> bool:
    """The open file is one a drover made: its only name is the lock's. A hard link an agent made to
    another file (the operator's) has two: locked by the agent, it held the next launch in flock()
    for as long as it liked, then had drover write its record into that file (hostile review 20)."""
    return os.fstat(fd).st_nlink == 1


def _sweep(folder: int) -> None:
    """Remove the lock files in `folder` (a descriptor) no drover holds (those of drovers that have
    ended), and whatever else is there: only drovers' locks belong in it, and what an agent plants
    would cost every later sweep its scan."""
    from drover.git.files import regular_fd, remove_at

    for entry in os.scandir(folder):
        try:
            fd = regular_fd(entry.name, dir_fd=folder)
        except OSError:
            try:
                remove_at(folder, entry.name)  # no lock a drover made: a link, a folder, a fifo
            except OSError:
                pass
            continue
        try:
            if not _lock_of_drovers(fd):  # a hard link: held or not, no drover's lock
                os.unlink(entry.name, dir_fd=folder)
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(entry.name, dir_fd=folder)  # still locked by this sweep: no drover holds it meanwhile
        except OSError:
            pass
        finally:
            os.close(fd)


def launcher_pids(state_dir: Path) -> set[int]:
    """The pids of the drovers that hold a lock in `state_dir`/launchers/ now, as the kernel names
    them (not as the files say: an agent can write those): every drover that runs agents or their
    code holds one from its first launch on, whatever its command line looks like."""
    try:
        paths = [Path(entry.path) for entry in os.scandir(state_dir / LAUNCHERS) if entry.name.endswith(".lock")]
    except OSError:
        return set()
    return {pid for pid in lock_holders(paths).values() if pid > 0}


def live_launchers(state_dir: Path) -> list[Launcher]:
    """The drovers that hold a lock in `state_dir`/launchers/ now (hold_launcher)."""
    try:
        names = [entry.name for entry in os.scandir(state_dir / LAUNCHERS) if entry.name.endswith(".lock")]
    except OSError:
        return []
    found = [launcher_of(state_dir / LAUNCHERS, name) for name in names]
    return [launcher for launcher in found if launcher is not None]
