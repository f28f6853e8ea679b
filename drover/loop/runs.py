"""run, review and draft: prepare a launch (pure), then execute it (branch, worktree, ledger, agent).

`prepare` computes everything a launch needs and writes nothing, which is what --dry-run
prints; `execute` does the work and records it.
"""
from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

from drover.agents import environment, launch as agents, presets
from drover.agents.failures import Failure, classify_run
from drover import git
from drover.prompts import data as template_data
from drover import prompts as templates
from drover.errors import DroverError, GitError, Refused, TemplateError, UsageError
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.agents.locks import attached, claimed_by, run_live
from drover.agents.procs import process_start
from drover.ledger.rows import NewRun, Run, exited_zero

from drover.vocabulary import PARKED_ITS_ITEM, SLOTS as LAUNCH_SLOTS, counted

from drover.executors.base import Executor, Launch
from drover.loop import budgets
from drover.loop.budgets import DriveBudget
from drover.loop import pool, reviewers
from drover.loop.stop import STOPPED_REASON, say_stopped_in_log, stopped
from drover.loop.verdict import no_verdict, review_verdict

if TYPE_CHECKING:
    from drover.config import AgentConfig


@dataclass(frozen=True)
class RunResult:
    run_id: str
    exit_code: int | None
    outcome: str
    elapsed: float
    log_path: Path
    notes: tuple[str, ...] = ()
    failure: Failure | None = None  # why it did not end well (drover/agents/failures.py), as the ledger has it
    # the run's branch -> where the run left it ({} when no branch is there): an implementing run's
    # as its end was recorded, a review's as the check after it read it (reviewers.park_if_changed_under);
    # item_state takes it, so the drive does not ask git again a moment later
    heads: dict[str, str] = field(default_factory=dict)
    head_start: str = ""  # where the branch was when the run started ("" for none yet)
    base_head: str = ""  # where base was at an implementing run's end, read with its branch's head
    in_setup: bool = False  # it ended in `[run] setup` (a signal ended that): no agent started

    @property
    def ending(self) -> str:
        """How it ended, for a progress line: `exited N`, `stalled`, `timeout`, `interrupted`, or
        `[run] setup interrupted` when a signal ended the set-up before any agent started."""
        if self.in_setup:
            return f"[run] setup {self.outcome}"
        if self.stalled:
            return "stalled"
        return f"exited {self.exit_code}" if self.outcome == "exited" else self.outcome

    def ended_as(self, slot: str) -> str:
        """`implement agent exited 1`, or `[run] setup interrupted` when no agent started."""
        return self.ending if self.in_setup else f"{slot} agent {self.ending}"

    @property
    def exited_zero(self) -> bool:
        """The agent exited 0: what `drover run` and a drive count as a run that ended well."""
        return exited_zero(self.outcome, self.exit_code)

    @property
    def stalled(self) -> bool:
        """drover ended it for silence ([agent] stall), long before its timeout (its outcome says timeout)."""
        return self.failure is not None and self.failure.failure == "stalled"


