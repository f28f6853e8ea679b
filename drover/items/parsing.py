"""Reading and parsing the catalogue's changed item files: in this process, or in worker
processes when many changed (docs/decisions.md, "Parsing changed item files in worker processes").

What one file gives (`Fields`, or `(digest,)` when its bytes are those the cache knew) is the
same from either path: the workers run the very function the serial path runs, and hand back
plain tuples through a pipe (marshal, forks.py), in the order asked. Only the calling process
touches the ledger.
"""
from __future__ import annotations

import hashlib
import json
import marshal
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import Any

from drover.items import forks
from drover.items import file as itemfile
from drover.items.file import Unreadable

# (id, title, kind, deps, deps as JSON, frontmatter as JSON, outstanding, cleared, unreadable,
# detail, line, placeholder): what the catalogue keeps of one item file (status.Entry and its
# cache row); placeholder: the requirements are still `drover new`'s.
Fields = tuple[str, str, str, tuple[str, ...], str, str, bool, bool, str, str, "int | None", bool]
# What a changed file gives: Fields + (digest, front); (digest, front, outstanding, cleared, placeholder) when
# its frontmatter is the one the cache knew (`front`: its digest) and only the body was read; or
# (digest,) alone when the bytes are unchanged.
Parsed = tuple[Any, ...]
# A job: (file name, the digest of the bytes the cache knew or None, the digest of the frontmatter
# of a readable item the cache knew or None, the size a stat gave or -1).
Job = tuple[str, "str | None", "str | None", int]

# At this many changed files and more, worker processes parse them (one per usable core, at most
# MAX_WORKERS); below it, forking costs more than it saves. DROVER_PARALLEL_PARSE_AT overrides
# it (the tests force both paths with it).
PARALLEL_AT = 1000
MAX_WORKERS = 8
WORKERS: int | None = None  # how many workers at most; None: one per usable core
CHUNK = 250  # files per message at most: workers stream results while the parent writes cache rows


def fields(path: str, name: str, prefix: str, data: bytes | None = None,
           known: tuple[str, tuple[str, int]] | None = None) -> Fields:
    """What the catalogue keeps of the item file `path` (named `name`), readable or not (`data`:
    its bytes, `known`: their text and its split_frontmatter, when read already)."""
    try:
        item_id, title, kind, deps, meta, changes, placeholder = itemfile.read_summary(path, name, prefix, data, known)
    except Unreadable as exc:
        return (name[:-3] or name, "", "", (), "[]", "{}", False, False, exc.wording, exc.detail, exc.line, False)
    cleared = itemfile.is_cleared(changes)
    try:
        meta_json = _json(meta)
    except TypeError:
        meta_json = json.dumps(meta, default=str)  # a date, say
    return (item_id, title, kind, deps, _deps_json(deps), meta_json, bool(changes.strip()) and not cleared, cleared,
            "", "", None, placeholder)


def _deps_json(deps: tuple[str, ...]) -> str:
    """json.dumps(list(deps)); written directly when no dep holds what JSON escapes (a quote, a
    backslash, a control or non-ASCII character): ids never do."""
    if not deps:
        return "[]"
    raw = "".join(deps)
    if raw.isascii() and raw.isprintable() and '"' not in raw and "\\" not in raw:
        return '["' + '", "'.join(deps) + '"]'
    return _json(list(deps))


_ENCODE: Any = None


def _json(value: Any) -> str:
    """json.dumps(value), through one encoder kept for every file (json.dumps makes one per call)."""
    global _ENCODE
    if _ENCODE is None:
        from json import encoder

        make = getattr(encoder, "c_make_encoder", None)  # json's C encoder, when built
        if make is None:
            _ENCODE = lambda value, _: (json.dumps(value),)  # noqa: E731
        else:
            # the very arguments json.dumps gives it, with its defaults
            _ENCODE = make({}, json.JSONEncoder().default, encoder.encode_basestring_ascii, None, ": ", ", ",
                           False, False, True)
    try:
        return "".join(_ENCODE(value, 0))
    except BaseException:
        _ENCODE = None  # its circular-reference marks may keep the failed call's
        raise


