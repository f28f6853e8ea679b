"""Reference tables for docs/, written from the code by cog (`make docs`; `make test` checks them).

Each function returns Markdown; a cog block in a doc prints it. Nothing here is hand-kept:
the commands come from walking the click group, the rest from the tables the code acts on.
"""
from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

import click

# Help text is wrapped to the terminal; a fixed width makes the output the same everywhere.
HELP_WIDTH = 100


def _commands(group: click.Group, ctx: click.Context) -> list[tuple[click.Command, click.Context]]:
    """Every command under the group, depth first, each with the context its --help prints from."""
    found = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        child = click.Context(command, info_name=name, parent=ctx)
        found.append((command, child))
        if isinstance(command, click.Group):
            found.extend(_commands(command, child))
    return found


def command_reference() -> str:
    """`drover --help` and each command's `--help`, under a heading per command."""
    from drover.cli.main import cli

    root = click.Context(cli, info_name="drover", terminal_width=HELP_WIDTH, max_content_width=HELP_WIDTH)
    parts = ["## `drover`", "", "```", cli.get_help(root), "```"]
    for command, ctx in _commands(cli, root):
        parts += ["", f"## `{ctx.command_path}`", "", "```", command.get_help(ctx), "```"]
    return "\n".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def field_table() -> str:
    """The template fields as `drover schema --fields` describes them."""
    from drover.prompts.fields import field_schema

    lines = ["| field | type | slots | meaning |", "|---|---|---|---|"]
    members = []
    for row in field_schema():
        lines.append(f"| `{row['name']}` | {_cell(row['type'])} | {', '.join(row['slots'])} | {_cell(row['meaning'])} |")
        for member in row.get("members") or ():
            members.append(f"| `{row['name']}.{member['name']}` | {_cell(member['type'])} | {_cell(member['meaning'])} |")
    lines += ["", "Members of the structured fields:", "", "| member | type | meaning |", "|---|---|---|", *members]
    return "\n".join(lines)


def field_explained_table() -> str:
    """docs/fields.md's table: each field's type and slots as the schema states them, with its explanation."""
    from drover.prompts.fields import field_explanations, field_schema

    explained = field_explanations()
    lines = ["| field | type | slots | meaning |", "|---|---|---|---|"]
    for row in field_schema():
        lines.append(f"| `{row['name']}` | {_cell(row['type'])} | {', '.join(row['slots'])} | {_cell(explained[row['name']])} |")
    return "\n".join(lines)


def _toml(value: object) -> str:
    if isinstance(value, dict):
        return "{}" if not value else "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def config_table() -> str:
    """Every drover.toml key with its type, default and meaning, from the declarations (config.KEYS)."""
    from drover import config

    from drover.cli.config_text import toml_value

    words = {str: "string", int: "integer", bool: "boolean", dict: "table", tuple: "list of strings"}
    lines = ["| table | key | type | default | meaning |", "|---|---|---|---|---|"]
    for table, keys in config.KEYS.items():
        for key, info in keys.items():
            lines.append(f"| `[{table}]` | `{key}` | {words[info.type]} | `{_cell(toml_value(info.default))}` "
                         f"| {_cell(info.meaning)} |")
    for key, command in config.VERIFY_DEFAULT.items():
        lines.append(f"| `[verify]` | `{key}` (and any other key) | string | `{_cell(_toml(command))}` "
                     "| the check of each branch, base merged in: drover runs it before review and merge |")
    return "\n".join(lines)


def config_key_table(table: str) -> str:
    """One table's rows for docs/configuration.md (key, default, meaning), from config.KEYS."""
    from drover.config import KEYS
    from drover.cli.config_text import markdown_table

    return markdown_table(KEYS[table]).rstrip("\n")


def preset_table() -> str:
    """The agent presets, from presets.PRESETS; the running interpreter is shown as `<python>`."""
    from drover.agents.presets import PRESETS

    lines = ["| preset | argv | the prompt travels | install | checked against |", "|---|---|---|---|---|"]
    for name, preset in PRESETS.items():
        words = ["<python>" if word == sys.executable else (word or "''") for word in preset.argv]
        argv = f"`{' '.join(words)}`" if words else "`[agent] command`"
        hint = "<python>" if preset.install_hint == sys.executable else preset.install_hint
        lines.append(f"| `{name}` | {_cell(argv)} | {preset.prompt_via} | {_cell(hint)} | {_cell(preset.checked)} |")
    return "\n".join(lines)


def config_errors() -> str:
    """What drover prints for a broken drover.toml: a TOML syntax error, then one file's every problem."""
    from drover.config import load_config
    from drover.errors import ConfigError

    broken = {
        "syntax": "[project]\nprefix = \"D\"\n\n[review]\nmax_rounds = \n",
        "problems": ('prefix = "X"\n[review]\nmax_rouns = 2\nmax_rounds = "3"\n[revew]\nmax_rounds = 2\n'
                     '[agent.review]\npreset = "codx"\n'),
    }
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "drover.toml"
        for name, text in broken.items():
            path.write_text(text, encoding="utf-8")
            try:
                load_config(path)
            except ConfigError as exc:
                found = [f"drover: {line}" for line in exc.lines]
            else:
                raise AssertionError(f"{name}: drover.toml was accepted")
            if name == "syntax":
                found = [f"{line:<61}(TOML syntax, with its line)" for line in found]
            lines += found
    return "\n".join(["```", *lines, "```"])


def ledger_schema() -> str:
    """Each table's columns, from migrating a blank ledger in a temporary directory."""
    from drover.ledger.db import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        Ledger(path).close()
        db = sqlite3.connect(path)
        try:
            tables = [row[0] for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
            applied = [row[0] for row in db.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
            parts = ["Migrations applied, in order: " + ", ".join(f"`{name}`" for name in applied) + ".", ""]
            for table in tables:
                parts += [f"### `{table}`", "", "| column | type | not null | primary key |", "|---|---|---|---|"]
                for _, name, kind, notnull, _, pk in db.execute(f"PRAGMA table_info([{table}])"):
                    parts.append(f"| `{name}` | {kind or ''} | {'yes' if notnull else ''} | {pk or ''} |")
                parts.append("")
        finally:
            db.close()
    return "\n".join(parts).rstrip("\n")


def report_schema() -> str:
    """The JSON of `drover report --json`, one table per object, from drover/ledger/report.py's MEANINGS."""
    from typing import get_type_hints

    from drover.ledger import report

    parts = []
    for name, meanings in report.MEANINGS.items():
        hints = get_type_hints(report.ROW_TYPES[name])
        parts += ["", f"### `{name}`", "", "| field | type | meaning |", "|---|---|---|"]
        for field, meaning in meanings.items():
            parts.append(f"| `{field}` | {_cell(_json_type(hints[field]))} | {_cell(meaning)} |")
    return "\n".join(parts[1:])


def _json_type(hint: object) -> str:
    """A Python annotation as the JSON it becomes: string, integer, number, boolean, null, array of ..., object."""
    from typing import get_args, get_origin

    words = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}
    if hint in words:
        return words[hint]  # type: ignore[index]
    origin, args = get_origin(hint), get_args(hint)
    if origin is tuple:
        return f"array of {_json_type(args[0])}"
    if origin is dict:
        return f"object of {_json_type(args[1])}"
    if args:  # a union
        return " or ".join(_json_type(arg) for arg in args)
    return f"object (`{getattr(hint, '__name__', hint)}`)"