def new_run_id(item_id: str, slot: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    # 8 random hex digits: runs of one item's slot started in the same second stay apart
    return f"{stamp}-{item_id}-{slot}-{os.urandom(4).hex()}"


def refuse_live(project: Project, item_id: str, runs: Sequence[Run]) -> None:
    """Refuse a launch while a run of `runs` is live (locks.run_live): its agent runs, or a drover
    claimed it and is making its worktree ready or running `[run] setup`."""
    from drover.ledger.state import orphan_note

    for run in runs:
        if run_live(run, project.runs_dir):
            orphaned = orphan_note(run, project.runs_dir)  # its drover is gone: say how to end it
            raise Refused(f"{item_id} already has a live run {run.id} ({claimed_by(run, project.runs_dir)})"
                          + (f": {orphaned}" if orphaned else ""))


def require_valid_branch(item_id: str, branch: str, *, source: str = "", base: str = "") -> str:
    """The branch name `[run] branch` (or the template of `source`, as `--template` named it)
    rendered, refused unless git accepts it as a branch name, and when it is `base` itself: an item
    titled `main` through `{{ Title }}` had its implementer commit straight onto base, with no
    review, check or finish (hostile review 38)."""
    what = "the branch template" if source else "[run] branch"
    if not git.valid_branch_name(branch):
        raise TemplateError(f"{what} renders {branch!r} for {item_id}, which is not a valid git branch name",
                            path=source or "drover.toml")
    if base and _same_file_name(branch, base):
        # a case variant (`Main`, `MAIN`) is base's own ref file where the file system ignores case and
        # normalisation (macOS, Windows): git's `refs/heads/Main` opens `refs/heads/main` (hostile review 39)
        said = "[run] base" if branch == base else f"[run] base {base!r} to a file system that ignores case"
        raise TemplateError(f"{what} renders {branch!r} for {item_id}, which is {said}: an item's work "
                            "never goes on base but through its review and finish", path=source or "drover.toml")
    return branch


def _same_file_name(one: str, other: str) -> bool:
    """`one` and `other` name one file where the file system folds case and Unicode normalisation."""
    import unicodedata

    return unicodedata.normalize("NFC", one).casefold() == unicodedata.normalize("NFC", other).casefold()


def prepare(project: Project, ledger: Ledger, item_id: str, slot: str, *,
            explicit_template: str | None = None, agent: AgentConfig | None = None,
            preview: bool = False, heads: dict[str, str] | None = None) -> Launch:
    """Render the prompt and work out argv, environment, branch and directory. Writes nothing.
    `heads`: a review's branch and base heads, when the caller read them with nothing run since
    (a drive, at its implementing run's end); else read here.

    `preview` (a dry run): a review prompt may be shown before any implementing run, to see a
    template; a review launched then would judge base itself, and is refused."""
    if slot not in LAUNCH_SLOTS:
        raise UsageError(f"unknown slot {slot!r}: expected one of {', '.join(LAUNCH_SLOTS)}")
    # the item and its rows are read once here, for the refusals and then for the template data
    record = template_data.ItemRecord.read(project, ledger, item_id, slot)
    row = record.row
    if row.get("done"):
        raise Refused(f"{item_id} is done; nothing to {slot}")
    if row.get("parked"):
        raise Refused(f"{item_id} is parked ({row.get('parked_reason') or 'no reason given'}): `drover unpark {item_id}` first")
    refuse_live(project, item_id, record.runs)
    if slot == "review":
        if not preview and not any(run.slot == "implement" for run in record.runs):
            raise Refused(f"{item_id} has no implementing run to review: `drover run {item_id}` first")
        _refuse_unfinished_work(record)
    heads = dict(heads or {})  # a review's branch and base heads, as its prompt's data read them
    follow_ups = templates.names_follow_ups(slot, root=project.root, config=project.config, explicit=explicit_template)
    data = template_data.build(project, ledger, item_id, slot, record=record, heads=heads, follow_ups=follow_ups)
    branch = data.Branch
    if slot == "review" and not preview and not data.Recent.Commits and not data.Recent.Unavailable:
        raise Refused(f"{item_id}: {reviewers.NOTHING.format(branch=branch, base=project.config.base)}")
    if slot != "draft":
        require_valid_branch(item_id, branch, base=project.config.base)
        if preview and not {branch, project.config.base} & set(git.heads_of(project.root, branch, project.config.base)):
            git.require_base(project.root, project.config.base)  # the launch would make the branch from base: it refuses
    rendered = templates.render(slot, data, root=project.root, config=project.config, explicit=explicit_template)
    agent = agent or project.config.agent_for(slot)  # `agent`: [agent.fallback] in the slot's place
    run_id = new_run_id(item_id, slot)
    run_dir = project.runs_dir / run_id
    foreseen = False  # a free pooled worktree a dry run names: on an earlier item's branch until the launch
    if slot == "draft" or not project.config.worktree:
        worktree, workdir = None, project.root
    else:
        worktree = project.worktrees_dir / item_id
        # the pooled worktree it holds (kept after `[run] pool` went to 0); else execute takes one
        worktree = pool.held_path(project, ledger, item_id) or worktree
        if preview and pool.pooling(project) and not worktree.is_dir():
            worktree = pool.foreseen(project, ledger)  # the launch takes a pooled one (item_worktree)
            foreseen = True
        workdir = worktree
    argv, via = presets.agent_argv(agent, run_dir / "prompt.md")
    if slot == "review" and not preview:
        # worktree = false too: the checkout is switched to the branch, and runs what it holds
        reviewers.refuse_from_the_branch(project, item_id, branch, argv, heads)
    env_add = environment.agent_env(item_id=item_id, slot=slot, run_id=run_id, prompt_file=run_dir / "prompt.md",
                               repo=project.root, workdir=workdir, base=project.config.base,
                               branch=branch if slot != "draft" else "", round_number=data.Rounds,
                               posture=data.Posture, verify=data.VerifyCommand)
    env_add.update(presets.sandbox_env(agent))
    warnings = tuple(rendered.warnings) + _found_branch_warnings(project, record, branch, slot, data.Posture,
                                                                 None if foreseen else workdir)
    if slot == "implement" and record.item.needs_requirements:  # run by hand, as for ready (docs/states.md)
        said = project.needs_requirements_words(item_id, lack=record.item.requirements_lack)
        warnings += (f"{said}, so the agent is given no requirements (write them, or `drover draft {item_id}` first)",)
    return Launch(
        item_id=item_id, slot=slot, run_id=run_id, agent=agent, argv=tuple(argv), prompt_via=via,
        prompt=rendered.text, provenance=rendered.provenance, warnings=warnings,
        branch=branch if slot != "draft" else "", workdir=workdir, worktree=worktree, run_dir=run_dir,
        env_add=env_add, binary_missing=presets.binary_missing(agent), root_refusal=presets.root_refusal(agent),
        stream=presets.stream_of(agent), reviewed_head=heads.get(branch, "") if slot == "review" else "",
    )


def _found_branch_warnings(project: Project, record: template_data.ItemRecord, branch: str, slot: str,
                           posture: str, workdir: Path | None) -> tuple[str, ...]:
    """What an implementing run says of the branch it finds made already, from one read of the
    branch's and base's heads: commits on it that no run of the item made (`_commits_no_run_made`,
    a first run only), or no commit of its own and behind base (`_behind_base`, a first run, a
    resumed one, or one that continues a branch whose runs committed nothing: the drive's `nothing
    to review: implement again`). The run goes ahead either way. `workdir`: the checkout the branch is
    in, None when it is in none yet (a dry run's free pooled worktree is another branch's until the launch)."""
    first = not any(run.slot == "implement" for run in record.runs)
    if slot != "implement" or not (first or posture in ("resume", "continue")):
        return ()
    base = project.config.base
    # both heads in one git call: a first run's branch is usually not there yet, and that is all it asks
    heads = git.heads_of(project.root, branch, base)
    if branch not in heads or base not in heads:
        return ()  # no such branch yet (or no base: the launch says so)
    try:
        ahead = git.commits_beyond(project.root, heads[branch], heads[base])
        if ahead:  # commits of its own: it is not the branch left behind, whatever base gained
            return _commits_no_run_made(record, branch, base, ahead) if first else ()
        behind = git.commits_beyond(project.root, heads[base], heads[branch])
    except GitError:
        return ()
    return _behind_base(project, branch, base, workdir, behind)


def _commits_no_run_made(record: template_data.ItemRecord, branch: str, base: str, ahead: int) -> tuple[str, ...]:
    """A first implementing run finds its branch holding `ahead` commits no run of the item made: a
    person's start, or another item's agent planting them (docs/security.md). The run builds on
    them, and the review sees them like any other."""
    return (f"{branch} exists already with {counted(ahead, 'commit')} beyond "
            f"{base} that no run of {record.item.id} made: this run builds on them "
            f"(`git branch -D {branch}` first to start from {base})",)


def _behind_base(project: Project, branch: str, base: str, workdir: Path | None, behind: int) -> tuple[str, ...]:
    """The branch holds no commit of its own and lacks `behind` commits of base (a new user's first run
    failed, their agent script not yet committed; they committed it on base, and the run again found
    the branch without it): the run starts from the older base, and the warning says how to catch up."""
    if not behind:
        return ()
    where = project.relpath(workdir) if workdir is not None else ""
    mend = (f"git branch -f {branch} {base}" if workdir is None or not workdir.is_dir() else f"git merge --ff-only {base}"
            if where == "." else f"git -C {shlex.quote(where)} merge --ff-only {base}")
    return (f"{branch} holds no commit of its own and lacks {counted(behind, 'commit')} of {base}: this "
            f"run starts from the older {base} (`{mend}` first to start from {base} as it is now)",)


def _refuse_unfinished_work(record: template_data.ItemRecord) -> None:
    """A review judges finished work: after an interrupted or failed implementing run, resume first."""
    from drover.ledger.state import unfinished_work

    item_id = record.item.id
    trouble, why = unfinished_work(record.runs, record.audits)
    if trouble:
        raise Refused(f"{item_id} is {trouble} ({why}): resume it with `drover run {item_id}` before a review")


def describe(project: Project, launch: Launch) -> list[str]:
    """What --dry-run prints after the prompt: argv, environment additions, branch, directory."""
    lines = [f"argv: {shlex.join(launch.argv)}", f"prompt: via {launch.prompt_via}"]
    lines += [f"env: {key}={value}" for key, value in sorted(launch.env_add.items()) if key != "PATH"]
    if "PATH" in launch.env_add:
        lines.append(f"env: PATH={launch.env_add['PATH'].split(os.pathsep)[0]}{os.pathsep}...")
    lines.append(f"branch: {launch.branch or '(none: drafts run in the main checkout)'}")
    where = project.relpath(launch.workdir) if launch.workdir != project.root else "."
    pooled = launch.worktree is not None and launch.worktree.parent == project.state_dir / pool.POOL_DIR
    kind = (" (a pooled worktree: [run] pool)" if pooled else "" if launch.worktree is None
            else " (the item's worktree)" if launch.worktree.is_dir() else " (a worktree, created at launch)")
    lines.append(f"directory: {where}{kind}")
    limit = f"timeout {launch.agent.timeout}" if launch.agent.timeout_seconds else "no timeout"
    lines.append(f"agent: {launch.agent.identity} ({limit})")
    made = launch.provenance
    lines.append(f"template: {templates.described_source(made.requested, made.resolved, made.base_hashes)}")
    if launch.worktree is not None and project.config.setup:
        lines.append(f"setup: {project.config.setup} " + ("(before the agent, unless it ran there with today's setup, "
                                                            "keep and setup_inputs)" if pooled
                                                            else "(once, in a new worktree, before the agent)"))
    if launch.binary_missing:
        lines.append(f"note: {launch.binary_missing}; a real launch would stop here")
    if launch.root_refusal:
        lines.append(f"note: {launch.root_refusal}; a real launch would stop here")
    return lines


def _say(line: str) -> None:
    try:
        print(line, flush=True)
    except (OSError, ValueError):
        pass  # a closed screen must not stop the run


def _ready_workdir(project: Project, ledger: Ledger, launch: Launch, made: list[str] | None = None) -> Launch:
    """The branch and the directory the agent works in: a worktree, or this checkout switched; the
    launch as it now runs (in a pooled worktree, the one it holds). `made`: the commit the branch
    was created at, when a worktree's was created here (pool.item_worktree)."""
    if launch.slot == "draft":
        return launch
    if launch.worktree is not None:
        return pool.rebind(launch, pool.item_worktree(project, ledger, launch.item_id, launch.branch, made))
    git.checkout_branch(project.root, launch.branch, project.config.base, ignore=[project.config.items + "/"])
    return launch


def _claim(project: Project, ledger: Ledger, launch: Launch) -> None:
    """Record the run before its worktree and set-up, in one write under the writers' lock, unless
    another run of the item is live: of two drovers launching one item, the second is refused as
    `prepare` would refuse it. The caller holds the run's lock (attached), which keeps it live."""
    provenance = launch.provenance
    with ledger.write():
        refuse_live(project, launch.item_id, ledger.runs(launch.item_id))
        ledger.start_run(NewRun(
            id=launch.run_id, item=launch.item_id, slot=launch.slot,
            agent=launch.agent.identity, argv=launch.argv,
            log_path=project.relpath(launch.log_path), prompt_path=project.relpath(launch.prompt_path),
            branch=launch.branch, worktree=project.relpath(launch.worktree) if launch.worktree else "",
            requested_source=provenance.requested, resolved_source=provenance.resolved,
            base_hashes=dict(provenance.base_hashes), template_sha256=provenance.template_sha256,
            prompt_sha256=provenance.prompt_sha256,
        ))


def _record_start(project: Project, ledger: Ledger, launch: Launch, head_start: str) -> None:
    """The claimed run's start, as one write: where it runs, the head it starts from, its event."""
    with ledger.write():
        ledger.set_run_started(launch.run_id, project.relpath(launch.worktree) if launch.worktree else "",
                               head_start, head_start if launch.slot == "review" else "")
        ledger.log_event(launch.slot, launch.item_id, launch.agent.identity, run=launch.run_id)


def _start(project: Project, ledger: Ledger, launch: Launch, cancel: threading.Event | None,
           progress: Callable[[str], None]) -> "tuple[Launch, str] | RunResult":
    """Make the claimed run's branch and worktree ready, run `[run] setup`, record the start: the
    launch as it now runs and its head, or the run's result when a signal ended the set-up (on
    record as interrupted). A set-up that fails is on record as the run that could not start; any other
    failure before the start withdraws the claim, as if the run had never been tried."""
    try:
        made: list[str] = []
        launch = _ready_workdir(project, ledger, launch, made)
        # the commit the run starts from: what a review reviews, what an implementing run builds on;
        # a review's read with the refs its checks below judge, in one git call (reviewers.seen_refs);
        # a branch made just now for the run, the commit it was made at (no git call)
        seen = reviewers.seen_refs(project, launch.branch) if launch.slot == "review" else None
        if seen is not None:
            head_start = seen.heads.get(launch.branch, "")
        elif made:
            head_start = made[0]
        else:
            head_start = git.head_of(project.root, launch.branch) if launch.branch else ""
        launch.prompt_path.write_text(launch.prompt, encoding="utf-8")
        set_up = False  # whether `[run] setup` ran now: a pooled worktree's runs only when its inputs changed
        if launch.worktree is not None and project.config.setup:
            from drover.loop.worktree_setup import SetupFailed, SetupInterrupted

            try:
                set_up = pool.setup_worktree(project, ledger, launch.worktree, launch.log_path, item_id=launch.item_id,
                                    shown_log=project.relpath(launch.log_path),
                                    timeout=launch.agent.timeout_seconds or None, cancel=cancel, progress=progress)
            except SetupFailed as exc:  # on record as the run that could not start, its log the setup's
                from drover.loop.worktree_setup import mends_its_setup

                if (launch.slot == "implement" and not isinstance(exc, SetupInterrupted)
                        and mends_its_setup(project, launch.item_id, launch.branch, head_start, launch.log_path, progress)):
                    _record_start(project, ledger, launch, head_start)  # the agent starts: the branch broke it
                    return launch, head_start
                _record_start(project, ledger, launch, head_start)
                interrupted = isinstance(exc, SetupInterrupted)  # a run cut short, as an agent Ctrl-C ends
                reason = str(exc).removeprefix(f"{launch.item_id}: ")
                with ledger.write():
                    ledger.set_run_node(launch.run_id, "", reason)
                    ledger.finish_run(launch.run_id, None, "interrupted" if interrupted else "failed to start")
                if not interrupted:
                    raise
                # classified as an agent's end is (class `interrupted`), so that the report, the
                # drive's policies and `show` read the one run alike
                failure = record_failure(ledger, launch, "interrupted", None, reason)
                return RunResult(launch.run_id, None, "interrupted", 0.0, launch.log_path, failure=failure,
                                 in_setup=True)
        if launch.slot == "review":
            _refuse_unjudged_review(project, launch, head_start, seen, set_up)
    except BaseException:
        ledger.withdraw_run(launch.run_id)  # a no-op once the set-up's end is recorded
        raise
    _record_start(project, ledger, launch, head_start)
    return launch, head_start


def _refuse_unjudged_review(project: Project, launch: Launch, head_start: str, seen: git.Refs | None,
                            set_up: bool) -> None:
    """Refuse a review about to start on what its checks did not judge: a branch that moved from the
    head its prompt was built on (`prepare`), or a worktree holding what its reviewer would run or read.
    `seen`: the refs read with `head_start`; read again when a set-up ran since (`set_up`)."""
    # the branch check (prepare) judged the head the prompt was built on: a branch moved since
    # (a process the implementer left running) would be reviewed unjudged, its own reviewer with it
    # read again after a set-up that ran: it ran the branch's code, which can move the branch (and
    # make refs) too; one that did not run (a pooled worktree's inputs unchanged, a worktree set up
    # before) ran nothing since `seen` was read, so its answer stands (a git call a review fewer)
    if seen is None or set_up:
        seen = reviewers.seen_refs(project, launch.branch)
    now = seen.heads.get(launch.branch, "")
    moved = next((head for head in (head_start, now) if head != launch.reviewed_head), None)
    if moved is not None:
        raise Refused(f"{launch.item_id}: {launch.branch} moved from {launch.reviewed_head[:12] or 'nothing'} "
                      f"to {moved[:12] or 'nothing'} while its review was being prepared: no review "
                      "runs on a head its checks did not judge; review again")
    # after the set-up: it may write there too
    reviewers.refuse_from_the_worktree(project, launch, head_start, seen)


def execute(project: Project, ledger: Ledger, launch: Launch, *, echo: bool = True,
            cancel: threading.Event | None = None, progress: Callable[[str], None] | None = None,
            executor: "Executor | None" = None, budget: "DriveBudget | None" = None,
            admitted: Callable[[], None] | None = None) -> RunResult:
    """Create the branch and worktree, save the prompt, record the run, launch, record the end.

    The token budgets (budgets.py) may refuse the launch, and raise after a run that crossed one;
    `admitted` is called once they let it go ahead (a drive says then that the agent starts)."""
    if launch.binary_missing:
        raise UsageError(launch.binary_missing)
    if launch.root_refusal:
        raise Refused(launch.root_refusal)
    launch, ceiling = budgets.admit(project, ledger, launch, budget)
    if admitted is not None:
        admitted()
    progress = progress if progress is not None else _say
    # held from the claim until the end is recorded: the run is live meanwhile, its set-up included
    # (locks.run_live), and a live agent whose lock is free is an orphan
    with attached(launch.run_dir):
        _claim(project, ledger, launch)
        started = _start(project, ledger, launch, cancel, progress)
        if isinstance(started, RunResult):
            return started
        launch, head_start = started
        from drover.executors import open_executor

        runner: Executor = executor or open_executor(project, "local")
        try:
            handle = runner.submit(project, ledger, launch, echo=echo,
                                   on_start=lambda pid: ledger.set_run_pid(launch.run_id, pid, process_start(pid)),
                                   progress=progress)
            result = handle.collect(cancel)
        except DroverError:
            ledger.finish_run(launch.run_id, None, "failed to start")
            raise
        except OSError as exc:
            ledger.finish_run(launch.run_id, None, "failed to start")
            raise UsageError(f"{launch.agent.identity}: could not start {launch.argv[0]}: {exc.strerror}") from None
        if stopped(launch.run_dir):
            result = replace(result, outcome="interrupted", reason=STOPPED_REASON)
            say_stopped_in_log(project, launch.run_id)
        # an implementing run's head is where it left the branch (base's read with it, in one git call);
        # a review's stays the one it reviewed
        ends = (git.heads_of(project.root, launch.branch, project.config.base)
                if launch.slot == "implement" and launch.branch else None)
        head = ends.get(launch.branch, "") if ends is not None else None
        left = {launch.branch: head} if head is not None else {}
        # the run's end is one write, of one update of its row
        ledger.end_run(launch.run_id, result.exit_code, result.outcome, head, node=result.node, reason=result.reason,
                       usage=result.usage)
        failure = record_failure(ledger, launch, result.outcome, result.exit_code, result.reason)
        if launch.slot == "review":
            # the refs it reads once the review ended: where the review left the branch, too
            ended = reviewers.park_if_changed_under(project, ledger, launch, head_start).heads
            left = {launch.branch: ended[launch.branch]} if launch.branch in ended else {}
    budgets.settle(project, ledger, launch, ceiling, result, budget)
    return RunResult(launch.run_id, result.exit_code, result.outcome, result.elapsed, launch.log_path, result.notes,
                     failure, left, head_start=head_start,
                     base_head=ends.get(project.config.base, "") if ends is not None else "")


def record_failure(ledger: Ledger, launch: Launch, outcome: str, exit_code: int | None, reason: str) -> Failure | None:
    """Classify a finished run (drover/agents/failures.py) and keep its class in the ledger; a review
    that exited 0 without recording a verdict is `no_verdict`. A class recorded while the run ran
    (over_budget, by the budgets) stands."""
    known = ledger.run(launch.run_id)
    if known is not None and known.failure:
        return Failure(known.failure, known.reason or "", None)
    if outcome == agents.OVER_BUDGET:  # budgets.settle records the figures
        return Failure(budgets.FAILURE, "ended at its token ceiling")
    item = ledger.item_row(launch.item_id) if launch.slot == "review" and outcome == "exited" else {}
    if item.get("parked"):
        # parked while it ran (a launch refuses a parked item): its send-back past the cap, which
        # the command refuses and the agent may exit non-zero for, or its own `drover park`. The
        # park is how the review ended, not a failure to retry
        ledger.set_run_node(launch.run_id, (known.node if known else "") or "", PARKED_ITS_ITEM + (item.get("parked_reason") or ""))
        return None
    failure = classify_run(launch.run_dir, outcome=outcome, exit_code=exit_code, reason=reason)
    if failure is None and launch.slot == "review" and not review_verdict(ledger, launch.run_id):
        failure = Failure("no_verdict", no_verdict(ledger, launch.run_id))
    if failure is not None:
        ledger.set_failure(launch.run_id, failure.failure, failure.reason, failure.reset_text)
    return failure
