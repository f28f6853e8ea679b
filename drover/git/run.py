"""The one place git is started: subprocess.run, with drover's pinned config and environment."""
from __future__ import annotations

import errno
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drover.errors import GitError

if TYPE_CHECKING:
    import subprocess

# Config that would change what drover parses (quoted paths, missing a/ b/ prefixes, colour,
# external diff drivers) is pinned per call, whatever the user's git config says. So is config
# that would run a program: the hooks folder and `.git/config` are the repository's common ones,
# which every worktree an agent works in can write to, so a hook, a file-system monitor or a
# signing program named there is the agents' program, and drover would run it as the operator
# (a merge's post-merge, a worktree's post-checkout, every status's fsmonitor, the merge commit's
# gpg; docs/security.md). Signatures are neither shown nor required: `log.showSignature` would
# run the signing program named there to check an agent's signed commits, for every log drover
# reads, and `merge.verifySignatures` would refuse drover's own unsigned merge commit. No git of
# drover's starts automatic maintenance either: a merge's `gc --auto` would run under the drive's
# merge lock; drover asks for it once, at the end (housekeeping below). And no advice: git's hints
# (one for the grafts file drover turns off below) would stand in front of the error drover reports.
# And what git believes of a worktree's files is its own look at them: it compares every stat field
# (ctime included, which no process can set back) and keeps no index split over other files, so
# config that an agent sets cannot make a changed file look untouched (cleaning.restore_index).
# Every submodule's change is a change (git's default): `diff.ignoreSubmodules = all` hid a gitlink a
# branch added at `.drover/ledger.db` from finish's check (history.SUBMODULES says the rest).
# And a log in UTF-8, the text drover reads: `i18n.logOutputEncoding = UTF-16LE` wrote a NUL after each
# byte, where drover's log of a branch's commits ends each field with one, so a subject could spell
# the rows of the review prompt's commit list and its head under review (hostile review 31).
# And git's own text merge for a file no attribute gives a driver: `merge.default = union` names a
# built-in driver (no program runs), which merged both sides' lines where base and the branch wrote
# the same line two ways, and finish landed that, a conflict nobody saw (hostile review 32). git
# looks the name up among the drivers the config defines first, so `text` would run a planted
# `merge.text.driver` (and an empty name `merge..driver`): the pin names none, a name with a line
# break no config file can give a driver, and git then merges as text, its default.
# And no submodule recursion: `submodule.recurse = true` in the shared config made drover's switch,
# reset and checkout go into each active submodule, in the git folder `.git/modules/<name>` names,
# which an agent can make a link to another repository: finish's switch wrote that repository's
# `core.worktree` and moved its HEAD, and every new worktree's reset failed on a submodule base
# holds (hostile review 33). A fetch (a bundle's) recurses into none either.
# And no colour: `color.ui = false` is only the default of each command's own key, and `color.grep =
# always` in the shared config wrote escapes around the path and line number of each match drover's
# grep for conflict markers reads (hostile review 40).
# And no recorded resolutions: `rerere.enabled` and `rerere.autoUpdate` in the shared config, with a
# resolution an agent left in the shared `rr-cache`, had git's merge of base into a branch take that
# resolution and stage it: no conflict left to report, and the merge failed as an error, the drive's
# and the check's (hostile review 41). A conflict drover's merge meets is the agents' to resolve.
# And a file one side adds in a folder the other side renamed is a conflict (git's default):
# `merge.directoryRenames = true` (or `false`) in the shared config made the merge clean, base's file
# moved into the branch's new folder (or left in the one it moved away), and finish landed a tree
# nobody approved where git would have stopped (hostile review 41).
# And drover's commits are labelled UTF-8, the text they hold: `i18n.commitEncoding = UTF-16` in the
# shared config wrote `encoding UTF-16` into finish's merge commit (and drover's item commits) on
# base, for good, and every git since read its UTF-8 title as UTF-16 (hostile review 41).
# And a merge's message is the one drover gives: `merge.log` and `merge.branchdesc` in the shared config
# had finish's merge in the checkout (a git older than 2.38) add the branch's subjects and its
# `branch.<name>.description`, any lines an agent wrote, to drover's merge commit on base (hostile review 45);
# and `commit.cleanup = strip` with a `core.commentChar` of the agent's choosing (`d`) took away the
# lines of drover's message that begin with it, the whole message, and that merge stopped on it.
# A reviewer's git gets the program pins of these, not the output ones (agents/environment.REVIEW_GIT).
_NO_COLOR = tuple(word for command in ("diff", "grep", "branch", "status", "showBranch", "interactive", "remote", "push",
                                         "transport", "advice") for word in ("-c", f"color.{command}=false"))
