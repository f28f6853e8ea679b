"""The tests' own helpers (tests/helpers.py), where a fault would pass a test that should fail."""
from __future__ import annotations

import shutil
from pathlib import Path

import helpers
from helpers import git, made_once


def _fresh_copy(repo_template: Path, root: Path) -> Path:
    """Another repository as the `repo` fixture hands one out, in the same test."""
    shutil.copytree(repo_template, root, symlinks=True)
    helpers.FRESH[root] = (helpers.files_state(root), ())
    return root


def test_made_once_hands_each_copy_its_own_value(repo, repo_template, tmp_path):
    """A set-up's value (test_failures' project returns its item ids as a list) is kept with its
    copy: a test that changed the list it was given changed what every later test of the process
    was given from that copy."""
    def make() -> list[str]:
        (Path.cwd() / "made.txt").write_text("made\n")
        return ["D-1"]

    first = made_once(repo, ("test_helpers", "value"), make)
    first.append("D-2")
    second = made_once(_fresh_copy(repo_template, tmp_path / "second"), ("test_helpers", "value"), make)
    assert second == ["D-1"] and (tmp_path / "second" / "made.txt").read_text() == "made\n"
    second.append("D-3")
    third = made_once(_fresh_copy(repo_template, tmp_path / "third"), ("test_helpers", "value"), make)
    assert third == ["D-1"]


def test_made_once_copies_a_set_up_with_a_worktree_and_points_its_links_at_the_copy(repo, repo_template, tmp_path):
    """A drive's set-up leaves a worktree, whose links (its `.git` file, the repository's
    .git/worktrees/<name>/gitdir) name the folder it was made in: the copy is kept all the same,
    and each copy's links name the copy's folder, so git finds the worktree where it is."""
    made = []

    def make(root: Path) -> str:
        made.append(root)
        git(root, "worktree", "add", "-q", "-b", "side", str(root / ".drover" / "wt"))
        return "value"

    assert made_once(repo, ("test_helpers", "worktree"), lambda: make(repo)) == "value"
    second = _fresh_copy(repo_template, tmp_path / "second")
    assert made_once(second, ("test_helpers", "worktree"), lambda: make(second)) == "value"
    assert made == [repo]  # copied, not made again
    worktree = second / ".drover" / "wt"
    assert (worktree / ".git").read_text() == f"gitdir: {second}/.git/worktrees/wt\n"
    assert git(worktree, "rev-parse", "--show-toplevel").strip() == str(worktree)
    assert git(worktree, "status", "--porcelain") == ""
    assert f"{worktree} " in git(second, "worktree", "list")
    assert str(repo) not in git(second, "worktree", "list")
    # the first repository's worktree is its own still
    assert git(repo / ".drover" / "wt", "rev-parse", "--show-toplevel").strip() == str(repo / ".drover" / "wt")
