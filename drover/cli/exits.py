"""How a drover command ends: one `drover: ` line and a chosen exit code, never a traceback.

The group (main.py) calls these around every invocation, so the installed program, `python -m
drover.cli` and click's CliRunner all end the same way; nothing here outlives one invocation.
"""
from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

import click

# The exit codes a signal gives, 128 + its number (docs/commands.md lists them with the errors' codes).
SIGNAL_EXIT_CODES = {128 + signal.SIGINT: "SIGINT", 128 + signal.SIGTERM: "SIGTERM"}


def not_utf8(argv: list[str]) -> str:
    """Why the command line cannot be taken ("" when it can): an argument whose bytes are not UTF-8
    (Python keeps them as lone surrogates) would make an item file or a ledger row nothing can
    read back, so every command refuses it before it starts."""
    for number, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            from drover.errors import escaped  # here: only a refused command line needs it

            # every character visible, on one line: a line break or an escape in it acted (hostile review 49)
            shown = escaped(arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))
            return f"argument {number} '{shown[:60]}' is not UTF-8 text; drover takes UTF-8 only"
    return ""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM, raised where the command is, so a launch ends its agent and records the run."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Caught:
    """The first signal that arrived during one invocation (0: none)."""

    signum = 0


@contextmanager
def caught_signals() -> Iterator[Caught]:
    """SIGINT and SIGTERM raise Interrupted for the length of one invocation; the handlers before
    it are restored after, so a second invocation in the same process starts afresh."""
    caught = Caught()

    def interrupt(signum: int, frame: FrameType | None) -> None:
        caught.signum = caught.signum or signum
        raise Interrupted(signum)

    before = {}
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            before[signum] = signal.signal(signum, interrupt)
    except ValueError:
        pass  # not the main thread (a runner in a thread), where Python's own handling stays
    try:
        yield caught
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def answer(exc: BaseException) -> int:
    """Say what ended the command (one line on stderr, or nothing for a closed pipe) and return its exit
    code: for a DroverError, Ctrl-C or SIGTERM, an OSError or a sqlite3.Error (DroverGroup.invoke)."""
    from drover.errors import DroverError, printable

    if isinstance(exc, DroverError):
        for line in exc.lines:  # it may quote an item file, a branch or a path an agent wrote
            click.echo(f"drover: {printable(line)}", err=True)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        signum = getattr(exc, "signum", signal.SIGINT)
        click.echo("drover: terminated" if signum == signal.SIGTERM else "drover: interrupted", err=True)
        return 128 + signum
    if isinstance(exc, BrokenPipeError):
        # the reader stopped early (`drover schema --fields | head`): what it wanted arrived
        drop_stdout()
        return 0
    if isinstance(exc, OSError):
        # the machine said no (permissions, a full disk): its words, on one line
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"drover: {where}{exc.strerror or exc}", err=True)
        return 2
    click.echo(f"drover: .drover/ledger.db: {exc}", err=True)  # sqlite3.Error, the last the group hands here
    return 2


def drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into a closed pipe says nothing."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
