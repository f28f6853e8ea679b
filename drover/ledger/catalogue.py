"""The catalogue: every item file's entry, through the ledger's metadata cache (parse only what changed).

A cache row (item_files) keeps what the catalogue needs of a file, with the file's size and
mtime, the digest of its bytes and the digest of its frontmatter's text. A file whose size and
mtime are its row's is not read; one with a new mtime is read, and parsed only when its bytes'
digest differs from the row's (a checkout or a touch gives every file a new mtime and few new
bytes); of a readable item whose frontmatter's digest is the row's, only the body is read.
"""
from __future__ import annotations

import gc
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple, Union

from drover.errors import located
from drover.git.files import read_regular
from drover.items import file as itemfile
from drover.items import parsing
from drover.items.parsing import Fields, Job, Unchanged
from drover.ledger.db import Ledger
from drover.ledger.project import Project

# The meta_json of a catalogue entry: not read (Entry.meta then fails loudly rather than say {}).
NO_META = ""
# Fresh cache rows are written this many at a time, so a cold catalogue does not hold them all.
CACHE_BATCH = 2000


class Entry(NamedTuple):
    """What the catalogue knows of one item file, from its cache row or a fresh parse (parsing.Fields, and where it is).

    The frontmatter stays JSON text until `meta` is asked for; the catalogue's entries do not
    carry it at all (NO_META): nothing that walks every item needs it, and it is a row's longest text.
    """

    id: str
    rel: str
    title: str = ""
    kind: str = ""
    deps: tuple[str, ...] = ()
    meta_json: str = "{}"
    outstanding: bool = False
    cleared: bool = False
    unreadable: str = ""
    detail: str = ""
    line: int | None = None
    placeholder: bool = False  # the requirements are still `drover new`'s placeholder

    @property
    def meta(self) -> dict[str, Any]:
        """The frontmatter as JSON keeps it (dates and other values as text)."""
        return json.loads(self.meta_json) if self.meta_json != "{}" else {}

    @property
    def problem(self) -> str:
        """One line naming file and line: what check, list and show print for an unreadable item."""
        return located(self.rel, self.line, f"{self.id} {self.unreadable}" + (f" ({self.detail})" if self.detail else ""))


class CachedFile(NamedTuple):
    """A cache row without its frontmatter and digests (Ledger.cached_light: LIGHT_COLUMNS)."""

    path: str
    size: int
    mtime_ns: int
    id: str
    title: str | None
    kind: str | None
    deps: str | None  # JSON
    outstanding: int
    cleared: int
    unreadable: str | None
    detail: str | None
    line: int | None
    placeholder: int


class CacheRow(NamedTuple):
    """A whole cache row, as Ledger.cached_files_for gives it and Ledger.store_files takes it (CACHE_COLUMNS)."""

    path: str
    size: int
    mtime_ns: int
    id: str
    title: str | None
    kind: str | None
    deps: str | None  # JSON
    meta: str | None  # JSON
    outstanding: int
    cleared: int
    unreadable: str | None
    detail: str | None
    line: int | None
    digest: str | None
    front: str | None
    placeholder: int
    exact: int = 0


class BodyUpdate(NamedTuple):
    """What a body decides of a row whose frontmatter held (Ledger.store_files' `bodies`)."""

    size: int
    mtime_ns: int
    outstanding: int
    cleared: int
    placeholder: int
    digest: str
    path: str


class Changed(NamedTuple):
    """A file whose size or mtime its row does not have (or that has no row)."""

    name: str
    size: int
    mtime_ns: int
    row: CachedFile | None


def _entry(row: Union[CachedFile, CacheRow], meta_json: str = NO_META, deps: tuple[str, ...] | None = None) -> Entry:
    """The entry of a cache row (`deps`: its deps, when decoded already)."""
    return Entry(row.id, row.path, row.title or "", row.kind or "", _deps(row.deps) if deps is None else deps, meta_json,
                 bool(row.outstanding), bool(row.cleared), row.unreadable or "", row.detail or "", row.line,
                 bool(row.placeholder))


def _entry_of(fields: Fields, rel: str, meta: bool = True) -> Entry:
    return Entry(fields.id, rel, fields.title, fields.kind, fields.deps, fields.meta_json if meta else NO_META,
                 fields.outstanding, fields.cleared, fields.unreadable, fields.detail, fields.line, fields.placeholder)


