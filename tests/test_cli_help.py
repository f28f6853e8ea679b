"""Every command has help text; docs/commands.md lists exactly the exit codes the errors carry.

The command reference itself is generated (docs/reference/commands.md, `make docs`).
"""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from drover.cli.main import cli
from drover.errors import DroverError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def all_commands(group: click.Group = cli, prefix: str = "") -> dict[str, click.Command]:
    """Every command reachable from the group, by its full name (`schema`, `a b` for nested groups)."""
    ctx = click.Context(group)
    found = {}
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        full = f"{prefix}{name}"
        found[full] = command
        if isinstance(command, click.Group):
            found.update(all_commands(command, f"{full} "))
    return found


COMMANDS = all_commands()


def test_the_foundation_commands_are_all_there():
    for name in ("init", "new", "list", "show", "request-changes", "close-changes", "audit",
                 "dispose", "park", "unpark"):
        assert name in COMMANDS


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_has_help_text(name):
    command = COMMANDS[name]
    assert (command.help or "").strip(), f"drover {name} has no help text (its docstring)"
    assert (command.get_short_help_str() or "").strip()
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    assert result.exit_code == 0
    assert result.stdout.startswith(f"Usage: cli {name}") or result.stdout.startswith(f"Usage: drover {name}")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_says_what_it_does(name):
    for param in COMMANDS[name].params:
        if isinstance(param, click.Option) and not isinstance(param.type, click.Choice):
            assert (param.help or "").strip(), f"drover {name} {param.opts[0]} has no help text"


def _every_error_class(cls: type = DroverError) -> list[type]:
    found = [cls]
    for child in cls.__subclasses__():
        found.extend(_every_error_class(child))
    return found


def _documented_exit_codes() -> dict[int, str]:
    """The rows of the table under `## Exit codes and errors` in docs/commands.md: code -> meaning."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Exit codes and errors", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\d+)` \| (.*) \|$", section, re.M)
    return {int(code): meaning.strip() for code, meaning in rows}


def test_the_exit_code_table_lists_exactly_the_codes_errors_carry():
    import drover.trackers  # noqa: F401 - its error classes join the hierarchy on import

    from drover.cli.fastpath import SIGNAL_EXIT_CODES

    documented = _documented_exit_codes()
    carried = {cls.exit_code for cls in _every_error_class()}
    assert set(documented) == {0} | carried | set(SIGNAL_EXIT_CODES)
    assert all(documented.values())
    assert "refused" in documented[1] and "usage" in documented[2]
    assert all(name in documented[code] for code, name in SIGNAL_EXIT_CODES.items())
