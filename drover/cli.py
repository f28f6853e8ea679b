"""The command line: parse options, call the core, print. Nothing else lives here."""
from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import click

from .cliparts import ITEM_ID, complete_blocks
from .errors import DroverError
from .vocabulary import DISPOSITIONS, EXECUTORS, GUIDANCE_LEVELS, LEVELS, SLOTS, TEMPLATE_SLOTS

COLOR_CHOICES = click.Choice(["auto", "always", "never"])
STATE_CHOICES = ("ready", "blocked", "running", "in review", "changes requested", "approved", "parked", "done",
                 "unreadable")


class DroverGroup(click.Group):
    """Turns every DroverError into one line on stderr and its exit code; never a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _usage_line(ctx, exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from .cliparts import format_sections

        format_sections(self, ctx, formatter)

    def invoke(self, ctx: click.Context):
        import sqlite3

        try:
            return super().invoke(ctx)
        except DroverError as exc:
            for line in exc.lines:
                click.echo(f"drover: {line}", err=True)
            ctx.exit(exc.exit_code)
        except click.UsageError as exc:
            _usage_line(ctx, exc)
        except KeyboardInterrupt:
            click.echo("drover: interrupted", err=True)
            ctx.exit(130)
        except BrokenPipeError:
            # the reader stopped early (`drover schema --fields | head`): what it wanted arrived
            _drop_stdout()
            ctx.exit(0)
        except OSError as exc:
            # the machine said no (permissions, a full disk): its words, on one line
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"drover: {where}{exc.strerror or exc}", err=True)
            ctx.exit(2)
        except sqlite3.Error as exc:
            click.echo(f"drover: .drover/ledger.db: {exc}", err=True)
            ctx.exit(2)


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into a closed pipe says nothing."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


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
    from .textviews import use_color

    ctx.color = use_color(color, sys.stdout)


def _terminated(signum, frame) -> None:
    # SIGTERM ends a launch the way Ctrl-C does: the agent's process group goes, the run is recorded.
    raise KeyboardInterrupt


def main() -> None:
    if sys.argv[1:] in (["--help"], ["-h"]):
        from .helpcache import print_help

        if print_help(cli, __file__):
            return
    import signal

    signal.signal(signal.SIGTERM, _terminated)
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


# Findings larger than this are refused: no review writes 10 MB, and --file /dev/zero or an
# endless pipe must end with a message rather than fill the memory.
MAX_INPUT_BYTES = 10 * 1024 * 1024


def read_text_arg(file: str | None) -> str:
    """Text from --file F, or standard input when F is absent or '-' (at most MAX_INPUT_BYTES)."""
    from .errors import UsageError

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


# --- the foundation ------------------------------------------------------------------------


@cli.command()
def init() -> None:
    """Write drover.toml, items/ and .drover/, and git-ignore .drover/."""
    from .scaffold import init_project

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
    from .errors import UsageError
    from .outbox import perform

    if issue is not None and (title or finding):
        raise UsageError("new --issue takes its title from the issue: give no TITLE and no --finding")
    if issue is None and title is None:
        raise UsageError("Missing argument 'TITLE': drover new \"What the item should do\" (or --issue N)")
    with opened() as (project, ledger):
        if issue is not None:
            from .intake import new_from_issue

            item_id = new_from_issue(project, ledger, issue, kind, list(deps))
        else:
            item_id = perform(project, ledger, "new", title=title or "", kind=kind or "feature", deps=list(deps),
                              finding_source=finding)
        path = project.relpath(project.item_path(item_id))
        if as_json:
            from .reports import new_report

            echo_json(new_report(project, item_id, finding))
        else:
            click.echo(f"{item_id} {path}")


@cli.command(name="list")
@click.option("--ready", is_flag=True, help="Only items drive would take now.")
@click.option("--state", "states", multiple=True, metavar="STATE", type=click.Choice(STATE_CHOICES),
              help="Only items in this state (repeatable; quote states with a space).")
@json_option
def list_cmd(ready: bool, states: tuple[str, ...], as_json: bool) -> None:
    """Items with their state."""
    from .status import is_ready, list_items

    with opened() as (project, ledger):
        listed = [row for row in list_items(project, ledger)
                  if (not ready or is_ready(row)) and (not states or row.state in states)]
    if as_json:
        from .reports import list_report

        echo_json(list_report(listed))
        return
    from .textviews import paint_state, table

    for line in table([(row.entry.id, row.state, (row.entry.title if not row.entry.unreadable else "")
                        + (f"  ({row.note})" if row.note else "")) for row in listed], widths=(0, 17)):
        click.echo(paint_state(line))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
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
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--file", "file", metavar="F", help="Findings file ('-' or absent: standard input).")
def request_changes(item_id: str, file: str | None) -> None:
    """Replace the item's Changes section with findings and record a round."""
    from .outbox import perform
    from .status import require_item

    with opened() as (project, ledger):
        require_item(project, item_id)  # a missing item is said before anything about the findings
        findings = read_text_arg(file)
        echo_outcome(perform(project, ledger, "request-changes", item_id=item_id, findings=findings))


