"""The closed sets of words drover acts on, each defined once; every other module imports them.

This module imports nothing, so the command line can build its choices from it for free.
"""
from __future__ import annotations

# The slots an agent is launched for; each has a built-in template and a `[prompts]` key.
SLOTS = ("implement", "review", "draft")
# The one-line `[run] branch` template is rendered like a slot, but nothing is launched for it.
BRANCH_SLOT = "branch"
TEMPLATE_SLOTS = SLOTS + (BRANCH_SLOT,)

# How much coaching the built-in prompts carry (`[agent] guidance`, `--guidance`).
GUIDANCE_LEVELS = ("lean", "detailed")

# Audit levels, weakest first; an audit at `reviewed` or above approves.
LEVELS = ("claimed", "reviewed", "verified")

# An item id is `<prefix>-<number>`; the prefix is letters and digits, starting with a letter.
# (items.id_pattern matches one project's ids; this is the shape any project's id has.)
PREFIX_PATTERN = r"[A-Za-z][A-Za-z0-9]*"
ANY_ID_PATTERN = PREFIX_PATTERN + r"-[0-9]+"

# The states `list --state` selects by (status.State's values but interrupted and failed).
LIST_STATES = ("ready", "blocked", "running", "in review", "changes requested", "approved", "parked", "done",
               "unreadable")

# What `finish` does with an issue the item closes.
DISPOSITIONS = ("close", "comment", "keep")

# Where agent runs execute (`[run] executor`, `drive --executor`); drover/executors/ has one module each.
EXECUTORS = ("local", "ray")
