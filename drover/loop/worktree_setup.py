"""`[run] setup`: a command run once in each new worktree before its first agent.

A fresh worktree has the code but none of what the code needs (a virtualenv, node_modules);
worse, an editable install made in the main checkout makes the worktree's tests import the
main checkout's code. The setup command (`uv sync`, `npm ci`, `pip install -e .`) runs in the
worktree itself, so the agent's verify command tests the branch it is on.
"""
from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from drover import git
from drover.git.files import folder_fd, open_regular, regular_fd, remove_at, replace_at
from drover.errors import DroverError, GitError, escaped, one_line, printable, shortened, shown_paths
from drover.loop.runnable import command_words

if TYPE_CHECKING:
    from drover.config import Config
    from drover.ledger.project import Project

MARKER = "drover-setup-done"
SAID_CHARS = 200  # of the set-up's last lines quoted in its failure's line
SAID_LINES = 3  # the most of its last lines quoted there
PREFIX_WORDS = 3  # the most words a program's own prefix has (`npm error`, `npm ERR!`)
SAID_BYTES = 64 * 1024  # of its output read back for that line
# the operator's command lines (`[run] setup`, the verify command) run through it, like a Makefile recipe
SHELL = "/bin/sh"
# in the set-up's environment: its worktree, and a token of this set-up's own, the mark a later set-up
# there finds an orphan by
SETUP_MARK, SETUP_RUN_MARK = "DROVER_SETUP", "DROVER_SETUP_RUN"
# in the worktree's private git folder while a set-up runs there: its token, removed when it exits of
# itself, so left only by a set-up whose drover was killed (or that a timeout or signal ended)
RUNNING = "drover-setup-running"
ORPHAN_GRACE = 5.0  # seconds an orphaned set-up has to end on SIGTERM before SIGKILL


# of a `[run] setup_inputs` file read for its digest; a larger one counts by its size and times: an
# implementer's lockfile made a sparse file of terabytes was read whole before each later run (hostile review 38)
INPUT_BYTES = 64 << 20
COMMAND_PART, KEEP_PART = "\0command", "\0keep"  # no file's name: a path holds no NUL


def input_parts(config: "Config", worktree: Path) -> dict[str, bytes]:
    """What a pooled worktree's set-up depends on, part by part, as its digest reads them: the setup
    command, `[run] keep` (what a clean spares of what set-up made), and each `[run] setup_inputs`
    file as the worktree has it (a link counts by what it names, never followed; a missing file, a
    fifo or a device counts as missing; one past INPUT_BYTES by its size and times)."""
    parts = {COMMAND_PART: config.setup.encode() + b"\0",
             KEEP_PART: b"keep\0" + "\0".join(config.keep).encode() + b"\0\0"}
    for name in config.setup_inputs:
        path = worktree / name
        try:
            if path.is_symlink():
                part = b"link\0" + os.readlink(path).encode()
            elif path.is_file():
                # never a wait on a fifo put in its place since, nor a read past INPUT_BYTES
                with open(regular_fd(path), "rb") as handle:
                    status = os.fstat(handle.fileno())
                    if status.st_size > INPUT_BYTES:
                        part = f"large\0{status.st_size}\0{status.st_mtime_ns}\0{status.st_ctime_ns}".encode()
                    else:
                        part = b"file\0" + hashlib.file_digest(handle, "sha256").digest()
            else:
                part = b"absent"
        except OSError:
            part = b"unreadable"
        parts[name] = name.encode() + b"\0" + part + b"\0"
    return parts


def inputs_digest(parts: dict[str, bytes]) -> str:
    """sha256 over input_parts in their order: the digest a pooled worktree's ledger row keeps."""
    digest = hashlib.sha256()
    for part in parts.values():
        digest.update(part)
    return digest.hexdigest()


def part_digests(parts: dict[str, bytes]) -> dict[str, str]:
    """A short digest of each part, kept with the set-up's event so a later one can say what changed."""
    return {name: hashlib.sha256(part).hexdigest()[:16] for name, part in parts.items()}


