"""Agent presets, argv, environment, and launching an agent in its own process group."""
from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, TextIO

from .config import CONFIG_FILE, AgentConfig
from .errors import ConfigError

# Placeholders an argv word may hold; agent_argv / launch fill them in.
PROMPT_FILE = "{prompt_file}"
PROMPT_TEXT = "{prompt}"
PROMPT_VIAS = ("stdin", "file", "arg")
GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Preset:
    """How one agent CLI is started and how its prompt reaches it."""

    name: str
    argv: tuple[str, ...]
    prompt_via: str
    install_hint: str
    binary: str


# The flags were checked against each CLI's --help; docs/agents.md records versions and reasons.
PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("claude", ("claude", "-p", "--permission-mode", "bypassPermissions"),
               "stdin", "npm install -g @anthropic-ai/claude-code", "claude"),
        Preset("codex", ("codex", "exec", "--sandbox", "danger-full-access", "--color", "never", "-"),
               "stdin", "npm install -g @openai/codex", "codex"),
        Preset("aider", ("aider", "--message-file", PROMPT_FILE, "--yes-always", "--no-gitignore",
                         "--no-dirty-commits", "--no-check-update", "--no-pretty"),
               "file", "python -m pip install aider-install && aider-install", "aider"),
        Preset("gemini", ("gemini", "--prompt", "", "--approval-mode", "yolo", "--skip-trust"),
               "stdin", "npm install -g @google/gemini-cli", "gemini"),
        Preset("opencode", ("opencode", "run", "--auto"),
               "stdin", "npm install -g opencode-ai", "opencode"),
        Preset("script", (), "stdin", "", ""),
        Preset("demo", (sys.executable, "-m", "drover.demo", "agent"),
               "stdin", "it ships with drover", sys.executable),
    )
}


@dataclass(frozen=True)
class LaunchResult:
    """How an agent run ended: `exited` (with its code), `timeout` or `interrupted`."""

    exit_code: int | None
    outcome: str
    elapsed: float


def resolve_agent(agent: AgentConfig) -> Preset:
    """The preset an [agent] table names, with `command` (if set) replacing its argv."""
    try:
        preset = PRESETS[agent.preset]
    except KeyError:
        raise ConfigError(f"{CONFIG_FILE}: [agent] preset: expected one of {', '.join(PRESETS)}, "
                          f"not {agent.preset!r}") from None
    if not agent.command.strip():
        if not preset.argv:
            raise ConfigError(f"{CONFIG_FILE}: [agent] command: the {preset.name} preset runs this command, "
                              "and it is empty")
        return preset
    try:
        words = tuple(shlex.split(agent.command))
    except ValueError as exc:
        raise ConfigError(f"{CONFIG_FILE}: [agent] command: {exc}") from None
    # A command says how it wants the prompt by naming a placeholder; otherwise stdin.
    if any(PROMPT_TEXT in word for word in words):
        via = "arg"
    elif any(PROMPT_FILE in word for word in words):
        via = "file"
    else:
        via = "stdin"
    return replace(preset, argv=words, prompt_via=via, binary=words[0])


def agent_argv(agent: AgentConfig, prompt_file: Path) -> tuple[list[str], str]:
    """The argv to run (prompt file filled in) and how the prompt travels: stdin, file or arg."""
    preset = resolve_agent(agent)
    argv = [word.replace(PROMPT_FILE, str(prompt_file)) for word in preset.argv]
    return argv, preset.prompt_via


def _installed(binary: str, cwd: Path | None) -> bool:
    if os.sep in binary and not os.path.isabs(binary):
        # A relative path is looked up from the agent's directory, known only at launch.
        return cwd is None or os.access(Path(cwd) / binary, os.X_OK)
    return shutil.which(binary) is not None


def binary_missing(agent: AgentConfig, *, cwd: Path | None = None) -> str:
    """"" when the agent's program can be found; else one line saying what to install."""
    preset = resolve_agent(agent)
    if _installed(preset.binary, cwd):
        return ""
    own = PRESETS[agent.preset]
    if preset.binary == own.binary and own.install_hint:
        return f"{own.name} is not installed: {own.install_hint}"
    return f"{preset.binary} (from [agent] command) is not installed or not on PATH"


def drover_bin_dir() -> Path | None:
    """The folder holding the `drover` program that is running now, if one can be found."""
    candidates = []
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "drover":
        candidates.append(os.path.dirname(os.path.abspath(argv0)))
    # Not resolved: a venv's python is a symlink, and its bin folder is the one that matters.
    candidates.append(os.path.dirname(os.path.abspath(sys.executable)))
    for folder in candidates:
        if os.access(os.path.join(folder, "drover"), os.X_OK):
            return Path(folder)
    return None


def _agent_path() -> str:
    path = os.environ.get("PATH", os.defpath)
    folder = drover_bin_dir()
    if folder is None:
        return path
    ours = folder / "drover"
    first = shutil.which("drover", path=path)
    if first and os.path.samefile(first, ours):
        return path  # already the first drover found; leave the agent's PATH alone
    return os.pathsep.join([str(folder), *[entry for entry in path.split(os.pathsep) if entry]])


