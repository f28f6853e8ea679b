"""What a worker does with one prepared run: clone, launch, and pack the result. No Ray here.

The payload is plain data (bytes and strings), so this runs the same under any engine and in a
unit test. The worker keeps nothing: everything lives in a scratch folder removed at the end.
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from drover.agents import environment, launch as agents
from drover import git
from drover.errors import is_one_line
from drover.git.files import open_regular
from drover.executors.outbox import ENV as OUTBOX_ENV, collect


_INT64 = 2**63
# The most of an agent's log a worker sends home: its end, where a run's failure shows. The log
# comes home in the result, held whole in the worker's, Ray's and the coordinator's memory; an agent
# can write its log without end (hostile review 27 left this lead).
LOG_BYTES = 64 << 20
OUTCOMES = ("exited", "timeout", "interrupted", agents.OVER_BUDGET)


def _count_or_none(value: Any) -> str:
    return "" if value is None or (type(value) is int and 0 <= value < _INT64) else "a whole number >= 0, or null"


def _seconds(value: Any) -> str:
    ok = type(value) in (int, float) and math.isfinite(value) and 0 <= value < 10**9
    return "" if ok else "a number of seconds >= 0"


def _of(kind: type) -> Any:
    def check(value: Any) -> str:
        if type(value) is not kind:
            return f"a {kind.__name__}"
        return "" if not isinstance(value, str) or _utf8(value) else "UTF-8 text"
    return check


def _line(value: Any) -> str:
    """A name drover prints in front of each of the run's log lines (the node): one line with no
    control character, or its line breaks printed lines of drover's own (hostile review 25)."""
    said = _of(str)(value)
    if said:
        return str(said)
    return "" if is_one_line(value) else "one line of text"


def _utf8(value: str) -> bool:
    """Whether `value` is text UTF-8 holds: a lone surrogate ("\\udc80", which a worker's pickled str
    may carry) failed the write of the run's end to the ledger, out of the drive (hostile review 25)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


USAGE: dict[str, Any] = {
    "model": _of(str), "input_tokens": _count_or_none, "output_tokens": _count_or_none,
    "tool_calls": _count_or_none,
    "cost_usd": lambda value: "" if value is None or not _seconds(value) else "a number >= 0, or null",
}


def _usage(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, dict):
        return "an object, or null"
    for key, item in value.items():
        said = USAGE[key](item) if key in USAGE else "not a usage field"
        if said:
            return f"{key}: {said}"
    return ""


# What a worker's result holds (what _work returns, and "node", which the task adds): each field's
# check answers "" or what is wrong. The coordinator takes nothing of a result that fails one.
RESULT: dict[str, Any] = {
    "exit_code": lambda value: "" if value is None or (type(value) is int and -(2**31) <= value < 2**31)
    else "a whole number, or null",
    "outcome": lambda value: "" if value in OUTCOMES else f"one of {', '.join(OUTCOMES)}",
    "elapsed": _seconds, "wall": _seconds, "usage": _usage,
    "log": _of(bytes), "outbox": _of(str), "bundle": _of(bytes), "head": _of(str), "node": _line,
    "outbox_refused": _line,  # why the worker could not take the outbox ("" when it could)
}
OPTIONAL = ("node", "outbox_refused")


def worker_field(key: str, value: Any) -> str:
    """What is wrong with one field of a worker's result ("" when nothing is)."""
    return str(RESULT[key](value))