def changed_parts(kept: object, parts: dict[str, bytes]) -> str:
    """The parts that differ from `kept` (a set-up event's part_digests), in words: `package-lock.json`,
    `the set-up command`; "" when `kept` is not such a record (an event from before it was kept) or
    nothing differs by it."""
    if not isinstance(kept, dict):
        return ""
    now = part_digests(parts)
    words = {COMMAND_PART: "the set-up command", KEEP_PART: "[run] keep"}
    changed = [words.get(name) or escaped(name) for name, value in now.items() if kept.get(name) != value]
    changed += [escaped(name) for name in kept if name not in now and name not in words]  # an input no longer listed
    return ", ".join(changed[:SHOWN_PARTS]) + (f" and {len(changed) - SHOWN_PARTS} more" if len(changed) > SHOWN_PARTS else "")


SHOWN_PARTS = 3  # changed parts a set-up's reason names


class SetupFailed(DroverError):
    """The setup command exited non-zero or could not run (exit 1: the item stops)."""

    exit_code = 1


class SetupInterrupted(SetupFailed):
    """Ctrl-C or SIGTERM ended the setup command: nothing is known to be wrong with it."""


def run_setup(command: str, worktree: Path, log_path: Path, *, item_id: str, shown_log: str,
              timeout: float | None = None, once: bool = True, cancel: threading.Event | None = None,
              progress: Callable[[str], None] | None = None, label: str = "", why: str = "") -> bool:
    """Run `command` in `worktree` unless it already ran there (`once`); True when it ran now.
    `label` begins its progress lines (`D-1: [run] setup`, the default, for the item's own run); `why`,
    when given, says on the first why it runs (a pooled worktree's inputs changed).

    Its output goes to `log_path` (the run's log, which the agent then appends to). The marker
    lives in the worktree's private git folder, so a worktree removed and made again runs it again.
    A pooled worktree (pool.py) passes once=False: the ledger's digest of its inputs decides.
    """
    if not command.strip():
        return False
    marker = git.private_dir(worktree) / MARKER if once else None
    if marker is not None and marker.exists():
        return False
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open_regular(log_path, "ab") as log:
        log.write(f"$ {command}    # [run] setup, in {worktree}\n".encode())
        start = log.tell()  # the set-up's own output begins here: its last line says why it failed
    # the operator's own command line, like a Makefile recipe: through the shell, launched as an agent
    # is (launching() included): in a session of its own, ended whole by the timeout, Ctrl-C, SIGTERM
    # or `cancel`, signs of life through `progress`; what it double-forks is re-parented to drover,
    # not to init, where it would pass for the operator (acting.traced_run)
    from drover.agents import launch as agents

    say = progress or to_stderr  # an install may take minutes: said before, so no one waits on silence
    label = label or f"{item_id}: [run] setup"
    # a set-up a drover killed with SIGKILL left running here (nothing of that drover was left to end
    # it): one run beside it would write the same files (two `npm ci` in one node_modules), and the
    # digest would then call their mixture set up. This drover holds the worktree now, so whatever
    # carries the token of a set-up that never exited of itself is an orphan; a server a set-up that
    # exited started (a Gradle daemon, shared by every worktree) is not (docs/worktrees.md, "Set-up")
    token, private = _orphans_ended(worktree, item_id, say)
    say(f"{label} ({why}) ..." if why else f"{label} ...")
    clock = time.monotonic()
    ended = agents.launch([SHELL, "-c", command], cwd=worktree,
                          env_add={"DROVER_ITEM": item_id, "DROVER_WORKTREE": str(worktree),
                                   SETUP_MARK: str(worktree), SETUP_RUN_MARK: token}, prompt="",
                          prompt_via="file", log_path=log_path, timeout=timeout, label=f"{item_id} setup",
                          echo=False, cancel=cancel, progress=progress, progress_label=label)
    if ended.outcome == "exited" and private is not None:
        _in_folder(private, lambda folder: remove_at(folder, RUNNING))
    status = f"exit {ended.exit_code}" if ended.outcome == "exited" else ended.outcome.replace("timeout", "timed out")
    failed = ended.outcome != "exited" or ended.exit_code != 0
    said = last_said(log_path, start) if failed else ""  # read before drover's line below
    with open_regular(log_path, "ab") as log:
        log.write(f"# [run] setup ended: {status}\n".encode())
    if ended.outcome == "interrupted":
        raise SetupInterrupted(f"{item_id}: [run] setup interrupted; log: {shown_log}")
    if failed:
        raise SetupFailed(f"{item_id}: [run] setup failed ({status}: {said or 'it printed nothing'}); "
                          f"log: {shown_log}")
    if marker is not None:  # in place of what an agent left there: a link was written through (hostile review 49)
        _in_folder(marker.parent, lambda folder: replace_at(folder, MARKER, (command + "\n").encode()))
    say(f"{label} done in {time.monotonic() - clock:.1f}s")
    return True


