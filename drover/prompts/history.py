"""The shipped history: the text of every default each block has had, keyed by its base hash.

`--diff` shows what changed since an override's base and `--update` merges from it, so the file
keeps texts, not only hashes. Run `python -m drover.prompts.history --record` (`make history`)
after editing a default in builtin_templates/; a test fails when today's default is missing.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from drover.prompts.resources import builtin_dir
from drover.vocabulary import SLOTS
from drover.prompts.env import base_hash, builtin_blocks, normalise

HISTORY_FILE = "history.json"


def history_path() -> Path:
    return Path(builtin_dir()) / HISTORY_FILE


def load_history(path: Path | None = None) -> dict[str, dict[str, str]]:
    """"slot/block" -> {hash: default text} for every default each block has had."""
    path = path or history_path()
    if not path.is_file():
        return {}
    loaded: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def current_defaults() -> dict[str, tuple[str, str]]:
    """"slot/block" -> (hash, normalised text) for today's non-empty defaults."""
    defaults = {}
    for slot in SLOTS:
        for name, source in builtin_blocks(slot).items():
            if normalise(source):
                defaults[f"{slot}/{name}"] = (base_hash(source), normalise(source))
    return defaults


def missing_history() -> list[str]:
    """Today's defaults the history file does not hold, as 'slot/block hash'."""
    history = load_history()
    return [f"{key} {digest}" for key, (digest, _) in current_defaults().items() if digest not in history.get(key, {})]


def history_problems() -> list[str]:
    """Entries whose text is missing or does not hash to its key (the merge would trust them)."""
    problems = []
    for key, texts in load_history().items():
        for digest, text in texts.items():
            if not isinstance(text, str) or not text.strip():
                problems.append(f"{key} {digest}: no text")
            elif base_hash(text) != digest:
                problems.append(f"{key} {digest}: its text hashes to {base_hash(text)}")
    return problems


def record_history(path: Path | None = None) -> list[str]:
    """Add today's defaults to the history file; return what was added."""
    path = path or history_path()
    history = load_history(path)
    added = []
    for key, (digest, source) in current_defaults().items():
        if digest not in history.setdefault(key, {}):
            history[key][digest] = source
            added.append(f"{key} {digest}")
    path.write_text(json.dumps(history, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return added


def main(argv: list[str] | None = None) -> int:
    """`python -m drover.prompts.history --record`: add today's block defaults to the history."""
    args = sys.argv[1:] if argv is None else argv
    if args not in (["--record"], ["--check"]):
        print("usage: python -m drover.prompts.history --record | --check", file=sys.stderr)
        return 2
    if args == ["--check"]:
        problems = [f"missing {line}" for line in missing_history()] + history_problems()
        for line in problems:
            print(line)
        return 1 if problems else 0
    added = record_history()
    for line in added:
        print(f"recorded {line}")
    if not added:
        print("history already holds every current default")
    return 0


if __name__ == "__main__":
    sys.exit(main())
