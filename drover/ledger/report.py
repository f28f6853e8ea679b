"""The morning report's data (`drover report`, `drive --report`, `[notify]`): what merged, what is
parked, failed or over budget and why; rounds, checks, runs, tokens and cost per item; per agent
and per model, approval at first review, rounds to approval and failures by class.

Built from one read of each ledger table (items, runs, rounds, audits, checks) and the catalogue;
the rows are named types, and `as_json` is the documented JSON (docs/report.md, `SCHEMA`)."""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from drover.agents.failures import with_reason
from drover.agents.usage import price, sum_costs
from drover.errors import UsageError
from drover.ledger.catalogue import Entry, catalogue, collector_paused
from drover.ledger.connection import now
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import AUDIT_COLUMNS, CHECK_COLUMNS, ROUND_COLUMNS, RUN_COLUMNS, Audit, Check, Round, Run
from drover.vocabulary import APPROVING_LEVELS, CHECKER, DROVER, OVER_BUDGET, PARKED_ITS_ITEM

SCHEMA = 1
UNCLASSIFIED = "unclassified"  # a run that did not end well and has no failure class (yet)
UNKNOWN_MODEL = "(unknown)"
# An item's status in the report, in the order the report lists them.
STATUSES = ("merged", "over_budget", "parked", "failed", "open")
_SINCE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


class RunLine(NamedTuple):
    """One agent run."""

    id: str
    item: str
    slot: str
    agent: str
    model: str
    started: str
    ended: str | None
    outcome: str  # ok | failed | parked | unfinished
    exit_status: int | None
    failure: str  # "" (ok or unfinished), a failure class, or "unclassified"
    reason: str
    reset_at: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None
    cost_source: str  # rates | cli | ""


class ItemLine(NamedTuple):
    """One item: where it stands and what it took."""

    id: str
    title: str
    kind: str
    deps: tuple[str, ...]
    status: str  # one of STATUSES
    reason: str
    rounds: int
    checks_passed: int
    checks_failed: int
    runs: int
    failed_runs: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_source: str  # rates | cli | mixed | ""
    approved_at_first_review: bool | None
    rounds_to_approval: int | None


class GroupLine(NamedTuple):
    """One agent identity or one model, over the runs it made and the items it implemented."""

    name: str
    items: int
    runs: int
    implemented: int
    approved: int
    approved_at_first_review: int
    first_review_share: float | None
    mean_rounds_to_approval: float | None
    failures: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_source: str


class Totals(NamedTuple):
    """The whole report's sums."""

    items: int
    runs: int
    failed_runs: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    cost_source: str
    failures: dict[str, int]
    unpriced_tokens: int = 0  # tokens of the runs no cost is known for: the cost leaves them out


class Report(NamedTuple):
    """Everything `drover report` shows."""

    schema: int
    generated: str
    since: str | None
    rated_models: tuple[str, ...]
    merged: tuple[str, ...]
    over_budget: tuple[str, ...]
    parked: tuple[str, ...]
    failed: tuple[str, ...]
    items: tuple[ItemLine, ...]
    runs: tuple[RunLine, ...]
    agents: tuple[GroupLine, ...]
    models: tuple[GroupLine, ...]
    totals: Totals


