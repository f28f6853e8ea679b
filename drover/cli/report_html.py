"""The morning report as one self-contained HTML page: inline CSS and inline SVG, no script, no URL.

Every text that comes from the ledger or the item files (titles, reasons, agent and model names,
ids) was written by someone drover does not trust (an agent with a shell): each goes through
`html.escape`, attribute values included, and the page's Content-Security-Policy forbids scripts
and every fetch, so even a mistake here could not make the page reach the network."""
from __future__ import annotations

from datetime import datetime
from html import escape
from typing import TYPE_CHECKING

from drover.errors import shortened

if TYPE_CHECKING:
    from drover.ledger.report import GroupLine, ItemLine, Report, RunLine

# default-src 'none': no script, image, font, frame or connection from anywhere; the inline style only.
POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
# A bar's colour: ok, unfinished, parked (a review that parked its item), then each failure class;
# an unknown class is `other`.
COLOURS = {"ok": "#2e8b57", "unfinished": "#9e9e9e", "parked": "#ffb74d", "rate_limited": "#e0a100", "auth": "#8e24aa",
           "timeout": "#ef6c00", "stalled": "#6d4c41", "crashed": "#c62828", "no_verdict": "#5c6bc0",
           "interrupted": "#78909c", "over_budget": "#ad1457", "unclassified": "#b71c1c", "other": "#455a64"}
