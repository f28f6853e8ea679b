"""Outbox mode and replay: how a worker's verdicts reach the one ledger.

Inside a worker the executor sets $DROVER_OUTBOX. The writing commands an agent calls
(new, request-changes, close-changes, audit, dispose, park, unpark) then run exactly as
today against the worker's scratch copy of the ledger and item files, so they validate and
refuse as they always do, and on success append the operation to the outbox. The coordinator
replays the outbox in order through the same functions, after fetching the worker's commits.
"""
from __future__ import annotations

import errno
import inspect
import json
import os
import re
from functools import cache
from pathlib import Path
from typing import Any, Callable

from drover.ledger import acting, writes
from drover.errors import DroverError, Refused
from drover.items.file import id_pattern
from drover.git import rev_parse
from drover.git.files import regular_fd
from drover.ledger.db import Ledger
from drover.ledger.project import Project

ENV = "DROVER_OUTBOX"

# What one run's outbox may hold (hostile review 27). The coordinator holds it whole, keeps it in
# the run's folder and replays it into the ledger; an agent on a worker writes the file as it
# likes. A review's outbox is a few kilobytes (a round's findings, an audit, some dispositions,
# a follow-up or two): the caps are far above any verdict and far below what hurts the coordinator.
OUTBOX_BYTES = 8 * 2**20  # the whole file
OUTBOX_OPERATIONS = 1000  # its lines: one run's share of the ledger
ARGUMENT_BYTES = 2**20  # one text argument (findings are the long one)


class OverCap(DroverError):
    """An outbox past a cap: refused whole, before a line of it is read, and its run ends failed."""


# op name (the command's name) -> the core function both the CLI and the replay call
OPERATIONS: dict[str, Callable[..., Any]] = {
    "new": writes.new_item,
    "request-changes": writes.request_changes,
    "close-changes": writes.close_changes,
    "audit": writes.audit,
    "dispose": writes.dispose,
    "park": writes.park,
    "unpark": writes.unpark,
}
# Operations that approve a state of the branch: refused on replay if the branch has moved since.
BOUND_TO_HEAD = ("audit",)
# A send-back past the cap is refused but still parks the item: the coordinator must see it too.
RECORDED_WHEN_REFUSED = ("request-changes",)


def outbox_path() -> Path | None:
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


def _head(cwd: Path) -> str:
    """The commit the agent is looking at: HEAD of its working directory, "" outside git."""
    return rev_parse(cwd, "--verify", "--quiet", "HEAD")


def perform(project: Project, ledger: Ledger, op: str, **args: Any) -> Any:
    """Run one writing operation; in outbox mode also append it to the outbox once it succeeded."""
    try:
        result = OPERATIONS[op](project, ledger, **args)
    except Refused:
        if op in RECORDED_WHEN_REFUSED:
            _append(op, args)
        raise
    _append(op, args)
    return result


def _append(op: str, args: dict[str, Any]) -> None:
    path = outbox_path()
    if path is not None:
        entry = {"op": op, "args": args, "run": acting.acting_run(), "head": _head(Path.cwd())}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")


def over_cap(text: str) -> str:
    """Why an outbox's text is too large to take ("" when it is not)."""
    if len(text) > OUTBOX_BYTES or len(text.encode("utf-8", "surrogatepass")) > OUTBOX_BYTES:
        return _too_many_bytes()
    return ""


def _too_many_bytes() -> str:
    return f"it holds more than {OUTBOX_BYTES:,} bytes, the cap for one run's outbox"


def collect(path: Path) -> tuple[str, str]:
    """The outbox a worker sends home: (its text, "") or ("", why it cannot be taken). The agent
    owns the scratch folder: the file may be a link (to /dev/zero), a fifo no one writes (a read
    would wait for ever), text that is not UTF-8, or gigabytes. It is read only as a regular file,
    never through a link, and never past the cap (hostile review 27)."""
    try:
        fd = regular_fd(path)
    except FileNotFoundError:
        return "", ""
    except OSError as exc:
        what = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or "unreadable"
        return "", f"it is {what}, not the regular file drover writes"
    with open(fd, "rb") as handle:
        data = handle.read(OUTBOX_BYTES + 1)
    if len(data) > OUTBOX_BYTES:
        return "", _too_many_bytes()
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError:
        return "", "it is not UTF-8 text"


def read(text: str) -> list[dict[str, Any]]:
    """The outbox's operations, in order; a line that is not one is an error naming the line;
    an outbox past a cap is OverCap, before a line is parsed.

    Entry n is line n (drover writes no blank line), so validate's line numbers are the file's.
    """
    said = over_cap(text)
    lines = text.splitlines() if not said else []
    if len(lines) > OUTBOX_OPERATIONS:
        said = f"it holds {len(lines):,} lines, over the cap of {OUTBOX_OPERATIONS:,} operations for one run"
    if said:
        raise OverCap(said)
    # here, not above: only the coordinator reads an outbox, and jsonl.py (with its column rules)
    # was 1.5 ms of every writing command an agent calls
    from drover.ledger.jsonl import parse_line

    entries = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            raise DroverError(f"outbox line {number}: an empty line (drover writes none)")
        try:
            entry = parse_line(line)
        except ValueError as exc:
            raise DroverError(f"outbox line {number}: {exc}") from None
        if not isinstance(entry, dict) or entry.get("op") not in OPERATIONS or not isinstance(entry.get("args"), dict):
            raise DroverError(f"outbox line {number}: not an operation drover replays")
        entries.append(entry)
    return entries


