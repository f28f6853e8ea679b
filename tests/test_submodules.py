"""A project with a git submodule (docs/worktrees.md, "A repository with submodules"): real git,
a real submodule made from a local repository, the scripted loop agent."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from helpers import AGENT, APPROVING, TESTS, configure, drover, git, new_item

SUBMODULE_AGENT = TESTS / "agents" / "submodule_agent.py"
SETUP = "git -c protocol.file.allow=always submodule update --init"

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
    # what init wrote, `git submodule update --init`, with git's leave to clone from a local path
    path = repo / "drover.toml"
    text = path.read_text()
    assert 'setup = "git submodule update --init"' in text
    path.write_text(text.replace('setup = "git submodule update --init"', f'setup = "{SETUP}"', 1))
    git(repo, "commit", "-qam", "the submodule's set-up")
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
    git(worktree / "lib", "checkout", "-q", commits[1])  # as its [run] setup checked it out
    git(worktree, "add", "lib")
    git(worktree, "commit", "-q", "-m", "D-1: bump the library")
    drover(repo, "review", "D-1", env=APPROVING, check=True)
    said = drover(repo, "finish", "D-1", check=True).stdout
    assert "the merge moved the submodule lib; this checkout's folder still holds the commit before: " \
           "`git submodule update` checks out the new one" in said, said
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


def _pooled(repo: Path, tmp_path: Path) -> list[str]:
    """_with_submodule (whose set-up checks the submodule out in each worktree), the submodule
    agent in every slot, `pool = 2`."""
    commits = _with_submodule(repo, tmp_path)
    path = repo / "drover.toml"
    text = path.read_text().replace(f"{sys.executable} {AGENT}", f"{sys.executable} {SUBMODULE_AGENT}")
    for key, value in (("pool", "2"),):
        text, count = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
        assert count == 1, key
    path.write_text(text)
    git(repo, "commit", "-qam", "a pool, the submodule set up")
    return commits


def test_a_pooled_worktree_hands_no_holder_what_the_last_one_left_in_a_submodule(repo, tmp_path, monkeypatch):
    """The pool's forced checkout and clean go into no submodule: an implementer's commit in the
    submodule `lib`, its edit and its untracked file there, were what the next item in that
    worktree found in `lib/` (and built and tested against), not the commit its branch records;
    docs/worktrees.md says nothing an item left survives outside `keep`. Each holder now finds the
    submodule as `[run] setup` checks it out afresh."""
    seen_file = tmp_path / "seen.jsonl"
    monkeypatch.setenv("SUBMODULE_SEEN", str(seen_file))
    commits = _pooled(repo, tmp_path)
    new_item(repo, "One thing")
    new_item(repo, "Another thing")

    done = drover(repo, "drive", "--finish", "--jobs", "1", "D-1", "D-2")

    assert done.returncode == 0, done.stdout + done.stderr
    seen = [json.loads(line) for line in seen_file.read_text().splitlines()]
    assert [row["item"] for row in seen] == ["D-1", "D-2"]
    for row in seen:  # each as the recorded commit has it, the one before's leftovers gone
        assert row == {"item": row["item"], "files": ["lib.h"], "head": commits[0], "lib.h": "// version 1\n"}, row
    rows = json.loads(drover(repo, "worktrees", "--json", check=True).stdout)
    assert len(rows["worktrees"]) == 1, rows  # D-2 took the worktree D-1 gave back


def _hidden_in_gitmodules(root: Path, worktree: Path) -> None:
    with open(worktree / ".gitmodules", "a") as gitmodules:
        gitmodules.write("\tignore = all\n")
    git(worktree, "add", ".gitmodules")


def _hidden_in_the_shared_config(root: Path, worktree: Path) -> None:
    git(worktree, "config", "submodule.lib.ignore", "all")  # the shared .git/config, any agent's to write


def _lib_moved_in_d1(repo: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """D-1 run once in a pool, then `lib` moved to the submodule's second commit and staged in its
    worktree (not committed): the worktree, and the submodule's commits."""
    commits = _pooled(repo, tmp_path)
    new_item(repo, "A thing")
    drover(repo, "run", "D-1", check=True)
    worktree = repo / ".drover" / "pool" / "w1"
    git(worktree / "lib", "reset", "-q", "--hard", commits[1])
    git(worktree / "lib", "clean", "-qfdx")
    git(worktree, "add", "lib")
    return worktree, commits


