"""What `drive` does about a run that did not end well: the `[retry]` policy of its failure class
(wait, fresh, fallback, stop, park), counted per item (docs/failures.md).

`decide` is the pure part: a failure, what was tried for the item so far and the config in, one
`Action` out. `Retries` is the drive's side: it runs a slot again while the policy says so,
sleeps a wait (ended at once by the drive's cancel), parks, and remembers each failure and what
was done about it for the progress lines, the summary and `drive --json`.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, Callable

from drover.agents.failures import Failure
from drover.agents.launch import short_elapsed
from drover.config.keys import parse_duration
from drover.ledger.writes import park_by_drover
from drover.vocabulary import counted

if TYPE_CHECKING:
    from drover.config import AgentConfig, Config
    from drover.ledger.db import Ledger
    from drover.loop.runs import RunResult

STOP_HEARD_EVERY = 0.5  # seconds: how soon a wait hears another item's stop (a Ctrl-C it hears at once)
VERDICT_STANDS = "its verdict stands: not run again"  # a failed review that recorded its verdict first
# The longest wait drover counts: drover.toml takes any number of hours, and a wait_max or
# wait_default past what a datetime or a thread's wait holds (about 292 years) was an OverflowError
# that ended the item's drive. A century is a wait without end for any drive.
LONGEST_WAIT = timedelta(days=36525)


@dataclass(frozen=True)
class Action:
    """What is done about one failed run: the policy applied (`park` when a policy is used up)."""

    policy: str  # wait | fresh | fallback | stop | park
    note: str  # for people: "waiting 8m", "fresh run 1 of 1", "parked: ..."
    until: datetime | None = None  # wait: when the slot runs again


@dataclass
class Tried:
    """What the policies did for one item in this drive."""

    fresh: int = 0  # fresh runs
    fresh_for: list[str] = field(default_factory=list)  # the class each fresh run was for
    waits: int = 0
    fallback: set[str] = field(default_factory=set)  # slots now run by [agent.fallback]
    failures: list[dict[str, Any]] = field(default_factory=list)  # {run, class, reason, reset_at, action}


def describe(failure: Failure) -> str:
    """`rate_limited (resets 02:10)`: the class, and the reset time where the CLI named one."""
    if failure.reset_at is None:
        return failure.failure
    return f"{failure.failure} (resets {failure.reset_at.astimezone().strftime('%H:%M')})"


def decide(failure: Failure, slot: str, tried: Tried, config: "Config", now: datetime | None = None) -> Action:
    """The action for `failure` of an item's `slot` run, given what was `tried` for the item so far.

    A wait lasts until the named reset (else `wait_default`), never past `wait_max` from now, so a
    reset forged far in the future costs at most `wait_max`; a reset in the past is no wait at
    all, and `waits_max` bounds how often an item waits. `fresh_max` bounds fresh runs; the fallback
    agent takes a slot once.
    """
    now = now or datetime.now(timezone.utc)
    retry = config.retry
    policy = retry.policy(failure.failure)
    what = failure.failure.replace("_", " ")
    if policy == "wait":
        if tried.waits >= retry.waits_max:
            return Action("park", f"parked: {what} after {counted(tried.waits, 'wait')} ([retry] waits_max)")
        bound = now + _wait_of(retry.wait_max)
        until = failure.reset_at or now + _wait_of(retry.wait_default)
        bounded = until > bound
        until = max(now, min(until, bound))
        note = f"waiting {short_elapsed((until - now).total_seconds())}"
        return Action("wait", note + (" (bounded by [retry] wait_max)" if bounded else ""), until)
    if policy == "fresh" and tried.fresh >= retry.fresh_max:
        # the count is the item's, whatever class each fresh run was for: a park after a crash's
        # fresh run says so, not that this class came again (the operator looks at the other agent)
        spent = list(dict.fromkeys(tried.fresh_for))
        if set(spent) - {failure.failure}:
            went = ", ".join(name.replace("_", " ") for name in spent)
            return Action("park", f"parked: {what}, and the item's {counted(tried.fresh, 'fresh run')} went to {went} "
                                  "([retry] fresh_max)")
        return Action("park", f"parked: {what} again after {counted(tried.fresh, 'fresh run')} ([retry] fresh_max)")
    if policy == "fresh":
        return Action("fresh", f"fresh run {tried.fresh + 1} of {retry.fresh_max}")
    if policy == "fallback":
        if config.fallback_agent is None:
            return Action("park", "parked: [retry] says fallback and there is no [agent.fallback]")
        if slot in tried.fallback:
            return Action("park", f"parked: the fallback agent {config.fallback_agent.identity} failed too")
        return Action("fallback", f"fallback to {config.fallback_agent.identity}")
    if policy == "stop":
        return Action("stop", "stopping the drive")
    return Action("park", "parked")


def _wait_of(duration: str) -> timedelta:
    """A `[retry]` duration as a wait, at most LONGEST_WAIT."""
    return timedelta(seconds=min(parse_duration(duration), LONGEST_WAIT.total_seconds()))


def header_lines(config: "Config") -> list[str]:
    """What drive's header says of the policies: each class's, and fallback's meaning without a table."""
    retry = config.retry
    from drover.config.tables import RETRY_CLASSES

    policies = ", ".join(f"{name} {retry.policy(name)}" for name in RETRY_CLASSES)
    lines = [f"  retry: {policies} (wait at most {retry.wait_max}, {retry.fresh_max} fresh per item)"]
    if config.fallback_agent is None and any(retry.policy(name) == "fallback" for name in RETRY_CLASSES):
        lines.append("  note: [retry] names fallback and there is no [agent.fallback]: fallback parks the item")
    elif config.fallback_agent is not None:
        lines.append(f"  fallback agent {config.fallback_agent.identity} (preset {config.fallback_agent.preset})")
    return lines


