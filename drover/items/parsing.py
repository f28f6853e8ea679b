"""Reading and parsing the catalogue's changed item files: in this process, or in a pool of worker
processes when many changed (docs/decisions.md, "Parsing changed item files in worker processes").

Both paths run parse_batch over the same jobs, so an item reads the same either way; only the
calling process touches the ledger.
"""
from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple, Union

from drover.git.files import read_regular
from drover.items import file as itemfile
from drover.items.file import Unreadable

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext


class Fields(NamedTuple):
    """What the catalogue keeps of one item file, readable or not."""

    id: str
    title: str = ""
    kind: str = ""
    deps: tuple[str, ...] = ()
    meta_json: str = "{}"  # the frontmatter as JSON (dates and other values as text)
    outstanding: bool = False  # the Changes section holds findings nobody has discharged (sections.is_outstanding)
    cleared: bool = False  # the Changes section says its findings were discharged
    unreadable: str = ""  # why it cannot be read (file.MISSING, ...); "" when it reads
    detail: str = ""
    line: int | None = None
    placeholder: bool = False  # the requirements are still `drover new`'s placeholder
    exact: bool = False  # meta_json is the frontmatter exactly (plain_data)


class Job(NamedTuple):
    """A file whose size or mtime is not the one its cache row knew, and what that row knew."""

    name: str
    known: str | None = None  # the digest of the row's bytes, when the file still has its size
    front: str | None = None  # the digest of the row's frontmatter, when the row's item was readable
    size: int = -1  # what a stat gave


class Unchanged(NamedTuple):
    """A file whose bytes are the ones its row knew (a touch, a checkout)."""

    digest: str


class BodyRead(NamedTuple):
    """A readable item whose frontmatter is its row's: only the body was read (what the body decides)."""

    digest: str
    front: str
    outstanding: bool
    cleared: bool
    placeholder: bool


class Parsed(NamedTuple):
    """A file read and parsed whole."""

    fields: Fields
    digest: str | None  # of its bytes; None when they could not be read
    front: str | None  # of its frontmatter's text; None when it has none


Outcome = Union[Unchanged, BodyRead, Parsed]

# From this many changed files, a pool of worker processes parses them (one per usable core, at
# most MAX_WORKERS); below it, starting the pool costs more than it saves. DROVER_PARALLEL_PARSE_AT
# sets another (the tests force both paths with it).
PARALLEL_AT = 10_000
MAX_WORKERS = 8
BATCH = 500  # files per task: results come back, and cache rows are written, as batches end

# The frontmatter's JSON: json.dumps with default=str (a date becomes its text), one encoder kept.
_meta_json = json.JSONEncoder(default=str).encode


def fields(path: str, name: str, prefix: str, data: bytes | None = None,
           known: tuple[str, tuple[str, int]] | None = None) -> Fields:
    """What the catalogue keeps of the item file `path` (named `name`), readable or not (`data`:
    its bytes, `known`: their text and its split_frontmatter, when read already)."""
    try:
        item_id, title, kind, deps, meta, changes, placeholder = itemfile.read_summary(path, name, prefix, data, known)
    except Unreadable as exc:
        return Fields(name[:-3] or name, unreadable=exc.wording, detail=exc.detail, line=exc.line)
    return Fields(item_id, title, kind, deps, _meta_json(meta), outstanding=itemfile.is_outstanding(changes),
                  cleared=itemfile.is_cleared(changes), placeholder=placeholder, exact=plain_data(meta))


_JSON_SCALARS = (str, int, float, bool, type(None))


def plain_data(value: object) -> bool:
    """Whether JSON holds `value` exactly: mappings with text keys, lists, text, numbers, booleans
    and null, nothing else (a date, a number as a key, NaN are not)."""
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and plain_data(item) for key, item in value.items())  # type: ignore[attr-defined]
    if kind is list:
        return all(plain_data(item) for item in value)  # type: ignore[attr-defined]
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    return kind in _JSON_SCALARS


def digest(data: bytes) -> str:
    """What the cache keeps of a file's bytes, to know a touched file (same bytes, new mtime) unchanged."""
    import hashlib  # here: a warm catalogue digests nothing, and hashlib is a few ms of every command

    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read(path: str, at: int | None = None, size: int = -1) -> bytes | None:
    """The file's bytes; None when it cannot be read (the parse then says why). `at`, `size`: a
    folder open for `path` (a name in it) and the size a stat gave, as read_regular takes them."""
    try:
        return read_regular(path, dir_fd=at, size=size)
    except OSError:
        return None


