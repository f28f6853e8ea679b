#!/usr/bin/env python3
"""A scripted agent for tests/test_pool.py: the pool agent (pool_agent.py), except that implementing
with INDEX_HIDE set it commits its `<item>.txt` and then changes the tracked README and hides the
change from git, in the index its pooled worktree keeps for the next holder:
  assume-unchanged  README rewritten and marked assume-unchanged, 1100 files staged beside it (git
                    trusts the mark as it checks out once the index holds 1000 entries)
  forged            README rewritten and staged with its time an hour back, then its index entry given
                    the committed blob id (the stat data stays the rewritten file's)
  time-set-back     README rewritten at its size, its modification time set back to the one drover's
                    checkout gave it, and the shared config told to trust no ctime (and to compare
                    little else)
"""
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # drover sets PYTHONSAFEPATH for its agents
from index_forgery import forge_entry  # noqa: E402 - beside this file

hide = os.environ.get("INDEX_HIDE", "")
if os.environ["DROVER_SLOT"] != "implement" or not hide:
    pool_agent = Path(__file__).with_name("pool_agent.py")
    os.execv(sys.executable, [sys.executable, str(pool_agent)])

sys.stdin.read()
item = os.environ["DROVER_ITEM"]
readme = Path("README")
checked_out = readme.stat()


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


if hide == "time-set-back":
    time.sleep(1.1)  # the index the commit below writes is a second past README's time: no racily clean entry
target = Path(f"{item.lower()}.txt")
target.write_text(f"{item}\n")
git("add", str(target))
git("commit", "-q", "-m", f"{item}: done")
if hide == "assume-unchanged":
    readme.write_text(f"changed by {item}\n")
    git("update-index", "--assume-unchanged", "README")
    (Path("pad")).mkdir()
    for n in range(1100):
        Path("pad", str(n)).write_text(f"{n}\n")
    git("add", "pad")
elif hide == "forged":
    readme.write_text(f"changed by {item}\n")
    past = time.time() - 3600
    os.utime(readme, (past, past))
    git("add", "README")
    forge_entry(Path(git("rev-parse", "--absolute-git-dir").strip(), "index"), "README",
                git("rev-parse", "HEAD:README").strip())
elif hide == "time-set-back":
    readme.write_text("x" * (checked_out.st_size - 1) + "\n")
    os.utime(readme, ns=(checked_out.st_atime_ns, checked_out.st_mtime_ns))
    git("config", "core.trustctime", "false")
    git("config", "core.checkStat", "minimal")
