"""What a worker does with one prepared run: clone, launch, and pack the result. No Ray here.

The payload is plain data (bytes and strings), so this runs the same under any engine and in a
unit test. The worker keeps nothing: everything lives in a scratch folder removed at the end.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import agents, git
from ..outbox import ENV as OUTBOX_ENV


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def work(payload: dict[str, Any], base_bundle: bytes, *, scratch_parent: str | None = None) -> dict[str, Any]:
    """Run one prepared run in a scratch clone; returns log, exit, timings, outbox and new commits."""
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="drover-worker-", dir=scratch_parent))
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
    env_add = agents.on_this_machine(payload["env"], prompt_file=prompt_file, repo=repo, workdir=workdir)
    env_add[OUTBOX_ENV] = str(outbox)
    argv = [word.replace(payload["prompt_file"], str(prompt_file)) for word in payload["argv"]]
    log = scratch / "agent.log"
    result = agents.launch(argv, cwd=workdir, env_add=env_add, prompt=payload["prompt"],
                           prompt_via=payload["prompt_via"], log_path=log, timeout=payload["timeout"] or None,
                           label=f"{payload['item_id']} {payload['slot']}", echo=False,
                           stream=payload.get("stream", ""))
    out = scratch / "out.bundle"
    has_commits = git.bundle_create(repo, out, f"refs/heads/{branch}", exclude=start_sha)
    return {
        "exit_code": result.exit_code, "outcome": result.outcome, "elapsed": result.elapsed,
        "wall": time.monotonic() - started,
        "usage": result.usage.as_row() if result.usage is not None else None,
        "log": log.read_bytes() if log.exists() else b"",
        "outbox": outbox.read_text(encoding="utf-8") if outbox.exists() else "",
        "bundle": out.read_bytes() if has_commits else b"",
        "head": git.rev_parse(repo, f"refs/heads/{branch}"),
    }
