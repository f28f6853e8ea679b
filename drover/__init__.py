"""drover: run AI coding agents in a loop over a project's work items."""

__version__ = "0.1.0"

