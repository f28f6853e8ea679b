"""`drover drive --finish` over N items with a trivial agent, against the same git work as a shell loop.

Both sides start from the same repository of N items (requirements written, committed). drover
drives every item through implement (the agent commits one file), review (the agent approves
with `drover audit`) and finish (the merge into base, the worktree removed). The shell loop does
the git work alone, item by item: worktree add on a new branch, the same commit, a merge into
base, worktree remove. The ratio is drover's wall time over the loop's. Nothing asserts.

The bench also prints what drover spends outside its agents: the drive's wall time times the
jobs, less each run's start to end as the ledger records it, per item (pool_bench.py's measure).
The agents' own time includes the reviewer's `drover audit`, a whole drover process, which the
goal's ratio counts and this figure does not.

    python benchmarks/drive_bench.py [--items 200] [--jobs 1] [--keep]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from prompt_bench import GIT_ENV, drover_argv  # noqa: E402

# The trivial agent: a shell script, so the agent's own cost is a shell's start, not Python's.
AGENT = """#!/bin/sh
if [ "$DROVER_SLOT" = implement ]; then
  echo done > "$(echo "$DROVER_ITEM" | tr A-Z a-z).txt"
  git add -A && git commit -q -m "$DROVER_ITEM: done"
else
  drover audit "$DROVER_ITEM" --level reviewed --note "looks right"
fi
"""
SHELL_LOOP = """set -e
for n in $(seq 1 "$1"); do
  git worktree add -q -b "loop/d-$n" "wt/d-$n" main
  (cd "wt/d-$n" && echo done > "d-$n.txt" && git add -A && git commit -q -m "D-$n: done")
  git merge -q --no-ff --no-edit "loop/d-$n"
  git worktree remove "wt/d-$n"
done
"""
ITEM = "---\nid: D-{n}\ntitle: Item {n}\n---\n\n## Requirements\n1. Write d-{n}.txt.\n"


def env(bin_dir: Path) -> dict[str, str]:
    full = {**os.environ, **GIT_ENV, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    full.pop("DROVER_REPO", None)
    return full


def run(argv: list[str], cwd: Path, environ: dict[str, str]) -> None:
    subprocess.run(argv, cwd=cwd, env=environ, check=True, capture_output=True, text=True)


def make_repo(root: Path, items: int, environ: dict[str, str], drover: list[str]) -> None:
    root.mkdir(parents=True)
    run(["git", "init", "-q", "-b", "main"], root, environ)
    run([*drover, "init"], root, environ)
    config = (root / "drover.toml").read_text()
    agent = root.parent / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    config = config.replace('preset = "claude" ', 'preset = "script" ', 1)
    config = config.replace('command = ""  ', f'command = "{agent}"', 1)
    (root / "drover.toml").write_text(config)
    for n in range(1, items + 1):
        (root / "items" / f"D-{n}.md").write_text(ITEM.format(n=n))
    run(["git", "add", "-A"], root, environ)
    run(["git", "commit", "-q", "-m", f"{items} items"], root, environ)


def agents_seconds(root: Path) -> float:
    """The agents' own time: every run's start to end, as the ledger records them."""
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    try:
        spans = conn.execute("SELECT started, finished FROM runs").fetchall()
    finally:
        conn.close()

    return sum(span_seconds(start, end) for start, end in spans if start and end)


def span_seconds(start: str, end: str) -> float:
    """Seconds between two of the ledger's timestamps."""
    return (datetime.fromisoformat(end.replace("Z", "+00:00")) -
            datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    drover = drover_argv()
    bin_dir = Path(drover[0]).parent
    environ = env(bin_dir)
    work = Path(tempfile.mkdtemp(prefix="drover-drive-bench-"))
    try:
        make_repo(work / "driven" / "repo", args.items, environ, drover)
        make_repo(work / "looped" / "repo", args.items, environ, drover)
        start = time.perf_counter()
        done = subprocess.run([*drover, "drive", "--finish", "--jobs", str(args.jobs)], cwd=work / "driven" / "repo",
                              env=environ, capture_output=True, text=True)
        driven = time.perf_counter() - start
        if done.returncode != 0:
            # the lines that say what went wrong, wherever they are among 200 items' progress
            said = [line for line in done.stdout.splitlines() if " finished " not in line and (
                "fail" in line or "stopped" in line or "not finished" in line or "no verdict" in line)]
            print(f"drive exited {done.returncode}:", *said[-40:], done.stdout[-600:], done.stderr[-2000:], sep="\n")
            return 1
        merged = subprocess.run(["git", "log", "--oneline", "--merges", "main"], cwd=work / "driven" / "repo",
                                capture_output=True, text=True, env=environ).stdout.count("\n")
        start = time.perf_counter()
        run(["sh", "-c", SHELL_LOOP, "loop", str(args.items)], work / "looped" / "repo", environ)
        looped = time.perf_counter() - start
        print(f"items: {args.items}, jobs: {args.jobs}, merges on main after drive: {merged}")
        print(f"drover drive --finish: {driven:.1f} s ({driven / args.items * 1000:.0f} ms per item)")
        print(f"shell loop, the same git work: {looped:.1f} s ({looped / args.items * 1000:.0f} ms per item)")
        ratio = driven / looped
        print(f"ratio: {ratio:.2f}x (goal: within 1.5x) {'PASS' if ratio <= 1.5 else 'MISS'}")
        agents = agents_seconds(work / "driven" / "repo")
        outside = (driven * args.jobs - agents) / args.items
        print(f"the agents' runs: {agents:.1f} s; drover outside them: {outside * 1000:.0f} ms an item "
              f"({outside / (looped / args.items):.2f}x a loop item; no goal)")
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
