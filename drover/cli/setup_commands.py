"""The set-up commands: init, help, completion, demo."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from drover.cli.parts import complete_help_topics, complete_presets, example


@click.command(epilog=example("drover init --agent codex"))
@click.option("--agent", "preset", default="", metavar="PRESET", shell_complete=complete_presets,
              help="The agent preset drover.toml names (default: claude; `drover help agents` lists them).")
def init(preset: str) -> None:
    """Write drover.toml, items/ and .drover/, and git-ignore .drover/."""
    from drover.cli.scaffold import init_project

    if preset:
        from drover.agents.presets import PRESETS
        from drover.errors import UsageError

        if preset not in PRESETS:
            raise UsageError(f"--agent: no preset {preset!r}: expected one of {', '.join(PRESETS)}")
    for line in init_project(Path.cwd(), preset):
        click.echo(line)


@click.command(name="help", epilog=example("drover help configuration"))
@click.argument("topic", required=False, shell_complete=complete_help_topics)
@click.pass_context
def help_command(ctx: click.Context, topic: str | None) -> None:
    """Print a reference page (configuration, items, templates, ...) or a command's help."""
    from drover.errors import UsageError, did_you_mean
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
    root = ctx.find_root()
    assert isinstance(root.command, click.Group)  # help is a subcommand of drover's group
    command = root.command.get_command(root, topic)
    if command is not None:
        with click.Context(command, info_name=topic, parent=root) as sub:
            click.echo(command.get_help(sub))
        return
    close = did_you_mean(topic, [*HELP_TOPICS, *root.command.list_commands(root)])
    hint = f" (did you mean {close}?)" if close else f" (topics: {', '.join(HELP_TOPICS)})"
    raise UsageError(f"no help topic {topic!r}{hint}")


@click.command(epilog=example('eval "$(drover completion bash)"    # in ~/.bashrc'))
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the shell completion script; ids, slots and options complete."""
    from click.shell_completion import get_completion_class

    completer = get_completion_class(shell)
    assert completer is not None  # click ships all three
    click.echo(completer(ctx.find_root().command, {}, "drover", "_DROVER_COMPLETE").source())


@click.command(epilog=example("drover demo /tmp/drover-demo"))
@click.argument("folder", required=False, type=click.Path(file_okay=False))
def demo(folder: str | None) -> None:
    """Build a throw-away project and drive it with a scripted agent (no network)."""
    from drover.cli.demo import main as run_demo

    sys.exit(run_demo([folder] if folder else []))