# What each JSON field means: docs/report.md's tables are generated from these (tools/docgen.py),
# and tests hold every row type's fields against them.
MEANINGS: dict[str, dict[str, str]] = {
    "Report": {
        "schema": f"the version of this JSON's shape ({SCHEMA}); raised when a field changes meaning or goes",
        "generated": "when the report was made (UTC, ISO 8601)",
        "since": "the start of the window (`--since`, UTC, ISO 8601), or null for the whole ledger",
        "rated_models": "the models the operator's rate card prices; other costs are the CLI's own figure",
        "merged": "ids of the items merged (done)",
        "over_budget": "ids of the items drover parked past a token ceiling (their reason begins `over budget: `)",
        "parked": "ids of the other parked items",
        "failed": "ids of the items whose newest run did not end well (not done, not parked)",
        "items": "one object per item (below), in id order",
        "runs": "one object per agent run (below), oldest first",
        "agents": "one object per agent identity (below)",
        "models": "one object per model (below); runs whose CLI named none are `(unknown)`",
        "totals": "the sums over the window (below)",
    },
    "ItemLine": {
        "id": "the item id", "title": "its title, as its file says (empty when unreadable)",
        "kind": "its kind", "deps": "the ids it depends on",
        "status": "merged, over_budget, parked, failed or open",
        "reason": "why it is parked, or which run failed and why, or for a merged item the tracker writes "
                  "not applied; empty otherwise",
        "rounds": "rounds of changes (a failed check's included)",
        "checks_passed": "drover's checks of its branch that passed (not those of base itself)",
        "checks_failed": "those that did not (an interrupted check is neither)",
        "runs": "agent runs (every slot)", "failed_runs": "of them, those that did not end well",
        "input_tokens": "tokens in over its runs (unknown counts as 0)", "output_tokens": "tokens out",
        "cost_usd": "what its runs cost in USD, or null when no run's cost is known",
        "cost_source": "rates (the operator's rate card), cli (the CLI's own figure), mixed, or empty",
        "approved_at_first_review": "whether the first verdict of a review was an approval; null before any verdict",
        "rounds_to_approval": "rounds before its first approval; null when not approved",
    },
    "RunLine": {
        "id": "the run id", "item": "its item", "slot": "implement, review or draft",
        "agent": "the agent identity", "model": "the model the CLI named, or `(unknown)`",
        "started": "when it started (UTC)", "ended": "when it ended, or null (running, or died)",
        "outcome": "ok (exit 0), failed, parked (a review that parked its item), or unfinished",
        "exit_status": "the agent's exit status, or null", "failure": "its failure class, `unclassified`, or empty",
        "reason": "the words that decided the class, or why it ended", "reset_at": "when a rate limit resets, or null",
        "input_tokens": "tokens in, or null when the CLI did not say", "output_tokens": "tokens out, or null",
        "cost_usd": "its cost in USD, or null", "cost_source": "rates, cli or empty",
    },
    "GroupLine": {
        "name": "the agent identity or the model",
        "items": "items it had a run on", "runs": "its runs",
        "implemented": "items it implemented (had an implementing run on)",
        "approved": "of those, items approved",
        "approved_at_first_review": "of those, items approved at their first review",
        "first_review_share": "approved_at_first_review over the implemented items a review judged, or null",
        "mean_rounds_to_approval": "mean rounds before approval over its approved items, or null",
        "failures": "its runs that did not end well, by failure class",
        "input_tokens": "tokens in", "output_tokens": "tokens out",
        "cost_usd": "cost in USD, or null", "cost_source": "rates, cli, mixed or empty",
    },
    "Totals": {
        "items": "items in the report", "runs": "runs in the window", "failed_runs": "runs that did not end well",
        "input_tokens": "tokens in", "output_tokens": "tokens out", "cost_usd": "cost in USD, or null",
        "cost_source": "rates, cli, mixed or empty", "failures": "failed runs by failure class",
        "unpriced_tokens": "tokens (in and out) of the runs whose cost is unknown (a model the rate card "
                           "does not name, a CLI that gives none): cost_usd leaves them out",
    },
}
ROW_TYPES: dict[str, type] = {"Report": Report, "ItemLine": ItemLine, "RunLine": RunLine,
                              "GroupLine": GroupLine, "Totals": Totals}


