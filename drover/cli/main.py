"""The `drover` group and its entry point. Each command is declared once, in click, in the module
of its concept; the group imports a command's module only when the command runs or a help lists
it (click's "lazily loading subcommands"), and command bodies import the core when they run."""
from __future__ import annotations

import gc
import importlib
import sys

# The cyclic garbage collector and a short-lived command (docs/decisions.md, "The collector and a
# command's start and end"). What a command allocates as it starts (modules, classes, the
# configuration, the ledger's rows) lives as long as it does, so collecting the first generation
# every 700 new objects is work thrown away: it is collected every GEN0_THRESHOLD instead. And
# main() freezes what is left as the process ends, so the interpreter's last full collection does
# not walk it all once more.
GEN0_THRESHOLD = 50_000
gc.set_threshold(GEN0_THRESHOLD, *gc.get_threshold()[1:])

from typing import Any, NoReturn  # noqa: E402  (the threshold first: typing and click make thousands)

import click  # noqa: E402

from drover.cli.parts import COLOR_CHOICES  # noqa: E402

# `drover --help` lists the commands in the order a person meets them, one titled block per
# section; each names the module (in drover/cli/) and the function that declares it. A new
# command is declared in its module and named here.
SECTIONS: dict[str, dict[str, str]] = {
    "Set up": {"init": "setup_commands.init", "help": "setup_commands.help_command", "demo": "setup_commands.demo",
               "completion": "setup_commands.completion", "override": "templates.override"},
    "Items": {"new": "items.new", "list": "items.list_command", "show": "items.show"},
    "The loop": {"draft": "loop.draft", "run": "loop.run", "review": "loop.review", "verify": "loop.verify",
                 "drive": "loop.drive", "finish": "loop.finish", "stop": "loop.stop"},
    "Review verbs": {"request-changes": "verbs.request_changes", "close-changes": "verbs.close_changes",
                     "audit": "verbs.audit", "dispose": "verbs.dispose", "park": "verbs.park", "unpark": "verbs.unpark"},
    "Inspection": {"check": "templates.check", "prompt": "templates.prompt", "schema": "templates.schema",
                   "log": "loop.log_command", "ledger": "ledger.ledger_group",
                   "worktrees": "worktrees.worktrees_group"},
    "Reports": {"report": "report.report"},
}
LAZY = {name: where for section in SECTIONS.values() for name, where in section.items()}


class DroverGroup(click.Group):
    """click's group with drover's ways: commands loaded on first use, a non-UTF-8 argument refused,
    Ctrl-C and SIGTERM turned into exit 130 and 143, and every failure the user can act on (a
    DroverError, a usage error, the machine's refusal) one line on stderr with its exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in LAZY:
            module, name = LAZY[cmd_name].rsplit(".", 1)
            command = getattr(importlib.import_module(f"drover.cli.{module}"), name)
            self.add_command(command, cmd_name)  # the same object every later lookup, in this process
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """click's lookup, and for a name that is no command the nearest one, as click's options do."""
        name = click.utils.make_str(args[0]) if args else ""
        if args and self.get_command(ctx, name) is None and not name.startswith("-"):
            from drover.errors import did_you_mean

            near = did_you_mean(name, self.list_commands(ctx))
            if near:
                raise click.UsageError(f"No such command '{name}'. Did you mean '{near}'?", ctx)
        return super().resolve_command(ctx, args)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        from drover.cli.exits import caught_signals, not_utf8

        argv = sys.argv[1:] if args is None else list(args)
        refusal = not_utf8(argv)
        if refusal:
            click.echo(f"drover: {refusal}", err=True)
            sys.exit(2)
        with caught_signals() as caught:
            try:
                return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
            except SystemExit as exc:
                # a command a signal stopped that then failed (a launch records the run, then exits 1):
                # 128 + the signal instead; one that ends well on it (`log --follow`) keeps its 0
                if caught.signum and exc.code not in (0, None):
                    sys.exit(128 + caught.signum)
                raise

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            _usage_line(ctx, exc)

    def invoke(self, ctx: click.Context) -> Any:
        import sqlite3

        from drover.cli.exits import answer
        from drover.errors import DroverError

        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_line(ctx, exc)
        except (DroverError, KeyboardInterrupt, OSError, sqlite3.Error) as exc:
            ctx.exit(answer(exc))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of `drover --help`, one titled block per section, then any others."""
        commands = {name: self.get_command(ctx, name) for name in self.list_commands(ctx)}
        visible = {name: command for name, command in commands.items() if command is not None and not command.hidden}
        blocks = [(title, [name for name in listed if name in visible]) for title, listed in SECTIONS.items()]
        blocks.append(("Other", sorted(set(visible) - set(LAZY))))
        for title, names in blocks:
            if not names:
                continue
            width = formatter.width - 6 - max(len(name) for name in names)
            rows = [(name, visible[name].get_short_help_str(max(width, 30))) for name in names]
            with formatter.section(title):
                formatter.write_dl(rows)


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
    from drover.cli.views import use_color

    ctx.color = use_color(color, sys.stdout)


def main() -> None:
    """The `drover` program."""
    try:
        cli(prog_name="drover")
    finally:
        # the process ends here (click exits): what is still alive is freed with it, so the
        # interpreter's last collection need not walk it; objects made after this are collected
        gc.freeze()
