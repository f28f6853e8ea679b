"""What a drive says before it launches anything: its header (agents, items, jobs, budgets, a
pool too small for its checks, the retry policies) and, with --dry-run, each item's next step."""
from __future__ import annotations

from typing import NamedTuple

from drover import prompts as templates
from drover.agents.presets import stream_of
from drover.ledger.db import Ledger
from drover.ledger.listing import Listed, is_ready, list_items
from drover.errors import shown_paths  # the one list of at most N "and K more"
from drover.ledger.project import Project
from drover.ledger.state import NOT_DRIVEN, State
from drover.loop.retry import header_lines as retry_header
from drover.vocabulary import SLOTS, counted


def item_rows(project: Project) -> dict[str, Listed]:
    """Every item's listed row by id, in list order: one listing that the queue, the items that
    follow it and the dry run's plan all read."""
    with Ledger(project.ledger_path) as ledger:
        return {row.entry.id: row for row in list_items(project, ledger)}


def ready_ids(project: Project, finish: bool = False, rows: dict[str, Listed] | None = None) -> list[str]:
    """Items drive takes: the ready ones, and with --finish the approved ones an earlier drive left."""
    rows = item_rows(project) if rows is None else rows
    return [item_id for item_id, row in rows.items() if is_ready(row) or (finish and row.state == State.APPROVED)]


def queue_of(project: Project, ids: list[str] | tuple[str, ...], finish: bool,
             rows: dict[str, Listed] | None = None) -> list[str]:
    """The items a drive takes, in order: the ids given (each once), or the ready ones."""
    return list(dict.fromkeys(ids)) if ids else ready_ids(project, finish, rows)


def header(project: Project, ids: list[str], jobs: int, finish: bool, then: list[str] | None = None,
           rows: dict[str, Listed] | None = None) -> list[str]:
    """Agents per slot, template warnings, and the work ahead (`then`: the items that follow as
    their deps finish; from `rows`, the listing, the items that wait on a dep this drive will not
    finish, and why)."""
    lines = ["drover drive"]
    for slot in SLOTS[:2]:
        agent = project.config.agent_for(slot)
        lines.append(f"  {slot:<9} agent {agent.identity} (preset {agent.preset}, timeout {agent.timeout})")
        for warning in templates.launch_warnings(slot, root=project.root, config=project.config):
            lines.append(f"  warning: {warning}")
    ahead = ", ".join(ids) if ids else "nothing is ready"
    lines.append(f"  items: {ahead}")
    if then:
        lines.append(f"  then, as their deps are finished: {', '.join(then)}")
    lines += _waiting_lines(rows or {}, [*ids, *(then or [])], finish)
    lines += _left_lines(project, rows or {}, ids, finish)
    cap = project.config.max_rounds
    lines.append(f"  jobs: {jobs}; cap: {counted(cap, 'round')}; finish: {'yes' if finish else 'no'}")
    ceilings = [f"{name} {value:,}" for name, value in (("run", project.config.budget.run_tokens),
                ("item", project.config.budget.item_tokens), ("drive", project.config.budget.drive_tokens)) if value]
    if ceilings:
        lines.append(f"  budget: {', '.join(ceilings)} tokens (drover help budgets)")
        lines += _unmetered(project)
    return lines + _pool_warning(project, jobs) + _verify_warnings(project) + retry_header(project.config)


def _verify_warnings(project: Project) -> list[str]:
    """What `drover check` warns of a verify command, said where a drive starts too: one that cannot
    start fails every item's check, and one whose tests import this checkout's code passes what a
    branch broke, all night long."""
    from drover.loop.runnable import verify_commands_problems

    return [f"  warning: [verify] {', '.join(keys)} {said}"
            for keys, _, said in verify_commands_problems(project.config.verify, project.root)]


def _unmetered(project: Project) -> list[str]:
    """The slots whose agent prints no usage (an `[agent] command` is read as plain text; aider, gemini
    and opencode say none): their runs count no tokens, so no ceiling ends them (a new user's header
    said `budget: run 100,000` over a scripted agent, and a run past it merged, nothing said why)."""
    silent = {slot: project.config.agent_for(slot) for slot in SLOTS[:2]}
    silent = {slot: agent for slot, agent in silent.items() if not stream_of(agent)}
    if not silent:
        return []
    why = "; ".join(dict.fromkeys("an [agent] command is read as plain text" if agent.command.strip()
                                  else f"preset {agent.preset}" for agent in silent.values()))
    one = len(silent) == 1
    return [f"  warning: [budget]: the {' and '.join(silent)} agent{'' if one else 's'} report{'s' if one else ''} "
            f"no usage ({why}): {'its' if one else 'their'} runs count no tokens and no ceiling ends them"]