def parse_one(within: str, job: Job, prefix: str, at: int | None = None) -> Outcome:
    """One changed file (`within`: its folder, with a trailing separator; `at`: that folder open,
    when the caller has it): Unchanged when its bytes' digest is the one its row knew; BodyRead when
    its frontmatter's digest is the row's and its body is not empty; else Parsed."""
    data = read(within + job.name) if at is None else read(job.name, at, job.size)
    found = None if data is None else digest(data)
    if found is not None and found == job.known:
        return Unchanged(found)
    try:
        text = "" if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    split = itemfile.split_frontmatter(text)
    if split is None:
        return Parsed(fields(within + job.name, job.name, prefix, data), found, None)
    source, offset = split
    front = digest(source.encode("utf-8"))
    if found is not None and front == job.front:
        body = text[offset:]
        if body and not body.isspace():
            changes = itemfile.changes_of(text, offset)
            return BodyRead(found, front, itemfile.is_outstanding(changes), itemfile.is_cleared(changes),
                            itemfile.needs_requirements(text, offset))
    return Parsed(fields(within + job.name, job.name, prefix, data, (text, split)), found, front)


def parse_batch(folder: str, prefix: str, jobs: Sequence[Job]) -> list[Outcome]:
    """parse_one of each job, in order: what a worker does with one task."""
    within = folder + os.sep
    try:
        at: int | None = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        at = None  # parse_one then opens each path
    try:
        return [parse_one(within, job, prefix, at) for job in jobs]
    finally:
        if at is not None:
            os.close(at)


def parse_changed(folder: str, prefix: str, jobs: Sequence[Job]) -> Iterator[Outcome]:
    """parse_one of each job, in order, batch by batch; in a pool of worker processes when there are many."""
    batches = [jobs[start:start + BATCH] for start in range(0, len(jobs), BATCH)]
    workers = _workers(len(jobs))
    if workers < 2:
        for batch in batches:
            yield from parse_batch(folder, prefix, batch)
        return
    from concurrent.futures import Future, ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    def submitted(batch: Sequence[Job]) -> Future[list[Outcome]] | None:
        try:
            return pool.submit(parse_batch, folder, prefix, batch)
        except BrokenProcessPool:
            return None  # parsed here when its turn comes

    def taken(future: Future[list[Outcome]] | None, batch: Sequence[Job]) -> list[Outcome]:
        try:
            if future is not None:
                return future.result()
        except BrokenProcessPool:
            pass  # a worker was killed (out of memory, say): this batch and those after it are parsed here
        return parse_batch(folder, prefix, batch)

    pool = ProcessPoolExecutor(workers, mp_context=_start_method(), initializer=_worker_started)
    ahead: deque[tuple[Future[list[Outcome]] | None, Sequence[Job]]] = deque()
    try:
        for batch in batches:
            ahead.append((submitted(batch), batch))
            if len(ahead) > 2 * workers:  # a few batches ahead of the caller, not all: results not taken pile up here
                yield from taken(*ahead.popleft())
        while ahead:
            yield from taken(*ahead.popleft())
    finally:
        pool.shutdown(cancel_futures=True)  # a caller that stopped early waits for no batch it will not read


def _workers(count: int) -> int:
    """How many worker processes to parse `count` changed files in; 0 or 1: parse here."""
    try:
        at = int(os.environ.get("DROVER_PARALLEL_PARSE_AT", ""))
    except ValueError:
        at = PARALLEL_AT
    if count < max(at, 1):
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS, count)


def _start_method() -> BaseContext:
    """spawn: a worker is a fresh interpreter that inherits none of this process's threads, memory
    or open files (a fork would copy one thread of drive's several, and the writers' lock)."""
    import multiprocessing

    return multiprocessing.get_context("spawn")


def _worker_started() -> None:
    """Ctrl-C ends a worker at once, without a traceback (the calling process handles it), and a
    worker ends when the calling process does, however it ends (a pool's idle worker would wait on
    its queue for good)."""
    import multiprocessing
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    parent = multiprocessing.parent_process()
    if parent is not None:
        def end_with_parent() -> None:
            parent.join()
            os._exit(1)

        threading.Thread(target=end_with_parent, daemon=True).start()
