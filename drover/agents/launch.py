"""Launching an agent in its own process group, with its logs, timeouts and signs of life (its argv
from presets.py, its environment from environment.py)."""
from __future__ import annotations

import errno
import itertools
import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, TextIO

from drover.agents.failures import STALLED_PREFIX
from drover.errors import is_terminal, printable
from drover.agents.presets import PROMPT_TEXT
from drover.agents.usage import StreamReader, Usage
from drover.agents.locks import launching
from drover.agents.procs import end_run_processes, failpoint

PROMPT_VIAS = ("stdin", "file", "arg")
GRACE_SECONDS = 5.0
PROGRESS_SECONDS = 60.0  # off a terminal, one line per launch this often
STATUS_AFTER = 3.0  # on a terminal, the status line appears after this much silence
OVER_BUDGET = "over budget"  # the outcome of a run ended at its token ceiling (drover/loop/budgets.py)
CEILING_GRACE = 1.0  # seconds a codex run past its token ceiling has to exit on its own before it is ended


@dataclass(frozen=True)
class LaunchResult:
    """How an agent run ended: `exited` (with its code), `timeout` (a stall too: `stalled` says so),
    `interrupted` or `over budget` (OVER_BUDGET: ended at its token ceiling)."""

    exit_code: int | None
    outcome: str
    elapsed: float
    usage: Usage | None = None  # what the run cost, when the agent's output is a known stream
    stalled: str = ""  # when drover ended a silent agent ([agent] stall): the words failures.py keeps


def format_elapsed(seconds: float) -> str:
    """0:12, 12:34, 1:02:03."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_echo_lock = threading.RLock()
REDRAW_SECONDS = 1.0  # the status block is redrawn at most this often, and only when its text changed


class StatusBlock:
    """On a terminal: one status line per launch, a block below the agents' output, redrawn in
    place (cursor up, erase down) at most once a second and only when its text changed.

    Every line written to the screen while the block shows goes through `above` or `around`,
    which put it above the block; so several jobs' statuses never share a line, and nothing flickers.
    """

    def __init__(self) -> None:
        self.lines: dict[int, str] = {}  # launch -> its status, in the order the launches began
        self.drawn: list[str] = []  # what the screen shows now
        self.last_draw = 0.0

    def _erase(self) -> str:
        # up to the block's first line, then erase everything below the cursor
        return f"\r\x1b[{len(self.drawn)}A\x1b[J" if self.drawn else ""

    def _draw(self, screen: TextIO, before: str = "") -> None:
        width = _columns(screen) - 1  # a wrapped line would throw the cursor-up count off
        shown = [line[:width] for line in self.lines.values()]
        _write(screen, self._erase() + before + "".join(f"{line}\n" for line in shown))
        self.drawn = shown

    def set(self, key: int, text: str, screen: TextIO, now: float) -> None:
        """Launch `key`'s status is `text`; the block follows within a second."""
        with _echo_lock:
            self.lines[key] = text
            shown = [line[:_columns(screen) - 1] for line in self.lines.values()]
            if shown != self.drawn and now - self.last_draw >= REDRAW_SECONDS:
                self.last_draw = now
                self._draw(screen)

    def drop(self, key: int, screen: TextIO) -> None:
        """Launch `key` has ended: its line goes at once."""
        with _echo_lock:
            if self.lines.pop(key, None) is not None:
                self._draw(screen)

    def around(self, write: Callable[[], None], screen: TextIO) -> None:
        """Call `write` (which prints whole lines to `screen`) with the block erased, then draw it below."""
        with _echo_lock:
            if not self.drawn:
                write()
                return
            _write(screen, self._erase())
            self.drawn = []
            write()
            self._draw(screen)

    def above(self, text: str, screen: TextIO) -> None:
        """Write `text` (whole lines) above the block."""
        with _echo_lock:
            if self.drawn:
                self._draw(screen, before=text)  # one write: erase, the text, the block again
            else:
                _write(screen, text)


def _write(screen: TextIO, text: str) -> None:
    try:
        screen.write(text)
        screen.flush()
    except (OSError, ValueError):
        pass  # a closed screen (drover piped into `head`) must not stop the log


STATUS = StatusBlock()
_launches = itertools.count(1)  # each launch's key in the status block


