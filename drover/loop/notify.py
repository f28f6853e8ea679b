"""`[notify] command`: the operator's command, run when a drive ends with the report's JSON on stdin.

Its argv is shell-like words split with shlex and started without a shell, so nothing in the
report (which agents wrote into) can become a command. It runs in its own process group: past its
timeout the whole group is ended. Whatever happens to it, the drive's outcome stands; the caller
prints the one warning line this returns."""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
from pathlib import Path

_TAIL = 200  # characters of the command's stderr a warning quotes
# The longest wait poll(2) counts (2^31 - 1 ms, about 596 hours): drover.toml takes any number of
# hours, and a longer timeout was an OverflowError as the drive ended; it waits this long instead.
LONGEST = (2**31 - 1) // 1000


def run_notify(command: str, timeout: float, payload: str, *, cwd: Path) -> str:
    """Run the command with `payload` on stdin; "" when it exited 0, else the warning to print."""
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        return f"command {command!r}: {exc}"
    if not argv:
        return ""
    try:
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return f"{argv[0]}: could not start: {exc.strerror or exc}"
    try:
        _, err = process.communicate(payload.encode("utf-8"), timeout=min(timeout, LONGEST))
    except subprocess.TimeoutExpired:
        _end_group(process)
        return f"{argv[0]}: no end after {timeout:g}s; it was stopped"
    except BrokenPipeError:  # it exited without reading: its exit status still says how it went
        err = b""
        process.wait()
    if process.returncode != 0:
        said = " ".join(err.decode("utf-8", "replace").split())[-_TAIL:]
        return f"{argv[0]} exited {process.returncode}" + (f": {said}" if said else "")
    return ""


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the command and everything it started, then collect it. Its stderr is closed, not read to
    its end: a process that left the group (a session of its own) holds it open as long as it lives,
    and the drive's end waited for that."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass
    if process.stderr is not None:
        process.stderr.close()
    process.wait()
