"""Whether a failed check says anything of the item: the same check of base's own commit, asked once a
drive (docs/verify.md, "A command that fails on base itself")."""
from __future__ import annotations

import threading
from typing import Any, Callable

from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import Check
from drover.loop.verify import cannot_run, describe, names_changed, run_check, setup_left


class BaseChecks:
    """A drive's answer to "does the verify command fail on base itself?": if it does, no round of
    changes can mend an item's check, and sending it back would only spend rounds until the item
    parked. Asked from an item's second failed check in the drive (the first goes back as a round,
    as most failures are the work's own, and an item may be the one that mends base), once a drive
    for each commit of base and verify command (two jobs that ask at once wait for one answer); not
    of a command that is the item's own (_the_items_own). Base fails "too" only with the exit
    status the item's check had."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self._lock = threading.Lock()
        self._found: dict[tuple[str, str], Check | None] = {}
        self._failed: dict[str, int] = {}  # each item's failed checks this drive
        self._asking: dict[tuple[str, str], threading.Lock] = {}

    def no_round(self, ledger: Ledger, item_id: str, check: Check, **launch: Any) -> str:
        """Why no round of changes can mend `check`, a failed one of the item's ("" when one can): its
        command could not start, its set-up fails on base too (cannot_run), or base fails it too
        (failing). `launch`: run_check's echo, cancel and progress."""
        return cannot_run(self.project, check, lambda: self.of_base(ledger, item_id, check, **launch)) or \
            self.failing(ledger, item_id, check, **launch)

    def failing(self, ledger: Ledger, item_id: str, check: Check, **launch: Any) -> str:
        """Why `check`, a failed one of the item's, says nothing of the item: base, as the check merged
        it, fails the same command on its own (of_base); "interrupted" when that check was; "" when
        base passes, when base was not asked (the item's first failure in the drive), or when `check`
        ran no command to its end."""
        if check.outcome != "exited" or check.passed:
            return ""
        with self._lock:
            self._failed[item_id] = failed = self._failed.get(item_id, 0) + 1
        if failed < 2 or _the_items_own(self.project, check):
            return ""
        found, base = self.of_base(ledger, item_id, check, **launch), self.project.config.base
        if found is None or found.passed:
            return ""
        if found.outcome == "interrupted":
            return "interrupted"
        if found.outcome != "exited" or found.exit_status != check.exit_status:
            # another failure than the item's (pytest: 5, no tests collected, against 1), or no exit
            # status at all (cut short at the timeout, a set-up that failed): hostile review 23
            return ""
        said = (f"the verify command fails on {base} itself too ({found.base[:12]}: {describe(found)}; "
                f"`drover log {found.item} --run {found.id}`)")
        left = setup_left(ledger, found)
        if left:  # base was checked without what an earlier set-up made there: the set-up is the likelier cause
            return (f"{said}, but in a worktree set up before, without what set-up made there, so the likelier "
                    f"cause is [run] setup, not {base}: {left}; no round of changes can mend that, so none was "
                    "sent; add what set-up makes to [run] keep, then drive again")
        return f"{said}: no round of changes can mend that, so none was sent; mend {base}, then drive again"

    def of_base(self, ledger: Ledger, item_id: str, check: Check, *, echo: bool = False,
                cancel: threading.Event | None = None, progress: Callable[[str], None] | None = None) -> Check | None:
        """The check of base's own commit as `check` merged it, with `check`'s command: run now (and
        recorded as the item's check of that head and base) unless this drive ran it."""
        key = (check.base, check.command)
        with self._lock:
            asking = self._asking.setdefault(key, threading.Lock())
        with asking:  # held through the check: a job asking of another commit or command does not wait
            if key not in self._found:
                if progress is not None:
                    progress(f"{item_id}: checking {self.project.config.base} itself ({check.base[:12]}) "
                             "with the same command")
                self._found[key] = run_check(self.project, ledger, item_id, echo=echo, cancel=cancel,
                                             progress=progress, of_base=check.base)
                found = self._found[key]
                if progress is not None and found is not None:  # what base said, as an item's check says it
                    progress(f"{item_id}: {self.project.config.base} itself ({check.base[:12]}): {describe(found)}")
            return self._found[key]


def _the_items_own(project: Project, check: Check) -> bool:
    """The command is the item's own, so base failing it says nothing of base: it reads the item's
    environment (`$DROVER_ITEM`), or names a file the branch changed (`pytest tests/test_new.py`,
    which base does not have)."""
    return "DROVER_" in check.command or names_changed(project, check, check.command)
