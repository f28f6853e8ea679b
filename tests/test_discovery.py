"""The main checkout found without running git is the one git finds, or git is asked."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from drover.ledger import project as projects
from drover.ledger.project import find_root, main_checkout
from helpers import git


def by_git(start: Path, monkeypatch) -> Path:
    """find_root as it was before main_checkout: git's common directory, asked every time."""
    with monkeypatch.context() as patched:
        patched.setattr(projects, "main_checkout", lambda start: None)
        return find_root(start)


def test_a_main_checkout_and_its_subfolders_are_found_without_git(repo, monkeypatch):
    deep = repo / "src" / "pkg"
    deep.mkdir(parents=True)
    for start in (repo, repo / "src", deep):
        assert main_checkout(str(start)) == str(repo)
        assert find_root(start) == by_git(start, monkeypatch) == repo
    # a nested repository is the nearer one, for git and here
    inner = repo / "vendor" / "lib"
    inner.mkdir(parents=True)
    git(inner, "init", "-q", "-b", "main")
    assert main_checkout(str(inner)) == str(inner)
    assert find_root(inner) == by_git(inner, monkeypatch) == inner


def test_whatever_else_is_left_to_git(repo, monkeypatch, tmp_path):
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    sub = repo / "sub"
    (sub / ".git").mkdir(parents=True)  # a .git folder that holds no repository
    linked = repo / "linked"
    linked.mkdir()
    (linked / ".git").write_text(f"gitdir: {repo / '.git'}\n")  # a .git file, as a submodule has
    cases = {
        "a worktree": tmp_path / "wt",
        "a .git holding no repository": sub,
        "a .git file": linked,
        "inside .git": repo / ".git" / "refs",
        "no repository above": tmp_path.parent,
    }
    for said, start in cases.items():
        assert main_checkout(str(start)) is None, said
    assert find_root(tmp_path / "wt") == repo  # git's common directory: the main checkout
    assert find_root(sub) == by_git(sub, monkeypatch) == repo
    for name in projects.GIT_DISCOVERY:
        with monkeypatch.context() as patched:
            patched.setenv(name, str(repo / ".git"))
            assert main_checkout(str(repo)) is None, name


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs uid 0")
def test_a_repository_another_user_owns_is_left_to_git(repo):
    os.chown(repo / ".git", 4242, 4242)
    assert main_checkout(str(repo)) is None
    os.chown(repo / ".git", 0, 0)
    os.chown(repo, 4242, 4242)
    assert main_checkout(str(repo)) is None
