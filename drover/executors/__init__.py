"""Executors: where a prepared run's agent runs. `local` (this machine) or `ray` (a cluster).

An executor is one small interface: `submit` a prepared run and get a `Handle`, which can be
cancelled and `collect`s the result; the agent's log is written to the run's folder (as it runs
here, when it ends on a cluster), where `drover log` reads it. runs.execute does everything around
it (branch, worktree, ledger rows), so a new engine is one module here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from drover.errors import UsageError
from drover.vocabulary import EXECUTORS

# The interface (base.py) is imported from its module, not from here: every writing command an
# agent calls imports outbox.py, so this package, and base.py's dataclasses were 2 ms of each.
if TYPE_CHECKING:
    from drover.config import Config
    from drover.executors.base import Executor
    from drover.ledger.project import Project

def choose(config: "Config", name: str | None = None) -> str:
    """The executor a command uses: `--executor`, else `[run] executor`."""
    chosen = name or config.executor
    if chosen not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}, not {chosen!r}")
    return chosen


def open_executor(project: "Project", name: str | None = None) -> Executor:
    """The executor by name; choosing ray without Ray installed is one line and exit 2."""
    chosen = choose(project.config, name)
    if chosen == "ray":
        from drover.executors.ray import RayExecutor

        return RayExecutor(project)
    from drover.executors.local import LocalExecutor

    return LocalExecutor()


def unavailable(config: "Config") -> str:
    """Why `[run] executor` cannot run on this machine ("" when it can): ray chosen, Ray not
    installed. `drover check` says so; run and drive refuse (open_executor)."""
    import importlib.util  # here: only check, run and drive ask; 0.3 ms of every writing command

    if config.executor != "ray" or importlib.util.find_spec("ray") is not None:
        return ""
    from drover.executors.ray import INSTALL

    return INSTALL
