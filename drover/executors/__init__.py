"""Executors: where a prepared run's agent runs. `local` (this machine) or `ray` (a cluster).

An executor is one small interface: `submit` a prepared run and get a `Handle`, which can be
cancelled and `collect`s the result; the agent's log is written to the run's folder (as it runs
here, when it ends on a cluster), where `drover log` reads it. runs.execute does everything around
it (branch, worktree, ledger rows), so a new engine is one module here.
"""
from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from drover.errors import UsageError
from drover.executors.base import Collected as Collected, Executor as Executor, Handle as Handle, Launch as Launch
from drover.vocabulary import EXECUTORS

if TYPE_CHECKING:
    from drover.config import Config
    from drover.ledger.project import Project

NAMES = EXECUTORS


def choose(config: "Config", name: str | None = None) -> str:
    """The executor a command uses: `--executor`, else `[run] executor`."""
    chosen = name or config.executor
    if chosen not in NAMES:
        raise UsageError(f"--executor must be one of {', '.join(NAMES)}, not {chosen!r}")
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
    if config.executor != "ray" or importlib.util.find_spec("ray") is not None:
        return ""
    from drover.executors.ray import INSTALL

    return INSTALL
