"""16 processes x 50 mixed writes at once: every write succeeds, and file and ledger agree."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Minutes, not seconds: only under `make test-stress` (DROVER_STRESS=1).
pytestmark = pytest.mark.skipif(not os.environ.get("DROVER_STRESS"), reason="make test-stress runs these")

from helpers import BIN, assert_agrees, seed_four_items

PROCESSES = int(os.environ.get("DROVER_STRESS_WRITERS", "16"))
WRITES = int(os.environ.get("DROVER_STRESS_WRITES", "50"))

# One writer: a mixed sequence of drover commands, run as child processes, one after another.
WRITER = r'''
import subprocess, sys
drover, me, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
failures = 0
for n in range(count):
    item = f"D-{1 + (me + n) % 4}"
    step = n % 6
    if step == 0:
        argv, stdin = [drover, "new", f"writer {me} item {n}"], None
    elif step == 1:
        argv, stdin = [drover, "request-changes", item], f"## finding {me}.{n}\nfix it\n"
    elif step == 2:
        argv, stdin = [drover, "audit", item, "--level", "reviewed", "--by", f"w{me}"], None
    elif step == 3:
        argv, stdin = [drover, "park", item, "--why", f"writer {me}"], None
    elif step == 4:
        argv, stdin = [drover, "dispose", "D-1", "7", "--as", "keep"], None
    else:
        argv, stdin = [drover, "audit", item, "--level", "claimed", "--by", f"w{me}"], None
    done = subprocess.run(argv, input=stdin, text=True, capture_output=True)
    # request-changes past the round cap is a refusal by design (exit 1), not a failure
    refused = done.returncode == 1 and "max_rounds" in done.stderr
    if done.returncode != 0 and not refused:
        failures += 1
        print(f"FAIL {' '.join(argv[1:])}: exit {done.returncode}: {done.stderr.strip()!r}", flush=True)
print(f"failures {failures}")
'''


def test_sixteen_writers_queue_and_none_fails(repo, tmp_path):
    seed_four_items(repo)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    writers = [
        subprocess.Popen([sys.executable, str(script), str(BIN / "drover"), str(me), str(WRITES)],
                         cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for me in range(PROCESSES)
    ]
    said = [writer.communicate()[0] for writer in writers]
    failures = [line for out in said for line in out.splitlines() if line.startswith("FAIL")]
    assert failures == []
    assert all(out.strip().endswith("failures 0") for out in said), said
    seen = assert_agrees(repo)
    news = len([path for path in (repo / "items").glob("*.md")]) - 4
    assert news == len(range(0, WRITES, 6)) * PROCESSES
    print(f"{PROCESSES} writers x {WRITES} writes: 0 failures; {news} items created; {seen}")