PINNED = ("-c", "core.quotePath=false", "-c", "color.ui=false", *_NO_COLOR, "-c", "core.hooksPath=/dev/null",
          "-c", "core.fsmonitor=false", "-c", "commit.gpgSign=false", "-c", "log.showSignature=false",
          "-c", "merge.verifySignatures=false", "-c", "maintenance.auto=false",
          "-c", "advice.graftFileDeprecated=false", "-c", "core.trustctime=true", "-c", "core.checkStat=default",
          "-c", "core.ignoreStat=false", "-c", "core.splitIndex=false", "-c", "core.bigFileThreshold=512m",
          "-c", "diff.ignoreSubmodules=none", "-c", "i18n.logOutputEncoding=UTF-8", "-c", "merge.default=git's\ntext merge",
          "-c", "submodule.recurse=false", "-c", "fetch.recurseSubmodules=false", "-c", "rerere.enabled=false",
          "-c", "merge.directoryRenames=conflict", "-c", "i18n.commitEncoding=UTF-8",
          "-c", "merge.log=false", "-c", "merge.branchdesc=false", "-c", "commit.cleanup=whitespace",
          "-c", "core.useReplaceRefs=false")


# Every tracked file written where drover makes or checks out a worktree: with `core.sparseCheckout`
# in the shared config (an agent's to write) git leaves out of the checkout what the patterns of the
# current worktree (`.git/info/sparse-checkout`, also an agent's) leave out, and `worktree add` copies
# those patterns into each new worktree: the check's worktree then lacked the files they name (a
# failing test), and the check passed (hostile review 41). Not pinned on every git of drover's: the
# operator's main checkout may be a sparse one, and stays so.
WHOLE = ("-c", "core.sparseCheckout=false")


def said_line(text: str) -> str:
    """git's message on one line: its non-blank lines joined by `; ` (errors.one_line folds a name's
    whitespace instead)."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


# No replacement objects and no grafts: `refs/replace/` and `info/grafts` are the repository's
# common ones, which an agent can write (`git replace`), and either would show other content, or
# other parents, under the id of the commit a review approved (docs/security.md). drover's git
# reads the commits as they are, and so does a reviewer's (agents/environment.py). The shared
# config's `core.useReplaceRefs = true` turns replacements back on over the variable (hostile review
# 50): PINNED and REVIEW_GIT say false after it.
AS_COMMITTED = {"GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


def _env() -> dict[str, str]:
    # No editor and no prompts: drover runs git unattended.
    return dict(os.environ, GIT_TERMINAL_PROMPT="0", GIT_EDITOR="true", GIT_MERGE_AUTOEDIT="no", **AS_COMMITTED)


def _started(args: list[str], cwd: Path | None, popen: type[subprocess.Popen[Any]],
             env_add: dict[str, str] | None = None, **streams: Any) -> subprocess.Popen[Any]:
    """git `args` started by `popen` in `cwd`: the program PATH finds, PINNED, drover's environment
    with `env_add` over it, and `streams` (stdin, stdout, stderr, decoding) as Popen takes them. A git
    that cannot start raises GitError in one line, as every caller reads git's failures."""
    program = _program()
    try:
        return popen([program, *PINNED, *_own_work_tree(cwd, args), *args], cwd=cwd, env={**_env(), **(env_add or {})}, **streams)
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise _cannot_start(exc, cwd, program) from None
    except OSError as exc:
        if exc.errno != errno.E2BIG:
            raise
        # a branch's paths past what one command line holds (a hostile branch of 100,000 folders)
        raise GitError(f"git {_command(args)}: {len(args):,} arguments are more than one "
                       "command line holds") from None


def _own_work_tree(cwd: Path | None, args: list[str]) -> tuple[str, ...]:
    """`--work-tree=<cwd>` where `cwd` is a main checkout (its `.git` a folder): git takes the
    checkout's files from `core.worktree` in the shared `.git/config` (an agent's to write) before
    the folder it runs in, so finish's merge wrote the branch's files into whatever folder an agent
    named there, as the operator, and not into the checkout (hostile review 41). A linked worktree's
    git reads no `core.worktree` from the shared config. Not for a `clone` or an `init`, which would
    take it for the new repository's work tree."""
    if cwd is None or _command(args) in ("clone", "init") or not os.path.isdir(os.path.join(cwd, ".git")):
        return ()
    return (f"--work-tree={cwd}",)