def _cache_row(rel: str, size: int, mtime_ns: int, parsed: parsing.Parsed) -> CacheRow:
    found = parsed.fields
    return CacheRow(rel, size, mtime_ns, found.id, found.title, found.kind, json.dumps(list(found.deps)),
                    found.meta_json, int(found.outstanding), int(found.cleared), found.unreadable, found.detail,
                    found.line, parsed.digest, parsed.front, int(found.placeholder), int(found.exact))


def _deps(text: str | None) -> tuple[str, ...]:
    return tuple(json.loads(text)) if text and text != "[]" else ()


def _every_deps(rows: list[CachedFile]) -> list[tuple[str, ...]]:
    """_deps of each row, through one json.loads for them all (one per row cost twice as much)."""
    return [tuple(deps) for deps in json.loads("[" + ",".join(row.deps or "[]" for row in rows) + "]")]


def catalogue(project: Project, ledger: Ledger) -> dict[str, Entry]:
    """Every item file's entry, by id (its file name), in the order of sorted_names; the entries
    leave the frontmatter out (entries_for gives it, Ledger.cached_metas searches it)."""
    prefix = project.config.prefix
    folder = str(project.items_dir)
    base, within = project.item_rel(""), folder + os.sep
    try:
        names = sorted_names(os.listdir(folder), prefix, keep=lambda name: not for_people(within + name))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    ledger.cache_under(prefix)
    cache = ledger.cached_light()
    entries: dict[str, Entry] = {}  # each item's place in the order, its entry filled below
    kept: list[CachedFile] = []  # the rows of the files whose size and mtime they have
    changed: list[Changed] = []
    for name in names:
        light = cache.pop(base + name, None)  # what is left in the cache at the end is stale
        row = None if light is None else CachedFile._make(light)
        try:
            stat = os.stat(within + name)
        except FileNotFoundError:
            continue  # gone since the listing
        except OSError:  # a link in a loop, say: its read fails too, and the parse says why, each time
            entries[name[:-3]] = _PENDING
            changed.append(Changed(name, -1, -1, row))
            continue
        entries[name[:-3]] = _PENDING
        if row is not None and row.size == stat.st_size and row.mtime_ns == stat.st_mtime_ns:
            kept.append(row)
        else:
            changed.append(Changed(name, stat.st_size, stat.st_mtime_ns, row))
    for row, deps in zip(kept, _every_deps(kept)):
        entries[row.path[len(base):-3]] = _entry(row, deps=deps)
    _refresh(folder, base, prefix, changed, entries, ledger)
    ledger.store_files([], list(cache))
    return entries


def with_history(ledger: Ledger, item_ids: Collection[str]) -> set[str]:
    """The ids of `item_ids` the ledger has history of: a run or a round.

    The one rule for an item whose file is gone: with history it is an unreadable item that `has
    no file` (show, list and check say so); without, such as an item `new` made whose file was
    deleted before any run, it is no item (show: `no item D-3`), its id still taken.
    """
    ids = list(item_ids)
    found: set[str] = set()
    for start in range(0, len(ids), 400):  # at most 800 parameters a query: SQLite's limit was 999
        chunk = ids[start:start + 400]
        marks = ",".join("?" * len(chunk))
        found.update(row[0] for row in ledger.conn.execute(
            f"SELECT item FROM runs WHERE item IN ({marks}) UNION SELECT item FROM rounds WHERE item IN ({marks})",
            chunk + chunk))
    return found


def without_file(project: Project, ledger: Ledger, entries: dict[str, Entry]) -> dict[str, Entry]:
    """The entries of the items the ledger has history of (with_history) that have no file among
    `entries` (the catalogue's), each unreadable as `has no file`, in id order. One read of the
    items table's ids; runs and rounds are asked only of the ids without a file."""
    match = itemfile.id_pattern(project.config.prefix).match
    cursor = ledger.conn.cursor()
    cursor.row_factory = None
    gone = [item for (item,) in cursor.execute("SELECT id FROM items") if item not in entries and match(item)]
    if not gone:
        return {}
    kept = with_history(ledger, gone)
    return {name[:-3]: Entry(name[:-3], project.item_rel(name), unreadable=itemfile.MISSING)
            for name in sorted_names([item + ".md" for item in gone if item in kept], project.config.prefix)}


