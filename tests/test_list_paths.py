"""The bulk `list` and `check` paths give exactly what the plain computations give.

list_items reads the ledger in bulk (Ledger.flags, Ledger.list_activity as tuples of a few
columns, the unfinished runs) and asks state.state_of of every item, as show asks it of one; the
catalogue sorts names in C (sorted_names); check reads only the rounds a disagreement can name
and skips the cycle search when every dep comes earlier. Each is held here to the computation it
replaced: state_of over activity()'s rows, _sort_key, every round's summary, dependency_cycles
over the whole graph.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drover.ledger import agreement
from drover import git
from drover.items import file as itemfile
from drover.ledger.activity import LIST_KEYS, no_activity
from drover.loop.checks import check_items, dependency_cycles
from drover.config import Config
from drover.ledger.catalogue import CacheRow, CachedFile, Entry, _sort_key, catalogue, sorted_names
from drover.ledger.db import Ledger
from drover.ledger.filecache import CACHE_COLUMNS, LIGHT_COLUMNS
from drover.ledger.project import Project
from drover.ledger.rows import NewRun
from drover.ledger.listing import Listed, list_items
from drover.ledger.state import Activity, ItemFacts, State, state_of, verdict_of

from helpers import git as run_git


def test_the_named_rows_name_the_columns_the_ledger_gives():
    """Rows are read by name: each named type's fields are the columns its query gives, in order."""
    assert Activity._fields == LIST_KEYS
    assert CachedFile._fields == LIGHT_COLUMNS
    assert CacheRow._fields == CACHE_COLUMNS


NAME_PARTS = ["D-1", "D-2", "D-10", "D-9", "D-01", "D-0", "D-", "D", "d-3", "D-3a", "D--3", "D-٣", "D-²",
              "a", "a-b", "Z", "", "X.Y-4", "D-12345678901234567890", "D-7 ", " D-7", "notes", "D-5\n"]


@given(st.lists(st.tuples(st.sampled_from(NAME_PARTS), st.sampled_from([".md", ".txt", "", ".md.md"])),
                unique=True, max_size=30),
       st.sampled_from(["D", "X.Y", "a"]))
def test_sorted_names_sorts_as_sort_key(parts, prefix):
    names = [stem + ext for stem, ext in parts]
    names = list(dict.fromkeys(names))
    plain = [name for _, name in sorted(((_sort_key(name[:-3], prefix), name) for name in names
                                         if name.endswith(".md")), key=lambda pair: pair[0])]
    assert sorted_names(names, prefix) == plain


def test_sorted_names_puts_numbered_ids_first_by_number_then_the_rest_by_id():
    names = ["D-10.md", "notes.md", "D-2.md", "D-01.md", "D-9.txt", "D-3a.md", "D-1.md", "A.md", "D-12345678901234567890.md"]
    assert sorted_names(names, "D") == ["D-1.md", "D-2.md", "D-10.md", "A.md", "D-01.md", "D-3a.md", "notes.md",
                                        "D-12345678901234567890.md"]


def flagged_items(ledger: Ledger) -> dict[str, dict[str, object]]:
    """Items done or parked, by id, read plainly (what Ledger.flags answers from fewer columns)."""
    rows = ledger.conn.execute("SELECT id, done, parked, parked_reason FROM items WHERE done OR parked")
    return {row[0]: dict(zip(("id", "done", "parked", "parked_reason"), row)) for row in rows}


def round_summary(ledger: Ledger) -> dict[str, dict[str, int]]:
    """Per item: its rounds in all, uncleared, and the newest number, read over every item."""
    rows = ledger.conn.execute("SELECT item, count(*), sum(cleared_at IS NULL), max(number) FROM rounds GROUP BY item")
    return {row[0]: {"total": row[1], "open": row[2], "newest": row[3]} for row in rows}


# --- list_items against the plain computation ------------------------------------------------

