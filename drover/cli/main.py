"""The command line: parse options, call the core, print. Nothing else lives here."""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from drover.cli.parts import ITEM_ID
from drover.errors import DroverError
# The shared helpers live in fastpath.py, beside the bodies of the commands it runs without click.
from drover.cli.fastpath import echo_outcome, opened
from drover.vocabulary import DISPOSITIONS, LEVELS, LIST_STATES

# what an option decorator takes and gives back: the command function, its type unchanged
Decorated = TypeVar("Decorated", bound=Callable[..., Any])

COLOR_CHOICES = click.Choice(["auto", "always", "never"])


class DroverGroup(click.Group):
    """Turns every DroverError into one line on stderr and its exit code; never a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _usage_line(ctx, exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from drover.cli.parts import format_sections

        format_sections(self, ctx, formatter)

    def invoke(self, ctx: click.Context) -> Any:
        import sqlite3

        from drover.cli.fastpath import answer

        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_line(ctx, exc)
        except (DroverError, KeyboardInterrupt, OSError, sqlite3.Error) as exc:
            ctx.exit(answer(exc))


def _usage_line(ctx: click.Context, exc: click.UsageError) -> NoReturn:
    """A usage error as one line, like every other drover error (exit 2)."""
    if isinstance(exc, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        raise exc  # bare `drover`: the help text is the answer, as click shows it
    command = exc.ctx.command_path if exc.ctx is not None else ctx.command_path
    message = " ".join(exc.format_message().split()).rstrip(".")
    click.echo(f"drover: {message} (see `{command} --help`)", err=True)
    ctx.exit(exc.exit_code)


@click.group(cls=DroverGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="drover-cli")
@click.option("--color", type=COLOR_CHOICES, default="auto", show_default=True,
              help="Colour the output: auto (a terminal, unless NO_COLOR is set), always, never.")
@click.pass_context
def cli(ctx: click.Context, color: str) -> None:
    """Run AI coding agents in a loop over a project's work items, and keep the record."""
    from drover.cli.views import use_color

    ctx.color = use_color(color, sys.stdout)


def main() -> None:
    if sys.argv[1:] in (["--help"], ["-h"]):
        from drover.cli.helpcache import print_help

        if print_help(cli, __file__):
            return
    from drover.cli.fastpath import catch_signals, exit_for_signal

    catch_signals()
    try:
        cli(prog_name="drover")
    except SystemExit as exc:
        exit_for_signal(exc.code)  # 130 after Ctrl-C, 143 after SIGTERM, where the command then failed
        raise


def json_option(func: Decorated) -> Decorated:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


# --- the foundation ------------------------------------------------------------------------


@cli.command()
def init() -> None:
    """Write drover.toml, items/ and .drover/, and git-ignore .drover/."""
    from drover.cli.scaffold import init_project

    for line in init_project(Path.cwd()):
        click.echo(line)


@cli.command()
@click.argument("title", required=False)
@click.option("--kind", default=None, help="A free word: bug, feature, chore, ... (default: feature, or the "
              "issue's labels through [tracker] kinds)")
@click.option("--dep", "deps", multiple=True, metavar="ID", type=ITEM_ID, help="An item this one depends on (repeatable).")
@click.option("-f", "--finding", "finding", metavar="ID", type=ITEM_ID, default="",
              help="The item whose review produced this one.")
@click.option("--issue", type=int, metavar="N", help="Create the item from tracker issue N (title, kind, text).")
@json_option
def new(title: str | None, kind: str | None, deps: tuple[str, ...], finding: str, issue: int | None,
        as_json: bool) -> None:
    """Create the next item and print its id first."""
    from drover.cli import fastpath

    fastpath.new(title, kind, deps, finding, issue, as_json)


@cli.command(name="list")
@click.option("--ready", is_flag=True, help="Only items drive would take now.")
@click.option("--state", "states", multiple=True, metavar="STATE", type=click.Choice(LIST_STATES),
              help="Only items in this state (repeatable; quote states with a space).")
@json_option
def list_cmd(ready: bool, states: tuple[str, ...], as_json: bool) -> None:
    """Items with their state."""
    from drover.cli import fastpath

    fastpath.list_items(ready, states, as_json)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@json_option
def show(item_id: str, as_json: bool) -> None:
    """One item: frontmatter, deps, runs, rounds, audits, dispositions."""
    from drover.cli import fastpath

    fastpath.show(item_id, as_json)


@cli.command(name="request-changes")
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--file", "file", metavar="F", help="Findings file ('-' or absent: standard input).")
def request_changes(item_id: str, file: str | None) -> None:
    """Replace the item's Changes section with findings and record a round."""
    from drover.cli import fastpath

    fastpath.request_changes(item_id, file)


@cli.command(name="close-changes")
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--note", default="", help="What discharged the changes.")
def close_changes(item_id: str, note: str) -> None:
    """Replace the Changes section with a cleared block and mark the round cleared."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "close-changes", item_id=item_id, note=note))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--level", required=True, type=click.Choice(LEVELS),
              help="claimed < reviewed < verified; reviewed or above also clears outstanding changes.")
@click.option("--by", default="", help="Who audits (default: the run's agent, else git user.name).")
@click.option("--note", default="", help="Recorded verbatim.")
def audit(item_id: str, level: str, by: str, note: str) -> None:
    """Record an audit; at reviewed or above it also clears outstanding changes."""
    from drover.cli import fastpath

    fastpath.audit(item_id, level, by, note)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.argument("issue", type=int)
@click.option("--as", "disposition", required=True, type=click.Choice(DISPOSITIONS),
              help="What finish does with the issue: close it, comment on it, or keep it open.")
@click.option("--note", default="", help="The comment finish writes, or why the issue stays.")
def dispose(item_id: str, issue: int, disposition: str, note: str) -> None:
    """Record the reviewer's judgment of an issue the item closes."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "dispose", item_id=item_id, issue=issue, disposition=disposition,
                             note=note))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--why", required=True, help="What the operator needs to decide.")
def park(item_id: str, why: str) -> None:
    """Hand an item to the operator."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "park", item_id=item_id, why=why))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
def unpark(item_id: str) -> None:
    """Take an item back from the operator."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "unpark", item_id=item_id))


# --- the ledger: backup and move (drover/cli/ledger.py) -----------------------------------------

from drover.cli.ledger import ledger_group  # noqa: E402 - registered after the group exists

cli.add_command(ledger_group)

# The template and agent-loop commands live in their own modules (docs/architecture.md); they
# register on `cli` above, before register() below gives every command its example.
from drover.cli import loop as cli_loop, templates as cli_templates  # noqa: E402,F401

from drover.cli.parts import register as _register_setup_commands  # noqa: E402  (needs `cli` defined above)

_register_setup_commands(cli)