def _columns(screen: TextIO) -> int:
    try:
        return os.get_terminal_size(screen.fileno()).columns or 80
    except (OSError, ValueError, AttributeError):
        return 80


def say_above_status(say: Callable[[str], None]) -> Callable[[str], None]:
    """`say`, its lines put above the status block (drive's progress on a terminal)."""
    def said(line: str) -> None:
        STATUS.around(lambda: say(line), sys.stdout)
    return said


def _feed(stream: BinaryIO, data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError):
        pass  # the agent need not read its stdin
    finally:
        try:
            stream.close()
        except OSError:
            pass


LONGEST_LINE = 16 << 20  # bytes of one line of agent output kept whole before it is taken as a line


class _Output:
    """Where the agent's output goes: the log (readable), the raw stream, the screen, and what
    the signs of life need (when it last spoke, its last line)."""

    def __init__(self, log: BinaryIO, raw: BinaryIO | None, reader: StreamReader | None,
                 show: Callable[[str], None] | None) -> None:
        # raw (agent.jsonl) is given exactly when a reader turns the stream into text
        self.log, self.raw, self.reader, self.show = log, raw, reader, show
        self.pending = bytearray()
        self.last_output = time.monotonic()
        self.last_line = ""
        self.size = 0

    def _write(self, handle: BinaryIO, data: bytes) -> None:
        try:
            handle.write(data)
            handle.flush()
        except OSError:
            pass  # keep draining even with a full disk, or the agent would block on its output

    def chunk(self, data: bytes) -> None:
        before, self.last_output = self.last_output, time.monotonic()
        if self.reader is None or self.raw is None:
            self._write(self.log, data)
            self.size += len(data)
        else:
            self._write(self.raw, data)
        if b"\n" not in data:
            # most of a long line: only the new bytes are searched, and a line past LONGEST_LINE
            # is taken as it stands (re-splitting all that is pending at every read was quadratic
            # in the line's length: an agent printing a few hundred MB on one line hung drover)
            self.pending += data
            if len(self.pending) > LONGEST_LINE:
                self.line(bytes(self.pending))
                self.pending = bytearray()
            return
        *lines, rest = (bytes(self.pending) + data).split(b"\n")
        self.pending = bytearray(rest)
        retries = [self.line(line) for line in lines]
        if all(retries) and not rest:
            self.last_output = before  # only the CLI's notices that it retries the service: still silent

    def line(self, raw: bytes) -> bool:
        """Log and show one line; True when it was the CLI's notice of a retry (StreamReader.retrying)."""
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        shown = [text] if self.reader is None else self.reader.feed(text)
        for each in shown:
            if self.reader is not None:
                data = (each + "\n").encode("utf-8")
                self._write(self.log, data)
                self.size += len(data)
            if each.strip():
                # quoted on the status line: no escape of the agent's reaches the operator's terminal
                self.last_line = printable(each.strip())
            if self.show is not None:
                self.show(each)
        return self.reader is not None and self.reader.retrying

    def close(self) -> None:
        if self.pending:
            self.line(bytes(self.pending))
            self.pending = bytearray()


def _pump(fd: int, output: _Output, stop: threading.Event) -> None:
    """Copy the agent's output as it arrives."""
    while True:
        # Once the run's processes have ended, drain what is buffered and stop: a process that
        # could not be ended (another user's) may hold the pipe open forever.
        ready, _, _ = select.select([fd], [], [], 0 if stop.is_set() else 0.2)
        if not ready:
            if stop.is_set():
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        output.chunk(chunk)
    output.close()