def plain_list(project: Project, ledger: Ledger) -> list[Listed]:
    """state_of over what the plain reads give: every items row, activity()'s rows by name."""
    entries = catalogue(project, ledger)
    flagged = flagged_items(ledger)
    done = {item_id for item_id, row in flagged.items() if row.get("done")}
    activity = ledger.activity(done=False)
    heads = git.branch_heads(project.root)
    match = itemfile.id_pattern(project.config.prefix).match
    history = {row[0] for row in ledger.conn.execute("SELECT item FROM runs UNION SELECT item FROM rounds")}
    listed = []
    for item_id, found in entries.items():
        bad = [dep for dep in found.deps if not match(dep)]
        missing = [dep for dep in found.deps if match(dep) and dep not in done]
        row = flagged.get(item_id, {})
        act = Activity.of(activity[item_id]) if item_id in activity else None
        deps_done = not bad and not missing
        state, note = state_of(ItemFacts(
            unreadable=found.problem if found.unreadable else "", done=bool(row.get("done")),
            parked=(row.get("parked_reason") or "") if row.get("parked") else None,
            activity=verdict_of(act, heads.get(act.branch or "", "") if act else ""),
            outstanding=found.outstanding, placeholder=found.placeholder, deps_done=deps_done))
        if state == State.UNREADABLE:
            pass
        elif bad:
            note = "; ".join(f"dep {dep} {itemfile.NOT_AN_ID}" for dep in bad)
        elif state == State.BLOCKED:
            note = "waiting on " + ", ".join(
                dep + (" (parked)" if flagged.get(dep, {}).get("parked") else
                       "" if dep in entries or dep in history else " (no such item)") for dep in missing)
        listed.append(Listed(found, state, note, deps_done))
    return listed


def _project(root: Path) -> Project:
    (root / "items").mkdir()
    run_git(root, "init", "-q", "-b", "main")
    run_git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    return Project(root=root, config=Config())


def _item(project: Project, stem: str, deps: str = "", changes: str = "") -> None:
    text = f"---\nid: {stem}\ntitle: item {stem}\n" + (f"deps: [{deps}]\n" if deps else "") + "---\n\nbody\n"
    project.root.joinpath("items", f"{stem}.md").write_text(text + changes)


def test_list_items_agrees_with_the_plain_computation(tmp_path):
    """Every state and note, on a ledger with runs of each outcome, approvals on and off the
    branch's head, parked, done and re-opened items, bad, missing and unreadable deps."""
    project = _project(tmp_path)
    head = run_git(tmp_path, "rev-parse", "HEAD").strip()
    run_git(tmp_path, "branch", "drover/d-8")
    run_git(tmp_path, "branch", "drover/d-9")
    for n in range(1, 16):
        deps = {3: "D-1, D-2", 4: "D-99", 5: "not an id, D-1", 6: "D-14", 10: "D-2", 11: "D-4", 12: "D-7"}.get(n, "")
        _item(project, f"D-{n}", deps, "## Changes requested\n\nfix it\n" if n == 7 else "")
    _item(project, "D-14", "D-1")
    _item(project, "D-16", "D-98")  # a dep that names no item: `(no such item)`
    project.root.joinpath("items", "D-15.md").write_text("---\nid: D-15\ntitle: [\n---\n")
    project.root.joinpath("items", "notes.md").write_text("---\ntitle: loose\n---\n")
    runs = {  # item -> (finished, outcome, exit status, branch)
        "D-2": ("2026-01-01T00:00:00.000Z", "exited", 0, "drover/d-2"),
        "D-3": (None, None, None, "drover/d-3"),
        "D-4": ("2026-01-01T00:00:00.000Z", "timeout", None, "drover/d-4"),
        "D-5": ("2026-01-01T00:00:00.000Z", "exited", 2, "drover/d-5"),
        "D-6": ("2026-01-01T00:00:00.000Z", "crashed", None, "drover/d-6"),
        "D-8": ("2026-01-01T00:00:00.000Z", "exited", 0, "drover/d-8"),
        "D-9": ("2026-01-01T00:00:00.000Z", "exited", 0, "drover/d-9"),
        "D-10": ("2026-01-01T00:00:00.000Z", "exited", 1, "drover/d-10"),
    }
    with Ledger(project.ledger_path) as ledger:
        for n, (item, (finished, outcome, status, branch)) in enumerate(runs.items()):
            ledger.start_run(NewRun(id=f"r{n}", item=item, slot="implement", agent="claude",
                                    started="2026-01-01T00:00:00.000Z", branch=branch))
            if finished:
                ledger.finish_run(f"r{n}", status, outcome)
        ledger.add_round("D-8", "0" * 64, "a finding", "", "codex")
        ledger.clear_round("D-8", "codex")
        ledger.add_audit("D-8", "reviewed", "codex", "", head=head)  # approved at the branch's head
        ledger.add_audit("D-9", "verified", "codex", "", head="0" * 40)  # the branch moved since
        ledger.add_audit("D-10", "reviewed", "codex", "")  # an approval after a failed run
        ledger.add_audit("D-12", "reviewed", "codex", "", head=head)  # an audit alone lists nothing
        ledger.mark_done("D-1")
        ledger.mark_done("D-2")
        ledger.park("D-11", "waiting")
        ledger.park("D-13", "")
        ledger.mark_done("D-13")
        ledger.park("D-12", "on hold")
        ledger.unpark("D-12")
        fast = list_items(project, ledger)
        assert fast == plain_list(project, ledger)
    states = {row.entry.id: row.state for row in fast}
    assert {State.DONE, State.PARKED, State.BLOCKED, State.READY, State.INTERRUPTED, State.FAILED, State.APPROVED,
            State.IN_REVIEW, State.CHANGES_REQUESTED, State.UNREADABLE} <= set(states.values())
    assert [row.entry.id for row in fast][-1] == "notes"


