"""What the commands share: forgiving item ids, the --json option, examples, the project a
command works on, JSON output, and shell completion of ids, blocks, presets and topics."""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project

# what an option decorator takes and gives back: the command function, its type unchanged
Decorated = TypeVar("Decorated", bound=Callable[..., Any])

COLOR_CHOICES = click.Choice(["auto", "always", "never"])


class NearChoice(click.Choice):  # type: ignore[type-arg]
    """click's Choice whose refusal names the nearest choice, as an unknown command's does
    (`'implment' is not one of ... Did you mean 'implement'?`): every slot argument and option."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as exc:
            from drover.errors import did_you_mean

            near = did_you_mean(str(value), [str(choice) for choice in self.choices], fold_case=True)
            if not near:
                raise
            raise click.BadParameter(f"{exc.message.rstrip('.')}. Did you mean '{near}'?", ctx, param) from None

# Where the item-id parameter keeps the project it opened, for the command's `opened()`.
PROJECT_KEY = "drover.ledger.project"


def json_option(func: Decorated) -> Decorated:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")(func)


def _template_text(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip("@ \t\n"):
        # an empty "$VAR" rendered the built-in template while the run recorded an inline one
        raise click.BadParameter("it is empty: give inline template text, or @path of a file in the repository",
                                 ctx, param)
    return value


def template_option(func: Decorated) -> Decorated:
    """`--template SRC` of `prompt` and `run`: inline text, or @path in the repository; never empty."""
    return click.option("--template", "explicit", metavar="SRC", callback=_template_text,
                        help="Inline template text, or @path in the repository.")(func)


def example(line: str) -> str:
    """A command's epilog: its example, closing its --help."""
    return f"\b\nExample: {line}"  # click rewraps epilogs; \b keeps the example on its own line as written


@contextmanager
def opened(operator: str = "") -> Iterator[tuple[Project, Ledger]]:
    """The command's project and its ledger, closed when the command ends. The project is the
    one the item-id parameter opened while click parsed the line, if it did: found and read once.
    `operator` names a command only the operator gives (acting.require_operator): refused
    inside a run before the command does anything."""
    from drover.ledger.db import Ledger

    project = _project(click.get_current_context(silent=True))
    ledger = Ledger(project.ledger_path)
    try:
        if operator:
            from drover.ledger.acting import require_operator

            require_operator(ledger, operator)
            from drover.agents.procs import LAUNCHING

            if operator.encode() in LAUNCHING:  # it runs agents or their code: named once it starts one
                from drover.agents.locks import will_launch

                will_launch(project.state_dir)
        yield project, ledger
    finally:
        ledger.close()


def write_output(path: Path, text: str, example: str, state_dir: Path) -> None:
    """A file the operator named (`--html`, `-o`), written whole or not at all; a refusal names
    that file and why (UsageError: one line, exit 2), not the temporary file beside it. Never in
    `state_dir` (.drover/, the ledger and the runs' logs): `ledger export -o .drover/ledger.db`, from
    an agent inside its run or an operator's slip, replaced the ledger with its own export, every
    run, round and audit gone and every later command refused (hostile review 42)."""
    import errno

    from drover.errors import UsageError
    from drover.items.file import write_atomic

    if path.is_dir():  # `--html ''` too: click makes it the current folder
        raise UsageError(f"a folder, not a file: name the file to write, e.g. {example}", path=path)
    # as the write would reach it: through links, compared without case (`.DROVER` is `.drover` on
    # macOS's and Windows' file systems)
    state = os.path.realpath(state_dir).casefold()
    if Path(os.path.realpath(path).casefold()).is_relative_to(state):
        raise UsageError(f"inside {state_dir.name}/, drover's own state (the ledger, the runs' logs): name a file "
                         f"outside it, e.g. {example}", path=path)
    try:
        write_atomic(path, text)
    except OSError as exc:
        why = exc.strerror or str(exc)
        if exc.errno in (errno.EEXIST, errno.ENOTDIR):  # mkdir met a file where a folder of the path should be
            blocked = next((folder for folder in path.parents if os.path.lexists(folder)), None)
            if blocked is not None and not blocked.is_dir():
                why = f"{blocked} is a file, not a folder"
        raise UsageError(why, path=path) from None