class Retries:
    """The drive's policies at work: per item, what was tried; one `stopped` for the whole drive."""

    def __init__(self, config: "Config", say: Callable[[str], None], cancel: threading.Event):
        self.config = config
        self.say = say
        self.cancel = cancel
        self.stopped = threading.Event()
        self.stop_note = ""
        self.tried: dict[str, Tried] = {}
        self.lock = threading.Lock()

    def of(self, item_id: str) -> Tried:
        with self.lock:
            return self.tried.setdefault(item_id, Tried())

    def agent(self, item_id: str, slot: str) -> "AgentConfig | None":
        """The agent a slot's next run takes: [agent.fallback] once the policy chose it, else None (the usual)."""
        return self.config.fallback_agent if slot in self.of(item_id).fallback else None

    def failures(self, item_id: str) -> tuple[dict[str, Any], ...]:
        return tuple(self.of(item_id).failures)

    def run(self, ledger: "Ledger", item_id: str, slot: str,
            launch_once: Callable[["AgentConfig | None"], "RunResult"],
            settled: Callable[["RunResult"], bool] = lambda result: False) -> "RunResult":
        """Launch the slot, and again while the failure's policy says so; the last run's result.
        A failed run that `settled` says did its work anyway (a review that recorded its verdict,
        then exited non-zero) keeps its class and is not run again: its verdict moves the item on."""
        tried = self.of(item_id)
        while True:
            result = launch_once(self.agent(item_id, slot))
            failure = result.failure
            if failure is None:
                return result
            if self._ending():
                # the drive is ending: nothing more is tried, and the class is on record
                tried.failures.append(_entry(result.run_id, failure, "not tried again: the drive is ending"))
                return result
            if settled(result):
                tried.failures.append(_entry(result.run_id, failure, VERDICT_STANDS))
                self.say(f"{item_id} {slot}: {describe(failure)}, {VERDICT_STANDS}")
                return result
            action = decide(failure, slot, tried, self.config)
            tried.failures.append(_entry(result.run_id, failure, action.note))
            self.say(f"{item_id} {slot}: {describe(failure)}, {action.note}")
            if action.policy == "wait":
                if self._waited_out(tried, action):
                    continue
                return result  # interrupted while waiting: the drive ends as Ctrl-C says
            if action.policy == "fresh":
                tried.fresh += 1
                tried.fresh_for.append(failure.failure)
                continue
            if action.policy == "fallback":
                tried.fallback.add(slot)
                continue
            if action.policy == "stop":
                self.stop_note = f"{item_id} {slot}: {failure.said}"
                self.stopped.set()
            else:
                self.park(ledger, item_id, f"{failure.said} ({action.note})")
            return result

    def wait_out_earlier(self, ledger: "Ledger", item_id: str) -> None:
        """Before a resumed item's first launch: when its newest run, an earlier drive's (one SIGKILLed
        in its wait), met a rate limit whose reset is still ahead, wait for it as the `wait` policy
        would have (bounded by wait_max, counted against waits_max), instead of launching into the
        same limit; said, and kept among the item's failures."""
        tried = self.of(item_id)
        found = ledger.runs(item_id)
        last = found[-1] if found else None
        if tried.failures or last is None or last.failure != "rate_limited" or not last.reset_at:
            return
        try:
            failure = Failure("rate_limited", last.reason or "", datetime.fromisoformat(last.reset_at))
        except ValueError:  # a reset the ledger does not hold as a time: nothing to wait for
            return
        now = datetime.now(timezone.utc)
        if failure.reset_at is None or failure.reset_at <= now:
            return
        action = decide(failure, last.slot, tried, self.config, now)
        if action.policy != "wait":
            return
        tried.failures.append(_entry(last.id, failure, action.note))
        self.say(f"{item_id} {last.slot}: {describe(failure)}, run {last.id} of an earlier drive, {action.note}")
        self._waited_out(tried, action)

    def _waited_out(self, tried: Tried, action: Action) -> bool:
        """The `wait` policy's wait (counted against waits_max) until `action`'s time, the newest of
        `tried`'s failures its record: False when the drive ended meanwhile, and the record then
        says the wait was cut short, not that the item went on waiting."""
        tried.waits += 1
        seconds = (action.until - datetime.now(timezone.utc)).total_seconds() if action.until else 0
        if seconds > 0 and self._wait(seconds):
            tried.failures[-1]["action"] = f"{action.note}, cut short: the drive is ending"
            return False
        return True

    def _wait(self, seconds: float) -> bool:
        """Sleep `seconds`, or less: True when the drive is ending meanwhile, by Ctrl-C or SIGTERM
        (`cancel`) or by another item's `stop` policy, which ended a wait of hours no sooner than
        its course (a refused key under --jobs 2 beside a rate limit's wait: the drive held for it)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self.cancel.wait(min(left, STOP_HEARD_EVERY))
            if self._ending():
                return True
        return self._ending()

    def _ending(self) -> bool:
        """The drive is ending: Ctrl-C or SIGTERM (`cancel`), or a `stop` policy (`stopped`)."""
        return self.cancel.is_set() or self.stopped.is_set()

    def park(self, ledger: "Ledger", item_id: str, why: str) -> None:
        """Park the item, unless something parked it already (a capped round, the budgets): that reason stands."""
        if not ledger.item_row(item_id).get("parked"):
            park_by_drover(ledger, item_id, why)

    def ending(self, item_id: str, result: str, note: str) -> tuple[str, str]:
        """How a failed item's drive is summed up: its result and a note naming the last class and action."""
        failures = self.of(item_id).failures
        if not failures:
            return result, note
        last = failures[-1]
        said = f"{last['class']}: {last['action']}"
        return ("parked" if last["action"].startswith("parked") else result), f"{note}; {said}" if note else said


def _entry(run_id: str, failure: Failure, action: str) -> dict[str, Any]:
    return {"run": run_id, "class": failure.failure, "reason": failure.reason, "reset_at": failure.reset_text,
            "action": action}