# --- check ----------------------------------------------------------------------------------

def test_check_warns_of_the_items_whose_state_is_needs_requirements(tmp_path):
    """check's warning follows the state: a placeholder item in review, done or parked needs nothing."""
    project = _project(tmp_path)
    for n in range(1, 5):
        project.root.joinpath("items", f"D-{n}.md").write_text(itemfile.new_item_text(f"D-{n}", f"item {n}", "feature", []))
    _item(project, "D-5")
    with Ledger(project.ledger_path) as ledger:
        ledger.start_run(NewRun(id="r1", item="D-2", slot="implement", agent="a", started="2026-01-01T00:00:00.000Z",
                                branch="drover/d-2"))
        ledger.finish_run("r1", 0, "exited")
        ledger.mark_done("D-3")
        ledger.park("D-4", "later")
        findings, _ = check_items(project, ledger)
        states = {row.entry.id: row.state for row in list_items(project, ledger)}
    warned = [found.message.split()[1] for found in findings if "needs requirements" in found.message]
    assert warned == [item_id for item_id, state in states.items() if state == State.NEEDS_REQUIREMENTS] == ["D-1"]
    assert states["D-2"] == State.IN_REVIEW and states["D-5"] == State.READY



GRAPHS = [
    {1: "", 2: "D-1", 3: "D-1, D-2"},  # every dep earlier: the search is skipped
    {1: "D-2", 2: "D-1"},
    {1: "D-1"},
    {1: "D-3", 2: "D-1", 3: "D-2", 4: "D-4, D-1"},
    {1: "", 2: "D-3", 3: "D-9", 10: "D-2, D-3"},
    {2: "D-10", 10: "D-2", 5: "D-5"},
]


@pytest.mark.parametrize("graph", GRAPHS)
def test_check_finds_every_cycle_the_whole_search_finds(tmp_path, graph):
    project = _project(tmp_path)
    for n, deps in graph.items():
        _item(project, f"D-{n}", deps)
    with Ledger(project.ledger_path) as ledger:
        findings, _ = check_items(project, ledger)
        entries = catalogue(project, ledger)
    cycles = [f"items/{cycle[0]}.md: dependency cycle: {' -> '.join(cycle)}"
              for cycle in dependency_cycles({item_id: found.deps for item_id, found in entries.items()})]
    assert [found.message for found in findings if ": dependency cycle: " in found.message] == cycles


def plain_disagreements(ledger: Ledger, entries: dict[str, Entry]) -> list[str]:
    """The items whose Changes and rounds disagree, from every item's round summary."""
    summary = round_summary(ledger)
    said = []
    for item_id, found in entries.items():
        rounds = summary.get(item_id)
        if found.unreadable or rounds is None:
            continue
        if found.outstanding and not rounds["open"]:
            said.append(f"{item_id} outstanding {rounds['newest']}")
        elif found.cleared and rounds["open"]:
            said.append(f"{item_id} cleared {rounds['newest']}")
    return said


def _rounds_project(root: Path) -> Project:
    """Items whose Changes are outstanding or cleared, against rounds all cleared, some, or none."""
    project = _project(root)
    outstanding, cleared = "## Changes requested\n\nfix it\n", f"## Changes requested\n\n{itemfile.CLEARED_MARKER}\n"
    for n in range(1, 9):
        _item(project, f"D-{n}", changes=outstanding if n % 2 else cleared)
    with Ledger(project.ledger_path) as ledger:
        for n in range(1, 7):  # D-7 and D-8 have no rounds
            ledger.add_round(f"D-{n}", "0" * 64, "a finding", "", "codex")
            ledger.add_round(f"D-{n}", "1" * 64, "another", "", "codex")
            if n in (1, 2, 3):
                ledger.clear_round(f"D-{n}", "codex")
            if n in (1, 4):
                with ledger.write():
                    ledger.conn.execute("UPDATE rounds SET cleared_at = 'x' WHERE item = ?", (f"D-{n}",))
    return project


