"""The words around drover.toml's keys: the commented file `init` writes and the reference tables
of docs/configuration.md, both rendered from the key definitions in config.py."""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from drover.config import KEYS, VERIFY_DEFAULT, KeyInfo

HEADER = (
    "# drover configuration. Every key below shows its default but three, which `drover init` chose\n"
    "# for this repository: [run] base, [run] setup and [verify] default (\"make test\" when left out).\n"
    "# Keep those; delete what you do not change. Reference: run `drover help configuration`\n"
)
# The header when init chose the set-up's inputs too (a lockfile it found): four keys, each named.
HEADER_WITH_INPUTS = (
    "# drover configuration. Every key below shows its default but four, which `drover init` chose\n"
    "# for this repository: [run] base, [run] setup, [run] setup_inputs and [verify] default\n"
    "# (\"make test\" when left out). Keep those; delete what you do not change.\n"
    "# Reference: run `drover help configuration`\n"
)
# A comment beside a table's header line, and commented examples after its keys.
TABLE_NOTES = {
    "agent": "applies to every slot unless [agent.<slot>] overrides it",
    "prompts": "override files, one per slot, paths inside this repository",
    "verify": "the check of each branch, base merged in: drover runs it before review and merge",
}
EXAMPLES = {
    "agent": ("", "# [agent.review]          # a different agent for one slot (implement, review or draft)",
              '# preset = "codex"', "",
              "# [agent.fallback]        # takes a failed slot under a [retry] policy of fallback (drover help failures)",
              '# preset = "codex"'),
    "verify": ('# migration = "make test && make migrate-check"   # chosen when an item sets `migration: yes`',),
}
COLUMN = 26  # where the comments start, so the values read as a column


def toml_key(word: str) -> str:
    return word if re.fullmatch(r"[A-Za-z0-9_-]+", word) else json.dumps(word, ensure_ascii=False)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{toml_key(name)} = {toml_value(item)}" for name, item in value.items()) + " }"
    if isinstance(value, tuple):
        return json.dumps(list(value), ensure_ascii=False)  # a JSON array of strings is a TOML array
    return json.dumps(value, ensure_ascii=False)  # a TOML basic string is a JSON string for these values


def _line(assignment: str, comment: str) -> str:
    if not comment:
        return assignment
    return f"{assignment:<{COLUMN - 1}} # {comment}" if len(assignment) < COLUMN - 1 else f"{assignment}   # {comment}"


def _comment(info: KeyInfo) -> str:
    if info.choices:
        return f"{' | '.join(info.choices)}: {info.meaning}"
    return info.meaning


def render_config(keys: Mapping[str, Mapping[str, Any]], verify: Mapping[str, str], *, base: str = "main",
                  setup: str = "", setup_inputs: tuple[str, ...] = (), preset: str = "",
                  notes: Mapping[tuple[str, str], str] | None = None) -> str:
    """The commented drover.toml: every table, every key at its default (`base`, `setup`,
    `setup_inputs` and `[agent] preset` as given), its meaning beside it (or the note `notes` gives
    for it, by (table, key): what init found in the repository)."""
    notes = notes or {}
    given = {("run", "base"): base, **({("run", "setup"): setup} if setup else {}),
             **({("run", "setup_inputs"): setup_inputs} if setup_inputs else {}),
             **({("agent", "preset"): preset} if preset else {})}
    blocks = [HEADER_WITH_INPUTS if setup_inputs else HEADER]
    tables = list(keys)
    # [verify] is an open table, not declared key by key; it sits before [review] as it always has
    tables.insert(tables.index("review") if "review" in tables else len(tables), "verify")
    for table in tables:
        lines = [_line(f"[{table}]", TABLE_NOTES.get(table, ""))]
        if table == "verify":
            lines += [_line(f"{name} = {toml_value(command)}", notes.get((table, name), ""))
                      for name, command in verify.items()]
        else:
            for name, info in keys[table].items():
                if isinstance(info.default, dict):
                    continue  # a table of its own, below
                value = given.get((table, name), info.default)
                lines.append(_line(f"{name} = {toml_value(value)}", notes.get((table, name)) or _comment(info)))
        lines += EXAMPLES.get(table, ())
        for name, info in keys.get(table, {}).items():
            if isinstance(info.default, dict):
                lines += ["", _line(f"[{table}.{name}]", _comment(info))]
                lines += [f"{toml_key(word)} = {toml_value(meaning)}" for word, meaning in info.default.items()]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def markdown_table(keys: Mapping[str, Any]) -> str:
    """One table's reference rows for docs/configuration.md."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for name, info in keys.items():
        meaning = info.meaning + (f" (one of {', '.join(f'`{choice}`' for choice in info.choices)})"
                                  if info.choices else "")
        default = toml_value(info.default).replace("|", "\\|")
        rows.append(f"| `{name}` | `{default}` | {meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    # `python -m drover.cli.config_text`: the tables to paste into docs/configuration.md

    for table_name, table_keys in KEYS.items():
        print(f"## [{table_name}]\n\n{markdown_table(table_keys)}")


def default_config_text(base: str = "main", verify: dict[str, str] | None = None,
                        notes: dict[tuple[str, str], str] | None = None, setup: str = "",
                        setup_inputs: tuple[str, ...] = (), preset: str = "") -> str:
    """The commented drover.toml `drover init` writes, every key at its default (base, `[run]
    setup`, `[run] setup_inputs`, `[agent] preset` and the verify commands as given); `notes`:
    comments for keys, by (table, key), in place of their meaning."""
    return render_config(KEYS, VERIFY_DEFAULT if verify is None else verify, base=base, setup=setup,
                         setup_inputs=setup_inputs, preset=preset, notes=notes or {})
