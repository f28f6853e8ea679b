"""Every test gets its own real git repository, HOME and environment."""
from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Operator",
    "GIT_AUTHOR_EMAIL": "operator@example.invalid",
    "GIT_COMMITTER_NAME": "Test Operator",
    "GIT_COMMITTER_EMAIL": "operator@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def ledger_tables(path: Path) -> dict[str, list[tuple]]:
    """Every table of a SQLite file, its rows sorted: for before/after comparisons."""
    conn = sqlite3.connect(path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: sorted(conn.execute(f"SELECT * FROM [{name}]").fetchall(), key=repr) for name in names}
    finally:
        conn.close()


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch):
    """No test sees the developer's HOME, git config, colour settings or drover variables."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Operator\n\temail = operator@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
    )
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)
    for key in list(os.environ):
        if key.startswith("DROVER_") or key in ("NO_COLOR", "FORCE_COLOR"):
            monkeypatch.delenv(key, raising=False)
    yield


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A real git repository on branch main with one commit, as the working directory."""
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("# project\n")
    git(root, "add", "README.md")
    git(root, "commit", "-q", "-m", "initial")
    monkeypatch.chdir(root)
    return root
