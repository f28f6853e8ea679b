#!/usr/bin/env python3
"""A scripted agent for the pool tests (tests/test_pool.py): a hostile neighbour.

Implementing, it first notes what an earlier holder of its worktree left that it can still see
(one JSON line to $POOL_SEEN), then commits its own `<item>.txt` and leaves litter of every kind
behind: a tracked file changed and not committed, a new file staged, an untracked file, an ignored file, files in
and beside the kept folder `cache/` (and in a nested `cache/` that keep does not name), and a
`.owner` file naming it, which no other item may ever find in its own worktree while this one
runs. POOL_HOSTILE=git: it also points the worktree's `.git` file at a repository of its own;
POOL_HOSTILE=lock: it leaves git's index lock in the worktree's private folder. POOL_HOSTILE=hooks:
it plants hooks in the repository's common hooks folder (post-checkout, post-merge,
pre-merge-commit) that note each run in $POOL_HOOKED (its own commits run none of those), and
leaves no litter. POOL_HOSTILE=config: it names programs of its own in the repository's common
config (a file-system monitor, which git runs for a status, a checkout or a merge; a signing
program, with every commit to be signed), each noting in $POOL_HOOKED whether it ran for an
agent (DROVER_RUN set) or for anyone else, and leaves no litter; its own commits sign nothing.
POOL_HOSTILE=skip-worktree: it marks its changed README skip-worktree (git status then shows no
change) and makes refs of the worktree's own (refs/worktree/*, refs/bisect/*), which the next
holder notes as `refs`. POOL_HOSTILE=kept-index: it does the same to README, then copies its
index over every file in its private git folder that git did not write (where drover kept a copy
of the index it last wrote there). POOL_HOSTILE=commondir: it points the worktree's private git folder at
the common folder of a repository of its own.
Reviewing, it approves.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

prompt = sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
here = Path.cwd()
owner = here / ".owner"
seen_owner = owner.read_text() if owner.exists() else ""
litter = ["README", "staged.txt", "untracked.txt", "ignored.log", "cache/kept.txt", "stray.txt", "src/cache/stray.txt"]
seen = {name: (here / name).read_text() for name in litter if (here / name).exists()}
base_readme = seen.pop("README", "")
refs = subprocess.run(["git", "for-each-ref", "--format=%(refname)", "refs/worktree", "refs/bisect"],
                      capture_output=True, text=True).stdout.split()
with open(os.environ["POOL_SEEN"], "a") as log:
    log.write(json.dumps({"item": item, "slot": slot, "worktree": str(here), "owner": seen_owner,
                          "readme": base_readme, "seen": seen, "refs": refs}) + "\n")
owner.write_text(item)

if slot == "implement":
    target = Path(f"{item.lower()}.txt")
    target.write_text(f"{item}\n")
    subprocess.run(["git", "add", str(target)], check=True)
    hostile = os.environ.get("POOL_HOSTILE")
    unsigned = ["-c", "commit.gpgSign=false"] if hostile == "config" else []
    subprocess.run(["git", *unsigned, "commit", "-q", "-m", f"{item}: done"], check=True)
    if hostile in ("config", "hooks"):  # both plant in the repository's common folder
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute", "--git-common-dir"],
                                capture_output=True, text=True, check=True).stdout.strip()
    if hostile == "config":  # run by whoever's git reads the config next
        config = str(Path(common, "config"))
        for name, key in (("fsmonitor", "core.fsmonitor"), ("gpg", "gpg.program")):
            program = Path(common, f"planted-{name}")
            program.write_text(f'#!/bin/sh\necho "{name} planted by {item} ran for [$DROVER_RUN]" >> '
                               f'"{os.environ["POOL_HOOKED"]}"\nexit 1\n')
            program.chmod(0o755)
            subprocess.run(["git", "config", "--file", config, key, str(program)], check=True)
        subprocess.run(["git", "config", "--file", config, "commit.gpgSign", "true"], check=True)
        sys.exit(0)
    if hostile == "hooks":  # run by whoever's git checks out or merges next
        hooks = Path(common, "hooks")
        hooks.mkdir(exist_ok=True)
        for name in ("post-checkout", "post-merge", "pre-merge-commit"):
            (hooks / name).write_text(f'#!/bin/sh\necho "{name} planted by {item}" >> "{os.environ["POOL_HOOKED"]}"\n')
            (hooks / name).chmod(0o755)
        sys.exit(0)  # no litter: the worktree goes back clean, pooled or not
    (here / "README").write_text(f"changed by {item}\n")
    (here / "untracked.txt").write_text(item)
    (here / "staged.txt").write_text(item)
    subprocess.run(["git", "add", "staged.txt"], check=True)  # in the index, never committed
    (here / "ignored.log").write_text(item)
    (here / "cache").mkdir(exist_ok=True)
    (here / "cache" / "kept.txt").write_text(item)
    (here / "stray.txt").write_text(item)
    (here / "src" / "cache").mkdir(parents=True, exist_ok=True)
    (here / "src" / "cache" / "stray.txt").write_text(item)
    if hostile == "lock":  # git's index lock left behind: no checkout can run
        private = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        Path(private, "index.lock").write_text("")
    if hostile == "git":
        elsewhere = Path(os.environ["POOL_ELSEWHERE"])
        (here / ".git").write_text(f"gitdir: {elsewhere / '.git'}\n")
    if hostile in ("skip-worktree", "kept-index"):
        subprocess.run(["git", "update-index", "--skip-worktree", "README"], check=True)
    if hostile == "kept-index":
        private = Path(subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True, text=True,
                                      check=True).stdout.strip())
        gits = {"index", "HEAD", "ORIG_HEAD", "commondir", "gitdir", "logs", "refs", "config.worktree"}
        for entry in private.iterdir():
            if entry.name not in gits and entry.is_file():
                entry.write_bytes((private / "index").read_bytes())
    if hostile == "skip-worktree":
        for ref in ("refs/worktree/planted", "refs/bisect/bad"):
            subprocess.run(["git", "update-ref", ref, "HEAD"], check=True)
    if hostile == "commondir":
        private = subprocess.run(["git", "rev-parse", "--absolute-git-dir"], capture_output=True, text=True,
                                 check=True).stdout.strip()
        Path(private, "commondir").write_text(f"{Path(os.environ['POOL_ELSEWHERE']) / '.git'}\n")
    sys.exit(0)
done = subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "fine"], capture_output=True, text=True)
print(done.stdout + done.stderr, flush=True)
sys.exit(done.returncode)
