"""`drover worktrees` (the pooled worktrees: who holds which, set-up age, state) and
`drover worktrees prune`."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import click

from drover.cli.parts import echo_json, example, json_option, opened


def _age(stamp: str, at: datetime) -> str:
    """`42s`, `7m`, `3h`, `2d` since an ISO stamp; `never` without one."""
    if not stamp:
        return "never"
    from drover.ledger.connection import seconds_since

    seconds = max(0, int(seconds_since(stamp, at)))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@click.group("worktrees", invoke_without_command=True,
             epilog=example("drover worktrees --json"))
@json_option
@click.pass_context
def worktrees_group(ctx: click.Context, as_json: bool) -> None:
    """List the pooled worktrees ([run] pool): path, holder, state, set-up age."""
    if ctx.invoked_subcommand is not None:
        return
    from drover.cli.views import table

    with opened() as (project, ledger):
        rows = ledger.pool_rows()
        size = project.config.pool
    at = datetime.now(timezone.utc)
    if as_json:
        shown: list[dict[str, Any]] = [
            {"path": row.path, "holder": row.holder or None, "state": row.state, "created": row.created,
             "used": row.used or None, "setup_at": row.setup_at or None,
             "setup_age": _age(row.setup_at, at) if row.setup_at else None} for row in rows]
        echo_json({"pool": size, "worktrees": shown})
        return
    if not size:
        click.echo("the pool is off ([run] pool = 0): each item gets a new worktree, removed when finished")
    if not rows:
        click.echo("no pooled worktrees")
        return
    # without a [run] setup there is nothing to set up: `never` there read as set-up still to come
    # (a new user, on a Rust crate)
    lines = table([(row.path, row.holder or "-", row.state,
                    _age(row.setup_at, at) if row.setup_at or project.config.setup else "-", _age(row.used, at))
                   for row in rows], header=("path", "held by", "state", "set up", "used"))
    for line in lines:
        click.echo(line)


@worktrees_group.command("prune", epilog=example("drover worktrees prune --held"))
@click.option("--held", is_flag=True,
              help="Also remove the worktrees unfinished items hold (their commits stay on their branches).")
def worktrees_prune(held: bool) -> None:
    """Remove the pooled worktrees no running drover is using."""
    from drover.loop import pool
    from drover.loop.verify import sweep_checks

    # the operator's: inside a run it would remove other items' worktrees, their work in progress
    # and the worktree of a run still going (acting.require_operator)
    with opened(operator="worktrees prune") as (project, ledger):
        lines = pool.prune(project, ledger, held=held)
        checks = sweep_checks(project)  # scratch check worktrees killed drovers left (pool off)
    for line in lines + checks:
        click.echo(line)
    if not lines and not checks:
        click.echo("no pooled worktrees")