def _orphans_ended(worktree: Path, item_id: str, say: Callable[[str], None]) -> tuple[str, Path | None]:
    """End what the set-up whose token RUNNING names left running in `worktree` (SIGTERM, then
    SIGKILL), saying so; (the token of the set-up about to run there, written in its place, and the
    folder it is written in: None where git cannot name it)."""
    token = os.urandom(16).hex()
    private = _private_dir(worktree)
    if private is None:
        return token, None
    orphans = _end_left(private, worktree)
    if orphans:
        say(f"{item_id}: ended a [run] setup a killed drover left running in {escaped(str(worktree))} "
            f"({_pids_shown(orphans)})")
    _in_folder(private, lambda folder: replace_at(folder, RUNNING, token.encode()))
    return token, private


def end_setup_orphans(worktree: Path) -> str:
    """Before `worktree` is removed: end what a set-up a killed drover left running there (its token
    goes with the worktree's private folder, and an install running on would write into the worktree
    made again at the same path, beside that one's own set-up); what was ended, "" for nothing."""
    # a link in its place leads to no worktree of the pool's (git/cleaning.discard_worktree)
    private = None if os.path.islink(worktree) or os.path.islink(worktree.parent) else _private_dir(worktree)
    orphans = _end_left(private, worktree) if private is not None else []
    return f"ended a [run] setup a killed drover left running there ({_pids_shown(orphans)})" if orphans else ""


def _private_dir(worktree: Path) -> Path | None:
    try:
        return git.private_dir(worktree)
    except GitError:
        return None


def _end_left(private: Path, worktree: Path) -> list[int]:
    """End every process carrying the token a set-up left in `private` and the mark of a set-up in
    `worktree` (SIGTERM, then SIGKILL). Both: `private` is the folder the worktree's `.git` file
    names, which the agent can rewrite to name another worktree's, whose live set-up's token is
    there (hostile review 50); a set-up elsewhere carries its own worktree's path."""
    from drover.agents.procs import end_marked

    left = _left_token(private / RUNNING)
    return end_marked(SETUP_RUN_MARK, left, ORPHAN_GRACE, also=((SETUP_MARK, str(worktree)),)) if left else []


def _pids_shown(pids: list[int]) -> str:
    return f"pid {shown_paths(list(map(str, pids)), most=1)}"  # `pid 26019 and 1 more`


def _left_token(path: Path) -> str:
    """The token in `path`, "" for none or for anything else there (the file is the agent's to
    write): read as a regular file, never through a link, never waiting on a fifo."""
    try:
        fd = regular_fd(path)
    except OSError:
        return ""
    try:
        found = os.read(fd, 64).decode("ascii", errors="replace")
    finally:
        os.close(fd)
    return found if len(found) == 32 and all(c in "0123456789abcdef" for c in found) else ""


