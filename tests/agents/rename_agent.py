#!/usr/bin/env python3
"""A scripted agent for the stale-check test (tests/test_verify.py): D-1 renames mod.f to mod.g,
any other item adds a test that calls mod.f; each alone passes, the two together do not.

Its review approves only once every item's review has begun ($RENAME_BARRIER holds one file per
item reviewing, and it waits for $RENAME_ITEMS of them), so both items' checks ran with base as
it was before either merged.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
if slot == "review":
    barrier = Path(os.environ["RENAME_BARRIER"])
    (barrier / item).write_text("reviewing\n")
    deadline = time.monotonic() + 60
    while len(list(barrier.iterdir())) < int(os.environ["RENAME_ITEMS"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    sys.exit(subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "ok"]).returncode)
if item == "D-1":
    Path("mod.py").write_text("def g():\n    return 1\n")
    Path("test_mod.py").write_text("from mod import g\nassert g() == 1\n")
else:
    Path(f"test_{item.lower().replace('-', '')}.py").write_text("from mod import f\nassert f() + 1 == 2\n")
subprocess.run(["git", "add", "-A"], check=True)
subprocess.run(["git", "commit", "-qm", f"{item}: done"], check=True)
