"""`Dep`: one dep of an item as `show` and the templates describe it.

A template row type (fields.py re-exports it and documents its members), kept in a module of its
own so that `show`, which describes deps, does not build every template type to do so.
"""
from __future__ import annotations

from typing import NamedTuple


class Dep(NamedTuple):
    """One dep of an item: its file's state, its done flag and its best audit."""

    Id: str = ""
    Title: str = ""
    Path: str = ""
    Done: bool = False
    Unreadable: str = ""
    Level: str = ""
    By: str = ""
    Weak: bool = False
