"""The prompt and template commands: prompt, check, override, schema."""
from __future__ import annotations

import sys
from typing import Any

import click
from click.core import ParameterSource

from drover.cli.parts import COLOR_CHOICES, ITEM_ID, NearChoice, complete_blocks, echo_json, example, json_option, opened, template_option
from drover.errors import ProblemCode, UsageError, on_screen, printable
from drover.vocabulary import GUIDANCE_LEVELS, SLOTS, TEMPLATE_SLOTS


@click.command(epilog=example("drover prompt D-3 --slot implement"))
@click.argument("item_id", metavar="ID", type=ITEM_ID)
@click.option("--slot", type=NearChoice(TEMPLATE_SLOTS),
              help="Which prompt: implement, review, draft, or the branch name. Default: the slot the item is at "
                   "(review when in review or approved, draft when it needs requirements, else implement).")
@click.option("--guidance", type=click.Choice(GUIDANCE_LEVELS), help="Override [agent] guidance.")
@click.option("--diff-guidance", is_flag=True, help="Show what the lean level drops, with token counts.")
@template_option
@json_option
def prompt(item_id: str, slot: str | None, guidance: str | None, diff_guidance: bool, explicit: str | None,
           as_json: bool) -> None:
    """Print the rendered prompt for one item and slot; changes nothing."""
    if diff_guidance and as_json:
        raise UsageError("--diff-guidance lists the lines lean drops as text; --json prints the prompt: give one of them")
    show_prompt(item_id, slot, guidance=guidance, explicit=explicit, diff_guidance=diff_guidance, as_json=as_json)


def show_prompt(item_id: str, slot: str | None, *, guidance: str | None = None, explicit: str | None = None,
                diff_guidance: bool = False, as_json: bool = False) -> None:
    """Render one item's prompt and print it (or, with diff_guidance, what lean drops); slot None:
    the slot the item is at (state.slot_at)."""
    from drover import prompts as templates
    from drover.prompts import data

    with opened() as (project, ledger):
        if slot is None:
            from drover.ledger.itemstate import item_state
            from drover.ledger.state import slot_at

            slot = slot_at(item_state(project, ledger, item_id).state)
        follow_ups = templates.names_follow_ups(slot, root=project.root, config=project.config, explicit=explicit)
        built = data.build(project, ledger, item_id, slot, guidance=guidance, follow_ups=follow_ups)
        if slot == "branch":
            from drover.loop.runs import require_valid_branch

            display = ""
            if explicit is not None:
                text, display, warning = templates.branch_source(project.root, explicit, project.config.branch)
                if warning:
                    click.echo(f"drover: warning: {printable(warning)}", err=True)
            branch = (templates.render_branch(built, text, display=display) if display
                      else templates.render_branch(built, project.config.branch))
            branch = require_valid_branch(built.Id, branch, source=display, base=project.config.base)
            if as_json:
                echo_json({"id": built.Id, "slot": slot, "text": branch})
            else:
                click.echo(on_screen(branch))  # a title's characters, git takes (a bidi control, U+009B)
            return
        if diff_guidance:
            dropped = templates.guidance_diff(slot, built, root=project.root, config=project.config,
                                              explicit=explicit)
            # the prompt's own warnings (a stale or whole override): the lines are of that template
            for warning in templates.launch_warnings(slot, root=project.root, config=project.config, explicit=explicit):
                click.echo(f"drover: warning: {printable(warning)}", err=True)
            for line, tokens in dropped:
                click.echo(f"- [~{tokens} tokens] {line}")
            total = sum(tokens for _, tokens in dropped)
            click.echo(f"lean drops {len(dropped)} lines, about {total} tokens (4 characters a token)")
            return
        rendered = templates.render(slot, built, root=project.root, config=project.config, explicit=explicit)
    if as_json:
        from drover.cli.reports import prompt_report

        echo_json(prompt_report(built.Id, slot, rendered))
        return
    for warning in rendered.warnings:
        click.echo(f"drover: warning: {printable(warning)}", err=True)

    click.echo(on_screen(rendered.text), nl=False)