@cli.command(name="close-changes")
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--note", default="", help="What discharged the changes.")
def close_changes(item_id: str, note: str) -> None:
    """Replace the Changes section with a cleared block and mark the round cleared."""
    from .outbox import perform

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
    from .outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "audit", item_id=item_id, level=level, by=by, note=note))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.argument("issue", type=int)
@click.option("--as", "disposition", required=True, type=click.Choice(DISPOSITIONS),
              help="What finish does with the issue: close it, comment on it, or keep it open.")
@click.option("--note", default="", help="The comment finish writes, or why the issue stays.")
def dispose(item_id: str, issue: int, disposition: str, note: str) -> None:
    """Record the reviewer's judgment of an issue the item closes."""
    from .outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "dispose", item_id=item_id, issue=issue, disposition=disposition,
                             note=note))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--why", required=True, help="What the operator needs to decide.")
def park(item_id: str, why: str) -> None:
    """Hand an item to the operator."""
    from .outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "park", item_id=item_id, why=why))


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
def unpark(item_id: str) -> None:
    """Take an item back from the operator."""
    from .outbox import perform

    with opened() as (project, ledger):
        echo_outcome(perform(project, ledger, "unpark", item_id=item_id))

# --- prompts and templates -----------------------------------------------------------------


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--slot", required=True, type=click.Choice(TEMPLATE_SLOTS),
              help="Which prompt: implement, review, draft, or the branch name.")
@click.option("--guidance", type=click.Choice(GUIDANCE_LEVELS), help="Override [agent] guidance.")
@click.option("--diff-guidance", is_flag=True, help="Show what the lean level drops, with token counts.")
@click.option("--template", "explicit", metavar="SRC", help="Inline template text, or @path in the repository.")
@json_option
def prompt(item_id: str, slot: str, guidance: str | None, diff_guidance: bool, explicit: str | None,
           as_json: bool) -> None:
    """Print the rendered prompt for one item and slot; changes nothing."""
    show_prompt(item_id, slot, guidance=guidance, explicit=explicit, diff_guidance=diff_guidance, as_json=as_json)


def show_prompt(item_id: str, slot: str, *, guidance: str | None = None, explicit: str | None = None,
                diff_guidance: bool = False, as_json: bool = False) -> None:
    """Render one item's prompt and print it (or, with diff_guidance, what lean drops)."""
    from . import data, templates

    with opened() as (project, ledger):
        built = data.build(project, ledger, item_id, slot, guidance=guidance)
        if slot == "branch":
            from .runs import require_valid_branch

            branch = (templates.render_branch(built, templates.branch_source(project.root, explicit), display=explicit)
                      if explicit is not None else templates.render_branch(built, project.config.branch))
            branch = require_valid_branch(built.Id, branch)
            if as_json:
                echo_json({"id": built.Id, "slot": slot, "text": branch})
            else:
                click.echo(branch)
            return
        if diff_guidance:
            dropped = templates.guidance_diff(slot, built, root=project.root, config=project.config)
            for line, tokens in dropped:
                click.echo(f"- [~{tokens} tokens] {line}")
            total = sum(tokens for _, tokens in dropped)
            click.echo(f"lean drops {len(dropped)} lines, about {total} tokens (4 characters a token)")
            return
        rendered = templates.render(slot, built, root=project.root, config=project.config, explicit=explicit)
    if as_json:
        from .reports import prompt_report

        echo_json(prompt_report(built.Id, slot, rendered))
        return
    for warning in rendered.warnings:
        click.echo(f"drover: warning: {warning}", err=True)
    click.echo(rendered.text, nl=False)


@cli.command()
@click.option("--diff", is_flag=True, help="Show how each stale override's default changed, then the other problems.")
@click.option("--format", "diff_format", type=click.Choice(["words", "unified"]), default="words", show_default=True,
              help="--diff view: words (coloured on a terminal) or unified (for git apply, delta, diff-so-fancy).")
