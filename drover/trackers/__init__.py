"""Tracker backends (none, file, github) behind one small interface; `open_tracker` picks one."""
from __future__ import annotations

from pathlib import Path

from ..config import TrackerConfig
from .base import DISPOSITIONS, Issue, Tracker, TrackerUnavailable, owners_in
from .file import FileTracker
from .github import GitHubTracker
from .none import NoTracker

__all__ = ["DISPOSITIONS", "Issue", "Tracker", "TrackerUnavailable", "open_tracker", "owners_in"]


def open_tracker(config: TrackerConfig, root: Path) -> Tracker:
    """The backend `[tracker] backend` names, rooted at the main checkout."""
    if config.backend == "none":
        return NoTracker()
    if config.backend == "file":
        return FileTracker(config.register, root)
    if config.backend == "github":
        return GitHubTracker(config.repo, config.follow_up_label, root)
    # config.py accepts only the three names, so reaching here is a bug, not a user error
    raise ValueError(f"unknown tracker backend {config.backend!r}")
