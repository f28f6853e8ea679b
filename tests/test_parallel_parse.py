"""Changed item files parsed in a pool of worker processes give what the serial parse gives: the
same list, check and cache rows, unreadable and hostile items included, in the same order; a
worker that dies leaves its files to the parent. Real processes, files and ledgers."""
from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from helpers import HOSTILE_FRONTMATTER, ledger_tables, run

# the changed files parsed in worker processes, or all in-process
PARALLEL = {"DROVER_PARALLEL_PARSE_AT": "1"}
SERIAL = {"DROVER_PARALLEL_PARSE_AT": "1000000"}


def item(item_id: str, front: str, body: str = "## Requirements\n\n- x\n") -> str:
    return f"---\nid: {item_id}\n{front}---\n\n{body}"


def fill(root) -> None:
    """Readable items of every shape, and every kind of unreadable one, under one prefix."""
    items = root / "items"
    files = {
        "D-1.md": item("D-1", "title: first\nkind: bug\ndeps: []\n"),
        "D-2.md": item("D-2", "title: second\ndeps: [D-1, D-9]\n", "## Changes requested\n\nFix it.\n"),
        "D-3.md": item("D-3", "title: third\ndeps:\n  - D-2\n  - nonsense\n",
                       "## Changes requested\n\n<!-- drover: cleared -->\nNothing is outstanding.\n"),
        "D-4.md": item("D-4", "title: dated\ndue: 2026-01-02\n"),  # a date: JSON by str
        "D-5.md": item("D-5", "title: shelved\nshelved: yes\n"),
        "D-6.md": item("D-7", "title: misnamed\n"),
        "D-8.md": item("D-8", "title: no body\n", ""),
        "D-10.md": "no frontmatter at all\n",
        "D-11.md": item("D-11", "title: 'quoted: yes'\nkind: \"feature\"\n"),
        "D-12.md": "---\r\nid: D-12\r\ntitle: crlf\r\n---\r\n\r\n## Requirements\r\n\r\n- x\r\n",
        "notes.md": item("notes", "title: not an id\n"),
    }
    for number, (front, _) in enumerate(HOSTILE_FRONTMATTER, start=20):
        files[f"D-{number}.md"] = item(f"D-{number}", front)
    for number in range(40, 70):
        files[f"D-{number}.md"] = item(f"D-{number}", f"title: item {number}\ndeps: [D-{number - 1}]\n")
    for name, text in files.items():
        (items / name).write_text(text, newline="")
    (items / "D-13.md").write_bytes(b"---\nid: D-13\ntitle: \xff\n---\n\nbody\n")  # not UTF-8
    (items / "D-14.md").mkdir()  # cannot be read at all


@pytest.fixture
def twins(repo, tmp_path):
    """Two copies of one project, its cache cold in both."""
    assert run(repo, "init").returncode == 0
    fill(repo)
    other = tmp_path / "twin"
    shutil.copytree(repo, other, symlinks=True)
    return repo, other


def outputs(root, env) -> list[tuple[int, str, str]]:
    """list and check, plain and JSON, with the project's own folder named ROOT (an error names it)."""
    return [(done.returncode, done.stdout.replace(str(root), "ROOT"), done.stderr)
            for done in (run(root, *args, env=env) for args in (("list",), ("list", "--json"), ("check",), ("check", "--json")))]


def cache_rows(root) -> list[tuple]:
    """The metadata cache's rows but their mtimes (the twins' files written after the copy differ)."""
    return [tuple(str(value).replace(str(root), "ROOT") for value in row[:2] + row[3:])
            for row in ledger_tables(root / ".drover" / "ledger.db")["item_files"]]