def since_of(text: str, at: datetime | None = None) -> str:
    """`--since`: an ISO date or date-time (UTC unless it says), or a duration back from now
    (7d, 12h, 90m, 1d12h) -> the ledger's time format, for comparing as text."""
    text = text.strip()
    at = at or datetime.now(timezone.utc)
    match = _SINCE.match(text)
    # a window reaching past what a datetime holds (`--since 99999999999d`, year 1 at +05:00) starts
    # at its end: the same items, and no OverflowError
    earliest, latest = (moment.replace(tzinfo=timezone.utc) for moment in (datetime.min, datetime.max))
    if text and match and any(match.groups()):
        days, hours, minutes, seconds = (int(group or 0) for group in match.groups())
        back = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
        start = earliest if back >= (at - earliest).total_seconds() else at - timedelta(seconds=back)
    else:
        try:
            start = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise UsageError(f"--since {text!r}: expected a date or time (2026-12-04, 2026-12-04T22:00) "
                             "or a duration back from now (12h, 7d, 90m)") from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=timezone.utc)
        try:
            start = start.astimezone(timezone.utc)
        except OverflowError:
            start = earliest if start.year == datetime.min.year else latest
    return start.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def build_report(project: Project, ledger: Ledger, *, since: str | None = None,
                 rates: dict[str, tuple[float, float]] | None = None, also: Mapping[str, Ended] | None = None,
                 waiting: bool = False) -> Report:
    """The report over the whole ledger, or over what happened since `since` (as since_of gives it);
    `also`: items it names whatever happened to them (a drive's items, those it never started too),
    each with how the drive said it ended; `waiting` (a drive's report): the items that need
    requirements too, which the drive's header named and left for a person, with the way on."""
    with collector_paused():
        entries = catalogue(project, ledger)
    left = {item_id: Ended("", project.needs_requirements_note(item_id))
            for item_id, entry in entries.items() if waiting and entry.placeholder}
    also = {**left, **_orphaned(project, ledger), **(also or {})}
    return report_of(entries, read_tables(ledger, since), since=since, rates=rates or {}, also=also)


def _orphaned(project: Project, ledger: Ledger) -> dict[str, Ended]:
    """Each item whose run's drover is gone while its agent runs on (a drive SIGKILLed in the night),
    failed with the orphan's note, as the drive that met it reports it: the ledger alone shows it open,
    and the morning report said nothing of it."""
    from drover.ledger.state import running_notes

    notes = running_notes(ledger.unfinished_runs(), project.runs_dir)
    return {item: Ended("failed", note) for item, note in notes.items() if note}


class Ended(NamedTuple):
    """How a drive said an item ended, for an item the ledger shows as open (its implementing run
    ended well, and what stopped it is no row: a verify command that fails on base too, the drive's
    token ceiling, no verdict, a stop): `status` one of STATUSES ("" to keep open), `reason` its note."""

    status: str
    reason: str


class Tables(NamedTuple):
    """The ledger's rows a report reads, each table read once."""

    items: dict[str, dict[str, Any]]
    runs: list[Run]
    rounds: list[Round]
    audits: list[Audit]
    checks: list[Check]
    unapplied: dict[str, list[str]] = {}  # item -> `#101 close`: judgments the tracker was not told
    parked_by: dict[str, str] = {}  # item -> who parked it last (`drover` for a budget's park)


def read_tables(ledger: Ledger, since: str | None) -> Tables:
    """One read of each table; with `since`, only the rows of that time or later."""
    conn = ledger.conn

    def read(sql: str, column: str) -> list[Any]:
        if since is None:
            return list(conn.execute(sql))
        return list(conn.execute(f"{sql} WHERE {column} >= ?", (since,)))

    items = {row["id"]: dict(row) for row in conn.execute("SELECT * FROM items")}
    runs = [Run.from_row(row) for row in read(f"SELECT {RUN_COLUMNS} FROM runs", "started")]
    rounds = [Round(*row) for row in read(f"SELECT {ROUND_COLUMNS} FROM rounds", "at")]
    audits = [Audit.from_row(row) for row in read(f"SELECT {AUDIT_COLUMNS} FROM audits", "at")]
    checks = [Check(*row) for row in read(f"SELECT {CHECK_COLUMNS} FROM checks", "started")]
    runs.sort(key=lambda run: run.started or "")
    # the newest judgment of each issue (dispose may be asked again); `keep` writes nothing
    newest = {(row["item"], row["issue"]): row for row in
              conn.execute("SELECT item, issue, disposition, applied FROM dispositions ORDER BY at, id")}
    unapplied: dict[str, list[str]] = {}
    for (item, issue), row in newest.items():
        if not row["applied"] and row["disposition"] != "keep":
            unapplied.setdefault(item, []).append(f"#{issue} {row['disposition']}")
    parked_by = {row["item"]: row["by"] for row in
                 conn.execute("SELECT item, by FROM events WHERE command = 'park' ORDER BY id")}
    return Tables(items, runs, rounds, audits, checks, unapplied, parked_by)


