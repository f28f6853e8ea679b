"""Every command has help text and is parsed by click alone; `drover --help` imports no core
library; docs/commands.md lists exactly the exit codes the errors carry.

The command reference itself is generated (docs/reference/commands.md, `make docs`).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
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
def test_every_commands_help_ends_with_an_example_of_it(name):
    """docs/commands.md: "Each command's `--help` ends with an example", the subcommands' too
    (`worktrees prune`, `ledger export`, `ledger import` ended on their options)."""
    result = CliRunner().invoke(cli, [*name.split(), "--help"])
    last = [line for line in result.stdout.splitlines() if line.strip()][-1].strip()
    assert last.startswith("Example: ") and f"drover {name}" in last, f"drover {name} --help ends: {last}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_option_says_what_it_does(name):
    for param in COMMANDS[name].params:
        if isinstance(param, click.Option) and not isinstance(param.type, click.Choice):
            assert (param.help or "").strip(), f"drover {name} {param.opts[0]} has no help text"


def test_every_command_is_a_click_command_with_click_parameter_types():
    """One declaration: every command and every parameter is click's, nothing parses a line beside it."""
    for name, command in COMMANDS.items():
        assert isinstance(command, click.Command), name
        for param in command.params:
            assert isinstance(param.type, click.ParamType), f"drover {name} {param.name}"


def test_list_limit_is_parsed_by_click_alone(repo):
    """`list --limit` is click's IntRange: a bad value is click's one-line usage error, exit 2."""
    CliRunner().invoke(cli, ["init"], catch_exceptions=False)
    command = cli.get_command(click.Context(cli), "list")
    assert command is not None
    limit = next(param for param in command.params if param.name == "limit")
    assert isinstance(limit.type, click.IntRange)
    assert CliRunner().invoke(cli, ["list", "--limit", "2"], catch_exceptions=False).exit_code == 0
    refused = CliRunner().invoke(cli, ["list", "--limit", "0"], catch_exceptions=False)
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.startswith("drover: Invalid value for '--limit': 0 is not in the range x>=1")
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_help_and_h_print_the_grouped_help():
    said = CliRunner().invoke(cli, ["--help"], prog_name="drover")
    assert said.exit_code == 0 and said.stdout.startswith("Usage: drover [OPTIONS] COMMAND")
    assert CliRunner().invoke(cli, ["-h"], prog_name="drover").stdout == said.stdout


def test_help_imports_no_core_library():
    """`drover --help` needs click and the command declarations, not the ledger, the templates or YAML."""
    code = ("import json, sys; from drover.cli.main import cli\n"
            "try:\n    cli(['--help'], prog_name='drover')\n"
            "except SystemExit:\n    print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.startswith("Usage: drover [OPTIONS] COMMAND")
    modules = json.loads(done.stderr)
    heavy = [name for name in modules if name.split(".")[0] in ("jinja2", "sqlite3", "_sqlite3", "sqlite_utils",
                                                                 "yaml", "frontmatter", "unidiff")]
    assert heavy == [] and "drover.cli.verbs" in modules  # every command was declared, none ran


def test_an_invocation_leaves_the_signal_handlers_as_it_found_them(repo):
    """Ctrl-C and SIGTERM are drover's only while a command runs: a second invocation starts afresh."""
    import signal

    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    assert CliRunner().invoke(cli, ["init"]).exit_code == 0
    assert CliRunner().invoke(cli, ["new", "x"]).exit_code == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


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

    from drover.cli.exits import SIGNAL_EXIT_CODES

    documented = _documented_exit_codes()
    carried = {cls.exit_code for cls in _every_error_class()}
    assert set(documented) == {0} | carried | set(SIGNAL_EXIT_CODES)
    assert all(documented.values())
    assert "refused" in documented[1] and "usage" in documented[2]
    assert all(name in documented[code] for code, name in SIGNAL_EXIT_CODES.items())


ROOT = Path(__file__).resolve().parent.parent


def test_every_package_path_the_docs_name_exists():
    """A `drover/...` folder or module docs/ names is one the source has, or one the wheel adds."""
    import tomllib

    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["wheel"]
    added = list(build["force-include"].values())
    named = {path for page in (ROOT / "docs").glob("*.md")
             for path in re.findall(r"`(drover/[\w/]*(?:/|\.py))`", page.read_text())}
    assert named
    assert sorted(path for path in named
                  if not (ROOT / path).exists() and not any(where.startswith(path) for where in added)) == []


def test_the_template_docs_name_exactly_the_commands_that_take_template():
    taking = sorted(name for name, command in COMMANDS.items() if any("--template" in p.opts for p in command.params))
    page = (ROOT / "docs" / "templates.md").read_text()
    first = page.split("## Which template a slot uses")[1].split("\n2. ")[0]
    assert sorted(re.findall(r"`drover (\w+)`", first)) == taking


def test_help_texts_name_a_help_topic_never_a_file_an_installed_drover_lacks():
    """A new user's `drover report --help` sent them to docs/report.md, and the drover.toml `init`
    wrote to docs/worktrees.md: an installed drover ships no docs/ folder. Help and the commented
    file name `drover help TOPIC`, as the rest of them do."""
    from drover.cli.config_text import default_config_text

    for name, command in COMMANDS.items():
        said = [command.help or "", command.epilog or "", *(getattr(param, "help", None) or "" for param in command.params)]
        assert not [text for text in said if "docs/" in text], f"drover {name} --help names a docs/ file"
    assert "docs/" not in default_config_text()
