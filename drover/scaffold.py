"""`drover init`: the files a project starts with."""
from __future__ import annotations

from pathlib import Path

from .config import CONFIG_FILE, default_config_text, load_config
from .items import write_atomic
from .project import STATE_DIR, find_root

IGNORE_LINE = f"{STATE_DIR}/"


def init_project(start: Path) -> list[str]:
    """Create drover.toml (unless present), the items folder, .drover/ and its ignore line."""
    root = find_root(start)
    said = []
    config_path = root / CONFIG_FILE
    if config_path.exists():
        config = load_config(config_path)
        said.append(f"{CONFIG_FILE} already exists; left as it is")
    else:
        write_atomic(config_path, default_config_text())
        config = load_config(config_path)
        said.append(f"wrote {CONFIG_FILE}")
    items = root / config.items
    if not items.is_dir():
        items.mkdir(parents=True)
        said.append(f"created {config.items}/")
    (root / STATE_DIR).mkdir(exist_ok=True)
    gitignore = root / ".gitignore"
    existing = gitignore.read_text(encoding="utf-8") if gitignore.exists() else ""
    if IGNORE_LINE not in existing.splitlines() and STATE_DIR not in existing.splitlines():
        text = existing + ("" if not existing or existing.endswith("\n") else "\n") + IGNORE_LINE + "\n"
        write_atomic(gitignore, text)
        said.append(f"added {IGNORE_LINE} to .gitignore")
    return said