def digest(data: bytes) -> str:
    """What the cache keeps of a file's bytes, to know a touched file (same bytes, new mtime) unchanged."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def read(path: str, at: int | None = None, size: int = -1) -> bytes | None:
    """The file's bytes; None when it cannot be read (the parse then says why). `at`, `size`: a
    folder open for `path` (a name in it) and the size a stat gave, as _read_bytes takes them."""
    try:
        return itemfile._read_bytes(path, at, size)
    except OSError:
        return None


def parse_one(within: str, name: str, prefix: str, known: str | None, front: str | None = None,
              size: int = -1, at: int | None = None) -> Parsed:
    """One changed file: (digest,) when its bytes' digest is `known`; (digest, front, outstanding,
    cleared, placeholder) when its frontmatter's digest is `front` (a readable item's, whose body alone changed:
    what the frontmatter says is the cache's already) and its body is not empty; else Fields +
    (digest, front). `size`, `at`: what read takes, when the caller has them."""
    data = read(within + name) if at is None else read(name, at, size)
    found = None if data is None else digest(data)
    if known is not None and found == known:
        return (found,)
    try:
        text = "" if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        text = ""
    split = itemfile.split_frontmatter(text)
    if split is None:
        return (*fields(within + name, name, prefix, data), found, None)
    source, offset = split
    now = digest(source.encode("utf-8"))
    if now == front:
        body = text[offset:]
        if body and not body.isspace():
            changes = itemfile.changes_of(text, offset)
            cleared = itemfile.is_cleared(changes)
            return (found, now, bool(changes.strip()) and not cleared, cleared, itemfile.needs_requirements(text, offset))
    return (*fields(within + name, name, prefix, data, (text, split)), found, now)


def parse_changed(folder: str, prefix: str, jobs: Sequence[Job]) -> Iterator[Parsed]:
    """parse_one for each Job of `jobs`, in order; in workers when there are many."""
    within = folder + os.sep
    unknown = [job for job in jobs if job[1] is None]  # new bytes for sure (the size changed): a parse each
    workers = _workers(len(unknown))
    if workers < 2:
        with _opened(folder) as at:
            for name, known, front, size in jobs:
                yield parse_one(within, name, prefix, known, front, size, at)
        return
    # a file of the size the cache knows (a touch, a checkout) is most often unchanged: its digest
    # here answers it sooner than a worker's round trip would
    with _opened(folder) as at:
        answered = {index: parse_one(within, name, prefix, known, front, size, at)
                    for index, (name, known, front, size) in enumerate(jobs) if known is not None}
    parsed = _in_workers(within, prefix, unknown, workers)
    for index in range(len(jobs)):
        found = answered.pop(index, None)
        yield found if found is not None else next(parsed)
    for _ in parsed:
        pass  # its end: the workers are waited for


def _workers(count: int) -> int:
    """How many worker processes to parse `count` changed files in; 0 or 1: parse here."""
    if not forks.forking(count, "DROVER_PARALLEL_PARSE_AT", PARALLEL_AT):
        return 0
    cores = WORKERS
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS, count)


def _in_workers(within: str, prefix: str, jobs: Sequence[Job], workers: int) -> Iterator[Parsed]:
    """Worker k parses chunks k, k + workers, ...; the results are yielded chunk by chunk, in order.

    Every worker's pipe is drained as data comes (so none waits on another's turn); a worker that
    cannot be forked, or that dies or fails, leaves its chunks to this process, which then parses
    them itself (an error the parse raises is raised here, as serially).
    """
    import selectors

    # a few chunks per worker at least, so that one slow worker does not hold the others' results
    size = max(1, min(CHUNK, len(jobs) // (workers * 4)))
    starts = range(0, len(jobs), size)
    readers: list[_Reader | None] = []  # one per worker, None for one not started or given up
    started: list[_Reader] = []
    whole = False  # every chunk read: the workers are ending by themselves
    try:
        with selectors.DefaultSelector() as selector:
            for k in range(workers):
                reader = _fork(within, prefix, jobs, starts[k::workers], size, [one.fd for one in started])
                readers.append(reader)
                if reader is not None:
                    started.append(reader)
                    selector.register(reader.fd, selectors.EVENT_READ, reader)
            for index, start in enumerate(starts):
                reader = readers[index % workers]
                chunk = None
                while reader is not None and (chunk := reader.take()) is None and not reader.ended:
                    for key, _ in selector.select():
                        key.data.fill()
                        if key.data.ended:
                            selector.unregister(key.fd)
                if chunk is None:
                    if reader is not None:
                        readers[index % workers] = None  # its remaining chunks are parsed here
                        if reader.fd in selector.get_map():
                            selector.unregister(reader.fd)
                    chunk = [parse_one(within, name, prefix, known, front, told)
                             for name, known, front, told in jobs[start:start + size]]
                yield from chunk
        whole = True
    finally:
        for reader in started:
            forks.reap(reader.fd, reader.pid, kill=not whole)  # the loop ended early: end the worker


class _Reader:
    """The parent's end of one worker's pipe, and what has come through it not yet taken."""

    def __init__(self, fd: int, pid: int):
        self.fd = fd
        self.pid = pid
        self.buffer = bytearray()
        self.ended = False

    def fill(self) -> None:
        """Read what the pipe holds now (the selector said it has something, or its end)."""
        try:
            data = os.read(self.fd, 1 << 20)
        except OSError:
            data = b""
        if data:
            self.buffer += data
        else:
            self.ended = True

    def take(self) -> list[Parsed] | None:
        """The next whole message's results, or None while it has not all come."""
        if len(self.buffer) < 8:
            return None
        size = int.from_bytes(self.buffer[:8], "little")
        if len(self.buffer) < 8 + size:
            return None
        try:
            chunk: list[Parsed] = marshal.loads(self.buffer[8:8 + size])
        except (ValueError, EOFError, TypeError):
            self.ended = True  # garbled: the worker is given up
            return None
        del self.buffer[:8 + size]
        return chunk


