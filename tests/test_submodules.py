"""A project with a git submodule (docs/worktrees.md, "A repository with submodules"): real git,
a real submodule made from a local repository, the scripted loop agent."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import APPROVING, configure, drover, git, new_item

FILE_PROTOCOL = ("-c", "protocol.file.allow=always")


def _library(tmp_path: Path) -> tuple[Path, list[str]]:
    """A repository of its own (the vendored library) with two commits; its path and the commits."""
    lib = tmp_path / "vendored"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "trunk")
    commits = []
    for number in (1, 2):
        (lib / "lib.h").write_text(f"// version {number}\n")
        git(lib, "add", "lib.h")
        git(lib, "commit", "-q", "-m", f"version {number}")
        commits.append(git(lib, "rev-parse", "HEAD").strip())
    return lib, commits


def _with_submodule(repo: Path, tmp_path: Path) -> list[str]:
    """`lib`, a submodule at the library's first commit, committed on main and checked out in the
    main checkout, as a clone after `git submodule update --init` has it; the library's commits."""
    lib, commits = _library(tmp_path)
    git(repo, *FILE_PROTOCOL, "submodule", "add", "-q", str(lib), "lib")
    git(repo / "lib", "checkout", "-q", commits[0])
    git(repo, "add", "lib")
    git(repo, "commit", "-q", "-m", "vendor the library")
    configure(repo)
    return commits


def _approved(root: Path, item_id: str) -> dict:
    drover(root, "run", item_id, env=APPROVING, check=True)
    drover(root, "review", item_id, env=APPROVING, check=True)
    shown = json.loads(drover(root, "show", item_id, "--json", check=True).stdout)
    assert shown["state"] == "approved", shown["state"]
    return shown


def test_a_finish_that_moved_a_submodule_stops_no_later_finish(repo, tmp_path):
    """A cmake project vendoring pybind11 as a submodule: an item that bumps it (a new commit
    recorded for `lib`) merged, and the main checkout's `lib` stayed at the old commit, as git
    leaves a submodule's folder without recursion. `git status` names `lib` as changed, and every
    later finish of the overnight drive was refused: `the checkout ... has uncommitted changes:
    lib (changed)`. A submodule's own checkout is nothing drover's merge writes or could lose."""
    commits = _with_submodule(repo, tmp_path)
    new_item(repo, "Bump the library")
    new_item(repo, "Another thing")
    drover(repo, "run", "D-1", env=APPROVING, check=True)
    worktree = repo / ".drover" / "worktrees" / "D-1"
    git(worktree, "update-index", "--cacheinfo", f"160000,{commits[1]},lib")
    git(worktree, "commit", "-q", "-m", "D-1: bump the library")
    drover(repo, "review", "D-1", env=APPROVING, check=True)
    drover(repo, "finish", "D-1", check=True)
    assert git(repo, "ls-tree", "HEAD", "lib").split()[2] == commits[1]
    assert git(repo, "status", "--porcelain") == " M lib\n"  # the folder is still at the old commit
    _approved(repo, "D-2")

    done = drover(repo, "finish", "D-2")

    assert done.returncode == 0, done.stdout + done.stderr
    assert "merged drover/d-2" in done.stdout
    assert git(repo / "lib", "rev-parse", "HEAD").strip() == commits[0]  # drover went into no submodule


def test_a_staged_submodule_commit_still_refuses_a_finish(repo, tmp_path):
    """The operator's own staged move of the submodule is an uncommitted change like any other."""
    commits = _with_submodule(repo, tmp_path)
    new_item(repo, "Another thing")
    _approved(repo, "D-1")
    git(repo, "update-index", "--cacheinfo", f"160000,{commits[1]},lib")

    done = drover(repo, "finish", "D-1")

    assert done.returncode == 1 and "lib (changed)" in done.stderr, done.stdout + done.stderr


@pytest.mark.parametrize("inside", ["edited", "untracked"])
def test_what_the_operator_left_inside_a_submodule_stops_no_finish(repo, tmp_path, inside):
    """An edit or a build file inside the submodule's folder (`git status`: `lib (modified
    content)`, `(untracked content)`): drover's merge writes nothing there, and it is left as it was."""
    _with_submodule(repo, tmp_path)
    new_item(repo, "Another thing")
    _approved(repo, "D-1")
    mine = repo / "lib" / ("lib.h" if inside == "edited" else "build.o")
    mine.write_text("the operator's own\n")

    done = drover(repo, "finish", "D-1")

    assert done.returncode == 0, done.stdout + done.stderr
    assert mine.read_text() == "the operator's own\n"