@pytest.mark.parametrize("few", [agreement.FEW, 0])
def test_disagreements_name_what_every_round_summary_names(tmp_path, monkeypatch, few):
    monkeypatch.setattr(agreement, "FEW", few)
    project = _rounds_project(tmp_path)
    with Ledger(project.ledger_path) as ledger:
        entries = catalogue(project, ledger)
        lines = [said for _, _, said in agreement.disagreeing(ledger, entries)]
        expected = plain_disagreements(ledger, entries)
    said = [f"{line.split()[0]} {'outstanding' if 'holds findings' in line else 'cleared'} "
            f"{re.search(r'round ([0-9]+)', line)[1]}" for line in lines]
    assert said == expected and len(expected) >= 2


def test_flags_and_list_activity_read_what_flagged_items_and_activity_read(tmp_path):
    project = _project(tmp_path)
    with Ledger(project.ledger_path) as ledger:
        for n, slot in enumerate(["implement", "review", "implement"]):
            ledger.start_run(NewRun(id=f"r{n}", item=f"D-{n + 1}", slot=slot, agent="a",
                                    started="2026-01-01T00:00:00.000Z", branch="b"))
        ledger.add_audit("D-9", "reviewed", "codex", "")
        with ledger.write():  # an audit of an item with no items row, runs or rounds lists nothing
            ledger.conn.execute("INSERT INTO audits (item, level, by, at) VALUES ('D-10', 'verified', 'x', 'y')")
        ledger.add_round("D-4", "0" * 64, "a finding", "", "codex")
        ledger.mark_done("D-1")
        ledger.park("D-5", "why")
        ledger.park("D-6", "")
        ledger.mark_done("D-6")
        done, parked = ledger.flags()
        flagged = flagged_items(ledger)
        assert done == {item for item, row in flagged.items() if row["done"]}
        assert parked == {item: row["parked_reason"] or "" for item, row in flagged.items()
                          if row["parked"] and not row["done"]}
        slow = {item: tuple(row.get(key) for key in LIST_KEYS) for item, row in ledger.activity(done=False).items()}
        fast = ledger.list_activity()
        # an item list_activity leaves out is one activity() gives no_activity's row
        assert {item: fast.get(item, tuple(no_activity(item).get(key) for key in LIST_KEYS)) for item in slow} == slow
        assert set(fast) == {"D-2", "D-3", "D-4", "D-9"} and set(slow) == set(fast) | {"D-5"}


# --- an item whose file is gone ---------------------------------------------------------------

def _gone_project(root: Path) -> Project:
    """D-1..D-6 with files; then the files of D-2 (a run, parked), D-3 (a round, done), D-4 (made
    by `new` alone) and D-6 (parked, no run or round) deleted."""
    project = _project(root)
    for n in range(1, 7):
        _item(project, f"D-{n}")
    with Ledger(project.ledger_path) as ledger:
        ledger.start_run(NewRun(id="r1", item="D-2", slot="implement", agent="a", started="2026-01-01T00:00:00.000Z",
                                branch="drover/d-2"))
        ledger.finish_run("r1", 0, "exited")
        ledger.park("D-2", "later")
        ledger.add_round("D-3", "0" * 64, "a finding", "", "codex")
        ledger.mark_done("D-3")
        with ledger.write():
            ledger.conn.execute("INSERT INTO items (id, number, created_at) VALUES ('D-4', 4, 'x')")
        ledger.park("D-6", "never started")
        list_items(project, ledger)  # the cache knew every file
    for n in (2, 3, 4, 6):
        project.root.joinpath("items", f"D-{n}.md").unlink()
    return project