# What an outbox argument may hold, by the annotation of the parameter it fills (writes.py's
# signatures are the one list of each operation's arguments and their types).
_INT64 = 2**63
_HEX = re.compile(r"[0-9a-f]{0,64}")
_ID_ARGS = ("item_id", "deps", "finding_source")  # named items: ids of this project ("" for no source)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        return "must be a string"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "must be UTF-8 text"
    if size > ARGUMENT_BYTES:
        return f"holds {size:,} bytes, over the cap of {ARGUMENT_BYTES:,} for one argument"
    return "" if "\x00" not in value else "must not hold a NUL character"


def _count(value: Any) -> str:
    if type(value) is not int or not 0 < value < _INT64:
        return "must be a whole number from 1 to 2**63-1"
    return ""


_RULES: dict[str, Callable[[Any], str]] = {
    "str": _text,
    "int": _count,
    "int | None": lambda value: "" if value is None or not _count(value) else _count(value) + " or null",
    "list[str]": lambda value: next((f"[{n}] {_text(one)}" for n, one in enumerate(value) if _text(one)), "")
    if isinstance(value, list) else "must be a list of strings",
}


# Arguments of the operations that no command an agent calls passes: drover's own check names a
# round's `by` and `log` (sendback.send_back), and `new --issue` (origin, scaffold: a body with its
# Requirements written) is no outbox operation. From a worker they would record a round as drover's
# check, or an item ready to implement on requirements the agent wrote.
_DROVERS_OWN: dict[str, tuple[str, ...]] = {"request-changes": ("by", "log"), "new": ("origin", "scaffold")}


@cache
def _parameters(op: str) -> dict[str, inspect.Parameter]:
    """The arguments an operation takes: its function's parameters after project and ledger."""
    return {parameter.name: parameter for parameter in list(inspect.signature(OPERATIONS[op]).parameters.values())[2:]}


def _problem(op: str, args: dict[str, Any], match: Callable[[str], Any], agent: str) -> str:
    """What is wrong with one operation's arguments ("" when nothing is)."""
    known = _parameters(op)
    unknown = [name for name in args if name not in known]
    if unknown:
        return f"{op} takes no argument {unknown[0][:40]!r}"
    for name, parameter in known.items():
        if name not in args:
            if parameter.default is inspect.Parameter.empty:
                return f"{op} needs the argument {name!r}"
            continue
        value = args[name]
        said = _RULES[str(parameter.annotation)](value)
        if said:
            return f"{op} {name} {said}"
        if name in _ID_ARGS:
            for one in value if isinstance(value, list) else [value]:
                if (one or name != "finding_source") and not match(one):
                    return f"{op} {name}: {one[:40]!r} is not an item id of this project"
    drovers = [name for name in _DROVERS_OWN.get(op, ()) if args.get(name) not in (None, "")]
    if drovers:
        return f"{op} takes no {drovers[0]!r} from an outbox: only drover itself passes it"
    if op == "audit" and args.get("by") not in ("", agent):
        named = f"its agent {agent!r}" if agent else "no one (no run is acting)"
        return f"audit by {args['by'][:40]!r}: an audit from this run can only name {named}"
    return ""


def validate(project: Project, ledger: Ledger, entries: list[dict[str, Any]], *, run_id: str,
             source: str = "outbox") -> None:
    """Check every operation's shape, types, ranges and provenance before any is replayed: one bad
    line refuses the whole outbox, named by `source` and its line number."""
    run = ledger.run(run_id) if run_id else None
    agent = (run.agent if run else "") or ""
    match = id_pattern(project.config.prefix).match
    for number, entry in enumerate(entries, 1):
        said = ""
        args = entry.get("args")
        if entry.get("op") not in OPERATIONS or not isinstance(args, dict):
            said = "not an operation drover replays"
        elif not isinstance(entry.get("run", ""), str):
            said = "run must be a string"
        elif not isinstance(entry.get("head", ""), str) or not _HEX.fullmatch(entry.get("head", "")):
            said = "head must be a commit id (hexadecimal) or empty"
        else:
            said = _problem(entry["op"], args, match, agent)
        if said:
            raise Refused(f"{said}; nothing of this outbox was replayed", path=source, line=number)


def replay(project: Project, ledger: Ledger, entries: list[dict[str, Any]], *, run_id: str,
           head_of: Callable[[str], str], source: str = "outbox") -> list[str]:
    """Apply a worker's operations in order, as run `run_id` (the run the outbox belongs to, never
    $DROVER_RUN here); returns one line per refused one.

    Every entry is validated first (`validate`): a bad one raises, and nothing is applied.
    `head_of(item_id)` is the item's branch head here ("" when unknown): an operation bound to
    a head is refused when the worker names no head, or the branch is no longer where it saw it.
    An audit covers the head its review run started from (writes.audit_head), whatever came home.
    """
    validate(project, ledger, entries, run_id=run_id, source=source)
    refused = []
    with acting.acting_as(run_id):
        for entry in entries:
            op, args = entry["op"], dict(entry["args"])
            item_id = str(args.get("item_id", ""))
            seen = str(entry.get("head") or "")
            if op in BOUND_TO_HEAD and not seen:
                refused.append(f"{item_id or '-'}: outbox {op} refused: the worker named no head it saw")
                continue
            if op in BOUND_TO_HEAD and item_id:
                now = head_of(item_id)
                if now and now != seen:
                    refused.append(f"{item_id}: outbox {op} refused: the worker saw {seen[:12]}, "
                                   f"the branch is now at {now[:12]}")
                    continue
            try:
                perform(project, ledger, op, **args)
            except TypeError:
                refused.append(f"{item_id or '-'}: outbox {op} refused: arguments drover does not take")
            except DroverError as exc:
                refused.append(f"{item_id or '-'}: outbox {op} refused: {exc}")
    return refused
