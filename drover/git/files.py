"""Files an agent can write or replace (the shared git folder, a worktree's private one, drover's
run folders and logs), opened the one way that cannot hold drover: without waiting, never through a
link unless asked, and only when the path is a regular file. A fifo in a file's place would hold an
open() for ever (no writer, or no reader, ever comes), SIGTERM with it (hostile reviews 16, 17)."""
from __future__ import annotations

import errno
import os
import shutil
import stat
from pathlib import Path
from typing import BinaryIO, cast


def regular_fd(path: Path | str, flags: int = os.O_RDONLY, *, follow: bool = False, dir_fd: int | None = None) -> int:
    """A descriptor of `path` (relative to the folder `dir_fd`, when given) opened with `flags`
    (blocking again once open); OSError (EINVAL) when it is no regular file, ELOOP when it is a
    link and `follow` is not asked."""
    fd = os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW), 0o644, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


# The most read_regular reads of one file: an item file (findings of at most 1 MB in its Changes
# section), drover.toml, an override. With `worktree = false` the agent writes the main checkout's
# items: one item file of 200 MB cost every `list` 1 GB of memory and 14 s (hostile review 35).
LARGEST_READ = 16 << 20


def read_regular(path: Path | str, *, dir_fd: int | None = None, size: int = -1,
                 largest: int | None = None) -> bytes:
    """All of the regular file `path` (links followed, as an editor follows them), with plain os
    calls (a third of open().read()'s cost per small file). A fifo, a device or a folder is
    OSError (EINVAL, EISDIR), never a wait or an endless read: a fifo in place of an item file held
    every `list`, `check` and drive (hostile review 25). `dir_fd`: an open folder that `path` names
    a file in (the name alone is looked up); `size`: what a stat gave, when known: a first read
    of one byte more that gives `size` bytes has reached the file's end, so a file whose size held
    is read in one read. A file of more than `largest` bytes (LARGEST_READ unless the caller reads a
    file of its own kind, a checkout's index) is OSError (EFBIG), read no further."""
    largest = LARGEST_READ if largest is None else largest  # read now: a test lowers the module's cap
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    too_large = OSError(errno.EFBIG, f"larger than {largest >> 20} MB", str(path))
    try:
        found = os.fstat(fd)
        if not stat.S_ISREG(found.st_mode):
            code = errno.EISDIR if stat.S_ISDIR(found.st_mode) else errno.EINVAL
            raise OSError(code, os.strerror(code) if code == errno.EISDIR else "not a regular file", str(path))
        if found.st_size > largest:
            raise too_large
        chunks = [os.read(fd, min(size, largest) + 1 if size >= 0 else 1 << 16)]
        if chunks[0] and len(chunks[0]) != size:
            read = len(chunks[0])
            while chunk := os.read(fd, 1 << 16):  # a file that grows while it is read stops at the cap too
                read += len(chunk)
                if read > largest:
                    raise too_large
                chunks.append(chunk)
    except OSError as exc:
        # named as open() names it ("Is a directory: 'items/D-1.md'")
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_regular_text(path: Path | str) -> str:
    """read_regular's bytes as `Path.read_text(encoding="utf-8")` gives text (universal newlines:
    `\r\n` and `\r` each a `\n`); UnicodeDecodeError when they are not UTF-8."""
    return read_regular(path).decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def open_regular(path: Path | str, mode: str = "rb") -> BinaryIO:
    """`open(path, mode)` ("rb", or "ab" to append to a log) through regular_fd."""
    fd = regular_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT if mode == "ab" else os.O_RDONLY)
    try:
        return cast(BinaryIO, open(fd, mode))
    except BaseException:
        os.close(fd)
        raise


def read_small_file(path: Path | str, most: int = 65536) -> str:
    """The text of a small regular file git keeps (a worktree's `.git`, its private folder's
    `gitdir`, `commondir`, `HEAD`), at most `most` bytes; links followed, as git follows them."""
    fd = regular_fd(path, follow=True)
    try:
        return os.read(fd, most).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # a folder, never through a link