def _cannot_start(exc: OSError, cwd: Path | None, program: str = "git") -> GitError:
    if isinstance(exc, NotADirectoryError):
        return GitError(f"not a directory: {cwd}")
    if isinstance(exc, FileNotFoundError) and exc.filename not in ("git", program, None):
        return GitError(f"no such directory: {cwd}")
    _found.cache_clear()  # found once, gone now: looked for again next time
    return GitError("git is not installed")


def _timeout() -> float | None:
    """How long one git of drover's may take, in seconds (`DROVER_GIT_TIMEOUT`, 900 when unset or
    not a number; 0 or less: no limit). git waits for ever on a fifo put where it reads a file of the
    git folder (a loose ref, a worktree's HEAD), and agents write that folder: a drive unattended
    would wait with it (docs/security.md)."""
    try:
        seconds = float(os.environ.get("DROVER_GIT_TIMEOUT") or 900)
    except ValueError:
        seconds = 900.0
    return seconds if seconds > 0 else None


def _timed_out(args: list[str], seconds: float | None) -> GitError:
    return GitError(f"git {_command(args)} did not end within {seconds:g}s: a fifo in place of a file of the git "
                    "folder makes git wait for ever (`find .git -type p` lists any; DROVER_GIT_TIMEOUT sets the limit)")


def _program() -> str:
    """The git PATH finds, by its absolute path: the same program the kernel would be asked for by
    name, without the failed `execve` of each folder before it on PATH, every call. Looked for once
    a PATH (a test's or a caller's own PATH is another key); "git" when none is found."""
    return _found(os.environ.get("PATH", os.defpath))


@functools.lru_cache(maxsize=8)
def _found(path: str) -> str:
    import shutil

    found = shutil.which("git", path=path)
    return found if found and os.path.isabs(found) else "git"


@functools.cache
def _popen() -> type[subprocess.Popen[Any]]:
    """Popen whose wait within the time limit wakes when git exits (Linux's pidfd). Popen's own wait
    with a timeout polls with sleeps from 0.5 ms doubling up to 50 ms, and git has closed its output
    a moment before it can be reaped: every git call drover made paid 0.5-2 ms of sleep after git
    had ended (docs/performance.md). Where there is no pidfd, Popen's polling, as before."""
    import select
    import subprocess

    class Git(subprocess.Popen[Any]):
        def wait(self, timeout: float | None = None) -> int:
            if timeout is not None and self.returncode is None:
                try:
                    exited = os.pidfd_open(self.pid)
                except (AttributeError, OSError):
                    return super().wait(timeout)
                try:
                    watch = select.poll()
                    watch.register(exited, select.POLLIN)
                    if not watch.poll(max(timeout, 0.0) * 1000):
                        raise subprocess.TimeoutExpired(self.args, timeout)
                finally:
                    os.close(exited)
                timeout = None  # it has exited: reaped at once
            return super().wait(timeout)

    return Git


def _ran(args: list[str], cwd: Path | None, stdin: bytes | str | None, text: bool,
         env_add: dict[str, str] | None = None) -> subprocess.CompletedProcess[Any]:
    """subprocess.run(capture_output=True, timeout=_timeout()) of git `args`, by _popen; stdin fed
    `stdin`, or this process's own when None; `env_add` over drover's environment for git."""
    import subprocess  # here: a command that never runs git does not pay for the import

    seconds = _timeout()
    decoding: dict[str, Any] = {"encoding": "utf-8", "errors": "replace"} if text else {}
    with _started(args, cwd, _popen(), env_add, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  stdin=None if stdin is None else subprocess.PIPE, **decoding) as proc:
        try:
            out, err = proc.communicate(stdin, timeout=seconds)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise _timed_out(args, seconds) from None
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def run_capped(args: list[str], cwd: Path, most: int) -> tuple[subprocess.CompletedProcess[str], bool]:
    """git `args` in `cwd` (no standard input), its output read as text up to `most` bytes, and True
    when it went past them: git is then ended and what was read kept to its last whole line. For an
    answer whose size a branch decides (a diff of a file of gigabytes that its commit packs in a few
    megabytes): read whole, it held gigabytes in memory (hostile review 39). Its exit status is git's
    own, or the signal's when cut; GitError as `run` raises it."""
    import subprocess
    import tempfile
    import time

    seconds = _timeout()
    deadline = None if seconds is None else time.monotonic() + seconds
    chunks: list[bytes] = []
    size, cut = 0, False
    with tempfile.TemporaryFile() as said:  # git's stderr: a file, which never fills as a pipe would
        proc = _started(args, cwd, _popen(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=said)
        assert proc.stdout is not None
        try:
            while not cut and (chunk := _read_by(proc.stdout.fileno(), deadline)):
                chunks.append(chunk)
                size += len(chunk)
                cut = size > most
            late = chunk is None
            if not (cut or late):  # git has closed its output: it ends, by the same deadline
                try:
                    proc.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
                except subprocess.TimeoutExpired:
                    late = True
        finally:  # cut, late, Ctrl-C or any error: git is ended (not a git that has ended on its own) and reaped
            proc.kill()
            proc.stdout.close()
            proc.wait()
        if late and proc.returncode < 0:  # ended here, not on its own a moment before
            raise _timed_out(args, seconds)
        said.seek(0)
        err = said.read().decode("utf-8", "replace")
    out = b"".join(chunks)
    if cut:
        out = out[:most]
        out = out[:out.rfind(b"\n") + 1]
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode("utf-8", "replace"), err), cut


