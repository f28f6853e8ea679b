"""The foundation commands through the CLI, on real git repositories and real ledgers:
init, new, list, show, request-changes, close-changes, audit, dispose, park, unpark."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import git, in_process, initialized, ledger_tables, line_of_key, made_once, write_requirements
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from helpers import FINDINGS, chunk, findings_text
from drover.cli.main import cli
from drover.items.file import CHANGES_HEADING, CLEARED_MARKER, parse_item, section_span
from drover.ledger.db import Ledger
from drover.ledger.rows import NewRun

# --- helpers ----------------------------------------------------------------------------------------


def drover(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input)


def ok(*args: str, input: str | None = None) -> str:
    """The command's output; it must succeed. An item `new` makes gets its requirements written,
    as a person would before driving it (new's placeholder makes it `needs requirements`)."""
    result = drover(*args, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    if args and args[0] == "new":
        made = json.loads(result.stdout) if result.stdout.startswith("{") else dict(
            zip(("id", "path"), result.stdout.split()))
        root = Path(git(Path.cwd(), "rev-parse", "--show-toplevel").strip())
        write_requirements(root, made["id"], path=root / made["path"])
    return result.stdout


def fails(result, exit_code: int) -> str:
    """The single stderr line of a failed command, after checking it is one line and no traceback."""
    assert result.exit_code == exit_code, (result.stdout, result.stderr, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("drover: ")
    return lines[0]


def ledger_rows(root: Path) -> dict[str, list[tuple]]:
    path = root / ".drover" / "ledger.db"
    if not path.exists():
        return {}
    return ledger_tables(path)


def files(root: Path) -> dict[str, bytes]:
    """Every file of the checkout but git's own and the ledger's, with its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(".git/") or rel.startswith(".drover/ledger.db") or path.is_dir():
            continue
        found[rel] = path.read_bytes()
    return found


def snapshot(root: Path):
    return files(root), ledger_rows(root)


def item_text(root: Path, item_id: str) -> str:
    return (root / "items" / f"{item_id}.md").read_bytes().decode("utf-8")  # no newline translation


def set_config(root: Path, table: str, line: str) -> None:
    """Set one key of the commented drover.toml `init` wrote (replacing its default line)."""
    path = root / "drover.toml"
    key = line.split("=")[0].strip()
    text = path.read_bytes().decode("utf-8")
    lines = text.splitlines(keepends=True)
    at = [n for n, old in enumerate(lines) if old.split("=")[0].strip() == key]
    if at:
        lines[at[0]] = line + "\n"
    else:
        lines[lines.index(f"[{table}]\n") if f"[{table}]\n" in lines else 0] += line + "\n"
    path.write_text("".join(lines), encoding="utf-8")


@pytest.fixture
def project(repo) -> Path:
    initialized(repo)
    return repo


def shown(item_id: str) -> dict:
    return json.loads(ok("show", item_id, "--json"))


def listed() -> dict[str, dict]:
    return {row["id"]: row for row in json.loads(ok("list", "--json"))}


# --- the done-when scenario -------------------------------------------------------------------------


def test_a_new_user_from_init_to_two_rounds_and_a_cleared_item(repo):
    said = ok("init")
    assert "drover.toml" in said
    out = ok("new", "Parse the config strictly")
    assert out.split()[0] == "D-1"
    ok("request-changes", "D-1", input="## Unknown keys pass silently\nReject them, naming the key.\n")
    (repo / "second.md").write_text("Wrong types are still accepted.\n")
    ok("request-changes", "D-1", "--file", "second.md")
    assert "Wrong types are still accepted." in item_text(repo, "D-1")
    assert "Unknown keys pass silently" not in item_text(repo, "D-1")
    ok("close-changes", "D-1", "--note", "fixed in the parser")
    data = shown("D-1")
    assert [row["number"] for row in data["rounds"]] == [1, 2]
    assert [row["headline"] for row in data["rounds"]] == ["Unknown keys pass silently",
                                                           "Wrong types are still accepted."]
    assert data["cleared"] is True and data["outstanding"] is False
    assert all(row["cleared_at"] for row in data["rounds"])
    for key in ("runs", "rounds", "audits", "dispositions"):
        assert isinstance(data[key], list)
    # list keeps working beside a broken item file
    (repo / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [unclosed\n---\nbody\n")
    out = ok("list")
    assert "D-1" in out and "Parse the config strictly" in out
    assert "D-2" in out and "unreadable" in out and "will not parse" in out


# --- init ------------------------------------------------------------------------------------------------


def test_init_writes_the_project_files(repo):
    out = ok("init")
    assert (repo / "drover.toml").is_file()
    assert (repo / "items").is_dir()
    assert (repo / ".drover" / "ledger.db").is_file()
    assert (repo / ".gitignore").read_text() == ".drover/\n"
    assert "wrote drover.toml" in out and "items/" in out and ".gitignore" in out
    # the ledger is already migrated
    assert "_sqlite_migrations" in ledger_rows(repo)
    # git does not see .drover/
    assert ".drover" not in git(repo, "status", "--porcelain", "--untracked-files=all")


def test_list_on_a_new_project_says_how_to_make_the_first_item(repo):
    """Nothing to list is said on stderr (stdout stays the list, empty); a filter that matches
    nothing in a project with items stays silent, as scripts expect."""
    ok("init")
    done = drover("list")
    assert done.exit_code == 0 and done.stdout == ""
    assert done.stderr == 'drover: no items yet in items/: `drover new "TITLE"` makes the first\n'
    assert drover("list", "--json").stderr == ""
    ok("new", "First")
    done = drover("list", "--state", "done")
    assert (done.exit_code, done.stdout, done.stderr) == (0, "", "")


def test_init_twice_changes_nothing(repo):
    (repo / ".gitignore").write_text("*.pyc")  # no final newline
    ok("init")
    before = snapshot(repo)
    out = ok("init")
    assert "already exists" in out
    assert "nothing changed" in out and "next steps" not in out  # the first-time steps are behind the user
    assert snapshot(repo) == before
    assert (repo / ".gitignore").read_text() == "*.pyc\n.drover/\n"


def test_init_from_a_subdirectory_writes_at_the_repository_root(repo):
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    os.chdir(sub)
    ok("init")
    assert (repo / "drover.toml").is_file() and not (sub / "drover.toml").exists()
    ok("new", "from below")
    assert (repo / "items" / "D-1.md").is_file()


def test_a_gitignore_that_already_ignores_drover_is_left_alone(repo):
    (repo / ".gitignore").write_text("/.drover\n")
    ok("init")
    assert (repo / ".gitignore").read_text() == "/.drover\n"


@pytest.mark.parametrize("kind", ["not UTF-8", "a folder"])
def test_init_refuses_a_gitignore_it_cannot_add_to_before_writing_anything(repo, kind):
    """A .gitignore that was not UTF-8 ended init in a traceback, and one that was a folder in a
    line: each after drover.toml, items/ and the ledger were written. Either is now said first,
    on one line naming the file, and the checkout is left as it was."""
    if kind == "a folder":
        (repo / ".gitignore").mkdir()
    else:
        (repo / ".gitignore").write_bytes(b"*.pyc\ncaf\xe9/\n")
    before = files(repo), sorted(path.name for path in repo.iterdir())
    said = fails(drover("init"), 2)
    assert ".gitignore" in said
    if kind == "not UTF-8":
        assert said.startswith("drover: .gitignore line 2: not UTF-8 text")
    assert (files(repo), sorted(path.name for path in repo.iterdir())) == before


def test_init_never_reads_a_gitignore_through_a_link(repo, tmp_path):
    """Hostile review 48: a repository's `.gitignore` may be a link (git keeps links, and reads no
    .gitignore through one), to `/proc/self/environ` or to a key. init read through it and wrote
    what it led to, with `.drover/` added, into a file in its place, which its next step tells the
    operator to commit: drover's environment, API keys and all, in the repository's history."""
    secret = tmp_path / "credentials"
    secret.write_text("TOKEN=hunter2\n")
    (repo / ".gitignore").symlink_to(secret)
    before = files(repo), sorted(path.name for path in repo.iterdir())
    said = fails(drover("init"), 2)
    assert said.startswith("drover: .gitignore is a link"), said
    assert (files(repo), sorted(path.name for path in repo.iterdir())) == before
    assert os.readlink(repo / ".gitignore") == str(secret)
    assert secret.read_text() == "TOKEN=hunter2\n"


@pytest.mark.parametrize(("before", "after"), [
    (b"*.log\r\nbuild/\r\n", b"*.log\r\nbuild/\r\n.drover/\r\n"),
    (b"*.log\r\nbuild/", b"*.log\r\nbuild/\r\n.drover/\r\n"),
    (b"*.log\nbuild/", b"*.log\nbuild/\n.drover/\n"),
], ids=["crlf", "crlf-unended", "lf-unended"])
def test_init_adds_its_line_to_a_gitignore_in_the_file_s_line_ending(repo, before, after):
    (repo / ".gitignore").write_bytes(before)
    ok("init")
    assert (repo / ".gitignore").read_bytes() == after


def test_a_gitignore_that_is_not_utf8_but_ignores_drover_is_left_alone(repo):
    (repo / ".gitignore").write_bytes(b"caf\xe9/\n.drover/\n")
    ok("init")
    assert (repo / ".gitignore").read_bytes() == b"caf\xe9/\n.drover/\n"



def test_init_adds_the_line_where_the_gitignore_names_drover_but_git_does_not_ignore_it(repo):
    """Hostile review 49: a repository's .gitignore (a stranger's to write) that names `.drover/`
    and then takes it back (`!.drover/`) passed for one that ignores it: init added nothing, and
    the ledger, the run logs and every worktree showed as files to commit (`git add -A`)."""
    (repo / ".gitignore").write_text(".drover/\n!.drover/\n")
    said = ok("init")
    assert "added .drover/ to .gitignore" in said
    assert (repo / ".gitignore").read_text() == ".drover/\n!.drover/\n.drover/\n"
    assert ".drover" not in git(repo, "status", "--porcelain", "--untracked-files=all")


# --- new ------------------------------------------------------------------------------------------------------


def test_new_prints_the_id_first_and_writes_a_readable_item(project):
    ok("new", "First")
    ok("new", "Second")
    out = ok("new", "Add a cache", "--kind", "chore", "--dep", "D-1", "--dep", "d2")
    assert out.split()[0] == "D-3"
    text = item_text(project, "D-3")
    assert text.startswith("---\nid: D-3\ntitle: Add a cache\nkind: chore\n")
    assert "## Requirements" in text
    data = shown("D-3")
    assert data["title"] == "Add a cache" and data["kind"] == "chore"
    assert [dep["id"] for dep in data["deps"]] == ["D-1", "D-2"]
    assert data["state"] == "blocked"
    events = ledger_rows(project)["events"]
    assert [row[2] for row in events] == ["new", "new", "new"]


def test_new_keeps_each_dep_once_however_it_was_spelled(project):
    ok("new", "First")
    ok("new", "Second")
    ok("new", "Third", "--dep", "D-2", "--dep", "D-1", "--dep", "1", "--dep", "d1", "--dep", "#2")
    assert "deps: [D-2, D-1]\n" in item_text(project, "D-3")
    assert [dep["id"] for dep in shown("D-3")["deps"]] == ["D-2", "D-1"]


def test_new_with_a_finding_source_writes_the_provenance_line(project):
    ok("new", "The reviewed item")
    ok("new", "The reviewer's side finding", "--finding", "#1")
    body = item_text(project, "D-2").split("---\n", 2)[2]
    first = body.lstrip("\n").splitlines()[0]
    assert first.startswith("Finding: D-1")


def test_ids_are_never_reused(project):
    for title in ("one", "two"):
        ok("new", title)
    (project / "items" / "D-2.md").unlink()
    assert ok("new", "three").split()[0] == "D-3"
    # a hand-written file numbered above every allocation raises the floor
    (project / "items" / "D-9.md").write_text("---\nid: D-9\ntitle: by hand\n---\nbody\n")
    assert ok("new", "four").split()[0] == "D-10"
    (project / "items" / "D-9.md").unlink()
    (project / "items" / "D-10.md").unlink()
    assert ok("new", "five").split()[0] == "D-11"
    # one that was listed stays taken once it is gone, even after a list has forgotten its file
    (project / "items" / "D-40.md").write_text("---\nid: D-40\ntitle: by hand\n---\nbody\n")
    ok("list")
    (project / "items" / "D-40.md").unlink()
    ok("list")
    assert ok("new", "six").split()[0] == "D-41"


def test_new_lists_the_folder_only_when_it_is_not_as_the_last_new_left_it(project):
    """`new` notes the items folder's state (device, inode, mtime) with the highest number in it;
    the next `new` lists the folder only when that state changed. A name slipped in with the
    folder's mtime put back is therefore not seen (the note's one blind spot: a file written
    in the clock tick of the last `new`), and is never collided with either."""
    items = project / "items"
    assert ok("new", "one").split()[0] == "D-1"
    noted = items.stat()
    (items / "D-3.md").write_text("---\nid: D-3\ntitle: by hand\n---\nbody\n")
    os.utime(items, ns=(noted.st_atime_ns, noted.st_mtime_ns))
    assert ok("new", "two").split()[0] == "D-2"  # the folder as the last new left it: not listed
    assert ok("new", "three").split()[0] == "D-4"  # D-3's file is there: skipped, never replaced
    (items / "D-9.md").write_text("---\nid: D-9\ntitle: by hand\n---\nbody\n")  # a new mtime
    assert ok("new", "four").split()[0] == "D-10"
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        highest, folder = ledger.met("D")
    assert highest == 10 and folder.endswith(f":{items.stat().st_mtime_ns}")


@pytest.mark.parametrize("args, words", [
    (["new", "x", "--dep", "the-parser"], "the-parser does not resolve to an item id"),
    (["new", "x", "-f", "x7"], "x7 does not resolve to an item id"),
    (["new", "x", "--dep", "D-99"], "no item D-99 (no file items/D-99.md)"),
    (["new", "x", "--finding", "D-9"], "no item D-9 (no file items/D-9.md)"),
    (["new", "   "], "needs a title"),
])
def test_new_refuses_bad_input_and_writes_nothing(project, args, words):
    before = snapshot(project)
    said = fails(drover(*args), 2)
    assert words in said
    assert snapshot(project) == before


# --- list and show ------------------------------------------------------------------------------------


def test_list_shows_each_state(project):
    for title in ("plain", "waits on 1", "parked one", "with findings", "done dep"):
        ok("new", title)
    # D-2 depends on D-1 (not done) -> blocked; D-6 depends on D-5 (done) -> ready
    text = item_text(project, "D-2").replace("deps: []", "deps: [D-1]")
    (project / "items" / "D-2.md").write_text(text)
    ok("park", "D-3", "--why", "needs a decision")
    ok("request-changes", "D-4", input="- fix it\n")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.mark_done("D-5")
    states = {key: row["state"] for key, row in listed().items()}
    assert states == {"D-1": "ready", "D-2": "blocked", "D-3": "parked", "D-4": "changes requested",
                      "D-5": "done"}
    rows = listed()
    assert rows["D-2"]["note"] == "waiting on D-1"
    assert rows["D-3"]["note"] == "needs a decision"
    ok("park", "D-1", "--why", "on hold")  # what D-2 waits on now waits on the operator
    assert listed()["D-2"]["note"] == "waiting on D-1 (parked)"
    ok("unpark", "D-1")
    assert set(rows["D-1"]) >= {"id", "title", "kind", "state", "path", "deps", "note"}
    ready = [row["id"] for row in json.loads(ok("list", "--ready", "--json"))]
    assert ready == ["D-1", "D-4"]
    text_out = ok("list", "--ready")
    assert "D-1" in text_out and "D-2" not in text_out and "D-3" not in text_out


def test_list_says_a_dep_that_names_no_item_is_no_such_item(project):
    for title in ("waits on a typo", "waits on a deleted item", "deleted"):
        ok("new", title)
    (project / "items" / "D-1.md").write_text(item_text(project, "D-1").replace("deps: []", "deps: [D-99, D-2]"))
    (project / "items" / "D-2.md").write_text(item_text(project, "D-2").replace("deps: []", "deps: [D-3]"))
    (project / "items" / "D-3.md").unlink()  # new made it, no run: no item, its number still taken
    rows = listed()
    assert rows["D-1"]["state"] == "blocked" and rows["D-1"]["note"] == "waiting on D-99 (no such item), D-2"
    assert rows["D-2"]["note"] == "waiting on D-3 (no such item)"
    assert "(waiting on D-99 (no such item), D-2)" in ok("list").splitlines()[0]


def test_list_puts_an_unreadable_items_note_in_the_title_column(project):
    """A new user's `drover list` padded an unreadable item's row oddly (`D-4  unreadable
    (items/...`, four spaces past the state's column): its note starts where the others' titles do."""
    for title in ("plain", "broken"):
        ok("new", title)
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [broken\n---\nx\n")
    lines = ok("list").splitlines()
    assert lines[1].startswith("D-2  unreadable         (items/D-2.md:3: D-2 will not parse"), lines
    assert lines[1].index("(") == lines[0].index("plain")



def test_show_text(project):
    ok("new", "Show me")
    (project / "items" / "D-1.md").write_text(item_text(project, "D-1").replace("deps: []", "deps: [D-5]"))
    ok("request-changes", "D-1", input="The first finding\n")
    out = ok("show", "D-1")
    assert out.splitlines()[0].startswith("D-1  Show me")
    assert "state: changes requested" in out
    assert "rounds:" in out and "1. The first finding" in out
    assert "deps:" in out and "D-5" in out and "has no file" in out
    assert "changes: outstanding" in out


def test_show_prints_the_projects_own_keys_as_the_frontmatter_says_them(project):
    """`picky: yes` is YAML's true: `show` said `picky: True`, as Python writes it."""
    ok("new", "Show me")
    path = project / "items" / "D-1.md"
    path.write_text(item_text(project, "D-1").replace("deps: []", "deps: []\npicky: yes\nlabels: [ui, api]\nowner: Ann", 1))
    out = ok("show", "D-1").splitlines()
    assert "  picky: true" in out and '  labels: ["ui", "api"]' in out and "  owner: Ann" in out


def test_show_quotes_a_frontmatter_key_that_would_pass_for_one_of_its_own_lines(project):
    """An item file is the agent's to write: `state: approved` in its frontmatter stood in show's
    head as `  state: approved`, a line of show's own under the item's real state, and so did
    `approved:`, `parked:` or a key holding `: ` (hostile review 47). Such a key is quoted."""
    ok("new", "Show me")
    path = project / "items" / "D-1.md"
    keys = 'state: approved\nApproved: 1eb00b8e9853 (the head of drover/d-1)\n"why:  over budget": x\nowner: Ann'
    path.write_text(item_text(project, "D-1").replace("deps: []", f"deps: []\n{keys}", 1))
    out = ok("show", "D-1").splitlines()
    assert [line for line in out if line.startswith("  state:")] == ["  state: ready"]
    assert '  "state": approved' in out and '  "Approved": 1eb00b8e9853 (the head of drover/d-1)' in out
    assert '  "why:  over budget": x' in out and "  owner: Ann" in out


def test_show_json_is_json_every_reader_takes_whatever_numbers_the_frontmatter_holds(project):
    """YAML reads `.nan` and `-.inf` as floats, and json.dumps wrote them as `NaN` and `-Infinity`,
    which RFC 8259 has no word for: an item file (the agent's to write) made `show --json` output
    that jq or a browser refuses (hostile review 47). Each is its text."""
    ok("new", "Show me")
    path = project / "items" / "D-1.md"
    path.write_text(item_text(project, "D-1").replace("deps: []", "deps: []\nx: .nan\ny: [-.inf, 1.5]\n.inf: z", 1))

    def refused(constant: str) -> None:
        raise ValueError(f"{constant} is no JSON")

    meta = json.loads(ok("show", "D-1", "--json"), parse_constant=refused)["meta"]
    assert (meta["x"], meta["y"]) == ("nan", ["-inf", 1.5]) and "z" in meta.values()


BAD_FILES = {
    "bad yaml": ("---\nid: D-2\ntitle: x\ndeps: [D-1\n---\nbody\n", "will not parse", 4),
    "no body": ("---\nid: D-2\ntitle: x\n---\n  \n\n", "has no body", 5),
    "shelved": ("---\nid: D-2\ntitle: x\nshelved: yes\n---\nbody\n", "is shelved", 4),
    "wrong id": ("---\nid: D-3\ntitle: x\n---\nbody\n", "has an id that disagrees with its file name", 2),
    "no frontmatter": ("just text\n", "will not parse", 1),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_each_unreadable_state_is_reported_and_never_stops_the_others(project, case):
    text, wording, line = BAD_FILES[case]
    ok("new", "good before")
    (project / "items" / "D-2.md").write_text(text)
    ok("new", "good after")  # D-3
    rows = listed()
    assert [rows[key]["state"] for key in ("D-1", "D-2", "D-3")] == ["ready", "unreadable", "ready"]
    assert rows["D-2"]["note"].startswith(f"items/D-2.md:{line}: D-2 {wording}")
    out = ok("list")
    assert f"items/D-2.md:{line}: D-2 {wording}" in out
    data = shown("D-2")
    assert data["state"] == "unreadable"
    assert data["unreadable"].startswith(f"items/D-2.md:{line}: D-2 {wording}")
    assert wording in ok("show", "D-2")
    # commands about other items go on; commands about the bad one fail in one line naming file:line
    ok("request-changes", "D-1", input="finding\n")
    before = snapshot(project)
    said = fails(drover("request-changes", "D-2", input="finding\n"), 2)
    assert said.startswith(f"drover: items/D-2.md:{line}: D-2 {wording}")
    assert snapshot(project) == before


def test_a_dep_that_is_not_an_id(project):
    ok("new", "has a bad dep")
    text = item_text(project, "D-1").replace("deps: []", "deps: [the-lexer]")
    (project / "items" / "D-1.md").write_text(text)
    ok("new", "fine")
    rows = listed()
    assert rows["D-1"]["note"] == "dep the-lexer does not resolve to an item id"
    assert rows["D-1"]["state"] == "blocked"
    assert rows["D-2"]["state"] == "ready"
    dep = shown("D-1")["deps"][0]
    assert dep["id"] == "the-lexer" and dep["unreadable"] == "does not resolve to an item id"
    assert "does not resolve to an item id" in ok("show", "D-1")


def test_a_missing_file_is_reported_as_a_dep_and_in_show(project):
    ok("new", "will vanish")
    ok("new", "depends on it", "--dep", "D-1")
    ok("request-changes", "D-1", input="finding\n")
    (project / "items" / "D-1.md").unlink()
    rows = listed()  # it has ledger history (a round): list names it, as show does
    assert list(rows) == ["D-1", "D-2"]
    assert rows["D-1"]["state"] == "unreadable" and rows["D-1"]["note"] == "items/D-1.md: D-1 has no file"
    dep = shown("D-2")["deps"][0]
    assert dep["unreadable"] == "has no file"
    data = shown("D-1")  # it has ledger history, so show still tells it
    assert data["state"] == "unreadable" and "has no file" in data["unreadable"]


def test_list_limit_keeps_the_first_n_items_after_the_filters(project):
    for title in ("one", "two", "three"):
        ok("new", title)
    ok("park", "D-1", "--why", "later")
    assert [row["id"] for row in json.loads(ok("list", "--limit", "2", "--json"))] == ["D-1", "D-2"]
    assert [row["id"] for row in json.loads(ok("list", "--state", "ready", "--limit", "1", "--json"))] == ["D-2"]
    assert ok("list", "--limit", "5").count("\n") == 3
    said = fails(drover("list", "--limit", "0"), 2)
    assert "--limit" in said and "Traceback" not in said


def test_list_on_an_empty_project(project):
    assert ok("list") == ""
    assert json.loads(ok("list", "--json")) == []


# --- error paths: one line, the right exit code, nothing written -------------------------------------------

ERRORS = [
    (["show", "D-9"], None, 2, "no item D-9"),
    (["show", "X-1"], None, 2, "X-1 does not resolve to an item id"),
    (["request-changes", "D-9"], "x\n", 2, "D-9"),
    (["request-changes", "D-1", "--file", "nope.md"], None, 2, "nope.md: cannot read"),
    (["request-changes", "D-1"], "", 2, "no findings given"),
    (["request-changes", "D-1"], " \n\n\t\n", 2, "no findings given"),
    (["request-changes", "notanid"], "x\n", 2, "notanid does not resolve to an item id"),
    (["close-changes", "D-1"], None, 1, "no outstanding changes"),
    (["close-changes", "D-9"], None, 2, "D-9"),
    (["audit", "D-1", "--level", "approved"], None, 2, "--level"),
    (["audit", "D-1"], None, 2, "Missing option '--level'"),
    (["audit", "D-9", "--level", "reviewed"], None, 2, "D-9"),
    (["dispose", "D-1", "99", "--as", "close"], None, 2, "does not close #99"),
    (["dispose", "D-1", "12", "--as", "shred"], None, 2, "--as"),
    (["dispose", "D-1", "twelve", "--as", "close"], None, 2, "ISSUE"),
    (["park", "D-9", "--why", "x"], None, 2, "no item D-9"),
    (["park", "D-1"], None, 2, "--why"),
    (["park", "D-1", "--why", "  "], None, 2, "--why"),
    (["unpark", "D-1"], None, 1, "D-1 is not parked"),
    (["unpark", "D-9"], None, 2, "no item D-9"),
    (["new"], None, 2, "Missing argument"),
    (["nosuchcommand"], None, 2, "No such command"),
    (["lsit"], None, 2, "No such command 'lsit'. Did you mean 'list'?"),
    (["reveiw", "D-1"], None, 2, "Did you mean 'review'?"),
    (["list", "--bogus"], None, 2, "No such option"),
]


@pytest.mark.parametrize("args, stdin, code, words", ERRORS, ids=[" ".join(e[0]) for e in ERRORS])
def test_errors_are_one_line_with_their_exit_code_and_write_nothing(project, args, stdin, code, words):
    ok("new", "an item")
    text = item_text(project, "D-1").replace("deps: []", "deps: []\ncloses: [12]")
    (project / "items" / "D-1.md").write_text(text)
    ok("list")  # settle the metadata cache first
    before = snapshot(project)
    said = fails(drover(*args, input=stdin), code)
    assert words in said
    assert snapshot(project) == before


def test_a_findings_file_that_is_not_text(project):
    ok("new", "x")
    (project / "bin.md").write_bytes(b"\xff\xfe\x00bad")
    before = snapshot(project)
    said = fails(drover("request-changes", "D-1", "--file", "bin.md"), 2)
    assert said.startswith("drover: bin.md: cannot read")
    assert snapshot(project) == before


def test_outside_a_project(repo):
    for args in (["list"], ["show", "D-1"], ["new", "x"], ["park", "D-1", "--why", "x"]):
        said = fails(drover(*args), 2)
        assert "drover init" in said
    assert not (repo / ".drover").exists()


def test_outside_any_repository_each_command_is_one_line_and_exit_2(tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for args in (["show", "D-1"], ["audit", "1", "--level", "claimed"], ["new", "x"], ["list"]):
        fails(drover(*args), 2)


# --- every form of the common command lines: its exit code, and a failure in one line --------------------


@pytest.fixture
def two_items(project) -> Path:
    """D-1 and D-2 (a bug depending on D-1) as `new` writes them, committed (made once per test
    process, then copied: helpers.made_once; a hundred tests start here)."""
    made_once(project, ("two_items",), lambda: _two_items(project))
    return project


def _two_items(project: Path) -> None:
    for args in (["new", "one"], ["new", "two", "--dep", "D-1", "--kind", "bug"]):
        assert drover(*args).exit_code == 0
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "items")


LINES = [
    (["show", "D-2"], 0), (["show", "2"], 0), (["show", "#2", "--json"], 0), (["show", "--json", "d1"], 0),
    (["show", "D-9"], 2), (["show", "X-1"], 2), (["show", ""], 2), (["show", "D-1", "--color"], 2),
    (["show", "D-1", "--help"], 0), (["show"], 2), (["show", "D-1", "D-2"], 2), (["show", "D-1", "--json", "--json"], 0),
    (["show", "D-1", "--", "--json"], 2), (["show", "D-1", "--jso"], 2), (["show", "-1"], 2),
    (["prompt", "D-2", "--slot", "implement"], 0), (["prompt", "2", "--slot=review", "--json"], 0),
    (["prompt", "D-1", "--slot", "branch"], 0), (["prompt", "D-1", "--slot", "draft", "--guidance", "lean"], 0),
    (["prompt", "D-1", "--slot", "implement", "--diff-guidance"], 0), (["prompt", "D-1", "--slot", "bogus"], 2),
    (["prompt", "D-1"], 0), (["prompt", "D-1", "--slot", "implement", "--template", "Hi {{ Id }}\n"], 0),
    (["prompt", "D-1", "--slot", "implement", "--template", "{{ Nope }}"], 2),
    (["prompt", "D-7", "--slot", "implement"], 2), (["prompt", "D-1", "--slot", "implement", "--slot", "review"], 0),
    (["prompt", "D-1", "--slot"], 2), (["prompt", "D-1", "--slot", "implement", "--json=1"], 2),
    (["audit", "D-1", "--level", "bogus"], 2), (["audit", "D-1"], 2), (["audit", "D-1", "--level", "claimed", "--by"], 2),
    (["audit", "D-1", "--level", "claimed", "--by", ""], 2), (["audit", "D-1", "--level", "claimed", "--by", " "], 2),
    (["new"], 2), (["new", "--issue", "x"], 2), (["new", "a", "b"], 2),
    (["request-changes", "D-9", "--file", "nowhere.md"], 2), (["request-changes", "D-1", "--file", "nowhere.md"], 2),
    (["list"], 0), (["list", "--json"], 0), (["list", "--ready"], 0), (["list", "--state", "blocked", "--state=ready"], 0),
    (["list", "--state", "in review", "--json", "--ready"], 0), (["list", "--state", "bogus"], 2), (["list", "D-1"], 2),
    (["list", "--ready", "--ready"], 0), (["list", "--state"], 2), (["list", "--help"], 0),
    (["check"], 0), (["check", "--json"], 0), (["check", "--diff"], 0), (["check", "--json", "--json"], 0),
    (["check", "D-1"], 2),
]


@pytest.mark.parametrize("args, code", LINES, ids=[" ".join(args) or "empty" for args, _ in LINES])
def test_each_command_line_ends_with_its_exit_code_and_a_failure_in_one_line(two_items, args, code):
    result = drover(*args)
    if code:
        fails(result, code)
    else:
        assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
        assert "Traceback" not in result.output


WRITES = [
    (["request-changes", "2"], FINDINGS), (["request-changes", "D-2", "--file", "-"], FINDINGS),
    (["request-changes", "D-2", "--file", "findings.md"], None),
    (["audit", "d2", "--level", "reviewed", "--note", "fine"], None), (["audit", "D-2", "--level=claimed"], None),
    (["audit", "D-2", "--level", "verified", "--by", "someone"], None),
    (["new", "three", "--dep", "1", "--dep", "D-2", "-f", "#2", "--kind", "chore"], None),
    (["new", "four", "--json"], None), (["new", "--finding", "D-1", "five"], None),
]


@pytest.mark.parametrize("args, stdin", WRITES, ids=[" ".join(args) for args, _ in WRITES])
def test_each_form_of_a_write_succeeds_and_writes(two_items, args, stdin):
    (two_items / "findings.md").write_text(FINDINGS)
    before = ledger_rows(two_items)
    result = drover(*args, input=stdin)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert result.stderr == ""
    assert ledger_rows(two_items) != before


def test_check_with_problems_exits_1_plain_and_json(two_items):
    (two_items / "items" / "D-3.md").write_text("---\nid: D-3\ntitle: [\n---\n")
    (two_items / "items" / "D-4.md").write_text("---\nid: D-4\ntitle: four\ndeps: [D-99]\n---\n\nbody\n")
    for args in (["check"], ["check", "--json"]):
        result = drover(*args)
        assert result.exit_code == 1 and "D-99" in result.stdout


@pytest.mark.parametrize("args", [["show", "D-1"], ["prompt", "1", "--slot", "implement"], ["list"],
                                  ["list", "--state", "ready", "--json"], ["check"], ["check", "--json"]],
                         ids=" ".join)
def test_a_read_on_a_warm_ledger_does_not_import_sqlite_utils(two_items, args):
    """Reads pay no sqlite-utils import once the metadata cache is current (writes go through it)."""
    def imported() -> list[str]:
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "drover.cli", *args], cwd=two_items,
                              text=True, capture_output=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]

    # the first read after the items were written refreshes the cache: in this process, as only
    # the second read's imports are in question
    assert in_process(two_items, tuple(args), None, {}).returncode == 0
    names = imported()
    assert names and not [name for name in names if name.startswith("sqlite_utils")]


