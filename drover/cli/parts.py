"""The command line's furniture: grouped help, forgiving item ids, and the set-up commands
(`help`, `completion`, `demo`). cli.py imports this module at its end to register them."""
from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

# `drover --help` lists commands in the order a person meets them. A new command joins a
# section by adding its name here; a command in no section is listed under "Other".
SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Set up", ("init", "help", "demo", "completion", "override")),
    ("Items", ("new", "list", "show")),
    ("The loop", ("draft", "run", "review", "verify", "drive", "finish", "stop")),
    ("Review verbs", ("request-changes", "close-changes", "audit", "dispose", "park", "unpark")),
    ("Inspection", ("check", "prompt", "schema", "log", "ledger")),
)

# One example per command, shown at the end of its --help. A new command adds its line here.
EXAMPLES: dict[str, str] = {
    "init": "drover init",
    "help": "drover help configuration",
    "demo": "drover demo /tmp/drover-demo",
    "completion": 'eval "$(drover completion bash)"    # in ~/.bashrc',
    "new": 'drover new "Reject unknown config keys" --kind bug --dep D-2',
    "list": "drover list --state approved --state parked",
    "show": "drover show D-3",
    "draft": "drover draft D-3",
    "run": "drover run D-3 --dry-run",
    "review": "drover review D-3",
    "drive": "drover drive --jobs 2 --finish",
    "finish": "drover finish D-3",
    "verify": "drover verify D-3",
    "stop": "drover stop D-3",
    "request-changes": "drover request-changes D-3 --file findings.md",
    "close-changes": 'drover close-changes D-3 --note "fixed in the parser"',
    "audit": 'drover audit D-3 --level reviewed --note "tests cover each requirement"',
    "dispose": "drover dispose D-3 42 --as close",
    "park": 'drover park D-3 --why "needs a decision on the file format"',
    "unpark": "drover unpark D-3",
    "check": "drover check --json",
    "prompt": "drover prompt D-3 --slot implement",
    "schema": "drover schema --fields",
    "log": "drover log D-3 --follow",
    "ledger": "drover ledger export > ledger.jsonl",
    "override": "drover override implement scope",
}


def add_examples(group: click.Group) -> None:
    """Close each command's --help with its example (a command's own epilog wins)."""
    for name, command in group.commands.items():
        if name in EXAMPLES and not command.epilog:
            # click rewraps epilogs; \b keeps the example on its own line as written
            command.epilog = f"\b\nExample: {EXAMPLES[name]}"


def format_sections(group: click.Group, ctx: click.Context, formatter: click.HelpFormatter) -> None:
    """The command list of `drover --help`, one titled block per section."""
    commands = {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}
    visible = {name: cmd for name, cmd in commands.items() if cmd is not None and not cmd.hidden}
    placed: set[str] = set()
    blocks: list[tuple[str, list[str]]] = []
    for title, listed in SECTIONS:
        present = [name for name in listed if name in visible]
        placed.update(present)
        blocks.append((title, present))
    blocks.append(("Other", sorted(set(visible) - placed)))
    for title, names in blocks:
        if not names:
            continue
        width = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, visible[name].get_short_help_str(max(width, 30))) for name in names]
        with formatter.section(title):
            formatter.write_dl(rows)


# --- item ids --------------------------------------------------------------------------------


def _prefix(ctx: click.Context | None) -> str | None:
    """The project's id prefix, or None outside a project (the command then says what is wrong).

    The project opened here is kept in the context's meta, where the command's `opened()` takes
    it instead of finding and reading it a second time (fastpath.opened).
    """
    from drover.errors import DroverError
    from drover.ledger.project import open_project

    project = ctx.meta.get("drover.ledger.project") if ctx is not None else None
    if project is None:
        try:
            project = open_project()
        except DroverError:
            return None
        if ctx is not None:
            ctx.meta["drover.ledger.project"] = project
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
        from drover.ledger.project import open_project

        try:
            project = open_project()
        except DroverError:
            return []
        ids = existing_ids(project.items_dir, project.config.prefix)
        return [CompletionItem(item_id) for item_id in ids if item_id.lower().startswith(incomplete.lower())]


ITEM_ID = ItemId()


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


# --- set-up commands -------------------------------------------------------------------------


def register(cli: click.Group) -> None:
    """Add the set-up commands to the group."""

    @cli.command(name="help")
    @click.argument("topic", required=False, shell_complete=complete_help_topics)
    @click.pass_context
    def help_cmd(ctx: click.Context, topic: str | None) -> None:
        """Print a reference page (configuration, items, templates, ...) or a command's help.
        """
        from drover.errors import UsageError
        from drover.prompts.resources import HELP_TOPICS, help_page

        if not topic:
            click.echo("Reference pages (drover help TOPIC):")
            for name in HELP_TOPICS:
                click.echo(f"  {name}")
            click.echo("Command help: drover help COMMAND, or drover COMMAND --help")
            return
        if topic in HELP_TOPICS:
            click.echo(help_page(topic), nl=False)
            return
        command = cli.get_command(ctx, topic)
        if command is not None:
            with click.Context(command, info_name=topic, parent=ctx.parent) as sub:
                click.echo(command.get_help(sub))
            return
        import difflib

        choices = [*HELP_TOPICS, *cli.list_commands(ctx)]
        close = difflib.get_close_matches(topic, choices, n=1)
        hint = f" (did you mean {close[0]}?)" if close else f" (topics: {', '.join(HELP_TOPICS)})"
        raise UsageError(f"no help topic {topic!r}{hint}")

    @cli.command()
    @click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
    def completion(shell: str) -> None:
        """Print the shell completion script; ids, slots and options complete.
        """
        from click.shell_completion import get_completion_class

        completer = get_completion_class(shell)
        assert completer is not None  # click ships all three
        click.echo(completer(cli, {}, "drover", "_DROVER_COMPLETE").source())

    @cli.command()
    @click.argument("folder", required=False, type=click.Path(file_okay=False))
    def demo(folder: str | None) -> None:
        """Build a throw-away project and drive it with a scripted agent (no network).
        """
        from drover.cli.demo import main as run_demo

        sys.exit(run_demo([folder] if folder else []))

    add_examples(cli)