def report_of(entries: dict[str, Entry], tables: Tables, *, since: str | None,
              rates: dict[str, tuple[float, float]], also: Mapping[str, Ended] | None = None) -> Report:
    """The report from the catalogue's entries and the ledger's rows."""
    run_lines = [_run_line(run, rates) for run in tables.runs]
    by_item: dict[str, list[RunLine]] = {}
    for line in run_lines:
        by_item.setdefault(line.item, []).append(line)
    rounds = _grouped(tables.rounds)
    audits = _grouped(tables.audits)
    checks = _grouped(tables.checks)
    also = also or {}
    ids = set(by_item) | set(rounds) | set(audits) | set(checks) | set(also)
    # an item the ledger knows with neither a file nor a row of history (made by `drover new`,
    # deleted before any run) is no item, as in list, check and show (docs/items.md)
    if since is None:
        ids |= set(entries)
    else:
        ids |= {item for item, row in tables.items.items() if (item in entries or row.get("done_at"))
                and any((row.get(column) or "") >= since for column in ("done_at", "parked_at"))}
    items = tuple(_item_line(item_id, entries.get(item_id), tables.items.get(item_id) or {},
                             by_item.get(item_id, []), rounds.get(item_id, []), audits.get(item_id, []),
                             checks.get(item_id, []), tables.unapplied.get(item_id, []), also.get(item_id),
                             tables.parked_by.get(item_id, DROVER))
                  for item_id in sorted(ids, key=_id_key))
    item_of = {item.id: item for item in items}
    agents = _groups(run_lines, item_of, lambda line: line.agent)
    models = _groups(run_lines, item_of, lambda line: line.model)

    def status(word: str) -> tuple[str, ...]:
        return tuple(item.id for item in items if item.status == word)

    failures = _failures(run_lines)
    cost, source = _cost(run_lines)
    totals = Totals(len(items), len(run_lines), sum(failures.values()),
                    sum(line.input_tokens or 0 for line in run_lines),
                    sum(line.output_tokens or 0 for line in run_lines), cost, source, failures,
                    sum((line.input_tokens or 0) + (line.output_tokens or 0) for line in run_lines
                        if line.cost_usd is None))
    return Report(SCHEMA, now(), since, tuple(sorted(rates)), status("merged"), status("over_budget"),
                  status("parked"), status("failed"), items, tuple(run_lines), agents, models, totals)