def _pool_warning(project: Project, jobs: int) -> list[str]:
    """A pool too small for the drive's jobs and their checks: an item holds its pooled worktree
    while drover's check holds another, so a pool under two a job hands each check a worktree it
    cannot keep, and `[run] setup` runs in it again for every item (docs/worktrees.md). `[run] keep`
    alone costs the same: what it spares (cargo's `target/`, a build cache the verify command fills
    itself) is built again by every check, in a worktree that starts without it."""
    config = project.config
    if not (config.worktree and config.pool and (config.setup or config.keep) and any(config.verify.values())):
        return []
    if config.pool >= 2 * jobs:
        return []
    again = ("run [run] setup again" if config.setup else
             "start without what [run] keep spares and build it again")
    return [f"  warning: [run] pool = {config.pool} is under two worktrees a job ({2 * jobs} for --jobs {jobs}): "
            f"an item and drover's check of it each hold one, so checks would {again} for every "
            f"item; set pool = {2 * jobs}"]


def unmerged_hint(ids: list[str]) -> str:
    """What merges the approved items a drive without --finish leaves (a new user's second drive said
    `nothing to drive` of an item the first had approved, and nothing of `finish`)."""
    named = shown_paths(ids, most=MAX_WAITING)
    if len(ids) == 1:
        return f"approved, not merged: {named}: `drover finish {ids[0]}` merges it (or `drover drive --finish`)"
    return f"approved, not merged: {named}: `drover finish ID` merges each (or `drover drive --finish` all)"


def _left_lines(project: Project, rows: dict[str, Listed], taken: list[str], finish: bool) -> list[str]:
    """What a drive of the ready items leaves for a person, and the way on: each item that needs
    requirements, and without --finish the approved ones (a new user's `drover new`, then `drover
    drive`, said `nothing is ready` and `nothing to drive`, and no more)."""
    lines = [f"  {item_id}: {project.needs_requirements_note(item_id)}" for item_id, row in rows.items()
             if row.state == State.NEEDS_REQUIREMENTS and item_id not in taken]
    if len(lines) > MAX_WAITING:
        lines = lines[:MAX_WAITING] + [f"  ... and {len(lines) - MAX_WAITING} more that need requirements "
                                       "(`drover list --state 'needs requirements'`)"]
    unmerged = [item_id for item_id, row in rows.items() if row.state == State.APPROVED and item_id not in taken]
    if unmerged and not finish:  # a drive without --finish takes none of them
        lines.append(f"  {unmerged_hint(unmerged)}")
    return lines


# What frees a dep that holds an item back, by the dep's state (a drive takes none of these itself).
_FREED_BY = {State.PARKED: "`drover unpark {id}`", State.NEEDS_REQUIREMENTS: "write its requirements or `drover draft {id}`",
             State.UNREADABLE: "fix its file (`drover check`)", State.APPROVED: "`drover drive --finish` merges it",
             State.RUNNING: "its run is live in another drover"}
MAX_WAITING = 5  # items named as waiting; the rest are counted


def _waiting_lines(rows: dict[str, Listed], taken: list[str], finish: bool) -> list[str]:
    """`waiting: D-19 on D-5 (parked: `drover unpark D-5`)` for each blocked item this drive will not
    take (a new user's drive said only `nothing is ready`): its deps that are not done and that
    this drive does not take, each with its state and what frees it."""
    lines = []
    for item_id, row in rows.items():
        if item_id in taken or row.state != State.BLOCKED:
            continue
        # the deps this drive does not take: one it takes is the dry run's plan's to tell
        deps = [dep for dep in row.entry.deps if dep not in taken and (dep not in rows or rows[dep].state != State.DONE)]
        said = []
        for dep in deps:
            state = rows[dep].state if dep in rows else None
            if state is None:
                said.append(f"{dep} (no such item)")
            elif state == State.APPROVED and finish:
                said.append(f"{dep} (approved)")
            else:
                freed = _FREED_BY.get(state, "")
                said.append(f"{dep} ({state}{': ' + freed.format(id=dep) if freed else ''})")
        if said:
            lines.append(f"  waiting: {item_id} on {', '.join(said)}")
    if len(lines) > MAX_WAITING:
        lines = lines[:MAX_WAITING] + [f"  waiting: ... and {len(lines) - MAX_WAITING} more (`drover list --state blocked`)"]
    return lines


