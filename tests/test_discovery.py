"""The main checkout is the one git finds: find_root asks git, and honours what git honours."""
from __future__ import annotations

import os

import pytest

from drover.errors import ConfigError, UsageError
from drover.ledger.project import find_root
from helpers import git


def test_a_main_checkout_and_its_subfolders_are_found(repo):
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    for start in (repo, repo / "src", deep):
        assert find_root(start) == repo
    # a nested repository is the nearer one, for git and here
    inner = repo / "vendor" / "lib"
    inner.mkdir(parents=True)
    git(inner, "init", "-q", "-b", "main")
    assert find_root(inner) == inner


def test_worktrees_gitdir_files_and_broken_git_folders_lead_where_git_leads(repo, tmp_path):
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    sub = repo / "sub"
    (sub / ".git").mkdir(parents=True)  # a .git folder that holds no repository: git walks on past it
    linked = repo / "linked"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {repo / '.git'}\n")  # a .git file, as a submodule has
    assert find_root(tmp_path / "wt") == repo  # git's common directory: the main checkout
    assert find_root(sub) == repo
    assert find_root(linked) == repo
    assert find_root(repo / ".git" / "refs") == repo
    with pytest.raises(UsageError, match="is not inside a git repository"):
        find_root(tmp_path.parent)


def test_git_s_own_variables_choose_the_repository(repo, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert find_root(repo) == other
    monkeypatch.delenv("GIT_DIR")
    (repo / "sub").mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repo))  # git stops below the checkout
    with pytest.raises(UsageError, match="is not inside a git repository"):
        find_root(repo / "sub")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs uid 0")
def test_a_repository_another_user_owns_is_refused_as_git_refuses_it(repo, monkeypatch):
    monkeypatch.delenv("SUDO_UID", raising=False)
    os.chown(repo / ".git", 4242, 4242)
    os.chown(repo, 4242, 4242)
    with pytest.raises(ConfigError, match="owned by another user"):
        find_root(repo)