def agent_env(*, item_id: str, slot: str, run_id: str, prompt_file: Path, repo: Path) -> dict[str, str]:
    """What an agent's environment adds: the DROVER_* variables, and PATH reaching this drover."""
    return {
        "DROVER_ITEM": item_id,
        "DROVER_SLOT": slot,
        "DROVER_RUN": str(run_id),
        "DROVER_PROMPT_FILE": str(prompt_file),
        "DROVER_REPO": str(repo),
        "PATH": _agent_path(),
    }


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
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def process_start(pid: int) -> str:
    """When the process started, in the kernel's clock ticks since boot; "" where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def run_alive(run: dict) -> bool:
    """An unfinished run whose agent is still that same process (a reused pid is not it)."""
    if run.get("finished") or not pid_alive(run.get("pid")):
        return False
    recorded = run.get("pid_start") or ""
    return not recorded or process_start(run["pid"]) in ("", recorded)


def format_elapsed(seconds: float) -> str:
    """0:12, 12:34, 1:02:03."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


_echo_lock = threading.Lock()


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
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the agent's whole process group, then SIGKILL whatever is left after `grace`."""
    pgid = proc.pid

    def alive() -> bool:
        proc.poll()  # reap the leader, or its zombie would keep the group "alive"
        return _group_alive(pgid)

    if alive():
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        try:
            while alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        except KeyboardInterrupt:
            pass  # a second Ctrl-C skips the rest of the grace period
        if alive():
            _signal_group(pgid, signal.SIGKILL)
    proc.wait()


def _feed(stream, data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError):
        pass  # the agent need not read its stdin
    finally:
        try:
            stream.close()
        except OSError:
            pass


def _pump(fd: int, log, stop: threading.Event, show: Callable[[bytes], None] | None) -> None:
    """Copy the agent's output into the log as it arrives, and whole lines to `show`."""
    pending = b""
    while True:
        # Once the group has ended, drain what is buffered and stop: a process that escaped
        # the group may hold the pipe open forever.
        ready, _, _ = select.select([fd], [], [], 0 if stop.is_set() else 0.2)
        if not ready:
            if stop.is_set():
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        try:
            log.write(chunk)
            log.flush()
        except OSError:
            pass  # keep draining even with a full disk, or the agent would block on its output
        if show is not None:
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                show(line)
    if pending and show is not None:
        show(pending)


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
) -> LaunchResult:
    """Run an agent in its own process group, streaming its output to `log_path` (and the screen).

    The timeout, Ctrl-C (KeyboardInterrupt) and `cancel` end the whole group: SIGTERM, then
    SIGKILL after `grace` seconds. So does the agent's own exit, for anything it left running.
    `on_start` learns the pid (also the group id) as soon as the process exists. A program that
    cannot be started raises OSError.
    """
    if prompt_via not in PROMPT_VIAS:
        raise ValueError(f"prompt_via must be one of {PROMPT_VIAS}, not {prompt_via!r}")
    argv = list(argv)
    if prompt_via == "arg":
        if any(PROMPT_TEXT in word for word in argv):
            argv = [word.replace(PROMPT_TEXT, prompt) for word in argv]
        else:
            argv.append(prompt)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    screen = out if out is not None else sys.stdout
    start = time.monotonic()

    def show(line: bytes) -> None:
        text = line.decode("utf-8", errors="replace").rstrip("\r")
        with _echo_lock:
            try:
                screen.write(f"[{label} {format_elapsed(time.monotonic() - start)}] {text}\n")
                screen.flush()
            except (OSError, ValueError):
                pass  # a closed screen (drover piped into `head`) must not stop the log

    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            argv, cwd=cwd, env={**os.environ, **env_add},
            stdin=subprocess.PIPE if prompt_via == "stdin" else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            # Its own session: one signal reaches everything it spawns, and a Ctrl-C on the
            # terminal reaches drover alone, which then decides.
            start_new_session=True,
        )
        stop = threading.Event()
        reader = threading.Thread(target=_pump, args=(proc.stdout.fileno(), log, stop, show if echo else None),
                                  daemon=True)
        reader.start()
        if prompt_via == "stdin":
            threading.Thread(target=_feed, args=(proc.stdin, prompt.encode("utf-8")), daemon=True).start()
        deadline = start + timeout if timeout else None
        outcome = "exited"
        try:
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
                wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - now))
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
        except KeyboardInterrupt:
            outcome = "interrupted"
        except BaseException:
            _end_group(proc, grace)
            stop.set()
            raise
        _end_group(proc, grace)
        stop.set()
        reader.join()
        proc.stdout.close()
        elapsed = time.monotonic() - start
        if outcome != "exited":
            why = "timed out" if outcome == "timeout" else "interrupted"
            log.write(f"\n[drover] {why} after {format_elapsed(elapsed)}: "
                      "ended the agent's process group\n".encode())
    return LaunchResult(exit_code=proc.returncode, outcome=outcome, elapsed=elapsed)
