"""The JSON each reporting command prints with --json: one documented shape per command
(docs/commands.md), built here from what the core returns, so the command only prints it."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drover.errors import Finding
    from drover.ledger.project import Project


def new_report(project: Project, item_id: str, finding: str) -> dict[str, Any]:
    """`new --json`: the item as written, read back from its file."""
    from drover.items.file import read_item

    made = read_item(project.item_path(item_id), project.config.prefix)
    return {"id": item_id, "path": project.relpath(project.item_path(item_id)), "title": made.title,
            "kind": made.kind, "deps": list(made.deps), "finding": finding or None, "origin": made.origin}


def list_report(listed: list[Any]) -> list[dict[str, Any]]:
    """`list --json`: one object per item."""
    return [{"id": row.entry.id, "title": row.entry.title, "kind": row.entry.kind, "state": row.state,
             "path": row.entry.rel, "deps": list(row.entry.deps), "note": row.note} for row in listed]


def check_report(findings: list[Finding]) -> dict[str, Any]:
    """`check --json`: {"ok", "problems": [{"code", "severity", "path", "line", "message"}]}, each as its finding says."""
    return {"ok": not any(found.error for found in findings),
            "problems": [{"code": str(found.code), "severity": "error" if found.error else "warning",
                          "path": found.path, "line": found.line, "message": found.message} for found in findings]}


def provenance_report(provenance: Any) -> dict[str, Any]:
    return {"requested": provenance.requested, "resolved": provenance.resolved or "builtin",
            "base_hashes": dict(provenance.base_hashes), "template_sha256": provenance.template_sha256,
            "prompt_sha256": provenance.prompt_sha256}


def prompt_report(item_id: str, slot: str, rendered: Any) -> dict[str, Any]:
    """`prompt --json`: the text, where it came from, and its size in (estimated) tokens."""
    return {"id": item_id, "slot": slot, "text": rendered.text, "template": provenance_report(rendered.provenance),
            "tokens": rendered.tokens, "warnings": list(rendered.warnings)}


def launch_report(launch: Any, cwd: str, setup: str) -> dict[str, Any]:
    """`run/review/draft --dry-run --json`: what a launch would do, and nothing it did."""
    return {
        "id": launch.item_id, "slot": launch.slot, "agent": launch.agent.identity, "timeout": launch.agent.timeout,
        "argv": list(launch.argv), "prompt_via": launch.prompt_via, "env": dict(sorted(launch.env_add.items())),
        "branch": launch.branch or None, "cwd": cwd, "worktree": launch.worktree is not None,
        "setup": setup if launch.worktree is not None and setup else None,
        "prompt": launch.prompt, "template": provenance_report(launch.provenance),
        "warnings": list(launch.warnings), "binary_missing": launch.binary_missing or None,
    }


def drive_report(results: list[Any], ok: bool) -> dict[str, Any]:
    """`drive --json`: the summary table as data; `ok` as the exit status is 0."""
    return {
        "items": [{"id": row.item_id, "result": row.result, "approved": row.approved, "rounds": row.rounds,
                   "runs": row.runs, "note": row.note,
                   "failures": [dict(entry) for entry in row.failures]} for row in results],
        "approved": sum(row.approved for row in results),
        "finished": sum(row.result == "finished" for row in results),  # merged: only under --finish
        "total": len(results),
        "ok": ok, "problems": [],
    }


def drive_refused(lines: Any, dry_run: bool) -> dict[str, Any]:
    """`drive --json` refused before it started: the summary's (or, with --dry-run, the plan's) shape
    with no item, `ok` false and the refusal, its listed lines below it, as the one problem."""
    shape: dict[str, Any] = ({"dry_run": True, "items": []} if dry_run
                             else {"items": [], "approved": 0, "finished": 0, "total": 0})
    return {**shape, "ok": False, "problems": ["\n".join(lines)]}


def plan_report(steps: list[Any], executor: str, where: str, finish: bool) -> dict[str, Any]:
    """`drive --dry-run --json`: each item's next step, and nothing done."""
    return {"dry_run": True, "executor": executor, "where": where, "finish": finish,
            "items": [{"id": step.id, "next": step.next, "waiting": list(step.waiting), "note": step.said}
                      for step in steps]}


def finish_report(item_id: str, finished: Any) -> dict[str, Any]:
    """`finish --json`: what finish did (its lines) and what stopped it (problems)."""
    return {"id": item_id, "ok": not finished.problems, "lines": list(finished.lines),
            "problems": list(finished.problems)}