def test_workers_give_what_the_serial_parse_gives(twins):
    parallel, serial = twins
    first = outputs(parallel, PARALLEL)
    assert first == outputs(serial, SERIAL)
    assert "D-20" in first[0][1] and "has an id that disagrees" in first[2][1] and "D-14" in first[2][1]
    assert cache_rows(parallel) == cache_rows(serial)
    # a touch (same bytes, the digest answers) of every file, and new bytes in some
    for root in twins:
        for path in (root / "items").glob("*.md"):
            if path.is_file():
                os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
        (root / "items" / "D-41.md").write_text(item("D-41", "title: renamed\n"))
        (root / "items" / "D-5.md").write_text(item("D-5", "title: unshelved\n"))
        (root / "items" / "D-42.md").unlink()
    again = outputs(parallel, PARALLEL)
    assert again == outputs(serial, SERIAL) and "renamed" in again[0][1] and again != first
    assert cache_rows(parallel) == cache_rows(serial)


# edits of the body alone (the frontmatter's bytes stay), and two that are not
BODY_EDITS = {
    "D-1.md": lambda text: text + "\n## Changes requested\n\nFix it.\n",  # findings requested
    "D-2.md": lambda text: text.replace("Fix it.", "<!-- drover: cleared -->\nDone."),  # cleared
    "D-3.md": lambda text: text.split("## Changes requested")[0],  # the section gone
    "D-40.md": lambda text: text.split("---\n\n")[0] + "---\n\n  \n",  # no body left
    "D-8.md": lambda text: text + "## Requirements\n\n- now it has one\n",  # unreadable, then a body
    "D-11.md": lambda text: text + "\nmore\n",
    "D-12.md": lambda text: text + "more\r\n",  # CRLF
    "D-20.md": lambda text: text + "\nmore\n",  # its frontmatter will not parse
    "D-41.md": lambda text: text.replace("title: item 41", "title: renamed"),  # the frontmatter: read again
    "D-43.md": lambda text: text.split("---\n\n")[1],  # no frontmatter left
}


@pytest.mark.parametrize("env", [PARALLEL, SERIAL], ids=["workers", "serial"])
def test_a_body_edit_gives_what_a_whole_parse_gives(twins, env):
    """A readable item whose frontmatter's bytes are those the cache knew has only its body read;
    what list, check and the cache then hold is what parsing every file from nothing gives."""
    edited, fresh = twins
    for root in twins:
        assert run(root, "list", env=env).returncode in (0, 2)  # each cache warm
        for name, edit in BODY_EDITS.items():
            path = root / "items" / name
            path.write_bytes(edit(path.read_bytes().decode()).encode())
    with sqlite3.connect(fresh / ".drover" / "ledger.db") as conn:
        conn.execute("DELETE FROM item_files")  # every file parsed whole
    conn.close()
    after = outputs(edited, env)
    assert after == outputs(fresh, env)
    assert cache_rows(edited) == cache_rows(fresh)
    listed = after[0][1]
    assert "renamed" in listed and "D-40" in after[2][1] and "has no body" in after[2][1]
    states = {line.split()[0]: line for line in listed.splitlines() if line.startswith("D-")}
    assert "changes requested" in states["D-1"] and "changes requested" not in states["D-2"]
    assert "unreadable" not in states["D-8"]


def test_only_the_body_is_read_when_the_frontmatter_is_the_known_one(tmp_path):
    from drover.items import parsing
    from drover.items.parsing import BodyRead, Job, Parsed

    folder = str(tmp_path) + os.sep
    path = tmp_path / "D-1.md"
    path.write_text(item("D-1", "title: first\ndeps: [D-2]\n"))
    whole = parsing.parse_one(folder, Job("D-1.md"), "D")
    assert isinstance(whole, Parsed) and whole.fields.outstanding is False  # nothing outstanding
    front = whole.front
    path.write_text(path.read_text() + "\n## Changes requested\n\nFix it.\n")
    body_only = parsing.parse_one(folder, Job("D-1.md", front=front), "D")
    assert body_only == BodyRead(parsing.digest(path.read_bytes()), front, True, False, False)
    another = parsing.parse_one(folder, Job("D-1.md", front="0" * 32), "D")  # another front: whole
    assert isinstance(another, Parsed) and another.fields.outstanding is True
    path.write_text(item("D-1", "title: first\ndeps: [D-2]\n", "\n"))  # no body: whole, and unreadable
    empty = parsing.parse_one(folder, Job("D-1.md", front=front), "D")
    assert isinstance(empty, Parsed) and empty.fields.unreadable == "has no body"
    path.write_text(item("D-1", "title: changed\ndeps: [D-2]\n"))
    changed = parsing.parse_one(folder, Job("D-1.md", front=front), "D")
    assert isinstance(changed, Parsed) and changed.fields.title == "changed" and changed.front != front