STATUS_COLOURS = {"merged": "#c8e6c9", "over_budget": "#f8bbd0", "parked": "#ffe0b2", "failed": "#ffcdd2",
                  "open": "#eceff1"}
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: middle; }
svg text { font: 11px system-ui, sans-serif; }
svg .edge { stroke: #607d8b; stroke-width: 1; fill: none; }
svg .ghost rect { fill: #fff; stroke-dasharray: 3 2; }
svg .node rect { stroke: #37474f; }
"""
_NODE_W, _NODE_H, _COL_GAP, _ROW_GAP = 120, 26, 60, 10
_LABEL_W, _TRACK_W, _ROW_H = 110, 900, 18


def page(report: "Report") -> str:
    """The whole page."""
    window = f"since {report.since}" if report.since else "the whole ledger"
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        f"<title>drover report: {_e(window)}</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        f"<h1>drover report: {_e(window)}</h1>", f"<p>Made {_e(report.generated)}.</p>",
        _summary(report), _outcomes(report), _items(report.items),
        _groups("Agents", "agent", report.agents), _groups("Models", "model", report.models),
        "<h2>Dependencies</h2>", graph(report.items),
        "<h2>Runs</h2>", _legend(), timeline(report.runs, report.generated),
        "</body>", "</html>", ""]
    return "\n".join(parts)


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _tip(text: str) -> str:
    """A tooltip's text, escaped, each bidirectional control (and control character) an agent's words
    bring shown as `?` (errors.printable): a tooltip is one paragraph, where a title's or a model's
    U+202E reversed drover's words after it (`(open)` read as `(approved)`; hostile review 39). A
    table cell is a paragraph of its own, which keeps the agent's reordering to its own words."""
    from drover.errors import printable

    return _e(printable(text))


def money(cost: float | None, source: str) -> str:
    if cost is None:
        return "-"
    label = {"rates": "", "cli": " (CLI's)", "mixed": " (partly CLI's)"}.get(source, "")
    return f"${cost:.4f}{label}"


def unpriced(count: int) -> str:
    """What a cost total leaves out: `, and 12,000 tokens unpriced` ("" when nothing)."""
    return f", and {count:,} tokens unpriced" if count else ""


def tokens(count: int) -> str:
    """A token count; "-" for none: no run reported any (a script agent, a CLI that does not say),
    which is not the same as a run that cost nothing."""
    return f"{count:,}" if count else "-"


def share(value: float | None) -> str:
    """A share as a whole percentage; "-" when there is nothing to share out."""
    return "-" if value is None else f"{value:.0%}"


def mean(value: float | None) -> str:
    """A mean to one decimal; "-" when there is nothing to average."""
    return "-" if value is None else f"{value:.1f}"


def token_totals(tokens_in: int, tokens_out: int) -> str:
    if not tokens_in and not tokens_out:
        return "tokens: none reported"
    return f"tokens {tokens_in:,} in, {tokens_out:,} out"


def _summary(report: "Report") -> str:
    totals = report.totals
    failures = ", ".join(f"{_e(name)} {count}" for name, count in totals.failures.items()) or "none"
    rates = ("rate card for " + ", ".join(_e(model) for model in report.rated_models)) if report.rated_models \
        else "no rate card: costs are the agent CLIs' own figures"
    return (f"<p>{totals.items} items: {len(report.merged)} merged, {len(report.over_budget)} over budget, "
            f"{len(report.parked)} parked, {len(report.failed)} failed. {totals.runs} runs, "
            f"{totals.failed_runs} failed ({failures}). "
            f"{token_totals(totals.input_tokens, totals.output_tokens).capitalize()}. Cost {_e(money(totals.cost_usd, totals.cost_source))}{unpriced(totals.unpriced_tokens)} ({rates}).</p>")


def _outcomes(report: "Report") -> str:
    by_id = {item.id: item for item in report.items}
    rows = []
    for heading, ids in (("merged", report.merged), ("over budget", report.over_budget),
                         ("parked", report.parked), ("failed", report.failed)):
        for item_id in ids:
            item = by_id[item_id]
            rows.append(f"<tr><td>{_e(heading)}</td><td>{_e(item.id)}</td><td>{_e(item.title)}</td>"
                        f"<td>{_e(item.reason)}</td></tr>")
    for item in report.items:  # open with a reason: not started, or waiting on a person (requirements)
        if item.status == "open" and item.reason:
            rows.append(f"<tr><td>open</td><td>{_e(item.id)}</td><td>{_e(item.title)}</td><td>{_e(item.reason)}</td></tr>")
    if not rows:
        return "<h2>Outcomes</h2><p>Nothing merged, parked or failed.</p>"
    return ("<h2>Outcomes</h2><table><tr><th>outcome</th><th>item</th><th>title</th><th>why</th></tr>"
            + "".join(rows) + "</table>")


def _items(items: "tuple[ItemLine, ...]") -> str:
    rows = []
    for item in items:
        first = {None: "-", True: "yes", False: "no"}[item.approved_at_first_review]
        rows.append(
            f'<tr class="item" data-id="{_e(item.id)}"><td>{_e(item.id)}</td><td>{_e(item.status)}</td>'
            f"<td>{_e(item.title)}</td><td class=n>{item.rounds}</td>"
            f"<td class=n>{item.checks_passed}/{item.checks_passed + item.checks_failed}</td>"
            f"<td class=n>{item.runs}</td><td class=n>{item.failed_runs}</td><td>{first}</td>"
            f"<td class=n>{tokens(item.input_tokens)}</td><td class=n>{tokens(item.output_tokens)}</td>"
            f"<td class=n>{_e(money(item.cost_usd, item.cost_source))}</td></tr>")
    return ("<h2>Items</h2><table><tr><th>id</th><th>status</th><th>title</th><th>rounds</th><th>checks ok</th>"
            "<th>runs</th><th>failed</th><th>approved first</th><th>tokens in</th><th>tokens out</th><th>cost</th></tr>"
            + "".join(rows) + "</table>")


def _groups(heading: str, word: str, groups: "tuple[GroupLine, ...]") -> str:
    rows = []
    for group in groups:
        failures = ", ".join(f"{_e(name)} {count}" for name, count in group.failures.items()) or "-"
        rows.append(f"<tr><td>{_e(group.name)}</td><td class=n>{group.items}</td><td class=n>{group.runs}</td>"
                    f"<td class=n>{share(group.first_review_share)}</td>"
                    f"<td class=n>{mean(group.mean_rounds_to_approval)}</td><td>{failures}</td>"
                    f"<td class=n>{tokens(group.input_tokens)}</td><td class=n>{tokens(group.output_tokens)}</td>"
                    f"<td class=n>{_e(money(group.cost_usd, group.cost_source))}</td></tr>")
    return (f"<h2>{heading}</h2><table><tr><th>{word}</th><th>items</th><th>runs</th><th>approved at first review</th>"
            "<th>rounds to approval</th><th>failures</th><th>tokens in</th><th>tokens out</th><th>cost</th></tr>"
            + "".join(rows) + "</table>")


def depths(items: "tuple[ItemLine, ...]") -> dict[str, int]:
    """Each item's (and each named dep's) dependency depth: 0 with no deps, else one more than its
    deepest dep. A dep cycle (a hand-edited file) counts as depth 0 where it closes."""
    deps = {item.id: item.deps for item in items}
    found: dict[str, int] = {}
    for start in [*deps, *(dep for item in items for dep in item.deps)]:
        if start in found:
            continue
        # iterative depth-first along one path: a 200-deep chain must not exhaust Python's stack
        path = [(start, iter(deps.get(start, ())))]
        on_path = {start}
        while path:
            node, pending = path[-1]
            for dep in pending:
                if dep not in found and dep not in on_path:
                    path.append((dep, iter(deps.get(dep, ()))))
                    on_path.add(dep)
                    break
            else:
                found[node] = 1 + max((found.get(dep, -1) for dep in deps.get(node, ())), default=-1)
                path.pop()
                on_path.discard(node)
    return found


def graph(items: "tuple[ItemLine, ...]") -> str:
    """The dependency graph: one node per item (a dashed one per dep outside the report), one edge per
    dep, columns by dependency depth."""
    level = depths(items)
    known = {item.id: item for item in items}
    columns: dict[int, list[str]] = {}
    for node in level:
        columns.setdefault(level[node], []).append(node)
    place: dict[str, tuple[int, int]] = {}
    for depth, nodes in columns.items():
        for row, node in enumerate(nodes):
            place[node] = (10 + depth * (_NODE_W + _COL_GAP), 10 + row * (_NODE_H + _ROW_GAP))
    width = 20 + (max(columns, default=0) + 1) * (_NODE_W + _COL_GAP)
    height = 20 + max((len(nodes) for nodes in columns.values()), default=0) * (_NODE_H + _ROW_GAP)
    edges, nodes = [], []
    for item in items:
        for dep in item.deps:
            (x1, y1), (x2, y2) = place[dep], place[item.id]
            y1, y2 = y1 + _NODE_H // 2, y2 + _NODE_H // 2
            # the line from the dep to the item that needs it, and an open arrowhead at the item
            edges.append(f'<path class="edge" data-from="{_e(dep)}" data-to="{_e(item.id)}" '
                         f'd="M{x1 + _NODE_W} {y1} L{x2} {y2} M{x2 - 6} {y2 - 4} L{x2} {y2} L{x2 - 6} {y2 + 4}"/>')
    for node, (x, y) in place.items():
        found = known.get(node)
        kind = "node" if found is not None else "node ghost"
        fill = STATUS_COLOURS.get(found.status, "#fff") if found is not None else "#fff"
        tip = f"{node}: {found.title} ({found.status})" if found is not None else f"{node}: not in this report"
        nodes.append(f'<g class="{kind}" data-id="{_e(node)}"><title>{_tip(tip)}</title>'
                     f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="4" fill="{fill}"/>'
                     f'<text x="{x + 6}" y="{y + 17}">{_e(shortened(node, 18))}</text></g>')
    return (f'<svg class="graph" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
            + "".join(edges) + "".join(nodes) + "</svg>")


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def colour_of(run: "RunLine") -> str:
    if run.outcome == "failed":
        return COLOURS.get(run.failure, COLOURS["other"])
    return COLOURS.get(run.outcome, COLOURS["unfinished"])


def timeline(runs: "tuple[RunLine, ...]", generated: str) -> str:
    """One bar per run, one row per item, across the window's time; unfinished runs reach `generated`."""
    from drover.agents.failures import with_reason  # the words the report and the drive use for a failure

    if not runs:
        return "<p>No runs.</p>"
    end_now = _seconds(generated) or 0.0
    spans = []
    for run in runs:
        start = _seconds(run.started)
        start = end_now if start is None else start
        end = _seconds(run.ended)
        spans.append((run, start, max(start, end_now if end is None else end)))
    first = min(start for _, start, _ in spans)
    last = max(end for _, _, end in spans)
    scale = _TRACK_W / max(last - first, 1.0)
    rows: dict[str, int] = {}
    for run, _, _ in spans:
        rows.setdefault(run.item, len(rows))
    height = 30 + len(rows) * _ROW_H
    parts = [f'<svg class="timeline" width="{_LABEL_W + _TRACK_W + 20}" height="{height}" role="img">']
    for item, row in rows.items():
        parts.append(f'<text class="row" x="4" y="{row * _ROW_H + 13}">{_e(shortened(item, 16))}</text>')
    for run, start, end in spans:
        x = _LABEL_W + (start - first) * scale
        width = max((end - start) * scale, 2.0)
        what = run.failure if run.outcome == "failed" else run.outcome
        tip = (f"{run.item} {run.slot} run {run.id} by {run.agent} ({run.model}): {with_reason(what, run.reason)}"
               f"; {run.started} to {run.ended or 'no end'}")
        parts.append(f'<rect class="bar" data-run="{_e(run.id)}" data-item="{_e(run.item)}" '
                     f'data-outcome="{_e(what)}" x="{x:.1f}" y="{rows[run.item] * _ROW_H + 2}" '
                     f'width="{width:.1f}" height="{_ROW_H - 4}" fill="{colour_of(run)}">'
                     f"<title>{_tip(tip)}</title></rect>")
    axis_y = len(rows) * _ROW_H + 20
    parts.append(f'<text x="{_LABEL_W}" y="{axis_y}">{_e(_stamp(first))}</text>')
    parts.append(f'<text x="{_LABEL_W + _TRACK_W}" y="{axis_y}" text-anchor="end">{_e(_stamp(last))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _stamp(seconds: float) -> str:
    from datetime import timezone

    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _legend() -> str:
    return ('<p class="legend">' + "".join(f'<span><i style="background:{colour}"></i>{_e(name)}</span>'
                                            for name, colour in COLOURS.items()) + "</p>")
