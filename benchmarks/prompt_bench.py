"""How long one item's prompt takes as the project grows.

Builds two synthetic projects in a temporary folder (a real git repository, real item files,
a real ledger): 1,000 items with 10,000 ledger rows, and 10,000 items with 100,000 ledger
rows. In each it times `drover prompt ID --slot implement` as a whole process, several runs,
and prints the median against the goals: under 250 ms at 10,000 items, and under 1.5x the
1,000-item time. It prints figures; nothing here asserts, so a slow machine fails no test.

Run it with `make bench`, or `python benchmarks/prompt_bench.py [--runs N] [--keep]`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_MS = 250.0
GOAL_RATIO = 1.5
ROWS_PER_ITEM = 10  # 3 runs, 2 rounds, 2 audits, 1 disposition, 2 events
SIZES = (1_000, 10_000)

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}

BODY = """Finding: D-{src} (raised while reviewing D-{src})

## Requirements

1. The parser in `src/module_{n}.py` accepts an empty input and returns an empty result.
2. Errors name the file and the line, as `drover check` does.
3. Nothing else changes: the public functions keep their signatures.

## Guarantees

- Round-tripping a parsed value gives the same bytes.

## Changes requested

The parser still drops a trailing newline on Windows line endings.
"""


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


def item_text(n: int) -> str:
    deps = [f"D-{d}" for d in (n - 1, n // 2) if d >= 1 and d != n]
    front = [f"id: D-{n}", f"title: Synthetic item {n}", f"kind: {'bug' if n % 3 == 0 else 'feature'}",
             f"deps: [{', '.join(dict.fromkeys(deps))}]", f"closes: [{n}]"]
    if n % 7 == 0:
        front.append("migration: yes")
    return "---\n" + "\n".join(front) + "\n---\n\n" + BODY.format(src=max(n - 1, 1), n=n)


def make_project(root: Path, count: int) -> None:
    """A git repository with `count` item files and ROWS_PER_ITEM ledger rows per item."""
    from drover.ledger.connection import now
    from drover.ledger.db import Ledger

    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    (root / "drover.toml").write_text(
        '[project]\nprefix = "D"\n[verify]\ndefault = "make test"\nmigration = "make test && make migrate-check"\n'
    )
    (root / ".gitignore").write_text(".drover/\n")
    items = root / "items"
    items.mkdir()
    for n in range(1, count + 1):
        (items / f"D-{n}.md").write_text(item_text(n))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"{count} items")

    stamp = now()
    runs, rounds, audits, dispositions, events, rows = [], [], [], [], [], []
    for n in range(1, count + 1):
        item = f"D-{n}"
        rows.append({"id": item, "number": n, "created_at": stamp, "done": int(n % 2 == 0), "parked": 0})
        for k, slot in enumerate(("implement", "review", "implement")):
            runs.append({"id": f"{item}-run-{k}", "item": item, "slot": slot, "agent": "claude" if slot == "implement" else "codex",
                         "argv": json.dumps(["claude", "-p"]), "started": stamp, "finished": stamp, "exit_status": 0,
                         "outcome": "exited", "log_path": f".drover/runs/{item}-run-{k}/agent.log",
                         "branch": f"drover/{item.lower()}"})
        for k in (1, 2):
            rounds.append({"item": item, "number": k, "digest": "0" * 64, "headline": f"finding {k} on {item}",
                           "path": "", "by": "codex", "at": stamp, "cleared_at": stamp if k == 1 else None})
        audits.append({"item": item, "level": "claimed", "by": "claude", "note": "", "at": stamp,
                       "authors": json.dumps(["claude"])})
        audits.append({"item": item, "level": "reviewed", "by": "codex", "note": f"reviewed {item}; the cache is fine",
                       "at": stamp, "authors": json.dumps(["claude"])})
        dispositions.append({"item": item, "issue": n, "disposition": "close", "by": "codex", "note": "fixed",
                             "at": stamp, "applied": ""})
        for command in ("request-changes", "audit"):
            events.append({"at": stamp, "command": command, "item": item, "by": "codex", "detail": "{}"})
    with Ledger(root / ".drover" / "ledger.db") as ledger, ledger.write():
        for table, batch in (("items", rows), ("runs", runs), ("rounds", rounds), ("audits", audits),
                             ("dispositions", dispositions), ("events", events)):
            ledger.db[table].insert_all(batch, batch_size=2000)
    assert len(runs) + len(rounds) + len(audits) + len(dispositions) + len(events) == count * ROWS_PER_ITEM


def drover_argv() -> list[str]:
    script = Path(sys.executable).with_name("drover")
    return [str(script)] if script.exists() else [sys.executable, "-m", "drover.cli"]


def prompt_wired(root: Path) -> bool:
    done = subprocess.run([*drover_argv(), "prompt", "--help"], cwd=root, capture_output=True, text=True)
    return done.returncode == 0


def build_argv(item_id: str) -> list[str]:
    """The fallback while `drover prompt` is not wired: build + render in a fresh interpreter."""
    code = (
        "import sys; from drover.ledger.project import open_project; from drover.ledger.db import Ledger;"
        "from drover import prompts as templates; from drover.prompts import data;"
        "p = open_project(); l = Ledger(p.ledger_path);"
        f"d = data.build(p, l, {item_id!r}, 'implement');"
        "sys.stdout.write(templates.render('implement', d, root=p.root, config=p.config).text)"
    )
    return [sys.executable, "-c", code]


def builder_argv(item_id: str, slot: str) -> list[str]:
    """A fresh process that imports everything first, then times one cold `data.build` alone."""
    code = (
        "import sys, time; from drover.ledger.project import open_project; from drover.ledger.db import Ledger;"
        "import drover.git, drover.ledger.status, drover.prompts, drover.trackers; from drover.prompts import data;"
        "p = open_project(); l = Ledger(p.ledger_path); t = time.perf_counter();"
        f"data.build(p, l, {item_id!r}, {slot!r});"
        "print((time.perf_counter() - t) * 1000)"
    )
    return [sys.executable, "-c", code]


def builder_ms(item_id: str, slot: str, root: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        done = subprocess.run(builder_argv(item_id, slot), cwd=root, capture_output=True, text=True, check=True)
        times.append(float(done.stdout.strip()))
    return statistics.median(times)


def median_ms(argv: list[str], root: Path, runs: int) -> tuple[float, int]:
    """Median wall time of `argv` in `root`, and the size of its output (checked once)."""
    env = {**os.environ, **GIT_ENV}
    env.pop("DROVER_REPO", None)
    first = subprocess.run(argv, cwd=root, capture_output=True, text=True, env=env)
    if first.returncode != 0:
        raise SystemExit(f"benchmark command failed ({first.returncode}): {' '.join(argv)}\n{first.stderr}")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, cwd=root, capture_output=True, env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), len(first.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="timed runs per size (median reported)")
    parser.add_argument("--keep", action="store_true", help="keep the synthetic projects and print where")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="drover-bench-"))
    results: dict[int, float] = {}
    try:
        floor_root = folder / "empty"
        floor_root.mkdir()
        floor, _ = median_ms([*drover_argv(), "--version"], floor_root, args.runs)
        print(f"process floor (drover --version): {floor:.0f} ms")
        mode = None
        for count in SIZES:
            root = folder / f"p{count}"
            started = time.perf_counter()
            make_project(root, count)
            built_s = time.perf_counter() - started
            target = f"D-{count // 2 + 1}"
            if mode is None:
                mode = "drover prompt" if prompt_wired(root) else "python -c build+render"
                if mode != "drover prompt":
                    print("note: `drover prompt` is not wired yet; timing build + templates.render in a fresh process")
            argv = [*drover_argv(), "prompt", target, "--slot", "implement"] if mode == "drover prompt" else build_argv(target)
            # Any earlier command (list, check, a run) leaves the metadata cache warm; so does this one.
            subprocess.run([*drover_argv(), "list"], cwd=root, capture_output=True, check=True)
            ms, size = median_ms(argv, root, args.runs)
            results[count] = ms
            print(f"{count:>6} items, {count * ROWS_PER_ITEM:>7} ledger rows (built in {built_s:.1f}s): "
                  f"{mode} {target} --slot implement: median {ms:.0f} ms over {args.runs} runs "
                  f"({size} characters of prompt)")
            # The builder's own share, imports excluded: what grows with the project, if anything.
            parts = ", ".join(f"{slot} {builder_ms(target, slot, root, args.runs):.1f} ms"
                              for slot in ("implement", "review", "draft"))
            print(f"        data.build alone (cold, in a fresh process, after imports): {parts}")
        small, large = results[SIZES[0]], results[SIZES[1]]
        ratio = large / small
        print(f"goal: under {GOAL_MS:.0f} ms at {SIZES[1]} items: {large:.0f} ms "
              f"({'met' if large < GOAL_MS else 'NOT met'})")
        print(f"goal: under {GOAL_RATIO}x the {SIZES[0]}-item time: {ratio:.2f}x "
              f"({'met' if ratio < GOAL_RATIO else 'NOT met'})")
    finally:
        if args.keep:
            print(f"projects kept in {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