def echo_json(value: Any) -> None:
    """`value` as JSON, as RFC 8259 has it: a number YAML reads as no finite one (an item file's
    `x: .nan`, `y: -.inf`, the agent's to write) is its text, where json.dumps wrote `NaN` and
    `-Infinity`, which no other reader of JSON takes (hostile review 47); a date is its text too."""
    import json

    try:
        said = json.dumps(value, indent=2, default=str, allow_nan=False)
    except ValueError:
        said = json.dumps(_finite(value), indent=2, default=str, allow_nan=False)
    click.echo(said)


def _finite(value: Any) -> Any:
    """`value` with each float that is not finite (NaN, an infinity) as its text, at any depth, keys too."""
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_finite(key): _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def echo_outcome(outcome: Any) -> None:
    from drover.errors import printable

    for line in outcome.lines:  # they may quote an agent's words (the park reason a park replaces)
        click.echo(printable(line))


# --- item ids --------------------------------------------------------------------------------


def _project(ctx: click.Context | None) -> Project:
    """The project the item-id parameter kept in the context's meta, else the one found now."""
    from drover.ledger.project import open_project

    project = ctx.meta.get(PROJECT_KEY) if ctx is not None else None
    return project if project is not None else open_project()


def _prefix(ctx: click.Context | None) -> str | None:
    """The project's id prefix, or None outside a project (the command then says what is wrong).
    The project is kept in the context's meta, where the command's `opened()` takes it."""
    from drover.errors import DroverError

    try:
        project = _project(ctx)
    except DroverError:
        return None
    if ctx is not None:
        ctx.meta[PROJECT_KEY] = project
    return project.config.prefix


if TYPE_CHECKING:
    _ParamType = click.ParamType[str, str]  # generic from click 8.2; a plain class at run time before that
else:
    _ParamType = click.ParamType


class ItemId(_ParamType):
    """An item id as a person types it: `D-1`, `d-1`, `D1`, `1`, `#1` all become D-1."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value
        prefix = _prefix(ctx)
        if prefix is None:
            return value
        from drover.items.ids import resolve

        return resolve(value, prefix)

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        from drover.errors import DroverError
        from drover.items.ids import existing_ids

        try:
            project = _project(ctx)
        except DroverError:
            return []
        ids = existing_ids(project.items_dir, project.config.prefix)
        return [CompletionItem(item_id) for item_id in ids if item_id.lower().startswith(incomplete.lower())]


ITEM_ID = ItemId()


class IssueNumber(_ParamType):
    """A tracker issue's number as people write it: 12, or #12 as GitHub shows it."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        from drover.items.frontmatter_rules import issue_number

        # the frontmatter's rule (one `#`, ASCII digits above 0): issue 0 reached the tracker, and 5000
        # digits were a traceback
        number = issue_number(str(value).strip())
        if number is not None:
            return number
        self.fail(f"{value!r} is not an issue number (write 12 or #12)", param, ctx)


ISSUE_NUMBER = IssueNumber()


def complete_blocks(ctx: click.Context | None, param: click.Parameter | None, incomplete: str) -> list[Any]:
    """`shell_complete=` for an argument naming a template block: the blocks of the SLOT argument
    already given, else every block as `slot:block`."""
    from click.shell_completion import CompletionItem

    from drover.prompts import schema_prompts

    slot = (ctx.params.get("slot") if ctx is not None else None) or ""
    rows = [row for row in schema_prompts() if not slot or row["slot"] == slot]
    names = dict.fromkeys(row["block"] if slot else f"{row['slot']}:{row['block']}" for row in rows)
    return [CompletionItem(name) for name in names if name.startswith(incomplete)
            or name.split(":", 1)[-1].startswith(incomplete)]


def complete_presets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """`shell_complete=` for an option naming an agent preset."""
    from click.shell_completion import CompletionItem

    from drover.agents.presets import PRESETS

    return [CompletionItem(name) for name in PRESETS if name.startswith(incomplete)]


def complete_help_topics(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """`shell_complete=` for `drover help TOPIC`: the reference pages, then the commands."""
    from click.shell_completion import CompletionItem

    from drover.prompts.resources import HELP_TOPICS

    root = ctx.find_root().command
    commands = sorted(root.list_commands(ctx)) if isinstance(root, click.Group) else []
    names = dict.fromkeys([*HELP_TOPICS, *commands])
    return [CompletionItem(name) for name in names if name.startswith(incomplete)]
