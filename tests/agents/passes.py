"""A scripted agent's count of its own runs: `pass_number()` is this run's place among its item's
runs of its slot, 1 for the first. A tally in the test's own HOME, one mark a run: asking
`drover show` for the runs cost a whole drover process (135 ms of CPU) a run."""
import hashlib
import os
from pathlib import Path


def pass_number() -> int:
    item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
    key = hashlib.sha1(f"{os.environ['DROVER_REPO']}\0{item}\0{slot}".encode()).hexdigest()
    tally = Path(os.environ["HOME"], "agent-passes", key)
    tally.parent.mkdir(exist_ok=True)
    with tally.open("a") as handle:
        handle.write(".")
    return len(tally.read_text())
