#!/usr/bin/env python3
"""A scripted agent for tests/test_verify.py: its first implementing pass commits a file BROKEN
(the project's `make test` fails while it exists), its second removes it; its review approves.

BROKEN_MODE=stubborn keeps BROKEN on every pass; BROKEN_MODE=stuck commits nothing after its first;
BROKEN_FILE names the file in BROKEN's place. Each prompt is kept in $AGENT_PROMPTS as
<slot>-<n>.md, so a test can read what the agent was told.
"""
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # drover sets PYTHONSAFEPATH for its agents
from passes import pass_number  # noqa: E402 - beside this file

prompt = sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
passes = pass_number()
broken = os.environ.get("BROKEN_FILE", "BROKEN")
kept = os.environ.get("AGENT_PROMPTS")
if kept:
    Path(kept, f"{slot}-{passes}.md").write_text(prompt)


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


if slot == "implement" and passes > 1 and os.environ.get("BROKEN_MODE") == "stuck":
    print(f"broken agent: pass {passes} changed nothing")
elif slot == "implement":
    Path("work.txt").open("a").write(f"pass {passes}\n")
    git("add", "work.txt")
    if passes == 1 or os.environ.get("BROKEN_MODE") == "stubborn":
        Path(broken).write_text(f"pass {passes} left this\n")
        git("add", broken)
    elif Path(broken).exists():
        git("rm", "-q", broken)
    git("commit", "-q", "-m", f"{item}: pass {passes}")
    print(f"broken agent: pass {passes} committed")
elif slot == "review":
    done = subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "read it"],
                          capture_output=True, text=True)
    print(done.stdout + done.stderr, end="")
    sys.exit(done.returncode)
