"""The review verbs: request-changes, close-changes, audit, dispose, park, unpark; each one journaled write."""
from __future__ import annotations

import sys

import click

from drover.cli.parts import ISSUE_NUMBER, ITEM_ID, echo_outcome, example, opened
from drover.vocabulary import DISPOSITIONS, LEVELS

# Findings larger than this are refused: no review writes 1 MB, and --file /dev/zero or an
# endless pipe must end with a message rather than fill the memory. The next implement prompt
# carries them whole, within the render's 4 MB output cap (prompts/limits.py): at 10 MB, findings
# of 6 MB were recorded that failed every later implement prompt (hostile review 35). A worker's
# outbox takes at most as much in one argument (executors/outbox.ARGUMENT_BYTES).
MAX_INPUT_BYTES = 1024 * 1024


def read_text_arg(file: str | None) -> str:
    """Text from --file F, or standard input when F is absent or '-' (at most MAX_INPUT_BYTES)."""
    from drover.errors import UsageError

    cap = f"{MAX_INPUT_BYTES // (1024 * 1024)} MB"
    if file and file != "-":
        try:
            with open(file, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read: {exc.strerror}", path=file) from None
        where, path = "", file
    else:
        if sys.stdin is None or (sys.stdin.isatty() and not file):
            raise UsageError("no findings given: pass --file F or pipe them on standard input")
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(MAX_INPUT_BYTES + 1) if stream is not None else sys.stdin.read().encode("utf-8")
        where, path = "standard input: ", None
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{where}findings larger than {cap} refused", path=path)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        said = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise UsageError(f"cannot read {where}{said}" if not path else f"cannot read: {said}", path=path) from None


@click.command(name="request-changes", epilog=example("drover request-changes D-3 --file findings.md"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--file", "file", metavar="F", help="Findings file ('-' or absent: standard input).")
def request_changes(item_id: str, file: str | None) -> None:
    """Replace the item's Changes section with findings and record a round."""
    from drover.executors.outbox import perform
    from drover.ledger.catalogue import read_item

    with opened() as (project, ledger):
        read_item(project, ledger, item_id)  # a missing item is said before anything about the findings
        findings = read_text_arg(file)
        echo_outcome(perform(project, ledger, "request-changes", item_id=item_id, findings=findings))


@click.command(name="close-changes", epilog=example('drover close-changes D-3 --note "fixed in the parser"'))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--note", default="", help="What discharged the changes.")
def close_changes(item_id: str, note: str) -> None:
    """Replace the Changes section with a cleared block and mark the round cleared."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "close-changes", item_id=item_id, note=note))


@click.command(epilog=example('drover audit D-3 --level reviewed --note "tests cover each requirement"'))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--level", required=True, type=click.Choice(LEVELS),
              help="claimed < reviewed < verified; reviewed or above also clears outstanding changes.")
@click.option("--by", default=None, help="Who audits (default: the run's agent, else git user.name).")
@click.option("--note", default="", help="Recorded verbatim.")
def audit(item_id: str, level: str, by: str | None, note: str) -> None:
    """Record an audit; at reviewed or above it also clears outstanding changes."""
    from drover.executors.outbox import perform

    if by is not None and not by.strip():  # an empty name would read as no --by: someone else's name
        from drover.errors import UsageError

        raise UsageError("--by: give a name, or leave --by out to use git's user.name")
    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "audit", item_id=item_id, level=level, by=by or "", note=note))


@click.command(epilog=example("drover dispose D-3 42 --as close"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.argument("issue", type=ISSUE_NUMBER)
@click.option("--as", "disposition", required=True, type=click.Choice(DISPOSITIONS),
              help="What finish does with the issue: close it, comment on it, or keep it open.")
@click.option("--note", default="", help="The comment finish writes, or why the issue stays.")
def dispose(item_id: str, issue: int, disposition: str, note: str) -> None:
    """Record the reviewer's judgment of an issue the item closes."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "dispose", item_id=item_id, issue=issue, disposition=disposition,
                             note=note))


@click.command(epilog=example('drover park D-3 --why "needs a decision on the file format"'))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--why", required=True, help="What the operator needs to decide.")
def park(item_id: str, why: str) -> None:
    """Hand an item to the operator."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "park", item_id=item_id, why=why))


@click.command(epilog=example("drover unpark D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
def unpark(item_id: str) -> None:
    """Take an item back from the operator."""
    from drover.executors.outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "unpark", item_id=item_id))