def with_missing(project: Project, ledger: Ledger, entries: dict[str, Entry]) -> dict[str, Entry]:
    """`entries` (the catalogue's) and without_file's, in the catalogue's order."""
    missing = without_file(project, ledger, entries)
    if not missing:
        return entries
    every = {**entries, **missing}
    return {name[:-3]: every[name[:-3]] for name in sorted_names([item + ".md" for item in every], project.config.prefix)}


_PENDING = Entry("", "")


def _refresh(folder: str, base: str, prefix: str, changed: list[Changed], entries: dict[str, Entry],
             ledger: Ledger) -> None:
    """The entries and cache rows of the changed files, written in batches as the parse gives them."""
    jobs = _jobs(changed, ledger)
    fresh: list[CacheRow] = []  # files the cache had no row for
    renewed: list[CacheRow] = []  # files whose row is rewritten whole
    touched: list[tuple[int, str]] = []  # (mtime_ns, path) of files whose bytes are their row's
    bodies: list[BodyUpdate] = []
    changed.reverse()  # popped as parsed: each cache row is let go once its entry is made
    for outcome in parsing.parse_changed(folder, prefix, jobs):
        file = changed.pop()
        row, key = file.row, file.name[:-3]
        if isinstance(outcome, parsing.Parsed):
            rel = base + file.name
            entries[key] = _entry_of(outcome.fields, rel, meta=False)
            (fresh if row is None else renewed).append(_cache_row(rel, file.size, file.mtime_ns, outcome))
        elif row is None:
            raise AssertionError(f"{file.name}: only a cache row's digests make a file unchanged or its body alone read")
        elif isinstance(outcome, Unchanged):
            entries[key] = _entry(row)
            touched.append((file.mtime_ns, row.path))
        else:
            entries[key] = _entry(row)._replace(outstanding=outcome.outstanding, cleared=outcome.cleared,
                                                placeholder=outcome.placeholder)
            bodies.append(BodyUpdate(file.size, file.mtime_ns, int(outcome.outstanding), int(outcome.cleared),
                                     int(outcome.placeholder), outcome.digest, row.path))
        if len(fresh) + len(renewed) + len(touched) + len(bodies) >= CACHE_BATCH:
            ledger.store_files(fresh, mtimes=touched, bodies=bodies, renewed=renewed)
            fresh, renewed, touched, bodies = [], [], [], []
    ledger.store_files(fresh, mtimes=touched, bodies=bodies, renewed=renewed)


def _jobs(changed: list[Changed], ledger: Ledger) -> list[Job]:
    """What to read of each changed file: the digests its row knew, where they still tell something."""
    known = ledger.cached_known([found.row.path for found in changed if found.row is not None])
    jobs = []
    for file in changed:
        row = file.row
        if row is None:
            jobs.append(Job(file.name, size=file.size))
            continue
        digest, front = known.get(row.path, (None, None))
        # the bytes' digest answers only a file of the row's size; the frontmatter's, only a readable item's
        jobs.append(Job(file.name, digest if row.size == file.size else None, None if row.unreadable else front,
                        file.size))
    return jobs


def sorted_names(names: list[str], prefix: str, keep: Callable[[str], bool] = lambda name: True) -> list[str]:
    """The `.md` names of `names` in _sort_key's order of their ids, sorted in C rather than by a key per name.

    A numbered name (prefix, dash, a number of up to 18 digits without leading zero) sorts by its
    number, which for such names is the order of (length, name), and before any other; the
    others follow in _sort_key's order, those `keep` keeps.
    """
    numbered = list(filter(_numbered(prefix), names))
    numbered.sort()
    numbered.sort(key=len)  # stable: by length, then by name
    if len(numbered) != len(names):
        numbered += sorted(_others(names, numbered, keep), key=lambda name: _sort_key(name[:-3], prefix))
    return numbered


def _numbered(prefix: str) -> Callable[[str], Any]:
    return re.compile(re.escape(prefix) + r"-[1-9][0-9]{0,17}\.md").fullmatch


def _others(names: list[str], numbered: list[str], keep: Callable[[str], bool]) -> list[str]:
    taken = set(numbered)
    return [name for name in names if name.endswith(".md") and name not in taken and keep(name)]


def notes_for_people(project: Project) -> list[str]:
    """The Markdown files beside the items that are not items (for_people), as paths from the root."""
    folder = project.items_dir
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []
    numbered = list(filter(_numbered(project.config.prefix), names))
    return sorted(project.item_rel(name) for name in _others(names, numbered, lambda name: for_people(folder / name)))


