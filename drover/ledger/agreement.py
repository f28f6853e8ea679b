"""Whether each item file's Changes section agrees with the ledger's rounds (for `check`).

The intent journal keeps them in step through kills; a disagreement can still come from a hand
edit, a restored backup or a drover older than the journal. Each line names the repair.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from drover.errors import ProblemCode

if TYPE_CHECKING:
    from drover.ledger.db import Ledger
    from drover.ledger.catalogue import Entry


# Up to this many items are named in the query (SQLite's variable limit is far above it).
FEW = 500


def disagreeing(ledger: "Ledger", entries: dict[str, "Entry"]) -> list[tuple[ProblemCode, str, str]]:
    """One line per item whose file and ledger tell different stories, with the command that
    repairs it, as (what kind, the file, what is wrong with it): check gives the kind and the file
    apart (`check --json`)."""
    # Two reads of the rounds, each for the items one case can name: an outstanding Changes
    # against rounds all cleared, a cleared one against an uncleared round (a summary of
    # every item, 50,000 rows, cost more than the rest of this).
    readable = [(item_id, found) for item_id, found in entries.items() if not found.unreadable]
    cleared_ids = [item_id for item_id, found in readable if found.cleared]
    all_cleared = ledger.newest_rounds(uncleared=False) if any(found.outstanding for _, found in readable) else {}
    some_open = (ledger.newest_rounds(uncleared=True, items=cleared_ids if len(cleared_ids) <= FEW else None)
                 if cleared_ids else {})
    said = []
    for item_id, found in readable:
        if found.outstanding and item_id in all_cleared:
            said.append((
                ProblemCode.CHANGES_DISAGREE, found.rel,
                f"{item_id} Changes holds findings but the ledger has every round cleared "
                f"(newest: round {all_cleared[item_id]}): record them with `drover request-changes {item_id} "
                f"--file F`, or discharge them with `drover close-changes {item_id}`"
            ))
        elif found.cleared and item_id in some_open:
            said.append((
                ProblemCode.CHANGES_DISAGREE, found.rel,
                f"{item_id} Changes is cleared but the ledger has round {some_open[item_id]} "
                f"uncleared: run `drover close-changes {item_id}` to clear it in the ledger too"
            ))
    for intent in ledger.pending_intents():
        said.append((ProblemCode.WRITE_INTERRUPTED, intent["path"],
                     f"an interrupted {intent['command']} is not finished: "
                     "run any drover command that writes (for instance `drover list`) to finish it"))
    for owed in ledger.owed_commits():
        if owed["failed"]:
            said.append((ProblemCode.COMMIT_OWED, owed["path"],
                         f"the commit `{owed['message']}` is owed ([project] commit_items) "
                         f"and git refused it: {owed['failed']}; the next write tries it again"))
    return said