@click.option("--color", type=COLOR_CHOICES, default="auto", show_default=True, help="Colour the diff.")
@click.option("--update", is_flag=True, help="Upgrade stale overrides by three-way merge (as drover override --update).")
@click.option("--dry-run", is_flag=True, help="With --update: print the merged blocks, write nothing.")
@json_option
def check(diff: bool, diff_format: str, color: str, update: bool, dry_run: bool, as_json: bool) -> None:
    """Check items, deps, config and templates; exit 1 when anything is wrong."""
    from . import templates
    from .checks import run_check

    if update or dry_run:
        _override(update=update, dry_run=dry_run)
    with opened() as (project, ledger):
        if diff and diff_format == "unified":
            patch, notes = templates.diff_unified(project.root, project.config)
            click.echo(patch, nl=False)
            for note in notes:
                click.echo(f"drover: {note}", err=True)
        elif diff:
            # `drover --color X check --diff` means what `check --diff --color X` means
            parent = click.get_current_context().find_root()
            colored = templates.use_color(color, sys.stdout) if color != "auto" else bool(parent.color)
            text = templates.diff_stale(project.root, project.config, colored)
            if text:
                # click strips ANSI codes off a pipe unless told the colour was asked for
                click.echo(text, nl=not text.endswith("\n"), color=colored)
        findings = run_check(project, ledger)
    errors = [found for found in findings if found.error]
    if as_json:
        from .reports import check_report

        echo_json(check_report(findings))
        sys.exit(1 if errors else 0)
    # With --diff the stale lines are the diff's headers; the other problems still need saying.
    shown = [found for found in findings if not (diff and found.message.startswith("STALE OVERRIDE "))]
    out_err = diff and diff_format == "unified"  # keep the patch on stdout clean
    for found in shown:
        click.echo(found.message if found.error else f"warning: {found.message}", err=out_err)
    if not findings and not diff:
        click.echo("no problems found")
    sys.exit(1 if errors else 0)


def _override(slot: str | None = None, block: str | None = None, **options: Any) -> None:
    from .templates.update import override_command

    with opened() as (project, _ledger):
        lines, code = override_command(project, slot, block, **options)
    for line in lines:
        click.echo(line)
    sys.exit(code)


@cli.command()
@click.argument("slot", required=False, type=click.Choice(SLOTS))
@click.argument("block", required=False, shell_complete=complete_blocks)
@click.option("--file", "file", metavar="PATH", help="The override file, when [prompts] names none for the slot yet.")
@click.option("--addition", is_flag=True, help="Keep the default's lines and add yours after them.")
@click.option("--update", is_flag=True, help="Upgrade stale overrides by three-way merge.")
@click.option("--dry-run", is_flag=True, help="With --update: print the merged blocks, write nothing.")
def override(slot: str | None, block: str | None, file: str | None, addition: bool, update: bool,
             dry_run: bool) -> None:
    """Start a block override from today's default (SLOT BLOCK), or --update stale ones by merge."""
    _override(slot, block, file=file, addition=addition, update=update, dry_run=dry_run)


@cli.command()
@click.option("--prompts", is_flag=True, help="Every block of every slot, with its default and hash (JSON).")
@click.option("--fields", is_flag=True, help="Every template field: type, slots, meaning.")
@json_option
def schema(prompts: bool, fields: bool, as_json: bool) -> None:
    """Describe the template blocks (--prompts) or the template fields (--fields)."""
    from .errors import UsageError

    if prompts == fields:
        raise UsageError("say which: --prompts or --fields")
    if prompts:
        from .templates import schema_prompts

        echo_json(schema_prompts())
        return
    from .fields import field_schema

    described = field_schema()
    if as_json:
        echo_json(described)
        return
    from .textviews import table

    for line in table([(row["name"], row["type"], ",".join(row["slots"]), row["meaning"]) for row in described],
                      widths=(0, 16, 28)):
        click.echo(line)


# --- agents ------------------------------------------------------------------------------


def _launch_command(item_id: str, slot: str, dry_run: bool, explicit: str | None = None,
                    as_json: bool = False) -> None:
    from .errors import UsageError
    from .executors import open_executor
    from .runs import describe, execute, prepare

    if as_json and not dry_run:
        raise UsageError("--json goes with --dry-run (a launch reports as it runs)")
    with opened() as (project, ledger):
        launch = prepare(project, ledger, item_id, slot, explicit_template=explicit)
        # drafts edit the item file in the main checkout, so they always run here
        runner = open_executor(project, "local" if slot == "draft" else None)
        for warning in launch.warnings:
            click.echo(f"drover: warning: {warning}", err=True)
        if dry_run and as_json:
            from .reports import launch_report

            where = project.relpath(launch.workdir) if launch.workdir != project.root else "."
            echo_json(launch_report(launch, where, project.config.setup))
            return
        if dry_run:
            click.echo(launch.prompt, nl=False)
            click.echo("--- drover: dry run; nothing was launched or written")
            for line in describe(project, launch):
                click.echo(line)
            click.echo(f"executor: {runner.name} ({runner.where()})")
            return
        try:
            runner.start()
            result = execute(project, ledger, launch, echo=True, executor=runner)
        finally:
            runner.close()
    for note in result.notes:
        click.echo(f"drover: {note}", err=True)
    ending = f"exited {result.exit_code}" if result.outcome == "exited" else result.outcome
    click.echo(f"{item_id}: {slot} run {result.run_id} {ending} after {result.elapsed:.1f}s "
               f"(log: {project.relpath(result.log_path)})")
    if result.outcome != "exited" or result.exit_code != 0:
        sys.exit(1)
    if slot == "review":
        from .runs import NO_VERDICT, review_verdict

        with opened() as (project, ledger):
            verdict = review_verdict(ledger, result.run_id)
        if not verdict:
            from .errors import Refused

            raise Refused(f"{item_id}: {NO_VERDICT}")
        click.echo(f"{item_id}: the review recorded: {verdict}")


