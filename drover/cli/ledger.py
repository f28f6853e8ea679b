"""`drover ledger export` and `drover ledger import`: the click commands over drover/ledger/jsonl.py."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from drover.cli.parts import example, opened


@click.group("ledger", epilog=example("drover ledger export > ledger.jsonl"))
def ledger_group() -> None:
    """Back up and move the ledger (JSON Lines, one row per line)."""


@ledger_group.command("export", epilog=example("drover ledger export -o backups/ledger.jsonl"))
@click.option("-o", "--output", metavar="FILE", help="Write here instead of standard output.")
def ledger_export(output: str | None) -> None:
    """Write every table as JSON Lines, the schema version first."""
    from drover.ledger.jsonl import export

    with opened() as (project, ledger):
        if output:
            import io

            from drover.cli.parts import write_output

            buffer = io.StringIO()
            counts = export(ledger, buffer)
            write_output(Path(output), buffer.getvalue(), "ledger.jsonl", project.state_dir)
            click.echo(f"exported {sum(counts.values())} rows of {len(counts)} tables to {output}", err=True)
        else:
            export(ledger, sys.stdout)


@ledger_group.command("import", epilog=example("drover ledger import backups/ledger.jsonl --merge"))
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--merge", is_flag=True, help="Add the rows this ledger lacks (keyed by their ids); report conflicts.")
def ledger_import(file: Path, merge: bool) -> None:
    """Load an export into an empty ledger (or merge it into this one)."""
    from drover.ledger.acting import actor
    from drover.ledger.jsonl import import_file

    with opened(operator="ledger import") as (project, ledger):
        done = import_file(ledger, file, merge=merge, by=actor(project, ledger) if merge else "")
    added = ", ".join(f"{table} {count}" for table, count in sorted(done.added.items())) or "none"
    click.echo(f"imported rows: {added}")
    from drover.errors import printable

    for line in done.conflicts:
        click.echo(f"conflict: {printable(line)}")  # a key as the file has it: the file may be anyone's
    if done.conflicts:
        sys.exit(1)