def _fork(within: str, prefix: str, jobs: Sequence[Job], starts: range, size: int,
          inherited: list[int]) -> _Reader | None:
    """Start one worker on the chunks at `starts`; None when no process can be forked. It ends by
    os._exit (forks.child): no atexit, no finalizers, and the ledger's connection is the parent's."""
    forked = forks.child(lambda out: _serve(within, prefix, jobs, starts, size, out),
                         prepare=lambda out: _close_all_but(out, inherited))
    return None if forked is None else _Reader(*forked)


def _close_all_but(keep: int, known: list[int]) -> None:
    """A worker keeps only stdio and its pipe: every pipe's reader must close with the parent, and
    the ledger's files (its lock's included) must not stay open in a worker."""
    try:
        fds = [int(fd) for fd in os.listdir("/dev/fd")]
    except (OSError, ValueError):
        fds = known
    for fd in fds:
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already


def _serve(within: str, prefix: str, jobs: Sequence[Job], starts: range, size: int,
           out: int) -> None:
    """The worker's loop: each chunk's results as one length-prefixed marshal message."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # Ctrl-C ends a worker at once, without a traceback
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # so does the parent's death (its pipe closes)
    forks.widen(out)
    with _opened(within) as at:
        for start in starts:
            forks.send(out, [parse_one(within, name, prefix, known, front, told, at)
                             for name, known, front, told in jobs[start:start + size]])


@contextmanager
def _opened(folder: str) -> Iterator[int | None]:
    """The folder open for read; None when it cannot be opened (parse_one then opens each path)."""
    try:
        at = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield None
        return
    try:
        yield at
    finally:
        os.close(at)


# --- the stat of every item file ---------------------------------------------------------------

# At this many item files and more, a forked child stats them while the catalogue reads its
# cache rows, so the system calls and the SQLite read use both cores; below it, they are statted
# here. DROVER_STAT_CHILD_AT overrides it (the tests force both paths with it).
STAT_CHILD_AT = 5000
# The child's share of the names: it starts before the cache is read, this process stats the rest
# after reading it, and the two end about together (a 50,000-file catalogue, two cores).
STAT_CHILD_SHARE = 0.7
STAT_CHUNK = 1000  # names statted at a time here: one map in C each


def stat_elsewhere(within: str, names: list[str], also: forks.Also | None = None) -> forks.Child | None:
    """A child process that stats the first STAT_CHILD_SHARE of `names` (this process stats the
    rest once it has read the cache) and then does `also`'s work; None: stat them all here
    (forks.start says when)."""
    mine = names[:_child_share(names)]
    works: list[Callable[[], Any]] = [lambda: [stat for _, stat in stats_here(within, mine)]]
    if also is not None:
        works.append(also.work)
    child = forks.start(works, len(names), "DROVER_STAT_CHILD_AT", STAT_CHILD_AT)
    if also is not None and child is not None:
        also.child = child
    return child


def _child_share(names: list[str]) -> int:
    return int(len(names) * STAT_CHILD_SHARE)


def stats_of(within: str, names: list[str], elsewhere: forks.Child | None) -> Iterator[tuple[str, Any]]:
    """(name, (size, mtime) or None) for each of `names`, in order: the child's share from the
    child stat_elsewhere started (statted here when there is none or it failed), the rest here."""
    if elsewhere is not None:
        share = _child_share(names)
        got = forks.answer(elsewhere)
        if got is not None and isinstance(got[0], list) and len(got[0]) == share:
            return chain(zip(names, got[0]), stats_here(within, names[share:]))
    return stats_here(within, names)


def stats_here(within: str, names: list[str]) -> Iterator[tuple[str, Any]]:
    """(name, (size, mtime) or None) for each of `names`, statted in this process."""
    for at in range(0, len(names), STAT_CHUNK):
        part = names[at:at + STAT_CHUNK]
        for name, stat in zip(part, stat_all([within + name for name in part])):
            yield name, None if stat is None else (stat.st_size, stat.st_mtime_ns)


def stat_all(paths: list[str]) -> list[os.stat_result | None]:
    """os.stat of each path, None for one that is gone (FileNotFoundError)."""
    try:
        return list(map(os.stat, paths))  # the common case, one loop in C
    except FileNotFoundError:
        pass
    found: list[os.stat_result | None] = []
    for path in paths:
        try:
            found.append(os.stat(path))
        except FileNotFoundError:
            found.append(None)
    return found
