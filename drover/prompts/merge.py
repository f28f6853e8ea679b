"""A line-wise three-way merge with diff3-style conflict markers (base section included)."""
from __future__ import annotations

from typing import NamedTuple

from drover.errors import TemplateError

CONFLICT_START, CONFLICT_BASE, CONFLICT_MID, CONFLICT_END = "<<<<<<<", "|||||||", "=======", ">>>>>>>"



class _Hunk(NamedTuple):
    """One changed range of the base text."""

    start: int  # base lines [start, end) become lines
    end: int
    lines: tuple[str, ...]


def _hunks(base: list[str], other: list[str]) -> list[_Hunk]:
    import difflib  # here: a prompt imports this module and never merges
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    return [_Hunk(i1, i2, tuple(other[j1:j2])) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def _apply(base: list[str], lo: int, hi: int, hunks: list[_Hunk]) -> list[str]:
    """base[lo:hi] with the hunks (all inside the range) applied."""
    out, at = [], lo
    for hunk in hunks:
        out.extend(base[at:hunk.start])
        out.extend(hunk.lines)
        at = hunk.end
    out.extend(base[at:hi])
    return out


def merge3(base: str, ours: str, theirs: str, labels: tuple[str, str, str]) -> tuple[str, bool]:
    """Line-wise three-way merge; returns the text and whether it merged without conflict."""
    base_lines, our_lines, their_lines = base.splitlines(), ours.splitlines(), theirs.splitlines()
    tagged = sorted([(h, 0) for h in _hunks(base_lines, our_lines)] + [(h, 1) for h in _hunks(base_lines, their_lines)],
                    key=lambda pair: (pair[0].start, pair[0].end))
    out: list[str] = []
    clean = True
    at = 0
    i = 0
    while i < len(tagged):
        group = [tagged[i]]
        lo, hi = tagged[i][0].start, tagged[i][0].end
        i += 1
        # Hunks that overlap or touch the same base lines are decided together.
        while i < len(tagged) and (tagged[i][0].start < hi or tagged[i][0].start == lo or
                                   (tagged[i][0].start == hi and tagged[i][0].start == tagged[i][0].end)):
            hi = max(hi, tagged[i][0].end)
            group.append(tagged[i])
            i += 1
        out.extend(base_lines[at:lo])
        at = hi
        sides = {side for _, side in group}
        mine = _apply(base_lines, lo, hi, [h for h, side in group if side == 0])
        yours = _apply(base_lines, lo, hi, [h for h, side in group if side == 1])
        if sides == {0}:
            out.extend(mine)
        elif sides == {1} or mine == yours:
            out.extend(yours)
        else:
            clean = False
            out.append(f"{CONFLICT_START} {labels[0]}")
            out.extend(mine)
            out.append(f"{CONFLICT_BASE} {labels[1]}")
            out.extend(base_lines[lo:hi])
            out.append(CONFLICT_MID)
            out.extend(yours)
            out.append(f"{CONFLICT_END} {labels[2]}")
    out.extend(base_lines[at:])
    return "\n".join(out), clean


def conflict_lines(text: str) -> list[int]:
    """The lines where conflicts a merge left begin."""
    if CONFLICT_START not in text:
        return []
    return [number for number, line in enumerate(text.splitlines(), 1) if line.startswith(CONFLICT_START + " ")]


def conflict_errors(text: str, path: str) -> list[TemplateError]:
    """One error per conflict a merge left in the override file `path`: what `check` reports, and
    why a launch or a prompt refuses (the markers would reach the agent)."""
    return [TemplateError("an unresolved merge conflict marker (drover override --update wrote it): keep the lines "
                          "you want and delete the markers", path=path, line=number) for number in conflict_lines(text)]
