"""Tracker backends behind one small interface; `BACKENDS` names them and `open_tracker` picks one.

Adding a backend: its module (a class with `name`, `writes_back`, `reads_issues`, `from_config`
and the Tracker methods) and one entry in BACKENDS. `[tracker] backend` is checked against it
(TrackerConfig in drover/config/tables.py), and nothing else asks a backend's name
(docs/architecture.md).
"""
from __future__ import annotations

from pathlib import Path

from drover.trackers.base import Issue, Tracker, TrackerUnavailable, owners_in, TrackerSettings
from drover.trackers.file import FileTracker
from drover.trackers.github import GitHubTracker
from drover.trackers.none import NoTracker

__all__ = ["BACKENDS", "Issue", "Tracker", "TrackerUnavailable", "open_tracker", "owners_in"]

# name -> backend class, in the order docs and error messages list them
BACKENDS: dict[str, type[Tracker]] = {backend.name: backend for backend in (NoTracker, FileTracker, GitHubTracker)}


def open_tracker(config: TrackerSettings, root: Path) -> Tracker:
    """The backend `[tracker] backend` names, rooted at the main checkout."""
    # drover.toml is read accepting only the names in BACKENDS, so a KeyError here is a bug, not a user error
    return BACKENDS[config.backend].from_config(config, root)
