"""The worktree pool against fresh worktrees: `drover drive --finish --jobs 2` over 20 items of a
generated 20,000-file repository whose `[run] setup` takes 5 s (docs/performance.md, issue 27).

Both sides start from the same repository: 20,000 tracked files in 200 folders, a `deps.lock`,
20 items. The set-up command records the worktree it ran in and sleeps 5 s; the agent is a shell
script (implement: one file committed; review: `drover audit`). Unpooled, every item gets a new
worktree (`worktree add`, set-up, `worktree remove`); pooled (`[run] pool = 4`, keep `.venv`,
setup_inputs `deps.lock`), items reuse worktrees and set-up runs once per pooled worktree.

Per-item overhead is drive's wall time times the jobs, less the agents' own time (each run's
start to end, as the ledger records it) and the set-up time, over the items: what drover itself
spends per item. The pooled side then drives as many new items again on the pool it kept (its
worktrees filled and set up by the first drive), a pool's state from its second drive on. Each
row also gives the CPU of the drive and all it ran (agents included) over the items, and the git
processes the drive itself started, over the items (not its agents', nor a reviewer's `drover audit`'s).
Nothing asserts; the goals are printed with PASS or MISS.

    python benchmarks/pool_bench.py [--items 20] [--jobs 2] [--files 20000] [--setup 5] [--pool 4] [--keep] [--only pooled]
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from drive_bench import AGENT, ITEM, env, run, span_seconds  # noqa: E402
from prompt_bench import drover_argv  # noqa: E402

SETUP = 'echo "$DROVER_WORKTREE" >> {log}; sleep {seconds}'
GOAL_OVERHEAD = 0.3  # seconds per item, pooled


def make_repo(root: Path, items: int, files: int, environ: dict[str, str], drover: list[str]) -> None:
    root.mkdir(parents=True)
    run(["git", "init", "-q", "-b", "main"], root, environ)
    per_folder = 100
    for n in range(files):
        folder = root / "src" / f"pkg{n // per_folder:03d}"
        if n % per_folder == 0:
            folder.mkdir(parents=True)
        (folder / f"mod{n % per_folder:03d}.py").write_text(f"VALUE = {n}\n")
    (root / "deps.lock").write_text("dependency==1.0\n")
    (root / ".gitignore").write_text(".venv/\n")
    run([*drover, "init"], root, environ)
    agent = root.parent / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    write_items(root, 1, items)


def write_items(root: Path, first: int, count: int) -> None:
    for n in range(first, first + count):
        (root / "items" / f"D-{n}.md").write_text(ITEM.format(n=n))


def add_items(root: Path, environ: dict[str, str], first: int, count: int) -> None:
    write_items(root, first, count)
    run(["git", "add", "items"], root, environ)
    run(["git", "-c", "gc.auto=0", "commit", "-q", "-m", "more items"], root, environ)


def configure(root: Path, environ: dict[str, str], *, pool: int, seconds: float) -> Path:
    log = root.parent / "setup.log"
    config = (root / "drover.toml").read_text()
    config = config.replace('preset = "claude" ', 'preset = "script" ', 1)
    config = config.replace('command = ""  ', f'command = "{root.parent / "agent.sh"}"', 1)
    config = config.replace('setup = ""', f"setup = '{SETUP.format(log=log, seconds=seconds)}'", 1)
    if pool:
        config = config.replace("pool = 0", f"pool = {pool}", 1)
        config = config.replace("keep = []", 'keep = [".venv"]', 1)
        config = config.replace("setup_inputs = []", 'setup_inputs = ["deps.lock"]', 1)
    (root / "drover.toml").write_text(config)
    run(["git", "add", "-A"], root, environ)
    run(["git", "-c", "gc.auto=0", "commit", "-q", "-m", "the repository, its items"], root, environ)
    # packed, as a clone is, and now: an automatic gc detached by the commit would repack the
    # 20,000 loose objects in the background while the drive is timed
    run(["git", "gc", "--quiet"], root, environ)
    return log


LAUNCHER = "drover-launch"  # the name a drover takes once it has launched an agent (agents/procs.py)


def git_time(trace: Path, own: list[int] | None = None) -> dict[str, tuple[int, float]]:
    """From a GIT_TRACE2_EVENT file: git's top-level commands (config options left out) -> (count, seconds).
    `own` gets 1 for each git process the drive itself started after its first launch (its parent is
    the marked launcher, where an agent's is its shell and a reviewer's `drover audit` is `drover`)."""
    names: dict[str, str] = {}
    found: dict[str, tuple[int, float]] = {}
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        sid = event["sid"]
        if "/" in sid:
            continue  # a git run by git
        if event["event"] == "cmd_ancestry" and own is not None and event.get("ancestry", [""])[0] == LAUNCHER:
            own.append(1)
        if event["event"] == "start":
            words, index = event["argv"][1:], 0
            shown = []
            while index < len(words):
                if words[index] == "-c":
                    index += 2
                    continue
                shown.append(words[index])
                index += 1
            names[sid] = " ".join(shown[:2])
        elif event["event"] == "exit":
            name = names.get(sid, "?")
            count, total = found.get(name, (0, 0.0))
            found[name] = (count + 1, total + event["t_abs"])
    return found


def measure(root: Path, log: Path, environ: dict[str, str], drover: list[str], *, jobs: int, items: int,
            seconds: float, first: int = 1) -> dict[str, float]:
    """Drive items D-`first` to D-(`first` + `items` - 1) and take the figures of that drive alone."""
    trace = root.parent / f"git-trace-{first}.json"
    ids = [f"D-{n}" for n in range(first, first + items)]
    before = len(log.read_text().splitlines()) if log.exists() else 0
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([*drover, "drive", "--finish", "--jobs", str(jobs), *ids], cwd=root,
                          env={**environ, "GIT_TRACE2_EVENT": str(trace)}, capture_output=True, text=True)
    wall = time.perf_counter() - start
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ended.ru_utime + ended.ru_stime - used.ru_utime - used.ru_stime  # the drive and all it ran, agents too
    if done.returncode != 0:
        raise SystemExit(f"drive failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    marks = ", ".join("?" * len(ids))
    spans = conn.execute(f"SELECT started, finished FROM runs WHERE item IN ({marks})", ids).fetchall()
    merged = conn.execute(f"SELECT count(*) FROM items WHERE done = 1 AND id IN ({marks})", ids).fetchone()[0]
    conn.close()
    agent = sum(span_seconds(started, finished) for started, finished in spans)
    setups = log.read_text().splitlines()[before:] if log.exists() else []
    setup = len(setups) * seconds
    per_worktree = {path: setups.count(path) for path in set(setups)}
    own: list[int] = []
    gits = git_time(trace, own) if trace.exists() else {}
    print(f"-- {root.parent.name}, items {ids[0]}..{ids[-1]}: git's time by command (every process of the drive, "
          "agents' included)")
    for name, (count, total) in sorted(gits.items(), key=lambda pair: -pair[1][1])[:12]:
        print(f"   {total:7.2f} s  {count:4d} x  git {name}")
    return {"wall": wall, "agent": agent, "runs": len(spans), "setups": len(setups), "setup": setup,
            "worktrees": len(per_worktree), "most": max(per_worktree.values(), default=0),
            "overhead": (wall * jobs - agent - setup) / items, "merged": merged, "cpu": cpu / items,
            "gits": len(own) / items}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--setup", type=float, default=5.0, help="seconds the set-up step sleeps")
    parser.add_argument("--pool", type=int, default=4)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--only", choices=("unpooled", "pooled"), help="measure one side alone")
    args = parser.parse_args()
    drover = drover_argv()
    environ = env(Path(drover[0]).parent)
    work = Path(tempfile.mkdtemp(prefix="drover-pool-bench-"))
    results = {}
    try:
        # the pooled side first: on a machine whose file creation slows as files pile up in the
        # kernel's caches, the unpooled side's 400,000 new files would be charged to the pooled side
        for name, pool in (("pooled", args.pool), ("unpooled", 0)):
            if args.only and name != args.only:
                continue
            root = work / name / "repo"
            make_repo(root, args.items, args.files, environ, drover)
            log = configure(root, environ, pool=pool, seconds=args.setup)
            results[name] = measure(root, log, environ, drover, jobs=args.jobs, items=args.items, seconds=args.setup)
            if pool:  # a second drive of as many new items: the worktrees and their set-up kept
                add_items(root, environ, args.items + 1, args.items)
                results["pooled, kept"] = measure(root, log, environ, drover, jobs=args.jobs, items=args.items,
                                                  seconds=args.setup, first=args.items + 1)
        print(f"items: {args.items}, jobs: {args.jobs}, tracked files: {args.files}, set-up: {args.setup:g} s, "
              f"pool: {args.pool}")
        print(f"{'':<13} {'wall s':>8} {'agents s':>9} {'set-ups':>8} {'worktrees':>10} {'most/wt':>8} "
              f"{'overhead/item s':>16} {'merged':>7} {'cpu/item s':>11} {'drive gits/item':>16}")
        for name, row in results.items():
            print(f"{name:<13} {row['wall']:>8.1f} {row['agent']:>9.1f} {row['setups']:>8.0f} {row['worktrees']:>10.0f} "
                  f"{row['most']:>8.0f} {row['overhead']:>16.2f} {row['merged']:>7.0f} {row['cpu']:>11.2f} {row['gits']:>16.1f}")
        pooled = results.get("pooled")
        if pooled is None:
            return 0
        print(f"pooled overhead per item: {pooled['overhead']:.2f} s (goal: at most {GOAL_OVERHEAD} s) "
              f"{'PASS' if pooled['overhead'] <= GOAL_OVERHEAD else 'MISS'}")
        print(f"set-up runs per pooled worktree: at most {pooled['most']:.0f} (goal: 1) "
              f"{'PASS' if pooled['most'] <= 1 else 'MISS'}")
        kept = results["pooled, kept"]
        print(f"a second drive on the kept pool: {kept['overhead']:.2f} s overhead per item, "
              f"{kept['setups']:.0f} set-ups (its worktrees were filled and set up by the first)")
    finally:
        if args.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
