"""Item ids: a project's (`<prefix>-<number>`), and as people type them: `D-1`, `d-1`, `D1`, `1`, `#1` all name D-1; a miss suggests the nearest id."""
from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path

from drover.errors import UsageError


def resolve(word: str, prefix: str) -> str:
    """The canonical id `word` names under `prefix`, or `word` unchanged when it names none.

    Only one reading is ever possible: the number is the digits after the (optional) prefix
    and dash, so `1`, `#1`, `d1` and `D-01` are all D-1, and nothing is guessed beyond that.
    """
    text = word.strip()
    match = re.fullmatch(rf"#?(?:{re.escape(prefix)}-?)?0*([1-9][0-9]*)", text, re.IGNORECASE)
    return f"{prefix}-{match.group(1)}" if match else word


@functools.cache  # asked once per item file parsed, and once per id read
def id_pattern(prefix: str) -> re.Pattern[str]:
    """`<prefix>-<number>`, the number without a leading zero: the ids of a project."""
    # \Z, not $: $ also matches before a final line break, and "D-1\n" is no id
    return re.compile(rf"^{re.escape(prefix)}-([1-9][0-9]*)\Z")


def id_number(item_id: str, prefix: str) -> int | None:
    match = id_pattern(prefix).match(item_id)
    return int(match.group(1)) if match else None


def existing_ids(items_dir: Path, prefix: str, extra: Iterable[str] = ()) -> list[str]:
    """Ids with an item file (plus `extra`, e.g. ids the ledger knows), in number order."""
    found = {path.stem for path in items_dir.glob(f"{prefix}-*.md") if id_number(path.stem, prefix)}
    found.update(item_id for item_id in extra if id_number(item_id, prefix))
    return sorted(found, key=lambda item_id: id_number(item_id, prefix) or 0)


def nearest(item_id: str, known: Iterable[str], prefix: str) -> str:
    """The known id closest in number to `item_id` (the lower one on a tie); "" when none."""
    wanted = id_number(item_id, prefix)
    candidates = [(id_number(known_id, prefix), known_id) for known_id in known]
    numbered = [(number, known_id) for number, known_id in candidates if number is not None]
    if wanted is None or not numbered:
        return ""
    return min(numbered, key=lambda pair: (abs(pair[0] - wanted), pair[0]))[1]


def no_item(item_id: str, rel: str, items_dir: Path, prefix: str, extra: Iterable[str] = ()) -> UsageError:
    """`no item D-13 (did you mean D-12?)`, or naming the missing file when no item exists at all."""
    suggestion = nearest(item_id, existing_ids(items_dir, prefix, extra), prefix)
    if suggestion and suggestion != item_id:
        return UsageError(f"no item {item_id} (did you mean {suggestion}?)")
    return UsageError(f"no item {item_id} (no file {rel})")


def highest_number(names: list[str], prefix: str, above: int = 0, suffix: str = "") -> int:
    """The highest number among `names` that read `<prefix>-<number><suffix>` (ASCII digits, no
    leading zero) when it is above `above`; else a number no higher than `above` (0: none).

    `above` is usually the ledger's highest already, so usually no name is above it: when the
    names are all ASCII, one regex pass in C finds only those that are (at 50,000 names, reading
    every number in Python took tens of ms). Of several, the longest, then the greatest, is the
    highest. Names with other characters are read one by one."""
    joined = "\0" + "\0".join(names) + "\0"  # neither a file name nor an id holds a NUL
    tail = f"{re.escape(suffix)}(?=\0)"
    if joined.isascii():
        head = f"\0{re.escape(prefix)}-("
        found = re.findall(f"{head}{_greater_than(str(above))}){tail}", joined)
        if len(found) > 1:
            longest = max(map(len, found))  # the greatest of that length is above `above` too
            found = re.findall(f"{head}[1-9][0-9]{{{longest - 1}}}){tail}", joined)
        return int(max(found)) if found else 0
    start, end = len(prefix) + 1, len(suffix)
    numbers = [name[start:len(name) - end] for name in names
               if name.startswith(prefix + "-") and name.endswith(suffix)]
    return max((int(number) for number in numbers
                if number.isascii() and number.isdigit() and number[0] != "0"), default=0)


def _greater_than(digits: str) -> str:
    """A regex for the numbers written without a leading zero that are greater than `digits` (a
    number so written, or "0"): more digits, or as many and greater at the first that differs."""
    size = len(digits)
    branches = [f"[1-9][0-9]{{{size},}}"]
    for at, digit in enumerate(digits):
        if digit != "9":
            branches.append(f"{digits[:at]}[{int(digit) + 1}-9][0-9]{{{size - at - 1}}}")
    return "|".join(branches)
