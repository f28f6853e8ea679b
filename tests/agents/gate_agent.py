#!/usr/bin/env python3
"""A hostile scripted agent for tests/test_gate.py: it does its work, then reaches for drover's own files.

Implementing, it commits `<item>.txt`, then commits what GATE_ATTACK names, each a path
relative to its working directory: `ledger` force-adds a blank `.drover/ledger.db` (the
folder is git-ignored; git treats ignored files as expendable and would merge it over the
real ledger); `hidden-gitlink` commits a gitlink (a submodule's entry, this very commit) at
`.drover/ledger.db` and hides it from git's diffs with `diff.ignoreSubmodules = all` in the shared
`.git/config`, `hidden-gitlink-gitmodules` with `ignore = all` in a `.gitmodules` it leaves in the
main checkout (a merge's checkout makes the entry an empty folder, the ledger gone); any other
word is a path it appends a line to and commits (drover.toml, another item's file, a prompt
override). Reviewing, it approves at once.
"""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


if slot == "review":
    done = subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "looks right"],
                          capture_output=True, text=True)
    print(done.stdout + done.stderr, end="", flush=True)
    sys.exit(done.returncode)

work = Path(f"{item.lower()}.txt")
work.write_text("the work\n")
git("add", str(work))
git("commit", "-q", "-m", f"{item}: the work")
for attack in filter(None, os.environ.get("GATE_ATTACK", "").split(",")):
    if attack == "ledger":
        target = Path(".drover/ledger.db")
        target.parent.mkdir(exist_ok=True)
        sqlite3.connect(target).close()  # a blank database: every run and audit gone, were it merged
        git("add", "-f", str(target))
    elif attack.startswith("hidden-gitlink"):
        here = subprocess.run(["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
        git("update-index", "--add", "--cacheinfo", f"160000,{here},.drover/ledger.db")
        git("commit", "-q", "-m", f"{item}: {attack}")  # before the config: git commit would see nothing to commit
        if attack == "hidden-gitlink":
            git("config", "diff.ignoreSubmodules", "all")
        else:
            Path(os.environ["DROVER_REPO"], ".gitmodules").write_text(
                '[submodule "x"]\n\tpath = .drover/ledger.db\n\turl = ./x\n\tignore = all\n')
        continue
    else:
        target = Path(attack)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as handle:
            handle.write("\n# the agent was here\n")
        git("add", "-f", str(target))
    git("commit", "-q", "-m", f"{item}: {attack}")
print(f"gate agent: {slot} {item}: {os.environ.get('GATE_ATTACK', 'no attack')}", flush=True)
