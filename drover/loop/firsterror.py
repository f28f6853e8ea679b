"""The first error a failed check printed: a compiler's `file.c:12:5: error: ...` line.

A failed build prints its cause first and the consequences after: one missing declaration in a
header is a thousand lines of `error:` in each file that includes it, and the last 40 lines of
the output (the check's tail) end with `make: *** [Makefile:88: test] Error 1`. The findings of a
failed check quote this line too, with the lines the compiler printed under it (the source line
and its caret), when the tail does not hold it (docs/verify.md).
"""
from __future__ import annotations

import re
from pathlib import Path

from drover.git.files import open_regular

# A diagnostic at a place in a file (gcc, clang, javac: `cJSON.c:127:9: error: ...`, `fatal
# error: x.h: No such file`), a linker's missing symbol, rustc's and cargo's `error[E0425]: ...`,
# and CMake's `CMake Error at CMakeLists.txt:12 (add_library):`.
_ERROR = re.compile(r"[^\s:][^:]*:\d+(?::\d+)?: (?:fatal )?error\b|[^\s:][^:]*:\(.*\): undefined reference to "
                    r"|error(?:\[E\d+\])?: |CMake Error\b")
# The line a compiler puts before the error to say where it is (`In file included from cJSON.c:59:`).
_CONTEXT = re.compile(r"In file included from |[^\s:][^:]*: In (?:function|member function|constructor|destructor) ")
READ_BYTES = 8 << 20  # the first error is near the start; a log of gigabytes is not read whole
LINE_CHARS = 300
BELOW = 3  # the compiler's own lines under the error: the source line, its caret, a suggestion


def first_error(log_path: Path, tail: str) -> tuple[int, list[str]] | None:
    """(its line number in the log, the lines to quote) of the first error line in the log, with the
    line before it when that says where (`In file included from ...`) and the indented lines the
    compiler printed under it; None when there is none, the log cannot be read, or the tail
    already holds that very line (it is then quoted there)."""
    try:
        with open_regular(log_path, "rb") as handle:  # the branch's tests can put a fifo there
            data = handle.read(READ_BYTES)
    except OSError:
        return None
    lines = data.decode("utf-8", "replace").split("\n")
    for number, line in enumerate(lines):
        if not _ERROR.match(line):
            continue
        if line.rstrip() in {kept.rstrip() for kept in tail.split("\n")}:
            return None
        start = number - 1 if number and _CONTEXT.match(lines[number - 1]) else number
        end = number + 1
        while end < len(lines) and end <= number + BELOW and lines[end][:1].isspace() and lines[end].strip():
            end += 1
        return number + 1, [_cut(text) for text in lines[start:end]]
    return None


def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= LINE_CHARS else line[:LINE_CHARS] + " ..."
