"""The closed sets of words drover acts on, each defined once; every other module imports them;
and the shared names (the configuration file, drover's cache folder) and how a count is said.

This module imports nothing but enum (which re, and so every command, imports anyway), so the
command line can build its choices from it for free.
"""
from __future__ import annotations

from enum import StrEnum

# The slots an agent is launched for; each has a built-in template and a `[prompts]` key.
SLOTS = ("implement", "review", "draft")
# The one-line `[run] branch` template is rendered like a slot, but nothing is launched for it.
BRANCH_SLOT = "branch"
TEMPLATE_SLOTS = SLOTS + (BRANCH_SLOT,)

# How much coaching the built-in prompts carry (`[agent] guidance`, `--guidance`).
GUIDANCE_LEVELS = ("lean", "detailed")

# Audit levels, weakest first; an audit at `reviewed` or above approves (APPROVING_LEVELS).
LEVELS = ("claimed", "reviewed", "verified")
APPROVING_LEVELS = LEVELS[LEVELS.index("reviewed"):]

# An item id is `<prefix>-<number>`; the prefix is letters and digits, starting with a letter.
# (items.ids.id_pattern matches one project's ids; this is the shape any project's id has.)
PREFIX_PATTERN = r"[A-Za-z][A-Za-z0-9]*"
ANY_ID_PATTERN = PREFIX_PATTERN + r"-[0-9]+"
# The highest item number `new` gives and the ledger's `ids_met` holds: an id above it is no longer
# exact as a JSON number, and one past SQLite's integers could not be stored. A file may be named
# higher (anyone can name a file): `ids_met` then holds this number, and `new` refuses.
MAX_ITEM_NUMBER = 2**53

# The `by` of a round drover's own failed check sent back (loop/sendback.py): not a review's.
CHECKER = "drover verify"
# The `by` of drover's own park of an item (a token budget, a [retry] policy): not an agent's, nor the operator's.
DROVER = "drover"



class State(StrEnum):
    """An item's state, the one registry of them (state.state_of decides which applies;
    docs/states.md is the table of what moves an item out of each)."""

    READY = "ready"
    NEEDS_REQUIREMENTS = "needs requirements"
    BLOCKED = "blocked"
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    FAILED = "failed"
    IN_REVIEW = "in review"
    CHANGES_REQUESTED = "changes requested"
    APPROVED = "approved"
    PARKED = "parked"
    DONE = "done"
    UNREADABLE = "unreadable"


# The states `list --state` selects by: every state `list` can show.
LIST_STATES = tuple(state.value for state in State)

# What `finish` does with an issue the item closes.
DISPOSITIONS = ("close", "comment", "keep")
# Whose issues found by their `Owner:` line reach a prompt with their words ([tracker] authors, github):
# the repository's owner, members and collaborators, or anyone (docs/trackers.md, "Whose words").
ISSUE_AUTHORS = ("members", "anyone")

# Where agent runs execute (`[run] executor`, `drive --executor`); drover/executors/ has one module each.
EXECUTORS = ("local", "ray")

# Why a run did not end well (`runs.failure`; docs/unattended.md), each mapped to a policy by `[retry]`.
FAILURE_CLASSES = ("rate_limited", "auth", "timeout", "stalled", "crashed", "no_verdict", "interrupted", "over_budget")
# What drive does about a failed run (`[retry] <class> = "<policy>"`).
RETRY_POLICIES = ("wait", "fresh", "fallback", "stop", "park")
# How a park reason for an item past a token ceiling begins (`show`, `report`, the drive summary).
OVER_BUDGET = "over budget: "
# How the reason of a review run that ended by parking its item begins (its send-back past the
# cap, or its own `drover park`): no failure, whatever it exited (`report`'s outcome `parked`).
PARKED_ITS_ITEM = "parked its item: "

# The project's configuration file, at the root of the main checkout.
CONFIG_FILE = "drover.toml"


def counted(count: int, noun: str) -> str:
    """`count` and `noun`, plural unless it is one: "1 round", "3 rounds", "0 findings"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def cache_dir() -> str:
    """drover's folder in the user's cache ($XDG_CACHE_HOME/drover, else ~/.cache/drover): what it
    keeps there is made again from scratch when it is gone."""
    import os

    return os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "drover")
