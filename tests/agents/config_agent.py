#!/usr/bin/env python3
"""A scripted agent for tests/test_pool.py: the pool agent (pool_agent.py), except that implementing
with CONFIG_PLANT set it commits its `<item>.txt` and then leaves in its pooled worktree something the
shared git config (the repository's common config, which every worktree reads) tells git not to see:
  ignorecase  an untracked `makefile` (make reads it before the tracked `Makefile`) whose `test`
              target appends a line to $CONFIG_RAN, and core.ignoreCase=true (git then takes
              `makefile` for the tracked `Makefile`)
  filemode    the execute bit taken off the tracked `check.sh`, and core.fileMode=false (git then
              keeps whatever mode a tracked file has)
"""
import os
import subprocess
import sys
from pathlib import Path

plant = os.environ.get("CONFIG_PLANT", "")
if os.environ["DROVER_SLOT"] != "implement" or not plant:
    pool_agent = Path(__file__).with_name("pool_agent.py")
    os.execv(sys.executable, [sys.executable, str(pool_agent)])

sys.stdin.read()
item = os.environ["DROVER_ITEM"]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


target = Path(f"{item.lower()}.txt")
target.write_text(f"{item}\n")
git("add", str(target))
git("commit", "-q", "-m", f"{item}: done")
if plant == "ignorecase":
    Path("makefile").write_text(f"test:\n\t@echo 'makefile planted by {item} ran' >> {os.environ['CONFIG_RAN']}\n")
    git("config", "core.ignoreCase", "true")
elif plant == "filemode":
    Path("check.sh").chmod(0o644)
    git("config", "core.fileMode", "false")
