"""The command line: parse options, call the core, print. Nothing else lives here."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import click

from .errors import DroverError

COLOR_CHOICES = click.Choice(["auto", "always", "never"])


class DroverGroup(click.Group):
    """Turns every DroverError into one line on stderr and its exit code; never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except DroverError as exc:
            click.echo(f"drover: {exc}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("drover: interrupted", err=True)
            ctx.exit(130)


@click.group(cls=DroverGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="drover")
def cli() -> None:
    """Run AI coding agents in a loop over a project's work items, and keep the record."""


def main() -> None:
    cli(prog_name="drover")


@contextmanager
def opened():
    """The project and its ledger, closed when the command ends."""
    from .ledger import Ledger
    from .project import open_project

    project = open_project()
    ledger = Ledger(project.ledger_path)
    try:
        yield project, ledger
    finally:
        ledger.close()


def echo_json(value) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def echo_outcome(outcome) -> None:
    for line in outcome.lines:
        click.echo(line)


def json_option(func):
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def read_text_arg(file: str | None) -> str:
    """Text from --file F, or standard input when F is absent or '-'."""
    from .errors import UsageError

    if file and file != "-":
        try:
            return Path(file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read: {exc.strerror}", path=file) from None
    if sys.stdin is None or (sys.stdin.isatty() and not file):
        raise UsageError("no findings given: pass --file F or pipe them on standard input")
    return sys.stdin.read()


# --- the foundation ------------------------------------------------------------------------


@cli.command()
def init() -> None:
    """Write drover.toml, items/ and .drover/, and git-ignore .drover/."""
    from .scaffold import init_project

    for line in init_project(Path.cwd()):
        click.echo(line)


@cli.command()
@click.argument("title")
@click.option("--kind", default="feature", show_default=True, help="A free word: bug, feature, chore, ...")
@click.option("--dep", "deps", multiple=True, metavar="ID", help="An item this one depends on (repeatable).")
@click.option("-f", "finding", metavar="SRC", default="", help="The item whose review produced this one.")
def new(title: str, kind: str, deps: tuple[str, ...], finding: str) -> None:
    """Create the next item and print its id first."""
    from .review import new_item

    with opened() as (project, ledger):
        item_id = new_item(project, ledger, title, kind, list(deps), finding)
        click.echo(f"{item_id} {project.relpath(project.item_path(item_id))}")


@cli.command(name="list")
@click.option("--ready", is_flag=True, help="Only items drive would take now.")
@json_option
def list_cmd(ready: bool, as_json: bool) -> None:
    """Items with their state."""
    from .status import is_ready, list_items

    with opened() as (project, ledger):
        listed = [row for row in list_items(project, ledger) if not ready or is_ready(row)]
    if as_json:
        echo_json([
            {"id": row.entry.id, "title": row.entry.title, "kind": row.entry.kind, "state": row.state,
             "path": row.entry.rel, "deps": list(row.entry.deps), "note": row.note}
            for row in listed
        ])
        return
    width = max((len(row.entry.id) for row in listed), default=4)
    for row in listed:
        title = row.entry.title if not row.entry.unreadable else ""
        note = f"  ({row.note})" if row.note else ""
        click.echo(f"{row.entry.id:<{width}}  {row.state:<17}  {title}{note}".rstrip())


@cli.command()
@click.argument("item_id", metavar="ID")
@json_option
def show(item_id: str, as_json: bool) -> None:
    """One item: frontmatter, deps, runs, rounds, audits, dispositions."""
    from .status import show_item
    from .textviews import render_show

    with opened() as (project, ledger):
        shown = show_item(project, ledger, item_id)
    if as_json:
        echo_json(shown)
    else:
        click.echo(render_show(shown))


@cli.command(name="request-changes")
@click.argument("item_id", metavar="ID")
@click.option("--file", "file", metavar="F", help="Findings file ('-' or absent: standard input).")
def request_changes(item_id: str, file: str | None) -> None:
    """Replace the item's Changes section with findings and record a round."""
    from .review import request_changes as act

    findings = read_text_arg(file)
    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id, findings))


@cli.command(name="close-changes")
@click.argument("item_id", metavar="ID")
@click.option("--note", default="", help="What discharged the changes.")
def close_changes(item_id: str, note: str) -> None:
    """Replace the Changes section with a cleared block and mark the round cleared."""
    from .review import close_changes as act

    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id, note))


@cli.command()
@click.argument("item_id", metavar="ID")
@click.option("--level", required=True, type=click.Choice(["claimed", "reviewed", "verified"]))
@click.option("--by", default="", help="Who audits (default: the run's agent, else git user.name).")
@click.option("--note", default="", help="Recorded verbatim.")
def audit(item_id: str, level: str, by: str, note: str) -> None:
    """Record an audit; at reviewed or above it also clears outstanding changes."""
    from .review import audit as act

    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id, level, by, note))


@cli.command()
@click.argument("item_id", metavar="ID")
@click.argument("issue", type=int)
@click.option("--as", "disposition", required=True, type=click.Choice(["close", "comment", "keep"]))
@click.option("--note", default="", help="The comment finish writes, or why the issue stays.")
def dispose(item_id: str, issue: int, disposition: str, note: str) -> None:
    """Record the reviewer's judgment of an issue the item closes."""
    from .review import dispose as act

    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id, issue, disposition, note))


@cli.command()
@click.argument("item_id", metavar="ID")
@click.option("--why", required=True, help="What the operator needs to decide.")
def park(item_id: str, why: str) -> None:
    """Hand an item to the operator."""
    from .review import park as act

    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id, why))


@cli.command()
@click.argument("item_id", metavar="ID")
def unpark(item_id: str) -> None:
    """Take an item back from the operator."""
    from .review import unpark as act

    with opened() as (project, ledger):
        echo_outcome(act(project, ledger, item_id))


if __name__ == "__main__":
    main()
