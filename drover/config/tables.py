"""The tables of drover.toml that Config holds whole: [agent] (and [agent.<slot>]), [prompts],
[tracker], [executor.ray], [notify], [budget], [retry]. Each is a NamedTuple (cheap to define and
build: docs/decisions.md) and each key one `key(...)` line (drover/config/keys.py)."""
from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from drover.config.keys import (Live, at_least_one, as_seconds, check_duration, check_label, check_repo, key, keyed,
                                parse_duration, table_of_strings)
from drover.vocabulary import FAILURE_CLASSES, GUIDANCE_LEVELS, ISSUE_AUTHORS, RETRY_POLICIES


def _presets() -> Collection[str]:
    from drover.agents.presets import PRESETS  # here: a command that never checks [agent] skips the registry

    return PRESETS.keys()


def _backends() -> Collection[str]:
    from drover.trackers import BACKENDS  # here: importing the backends is json and more

    return BACKENDS.keys()


# label -> kind for `drover new --issue`; a project's [tracker] kinds adds to these
KIND_LABELS = {"bug": "bug", "enhancement": "feature", "feature": "feature", "documentation": "docs",
               "chore": "chore", "refactor": "refactor", "performance": "performance", "security": "security"}


@keyed
class AgentConfig(NamedTuple):
    """One agent: its preset or command, identity, timeout and guidance ([agent] or a slot's table)."""

    preset: str = key("agent", "claude", "the agent CLI to launch", choices=Live(_presets))
    command: str = key("agent", "", "argv as shell-like words (never run through a shell); overrides the preset")
    name: str = key("agent", "", "identity recorded as author / auditor; default: the preset name")
    timeout: str = key("agent", "2h", "the agent's whole process group is ended after this long "
                                            "(2h, 90m, 1h30m, 45s or seconds); \"0\" never", check=check_duration, convert=as_seconds)
    stall: str = key("agent", "15m", "a run that prints nothing for this long is ended like a timeout (class "
                                     "stalled); \"0\" never", check=check_duration, convert=as_seconds)
    guidance: str = key("agent", "detailed", "how much coaching the built-in prompts carry",
                        choices=GUIDANCE_LEVELS)
    sandboxed: bool = key("agent", False, "true states this machine is a sandbox: the preset then runs unattended "
                                          "as root (claude: IS_SANDBOX=1); see `drover help agents`")

    @property
    def identity(self) -> str:
        """Who this agent is in the ledger: `name`, else the preset."""
        return self.name or self.preset

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)

    @property
    def stall_seconds(self) -> int:
        return parse_duration(self.stall)


@keyed
class PromptFiles(NamedTuple):
    """[prompts]: Config keeps these as a dict by slot; this type only declares the keys."""

    implement: str = key("prompts", "", "override file for the implement slot; \"\" renders the built-in template")
    review: str = key("prompts", "", "override file for the review slot")
    draft: str = key("prompts", "", "override file for the draft slot")


@keyed
class TrackerConfig(NamedTuple):
    """The [tracker] table."""

    backend: str = key("tracker", "none", "where issues live", choices=Live(_backends))
    repo: str = key("tracker", "", "owner/name for github; \"\" lets gh read issues from this checkout's remote, "
                                   "and finish then closes and comments on none", check=check_repo)
    follow_up_label: str = key("tracker", "follow-up", "the label that marks follow-up issues (github)",
                               check=check_label)
    register: str = key("tracker", "follow-ups.md", "the follow-up register file (backend file)")
    authors: str = key("tracker", "members", "whose issues an `Owner:` line puts in a prompt with their text (github): "
                       "members (the repository's owner, members, collaborators) or anyone", choices=ISSUE_AUTHORS)
    # the tables are read-only: every instance without the key shares one copy of the default
    kinds: dict[str, str] = key("tracker", KIND_LABELS, "issue label -> item kind for `drover new --issue`; "
                                "yours are added to these", check=table_of_strings)


@keyed
class RayConfig(NamedTuple):
    """[executor.ray]: where `[run] executor = "ray"` sends runs (docs/executors.md)."""

    address: str = key("executor.ray", "auto", "the Ray cluster: auto (the one this machine joined) or "
                                               "ray://host:10001")
    num_cpus: int = key("executor.ray", 1, "CPUs Ray reserves for each agent run (at least 1)",
                        check=at_least_one)
    runtime_env: dict[str, Any] = key("executor.ray", {}, "Ray's runtime_env for each run, e.g. "
                                                          "{ pip = [\"drover-cli[ray]\"] }")


def check_words(value: str) -> str:
    """A command as shell-like words: shlex must be able to split it."""
    import shlex

    try:
        shlex.split(value)
    except ValueError as exc:
        return f"shell-like words ({exc})"
    return ""