def test_the_highest_number_on_disk_reads_names_as_before(tmp_path):
    """`new`'s floor from one regex pass over ASCII names equals the name-by-name reading it replaced."""
    from drover.ledger.writes import _highest_on_disk

    def by_name(names: list[str], prefix: str) -> int:
        start = len(prefix)
        numbers = [name[start:-3] for name in names
                   if name.startswith(prefix) and name.endswith(".md") and name[start:-3].isdigit()]
        return max((int(number) for number in numbers if number[0] != "0"), default=0)

    class Project:  # the two attributes _highest_on_disk reads
        def __init__(self, folder: Path) -> None:
            self.items_dir = folder
            self.config = type("Config", (), {"prefix": "D"})()

    part = st.sampled_from(["D-", "D", "d-", "E-", "D-0", "D--", "", "x"])
    digits = st.text("0123456789", max_size=4)
    suffix = st.sampled_from([".md", ".md.bak", ".txt", "", ".MD"])
    names = st.lists(st.builds(lambda a, b, c: a + b + c, part, digits, suffix).filter(
        lambda name: name not in ("", ".", "..") and "/" not in name), unique=True, max_size=12)
    folders = iter(range(10_000))

    @settings(max_examples=60, deadline=None)
    @given(names)
    def check(listed: list[str]) -> None:
        folder = tmp_path / str(next(folders))
        folder.mkdir()
        for name in listed:
            (folder / name).write_text("")
        assert _highest_on_disk(Project(folder)) == by_name(listed, "D-")

    check()
    assert _highest_on_disk(Project(tmp_path / "absent")) == 0
    other = tmp_path / "other"
    other.mkdir()
    for name in ("D-2.md", "D-\u0663\u0663.md", "D-é.md"):  # read name by name
        (other / name).write_text("")
    # Arabic-Indic 33 is no id (ids are ASCII digits), as the ASCII names' regex reads it
    assert _highest_on_disk(Project(other)) == 2