def _following(rows: dict[str, Listed], queue: list[str]) -> list[tuple[str, list[str]]]:
    """The blocked items whose deps not done are all in `queue`, or follow one that is: (id, those deps)."""
    taken = set(queue)
    following: list[tuple[str, list[str]]] = []
    grew = True
    while grew:
        grew = False
        for item_id, row in rows.items():
            if item_id in taken or row.state != State.BLOCKED:
                continue
            waiting = [dep for dep in row.entry.deps if dep in rows and rows[dep].state != State.DONE]
            if waiting and all(dep in taken for dep in waiting):
                taken.add(item_id)
                following.append((item_id, waiting))
                grew = True
    return following


def following_ids(rows: dict[str, Listed], queue: list[str]) -> list[str]:
    """The items a `drive --finish` of `queue` takes once their deps are finished, in that order."""
    return [item_id for item_id, _ in _following(rows, queue)]


def not_reached(rows: dict[str, Listed], then: list[str], accounted: set[str], stopped: bool) -> list[tuple[str, str]]:
    """The items the header said a `drive --finish` would take once their deps were finished
    (`then`), and that it never started (a dep failed or was parked, or the drive stopped): (id,
    why), for the summary, the report and `[notify]`, which named them nowhere. `accounted`: the
    items it started, and those it named as not started when it stopped (its queue's)."""
    def waits(item_id: str) -> str:
        return ", ".join(dep for dep in rows[item_id].entry.deps if dep in rows and rows[dep].state != State.DONE)

    return [(item_id, "not started: " + ("the drive stopped" if stopped else
                                         f"it waits on {waits(item_id)}, which this drive did not finish"))
            for item_id in then if item_id not in accounted and item_id in rows]


class Step(NamedTuple):
    """One item's next step in a dry run: `next` is run (implement and review), finish, skip
    (needs requirements; done, parked, unreadable or running, given by id) or blocked (it follows `waiting`, deps this drive takes); `said` the words."""

    id: str
    next: str
    said: str
    waiting: tuple[str, ...] = ()


def _finish_would(project: Project, item_id: str) -> str:
    """What a finish of an approved item would do: merge it, or record it done where base merged
    its approved commit already (a finish stopped before it recorded it, or a merge by hand)."""
    from drover.loop.finish import merged_already

    with Ledger(project.ledger_path) as ledger:
        merge = merged_already(project, ledger, item_id)
    if not merge:
        return "finish would merge it"
    return (f"finish would record it done: {project.config.base} holds its approved commit already, merged by "
            f"{merge[:12]}; nothing would be merged")


def dry_run_plan(project: Project, queue: list[str], rows: dict[str, Listed], *, explicit: bool, finish: bool,
                 where: str) -> list[Step]:
    """The work ahead of a drive: each item's next step, and the blocked items that follow a dep
    this drive takes (with --finish, once the dep is finished)."""
    steps = []
    for item_id in queue:
        row = rows.get(item_id)
        if row is not None and row.state == State.NEEDS_REQUIREMENTS:
            steps.append(Step(item_id, "skip", f"would be skipped: {project.needs_requirements_note(item_id)}"))
        elif row is not None and row.state in NOT_DRIVEN:  # the drive lists it skipped: done, parked, running
            steps.append(Step(item_id, "skip", f"would be skipped: {row.state}" + (f" ({row.note})" if row.note else "")))
        elif row is not None and row.state == State.APPROVED:
            steps.append(Step(item_id, "finish", _finish_would(project, item_id)))
        elif row is not None and row.state == State.IN_REVIEW:  # its work is committed: no implementer first
            steps.append(Step(item_id, "run", f"review would run on {where} (implement again only if it sends back)"))
        else:
            steps.append(Step(item_id, "run", f"implement and review would run on {where}"))
    if explicit:
        return steps
    for item_id, waiting in _following(rows, queue):
        deps = ", ".join(waiting)
        are = "is" if len(waiting) == 1 else "are"
        if finish:
            said = f"blocked on {deps}: follows in this drive once {deps} {are} finished"
        else:
            said = f"blocked on {deps}: waits until {deps} {are} finished (drive --finish would take it next, in the same drive)"
        steps.append(Step(item_id, "blocked", said, tuple(waiting)))
    return steps