def check_tokens(value: int) -> str:
    return "" if value >= 0 else "a number of tokens (0 for no ceiling)"


def check_rates(value: dict[str, Any]) -> str:
    """Each model's rate is { input = USD per million tokens, output = USD per million tokens }."""
    for model, rate in value.items():
        numbers = isinstance(rate, dict) and set(rate) == {"input", "output"} and all(
            isinstance(rate[side], (int, float)) and not isinstance(rate[side], bool) and 0 <= rate[side] < 1e9
            for side in ("input", "output"))
        if not numbers:
            return (f"{{ input = <USD per million>, output = <USD per million> }} for {model!r}, "
                    f"not {rate!r}")
    return ""


@keyed
class NotifyConfig(NamedTuple):
    """[notify]: a command run when a drive ends, with the report's JSON on stdin (docs/report.md)."""

    command: str = key("notify", "", "argv as shell-like words (never run through a shell), run when a drive "
                                     "ends with the report's JSON on stdin; \"\" runs nothing", check=check_words)
    timeout: str = key("notify", "30s", "the command's whole process group is ended after this long; its failure "
                                        "is one warning line, never a failed drive",
                       check=check_duration, convert=as_seconds)

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)


@keyed
class BudgetConfig(NamedTuple):
    """[budget]: token ceilings per run, item and drive, and the operator's rate card (docs/budgets.md)."""

    run_tokens: int = key("budget", 0, "tokens (in + out) one agent run may use; past it the run is ended "
                                       "and the item parked (0: no ceiling)", check=check_tokens)
    item_tokens: int = key("budget", 0, "tokens all of an item's runs may use; an item at it is parked "
                                        "before its next launch (0: no ceiling)", check=check_tokens)
    drive_tokens: int = key("budget", 0, "tokens one `drover drive` may use; at it the drive launches "
                                         "nothing more (0: no ceiling)", check=check_tokens)
    # the tables are read-only: every instance without the key shares one copy of the default
    rates: dict[str, Any] = key("budget", {}, "model -> { input = USD per million tokens, output = USD "
                                "per million tokens }: what runs cost; without a model's rate the CLI's "
                                "own figure is shown, labelled as the CLI's", check=check_rates)

    @property
    def rate_card(self) -> dict[str, tuple[float, float]]:
        """The rates as usage.price reads them: model -> (input, output) USD per million tokens."""
        return {model: (float(rate["input"]), float(rate["output"])) for model, rate in self.rates.items()}


@keyed
class RetryConfig(NamedTuple):
    """[retry]: what drive does about a run that did not end well, per failure class (docs/failures.md).

    over_budget has no key: an item past its token ceiling is always parked.
    """

    rate_limited: str = key("retry", "wait", "a usage or rate limit: wait until the reset the CLI names "
                                             "(else wait_default), at most wait_max, then run again",
                            choices=RETRY_POLICIES)
    auth: str = key("retry", "stop", "the CLI is not logged in or its key is refused: stop the drive",
                    choices=RETRY_POLICIES)
    timeout: str = key("retry", "fresh", "the run passed [agent] timeout: fresh_max fresh runs, then park",
                       choices=RETRY_POLICIES)
    stalled: str = key("retry", "fresh", "no output for [agent] stall: fresh_max fresh runs, then park",
                       choices=RETRY_POLICIES)
    crashed: str = key("retry", "fresh", "any other failed exit: fresh_max fresh runs, then park",
                       choices=RETRY_POLICIES)
    no_verdict: str = key("retry", "fresh", "a review that exited 0 without a verdict: fresh_max fresh "
                                            "reviews, then park", choices=RETRY_POLICIES)
    interrupted: str = key("retry", "stop", "drover was interrupted (Ctrl-C, SIGTERM, `drover stop`)",
                           choices=RETRY_POLICIES)
    wait_max: str = key("retry", "6h", "the longest one wait lasts, whatever reset time the CLI names",
                        check=check_duration, convert=as_seconds)
    wait_default: str = key("retry", "10m", "how long to wait when the CLI names no reset time",
                            check=check_duration, convert=as_seconds)
    waits_max: int = key("retry", 12, "waits per item in one drive; past it the item is parked",
                         check=at_least_one)
    fresh_max: int = key("retry", 1, "fresh runs per item in one drive; past it the item is parked "
                                     "(the fallback agent takes a slot once)", check=at_least_one)

    def policy(self, failure: str) -> str:
        """The policy for a failure class; park for a class without a key (over_budget)."""
        return str(getattr(self, failure)) if failure in RETRY_CLASSES else "park"


# The failure classes a [retry] key names a policy for, in vocabulary's order: all but over_budget.
RETRY_CLASSES = tuple(failure for failure in FAILURE_CLASSES if failure in RetryConfig._fields)
