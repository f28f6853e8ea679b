"""Every command has help text and a section in docs/commands.md naming each of its options."""
from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from drover.cli import cli

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


def doc_sections() -> dict[str, str]:
    """docs/commands.md cut at its `## drover NAME` headings."""
    text = DOCS.read_text(encoding="utf-8")
    sections: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = re.match(r"^##\s+`?drover ([a-z][a-z -]*?)`?\s*$", line)
        if match:
            current = match.group(1).strip()
            sections[current] = ""
        elif line.startswith("## "):
            current = None
        elif current:
            sections[current] += line + "\n"
    return sections


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


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_and_option_is_in_docs_commands_md(name):
    sections = doc_sections()
    assert name in sections, f"docs/commands.md has no `## drover {name}` section"
    section = sections[name]
    for param in COMMANDS[name].params:
        if isinstance(param, click.Option):
            longest = max(param.opts, key=len)
            assert longest in section, f"docs/commands.md: drover {name} does not mention {longest}"


def test_docs_describe_no_command_that_does_not_exist():
    assert set(doc_sections()) <= set(COMMANDS)


def test_docs_name_the_exit_codes():
    text = DOCS.read_text(encoding="utf-8")
    for code in ("0", "1", "2"):
        assert re.search(rf"`{code}`|\b{code}\b", text)
    assert "Exit codes" in text or "exit codes" in text
