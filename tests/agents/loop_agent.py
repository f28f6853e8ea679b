#!/usr/bin/env python3
"""A scripted agent for the loop tests: it edits, commits, and calls drover through PATH.

AGENT_MODE steers it: `normal` (request changes once, then approve), `approving` (approve at the
first review: one round, where a send-back is not what the test is about), `stubborn` (always
request changes), `fail` (exit 3), `sleep` (start a grandchild and sleep), `silent` (review
records nothing), `unmerged` (in posture conflict, resolve the files and leave the merge
unconcluded), `markers` (in posture conflict, commit the files as they are, conflict markers and
all, and exit $AGENT_MARKERS_EXIT; on its next pass, take the marker lines out), `idle` (implementing, exit 0 having done nothing),
`breaks-check` (its first implementing pass deletes tests.sh, the verify command; the next puts it back). AGENT_QUIET=N: the first implementing pass says nothing for N seconds first;
AGENT_FINDINGS: the findings of a request for changes. AGENT_SLOW_ITEM=ID:N: every implementing pass
of item ID sleeps N seconds first (another item's finish then comes while this agent runs), or
less: till the file AGENT_SLOW_UNTIL names is there, or, given `merged:OTHER`, till item OTHER's
first pass is on main (merged).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

mode = os.environ.get("AGENT_MODE", "normal")
prompt = sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
try:
    print(f"script agent: {slot} {item} in {Path.cwd().name}; prompt of {len(prompt)} characters", flush=True)
except BrokenPipeError:  # its drover died as it started this agent: an orphan goes on all the same
    sys.stdout = open(os.devnull, "w")
marker = os.environ.get("AGENT_MARKER")
if marker:
    Path(marker).write_text(json.dumps({key: value for key, value in os.environ.items() if key.startswith("DROVER_")}))

if mode == "fail":
    sys.exit(3)
if mode == "idle" and slot == "implement":
    sys.exit(0)
if mode == "sleep":
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    Path(os.environ["AGENT_PIDFILE"]).write_text(f"{os.getpid()} {child.pid}")
    time.sleep(120)
    sys.exit(0)


def drover(*args, stdin=None):
    done = subprocess.run(["drover", *args], input=stdin, text=True, capture_output=True)
    print(done.stdout + done.stderr, end="", flush=True)
    return done


slow_item, _, slow_seconds = os.environ.get("AGENT_SLOW_ITEM", "").partition(":")


def slow_done() -> bool:
    """Whether what AGENT_SLOW_UNTIL waits for has come (never, when it names nothing)."""
    until = os.environ.get("AGENT_SLOW_UNTIL", "")
    if until.startswith("merged:"):
        merged = subprocess.run(["git", "log", "--format=%s", "main"], capture_output=True, text=True).stdout
        return f"{until.removeprefix('merged:')}: pass 1" in merged.splitlines()
    return bool(until) and Path(until).exists()


if slot == "implement" and slow_item == item:
    slow_until = time.monotonic() + float(slow_seconds)
    while time.monotonic() < slow_until and not slow_done():
        time.sleep(0.1)

if os.environ.get("AGENT_SAY"):  # a line of output, as the agent chose it (escapes and all)
    print(os.environ["AGENT_SAY"], flush=True)

if slot == "implement":
    merging = subprocess.run(["git", "rev-parse", "-q", "--verify", "MERGE_HEAD"], capture_output=True).returncode == 0
    if merging:
        # posture conflict: complete the merge, keeping this branch's side of each conflicting file
        unmerged = subprocess.run(["git", "diff", "--name-only", "--diff-filter=U"], capture_output=True,
                                  text=True, check=True).stdout.split()
        for path in unmerged:
            if mode != "markers":
                subprocess.run(["git", "checkout", "--ours", "--", path], check=True)
            subprocess.run(["git", "add", "--", path], check=True)
        if mode == "markers":
            subprocess.run(["git", "commit", "-q", "--no-edit"], check=True)
            sys.exit(int(os.environ.get("AGENT_MARKERS_EXIT", "0")))
        if mode == "unmerged":
            sys.exit(0)
    target = Path(f"{item.lower()}.txt")
    if mode == "markers" and target.exists():
        target.write_text("".join(line for line in target.read_text().splitlines(keepends=True)
                                  if not line.startswith(("<<<<<<<", "=======", ">>>>>>>"))))
    passes = int(target.read_text().count("\n")) if target.exists() else 0
    if passes == 0 and os.environ.get("AGENT_QUIET"):
        time.sleep(float(os.environ["AGENT_QUIET"]))
    with target.open("a") as handle:
        handle.write(f"pass {passes + 1}\n")
    if mode == "breaks-check":
        subprocess.run(["git", "rm", "-q", "tests.sh"] if passes == 0 else ["git", "checkout", "main", "--", "tests.sh"],
                       check=True)
    subprocess.run(["git", "add", str(target)], check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"{item}: pass {passes + 1}"], check=True)
elif slot == "review":
    rounds = int(os.environ["DROVER_ROUND"])  # the rounds recorded so far, as `drover show` counts them
    if mode == "silent":
        sys.exit(0)
    if mode == "stubborn" or (not rounds and mode != "approving"):
        findings = os.environ.get("AGENT_FINDINGS") or f"# Pass {rounds + 1} is not enough\n\nDo it again.\n"
        done = drover("request-changes", item, stdin=findings)
        sys.exit(done.returncode)
    sys.exit(drover("audit", item, "--level", "reviewed", "--note", "looks right").returncode)
