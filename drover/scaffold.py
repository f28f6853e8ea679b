"""`drover init`: the files a project starts with."""
from __future__ import annotations

import tomllib
from pathlib import Path

from . import git
from .config import CONFIG_FILE, default_config_text, load_config, parse_config
from .errors import UsageError
from .items import write_atomic
from .project import STATE_DIR, check_state, find_root, trusted_stat

IGNORE_LINE = f"{STATE_DIR}/"


def init_project(start: Path) -> list[str]:
    """Create drover.toml (unless present), the items folder, .drover/ and its ignore line."""
    root = find_root(start)  # refuses outside git
    said = []
    config_path = root / CONFIG_FILE
    trusted_stat(root, root)
    fresh = trusted_stat(config_path, root) is None
    text = config_text_for(root) if fresh else ""
    config = parse_config(tomllib.loads(text)) if fresh else load_config(config_path)
    items = root / config.items
    check_state(root, config.items)
    # refuse before writing anything: a failed init leaves the checkout as it was
    for path, what in ((items, config.items), (root / STATE_DIR, STATE_DIR)):
        if path.exists() and not path.is_dir():
            raise UsageError(f"{what} exists and is not a folder: move it aside first")
    if fresh:
        write_atomic(config_path, text)
        said.append(f"wrote {CONFIG_FILE} (base branch: {config.base})")
    else:
        said.append(f"{CONFIG_FILE} already exists; left as it is")
    if not items.is_dir():
        items.mkdir(parents=True)
        said.append(f"created {config.items}/")
    (root / STATE_DIR).mkdir(exist_ok=True)
    ledger_path = root / STATE_DIR / "ledger.db"
    if not ledger_path.exists():
        # created here, migrated, so no later command (least of all a failing one) creates it
        from .ledger import Ledger

        Ledger(ledger_path).close()
        said.append(f"created {STATE_DIR}/ledger.db")
    gitignore = root / ".gitignore"
    existing = gitignore.read_bytes().decode("utf-8") if gitignore.exists() else ""
    ignored = {line.strip().strip("/") for line in existing.splitlines()}
    if STATE_DIR not in ignored:
        text = existing + ("" if not existing or existing.endswith("\n") else "\n") + IGNORE_LINE + "\n"
        write_atomic(gitignore, text)
        said.append(f"added {IGNORE_LINE} to .gitignore")
    return said + next_steps(config.prefix)


def config_text_for(root: Path) -> str:
    """The commented drover.toml, its `base` set to the branch this repository works from."""
    return default_config_text(base=git.detect_base(root))


def next_steps(prefix: str) -> list[str]:
    """What a person does after init, in order."""
    return [
        "",
        "next steps:",
        f"  git add {CONFIG_FILE} .gitignore && git commit -m 'Set up drover'",
        '  drover new "What the first item should do"',
        f"  drover draft {prefix}-1          # or write its requirements yourself",
        f"  drover run --dry-run {prefix}-1  # see the prompt and the launch, change nothing",
        "  drover help configuration   # every key of drover.toml explained",
    ]
