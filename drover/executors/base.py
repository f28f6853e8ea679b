"""The executor interface: a prepared `Launch` in, a `Handle` to cancel and collect, `Collected` out."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol


if TYPE_CHECKING:
    from drover.config import AgentConfig
    from drover.prompts.rendering import Provenance
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project



@dataclass(frozen=True)
class Launch:
    """Everything one agent launch needs; computing it changes nothing."""

    item_id: str
    slot: str
    run_id: str
    agent: AgentConfig
    argv: tuple[str, ...]
    prompt_via: str
    prompt: str
    provenance: Provenance
    warnings: tuple[str, ...]
    branch: str
    workdir: Path
    worktree: Path | None
    run_dir: Path
    env_add: dict[str, str] = field(default_factory=dict)
    binary_missing: str = ""
    root_refusal: str = ""
    stream: str = ""  # the structured output the agent prints (drover/agents/usage.py), "" for plain text
    token_ceiling: int = 0  # the run is ended past this many tokens in + out (drover/loop/budgets.py); 0: none
    # a review's: the branch head its prompt was built on and its branch check judged ("" for other slots)
    reviewed_head: str = ""

    @property
    def prompt_path(self) -> Path:
        return self.run_dir / "prompt.md"

    @property
    def log_path(self) -> Path:
        return self.run_dir / "agent.log"


@dataclass(frozen=True)
class Collected:
    """How a run ended wherever it ran: `exited` (with its code), `timeout`, `interrupted`, `over
    budget` (ended at its token ceiling), or `failed` (a remote run whose result or commits were
    refused, `reason` saying why)."""

    exit_code: int | None
    outcome: str
    elapsed: float
    node: str = "local"
    reason: str = ""  # why the run ended so, when the agent's exit cannot say (a stall, a cancel, a refusal)
    notes: tuple[str, ...] = field(default_factory=tuple)  # e.g. outbox operations refused on replay
    usage: dict[str, Any] | None = None  # the ledger row of what the run cost (usage.Usage.as_row), if known


class Handle(Protocol):
    """One submitted run."""

    def cancel(self) -> None:
        """End the run's agent (its whole process group) wherever it runs."""
        ...

    def collect(self, cancel: threading.Event | None = None) -> Collected:
        """Wait for the run to end (cancelling it when `cancel` is set) and bring its result home."""
        ...


class Executor(Protocol):
    name: str

    def submit(self, project: "Project", ledger: "Ledger", launch: "Launch", *, echo: bool,
               on_start: Callable[[int], None], progress: Callable[[str], None] | None = None) -> Handle:
        """Start the run's agent. Raises OSError when the program cannot be started.

        `progress` gets the one-line progress reports of a structured stream (agents.launch).
        """
        ...

    def start(self) -> None:
        """Get ready before the first run (connect to a cluster); a failure is one UsageError line."""
        ...

    def where(self) -> str:
        """Where a run would go, for --dry-run."""
        ...

    def close(self) -> None:
        ...