@click.command(epilog=example("drover check --json"))
@click.option("--diff", is_flag=True, help="Show how each stale override's default changed, then the other problems.")
@click.option("--format", "diff_format", type=click.Choice(["words", "unified"]), default="words", show_default=True,
              help="--diff view: words (coloured on a terminal) or unified (for delta, diff-so-fancy).")
@click.option("--color", type=COLOR_CHOICES, default="auto", show_default=True, help="Colour the diff.")
@click.option("--update", is_flag=True, help="Upgrade stale overrides by three-way merge (as drover override --update).")
@click.option("--dry-run", is_flag=True, help="With --update: print the merged blocks, write nothing.")
@json_option
def check(diff: bool, diff_format: str, color: str, update: bool, dry_run: bool, as_json: bool) -> None:
    """Check items, deps, config and templates; exit 1 when anything is wrong."""
    from drover import prompts as templates
    from drover.cli.views import colour_diff, use_color
    from drover.loop.checks import run_check

    if as_json and (diff or update):
        # stdout under --json is one JSON document; a diff or the merge's lines are text
        raise UsageError(f"--json prints the problems as JSON; {'--diff' if diff else '--update'} prints text: "
                         "give one of them")
    if not diff and click.get_current_context().get_parameter_source("diff_format") == ParameterSource.COMMANDLINE:
        # as --dry-run goes with --update: a view asked for and never shown would read as no stale override
        raise UsageError("--format goes with --diff: it chooses the diff's view")
    if update or dry_run:
        _override(update=update, dry_run=dry_run)
    if as_json:
        _config_as_json()
    with opened() as (project, ledger):
        if diff and diff_format == "unified":
            patch, notes = templates.diff_unified(project.root, project.config)
            click.echo(patch, nl=False)
            for note in notes:
                click.echo(f"drover: {note}", err=True)
            if not patch and not notes:
                click.echo(f"drover: {NOTHING_STALE}", err=True)  # stdout stays an empty patch
        elif diff:
            # `drover --color X check --diff` means what `check --diff --color X` means
            parent = click.get_current_context().find_root()
            colored = use_color(color, sys.stdout) if color != "auto" else bool(parent.color)
            text = templates.diff_stale(project.root, project.config, colour_diff if colored else None)
            if text:
                # click strips ANSI codes off a pipe unless told the colour was asked for
                click.echo(text, nl=not text.endswith("\n"), color=colored)
            else:
                click.echo(NOTHING_STALE)
        findings = run_check(project, ledger)
        stale = not diff and any(found.code == ProblemCode.STALE_OVERRIDE for found in findings)
        hints = stale_hints(templates.stale_overrides(project.root, project.config)) if stale else []
        hints += [WHOLE_HINT.format(at=f"{found.path}:{found.line}") for found in findings
                  if found.code == ProblemCode.WHOLE_TEMPLATE]
    # with --diff the stale lines are the diff's headers, and a unified patch keeps stdout clean
    say_check(findings, as_json, diff=diff, out_err=diff and diff_format == "unified", hints=hints)


NOTHING_STALE = "no stale overrides: nothing to diff"
# what a stale override asks of its owner, after check's lines (on stderr: stdout keeps one line a finding)
STALE_HINT = ("a stale override: `drover check --diff` shows how the default changed since it was written; "
              "`drover override --update` merges that into it")
# where a whole template's first text outside the blocks is (check's line names the file only, as SPEC writes it)
WHOLE_HINT = ("a whole template: {at} is outside every block, so the file replaces the built-in and none of "
              "drover's own instructions reach the agent; move it into a block to override that block alone")
# with no base (none recorded, or one this drover never shipped) there is no change to show or merge
NO_BASE_HINT = ("a stale override with no base drover knows: compare the block with today's default "
                "(`drover schema --prompts` gives its text and hash), then open the block with "
                "<# drover-base: HASH #>, that hash")


def stale_hints(overrides: list[tuple[Any, list[Any]]]) -> list[str]:
    """The hint for each kind of stale replacement among `overrides` (templates.stale_overrides)."""
    known = [stale.base_text is not None for _, found in overrides for stale in found]
    return [hint for hint, shown in ((STALE_HINT, True in known), (NO_BASE_HINT, False in known)) if shown]