def test_the_frontmatter_is_kept_as_json_with_dates_as_text(tmp_path):
    import json

    from drover.items import parsing

    path = tmp_path / "D-4.md"
    path.write_text(item("D-4", "title: dated\ndue: 2026-01-02\nlabels: [a, 'é']\n"))
    found = parsing.fields(str(path), "D-4.md", "D")
    assert json.loads(found.meta_json) == {"id": "D-4", "title": "dated", "due": "2026-01-02", "labels": ["a", "é"]}
    assert found.meta_json == json.dumps(json.loads(found.meta_json))  # json.dumps' own text


@pytest.mark.parametrize("length", [0, 1, 700, 65536, 65537, 200_000])
def test_a_read_in_the_open_folder_gives_every_byte_whatever_size_it_was_told(tmp_path, length):
    """A read in an open folder stops after one read only when that read gives the size a stat said; a size that
    is wrong (the file changed since) or unknown costs more reads, never bytes."""
    from drover.items import parsing

    data = bytes(range(256)) * (length // 256) + b"x" * (length % 256)
    (tmp_path / "D-1.md").write_bytes(data)
    at = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for told in {length, -1, 0, length // 2, length + 1, length * 2 + 5}:
            assert parsing.read("D-1.md", at, told) == data, told
        assert parsing.read("D-2.md", at, 10) is None
    finally:
        os.close(at)


def test_a_worker_that_dies_leaves_its_files_to_the_parent(repo, monkeypatch):
    import multiprocessing
    import signal

    from drover.items import parsing
    from drover.items.parsing import Job, Unchanged, BodyRead, Parsed

    assert run(repo, "init").returncode == 0
    fill(repo)
    folder = str(repo / "items")
    names = sorted(name for name in os.listdir(folder) if name.endswith(".md"))
    sizes = [os.path.getsize(os.path.join(folder, name)) for name in names]
    # the size a stat gave, none, and a wrong one (the file changed since): each read whole
    told = [size if index % 3 == 0 else -1 if index % 3 == 1 else size // 2 for index, size in enumerate(sizes)]
    jobs = [Job(name, size=size) for name, size in zip(names, told)]
    serial = [parsing.parse_one(folder + os.sep, Job(name), "D") for name in names]
    monkeypatch.setenv("DROVER_PARALLEL_PARSE_AT", "1")
    monkeypatch.setattr(parsing, "BATCH", 5)
    assert parsing._workers(len(jobs)) >= 2 or (os.cpu_count() or 1) < 2
    assert list(parsing.parse_changed(folder, "D", jobs)) == serial

    # digests the cache knows, right (a touch) and wrong (same size, new bytes), among new sizes;
    # and frontmatter digests, right (the body alone changed) and wrong
    parsed = [found for found in serial if isinstance(found, Parsed)]
    assert len(parsed) == len(serial)
    known = [found.digest if index % 3 == 0 else "0" * 32 if index % 3 == 1 else None
             for index, found in enumerate(parsed)]
    fronts = [found.front if index % 2 else "0" * 32 for index, found in enumerate(parsed)]
    mixed = [Job(name, digest, front, size) for name, digest, front, size in zip(names, known, fronts, told)]
    expected = [parsing.parse_one(folder + os.sep, job, "D") for job in mixed]
    assert sum(isinstance(found, Unchanged) for found in expected) > 5
    assert sum(isinstance(found, BodyRead) for found in expected) > 5
    assert list(parsing.parse_changed(folder, "D", mixed)) == expected

    # every worker killed once the first batch is in: the rest is parsed here, in order
    outcomes = parsing.parse_changed(folder, "D", jobs)
    got = [next(outcomes)]
    workers = multiprocessing.active_children()
    assert workers
    for worker in workers:
        os.kill(worker.pid, signal.SIGKILL)
    got.extend(outcomes)
    assert got == serial