@pytest.mark.parametrize("hide", [_hidden_in_gitmodules, _hidden_in_the_shared_config])
def test_a_reviewer_sees_the_submodule_commit_the_branch_moved(repo, tmp_path, monkeypatch, hide):
    """An implementer moves the submodule `lib` to another commit (code nobody reviewed, the
    library's or its own fork's) and says `ignore = all` for it, in the branch's `.gitmodules` or in
    the shared `.git/config`: the reviewer's `git diff`, `git show` and `git log -p` showed nothing
    of the move (diff.ignoreSubmodules = none, which drover gives the reviewer's git, overrides
    neither), and finish merged it. The reviewer's git now shows it."""
    reviewed = tmp_path / "reviewed.txt"
    monkeypatch.setenv("SUBMODULE_REVIEWED", str(reviewed))
    monkeypatch.setenv("SUBMODULE_SEEN", str(tmp_path / "seen.jsonl"))
    worktree, commits = _lib_moved_in_d1(repo, tmp_path)
    hide(repo, worktree)
    git(worktree, "commit", "-q", "-m", "D-1: tidy the build")

    drover(repo, "review", "D-1", check=True)

    shown = reviewed.read_text()
    assert " lib " in shown and f"+Subproject commit {commits[1]}" in shown, shown


def test_a_review_is_refused_in_one_line_where_gitmodules_names_more_submodules_than_git_can_be_told_of(
        repo, tmp_path, monkeypatch):
    """The reviewer's git is told to show each submodule `.gitmodules` names, one pair of variables
    each: 9,000 names of 300 bytes (the branch's to write) passed the count's bound and made more
    environment than a process may have, and the review stopped on `could not start ...: Argument
    list too long` (hostile review 43). The bound counts bytes: the review is refused in drover's
    one line, naming the file."""
    monkeypatch.setenv("SUBMODULE_SEEN", str(tmp_path / "seen.jsonl"))
    worktree, _commits = _lib_moved_in_d1(repo, tmp_path)
    entries = "".join(f'[submodule "{index:05d}{"x" * 295}"]\n\tpath = lib\n\turl = ../x\n' for index in range(9000))
    (worktree / ".gitmodules").write_text((worktree / ".gitmodules").read_text() + entries)
    git(worktree, "add", ".gitmodules")
    git(worktree, "commit", "-q", "-m", "D-1: name the vendored parts")

    done = drover(repo, "review", "D-1")

    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert ".gitmodules names 9,001 submodules" in line and "no review runs there" in line, line
    assert "Argument list too long" not in done.stdout + done.stderr


def test_a_review_is_refused_where_the_worktree_hides_gitmodules_from_it(repo, tmp_path, monkeypatch):
    """The reviewer's git reads `.gitmodules` from the worktree, or, with none there, from the index:
    an implementer that staged one saying `ignore = all` and deleted the file, uncommitted, had the
    reviewer's git read the staged one. `.gitmodules` is compared with the commit, as
    `.gitattributes` is, and the review refused."""
    monkeypatch.setenv("SUBMODULE_SEEN", str(tmp_path / "seen.jsonl"))
    worktree, commits = _lib_moved_in_d1(repo, tmp_path)
    git(worktree, "commit", "-q", "-m", "D-1: tidy the build")
    _hidden_in_gitmodules(repo, worktree)
    (worktree / ".gitmodules").unlink()

    done = drover(repo, "review", "D-1")

    assert done.returncode == 1, done.stdout + done.stderr
    assert ".gitmodules" in done.stderr and "no review" not in done.stdout, done.stderr


def test_a_review_is_refused_where_only_the_index_holds_a_gitmodules_the_commit_has_not(repo, tmp_path):
    """Hostile review 43: in a repository without submodules, an implementer committed a gitlink
    (`vendor/lib`, any commit), then staged a `.gitmodules` mapping it with `ignore = all` and
    deleted the file. The commit has no `.gitmodules` and the disk none, so the comparison with
    the commit found nothing, and the reviewer's git read the index's: its `git diff`, `git show`
    and `git log -p` showed nothing of the gitlink, and drover named no submodule to show. The
    index's `.gitmodules` is compared with the commit, as the attributes files' are."""
    configure(repo)
    new_item(repo, "A thing")
    drover(repo, "run", "D-1", check=True)
    worktree = repo / ".drover" / "worktrees" / "D-1"
    assert worktree.is_dir()
    lib, commits = _library(tmp_path)
    git(worktree, "update-index", "--add", "--cacheinfo", f"160000,{commits[1]},vendor/lib")
    git(worktree, "commit", "-q", "-m", "D-1: tidy the build")
    (worktree / ".gitmodules").write_text('[submodule "lib"]\n\tpath = vendor/lib\n\tignore = all\n')
    git(worktree, "add", ".gitmodules")
    (worktree / ".gitmodules").unlink()
    # what the reviewer's git would show: nothing of the gitlink
    assert "vendor/lib" not in git(worktree, "diff", "--stat", "main...HEAD")

    done = drover(repo, "review", "D-1")

    assert done.returncode == 1, done.stdout + done.stderr
    assert ".gitmodules" in done.stderr, done.stderr
    rounds = json.loads(drover(repo, "show", "D-1", "--json", check=True).stdout)
    assert rounds["state"] != "approved", rounds["state"]