def result_problem(result: Any) -> str:
    """What is wrong with a worker's result ("" when nothing is): its fields, their types and ranges."""
    if not isinstance(result, dict):
        return "it is not an object"
    for key in result:
        if key not in RESULT:
            return f"it holds an unknown field {str(key)[:40]!r}"
    for key, check in RESULT.items():
        if key not in result:
            if key in OPTIONAL:
                continue
            return f"it lacks {key}"
        said = check(result[key])
        if said:
            return f"{key} must be {said}"
    return ""


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def work(payload: dict[str, Any], base_bundle: bytes) -> dict[str, Any]:
    """Run one prepared run in a scratch clone; returns log, exit, timings, outbox and new commits."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="drover-worker-"))
    try:
        return _work(payload, base_bundle, scratch, started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _work(payload: dict[str, Any], base_bundle: bytes, scratch: Path, started: float) -> dict[str, Any]:
    base, branch = payload["base"], payload["branch"]
    repo = scratch / "repo"
    git.clone_bundle(_write(scratch / "base.bundle", base_bundle), repo, base)
    if payload.get("item_bundle"):
        item = _write(scratch / "item.bundle", payload["item_bundle"])
        git.fetch_bundle(repo, item, f"refs/heads/{branch}", into=f"refs/heads/{branch}")
    # The main checkout's own files the commands read: config, item files, a copy of the ledger.
    for rel, text in payload["files"].items():
        _write(repo / rel, text)
    _write(repo / payload["ledger_rel"], payload["ledger"])
    if payload["worktree_rel"]:
        workdir = git.ensure_worktree(repo, repo / payload["worktree_rel"], branch, base)
    else:
        git.checkout_branch(repo, branch, base, ignore=[payload["items_rel"] + "/"])
        workdir = repo
    start_sha = git.rev_parse(repo, f"refs/heads/{branch}")
    prompt_file = _write(repo / payload["prompt_rel"], payload["prompt"])
    outbox = scratch / "outbox.jsonl"
    # the environment the coordinator prepared, its paths made this machine's
    env_add = environment.on_this_machine(payload["env"], prompt_file=prompt_file, repo=repo, workdir=workdir)
    env_add[OUTBOX_ENV] = str(outbox)
    argv = [word.replace(payload["prompt_file"], str(prompt_file)) for word in payload["argv"]]
    log = scratch / "agent.log"
    result = agents.launch(argv, cwd=workdir, env_add=env_add, prompt=payload["prompt"],
                           prompt_via=payload["prompt_via"], log_path=log, timeout=payload["timeout"] or None,
                           label=f"{payload['item_id']} {payload['slot']}", echo=False,
                           stream=payload.get("stream", ""), token_ceiling=payload.get("token_ceiling", 0))
    out = scratch / "out.bundle"
    has_commits = git.bundle_create(repo, out, f"refs/heads/{branch}", exclude=start_sha)
    text, refused = collect(outbox)
    return {
        "exit_code": result.exit_code, "outcome": result.outcome, "elapsed": result.elapsed,
        "wall": time.monotonic() - started,
        "usage": result.usage.as_row() if result.usage is not None else None,
        "log": _read_end(log), "outbox": text, "outbox_refused": refused,
        "bundle": _read(out, said=False) if has_commits else b"",
        "head": git.rev_parse(repo, f"refs/heads/{branch}"),
    }


def _read_end(path: Path) -> bytes:
    """The agent's log as _read takes it, at most its last LOG_BYTES, after a line saying how much
    of its start was left out (the scratch folder goes with the worker)."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size <= LOG_BYTES:
                return handle.read(LOG_BYTES)
            handle.seek(size - LOG_BYTES)
            end = handle.read(LOG_BYTES)
    except OSError:
        return _read(path)  # nothing, or a line saying why, as for any file of the scratch folder
    said = (f"[drover] the agent's log held {size:,} bytes, more than the {LOG_BYTES:,} a worker sends: "
            f"its first {size - len(end):,} were left on the worker\n")
    return said.encode() + end


def _read(path: Path, *, said: bool = True) -> bytes:
    """A file of the scratch folder, which the agent can write: read only as a regular file, never
    through a link (a fifo in the log's place held the worker, and so the drive, for ever; a link to
    /dev/zero read without end: hostile review 27). When it cannot be, nothing, or (`said`) a line
    saying why."""
    try:
        with open_regular(path) as handle:
            return handle.read()
    except FileNotFoundError:
        return b""
    except OSError as exc:
        return f"[drover] {path.name} was not taken: {exc.strerror}\n".encode() if said else b""
