#!/usr/bin/env python3
"""A hostile scripted agent: it does its slot's work, then gives a verdict it has no right to give.

HOSTILE steers it (an unknown or empty value: an honest agent):
  audit-other        implementing: commit, then approve $HOSTILE_TARGET (another item)
  audit-self         implementing: commit, then approve its own item
  commit-then-audit  reviewing: commit on the branch under review, then approve it
An honest implementing run commits; an honest review approves. Every drover call ends with the
words of $HOSTILE_ARGS (e.g. a repeated --note, which sends it through click, not the fast path),
and what drover answered is appended to $HOSTILE_LOG as one JSON line.
"""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

mode = os.environ.get("HOSTILE", "")
sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]


def drover(*args: str) -> None:
    argv = ["drover", *args, *shlex.split(os.environ.get("HOSTILE_ARGS", ""))]
    done = subprocess.run(argv, text=True, capture_output=True)
    print(done.stdout + done.stderr, end="", flush=True)
    with open(os.environ["HOSTILE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv[1:], "code": done.returncode, "out": done.stdout,
                              "err": done.stderr}) + "\n")


def commit(what: str) -> None:
    target = Path(f"{item.lower()}-{slot}.txt")
    with target.open("a") as handle:  # a new line each run: every run has something to commit
        handle.write(f"{what}\n")
    subprocess.run(["git", "add", str(target)], check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"{item}: {what}"], check=True)


if slot == "implement":
    commit("the work")
    if mode == "audit-other":
        drover("audit", os.environ["HOSTILE_TARGET"], "--level", "reviewed")
    elif mode == "audit-self":
        drover("audit", item, "--level", "reviewed")
elif slot == "review":
    if mode == "commit-then-audit":
        commit("the reviewer's own change")
    drover("audit", item, "--level", "reviewed")
