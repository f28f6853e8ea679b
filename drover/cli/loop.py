"""The agent-loop commands: draft, run, review, verify, drive, finish, stop, log."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from drover.errors import on_screen, printable
from drover.cli.parts import ITEM_ID, Decorated, echo_json, example, json_option, opened, template_option
from drover.vocabulary import EXECUTORS

if TYPE_CHECKING:
    from typing import Callable

    from drover.ledger.project import Project
    from drover.loop.preview import Step


def _launch_command(item_id: str, slot: str, dry_run: bool, explicit: str | None = None,
                    as_json: bool = False) -> None:
    from drover import git
    from drover.errors import UsageError
    from drover.executors import open_executor
    from drover.loop.runs import describe, execute, prepare

    if as_json and not dry_run:
        raise UsageError("--json goes with --dry-run (a launch reports as it runs)")
    with opened(operator="" if dry_run else "run" if slot == "implement" else slot) as (project, ledger):
        launch = prepare(project, ledger, item_id, slot, explicit_template=explicit, preview=dry_run)
        # drafts edit the item file in the main checkout, so they always run here
        runner = open_executor(project, "local" if slot == "draft" else None)
        warnings = list(launch.warnings)
        if slot == "review" and not dry_run:
            from drover.loop.verify import unchecked

            warnings += [said for said in (unchecked(project, ledger, item_id),) if said]
        # a launch execute refuses (no such program, root) says that one line, none of what the run would meet
        refused = not dry_run and bool(launch.binary_missing or launch.root_refusal)
        for warning in [] if refused else warnings:  # a branch a title renders, an item's words
            click.echo(f"drover: warning: {printable(warning)}", err=True)
        if dry_run and as_json:
            from drover.cli.reports import launch_report

            where = project.relpath(launch.workdir) if launch.workdir != project.root else "."
            echo_json(launch_report(launch, where, project.config.setup))
            return
        if dry_run:
            click.echo(on_screen(launch.prompt), nl=not launch.prompt.endswith("\n"))  # an inline --template may end mid-line
            click.echo("--- drover: dry run; nothing was launched or written")
            for line in describe(project, launch):
                click.echo(printable(line))
            click.echo(f"executor: {runner.name} ({runner.where()})")
            return
        try:
            runner.start()
            result = execute(project, ledger, launch, echo=True, executor=runner)
        finally:
            runner.close()
        git.housekeeping(project.root)
    for note in result.notes:
        click.echo(f"drover: {printable(note)}", err=True)
    ended = f"{result.ending}, no agent started" if result.in_setup else f"{result.ending} after {result.elapsed:.1f}s"
    click.echo(f"{item_id}: {slot} run {result.run_id} {ended} (log: {project.relpath(result.log_path)})")
    if not result.exited_zero:
        sys.exit(1)
    if slot == "review":
        from drover.loop.verdict import describe_verdict, no_verdict, review_verdict

        with opened() as (project, ledger):
            verdict = review_verdict(ledger, result.run_id)
            if not verdict:
                from drover.errors import Refused

                raise Refused(f"{item_id}: {no_verdict(ledger, result.run_id)}")
            click.echo(printable(f"{item_id}: the review recorded: {describe_verdict(project, ledger, result.run_id)}"))
    if slot == "draft":
        _require_drafted(item_id)


def _require_drafted(item_id: str) -> None:
    """Exit 1 with a line when a draft run that ended well left the item `needs requirements` (its
    Requirements section still empty or the placeholder), as review does when no verdict was recorded."""
    from drover.ledger.itemstate import item_state
    from drover.ledger.state import State

    with opened() as (project, ledger):
        if item_state(project, ledger, item_id).state == State.NEEDS_REQUIREMENTS:
            from drover.errors import Refused

            raise Refused(f"{item_id}: the draft wrote no requirements: {project.needs_requirements_words(item_id)}")


def dry_run_option(func: Decorated) -> Decorated:
    func = click.option("--json", "as_json", is_flag=True, help="With --dry-run: print it as JSON.")(func)
    return click.option("--dry-run", is_flag=True,
                        help="Print the prompt, argv, environment, branch and directory; write nothing.")(func)


@click.command(epilog=example("drover run D-3 --dry-run"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
@template_option
def run(item_id: str, dry_run: bool, as_json: bool, explicit: str | None) -> None:
    """Launch the implementing agent on an item in its worktree."""
    _launch_command(item_id, "implement", dry_run, explicit, as_json)


@click.command(epilog=example("drover review D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
@click.option("--print", "print_only", is_flag=True, help="Write the review prompt to stdout; record no launch.")
def review(item_id: str, dry_run: bool, as_json: bool, print_only: bool) -> None:
    """Launch the reviewing agent on an item's branch."""
    if print_only and as_json:
        from drover.errors import UsageError

        raise UsageError("--json goes with --dry-run; --print writes the prompt as text "
                         "(`drover prompt ID --slot review --json` gives it as JSON)")
    if print_only:
        from drover.cli.templates import show_prompt

        show_prompt(item_id, "review")
        return
    _launch_command(item_id, "review", dry_run, as_json=as_json)