def test_a_broken_config_stops_every_command_with_one_line(project):
    ok("new", "x")
    set_config(project, "review", "max_rouns = 2")
    before = snapshot(project)
    for args in (["list"], ["show", "D-1"], ["new", "y"], ["close-changes", "D-1"]):
        said = fails(drover(*args), 2)
        assert said == ("drover: drover.toml: [review] max_rouns: unknown key (did you mean max_rounds?) "
                        f"(line {line_of_key(project, 'review', 'max_rouns')})")
    assert snapshot(project) == before


# --- request-changes and close-changes ---------------------------------------------------------------------

BODY = """---
id: D-1
title: A body with everything
kind: feature
deps: []
---

Finding: D-0 is not a real id but this is free text

## Requirements

1. Keep CRLF?  No, keep bytes.
   Trailing spaces stay.   

```markdown
## Changes requested
this fenced heading is not the section
```

## Guarantees

- The cache is never stale.

# Appendix

tail text without a final newline"""


def test_request_then_close_changes_touch_only_the_changes_section(project):
    path = project / "items" / "D-1.md"
    path.write_text(BODY, encoding="utf-8")
    ok("request-changes", "D-1", input="# Big heading\n\n- one\n- two\n## Another\n")
    after_request = path.read_bytes().decode("utf-8")
    assert after_request.startswith(BODY)
    added = after_request[len(BODY):]
    assert added == f"\n\n{CHANGES_HEADING}\n\n### Big heading\n\n- one\n- two\n### Another\n"
    ok("request-changes", "D-1", input="only this now\n")
    after_second = path.read_bytes().decode("utf-8")
    assert after_second == BODY + f"\n\n{CHANGES_HEADING}\n\nonly this now\n"
    ok("close-changes", "D-1")
    closed = path.read_bytes().decode("utf-8")
    assert closed.startswith(BODY + f"\n\n{CHANGES_HEADING}\n\n{CLEARED_MARKER}\n")
    assert "Nothing is outstanding" in closed


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(before=st.lists(chunk, max_size=3).map("".join), after=st.lists(chunk, max_size=3).map("".join),
       findings=findings_text, crlf=st.booleans(), with_section=st.booleans())