def _config_as_json() -> None:
    """check --json of a drover.toml that does not load: its problems as check's JSON, each with
    the line it is on, exit 2 as for any configuration error (a script reads JSON, not a line)."""
    from drover.cli.parts import PROJECT_KEY
    from drover.cli.reports import check_report
    from drover.errors import ConfigError, Finding
    from drover.ledger.project import open_project

    try:
        click.get_current_context().meta[PROJECT_KEY] = open_project()  # what opened() takes next
    except ConfigError as exc:
        from drover.config import CONFIG_FILE

        path = CONFIG_FILE if exc.places else exc.path  # several() is drover.toml's problems, each at its line
        places = exc.places or (exc.line,) * len(exc.lines)
        echo_json(check_report([Finding(line, code=ProblemCode.CONFIG, path=path, line=place)
                                for line, place in zip(exc.lines, places)]))
        sys.exit(2)


def say_check(findings: list[Any], as_json: bool, *, diff: bool = False, out_err: bool = False,
              hints: list[str] | None = None) -> None:
    """check's findings, one line each (a warning says so) or as JSON; exit 1 when one is an error.
    With --diff the STALE OVERRIDE lines were the diff's headers; out_err: they go to stderr.
    `hints`: what to do about the stale overrides, printed after the lines (on stderr)."""
    failed = any(found.error for found in findings)
    if as_json:
        from drover.cli.reports import check_report

        echo_json(check_report(findings))
        sys.exit(1 if failed else 0)
    for found in findings:  # a finding quotes item files, which agents may write: no escape reaches a terminal
        if not (diff and found.code == ProblemCode.STALE_OVERRIDE):
            click.echo(printable(found.message if found.error else f"warning: {found.message}"), err=out_err)
    if not findings and not diff:
        click.echo("no problems found")
    for hint in hints or ():
        click.echo(hint, err=True)
    sys.exit(1 if failed else 0)


def _override(slot: str | None = None, block: str | None = None, **options: Any) -> None:
    from drover.prompts.update import override_command

    # the operator's: it writes drover.toml's [prompts] and the override files, which steer every
    # later review; an implementer named a file in its own worktree there (hostile review 42).
    # `--update --dry-run` writes nothing and stays open
    with opened(operator="" if options.get("dry_run") else "override") as (project, _ledger):
        lines, code = override_command(project, slot, block, **options)
    for line in lines:
        click.echo(line)
    sys.exit(code)


@click.command(epilog=example("drover override implement scope"))
@click.argument("slot", required=False, type=NearChoice(SLOTS))
@click.argument("block", required=False, shell_complete=complete_blocks)
@click.option("--file", "file", metavar="PATH", help="The override file, when [prompts] names none for the slot yet.")
@click.option("--addition", is_flag=True, help="Keep the default's lines and add yours after them.")
@click.option("--update", is_flag=True, help="Upgrade stale overrides by three-way merge.")
@click.option("--dry-run", is_flag=True, help="With --update: print the merged blocks, write nothing.")
def override(slot: str | None, block: str | None, file: str | None, addition: bool, update: bool,
             dry_run: bool) -> None:
    """Start a block override from today's default (SLOT BLOCK), or --update stale ones by merge."""
    _override(slot, block, file=file, addition=addition, update=update, dry_run=dry_run)


@click.command(epilog=example("drover schema --fields"))
@click.option("--prompts", is_flag=True, help="Every block of every slot, with its default and hash (JSON).")
@click.option("--fields", is_flag=True, help="Every template field: type, slots, meaning.")
@json_option
def schema(prompts: bool, fields: bool, as_json: bool) -> None:
    """Describe the template blocks (--prompts) or the template fields (--fields)."""
    if prompts == fields:
        raise UsageError("say which: --prompts or --fields")
    if prompts:
        from drover.prompts import schema_prompts

        echo_json(schema_prompts())
        return
    from drover.prompts.fields import field_schema

    described = field_schema()
    if as_json:
        echo_json(described)
        return
    from drover.cli.views import table

    for line in table([(row["name"], row["type"], ",".join(row["slots"]), row["meaning"]) for row in described],
                      widths=(0, 16, 28)):
        click.echo(line)
