"""The local executor: the agent runs on this machine, as drover always did."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from drover.agents import launch as agents
from drover.executors.base import Collected, Launch

if TYPE_CHECKING:
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project


class LocalHandle:
    """A launch that runs in the caller's thread when collected (the agent starts there)."""

    def __init__(self, launch: "Launch", echo: bool, on_start: Callable[[int], None],
                 progress: Callable[[str], None] | None):
        self.launch = launch
        self.progress = progress
        self.echo = echo
        self.on_start = on_start
        self._cancel = threading.Event()

    def cancel(self) -> None:
        self._cancel.set()

    def collect(self, cancel: threading.Event | None = None) -> Collected:
        launch = self.launch
        stop = self._cancel
        if cancel is not None:
            # one event the launch watches: either the caller's or our own cancel() ends the agent
            watcher = threading.Thread(target=_forward, args=(cancel, stop), daemon=True)
            watcher.start()
        try:
            result = agents.launch(
                list(launch.argv), cwd=launch.workdir, env_add=launch.env_add, prompt=launch.prompt,
                prompt_via=launch.prompt_via, log_path=launch.log_path,
                timeout=launch.agent.timeout_seconds or None, label=f"{launch.item_id} {launch.slot}",
                echo=self.echo, on_start=self.on_start, cancel=stop, stream=launch.stream,
                progress=self.progress, progress_label=f"{launch.item_id}: {launch.slot} by {launch.agent.identity}",
                token_ceiling=launch.token_ceiling,
                stall=launch.agent.stall_seconds or None,
            )
        finally:
            stop.set()  # ends the forwarding thread too
        usage = result.usage.as_row() if result.usage is not None else None
        return Collected(result.exit_code, result.outcome, result.elapsed, usage=usage, reason=result.stalled)


def _forward(source: threading.Event, target: threading.Event) -> None:
    while not target.is_set():
        if source.wait(0.2):
            target.set()


class LocalExecutor:
    name = "local"

    def submit(self, project: "Project", ledger: "Ledger", launch: "Launch", *, echo: bool,
               on_start: Callable[[int], None], progress: Callable[[str], None] | None = None) -> LocalHandle:
        return LocalHandle(launch, echo, on_start, progress)

    def start(self) -> None:
        pass

    def where(self) -> str:
        return "this machine"

    def close(self) -> None:
        pass