def _in_folder(path: Path, act: Callable[[int], None]) -> None:
    """`act` on the folder `path` opened (never through a link); nothing where it cannot be opened."""
    try:
        folder = folder_fd(path.parent, path.name)
    except OSError:
        return
    try:
        act(folder)
    except OSError:
        pass
    finally:
        os.close(folder)


def last_said(log_path: Path, start: int) -> str:
    """What the set-up said last in its log after byte `start`: its last non-empty lines, up to
    SAID_LINES of them and as many as fit SAID_CHARS, each folded to one printable line, joined by
    ` / ` (`sh: 1: pip: not found / make: *** [Makefile:3: install] Error 127`); the last alone, cut,
    when it is longer. What its failure quotes, as a failed check's findings quote its tail; "" when
    it wrote nothing. A line that says no more than the words other lines begin with is the program's
    prefix, not what it said, and is passed over: npm ends with a bare `npm error` (docs/configuration.md)."""
    from drover.agents.failures import tail  # a run's failure reads its log's end so

    # not drover's own `[drover] timed out after ...` line below it: the status says that
    lines = [one_line(line) for line in tail(log_path, SAID_BYTES, start=start).split("\n")
             if line.strip() and not line.startswith("[drover] ")]
    return _joined([printable(line) for line in _past_prefixes(lines)][-SAID_LINES:])


def _past_prefixes(lines: list[str]) -> list[str]:
    """`lines` but those that say no more than the first words (up to PREFIX_WORDS) of any of them."""
    prefixes = {" ".join(words[:count]) for words in (line.split(" ") for line in lines)
                for count in range(1, min(len(words), PREFIX_WORDS + 1))}
    return [line for line in lines if line not in prefixes]


def _joined(said: list[str]) -> str:
    """The last of `said`, and as many of those before it as fit SAID_CHARS, joined by ` / `; the
    last alone, cut, when it is longer; "" for none."""
    if not said:
        return ""
    quoted = said[-1]
    if len(quoted) > SAID_CHARS:
        return shortened(quoted, SAID_CHARS)
    for line in reversed(said[:-1]):
        if len(line) + 3 + len(quoted) > SAID_CHARS:
            break
        quoted = f"{line} / {quoted}"
    return quoted


def to_stderr(line: str) -> None:
    """Progress where the caller gives no function of its own."""
    print(line, file=sys.stderr, flush=True)


def mends_its_setup(project: Project, item_id: str, branch: str, head: str, log_path: Path,
                    progress: Callable[[str], None] | None) -> bool:
    """Whether an implementing run whose `[run] setup` failed starts without it, saying so: when its
    branch changed what the set-up reads (a `[run] setup_inputs` file, or one its words name). The
    branch broke it, drover's check sent that back as a round (verify.cannot_run), and the set-up would fail
    before every later run (a new user on tkem/cachetools: a pooled worktree set up again after the
    branch added a dependency no index has, and the item failed with its round unanswered)."""
    config = project.config
    changed = changed_names(project, [*command_words(config.setup), *config.setup_inputs], head) if head else []
    if not changed:
        return False
    # each with its escapes written out: `drover run` prints the line as it comes, and a branch may
    # be rendered from a title (a right-to-left override reordered the line: hostile review 46)
    said = (f"[run] setup failed, and {escaped(branch)} changed {escaped(changed[0])}, which it reads: the "
            "implementer starts without it, to mend the branch")
    with open_regular(log_path, "ab") as log:
        log.write(f"# {said}\n".encode())
    (progress or to_stderr)(f"{item_id}: warning: {said}")
    return True


def changed_names(project: Project, words: list[str], head: str, *, base_head: str = "") -> list[str]:
    """The files `words` (a command's, files' names) name that `head` changed against base, sorted."""
    named = {os.path.normpath(word) for word in words if not word.startswith("-") and "=" not in word}
    named = {path for path in named if not os.path.isabs(path) and not path.startswith("..")}
    changed = git.changed_paths(project.root, project.config.base, head, base_head=base_head)
    return sorted(named.intersection(changed))