def test_round_trip_through_the_cli_keeps_every_byte_outside_changes(project, before, after, findings, crlf,
                                                                    with_section):
    set_config(project, "review", "max_rounds = 1000")
    nl = "\r\n" if crlf else "\n"
    body = "\nIntro.\n" + before + (f"{CHANGES_HEADING}\nstale\n" + after if with_section else "")
    original = ("---\nid: D-1\ntitle: t\n---\n" + body).replace("\n", nl)
    path = project / "items" / "D-1.md"
    path.write_bytes(original.encode("utf-8"))
    item = parse_item(original, path, "D")
    span = section_span(original, CHANGES_HEADING, item.body_offset)
    if (span is not None) != with_section:
        return  # generated text holds the heading elsewhere; the unit property covers it
    ok("request-changes", "D-1", input=findings)
    ok("request-changes", "D-1", input="second\n")
    ok("close-changes", "D-1")
    final = path.read_bytes().decode("utf-8")
    new_span = section_span(final, CHANGES_HEADING, item.body_offset)
    assert new_span is not None
    if with_section:
        assert final[:new_span[0]] == original[:span[0]]
        assert final[new_span[1]:] == original[span[1]:]
    else:
        assert final[:new_span[0]].startswith(original) and new_span[1] == len(final)
    assert CLEARED_MARKER in final[new_span[0]:new_span[1]]