def _grouped(rows: Iterable[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for row in rows:
        found.setdefault(row.item, []).append(row)
    return found


def _id_key(item_id: str) -> tuple[str, int, str]:
    prefix, _, number = item_id.rpartition("-")
    return (prefix, int(number), "") if number.isdigit() else (item_id, -1, item_id)


def _run_line(run: Run, rates: dict[str, tuple[float, float]]) -> RunLine:
    model = run.model or UNKNOWN_MODEL
    cost, source = price(model, run.input_tokens, run.output_tokens, run.cost_usd, rates)
    if run.finished is None:
        outcome, failure = "unfinished", ""
    elif not run.failure and (run.reason or "").startswith(PARKED_ITS_ITEM):
        outcome, failure = "parked", ""  # a review that ended by parking its item: no failure, whatever it exited
    elif run.exited_zero and not run.failure:
        outcome, failure = "ok", ""
    else:
        outcome, failure = "failed", run.failure or UNCLASSIFIED
    reason = run.reason or ("" if outcome != "failed" or run.outcome == "exited" else run.outcome or "")
    return RunLine(run.id, run.item, run.slot, run.agent, model, run.started, run.finished, outcome,
                   run.exit_status, failure, reason, run.reset_at, run.input_tokens, run.output_tokens, cost, source)


def _approves(audit: Audit) -> bool:
    """Whether an audit approved: it opened the gate, or (recorded before that was kept) its level does."""
    return bool(audit.opens) if audit.opens is not None else audit.level in APPROVING_LEVELS


def _item_line(item_id: str, entry: Entry | None, row: dict[str, Any], runs: list[RunLine], rounds: list[Round],
               audits: list[Audit], checks: list[Check], unapplied: list[str], ended: Ended | None,
               parked_by: str = "") -> ItemLine:
    parked_reason = row.get("parked_reason") or ""
    failed = [run for run in runs if run.outcome == "failed"]
    reason = ""
    if row.get("done"):
        status = "merged"
        if unapplied:  # merged, and the tracker never heard: the drive only said so on its screen
            reason = (f"the tracker was not told: {', '.join(unapplied)} (`drover finish {item_id}` "
                      "tries again)")
    elif row.get("parked"):
        # over budget only by drover's own park: an agent may park its item in the same words (hostile review 24)
        budget = parked_reason.startswith(OVER_BUDGET) and parked_by == DROVER
        status, reason = ("over_budget" if budget else "parked"), parked_reason
    elif runs and runs[-1].outcome == "failed":
        last = runs[-1]
        status = "failed"
        reason = f"{last.slot} run {last.id}: {with_reason(last.failure, last.reason)}"
    else:
        status = "open"
    if status == "open" and ended is not None:  # what only the drive knew: a check base fails too, its ceiling
        status, reason = ended.status or status, ended.reason
    approval = min((audit.at for audit in audits if _approves(audit)), default=None)
    reviews = sorted([(one.at, False) for one in rounds if one.by != CHECKER]
                     + [(audit.at, True) for audit in audits if _approves(audit)])
    first = reviews[0][1] if reviews else None
    to_approval = None if approval is None else sum(1 for one in rounds if one.at < approval)
    cost, source = _cost(runs)
    checks = [check for check in checks if check.judged]  # not base's own, nor one a Ctrl-C ended
    passed = sum(1 for check in checks if check.passed)
    title, kind, deps = (entry.title, entry.kind, entry.deps) if entry is not None else ("", "", ())
    return ItemLine(item_id, title, kind, tuple(deps), status, reason, len(rounds), passed, len(checks) - passed,
                    len(runs), len(failed), sum(run.input_tokens or 0 for run in runs),
                    sum(run.output_tokens or 0 for run in runs), cost, source, first, to_approval)


def _cost(runs: Iterable[RunLine]) -> tuple[float | None, str]:
    """The sum of the costs known, and whose figures they are."""
    return sum_costs((run.cost_usd, run.cost_source) for run in runs)


def _failures(runs: Iterable[RunLine]) -> dict[str, int]:
    found: dict[str, int] = {}
    for run in runs:
        if run.outcome == "failed":
            found[run.failure] = found.get(run.failure, 0) + 1
    return dict(sorted(found.items()))


def _groups(runs: list[RunLine], items: dict[str, ItemLine], name_of: Any) -> tuple[GroupLine, ...]:
    """Per agent (or model): its runs' sums, and its implemented items' approvals."""
    runs_of: dict[str, list[RunLine]] = {}
    for run in runs:
        runs_of.setdefault(name_of(run), []).append(run)
    groups = []
    for name, mine in sorted(runs_of.items()):
        implemented = [items[item] for item in sorted({run.item for run in mine if run.slot == "implement"})
                       if item in items]
        judged = [item for item in implemented if item.approved_at_first_review is not None]
        approved = [item for item in implemented if item.rounds_to_approval is not None]
        first = sum(1 for item in judged if item.approved_at_first_review)
        cost, source = _cost(mine)
        groups.append(GroupLine(
            name, len({run.item for run in mine}), len(mine), len(implemented), len(approved), first,
            first / len(judged) if judged else None,
            sum(item.rounds_to_approval or 0 for item in approved) / len(approved) if approved else None,
            _failures(mine), sum(run.input_tokens or 0 for run in mine), sum(run.output_tokens or 0 for run in mine),
            cost, source))
    return tuple(groups)


def as_json(report: Report) -> dict[str, Any]:
    """The report as plain data: the JSON docs/report.md documents."""
    return _plain(report)  # type: ignore[no-any-return]


def _plain(value: Any) -> Any:
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: _plain(getattr(value, name)) for name in value._fields}
    if isinstance(value, (tuple, list)):
        return [_plain(one) for one in value]
    if isinstance(value, dict):
        return {key: _plain(one) for key, one in value.items()}
    return value