def test_list_shows_an_item_whose_file_is_gone_as_show_does(tmp_path):
    """An item with runs or rounds and no file is an unreadable row that `has no file`, in id order,
    in the state show gives it; one the ledger knows without runs or rounds is no item, as for show."""
    from drover.errors import UsageError
    from drover.ledger.itemstate import item_state

    project = _gone_project(tmp_path)
    with Ledger(project.ledger_path) as ledger:
        listed = list_items(project, ledger)
        assert [row.entry.id for row in listed] == ["D-1", "D-2", "D-3", "D-5"]
        for row in listed:
            shown = item_state(project, ledger, row.entry.id)
            assert (row.state, row.entry.problem if row.entry.unreadable else "") == \
                (shown.state, shown.entry.problem if shown.entry.unreadable else "")
        gone = {row.entry.id: (row.state, row.note) for row in listed if row.entry.unreadable}
        assert gone == {"D-2": (State.UNREADABLE, "items/D-2.md: D-2 has no file"),
                        "D-3": (State.UNREADABLE, "items/D-3.md: D-3 has no file")}
        for item_id in ("D-4", "D-6"):
            with pytest.raises(UsageError, match=f"no item {item_id}"):
                item_state(project, ledger, item_id)


def test_check_names_an_item_whose_file_is_gone(tmp_path):
    """An error, as for any unreadable item; a warning for a done item (its file deleted after the merge)."""
    project = _gone_project(tmp_path)
    with Ledger(project.ledger_path) as ledger:
        findings, _ = check_items(project, ledger)
    assert [(found.message, found.error) for found in findings] == [
        ("items/D-2.md: D-2 has no file (the ledger has its runs or rounds: restore the file from git)", True),
        ("items/D-3.md: D-3 has no file (it is done; the ledger keeps its history)", False),
    ]


def test_list_and_check_name_an_item_whose_file_is_gone_on_the_command_line(repo):
    """The new user's case: `list`, `list --json` and `check` name the item show calls `has no file`."""
    import json

    from helpers import invoke

    assert invoke("init").exit_code == 0
    for title in ("a", "b", "c"):
        assert invoke("new", title).exit_code == 0
    with Ledger(repo / ".drover" / "ledger.db") as ledger:
        ledger.add_round("D-1", "0" * 64, "bad", "", "codex")
        ledger.park("D-1", "later")
    (repo / "items" / "D-1.md").unlink()
    (repo / "items" / "D-3.md").unlink()  # made by new alone: no item, for list, check and show
    listed = invoke("list")
    assert listed.exit_code == 0
    assert listed.output.splitlines()[0].split(None, 2) == ["D-1", "unreadable", "(items/D-1.md: D-1 has no file)"]
    assert [line.split()[0] for line in listed.output.splitlines()] == ["D-1", "D-2"]
    rows = json.loads(invoke("list", "--json").output)
    assert [(row["id"], row["state"], row["note"]) for row in rows][0] == \
        ("D-1", "unreadable", "items/D-1.md: D-1 has no file")
    checked = invoke("check")
    assert checked.exit_code == 1
    assert "items/D-1.md: D-1 has no file (the ledger has its runs or rounds: restore the file from git)" \
        in checked.output.splitlines()
    assert "D-3" not in checked.output
    assert "unreadable: items/D-1.md: D-1 has no file" in invoke("show", "D-1").output
    assert invoke("show", "D-3").exit_code == 2


def test_each_kind_of_disagreement_has_its_own_code(tmp_path):
    """What `check --json` calls each line: a Changes section the rounds disagree with, a write
    no recovery finished, a commit git refused; none of them `other`."""
    from drover.errors import ProblemCode

    project = _rounds_project(tmp_path)
    with Ledger(project.ledger_path) as ledger:
        entries = catalogue(project, ledger)  # before the writes below: taking the lock would finish them
        with ledger.write():
            ledger.add_intent("request-changes", "D-7", project.root / "items" / "D-7.md", "text", None)
            owed = ledger.owe_commit("D-8", project.root, project.root / "items" / "D-8.md", "text", "drover: x")
            ledger.conn.execute("UPDATE owed_commits SET failed = 'git said no' WHERE id = ?", (owed,))
        found = agreement.disagreeing(ledger, entries)
    codes = {code for code, _, _ in found}
    assert codes == {ProblemCode.CHANGES_DISAGREE, ProblemCode.WRITE_INTERRUPTED, ProblemCode.COMMIT_OWED}
    assert {path for code, path, _ in found if code != ProblemCode.CHANGES_DISAGREE} == {
        str(project.root / "items" / "D-7.md"), "items/D-8.md"}
    assert all(said.startswith(("an interrupted", "the commit")) for code, _, said in found
               if code != ProblemCode.CHANGES_DISAGREE)