def dry_run_option(func):
    func = click.option("--json", "as_json", is_flag=True, help="With --dry-run: print it as JSON.")(func)
    return click.option("--dry-run", is_flag=True,
                        help="Print the prompt, argv, environment, branch and directory; write nothing.")(func)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
@click.option("--template", "explicit", metavar="SRC", help="Inline template text, or @path in the repository.")
def run(item_id: str, dry_run: bool, as_json: bool, explicit: str | None) -> None:
    """Launch the implementing agent on an item in its worktree."""
    _launch_command(item_id, "implement", dry_run, explicit, as_json)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
@click.option("--print", "print_only", is_flag=True, help="Write the review prompt to stdout; record no launch.")
def review(item_id: str, dry_run: bool, as_json: bool, print_only: bool) -> None:
    """Launch the reviewing agent on an item's branch."""
    if print_only:
        show_prompt(item_id, "review")
        return
    _launch_command(item_id, "review", dry_run, as_json=as_json)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@dry_run_option
def draft(item_id: str, dry_run: bool, as_json: bool) -> None:
    """Launch the drafting agent: it writes the item's numbered requirements."""
    _launch_command(item_id, "draft", dry_run, as_json=as_json)


@cli.command()
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@json_option
def finish(item_id: str, as_json: bool) -> None:
    """Merge an approved item's branch into base locally (never pushes) and mark it done."""
    from .finish import finish as act

    with opened() as (project, ledger):
        finished = act(project, ledger, item_id)
    if as_json:
        from .reports import finish_report

        echo_json(finish_report(item_id, finished))
        sys.exit(1 if finished.problems else 0)
    for line in finished.lines:
        click.echo(line)
    for problem in finished.problems:
        click.echo(f"drover: {problem}", err=True)
    if finished.problems:
        sys.exit(1)


@cli.command(name="log")
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--run", "run_id", metavar="RUN", help="This run of the item (default: its newest).")
@click.option("--follow", is_flag=True, help="Keep printing what the agent writes until the run ends.")
def log_command(item_id: str, run_id: str | None, follow: bool) -> None:
    """Print (or follow) the agent log of an item's run."""
    from .project import open_project
    from .runlog import show_log

    show_log(open_project(), item_id, run_id, follow=follow, out=sys.stdout.buffer)


@cli.command()
@click.argument("item_ids", metavar="[ID]...", nargs=-1, type=ITEM_ID)
@click.option("--jobs", default=1, show_default=True, type=int, help="Items worked at once, each in its own worktree.")
@click.option("--finish", "finish_items", is_flag=True, help="Finish each approved item (local merge into base).")
@click.option("--executor", type=click.Choice(EXECUTORS), default=None,
              help="Where agents run (default: [run] executor).")
@click.option("--dry-run", is_flag=True, help="Print where each run would go; launch and write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (progress goes to stderr).")
def drive(item_ids: tuple[str, ...], jobs: int, finish_items: bool, executor: str | None, dry_run: bool,
          as_json: bool) -> None:
    """Implement and review ready items (or the ids given) until approved, parked or failed."""
    from .loop import drive as run_drive, summary
    from .project import open_project

    project = open_project()
    def say(line: str) -> None:
        click.echo(line, err=as_json)

    results = run_drive(project, list(item_ids), jobs=jobs, finish=finish_items,
                        say=say, echo=sys.stdout.isatty() and not as_json, executor=executor, dry_run=dry_run)
    if dry_run:
        return
    if as_json:
        from .reports import drive_report

        echo_json(drive_report(results))
    for line in summary(results) if not as_json else ():
        click.echo(line)
    sys.exit(0 if all(row.ok for row in results) else 1)


# --- the ledger: backup and move (drover/ledger_cli.py) -----------------------------------------

from .ledger_cli import ledger_group  # noqa: E402 - registered after the group exists

cli.add_command(ledger_group)

from .cliparts import register as _register_setup_commands  # noqa: E402  (needs `cli` defined above)

_register_setup_commands(cli)

if __name__ == "__main__":
    main()
