"""drover: run AI coding agents in a loop over a project's work items."""

__version__ = "0.1.0"


def cache_dir() -> str:
    """drover's folder in the user's cache ($XDG_CACHE_HOME/drover, else ~/.cache/drover): what it
    keeps there is made again from scratch when it is gone."""
    import os

    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "drover")
