"""A link that leads to itself, in place of a file drover reads (hostile review 30): an agent with a
shell makes one in a second (`ln -s D-2.md items/D-2.md`). The file is unreadable, said in one line;
every other item goes on. Python's `Path.resolve()` raised on such a link (RuntimeError up to 3.12),
so drover asks `os.path.realpath`, which does not."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import configure, drover, git, made_once, new_item

LOOP = "Too many levels of symbolic links"


@pytest.fixture
def project(repo):
    """drover set up with the scripted agent, D-1 readable and D-2 a link to itself
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_link_loops",), lambda: _project(repo))
    return repo


def _project(repo: Path) -> None:
    configure(repo)
    new_item(repo, "Readable")
    new_item(repo, "Soon a loop")
    (repo / "items" / "D-2.md").unlink()
    (repo / "items" / "D-2.md").symlink_to("D-2.md")


def test_list_and_check_show_the_loop_as_one_unreadable_item_and_every_other_item(project):
    listed = drover(project, "list")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["D-1", "D-2"]
    assert lines[1].split()[1] == "unreadable" and f"cannot read: {LOOP}" in lines[1]
    assert "/" + str(project).lstrip("/") not in listed.stdout  # the reason names no absolute path
    checked = drover(project, "check")
    assert checked.returncode == 1
    assert f"items/D-2.md: D-2 will not parse (cannot read: {LOOP})" in checked.stdout
    shown = drover(project, "show", "D-2")
    assert shown.returncode == 0 and "state: unreadable" in shown.stdout
    assert drover(project, "show", "D-1").returncode == 0


@pytest.mark.parametrize("args", [
    ("prompt", "D-2", "--slot", "implement"),
    ("run", "D-2", "--dry-run"),
    ("run", "D-2"),
    ("review", "D-2"),
    ("request-changes", "D-2"),
    ("close-changes", "D-2"),
    ("audit", "D-2", "--level", "claimed"),
    ("drive", "D-2"),
])
def test_a_command_about_the_loop_item_says_so_in_one_line_and_writes_nothing(project, args):
    before = (project / ".drover" / "ledger.db").read_bytes()
    done = drover(project, *args, stdin="## a finding\n")
    assert done.returncode in (1, 2), done.stdout + done.stderr
    said = done.stderr.strip().splitlines()
    assert said and "items/D-2.md" in said[-1] and ("cannot read" in said[-1] or "symbolic link" in said[-1]), said
    if args[0] != "drive":  # a drive notes its own start and end
        assert len(said) == 1, said
        assert (project / ".drover" / "ledger.db").read_bytes() == before
    assert git(project, "branch", "--list", "drover/d-2") == ""


def test_a_prompt_override_that_is_a_link_in_a_loop_is_one_line(project):
    config = project / "drover.toml"
    edit = re.sub(r'^implement = ""', 'implement = "prompts/implement.tmpl"', config.read_text(), count=1, flags=re.M)
    assert edit != config.read_text()
    config.write_text(edit)
    (project / "prompts").mkdir()
    (project / "prompts" / "implement.tmpl").symlink_to("implement.tmpl")
    prompted = drover(project, "prompt", "D-1", "--slot", "implement")
    assert prompted.returncode == 2
    assert prompted.stderr == f"drover: prompts/implement.tmpl: cannot read the template: {LOOP}\n"
    checked = drover(project, "check")
    assert checked.returncode == 1 and f"prompts/implement.tmpl: cannot read the template: {LOOP}" in checked.stdout


def test_a_link_in_a_loop_where_an_items_worktree_goes_stops_that_item_in_one_line(project):
    """`.drover/worktrees/D-1` made a link to itself (any agent can write there): the run and the
    drive of D-1 stop with git's one line; the pool's commands and `list` are not held up by it."""
    place = project / ".drover" / "worktrees"
    place.mkdir(parents=True, exist_ok=True)
    (place / "D-1").symlink_to("D-1")
    ran = drover(project, "run", "D-1")
    assert ran.returncode == 2 and ran.stderr.count("\n") == 1, ran.stderr
    assert ".drover/worktrees/D-1 is a link, not a worktree drover made" in ran.stderr  # hostile review 42
    driven = drover(project, "drive", "D-1")
    assert driven.returncode == 1 and "Traceback" not in driven.stdout + driven.stderr
    assert [line.split()[:2] for line in driven.stdout.splitlines() if line.startswith("D-1 ")] == [["D-1", "failed"]]
    for args in (("worktrees",), ("worktrees", "prune"), ("list",)):
        assert drover(project, *args).returncode == 0
    assert git(project, "worktree", "list").count("\n") == 1  # the main checkout alone


def test_drover_resolves_no_path_through_pathlib():
    """`Path.resolve()` raises on a link in a loop up to Python 3.12 and `os.path.realpath` does not:
    a path drover resolves may be one an agent made, so drover's code asks realpath (its own
    package's place, from `__file__`, is the one path no agent names)."""
    package = Path(__file__).parent.parent / "drover"
    found = [f"{path.relative_to(package.parent)}:{number}"
             for path in sorted(package.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ".resolve(" in line and "__file__" not in line]
    assert found == [], found