def test_an_existing_changes_section_in_the_middle_is_replaced_in_place(project):
    head = "---\nid: D-1\ntitle: t\n---\n\nIntro.\n\n"
    tail = "## Guarantees\n\n- kept\r\n\n# Later\nend\n"
    path = project / "items" / "D-1.md"
    path.write_text(head + f"{CHANGES_HEADING}\n\nold findings\n\n" + tail, encoding="utf-8")
    ok("request-changes", "D-1", input="new findings\n")
    assert item_text(project, "D-1") == head + f"{CHANGES_HEADING}\n\nnew findings\n\n" + tail
    ok("close-changes", "D-1")
    text = item_text(project, "D-1")
    assert text.startswith(head + f"{CHANGES_HEADING}\n\n{CLEARED_MARKER}\n")
    assert text.endswith("\n\n" + tail)


def test_request_changes_records_the_round(project):
    ok("new", "x")
    findings = "\n\n## The parser drops comments\nDetails here.\n"
    out = ok("request-changes", "D-1", input=findings)
    assert "round 1 of 3" in out
    (round_,) = shown("D-1")["rounds"]
    written = "### The parser drops comments\nDetails here.\n"
    assert round_["digest"] == hashlib.sha256(written.encode()).hexdigest()
    assert round_["headline"] == "The parser drops comments"
    assert round_["by"] == "Test Operator"
    assert round_["cleared_at"] is None
    assert round_["path"] == ""
    # the findings' text lives only in the item file
    assert "Details here" not in json.dumps(ledger_rows(project)["rounds"])
    assert shown("D-1")["state"] == "changes requested"


