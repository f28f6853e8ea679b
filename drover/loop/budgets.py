"""Token budgets ([budget], docs/budgets.md): the ceilings a launch must fit, and what a run that
crossed one leaves behind.

Before each launch (run, review, draft; alone or in `drive`) `admit` refuses an item whose
recorded tokens are at or past `item_tokens` (and parks it with the figures), and a launch in a
drive that has spent `drive_tokens` (the drive stops; the item is not parked). It hands the run
its own ceiling, the least of `run_tokens` and what is left of the item's and the drive's, which
the launch enforces while the CLI streams usage (agents.launch). After the run `settle` counts
what it spent against the drive and, when a ceiling was crossed (mid-run, or only at the end for
a CLI that reports usage at exit), records the failure class `over_budget` with the figures,
parks the item (unless only the drive's ceiling was crossed) and raises.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from drover.agents.launch import OVER_BUDGET as OVER_BUDGET_OUTCOME
from drover.errors import Refused
from drover.ledger.writes import park_by_drover
from drover.vocabulary import OVER_BUDGET

if TYPE_CHECKING:
    from drover.executors.base import Collected, Launch
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project

FAILURE = "over_budget"  # the run's failure class (vocabulary.FAILURE_CLASSES)


class OverBudget(Refused):
    """An item at or past its token budget: parked with the figures (exit 1)."""


class DriveOverBudget(Refused):
    """The drive has spent its tokens: nothing more is launched; the item is not parked (exit 1)."""


@dataclass(frozen=True)
class Ceiling:
    """A run's token ceiling and which budget set it ("run", "item" or "drive"); 0 and "": none."""

    tokens: int = 0
    bound: str = ""


class DriveBudget:
    """What one `drover drive` has spent, shared by its jobs."""

    def __init__(self, limit: int) -> None:
        self.limit = limit  # 0: no ceiling
        self.used = 0
        self._lock = threading.Lock()

    def spend(self, tokens: int) -> None:
        with self._lock:
            self.used += tokens

    @property
    def spent(self) -> bool:
        return bool(self.limit) and self.used >= self.limit

    def left(self) -> int:
        return max(0, self.limit - self.used)


def over(used: int, limit: int, what: str) -> str:
    """The park reason: `over budget: 1,234,567 of 1,000,000 tokens for D-3`."""
    return f"{OVER_BUDGET}{used:,} of {limit:,} tokens for {what}"


def item_tokens(ledger: Ledger, item_id: str) -> int:
    """Tokens in + out over every recorded run of the item."""
    return sum((run.input_tokens or 0) + (run.output_tokens or 0) for run in ledger.runs(item_id))


def run_tokens(ledger: Ledger, run_id: str) -> int:
    run = ledger.run(run_id)
    return (run.input_tokens or 0) + (run.output_tokens or 0) if run is not None else 0


def admit(project: Project, ledger: Ledger, launch: Launch,
          drive: DriveBudget | None = None) -> tuple[Launch, Ceiling]:
    """The launch with its token ceiling, or a refusal: an item at its budget is parked first."""
    budget = project.config.budget
    item_id = launch.item_id
    used = item_tokens(ledger, item_id) if budget.item_tokens else 0
    if budget.item_tokens and used >= budget.item_tokens:
        reason = over(used, budget.item_tokens, item_id)
        park_by_drover(ledger, item_id, reason)
        raise OverBudget(f"{item_id}: {reason}: parked; no {launch.slot} agent was launched")
    if drive is not None and drive.spent:
        raise DriveOverBudget(f"{item_id}: {over(drive.used, drive.limit, 'this drive')}: "
                              f"no {launch.slot} agent was launched")
    # item first on a tie: then the item, not only the run, is what went over
    candidates = [(budget.item_tokens - used, 0, "item")] if budget.item_tokens else []
    if budget.run_tokens:
        candidates.append((budget.run_tokens, 1, "run"))
    if drive is not None and drive.limit:
        candidates.append((drive.left(), 2, "drive"))
    if not candidates:
        return launch, Ceiling()
    tokens, _, bound = min(candidates)
    return replace(launch, token_ceiling=tokens), Ceiling(tokens, bound)


def settle(project: Project, ledger: Ledger, launch: Launch, ceiling: Ceiling, result: Collected,
           drive: DriveBudget | None = None) -> None:
    """Count the run against the drive; past a ceiling, record why, park the item (not for the
    drive's ceiling alone) and raise, naming the run and its log."""
    spent = run_tokens(ledger, launch.run_id)
    if drive is not None:
        drive.spend(spent)
    killed = result.outcome == OVER_BUDGET_OUTCOME
    if not ceiling.tokens and not killed:
        return
    budget = project.config.budget
    item_id = launch.item_id
    total = item_tokens(ledger, item_id)
    if budget.item_tokens and total > budget.item_tokens:
        reason, park = over(total, budget.item_tokens, item_id), True
    elif budget.run_tokens and spent > budget.run_tokens:
        reason, park = over(spent, budget.run_tokens, f"one {launch.slot} run of {item_id}"), True
    elif killed and drive is not None and drive.limit and drive.used > drive.limit:
        # a run that ended on its own while the drive went past its ceiling (under --jobs N, perhaps
        # by the other jobs' spending) did nothing wrong: its work stands, and the next launch is the
        # one refused (admit)
        reason, park = over(drive.used, drive.limit, "this drive"), False
    elif killed:  # ended at a ceiling the ledger's figures do not show (a usage line it did not keep)
        reason, park = f"{OVER_BUDGET}{spent:,} tokens, past the {ceiling.bound} ceiling of {ceiling.tokens:,}", \
            ceiling.bound != "drive"
    else:
        return
    ledger.set_failure(launch.run_id, FAILURE, reason)
    how = "was ended" if killed else "went past its ceiling before drover could end it (its usage came as it ended)"
    log = project.relpath(launch.log_path)
    if park:
        park_by_drover(ledger, item_id, reason)
        raise OverBudget(f"{item_id}: {launch.slot} run {launch.run_id} {how}: {reason}; parked (log: {log})")
    raise DriveOverBudget(f"{item_id}: {launch.slot} run {launch.run_id} {how}: {reason}; "
                          f"the drive launches nothing more (log: {log})")
