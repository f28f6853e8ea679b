"""Text others wrote, put into a prompt as data it cannot step out of (SPEC 14: plain text).

An implementing agent writes its commits' subjects, the output of the tests drover's check runs,
its follow-ups' bodies, and, with `[run] worktree = false`, the item file itself. Inserted as it
is, such text could end the passage it sits in and write a section that reads as the prompt's own
("## Checks drover ran", a closing fence, a heading like the template's). The templates print it
through the two filters here, which the environment registers (env.py):

- `oneline`: a value that belongs on one line of the prompt (a title, a subject, a file name),
  each character that is not printable (a line break, an escape) written as its Python escape.
- `fenced`: a passage of any length between backtick fences longer than any run of backticks
  inside it, so no line of it can close the block.

Neither changes a field's value: `{{ Body }}` still prints the body byte for byte, as a project's
own template may want it.
"""
from __future__ import annotations

import re
from typing import Any

from drover.errors import escaped

_BACKTICKS = re.compile(r"`+")


def oneline(value: Any) -> str:
    """`value` as one line: each character that is not printable written as its escape (`\\n`),
    as errors.escaped writes a tracker's headline."""
    return escaped(str(value))


def fence_for(text: str) -> str:
    """Backticks, three at least and one more than the longest run of them in `text`."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    return "`" * max(3, longest + 1)


def fenced(value: Any, info: str = "text") -> str:
    """`value` between fences it cannot close: a passage a prompt quotes, whatever it holds.

    Each line of `value` stays as it is (an indent a caller adds applies to the fences too)."""
    text = str(value)
    fence = fence_for(text)
    return f"{fence}{info}\n{text}{'' if text.endswith(chr(10)) or not text else chr(10)}{fence}"
