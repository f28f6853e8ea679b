"""`drover report`: the morning report as text, JSON or a self-contained HTML page; and what a drive
does when it ends (`drive --report FILE`, `[notify] command`)."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import click

from drover.cli.parts import echo_json, example
from drover.cli.report_html import mean, money, share, token_totals, tokens, unpriced
from drover.errors import DroverError, printable

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from drover.ledger.db import Ledger
    from drover.ledger.project import Project
    from drover.ledger.report import Ended, GroupLine, Report
    from drover.loop.driver import Driven

# a drive's word for an item the ledger shows as open, as the report's status (others keep `open`)
_DRIVE_STATUS = {"failed": "failed", "no verdict": "failed", "orphaned": "failed", "over budget": "over_budget"}


@click.command(epilog=example("drover report --since 12h --html report.html"))
@click.option("--since", metavar="WHEN", help="Only what happened since WHEN: a date or time (2026-12-04, "
                                              "2026-12-04T22:00) or a duration back from now (12h, 7d).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (`drover help report` documents it).")
@click.option("--html", "html_file", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as one self-contained HTML page to FILE.")
def report(since: str | None, as_json: bool, html_file: Path | None) -> None:
    """What merged, what is parked, failed or over budget and why, and what it cost."""
    from drover.cli.parts import opened
    from drover.errors import UsageError
    from drover.ledger.report import as_json as report_json, since_of

    if as_json and html_file is not None:
        raise UsageError("--json and --html are one or the other")
    start = since_of(since) if since is not None else None
    with opened() as (project, ledger):
        made = report_for(project, ledger, start)
    if as_json:
        echo_json(report_json(made))
    elif html_file is not None:
        said = write_page(made, html_file, project)
        click.echo(f"report written to {html_file}")
        if said:
            click.echo(f"drover: warning: {said}", err=True)
    else:
        for line in report_lines(made):
            click.echo(line)


def report_for(project: "Project", ledger: "Ledger", since: str | None,
               also: "Mapping[str, Ended] | None" = None) -> "Report":
    from drover.ledger.report import build_report

    return build_report(project, ledger, since=since, rates=project.config.budget.rate_card, also=also,
                        waiting=also is not None)


def write_page(made: "Report", path: Path, project: "Project") -> str:
    """The HTML page, written whole or not at all, never in drover's state folder (parts.write_output);
    returns why the page stops the next merge ("" when it does not: blocks_finish)."""
    from drover.cli.parts import write_output
    from drover.cli.report_html import page

    write_output(path, page(made), "report.html", project.state_dir)
    return blocks_finish(project, path)


def blocks_finish(project: "Project", path: Path) -> str:
    """Why a page written at `path` stops the next merge: it is an untracked file of the checkout that
    git does not ignore, and `finish` refuses such a checkout (README's `--html night.html`, run in the
    project, made the next night's `drive --finish` refuse to start). "" when it does not."""
    from drover import git
    from drover.errors import GitError

    try:
        rel = Path(os.path.realpath(path)).relative_to(os.path.realpath(project.root))  # never through a link loop
        found = git.git(["--literal-pathspecs", "ls-files", "--others", "--exclude-standard", "-z", "--", str(rel)],
                        project.root)
    except (ValueError, OSError, GitError):
        return ""
    if not found.strip("\0"):
        return ""
    return (f"{printable(str(rel))} is untracked in this checkout: `drover finish` and `drive --finish` refuse to merge "
            "while it is there; add it to .gitignore, or write the page outside the checkout")


def as_ended(results: "Iterable[Driven]", left: "Iterable[str]") -> "dict[str, Ended]":
    """How the drive said each item it took ended, for the report; those it never started are
    `not started`."""
    from drover.ledger.report import Ended

    ended = {item_id: Ended("", "not started: the drive ended first") for item_id in left}
    ended.update({row.item_id: Ended(_DRIVE_STATUS.get(row.result, ""), row.note) for row in results})
    return ended


# the ledger's events of a drive's start and end: a start with no end is a drive that was SIGKILLed
DRIVE_STARTED, DRIVE_ENDED = "drive", "drive-ended"


def drive_began(project: "Project", started: str) -> str:
    """Record that a drive started at `started`; return where its report begins: `started`, or, when the
    drive before it never recorded its end and its drover is gone (SIGKILLed, the machine died), where
    that drive's report began, so the morning's page and [notify] hold the whole night."""
    from drover.agents.procs import pid_alive
    from drover.ledger.db import Ledger
    from drover.vocabulary import DROVER

    with Ledger(project.ledger_path) as ledger:
        ended = {json.loads(row["detail"] or "{}").get("started") for row in ledger.events_of(DRIVE_ENDED)}
        began = ledger.events_of(DRIVE_STARTED)
        since = started
        if began:
            last = json.loads(began[-1]["detail"] or "{}")
            pid = last.get("pid")
            gone = not isinstance(pid, int) or pid == os.getpid() or not pid_alive(pid)
            if last.get("started") not in ended and gone and isinstance(last.get("since"), str):
                since = min(last["since"], started)
        ledger.log_event(DRIVE_STARTED, None, DROVER, started=started, since=since, pid=os.getpid())
    return since


def drive_finished(project: "Project", started: str) -> None:
    """Record that the drive that started at `started` ended (however: summary, refusal, Ctrl-C)."""
    from drover.ledger.db import Ledger
    from drover.vocabulary import DROVER

    try:
        with Ledger(project.ledger_path) as ledger:
            ledger.log_event(DRIVE_ENDED, None, DROVER, started=started)
    except Exception:  # bookkeeping only: the next drive's report then starts earlier, no more
        pass


def drive_ended(project: "Project", since: str, report_file: Path | None, say: Callable[[str], None],
                driven: "Mapping[str, Ended] | None" = None, resumed: bool = False) -> None:
    """When a drive ends: the page `--report FILE` asked for, then `[notify] command` with the JSON.

    Both cover what happened since `since` (the drive's start, or the start of the drive before it
    that never ended: `resumed`), and every item the drive took (`driven`), those it never launched
    for (a spent drive ceiling, a stop, a blocked dep) too. Neither fails the drive: a problem is one
    warning line."""
    from drover.ledger.db import Ledger
    from drover.ledger.report import as_json as report_json

    notify = project.config.notify
    command = notify.command.strip()
    if report_file is None and not command:
        return
    try:
        with Ledger(project.ledger_path) as ledger:
            made = report_for(project, ledger, since, driven)
    except Exception as exc:  # the drive's work is done and recorded; the report is extra
        say(f"drover: warning: the report could not be made: {exc}")
        return
    if report_file is not None:
        try:
            said = write_page(made, report_file, project)
            say(f"report written to {report_file}" + (f" (since {since}, the start of an earlier drive that "
                                                      "ended without its report)" if resumed else ""))
            if said:
                say(f"drover: warning: {said}")
        except DroverError as exc:
            say(f"drover: warning: the report was not written to {report_file}: {exc.message}")
    if command:
        from drover.loop.notify import run_notify

        warning = run_notify(command, notify.timeout_seconds, json.dumps(report_json(made), indent=2),
                             cwd=project.root)
        if warning:
            say(f"drover: warning: [notify] {warning}")


# --- text for people -----------------------------------------------------------------------------


def clean(text: str) -> str:
    """Ledger or item text, safe for a terminal: one line, no control characters."""
    return printable(" ".join(str(text).split("\n")))


def _failures(found: dict[str, int]) -> str:
    return ", ".join(f"{clean(name)} {count}" for name, count in found.items()) or "-"


def report_lines(made: "Report") -> list[str]:
    """The report for a terminal."""
    from drover.cli.views import table

    window = f"since {made.since}" if made.since else "the whole ledger"
    totals = made.totals
    lines = [f"drover report: {window} (made {made.generated})",
             f"  items {totals.items}: merged {len(made.merged)}, over budget {len(made.over_budget)}, "
             f"parked {len(made.parked)}, failed {len(made.failed)}",
             f"  runs {totals.runs} (failed {totals.failed_runs}: {_failures(totals.failures)}); "
             f"{token_totals(totals.input_tokens, totals.output_tokens)}; "
             f"cost {money(totals.cost_usd, totals.cost_source)}{unpriced(totals.unpriced_tokens)}"]
    if not made.rated_models and totals.cost_usd is not None:
        lines.append("  costs are the agent CLIs' own figures: no [budget.rates] rate card")
    by_id = {item.id: item for item in made.items}
    for heading, ids in (("Merged", made.merged), ("Over budget", made.over_budget), ("Parked", made.parked),
                         ("Failed", made.failed)):
        if ids:
            lines += ["", f"{heading} ({len(ids)})"]
            for item_id in ids:
                item = by_id[item_id]
                why = f": {clean(item.reason)}" if item.reason else ""
                lines.append(f"  {clean(item.id)}  {clean(item.title)}{why}")
    if made.items:
        rows: list[tuple[str, ...]] = [(clean(item.id), item.status.replace("_", " "), str(item.rounds),
                 f"{item.checks_passed}/{item.checks_passed + item.checks_failed}", str(item.runs),
                 tokens(item.input_tokens + item.output_tokens), money(item.cost_usd, item.cost_source),
                 clean(item.title)) for item in made.items]
        lines += ["", "Items"] + ["  " + line for line in table(
            rows, header=("id", "status", "rounds", "checks ok", "runs", "tokens", "cost", "title"),
            right=(2, 3, 4, 5))]
    for heading, groups in (("Agents", made.agents), ("Models", made.models)):
        if groups:
            lines += ["", heading] + ["  " + line for line in table(
                [_group_row(group) for group in groups],
                header=(heading[:-1].lower(), "items", "runs", "approved first", "rounds to approval",
                        "failures", "tokens", "cost"), right=(1, 2, 3, 4, 6))]
    return lines


def _group_row(group: "GroupLine") -> tuple[str, ...]:
    return (clean(group.name), str(group.items), str(group.runs), share(group.first_review_share),
            mean(group.mean_rounds_to_approval), _failures(group.failures),
            tokens(group.input_tokens + group.output_tokens), money(group.cost_usd, group.cost_source))