def short_elapsed(seconds: float) -> str:
    """45s, 4m10s, 1h02m: the progress lines' form."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def log_size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size // 1024} KB"


def progress_seconds() -> float:
    """How often a silent launch says it is alive off a terminal (DROVER_PROGRESS_SECONDS, for tests)."""
    try:
        return max(0.1, float(os.environ.get("DROVER_PROGRESS_SECONDS", "")))
    except ValueError:
        return PROGRESS_SECONDS


def launch(
    argv: list[str],
    *,
    cwd: Path,
    env_add: dict[str, str],
    prompt: str,
    prompt_via: str,
    log_path: Path,
    timeout: float | None,
    label: str,
    echo: bool,
    on_start: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
    grace: float = GRACE_SECONDS,
    out: TextIO | None = None,
    stream: str = "",
    progress: Callable[[str], None] | None = None,
    progress_label: str = "",
    token_ceiling: int = 0,
    stall: float | None = None,
) -> LaunchResult:
    """Run an agent in its own process group, streaming its output to `log_path` (and the screen).

    The timeout, Ctrl-C (KeyboardInterrupt) and `cancel` end every process of the run (its
    group and, on Linux, whatever carries its DROVER_RUN): SIGTERM, then SIGKILL after `grace`
    seconds. So does the agent's own exit, for anything it left running. `on_start` learns the
    pid (also the group id) as soon as the process exists. `stall` (seconds) ends the run like
    the timeout when the agent prints nothing for that long (`LaunchResult.stalled` says so). `stream` names the structured output
    the agent prints (drover/agents/usage.py): the log then holds readable text, agent.jsonl the stream.
    Signs of life: on a terminal with echo, a status line while the agent is silent; otherwise
    `progress` (if given) hears one line every `progress_seconds()`. A program that cannot be
    started raises OSError. `token_ceiling` (0: none): once the stream reports more tokens than
    this, the run's processes are ended as for the timeout, with the outcome `over budget` (a
    stream that reports usage only as it ends has `CEILING_GRACE` seconds to exit on its own).
    """
    if prompt_via not in PROMPT_VIAS:
        raise ValueError(f"prompt_via must be one of {PROMPT_VIAS}, not {prompt_via!r}")
    argv = list(argv)
    if prompt_via == "arg":
        if any(PROMPT_TEXT in word for word in argv):
            argv = [word.replace(PROMPT_TEXT, prompt) for word in argv]
        else:
            argv.append(prompt)
        if "\0" in prompt:  # an item body's NUL byte: Popen's ValueError was a traceback and a run left unended
            raise OSError(errno.EINVAL, "the prompt holds a NUL character (the item file's or its findings'), which "
                          "no program's argument can pass: take it out, or give the prompt on stdin or in {prompt_file}")
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    screen = out if out is not None else sys.stdout
    start = time.monotonic()
    reader = StreamReader(stream) if stream else None
    status_line = echo and is_terminal(screen)
    status_key = next(_launches)
    status_shown = False

    def show(text: str) -> None:  # the agent's line: none of its escapes reaches the operator's terminal
        STATUS.above(f"[{label} {format_elapsed(time.monotonic() - start)}] {printable(text)}\n", screen)

    if os.sep not in argv[0]:
        # the program named as the operator's PATH finds it, not the agent's (whose first folder,
        # in drover's cache, a same-user agent can put programs in: environment._drover_alone)
        # made absolute: a relative PATH entry (node_modules/.bin, ".", an empty one) found it from
        # drover's folder, and the agent starts in its worktree, where that name is the agent's own file
        found = shutil.which(argv[0])
        argv[0] = os.path.abspath(found) if found else argv[0]
    launching()
    marker = ("DROVER_RUN", env_add["DROVER_RUN"]) if env_add.get("DROVER_RUN") else None
    from drover.git.files import open_regular

    raw_log = open_regular(log_path.with_name("agent.jsonl"), "ab") if reader is not None else None
    with open_regular(log_path, "ab") as log:
        proc: subprocess.Popen[bytes] | None = None
        exited: int | None = None
        stop = threading.Event()
        outcome = "exited"
        stalled = ""
        try:
            # a Ctrl-C waits from the process's start until drover watches it: raised in between, it
            # left the process running unwatched (and a check's row unwritten); it arrives here instead
            with _signals_held():
                proc = subprocess.Popen(
                    argv, cwd=cwd, env={**os.environ, **env_add},
                    stdin=subprocess.PIPE if prompt_via == "stdin" else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    # Its own session: one signal reaches everything it spawns, and a Ctrl-C on the
                    # terminal reaches drover alone, which then decides.
                    start_new_session=True,
                )
                failpoint("launched", signal.SIGINT)  # tests: a Ctrl-C landing as soon as the process exists
                assert proc.stdout is not None  # stdout=PIPE
                exited = _exit_watch(proc.pid)
                output = _Output(log, raw_log, reader, show if echo else None)
                pump = threading.Thread(target=_pump, args=(proc.stdout.fileno(), output, stop), daemon=True)
                pump.start()
                if prompt_via == "stdin":
                    threading.Thread(target=_feed, args=(proc.stdin, prompt.encode("utf-8")), daemon=True).start()
            deadline = start + timeout if timeout else None
            every = progress_seconds()
            next_progress = start + every
            failpoint("agent-started")  # tests: killed with the agent running and its pid not yet recorded
            if on_start is not None:
                on_start(proc.pid)
            while proc.poll() is None:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    outcome = "timeout"
                    break
                if cancel is not None and cancel.is_set():
                    outcome = "interrupted"
                    break
                if token_ceiling and reader is not None and reader.tokens > token_ceiling:
                    if reader.usage_at_the_end:  # exiting already: if it does within the grace, it
                        _wait_exit(proc, exited, CEILING_GRACE)  # ended on its own (budgets.settle says so)
                        if proc.poll() is not None:
                            break
                    outcome = OVER_BUDGET
                    break
                silent = now - output.last_output
                if stall and silent >= stall:
                    outcome, stalled = "timeout", f"{STALLED_PREFIX} {format_elapsed(silent)}"
                    break
                if status_line and (status_shown or silent >= STATUS_AFTER):
                    # once shown, the job's line stays until its launch ends: lines coming and going flicker
                    status_shown = True
                    quiet = f"silent for {format_elapsed(silent)}, " if silent >= STATUS_AFTER else ""
                    STATUS.set(status_key, f"[{label} {format_elapsed(now - start)}] {quiet}log "
                                           f"{log_size(output.size)}; last: {output.last_line[:60]}", screen, now)
                elif not status_line and progress is not None and now >= next_progress:
                    progress(f"{progress_label or label}, {short_elapsed(now - start)}, "
                             f"log {log_size(output.size)}")
                    next_progress = now + every
                wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - now))
                _wait_exit(proc, exited, wait)
        except KeyboardInterrupt:
            if proc is None:  # before its process was started: nothing to end
                raise
            outcome = "interrupted"
        except BaseException:
            if proc is not None:
                end_run_processes(proc, grace, marker)
            stop.set()
            raise
        finally:
            STATUS.drop(status_key, screen)
            if exited is not None:
                os.close(exited)
        assert proc is not None and proc.stdout is not None  # only a raise leaves the try without them
        end_run_processes(proc, grace, marker)
        stop.set()
        pump.join()
        proc.stdout.close()
        if raw_log is not None:
            raw_log.close()
        elapsed = time.monotonic() - start
        if outcome != "exited":
            why = stalled or ("timed out" if outcome == "timeout" else "interrupted")
            if outcome == OVER_BUDGET and reader is not None:
                why = f"over budget ({reader.tokens:,} tokens, past its ceiling of {token_ceiling:,})"
            log.write(f"\n[drover] {why} after {format_elapsed(elapsed)}: "
                      "ended its processes\n".encode())
    return LaunchResult(exit_code=proc.returncode, outcome=outcome, elapsed=elapsed,
                        usage=reader.usage if reader is not None else None, stalled=stalled)


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # the two a drover command ends on (cli/exits.py)


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM for the block, then let the first that came arrive as it would have
    (its handler raises where the block ends). Python runs signal handlers in the main thread only:
    elsewhere (a drive's job, ended through its `cancel`) nothing needs holding."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    before: dict[signal.Signals, Any] = {}
    try:  # one that lands between the two is held or raised, and whichever was replaced is put back
        for signum in HELD_SIGNALS:
            before[signum] = signal.signal(signum, lambda number, frame: came.append(number))
        yield
    finally:
        # blocked while they are put back: one that landed between two of them raised there, and the
        # other stayed held for good (a SIGTERM swallowed for the rest of the command; hostile review 49)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, HELD_SIGNALS)
        try:
            for signum, handler in before.items():
                signal.signal(signum, handler)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # one that came meanwhile arrives now
        if came:
            signal.raise_signal(came[0])


def _exit_watch(pid: int) -> int | None:
    """A descriptor that becomes readable when the process `pid` exits (Linux's pidfd); None where
    the system has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _wait_exit(proc: subprocess.Popen[bytes], exited: int | None, seconds: float) -> None:
    """Wait up to `seconds` for the agent to exit, waking as it does: Popen.wait(timeout) polls
    with sleeps of up to 50 ms, which a drive paid after every run."""
    if exited is not None:
        select.select([exited], [], [], seconds)
        return
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        pass
