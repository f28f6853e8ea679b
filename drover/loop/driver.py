"""One item's way through the loop: implement, drover's check, review, finish, and round again
while changes are outstanding and the cap allows (`Driver`); how it ended (`Driven`). drive.py
runs items through it, several at once."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from drover import git
from drover.loop import basecheck, budgets, pool, reviewers, runs, sendback, verify
from drover.loop.retry import Retries
from drover.loop.verdict import NO_VERDICT_SHORT, describe_verdict, no_verdict, review_verdict
from drover.errors import DroverError, Refused, escaped
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.connection import now
from drover.ledger.rows import Run
from drover.ledger.itemstate import ItemState, item_state, newest_log, usage_total
from drover.ledger.state import IMPLEMENT_NEXT, NOT_DRIVEN, ORPHANED, State
from drover.executors.base import Executor
from drover.vocabulary import PARKED_ITS_ITEM

APPROVED = ("approved", "finished")
NOT_FINISHED = "approved, not finished: "
OVER_BUDGET_RESULT = "over budget"  # an item the drive's token ceiling stopped (budgets.py)
# what drover's own check before a review or a finish decided (Driver._check)
PASSED, AGAIN, CONFLICTED = "passed", "again", "conflicted"


@dataclass(frozen=True)
class Driven:
    """How one item's drive ended."""

    item_id: str
    result: str  # finished | approved | parked | failed | no verdict | skipped | orphaned | over budget
    rounds: int
    runs: int
    note: str = ""
    usage: dict[str, Any] | None = None  # tokens, cost and tool calls of the item's runs in this drive (usage.py)
    log: str = ""  # the newest run's agent log, named when the item failed
    failures: tuple[dict[str, Any], ...] = ()  # each failed run: {run, class, reason, reset_at, action} (retry.py)
    done_before: bool = False  # given by id and done already: nothing to do, so no failure of the drive's

    @property
    def counted(self) -> bool:
        """Whether the drive's count and exit status weigh it: not an orphan (nothing the drive could
        do), not an item done before it started (nothing left to do)."""
        return self.result != ORPHANED and not self.done_before

    @property
    def approved(self) -> bool:
        return self.result in APPROVED

    @property
    def ok(self) -> bool:
        """What drive's exit status counts: approved, and finished when --finish asked for it, with
        every tracker write done (a finished item's note says which were not)."""
        return self.approved and not self.note.startswith(NOT_FINISHED) and not (self.result == "finished" and self.note)


