"""The item commands: new, list, show."""
from __future__ import annotations

import click

from drover.cli.parts import ISSUE_NUMBER, ITEM_ID, echo_json, example, json_option, opened
from drover.vocabulary import LIST_STATES


@click.command(epilog=example('drover new "Reject unknown config keys" --kind bug --dep D-2'))
@click.argument("title", required=False)
@click.option("--kind", default=None, help="A free word: bug, feature, chore, ... (default: feature, or the "
              "issue's labels through [tracker] kinds)")
@click.option("--dep", "deps", multiple=True, metavar="ID", type=ITEM_ID, help="An item this one depends on (repeatable).")
@click.option("-f", "--finding", "finding", metavar="ID", type=ITEM_ID, default="",
              help="The item whose review produced this one.")
@click.option("--issue", type=ISSUE_NUMBER, metavar="N", help="Create the item from tracker issue N (title, kind, text).")
@json_option
def new(title: str | None, kind: str | None, deps: tuple[str, ...], finding: str, issue: int | None,
        as_json: bool) -> None:
    """Create the next item and print its id first."""
    from drover.errors import Refused, UsageError
    from drover.executors.outbox import outbox_path, perform

    if issue is not None and outbox_path() is not None:
        # its item would stay in the worker's scratch ledger: an outbox replays no `new --issue`
        raise Refused("new --issue is the operator's on a worker: the item would never reach this project's "
                      "ledger; name the issue in your report instead")
    if issue is not None and (title or finding):
        raise UsageError("new --issue takes its title from the issue: give no TITLE and no --finding")
    if issue is None and title is None:
        raise UsageError("Missing argument 'TITLE': drover new \"What the item should do\" (or --issue N)")
    deps = tuple(dict.fromkeys(deps))  # each id once, where first given: `--dep D-1 --dep 1` both name D-1
    warning = ""  # a closed issue is taken, and said to be closed
    with opened() as (project, ledger):
        if issue is not None:
            from drover.ledger.intake import new_from_issue

            item_id, warning = new_from_issue(project, ledger, issue, kind, list(deps))
        else:
            item_id = perform(project, ledger, "new", title=title or "", kind=kind or "feature", deps=list(deps),
                              finding_source=finding)
        if as_json:
            from drover.cli.reports import new_report

            echo_json(new_report(project, item_id, finding))
        else:
            click.echo(f"{item_id} {project.relpath(project.item_path(item_id))}")
        if warning:
            click.echo(f"drover: warning: {warning}", err=True)


@click.command(name="list", epilog=example("drover list --state approved --state parked"))
@click.option("--ready", is_flag=True, help="Only items drive would take now.")
@click.option("--state", "states", multiple=True, metavar="STATE", type=click.Choice(LIST_STATES),
              help="Only items in this state (repeatable; quote states with a space).")
@click.option("--limit", type=click.IntRange(min=1), metavar="N", help="At most N items, in list order.")
@json_option
@click.pass_context
def list_command(ctx: click.Context, ready: bool, states: tuple[str, ...], limit: int | None, as_json: bool) -> None:
    """Items with their state."""
    from drover.ledger.listing import is_ready, list_items

    with opened() as (project, ledger):
        every = list_items(project, ledger)
        listed = [row for row in every if (not ready or is_ready(row)) and (not states or row.state in states)][:limit]
    if not every and not as_json:  # a new project: say so, rather than print nothing
        click.echo(f"drover: no items yet in {project.config.items}/: `drover new \"TITLE\"` makes the first",
                   err=True)
    if as_json:
        from drover.cli.reports import list_report

        echo_json(list_report(listed))
    elif listed:
        from drover.cli.views import list_lines

        # one write: a write per line cost more than the listing at 50,000 items
        click.echo("\n".join(list_lines(listed, colour=bool(ctx.color))))


@click.command(epilog=example("drover show D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@json_option
def show(item_id: str, as_json: bool) -> None:
    """One item: frontmatter, deps, runs, rounds, audits, dispositions."""
    from drover.cli.views import render_show
    from drover.ledger.itemstate import show_item

    with opened() as (project, ledger):
        shown = show_item(project, ledger, item_id)
    if as_json:
        echo_json(shown)
    else:
        click.echo(render_show(shown))
