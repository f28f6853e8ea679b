"""The ledger's `runs` (an agent's run of a slot on an item) and `checks` (drover's own runs of an
item's verify command, verify.py)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from drover.errors import one_line
from drover.ledger.connection import now
from drover.ledger.itemtable import ItemTable

if TYPE_CHECKING:
    from drover.ledger.rows import Check, NewRun, Run


# How long a command waits for drover to record the agent pid of the run it acts for (live_agents).
PID_PATIENCE = 30.0


class RunTable(ItemTable):
    """Runs and checks, written as they start and end, read as rows.py's frozen types."""

    def _runs(self, where: str, params: Sequence[Any] = ()) -> list[Run]:
        # rows.py is imported where a row is read: its frozen types cost `new`, which reads none, 10 ms
        from drover.ledger.rows import RUN_COLUMNS, Run

        return [Run.from_row(row) for row in self.conn.execute(f"SELECT {RUN_COLUMNS} FROM runs {where}", params)]

    def start_run(self, run: NewRun) -> None:
        with self.write():
            self._ensure_item(run.item)
            self.db.table("runs").insert(run.as_row(now()))

    def set_run_started(self, run_id: str, worktree: str, head_start: str, head: str) -> None:
        """A claimed run starts (its worktree ready, its set-up done): where, from which head, and now."""
        self._set_run(run_id, {"worktree": worktree, "head_start": head_start, "head": head, "started": now()})

    def withdraw_run(self, run_id: str) -> None:
        """A claimed run that never started (its worktree could not be made, a review refused at the
        start): its row goes, as before the claim, so nothing reads it as interrupted."""
        with self.write():
            self.db.table("runs").delete_where("id = ? AND pid IS NULL AND finished IS NULL", [run_id])

    def _set_run(self, run_id: str, values: dict[str, Any]) -> None:
        with self.write():
            self.db.table("runs").update(run_id, values)

    def set_run_pid(self, run_id: str, pid: int, started: str = "") -> None:
        self._set_run(run_id, {"pid": pid, "pid_start": started})

    def finish_run(self, run_id: str, exit_status: int | None, outcome: str, head: str | None = None) -> None:
        """Record a run's end; `head` (the branch head it left) only when given."""
        self._set_run(run_id, _ended(exit_status, outcome, head))

    def end_run(self, run_id: str, exit_status: int | None, outcome: str, head: str | None = None, *,
                node: str, reason: str, usage: dict[str, Any] | None = None) -> None:
        """A launched run's end as one update of its row: what set_run_node, the run's usage (when
        `usage`: _usage) and finish_run write, at once. Each update of a run refreshes its item's activity
        row (the triggers) and goes through sqlite-utils' look-ups: three were 2-3 ms a run."""
        self._set_run(run_id, {**_placed(node, reason), **(_usage(usage) if usage is not None else {}),
                               **_ended(exit_status, outcome, head)})

    def set_run_node(self, run_id: str, node: str, reason: str = "") -> None:
        """Where a run ran, and (for an interrupted one) why it ended (_placed)."""
        self._set_run(run_id, _placed(node, reason))

    def set_failure(self, run_id: str, failure: str, reason: str, reset_at: str | None = None) -> None:
        """Why a run did not end well: its class (vocabulary.FAILURE_CLASSES), the words that decided
        it, and when a rate limit resets where the CLI said."""
        self._set_run(run_id, {"failure": failure, "reason": one_line(reason), "reset_at": reset_at})

    def item_branch(self, item_id: str) -> str:
        """The branch the item's newest implementing run worked on; "" before any."""
        row = self.conn.execute(
            "SELECT branch FROM runs WHERE item = ? AND slot = 'implement' AND branch != '' "
            "ORDER BY started DESC, rowid DESC LIMIT 1", (item_id,)
        ).fetchone()
        return str(row["branch"]) if row else ""

    def run(self, run_id: str) -> Run | None:
        found = self._runs("WHERE id = ?", (run_id,))
        return found[0] if found else None

    def runs(self, item_id: str, slot: str | None = None) -> list[Run]:
        """An item's runs, oldest first, optionally of one slot."""
        if slot:
            return self._runs("WHERE item = ? AND slot = ? ORDER BY started, rowid", (item_id, slot))
        return self._runs("WHERE item = ? ORDER BY started, rowid", (item_id,))

    def unfinished_runs(self) -> list[Run]:
        return self._runs("WHERE finished IS NULL")

    def live_agents(self, awaiting: str = "") -> list[tuple[str, int, str]]:
        """(run id, agent pid, the pid's start) of each unfinished run that recorded its agent's
        pid: plain tuples, for the commands that must not load the row types (acting.traced_run).

        `awaiting`: the run a command says it acts for. drover records a run's agent pid just
        after the agent starts, so a quick agent's first command can come first; while that run
        is unfinished, its drover alive and its pid not yet written, the rows are read again, for
        up to PID_PATIENCE. The claim decides only how long to read, never what is decided."""
        import time

        deadline = time.monotonic() + PID_PATIENCE
        pause = 0.002
        while True:
            live = self._live_agents()
            if not awaiting or any(run_id == awaiting for run_id, _, _ in live) or time.monotonic() > deadline:
                return live
            if not self._pid_pending(awaiting):
                # read again: the pid may have been written between the two reads, and the rows read
                # before it would refuse the run's own agent (seen under load in a fresh clone's CI)
                return self._live_agents()
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def _live_agents(self) -> list[tuple[str, int, str]]:
        return [(row["id"], row["pid"], row["pid_start"] or "") for row in
                self._rows("SELECT id, pid, pid_start FROM runs WHERE finished IS NULL AND pid IS NOT NULL")]

    def run_ended(self, run_id: str) -> bool:
        """The run is on record and has ended (a plain read, for acting.acting_run)."""
        return self.conn.execute("SELECT 1 FROM runs WHERE id = ? AND finished IS NOT NULL",
                                 (run_id,)).fetchone() is not None

    def _pid_pending(self, run_id: str) -> bool:
        """The run is unfinished with no agent pid yet, and a drover holds its lock: it is starting
        the agent now (a run with no lock file, a worker's copy of one, has no drover to wait for)."""
        from drover.agents.locks import drover_attached

        pending = self.conn.execute("SELECT 1 FROM runs WHERE id = ? AND finished IS NULL AND pid IS NULL",
                                    (run_id,)).fetchone()
        return pending is not None and drover_attached(self.runs_dir / run_id, unlocked=False)

    def add_check(self, check: Check) -> None:
        with self.write():
            self._ensure_item(check.item)
            self.db.table("checks").insert(check.as_row())

    def checks(self, item_id: str, head: str | None = None) -> list[Check]:
        """An item's checks, oldest first; `head`: only those of that commit."""
        from drover.ledger.rows import CHECK_COLUMNS, Check

        where, params = ("item = ?", [item_id]) if head is None else ("item = ? AND head = ?", [item_id, head])
        return [Check(*row) for row in
                self.conn.execute(f"SELECT {CHECK_COLUMNS} FROM checks WHERE {where} ORDER BY started, rowid", params)]


def _placed(node: str, reason: str) -> dict[str, Any]:
    """Where a run ran and why it ended as its row's columns: the reason one line (git's words on a
    worker's refused commits may be several), as `show` prints it after `why:`."""
    return {"node": node, "reason": one_line(reason)}


def _ended(exit_status: int | None, outcome: str, head: str | None) -> dict[str, Any]:
    """A run's end as its row's columns; `head` (the branch head it left) only when given."""
    ended: dict[str, Any] = {"finished": now(), "exit_status": exit_status, "outcome": outcome}
    if head is not None:
        ended["head"] = head
    return ended


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    """A run's model, tokens, cost and tool calls as its row's columns. A model's name is an agent's
    words (its stream, a worker's result): kept as one line, so its line breaks write no line of
    show's own (hostile review 25)."""
    model = one_line(str(usage.get("model") or ""))
    return {"model": model or None, "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
            "cost_usd": usage.get("cost_usd"), "tool_calls": usage.get("tool_calls")}