def _read_by(fd: int, deadline: float | None) -> bytes | None:
    """The next bytes git wrote to `fd` (b"" at its end), or None once `deadline` (time.monotonic)
    has passed. The deadline is kept while reading, not by ending git: a process git started (the
    fetch of a partial clone's missing object, through a transport the shared config names) holds
    its output open, and a read until its end waited for that process, past the time limit
    (hostile review 40)."""
    import select
    import time

    if deadline is not None:
        watch = select.poll()
        watch.register(fd, select.POLLIN)
        if not watch.poll(max(deadline - time.monotonic(), 0.0) * 1000):
            return None
    return os.read(fd, 1 << 16)


def run(args: list[str], cwd: Path | None, *, env_add: dict[str, str] | None = None,
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """git `args` in `cwd` (None: the working directory), its output as text; GitError only when
    git cannot start, or does not end in time (_timeout). `env_add`: variables for this git alone;
    `stdin`: text fed to git (none: this process's own standard input)."""
    return _ran(args, cwd, stdin, True, env_add)


def run_bytes(args: list[str], cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    """git `args` in `cwd` fed `stdin`, its output as bytes (object ids, trees and paths as git wrote them)."""
    return _ran(args, cwd, stdin, False)


# The most bytes of paths drover puts on one git command line: far below the system's limit (2 MB of
# arguments and environment on Linux, less elsewhere), whatever the environment holds. A git
# command that cannot read its paths from standard input is given more another way (one_command_line).
COMMAND_LINE_BYTES = 100_000


def one_command_line(paths: list[str]) -> bool:
    """`paths` fit on one git command line (COMMAND_LINE_BYTES): a branch can change 100,000 paths,
    more than the system lets one command line hold (`Argument list too long`)."""
    return sum(len(path.encode("utf-8", "surrogateescape")) + 1 for path in paths) <= COMMAND_LINE_BYTES


def failure(args: list[str], done: subprocess.CompletedProcess[str]) -> GitError:
    """The GitError for a git that ran and failed, in git's own words."""
    said = said_line(done.stderr) or said_line(done.stdout) or f"exit status {done.returncode}"
    return GitError(f"git {_command(args)}: {said}")


def _command(args: list[str]) -> str:
    """The git command `args` run, past the options before it (`-c key=value`, WHOLE's)."""
    words = iter(args)
    for word in words:
        if word == "-c":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return args[0] if args else ""


def git(args: list[str], cwd: Path, *, check: bool = True, env_add: dict[str, str] | None = None) -> str:
    """Run git with `args` in `cwd` and return its stdout; a failure raises GitError with git's words.
    `env_add`: variables for this git alone (run's)."""
    done = run(args, cwd, env_add=env_add)
    if check and done.returncode != 0:
        raise failure(args, done)
    return done.stdout


def succeeds(args: list[str], cwd: Path) -> bool:
    """git `args` in `cwd` exits 0."""
    return run(args, cwd).returncode == 0


def rev_parse(cwd: Path, *args: str) -> str:
    """`git rev-parse ARGS` in `cwd`, stripped; "" when git fails or is not there (callers fall back)."""
    try:
        done = run(["rev-parse", *args], cwd)
    except GitError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def user_name(root: Path) -> str:
    """git's user.name for the repository at `root`; "" when unset."""
    return run(["config", "user.name"], root).stdout.strip()


def housekeeping(root: Path) -> None:
    """git's automatic maintenance, once, after a command whose agents committed or whose finish
    merged: neither an agent's git nor drover's starts it on its own (PINNED; agents.launch,
    where a `gc` an agent's commit left running would be ended with the run's other processes,
    half-way). git decides whether anything is due and, as after any commit, packs in the
    background. A git without `maintenance` (older than 2.29) ran its `gc --auto` already."""
    run(["maintenance", "run", "--auto", "--quiet"], root)