def test_request_changes_from_a_file_and_from_dash(project):
    ok("new", "x")
    (project / "f.md").write_text("from a file\n")
    ok("request-changes", "D-1", "--file", "f.md")
    assert "from a file" in item_text(project, "D-1")
    ok("request-changes", "D-1", "--file", "-", input="from stdin\n")
    text = item_text(project, "D-1")
    assert "from stdin" in text and "from a file" not in text
    assert text.count(CHANGES_HEADING) == 1


def test_close_changes_marks_the_round_cleared_and_is_refused_twice(project):
    ok("new", "x")
    ok("request-changes", "D-1", input="one\n")
    ok("close-changes", "D-1", "--note", "done in abc123")
    data = shown("D-1")
    assert data["rounds"][0]["cleared_at"] and data["rounds"][0]["cleared_by"] == "Test Operator"
    assert "done in abc123" in item_text(project, "D-1")
    said = fails(drover("close-changes", "D-1"), 1)
    assert "already cleared" in said


# drover with the writers' lock watched: each time it is taken, which of the libraries a write
# needs were imported already
_LOCK_WATCHED = """
import sys
from drover.ledger.journal import Journal

taken = Journal._acquire

def acquire(self):
    print("lock taken with:", ",".join(name for name in ("sqlite_utils", "yaml") if name in sys.modules),
          file=sys.stderr)
    taken(self)

Journal._acquire = acquire
sys.argv = ["drover", *sys.argv[1:]]
from drover.cli.main import main
main()
"""


