#!/usr/bin/env python3
"""A scripted agent for tests/test_failures.py: each run fails the way FAIL_PLAN says, or does its work.

FAIL_PLAN is a list of `slot=mode` (or `ITEM/slot=mode`) separated by spaces; the n-th run of an
item's slot takes the n-th entry for it, and `ok` once the entries run out. Modes:
- ok: implement commits a file, review records an approving audit;
- rate: a 429 that names a reset a few seconds ahead (FAIL_RESET_IN seconds, default 2);
- rate_far: a usage limit that names a reset in the year 2999 (a hostile agent's wish);
- rate_claude / auth_claude: claude's stream-json events for a rejected rate limit (with resetsAt)
  and for a 401;
- auth: a refused API key; crash: a traceback and exit 3; stall: one line, then silence;
- silent: exit 0 and do nothing (a review without a verdict); sleep: print every 0.2 s forever
  (only the timeout ends it); escape: a reason full of terminal escapes;
- after_auth: wait until a run of item FAIL_AFTER has the failure class auth on record, then ok;
- auth_after_review: wait until item FAIL_AFTER_REVIEW has a review run, then auth;
- auth_after_rate: wait until a run of item FAIL_AFTER_RATE has the failure class rate_limited, then auth;
- lines: print the line FAIL_LINE (a hostile agent's, the classifier's to read), then exit 1;
- changes_crash / approve_crash (review): record a request for changes / an approving audit, then
  fall over as crash does (a CLI that exits 1 past its turns, its verdict already given).
"""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # drover sets PYTHONSAFEPATH for its agents
from passes import pass_number  # noqa: E402 - beside this file

sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
passes = pass_number()
plan = [entry.split("=", 1) for entry in os.environ.get("FAIL_PLAN", "").split()]
mine = [mode for who, mode in plan if who in (slot, f"{item}/{slot}")]
mode = mine[passes - 1] if passes <= len(mine) else "ok"
print(f"failing agent: {item} {slot} pass {passes}: {mode}", flush=True)
reset_in = float(os.environ.get("FAIL_RESET_IN", "2"))


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


if mode == "auth_after_review":
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        other = json.loads(subprocess.run(["drover", "show", os.environ["FAIL_AFTER_REVIEW"], "--json"],
                                          capture_output=True, text=True, check=True).stdout)
        if any(run["slot"] == "review" for run in other["runs"]):
            break
        time.sleep(0.1)
    mode = "auth"

if mode == "auth_after_rate":  # a refused key once item FAIL_AFTER_RATE waits out a rate limit
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        other = json.loads(subprocess.run(["drover", "show", os.environ["FAIL_AFTER_RATE"], "--json"],
                                          capture_output=True, text=True, check=True).stdout)
        if any(run.get("failure") == "rate_limited" for run in other["runs"]):
            break
        time.sleep(0.1)
    mode = "auth"

if mode == "after_auth":
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        other = json.loads(subprocess.run(["drover", "show", os.environ["FAIL_AFTER"], "--json"], capture_output=True,
                                          text=True, check=True).stdout)
        if any(run.get("failure") == "auth" for run in other["runs"]):
            break
        time.sleep(0.1)
    mode = "ok"

if mode == "ok":
    if slot == "implement":
        Path("work.txt").open("a").write(f"{item} pass {passes}\n")
        git("add", "work.txt")
        git("commit", "-q", "-m", f"{item}: pass {passes}")
    else:
        subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "fine"], check=True)
    sys.exit(0)
if mode == "rate":
    print(f"Error: 429 Too Many Requests: rate limit exceeded, try again in {reset_in:g} seconds")
    sys.exit(1)
if mode == "rate_far":
    print("You've hit your usage limit. It resets at 2999-01-01T00:00:00Z")
    sys.exit(1)
if mode == "rate_claude":
    print(json.dumps({"type": "rate_limit_event", "rate_limit_info": {
        "status": "rejected", "resetsAt": int(time.time() + reset_in), "rateLimitType": "five_hour"}}))
    print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "api_error_status": 429,
                      "result": "Claude AI usage limit reached"}))
    sys.exit(1)
if mode == "auth_claude":
    print(json.dumps({"type": "result", "subtype": "success", "is_error": True, "api_error_status": 401,
                      "result": "Failed to authenticate. API Error: 401 invalid x-api-key"}))
    sys.exit(1)
if mode == "auth":
    print("Invalid API key · Please run /login")
    sys.exit(1)
if mode == "changes_crash":
    subprocess.run(["drover", "request-changes", item], input="Name the thing better.\n", text=True, check=True)
    mode = "crash"
if mode == "approve_crash":
    subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "fine"], check=True)
    mode = "crash"
if mode == "crash":
    print("Traceback (most recent call last):\nValueError: the agent fell over")
    sys.exit(3)
if mode == "stall":
    time.sleep(600)
if mode == "sleep":
    while True:
        print("still working", flush=True)
        time.sleep(0.2)
if mode == "lines":
    print(os.environ["FAIL_LINE"], flush=True)
    sys.exit(1)
if mode == "escape":
    print("\x1b[2J\x1b]0;owned\x07429 rate limit \x1b[31mred\x00" + "x" * 5000)
    sys.exit(1)
sys.exit(0)  # silent
