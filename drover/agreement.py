"""Whether each item file's Changes section agrees with the ledger's rounds (for `check`).

The intent journal keeps them in step through kills; a disagreement can still come from a hand
edit, a restored backup or a drover older than the journal. Each line names the repair.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .ledger import Ledger
    from .project import Project
    from .status import Entry


def disagreements(project: "Project", ledger: "Ledger", entries: dict[str, "Entry"]) -> list[str]:
    """One line per item whose file and ledger tell different stories, with the command that repairs it."""
    summary = ledger.round_summary()
    said = []
    for item_id, found in entries.items():
        if found.unreadable:
            continue
        rounds = summary.get(item_id)
        uncleared = int(rounds["open"] or 0) if rounds else 0
        if found.outstanding and rounds is not None and not uncleared:
            said.append(
                f"{found.rel}: {item_id} Changes holds findings but the ledger has every round cleared "
                f"(newest: round {rounds['newest']}): record them with `drover request-changes {item_id} "
                f"--file F`, or discharge them with `drover close-changes {item_id}`"
            )
        elif found.cleared and rounds is not None and uncleared:
            said.append(
                f"{found.rel}: {item_id} Changes is cleared but the ledger has round {rounds['newest']} "
                f"uncleared: run `drover close-changes {item_id}` to clear it in the ledger too"
            )
    for intent in ledger.pending_intents():
        said.append(f"{intent['path']}: an interrupted {intent['command']} is not finished: "
                    "run any drover command that writes (for instance `drover list`) to finish it")
    return said