def for_people(path: str | Path) -> bool:
    """A Markdown file beside the items whose name is not an id is no item when it has no
    frontmatter (it does not begin with `---`): a README of the folder, notes for people."""
    try:
        with open(path, "rb") as handle:
            start = handle.read(8)
    except OSError:  # gone, or a folder: the entry's own read says what it is
        return False
    return not start.removeprefix(b"\xef\xbb\xbf").startswith(b"---")


def _sort_key(item_id: str, prefix: str) -> tuple[int, str]:
    """Numbered ids (`<prefix>-<n>`) by number, first; the others by id."""
    number = item_id[len(prefix) + 1:]
    if item_id.startswith(prefix + "-") and number.isascii() and number.isdigit() and number[0] != "0":
        return (int(number), item_id)
    return (1 << 62, item_id)


def entries_for(project: Project, ledger: Ledger, item_ids: Iterable[str]) -> dict[str, Entry]:
    """Several items' entries by id, with their frontmatter, through one read of the cache (a
    prompt's deps); a file whose size or mtime its row does not have is parsed, its row renewed."""
    paths = {item_id: project.item_path(item_id) for item_id in item_ids}
    rels = {item_id: project.item_rel(path.name) for item_id, path in paths.items()}
    ledger.cache_under(project.config.prefix)
    cached = ledger.cached_files_for(list(rels.values())) if rels else {}
    found: dict[str, Entry] = {}
    fresh: list[CacheRow] = []
    for item_id, path in paths.items():
        rel = rels[item_id]
        try:
            stat = path.stat()
        except FileNotFoundError:
            found[item_id] = Entry(id=item_id, rel=rel, unreadable=itemfile.MISSING)
            continue
        except OSError:  # a link in a loop, say: its read fails too, and the parse says why; no row kept
            parsed = parsing.parse_one(str(path.parent) + os.sep, Job(path.name), project.config.prefix)
            assert isinstance(parsed, parsing.Parsed)
            found[item_id] = _entry_of(parsed.fields, rel)
            continue
        row = CacheRow(*cached[rel]) if rel in cached else None
        if row is not None and row.size == stat.st_size and row.mtime_ns == stat.st_mtime_ns:
            found[item_id] = _entry(row, row.meta or "{}")
            continue
        parsed = parsing.parse_one(str(path.parent) + os.sep, Job(path.name, size=stat.st_size),
                                   project.config.prefix)
        assert isinstance(parsed, parsing.Parsed)  # a job without digests is parsed whole
        found[item_id] = _entry_of(parsed.fields, rel)
        fresh.append(_cache_row(rel, stat.st_size, stat.st_mtime_ns, parsed))
    ledger.store_files(fresh)
    return found


def read_item(project: Project, ledger: Ledger, item_id: str) -> "itemfile.Item":
    """The parsed item, as Project.require_item gives it (its one-line errors too), its frontmatter
    taken from the cache where the file has the size and mtime its row knew and the row holds the
    frontmatter exactly (`exact`): a prompt then does not import the YAML parser."""
    path = project.item_path(item_id)
    if itemfile.id_number(item_id, project.config.prefix) is not None:
        try:
            stat = path.stat()
            rel = project.item_rel(path.name)
            rows = ledger.cache_under(project.config.prefix)
            cached = ledger.cached_file_and_deps(rel).get(rel) if rows else None
            row = CacheRow(*cached) if cached is not None else None
            if (row is not None and row.exact and not row.unreadable and row.meta
                    and (row.size, row.mtime_ns) == (stat.st_size, stat.st_mtime_ns)):
                data = read_regular(path)
                if len(data) == row.size:
                    return itemfile.item_from_meta(data.decode("utf-8"), path, project.config.prefix,
                                                   json.loads(row.meta))
        except (OSError, UnicodeDecodeError, itemfile.Unreadable):
            pass  # parsed below, which says what is wrong
    return project.require_item(item_id)


def entry(project: Project, ledger: Ledger, item_id: str) -> Entry:
    """One item's entry, with its frontmatter, through the cache, without reading any other file."""
    return entries_for(project, ledger, [item_id])[item_id]


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: the catalogue makes tuples by the hundred thousand and
    no cycles, and the collector's passes over them took a third of `list` at 50,000 items."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