@click.command(epilog=example("drover draft D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
def draft(item_id: str, dry_run: bool, as_json: bool) -> None:
    """Launch the drafting agent: it writes the item's numbered requirements."""
    _launch_command(item_id, "draft", dry_run, as_json=as_json)


@click.command(epilog=example("drover finish D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--allow-drover-files", is_flag=True,
              help="Merge a branch that changes drover.toml, prompt overrides or item files (never .drover/).")
@json_option
def finish(item_id: str, allow_drover_files: bool, as_json: bool) -> None:
    """Merge an approved item's branch into base locally (never pushes) and mark it done."""
    from drover import git
    from drover.errors import Refused
    from drover.loop.finish import Finished, finish as act

    with opened(operator="finish") as (project, ledger):
        try:
            finished = act(project, ledger, item_id, allow_drover_files=allow_drover_files)
        except Refused as exc:
            if not as_json:
                raise
            # the refusal is the JSON's one problem (each path it lists, on a line of its own
            # in text, follows it); nothing was merged, so the exit status stays 1
            finished = Finished((), ("\n".join(exc.lines),))
    git.housekeeping(project.root)
    if as_json:
        from drover.cli.reports import finish_report

        echo_json(finish_report(item_id, finished))
        sys.exit(1 if finished.problems else 0)
    for line in finished.lines:
        click.echo(printable(line))
    for problem in finished.problems:
        click.echo(f"drover: {printable(problem)}", err=True)
    if finished.problems:
        sys.exit(1)


@click.command(epilog=example("drover verify D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@json_option
def verify(item_id: str, as_json: bool) -> None:
    """Run the item's verify command on its branch head with base merged in; record the check."""
    from drover.loop.sendback import first_error_of
    from drover.loop.verify import describe, run_check

    with opened(operator="verify") as (project, ledger):
        check = run_check(project, ledger, item_id, echo=sys.stdout.isatty() and not as_json)
    if as_json:
        echo_json({"id": item_id, "check": check.as_json() if check else None})
    elif check is None:
        click.echo(f"{item_id}: the verify command is empty: nothing runs before merge")
    else:
        click.echo(f"{item_id}: {describe(check)} on {check.head[:12]} with {project.config.base} "
                   f"({check.base[:12]}) merged in; log: {check.log_path}")
        if not check.passed:
            found = first_error_of(project, check)
            if found:  # a compiler's cause, above the consequences the tail ends with
                click.echo(on_screen("\n".join([f"the first error, at line {found[0]} of the log:", *found[1],
                                                 "the end of the output:"])))
            click.echo(on_screen(check.tail))
    sys.exit(0 if check is None or check.passed else 1)


@click.command(epilog=example("drover stop D-3"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
def stop(item_id: str) -> None:
    """End an item's live run (an orphaned one too) and record it as interrupted."""
    from drover.loop.stop import stop as stop_runs

    with opened(operator="stop") as (project, ledger):
        for line in stop_runs(project, ledger, item_id):
            click.echo(line)


@click.command(name="log", epilog=example("drover log D-3 --follow"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--run", "run_id", metavar="RUN", help="This run of the item, or one of its checks (default: its newest run).")
@click.option("--follow", is_flag=True, help="Keep printing what the agent writes until the run ends.")
def log_command(item_id: str, run_id: str | None, follow: bool) -> None:
    """Print (or follow) the agent log of an item's run."""
    from drover.ledger.project import open_project
    from drover.cli.runlog import show_log

    show_log(open_project(), item_id, run_id, follow=follow, out=sys.stdout.buffer)


@click.command(epilog=example("drover drive --jobs 2 --finish"))
@click.argument("item_ids", metavar="[ID]...", nargs=-1, type=ITEM_ID)
@click.option("--jobs", default=1, show_default=True, type=int, help="Items worked at once, each in its own worktree.")
@click.option("--finish", "finish_items", is_flag=True, help="Finish each approved item (local merge into base).")
@click.option("--executor", type=click.Choice(EXECUTORS), default=None,
              help="Where agents run (default: [run] executor).")
@click.option("--dry-run", is_flag=True, help="Print where each run would go; launch and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (progress goes to stderr).")
@click.option("--report", "report_file", metavar="FILE", default=None, type=click.Path(dir_okay=False),
              help="When the drive ends, write the report of its runs as an HTML page to FILE.")
def drive(item_ids: tuple[str, ...], jobs: int, finish_items: bool, executor: str | None, dry_run: bool,
          as_json: bool, report_file: str | None = None) -> None:
    """Implement and review ready items (or the ids given) until approved, parked or failed."""
    from drover.cli.report import drive_began, drive_finished
    from drover.ledger.connection import now

    with opened(operator="" if dry_run else "drive") as (project, _):
        pass  # the project, refused inside a run; the drive opens a ledger for each of its threads

    def say(line: str) -> None:  # its words may be an agent's (a finding's headline, a park reason)
        click.echo(printable(line), err=as_json)

    def planned(steps: list[Step], executor_name: str, where: str) -> None:  # --dry-run --json
        if as_json:
            from drover.cli.reports import plan_report

            echo_json(plan_report(steps, executor_name, where, finish_items))

    started = now()
    since = started if dry_run else drive_began(project, started)
    try:
        _drive(project, item_ids, jobs, finish_items, executor, dry_run, as_json, report_file, say, planned,
               started, since)
    finally:  # a drive that records no end was SIGKILLed: the next one's report covers it (drive_began)
        if not dry_run:
            drive_finished(project, started)


def _drive(project: Project, item_ids: tuple[str, ...], jobs: int, finish_items: bool, executor: str | None,
           dry_run: bool, as_json: bool, report_file: str | None, say: Callable[[str], None],
           planned: Callable[[list[Step], str, str], None], started: str, since: str) -> None:
    """The drive, its summary, report and [notify], and its exit status."""
    from drover.cli.views import drive_summary
    from drover.loop.drive import DriveInterrupted, drive as run_drive, exit_status
    from drover.errors import Refused
    from pathlib import Path

    interrupted: DriveInterrupted | None = None
    left: list[str] = []  # what it never started: the morning's report names those too
    try:
        results = run_drive(project, list(item_ids), jobs=jobs, finish=finish_items, say=say,
                            echo=sys.stdout.isatty() and not as_json, executor=executor, dry_run=dry_run,
                            planned=planned, left=left)
    except DriveInterrupted as exc:  # the items in flight ended: their summary, report and notify still come
        interrupted, results = exc, exc.results
    except Refused as exc:
        if not as_json:
            raise
        from drover.cli.reports import drive_refused

        # as finish --json: the refusal is the JSON's one problem, nothing was launched, exit 1
        echo_json(drive_refused(exc.lines, dry_run))
        sys.exit(exc.exit_code)
    if dry_run:
        return
    if as_json:
        from drover.cli.reports import drive_report

        echo_json(drive_report(results, interrupted is None and exit_status(results) == 0))
    for line in drive_summary(results, finish_items) if not as_json else ():
        click.echo(printable(line))
    from drover.cli.report import as_ended, drive_ended

    drive_ended(project, since, Path(report_file) if report_file else None, say, as_ended(results, left),
                resumed=since != started)
    if interrupted is not None:
        from drover.cli.views import resume_line

        click.echo(printable(resume_line(results, left, item_ids, finish_items)), err=as_json)
        raise interrupted  # exit 130 or 143, as any command a signal stopped
    sys.exit(exit_status(results))