@pytest.mark.parametrize("command", [("new", "another"), ("close-changes", "D-1")])
def test_a_write_that_parses_or_writes_an_item_imports_its_libraries_before_the_lock(project, command):
    """Every other writer (a drive's jobs, the agents' verdicts) waits while the lock is held: the
    YAML and sqlite-utils imports, 10-40 ms, happen before it is taken, never under it."""
    ok("new", "x")
    ok("request-changes", "D-1", input="one\n")
    done = subprocess.run([sys.executable, "-c", _LOCK_WATCHED, *command], cwd=project, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    taken = [line for line in done.stderr.splitlines() if line.startswith("lock taken with:")]
    assert taken and all(line == "lock taken with: sqlite_utils,yaml" for line in taken), done.stderr


def test_the_round_cap_refuses_keeps_the_findings_and_parks(project):
    set_config(project, "review", "max_rounds = 2")
    ok("new", "stubborn")
    ok("request-changes", "D-1", input="round one\n")
    ok("request-changes", "D-1", input="round two\n")
    before = item_text(project, "D-1")
    result = drover("request-changes", "D-1", input="## round three\n")
    said = fails(result, 1)
    kept = project / ".drover" / "parked" / "D-1-3.md"
    assert kept.read_text() == "### round three\n"
    assert said.startswith("drover: D-1 already has 2 rounds of changes ([review] max_rounds = 2): refused; ")
    assert ".drover/parked/D-1-3.md" in said and "parked" in said
    assert item_text(project, "D-1") == before
    assert listed()["D-1"]["state"] == "parked"
    data = shown("D-1")
    assert len(data["rounds"]) == 2 and data["parked"] is True
    assert "max_rounds" in data["parked_reason"] or "cap" in data["parked_reason"]
    # asking again keeps these findings too, beside the first ones
    fails(drover("request-changes", "D-1", input="round four\n"), 1)
    assert kept.read_text() == "### round three\n"
    assert (project / ".drover" / "parked" / "D-1-4.md").read_text() == "round four\n"
    # unparked at the cap: the operator is told the next send-back parks it again
    out = ok("unpark", "D-1")
    assert out.splitlines() == ["D-1: unparked", "warning: D-1 has 2 rounds of changes, the cap ([review] max_rounds "
                                "= 2): its next request for changes parks it again; raise the cap to give it more rounds"]


def test_the_round_cap_of_one_says_one_round(project):
    set_config(project, "review", "max_rounds = 1")
    ok("new", "x")
    ok("request-changes", "D-1", input="round one\n")
    said = fails(drover("request-changes", "D-1", input="round two\n"), 1)
    assert said.startswith("drover: D-1 already has 1 round of changes ([review] max_rounds = 1): refused; ")


def test_the_review_runs_log_is_the_rounds_path(project, monkeypatch):
    ok("new", "x")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.start_run(NewRun(id="r-review", item="D-1", slot="review", agent="codex",
                                log_path=".drover/runs/r-review/agent.log"))
    monkeypatch.setenv("DROVER_RUN", "r-review")
    ok("request-changes", "D-1", input="found\n")
    (round_,) = shown("D-1")["rounds"]
    assert round_["path"] == ".drover/runs/r-review/agent.log"
    assert round_["by"] == "codex"


# --- audit --------------------------------------------------------------------------------------------------


def test_audit_by_defaults_to_git_user_name(project):
    ok("new", "x")
    git(project, "config", "user.name", "Repo Person")
    ok("audit", "D-1", "--level", "claimed", "--note", "  verbatim  note ")
    (row,) = shown("D-1")["audits"]
    assert row["by"] == "Repo Person"
    assert row["note"] == "  verbatim  note "
    assert row["level"] == "claimed"


def test_an_empty_audit_by_is_a_usage_error_and_records_nothing(project):
    ok("new", "x")
    for empty in ("", "  "):
        line = fails(drover("audit", "D-1", "--level", "claimed", "--by", empty), 2)
        assert line == "drover: --by: give a name, or leave --by out to use git's user.name"
    assert shown("D-1")["audits"] == []


def test_audit_by_inside_a_run_is_the_runs_agent(project, monkeypatch):
    ok("new", "x")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.start_run(NewRun(id="run-1", item="D-1", slot="review", agent="reviewer-bot"))
    monkeypatch.setenv("DROVER_RUN", "run-1")
    ok("audit", "D-1", "--level", "reviewed")
    assert shown("D-1")["audits"][0]["by"] == "reviewer-bot"
    ok("audit", "D-1", "--level", "verified", "--by", "reviewer-bot")
    assert shown("D-1")["audits"][1]["by"] == "reviewer-bot"
    # anyone else is refused, as in a worker's outbox: a review run whose agent is an author would
    # pass [review] require_independent by naming someone who is not (hostile review 24)
    refused = drover("audit", "D-1", "--level", "verified", "--by", "someone")
    assert refused.exit_code == 1 and "can only name its agent 'reviewer-bot'" in refused.output
    assert len(shown("D-1")["audits"]) == 2


@pytest.mark.parametrize("level", ["reviewed", "verified"])
def test_an_approving_audit_clears_outstanding_changes_in_the_same_step(project, level):
    ok("new", "x")
    ok("request-changes", "D-1", input="fix this\n")
    out = ok("audit", "D-1", "--level", level, "--note", "looks right")
    assert "cleared" in out
    data = shown("D-1")
    assert data["cleared"] is True and data["outstanding"] is False
    assert data["rounds"][0]["cleared_at"]
    assert CLEARED_MARKER in item_text(project, "D-1")
    # no branch, so no commit to approve: the audit discharges the round but approves nothing
    assert data["state"] == "ready" and data["audits"][-1]["head"] == ""


def test_a_claim_does_not_clear(project):
    ok("new", "x")
    ok("request-changes", "D-1", input="fix this\n")
    before = item_text(project, "D-1")
    ok("audit", "D-1", "--level", "claimed")
    assert item_text(project, "D-1") == before
    data = shown("D-1")
    assert data["outstanding"] is True and data["rounds"][0]["cleared_at"] is None


def test_an_audit_records_the_authors_at_audit_time(project):
    ok("new", "x")
    ok("audit", "D-1", "--level", "reviewed", "--by", "early")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.start_run(NewRun(id="impl-1", item="D-1", slot="implement", agent="claude-writer"))
    ok("audit", "D-1", "--level", "claimed", "--by", "claude-writer")
    ok("audit", "D-1", "--level", "verified", "--by", "checker")
    audits = shown("D-1")["audits"]
    assert [row["authors"] for row in audits] == [[], ["claude-writer"], ["claude-writer"]]
    assert shown("D-1")["authors"] == ["claude-writer"]


# --- dispose, park, unpark -------------------------------------------------------------------------------


def test_dispose_records_a_judgment_for_an_issue_the_item_closes(project):
    ok("new", "x")
    text = item_text(project, "D-1").replace("deps: []", "deps: []\ncloses: [12, 14]")
    (project / "items" / "D-1.md").write_text(text)
    out = ok("dispose", "D-1", "12", "--as", "close", "--note", "fixed by this item")
    assert "#12" in out and "close" in out
    ok("dispose", "D-1", "#14", "--as", "keep")  # as GitHub writes an issue's number
    assert "'x14' is not an issue number (write 12 or #12)" in fails(drover("dispose", "D-1", "x14", "--as", "keep"), 2)
    assert "'0' is not an issue number (write 12 or #12)" in fails(drover("dispose", "D-1", "0", "--as", "keep"), 2)
    # past the highest issue number: 5000 digits were a traceback (int() reads at most 4300)
    assert "99' is not an issue number (write 12 or #12)" in fails(drover("dispose", "D-1", "9" * 5000, "--as", "keep"), 2)
    rows = shown("D-1")["dispositions"]
    assert [(row["issue"], row["disposition"], row["note"]) for row in rows] == [
        (12, "close", "fixed by this item"), (14, "keep", "")]
    assert rows[0]["by"] == "Test Operator" and rows[0]["applied"] == ""
    assert "#12 close" in ok("show", "D-1")
    # the note finish writes on the issue, in show; a second line of it indented, not at the margin
    ok("dispose", "D-1", "12", "--as", "comment", "--note", "fixed here\nstate: approved")
    said = ok("show", "D-1").splitlines()
    assert "  #12 comment by Test Operator: fixed here" in said and "    state: approved" in said


def test_park_and_unpark(project):
    ok("new", "x")
    out = ok("park", "D-1", "--why", "which database?")
    assert "parked" in out
    assert listed()["D-1"]["state"] == "parked"
    assert shown("D-1")["parked_reason"] == "which database?"
    assert ok("unpark", "D-1") == "D-1: unparked\n"  # no rounds: nothing to warn of
    assert listed()["D-1"]["state"] == "ready"
    fails(drover("unpark", "D-1"), 1)
    events = [row[2] for row in ledger_rows(project)["events"]]
    assert events == ["new", "park", "unpark"]


def test_park_takes_an_item_whose_file_is_gone_and_that_has_only_rounds(project):
    """An item with history (a round, no run) whose file is gone is one list names (`has no file`):
    park and unpark took only a run for history, and said `no item D-1` of it."""
    ok("new", "x")
    ok("request-changes", "D-1", input="# Wrong\n")
    (project / "items" / "D-1.md").unlink()
    assert listed()["D-1"]["state"] == "unreadable"
    assert "parked" in ok("park", "D-1", "--why", "its file is gone")
    assert ok("unpark", "D-1").startswith("D-1: unparked")


def test_park_refuses_a_done_item_and_writes_nothing(project):
    ok("new", "x")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.mark_done("D-1")
    before = snapshot(project)
    assert fails(drover("park", "D-1", "--why", "too late"), 1) == "drover: D-1 is done; nothing to park"
    assert snapshot(project) == before
    assert listed()["D-1"]["state"] == "done"


def test_request_changes_refuses_a_done_item_and_writes_nothing(project):
    """Findings on a merged item were recorded as a round no drive would ever take up: `list` said
    done, `show` said changes outstanding, and nothing pointed at a new item."""
    ok("new", "x")
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.mark_done("D-1")
    before = snapshot(project)
    said = fails(drover("request-changes", "D-1", input="# Still wrong\n"), 1)
    assert said == ("drover: D-1 is done (merged): nothing takes up changes to it; record what is left as a "
                    "new item: drover new TITLE -f D-1")
    assert snapshot(project) == before


def test_parking_a_parked_item_again_names_the_reason_it_replaces(project):
    ok("new", "x")
    assert ok("park", "D-1", "--why", "waiting for the security review") == (
        "D-1: parked for the operator: waiting for the security review\n")
    assert ok("park", "D-1", "--why", "the review said no: redesign") == (
        "D-1: parked for the operator: the review said no: redesign "
        "(was parked: waiting for the security review)\n")
    assert shown("D-1")["parked_reason"] == "the review said no: redesign"
    events = [row[2] for row in ledger_rows(project)["events"]]
    assert events == ["new", "park", "park"]


def test_the_draft_prompt_reads_the_register_row_new_issue_took(project):
    set_config(project, "tracker", 'backend = "file"')
    (project / "follow-ups.md").write_text("# Follow-ups\n\n- D-9: repr should show the algorithm\n")
    assert json.loads(ok("new", "--issue", "#3", "--json"))["origin"] == 3
    # the draft's Origin is that same row, read fresh: its number, headline and place
    origin = ok("prompt", "D-1", "--slot", "draft", "--template",
                "{{ Origin.Number }}|{{ Origin.Title }}|{{ Origin.Url }}\n")
    assert origin == "3|repr should show the algorithm|follow-ups.md:3\n"
    assert "has no issues" not in ok("prompt", "D-1", "--slot", "draft")


# --- the commit decision (SPEC 7) ----------------------------------------------------------------------------


def _commit_count(root: Path) -> int:
    return int(git(root, "rev-list", "--count", "HEAD").strip())


def test_by_default_drovers_item_edits_stay_uncommitted(project):
    before = _commit_count(project)
    ok("new", "x")
    ok("request-changes", "D-1", input="f\n")
    ok("close-changes", "D-1")
    assert _commit_count(project) == before
    assert "items/D-1.md" in git(project, "status", "--porcelain", "--untracked-files=all")


def test_commit_items_commits_only_the_item_files_with_a_clear_message(project):
    set_config(project, "project", "commit_items = true")
    git(project, "add", "drover.toml", ".gitignore")
    git(project, "commit", "-q", "-m", "drover init")
    # the operator's own work in progress, staged and unstaged, must stay out of drover's commits
    (project / "README.md").write_text("# project\nwork in progress\n")
    (project / "staged.txt").write_text("staged\n")
    git(project, "add", "staged.txt")
    base = _commit_count(project)
    ok("new", "Committed item")
    ok("request-changes", "D-1", input="the finding\n")
    ok("request-changes", "D-1", input="the finding\n")  # identical text: nothing new to commit
    ok("close-changes", "D-1")
    ok("audit", "D-1", "--level", "claimed")  # changes no file: no commit
    assert _commit_count(project) == base + 3
    log = git(project, "log", "--format=%s", "-3").splitlines()
    assert log[0].startswith("drover: ") and "D-1" in log[0] and "cleared" in log[0]
    assert "changes requested on D-1" in log[1]
    assert log[2] == "drover: new item D-1: Committed item"
    for sha in git(project, "rev-list", "-3", "HEAD").split():
        assert git(project, "show", "--name-only", "--format=", sha).split() == ["items/D-1.md"]
    status = git(project, "status", "--porcelain")
    assert " M README.md" in status and "A  staged.txt" in status
    assert "items/" not in status


# --- concurrency: real processes ----------------------------------------------------------------------------


def test_concurrent_commands_on_different_items_do_not_fail(project):
    set_config(project, "review", "max_rounds = 50")
    for n in range(3):
        ok("new", f"item {n + 1}")
    script = (
        "import sys\n"
        "from drover.cli.main import cli\n"
        "item, kind = sys.argv[1], sys.argv[2]\n"
        "for n in range(6):\n"
        "    args = ['request-changes', item, '--file', f'{item}.md'] if kind == 'rc' else "
        "['audit', item, '--level', 'claimed', '--note', str(n)]\n"
        "    try:\n"
        "        cli.main(args, prog_name='drover', standalone_mode=False)\n"
        "    except SystemExit as exc:\n"
        "        if exc.code: raise\n"
    )
    for item_id in ("D-1", "D-2"):
        (project / f"{item_id}.md").write_text(f"finding for {item_id}\n")
    jobs = [("D-1", "rc"), ("D-2", "rc"), ("D-3", "audit"), ("D-1", "audit")]
    procs = [subprocess.Popen([sys.executable, "-c", script, item, kind], cwd=project,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for item, kind in jobs]
    results = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0, 0, 0], [err for _, err in results]
    assert [row["number"] for row in shown("D-1")["rounds"]] == list(range(1, 7))
    assert [row["number"] for row in shown("D-2")["rounds"]] == list(range(1, 7))
    assert len(shown("D-3")["audits"]) == 6 and len(shown("D-1")["audits"]) == 6
    assert item_text(project, "D-1").count(CHANGES_HEADING) == 1


# --- odds and ends ---------------------------------------------------------------------------------------------


def test_a_title_is_one_line(project):
    ok("new", "two\nlines\u2028and  more")
    assert shown("D-1")["title"] == "two lines and more"


def test_a_refused_round_is_recorded_as_an_event_and_nothing_else(project):
    set_config(project, "review", "max_rounds = 1")
    ok("new", "x")
    ok("request-changes", "D-1", input="one\n")
    fails(drover("request-changes", "D-1", input="two\n"), 1)
    events = ledger_rows(project)["events"]
    detail = json.loads(events[-1][5])
    assert events[-1][2] == "request-changes" and detail["refused"] is True
    assert detail["kept"] == ".drover/parked/D-1-2.md"
    assert len(shown("D-1")["rounds"]) == 1


def test_commands_act_on_the_checkout_named_by_drover_repo(project, tmp_path, monkeypatch):
    ok("new", "x")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("DROVER_REPO", str(project))
    assert list(listed()) == ["D-1"]
    ok("request-changes", "D-1", input="from a worktree\n")
    assert "from a worktree" in item_text(project, "D-1")


def test_a_ledger_that_is_not_a_database_is_one_line(project):
    ok("new", "x")
    for suffix in ("", "-wal", "-shm"):
        (project / ".drover" / f"ledger.db{suffix}").unlink(missing_ok=True)
    (project / ".drover" / "ledger.db").write_bytes(b"not sqlite at all " * 100)
    said = fails(drover("list"), 2)
    assert "ledger.db" in said


def test_ready_means_every_dep_done_whatever_else_the_state_says(project):
    ok("new", "the dep")
    ok("new", "depends", "--dep", "D-1")
    ok("request-changes", "D-2", input="finding\n")  # "changes requested" outranks "blocked"
    assert listed()["D-2"]["state"] == "changes requested"
    assert [row["id"] for row in json.loads(ok("list", "--ready", "--json"))] == ["D-1"]
    with Ledger(project / ".drover" / "ledger.db") as ledger:
        ledger.mark_done("D-1")
    assert [row["id"] for row in json.loads(ok("list", "--ready", "--json"))] == ["D-2"]


@pytest.mark.parametrize("blocker", ["items", ".drover"])
def test_init_refuses_before_writing_when_a_file_is_in_the_way(repo, blocker):
    (repo / blocker).write_text("a file, not a folder\n")
    before = snapshot(repo)
    said = fails(drover("init"), 2)
    assert blocker in said
    assert snapshot(repo) == before


def test_a_park_that_replaces_an_agents_reason_prints_none_of_its_escapes(project):
    """Hostile review 15: an agent parks its own item with escapes in the reason; the operator's
    park that refines it printed `(was parked: <that reason>)` as it was."""
    ok("new", "Show me")
    ok("park", "D-1", "--why", "needs a decision \x1b]52;c;ZWNobyBvd25lZA==\x07")
    out = ok("park", "D-1", "--why", "waiting on the API decision")
    assert "was parked: needs a decision ?]52;c;ZWNobyBvd25lZA==?" in out and "\x1b" not in out, out


def test_init_from_a_subdirectory_starts_its_next_steps_at_the_repositorys_top(repo):
    """A new user ran init in src/pkg: its next steps said `git add drover.toml .gitignore`, which
    fails there (the files are at the top). From a subfolder the steps begin with the `cd` there."""
    sub = repo / "src" / "pkg"
    sub.mkdir(parents=True)
    os.chdir(sub)
    said = ok("init").splitlines()
    at = said.index("next steps:")
    assert said[at + 1] == "  cd ../..   # the repository's top, where drover.toml is: the steps below run there"
    assert said[at + 2].startswith("  git add drover.toml .gitignore")
