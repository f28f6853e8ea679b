"""Every test gets its own real git repository, HOME and environment."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# re-exported: older tests import these from conftest; new ones import from helpers
from helpers import FAKE_GH, FakeGh, git, ledger_tables  # noqa: F401

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Operator",
    "GIT_AUTHOR_EMAIL": "operator@example.invalid",
    "GIT_COMMITTER_NAME": "Test Operator",
    "GIT_COMMITTER_EMAIL": "operator@example.invalid",
}


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


@pytest.fixture
def gh(repo, tmp_path, monkeypatch) -> FakeGh:
    """The fake gh first on PATH, answering from an empty canned directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a copy with the execute bit set, whatever the checkout did to the file's mode
    shutil.copy(FAKE_GH, bin_dir / "gh")
    (bin_dir / "gh").chmod(0o755)
    data = tmp_path / "gh-data"
    data.mkdir()
    log = tmp_path / "gh-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_DATA", str(data))
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    return FakeGh(data, log)
