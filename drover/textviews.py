"""Plain-text views of what the core returns: `show` and the drive summary."""
from __future__ import annotations

from typing import Any


def render_show(shown: dict[str, Any]) -> str:
    """`drover show ID`: the item, then the ledger's story of it in time order per kind."""
    lines = [f"{shown['id']}  {shown['title']}".rstrip(), f"  state: {shown['state']}", f"  file:  {shown['path']}"]
    if shown.get("reason"):
        lines.append(f"  why:   {shown['reason']}")
    if shown.get("approved_head"):
        what = "merged" if shown["done"] else f"the head of {shown['branch']}"
        lines.append(f"  approved: {shown['approved_head'][:12]} ({what})")
    if shown["unreadable"]:
        lines.append(f"  unreadable: {shown['unreadable']}")
    if shown["kind"]:
        lines.append(f"  kind:  {shown['kind']}")
    if shown.get("finding"):
        lines.append(f"  from:  {shown['finding']}")
    if shown["parked"]:
        lines.append(f"  parked: {shown['parked_reason']}")
    if shown["done"]:
        lines.append(f"  done:  {shown['done_at']}")
    if shown["authors"]:
        lines.append(f"  authors: {', '.join(shown['authors'])}")
    extra = {k: v for k, v in shown["meta"].items() if k not in ("id", "title", "kind", "deps")}
    for key, value in extra.items():
        lines.append(f"  {key}: {value}")
    if shown["deps"]:
        lines.append("deps:")
        for dep in shown["deps"]:
            status = "done" if dep["done"] else "not done"
            audit = f"{dep['level']} by {dep['by']}" if dep["level"] else "no audit"
            weak = ", unconfirmed" if dep["weak"] else ""
            unreadable = f", {dep['unreadable']}" if dep["unreadable"] else ""
            lines.append(f"  {dep['id']}  {dep['title']}  ({status}; {audit}{weak}{unreadable})")
    if shown["runs"]:
        lines.append("runs:")
        for run in shown["runs"]:
            if run["finished"]:
                end = f"exit {run['exit_status']}" if run["outcome"] == "exited" else run["outcome"]
            else:
                end = "running" if run["live"] else "unfinished"
            lines.append(f"  {run['id']}  {run['slot']:<9}  {run['agent']}  {run['started']}  {end}")
            source = run.get("resolved_source") or "builtin"
            if run.get("requested_source") and run["requested_source"] != source:
                source += f" (requested {run['requested_source']})"
            hashes = ", ".join(f"{block}@{value}" for block, value in run["base_hashes"].items())
            lines.append(f"    template: {source}" + (f" ({hashes})" if hashes else "")
                         + (f"  prompt sha256 {run['prompt_sha256'][:12]}" if run.get("prompt_sha256") else ""))
    if shown["rounds"]:
        lines.append("rounds:")
        for round_ in shown["rounds"]:
            cleared = f", cleared {round_['cleared_at']}" if round_["cleared_at"] else ""
            lines.append(f"  {round_['number']}. {round_['headline']}  ({round_['by']}, {round_['at']}{cleared})")
    if shown["audits"]:
        lines.append("audits:")
        for row in shown["audits"]:
            note = f": {row['note']}" if row["note"] else ""
            lines.append(f"  {row['level']} by {row['by']} at {row['at']}{note}")
    if shown["dispositions"]:
        lines.append("dispositions:")
        for row in shown["dispositions"]:
            applied = f" (applied: {row['applied']})" if row["applied"] else ""
            lines.append(f"  #{row['issue']} {row['disposition']} by {row['by']}{applied}")
    changes = "cleared" if shown["cleared"] else ("outstanding" if shown["outstanding"] else "none")
    lines.append(f"changes: {changes}")
    return "\n".join(lines)
