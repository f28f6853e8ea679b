"""[project] commit_items under contention and kills: each write of an item file is one commit of
that file alone, made under the writers' lock, with a true message; the operator's index keeps
what the operator staged and never holds drover's files staged (SPEC 17, docs/reliability.md)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from drover.ledger.db import Ledger
from helpers import BIN, assert_each_write_committed, git, run

# One writer: its own item, a sequence that always succeeds (every step has something to do),
# plus a claimed audit of the first item, which every writer shares; prints each exit status.
WRITER = r'''
import subprocess, sys
drover, me, laps = sys.argv[1], sys.argv[2], int(sys.argv[3])
item = f"D-{me}"
for n in range(laps):
    for argv, stdin in (
        (["request-changes", item], f"## writer {me} lap {n}\nfix {me}.{n}\n"),
        (["close-changes", item, "--note", f"w{me} {n}"], None),
        (["request-changes", item, "--file", "-"], f"## again {me}.{n}\n"),
        (["audit", item, "--level", "reviewed", "--by", f"w{me}"], None),
        (["audit", "D-1", "--level", "claimed", "--by", f"w{me}"], None),
        (["new", f"writer {me} lap {n}"], None),
    ):
        done = subprocess.run([drover, *argv], input=stdin, text=True, capture_output=True)
        print(done.returncode, *argv[:2], repr(done.stderr.strip()), flush=True)
'''

# Every writer asks for changes on the same item: each round's commit must carry its own findings.
SAME_ITEM = r'''
import subprocess, sys
drover, me, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for n in range(count):
    done = subprocess.run([drover, "request-changes", "D-1"], input=f"## from {me}, number {n}\n",
                          text=True, capture_output=True)
    print(done.returncode, "request-changes", repr(done.stderr.strip()), flush=True)
'''


def _project(repo: Path, items: int) -> tuple[str, str]:
    """init, `items` items, commit_items on, all committed; then the operator's own work: a file
    staged and one modified. Returns (the base commit, the operator's index before any write)."""
    assert run(repo, "init").returncode == 0
    _set(repo, "max_rounds", "50")
    for n in range(items):
        assert run(repo, "new", f"seed {n}").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")
    _set(repo, "commit_items", "true")
    git(repo, "commit", "-q", "-am", "commit_items")
    (repo / "staged.txt").write_text("the operator's staged work\n")
    git(repo, "add", "staged.txt")
    (repo / "README.md").write_text("# project\nunstaged work\n")
    return git(repo, "rev-parse", "HEAD").strip(), _operator_index(repo)


def _set(repo: Path, key: str, value: str) -> None:
    """Set a key of the drover.toml `init` wrote, on the line that holds its default."""
    path = repo / "drover.toml"
    lines = [f"{key} = {value}" if line.split("=")[0].strip() == key else line
             for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")


def _operator_index(repo: Path) -> str:
    """What the operator has staged, and its blobs."""
    return git(repo, "diff", "--cached", "--raw", "--no-abbrev")


def _race(repo: Path, tmp_path: Path, script: str, writers: int, count: int) -> list[str]:
    """Run `writers` copies of `script` at once; every line they printed."""
    path = tmp_path / "writer.py"
    path.write_text(script)
    procs = [subprocess.Popen([sys.executable, str(path), str(BIN / "drover"), str(me), str(count)],
                              cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for me in range(1, writers + 1)]
    return [line for proc in procs for line in proc.communicate(timeout=600)[0].splitlines()]


def _operator_work_kept(repo: Path, staged: str) -> None:
    assert _operator_index(repo) == staged
    status = git(repo, "status", "--porcelain").splitlines()
    assert sorted(status) == [" M README.md", "A  staged.txt"], status


@pytest.mark.slow
def test_three_concurrent_writers_never_fail_and_each_write_is_its_own_commit(repo, tmp_path):
    base, staged = _project(repo, 3)
    said = _race(repo, tmp_path, WRITER, 3, 3)
    assert len(said) == 3 * 3 * 6
    assert [line for line in said if not line.startswith("0 ")] == []
    # per lap: two rounds asked, two cleared (close-changes, the reviewed audit), one new item
    assert assert_each_write_committed(repo, base, seeded=3) == 3 * 3 * 5
    _operator_work_kept(repo, staged)


def test_concurrent_requests_on_one_item_each_commit_their_own_findings(repo, tmp_path):
    base, staged = _project(repo, 1)
    said = _race(repo, tmp_path, SAME_ITEM, 3, 5)
    assert [line for line in said if not line.startswith("0 ")] == []
    assert assert_each_write_committed(repo, base, seeded=1) == 15
    messages = git(repo, "log", "--format=%s", f"{base}..HEAD").splitlines()
    assert sorted(messages) == sorted(f"drover: changes requested on D-1 (round {n})" for n in range(1, 16))
    _operator_work_kept(repo, staged)


def test_a_git_failure_after_the_write_is_a_warning_and_the_next_write_commits_it(repo):
    base, staged = _project(repo, 1)
    no_name = {"GIT_AUTHOR_NAME": "", "GIT_COMMITTER_NAME": ""}  # git refuses to commit
    done = run(repo, "request-changes", "D-1", stdin="## the finding\n", env=no_name)
    # the round is recorded: exit 0, so an agent does not ask again and spend a second round
    assert done.returncode == 0, done.stderr
    assert "round 1 of 50 recorded" in done.stdout
    assert done.stderr.startswith("drover: warning: items/D-1.md: the edit is made and recorded but not committed")
    assert "git commit-tree" in done.stderr and len(done.stderr.splitlines()) == 1
    assert git(repo, "rev-parse", "HEAD").strip() == base
    assert " M items/D-1.md" in git(repo, "status", "--porcelain")  # modified, not staged
    assert run(repo, "list").returncode == 0  # a read does not try again
    assert git(repo, "rev-parse", "HEAD").strip() == base
    checked = run(repo, "check")
    assert checked.returncode == 1
    assert ("items/D-1.md: the commit `drover: changes requested on D-1 (round 1)` is owed ([project] "
            "commit_items) and git refused it: git commit-tree: ") in checked.stdout + checked.stderr
    done = run(repo, "close-changes", "D-1")
    assert done.returncode == 0 and done.stderr == ""
    assert assert_each_write_committed(repo, base, seeded=1) == 2
    assert git(repo, "log", "--format=%s", "-2").splitlines() == [
        "drover: changes on D-1 cleared (round 1)", "drover: changes requested on D-1 (round 1)"]
    _operator_work_kept(repo, staged)


@pytest.mark.parametrize("point", ["committed", "renamed", "git-committed"])
def test_a_write_killed_before_its_commit_is_committed_by_the_next_command(repo, point):
    base, staged = _project(repo, 1)
    killed = run(repo, "request-changes", "D-1", stdin="## the finding\n", env={"DROVER_FAILPOINT": point}, process=True)
    assert killed.returncode == -9
    assert run(repo, "list").returncode == 0  # any command that opens the ledger finishes it
    assert assert_each_write_committed(repo, base, seeded=1) == 1
    _operator_work_kept(repo, staged)


def test_a_commit_holds_the_text_the_write_made_even_when_the_file_changed_before_recovery(repo):
    base, staged = _project(repo, 1)
    killed = run(repo, "request-changes", "D-1", stdin="## first\n", env={"DROVER_FAILPOINT": "renamed"}, process=True)
    assert killed.returncode == -9
    # the next write of the same item takes the lock: it commits the killed write's text first
    assert run(repo, "request-changes", "D-1", stdin="## second\n").returncode == 0
    assert assert_each_write_committed(repo, base, seeded=1) == 2
    _operator_work_kept(repo, staged)


def test_a_hand_edit_that_recovery_keeps_drops_the_commit_of_the_text_it_replaced(repo):
    base, staged = _project(repo, 1)
    killed = run(repo, "request-changes", "D-1", stdin="## the finding\n", env={"DROVER_FAILPOINT": "committed"}, process=True)
    assert killed.returncode == -9
    item = repo / "items" / "D-1.md"
    item.write_text(item.read_text() + "\nthe operator's own line\n")
    assert run(repo, "list").returncode == 0
    assert git(repo, "rev-parse", "HEAD").strip() == base  # no commit claims text the file never held
    with Ledger(repo / ".drover" / "ledger.db") as ledger:
        assert ledger.owed_commits() == []
    assert " M items/D-1.md" in git(repo, "status", "--porcelain")
    assert _operator_index(repo) == staged