def folder_fd(top: Path, *parts: str, make: bool = False) -> int:
    """A descriptor of the folder `top`/`parts`..., each part opened without following a link
    (ELOOP or ENOTDIR when one is a link or no folder), made when missing and `make`. What is done
    through it (the *at calls, `dir_fd=`) stays in that folder, even when a process swaps a name
    on the way for a link meanwhile (hostile review 20: checked, then used by name, a folder an
    agent swapped in a loop had drover delete the files of the folder the link led to)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if make:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            fd = _step_in(fd, part)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _step_in(folder: int, part: str) -> int:
    """The folder `part` in `folder`, opened without following a link, in place of `folder` (closed
    once `part` is open; left open when it cannot be)."""
    inner = os.open(part, _FOLDER, dir_fd=folder)
    os.close(folder)
    return inner


def remove_below(folder: int, relative: str, *, links_only: bool = False) -> None:
    """rm -rf `relative` below the folder `folder` (a descriptor), reached from there one part at a
    time, never through a link: a link on the way is removed, never what it leads to (anything else
    that is no folder there: nothing is below it); nothing there, nothing done. With `links_only`,
    only a link, on the way or at `relative` itself, is removed. A check of the path's parts by name
    before a removal by name is no check: a process that swapped a part for a link in a loop, in
    between, had drover remove `cache` in the folder the link led to (hostile review 22)."""
    parts = [part for part in relative.split("/") if part not in ("", ".")]
    if not parts:
        return  # the folder itself is no path below it
    if ".." in parts:  # `[run] keep` refuses such an entry (config.keys); never above `folder`
        raise ValueError(f"{relative!r} is no path below its folder")
    *above, name = parts
    fd = os.dup(folder)
    try:
        for part in above:
            try:
                fd = _step_in(fd, part)
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                _unlink_link(fd, part)
                return
        if links_only:
            _unlink_link(fd, name)
        else:
            remove_at(fd, name)
    finally:
        os.close(fd)


def _unlink_link(folder: int, name: str) -> None:
    """Unlink `name` in the folder `folder` when it is a symbolic link; anything else stays, a
    folder swapped in for it since the look too (unlink removes no folder)."""
    try:
        if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            os.unlink(name, dir_fd=folder)
    except (FileNotFoundError, IsADirectoryError):
        pass


def remove_at(folder: int, name: str) -> None:
    """rm -rf `name` in the folder `folder` (a descriptor): a link or a file unlinked, a folder
    removed whole, never through a link; nothing there, nothing done."""
    try:
        found = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(found.st_mode):
        _writable_tree(folder, name)
        shutil.rmtree(name, dir_fd=folder, ignore_errors=True)
    else:
        os.unlink(name, dir_fd=folder)


def _writable_tree(folder: int, name: str) -> None:
    """Make the folder `name` in `folder`, and every folder below it, its owner's to write, never
    through a link, so that rmtree can empty them: an agent's read-only folders (`chmod 555`)
    outlived the sweep, and a launch failed (hostile review 21). Depth first, one descriptor a
    level; what cannot be opened is left for rmtree to fail on."""
    def opened(parent: int, child: str) -> int | None:
        try:
            os.chmod(child, 0o700, dir_fd=parent, follow_symlinks=False)
            return os.open(child, _FOLDER, dir_fd=parent)
        except (OSError, ValueError, NotImplementedError):
            return None

    top = opened(folder, name)
    if top is None:
        return
    levels = [(top, os.scandir(top))]
    try:
        while levels:
            fd, entries = levels[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                levels.pop()
            elif entry.is_dir(follow_symlinks=False) and (inner := opened(fd, entry.name)) is not None:
                levels.append((inner, os.scandir(inner)))
    except OSError:
        pass
    finally:
        for fd, entries in levels:
            entries.close()
            os.close(fd)


def replace_at(folder: int, name: str, data: bytes) -> None:
    """A new regular file `name` in the folder `folder` (a descriptor) holding `data`, in place of
    whatever an agent put there: written under a fresh name beside it and renamed over it, so a
    link there is replaced, never written through, and a fifo never opened; a folder there is
    removed first."""
    scratch = f".{name}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder)
    try:
        with open(fd, "wb") as handle:
            handle.write(data)
        try:
            if stat.S_ISDIR(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                remove_at(folder, name)  # os.replace will not put a file over a folder
        except FileNotFoundError:
            pass
        os.replace(scratch, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        try:
            os.unlink(scratch, dir_fd=folder)
        except OSError:
            pass
        raise


def remove_path(path: Path) -> None:
    """rm -rf `path`: remove_at in the folder that holds it (a link or a file unlinked, never what
    a link leads to; a folder removed whole, made writable as it goes); nothing there, nothing done."""
    try:
        parent = folder_fd(path.parent)
    except FileNotFoundError:
        return
    try:
        remove_at(parent, path.name)
    finally:
        os.close(parent)
