"""Outbox mode and replay: how a worker's verdicts reach the one ledger.

Inside a worker the executor sets $DROVER_OUTBOX. The writing commands an agent calls
(new, request-changes, close-changes, audit, dispose, park, unpark) then run exactly as
today against the worker's scratch copy of the ledger and item files, so they validate and
refuse as they always do, and on success append the operation to the outbox. The coordinator
replays the outbox in order through the same functions, after fetching the worker's commits.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from . import writes
from .errors import DroverError, Refused
from .git import rev_parse
from .ledger import Ledger
from .project import Project

ENV = "DROVER_OUTBOX"


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
        entry = {"op": op, "args": args, "run": writes.acting_run(), "head": _head(Path.cwd())}
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")


def read(text: str) -> list[dict[str, Any]]:
    """The outbox's operations, in order; a line that is not one is an error naming the line."""
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DroverError(f"outbox line {number}: not JSON: {exc.msg}") from None
        if not isinstance(entry, dict) or entry.get("op") not in OPERATIONS or not isinstance(entry.get("args"), dict):
            raise DroverError(f"outbox line {number}: not an operation drover replays")
        entries.append(entry)
    return entries


def replay(project: Project, ledger: Ledger, entries: list[dict[str, Any]], *, run_id: str,
           head_of: Callable[[str], str]) -> list[str]:
    """Apply a worker's operations in order, as run `run_id` (the run the outbox belongs to, never
    $DROVER_RUN here); returns one line per refused one.

    `head_of(item_id)` is the item's branch head here ("" when unknown): an operation bound to
    a head is refused when the worker names no head, or the branch is no longer where it saw it.
    An audit covers the head its review run started from (writes.audit_head), whatever came home.
    """
    refused = []
    with writes.acting_as(run_id):
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