class Driver:
    """Drives items, each in its own thread with its own ledger connection."""

    def __init__(self, project: Project, *, finish: bool, say: Callable[[str], None], echo: bool,
                 executor: "Executor | None" = None):
        self.project = project
        self.executor = executor
        self.finish = finish
        self.say = say
        self.echo = echo
        self.merge_lock = threading.Lock()
        # Ctrl-C reaches only the main thread; this tells every launch in flight to end its agent.
        self.cancel = threading.Event()
        self.budget = budgets.DriveBudget(project.config.budget.drive_tokens)  # [budget] drive_tokens
        self.retries = Retries(project.config, say, self.cancel)  # [retry]: what a failed run leads to
        self.base_checks = basecheck.BaseChecks(project)  # base's own check, asked when an item's fails
        self.started = now()  # the summary's figures are this drive's runs
        # who the drive's finishes are by: its operator (the drive was refused at its start unless it acts
        # as one: acting.require_operator), asked at the first finish, not at each (docs/decisions.md)
        self.finisher: str | None = None

    def drive_item(self, item_id: str) -> Driven:
        try:
            return self._drive_item(item_id)
        except Exception as exc:  # noqa: BLE001 - this item's end, not the drive's (broken())
            return self.broken(item_id, exc)

    def broken(self, item_id: str, exc: Exception) -> Driven:
        """An item whose drive raised what drover does not expect of it (a bug of drover's, the
        disk, the ledger's database): that item fails, in one line naming the file that keeps the
        traceback, and the drive goes on with the others and still gives its summary, report and
        [notify]. Raised out of the job, it ended the whole drive with a traceback while the items
        in flight ran on unasked (hostile review 24)."""
        kept = keep_traceback(self.project, item_id, exc)
        what = " ".join(str(exc).split())[:200]
        said = (f"drover could not go on with it: {type(exc).__name__}{f': {what}' if what else ''}"
                f"{f' (the traceback is in {kept})' if kept else ''}")
        self.event(item_id, f"stopped: {said}")
        try:
            with Ledger(self.project.ledger_path) as ledger:
                known = item_state(self.project, ledger, item_id)
            return Driven(item_id, "failed", len(known.rounds), len(known.runs), said, log=known.log)
        except Exception:  # noqa: BLE001 - the ledger may be what broke: the item's figures are unknown
            return Driven(item_id, "failed", 0, 0, said)

    def _drive_item(self, item_id: str) -> Driven:
        with Ledger(self.project.ledger_path) as ledger:
            try:
                return self._drive(ledger, item_id)
            except DroverError as exc:
                said = str(exc).removeprefix(f"{item_id}: ")  # the line and the row name the item already
                self.event(item_id, f"stopped: {said}")
                known = item_state(self.project, ledger, item_id)
                if isinstance(exc, budgets.DriveOverBudget):  # the drive's tokens are spent: reported, not parked
                    return Driven(item_id, OVER_BUDGET_RESULT, len(known.rounds), len(known.runs), said,
                                  usage=self._spent(known.runs))
                return Driven(item_id, "parked" if known.parked else "failed", len(known.rounds), len(known.runs),
                              said, usage=self._spent(known.runs), log="" if known.parked else known.log,
                              failures=self.retries.failures(item_id))

    def _launch(self, ledger: Ledger, item_id: str, slot: str, heads: dict[str, str] | None = None) -> runs.RunResult:
        """Run the slot, and again while the [retry] policy of a failed run's class says so. `heads`:
        runs.prepare's, for the first launch only (an agent ran before any other)."""
        given = [heads] if heads else []
        # a review that recorded its verdict and then failed (claude's exit 1 past its turns) is not
        # reviewed again: a second review of the same head met the first one's findings still
        # outstanding, and approved them unaddressed or spent another round of the cap
        return self.retries.run(ledger, item_id, slot,
                                lambda agent: self._launch_once(ledger, item_id, slot, agent, given.pop() if given else None),
                                settled=lambda result: slot == "review" and bool(review_verdict(ledger, result.run_id)))

    def _launch_once(self, ledger: Ledger, item_id: str, slot: str, agent: Any = None,
                     heads: dict[str, str] | None = None) -> runs.RunResult:
        launch = runs.prepare(self.project, ledger, item_id, slot, agent=agent, heads=heads)
        for warning in launch.warnings:
            self.say(f"{item_id}: warning: {warning}")
        # said once the budgets let it go ahead: a refused launch starts no agent
        result = runs.execute(self.project, ledger, launch, echo=self.echo, cancel=self.cancel, progress=self.say,
                              executor=self.executor, budget=self.budget,
                              admitted=lambda: self.event(item_id, f"{slot} by {launch.agent.identity} ..."))
        for note in result.notes:
            self.say(note)
        if slot == "review" and result.exited_zero:
            verdict = describe_verdict(self.project, ledger, result.run_id)
            # no verdict: said in the words `drover review` uses, once per review ([retry] may run another)
            self.event(item_id, verdict if verdict != NO_VERDICT_SHORT else no_verdict(ledger, result.run_id))
            return result
        ending = f"exit {result.exit_code}" if result.outcome == "exited" else result.ending
        said = f"{slot}: {ending}; no agent started" if result.in_setup else f"{slot} {ending} after {result.elapsed:.1f}s"
        if slot == "review" and result.failure is None and result.outcome == "exited":
            row = ledger.item_row(item_id)
            if row.get("parked"):  # its send-back past the cap (refused: the agent may exit 1 for it)
                said += f"; {PARKED_ITS_ITEM}{row.get('parked_reason') or ''}"
        elif slot == "review" and review_verdict(ledger, result.run_id):
            said += f"; it recorded: {describe_verdict(self.project, ledger, result.run_id)}"
        self.event(item_id, said)
        return result

    def event(self, item_id: str, what: str) -> None:
        """One line of an item's progress, `D-1: what`: every step of the loop is said here."""
        self.say(f"{item_id}: {what}")

    def _drive(self, ledger: Ledger, item_id: str) -> Driven:
        project = self.project
        known = item_state(project, ledger, item_id)
        state = known.state
        if state in NOT_DRIVEN:
            note = known.reason or str(state)
            skipped = ORPHANED if known.reason.startswith(ORPHANED) else "skipped"
            if state == State.NEEDS_REQUIREMENTS:
                note = project.needs_requirements_note(item_id)
                self.say(f"{item_id}: skipped: {note}")
            return Driven(item_id, skipped, len(known.rounds), len(known.runs), note,
                          done_before=state == State.DONE)
        conflicted = again = False
        implemented: dict[str, str] | None = None  # where this drive's last implementing run left the branch,
        moved = True  # and whether it moved it
        self.retries.wait_out_earlier(ledger, item_id)  # a limit an earlier drive met, its reset still ahead
        # One implement and one review per round, plus the first pass (and a merge of base).
        for _ in range(project.config.max_rounds + 2):
            # this round's implementing run, whose heads at its end nothing of the round has moved yet
            # (a review, a check or a merge of base since, and they are read again)
            ran: runs.RunResult | None = None
            if (halted := self._halted(ledger, item_id, state)) is not None:
                return halted
            if state in IMPLEMENT_NEXT or conflicted or again:
                merging, conflicted, again = conflicted, False, False
                result = ran = self._launch(ledger, item_id, "implement")
                implemented = result.heads
                moved = result.head_start not in implemented.values()
                if not result.exited_zero:
                    return self._ended(ledger, item_id, *self.retries.ending(
                        item_id, "failed", result.ended_as("implement")))
                if merging:  # its task was to conclude the merge of base: going round would only start it again
                    left = self._merge_left(ledger, item_id)
                    if left:
                        return self._ended(ledger, item_id, "failed", left)
                state = item_state(project, ledger, item_id, heads=result.heads).state
            # a stop or Ctrl-C meanwhile: no check, review or merge
            if (halted := self._halted(ledger, item_id, state)) is not None:
                return halted
            # in review with nothing committed: no check, no review; its implementer once more a drive
            if state == State.IN_REVIEW and (empty := reviewers.nothing_to_review(
                    project, ledger, item_id, ran.heads if ran else None, moved=moved,
                    base_head=ran.base_head if ran else "")):
                self.event(item_id, empty if implemented is not None else f"{empty}: implement again")
                if implemented is not None:
                    return self._ended(ledger, item_id, "failed", empty)
                again = True
                continue
            # the heads this round's implementing run left, read at its end with nothing run since: the
            # marker check's and the review prompt's (emptied when the check runs the branch's code)
            ends = {**ran.heads, project.config.base: ran.base_head} if ran is not None else None
            if state != State.APPROVED or self.finish:
                # drover's own check of the head a review or a finish would see: a failure goes
                # back to the implementer as a round of changes, and only a pass goes on
                checked = self._check(ledger, item_id, unmoved=implemented is not None and not moved, heads=ends)
                if isinstance(checked, Driven):
                    return checked
                if checked != PASSED:
                    state = item_state(project, ledger, item_id).state
                    conflicted = checked == CONFLICTED
                    continue
            if (halted := self._halted(ledger, item_id, state)) is not None:
                return halted
            if state != State.APPROVED:
                reviewed = self._review(ledger, item_id, ends)
                if isinstance(reviewed, Driven):
                    return reviewed
                state = reviewed
            if state == State.APPROVED:
                if not self.finish:
                    return self._ended(ledger, item_id, "approved", "")
                if (halted := self._halted(ledger, item_id, state)) is not None:  # approved, and nothing merges now
                    return halted
                ended = self._finish(ledger, item_id)
                if ended is not None:
                    return ended
                # base went into the branch: merged, the approval no longer covers its head; conflicted,
                # the merge waits in the worktree for the implementing agent (posture conflict)
                state = item_state(project, ledger, item_id).state
                conflicted = state == State.APPROVED
                continue
            if state not in IMPLEMENT_NEXT and state != State.IN_REVIEW:
                return self._ended(ledger, item_id, "failed", f"the item is {state}")
        return self._ended(ledger, item_id, "failed", "the loop did not settle")

    def _review(self, ledger: Ledger, item_id: str, heads: dict[str, str] | None = None) -> Driven | State:
        """Review the branch head: the item's state after the review's verdict, or how the drive
        ended when the review parked the item, failed, or recorded no verdict. `heads`: _launch's."""
        result = self._launch(ledger, item_id, "review", heads)
        known = item_state(self.project, ledger, item_id, heads=result.heads)  # where the review left its branch
        # a capped send-back parks the item and may fail the agent's command: parked wins
        if known.state == State.PARKED:
            return self._ended(ledger, item_id, "parked", known.parked_reason, known)
        verdict = review_verdict(ledger, result.run_id)
        if not result.exited_zero and not verdict:
            return self._ended(ledger, item_id, *self.retries.ending(item_id, "failed", result.ended_as("review")))
        if not verdict:
            return self._ended(ledger, item_id, *self.retries.ending(item_id, "no verdict",
                                                                     no_verdict(ledger, result.run_id)))
        return known.state

    def _spent(self, item_runs: Sequence[Run]) -> dict[str, Any]:
        """Tokens, cost and tool calls of the item's runs this drive started (not its whole life)."""
        return usage_total([run for run in item_runs if run.started >= self.started],
                           self.project.config.budget.rate_card)

    def _halted(self, ledger: Ledger, item_id: str, state: State | None = None) -> Driven | None:
        """How the item ends when the drive is ending (Ctrl-C, or a `[retry]` policy's stop): at its
        next step, with nothing more launched, checked or merged (an approved item stays approved,
        not finished, without --finish simply approved); None while the drive goes on."""
        if self.cancel.is_set():
            why = "interrupted"
        elif self.retries.stopped.is_set():
            why = f"the drive stopped ({self.retries.stop_note})"
        else:
            return None
        if state == State.APPROVED:
            return self._ended(ledger, item_id, "approved", NOT_FINISHED + why if self.finish else "")
        return self._ended(ledger, item_id, "failed", why)

    def _check(self, ledger: Ledger, item_id: str, unmoved: bool = False,
               heads: dict[str, str] | None = None) -> Driven | str:
        """PASSED when a passing check covers the branch head (run now unless one was recorded) or
        the item has no verify command; AGAIN when the loop goes round again (the failure went back as
        a round of changes, or base, which the check could not merge, merged cleanly in the worktree);
        CONFLICTED when base would not merge into the branch, and that merge now waits in the
        item's worktree for the implementing agent (no round: nothing was wrong with the work
        itself); how the drive ended when the check was interrupted, the round parked the item,
        or a conflict has no worktree to go to. `unmoved`: verify.check_head's. `heads`: the branch's
        and base's heads, when the caller has just read them (nothing of an agent's or the branch's
        run since): the marker check asks by their ids. Emptied when the check runs the verify
        command, the branch's code: the caller reads them again after it."""
        # markers a merge of base was concluded with (by this drive's run or an earlier one's), still there
        marked = self._markers_left(ledger, item_id, heads or {})
        if marked != PASSED:
            return marked
        gate = verify.check_head(self.project, ledger, item_id, echo=self.echo, cancel=self.cancel,
                                 progress=self.say, unmoved=unmoved)
        if gate.ran and heads:
            heads.clear()
        check = gate.check
        if check is None or not gate.ran:
            return PASSED if gate.passed else AGAIN
        self.event(item_id, verify.describe(check) + (": the same commit failed it before, not run again"
                                                      if gate.again else ""))
        if gate.passed:
            return PASSED
        left = verify.setup_left(ledger, check)
        if left:  # said in its log alone, the round it sends back read as the work's fault (a new user, on wcwidth)
            self.event(item_id, f"the check ran without what an earlier [run] setup made there: {left}")
        # a command that cannot start, or a set-up or command that fails on base itself: no agent can fix that
        unrunnable = self.base_checks.no_round(ledger, item_id, check, echo=self.echo, cancel=self.cancel,
                                               progress=self.say)
        if check.outcome == "interrupted" or unrunnable:
            return self._ended(ledger, item_id, "failed", unrunnable or "interrupted", log=check.log_path)
        if check.outcome == "conflict":
            if not self.project.config.worktree:
                return self._ended(ledger, item_id, "failed", f"{check.tail}: with [run] worktree = false, "
                                   "merge it into the branch by hand, then drive again")
            return CONFLICTED if self._merge_base(ledger, item_id) else AGAIN
        return self._send_back(ledger, item_id, lambda: sendback.send_back(self.project, ledger, item_id, check),
                               log=check.log_path) or AGAIN

    def _send_back(self, ledger: Ledger, item_id: str, send: Callable[[], Any], log: str = "") -> Driven | None:
        """A round of changes of drover's (a failed check, markers left in a merge) sent back to the
        implementer: None, or how the drive ended when the round was past the cap and parked the item."""
        try:
            sent = send()
        except Refused as exc:
            known = item_state(self.project, ledger, item_id)
            if known.parked:
                self.event(item_id, str(exc).removeprefix(f"{item_id} "))
                return self._ended(ledger, item_id, "parked", known.parked_reason, known, log=log)
            raise
        self.say(f"{sent.lines[0]}; back to the implementer")
        return None

    def _finish(self, ledger: Ledger, item_id: str) -> Driven | None:
        """Finish the item; None when it went back to the loop instead: a conflict with base, or
        a check of it with base as it is now (another item's merge moved base since its check)
        that did not pass."""
        from drover.loop.finish import finish

        try:
            with self.merge_lock:  # base stays where the check saw it until the merge
                # both heads read once under the lock, for the marker check and the finish's refusals:
                # nothing runs between the two unless the check runs its command (it empties them)
                branch = ledger.item_branch(item_id)
                heads = git.heads_of(self.project.root, branch, self.project.config.base) if branch else {}
                checked = self._check(ledger, item_id, heads=heads)
                if checked != PASSED:
                    return checked if isinstance(checked, Driven) else None
                if self.finisher is None:
                    from drover.ledger.acting import actor

                    self.finisher = actor(self.project, ledger)
                finished = finish(self.project, ledger, item_id, by=self.finisher, heads=heads or None)
        except git.MergeConflict as exc:
            if not self.project.config.worktree:
                return self._ended(ledger, item_id, "approved", NOT_FINISHED + _one_line(exc, item_id))
            self._merge_base(ledger, item_id)
            return None
        except Refused as exc:
            reason = _one_line(exc, item_id)
            self.event(item_id, f"{NOT_FINISHED}{reason}")
            return self._ended(ledger, item_id, "approved", NOT_FINISHED + reason)
        for line in finished.lines:
            self.say(line)
        for problem in finished.problems:
            self.event(item_id, problem)
        return self._ended(ledger, item_id, "finished", "; ".join(finished.problems))

    def _merge_base(self, ledger: Ledger, item_id: str) -> bool:
        """Merge base into the item's branch in its worktree: True when conflicts wait there for the
        implementing agent (its posture is then `conflict`), False when it merged cleanly."""
        base, branch = self.project.config.base, ledger.item_branch(item_id)
        conflicts = git.merge_base_into(pool.item_worktree(self.project, ledger, item_id, branch), base)
        if conflicts:
            self.event(item_id, f"merging {base} into {branch} conflicts in {', '.join(map(escaped, conflicts))}: "
                       "back to the implementing agent")
        else:
            self.event(item_id, f"merged {base} into {branch}: checked and reviewed again")
        return bool(conflicts)

    def _markers_left(self, ledger: Ledger, item_id: str, heads: dict[str, str]) -> Driven | str:
        """Before each check: AGAIN when the files that conflicted in a merge of base the branch holds
        (git.conflicts_merged) still hold conflict markers in its head (sent back as a round), how the
        drive ended if that parked the item, else PASSED. `heads`: _check's."""
        root, base, branch = self.project.root, self.project.config.base, ledger.item_branch(item_id)
        # every opening marker the branch adds, in any file (one diff: a conflict git's merge wrote
        # opens with `<<<<<<< HEAD`, whatever became of the merge since: renamed, squashed, an octopus);
        # by the heads' ids when the caller read them, an answer then kept for the process (the finish
        # asks it again of the same two commits, unless base or the branch moved)
        opened = git.head_markers(root, base, heads.get(branch) or git.local_ref(branch),
                                  base_head=heads.get(base, "")) if branch else []
        if not opened:
            return PASSED
        # then each marker line of the files the branch's merges conflicted in, to name them all
        head = git.head_of(root, branch)
        lines = git.conflict_markers(root, head, git.conflicts_merged(root, base, head))
        lines += [line for line in opened if line not in lines]
        # a path is the branch's to name: its line break wrote a line of drover's own in the progress,
        # and at the margin of the Changes section, a heading that cut the findings (hostile review 44)
        lines = [escaped(line) for line in lines]
        self.event(item_id, f"the merge of base was committed with conflict markers in {', '.join(lines)}")
        return self._send_back(ledger, item_id, lambda: sendback.send_back_markers(
            self.project, ledger, item_id, branch, lines)) or AGAIN

    def _merge_left(self, ledger: Ledger, item_id: str) -> str:
        """What to say when the implementing agent left the merge of base unconcluded; "" when it did not."""
        branch = ledger.item_branch(item_id)
        worktree = pool.item_worktree(self.project, ledger, item_id, branch)
        if not git.merge_in_progress(worktree):
            return ""
        return (f"the implementing agent left the merge of {self.project.config.base} into {branch} unconcluded in "
                f"{self.project.relpath(worktree)}: conclude it there (`git commit`) or abort it "
                "(`git merge --abort`), then drive again")

    def _ended(self, ledger: Ledger, item_id: str, result: str, note: str, known: ItemState | None = None, *,
               log: str = "") -> Driven:
        """How the item's drive ended; `known` is its state when the caller has just asked for it;
        `log` the log that says why, when it is not the newest run's (a failing check's)."""
        if known is not None:
            item_runs, rounds = known.runs, known.rounds
        else:  # the summary's row needs the item's runs and rounds, not its state (nor its branch's head)
            item_runs, rounds = tuple(ledger.runs(item_id)), tuple(ledger.rounds(item_id))
        return Driven(item_id, result, len(rounds), len(item_runs), note,
                      usage=self._spent(item_runs), log="" if result in APPROVED else log or newest_log(item_runs),
                      failures=self.retries.failures(item_id))


def _one_line(refused: Refused, item_id: str) -> str:
    """A refusal as one line of progress and of the summary: its message, then what it lists
    (the paths a dirty checkout holds), which a command prints on lines of their own."""
    said = str(refused).removeprefix(f"{item_id}: ")
    return f"{said} {', '.join(refused.details)}" if refused.details else said


def keep_traceback(project: Project, item_id: str, exc: BaseException) -> str:
    """The traceback of what broke an item's drive, as .drover/errors/<time>-<item>.txt (made
    through a descriptor: never written through a link an agent put there); the path from the
    project's root, or "" when it could not be kept."""
    import os
    import traceback

    from drover.git.files import folder_fd, replace_at

    name = f"{now().replace(':', '').replace('-', '')}-{item_id}.txt"
    try:
        folder = folder_fd(project.state_dir, "errors", make=True)
        try:
            replace_at(folder, name, "".join(traceback.format_exception(exc)).encode("utf-8", "replace"))
        finally:
            os.close(folder)
    except OSError:
        return ""
    return (project.state_dir / "errors" / name).relative_to(project.root).as_posix()
