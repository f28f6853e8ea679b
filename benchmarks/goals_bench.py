"""Every speed and memory goal of issue 11, measured side by side, as a table.

Builds synthetic projects (a real git repository, real item files, a real ledger with ten rows
per item) of 10,000 and 50,000 items in a temporary folder, then times whole `drover`
processes (median of --runs, warm cache unless marked cold) and compares each with
`python -c pass` measured in the same run. Peak memory is the child's maximum resident set.
It prints figures and PASS/MISS; nothing here asserts, so a loaded machine fails no test.

Run it with `make bench`, or `python benchmarks/goals_bench.py [--sizes 10000,50000] [--runs N]`.
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from prompt_bench import GIT_ENV, drover_argv, make_project  # noqa: E402

FINDINGS = "## A finding\nThe parser drops a trailing newline.\n"
MEASURE_RSS = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def env() -> dict[str, str]:
    full = {**os.environ, **GIT_ENV}
    full.pop("DROVER_REPO", None)
    return full


def timed(argv: list[str], root: Path, runs: int, stdin: str | None = None, before=None) -> float:
    """Median wall milliseconds of `argv` over `runs` (after one untimed warm-up run)."""
    times = []
    for n in range(runs + 1):
        if before:
            before()
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=root, input=stdin, capture_output=True, text=True, env=env())
        elapsed = (time.perf_counter() - start) * 1000
        if done.returncode not in (0, 1):
            raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr}")
        if n:
            times.append(elapsed)
    return statistics.median(times)


def peak_mb(argv: list[str], root: Path) -> float:
    done = subprocess.run([sys.executable, "-c", MEASURE_RSS, *argv], cwd=root, capture_output=True,
                          text=True, env=env(), check=True)
    return int(done.stdout.strip()) / 1024


def touch_all(root: Path) -> None:
    """Change every item file's mtime, so the metadata cache must parse them all again."""
    stamp = time.time_ns()
    for name in os.listdir(root / "items"):
        os.utime(root / "items" / name, ns=(stamp, stamp))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"{platform.system()} {platform.release()}, load average {load:.1f} at start")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    drover = drover_argv()
    folder = Path(tempfile.mkdtemp(prefix="drover-goals-"))
    rows: list[tuple[str, str, str, str]] = []  # goal, figure, ratio/limit, verdict
    print(f"machine: {machine()}")
    try:
        empty = folder / "empty"
        empty.mkdir()
        floor = timed([sys.executable, "-c", "pass"], empty, args.runs * 2)
        print(f"python -c pass: {floor:.0f} ms (the unit of every ratio below)")

        def ratio_row(goal: str, ms: float, limit: float) -> None:
            ratio = ms / floor
            rows.append((goal, f"{ms:.0f} ms", f"{ratio:.1f}x (goal {limit:g}x)", "PASS" if ratio <= limit else "MISS"))

        def abs_row(goal: str, value: float, unit: str, limit: float) -> None:
            rows.append((goal, f"{value:.{0 if unit == 'MB' else 2}f} {unit}", f"goal {limit:g} {unit}",
                         "PASS" if value <= limit else "MISS"))

        ratio_row("drover --help", timed([*drover, "--help"], empty, args.runs * 2), 3)
        for count in sizes:
            root = folder / f"p{count}"
            started = time.perf_counter()
            make_project(root, count)
            print(f"built {count} items in {time.perf_counter() - started:.0f} s")
            target = f"D-{count // 2 + 1}"
            cold = timed([*drover, "list"], root, 1, before=lambda: touch_all(root))
            warm = timed([*drover, "list"], root, args.runs)
            check_cold = timed([*drover, "check"], root, 1, before=lambda: touch_all(root))
            check_warm = timed([*drover, "check"], root, args.runs)
            n = f"{count:,}"
            for name, argv, stdin in (
                ("show", ["show", target], None),
                ("prompt", ["prompt", target, "--slot", "implement"], None),
                ("request-changes", ["request-changes", target], FINDINGS),
                ("audit", ["audit", target, "--level", "claimed", "--by", "bench"], None),
                ("new", ["new", "bench item"], None),
            ):
                ratio_row(f"{name} at {n} items", timed([*drover, *argv], root, args.runs, stdin=stdin), 8)
            if count >= 50_000:
                abs_row(f"list warm at {n}", warm / 1000, "s", 1)
                abs_row(f"list cold at {n}", cold / 1000, "s", 3)
                abs_row(f"check warm at {n}", check_warm / 1000, "s", 1)
                abs_row(f"check cold at {n}", check_cold / 1000, "s", 3)
            else:
                rows.append((f"list warm / cold at {n}", f"{warm:.0f} / {cold:.0f} ms", "(no goal at this N)", ""))
                rows.append((f"check warm / cold at {n}", f"{check_warm:.0f} / {check_cold:.0f} ms", "(no goal at this N)", ""))
            touch_all(root)
            memory = max(peak_mb([*drover, "list"], root), peak_mb([*drover, "check"], root))
            abs_row(f"peak memory (list, check, cold) at {n}", memory, "MB", 60 if count <= 10_000 else 150)
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    width = max(len(row[0]) for row in rows)
    print(f"\n{'goal':<{width}}  {'figure':>16}  {'ratio / limit':<22} verdict")
    for goal, figure, limit, verdict in rows:
        print(f"{goal:<{width}}  {figure:>16}  {limit:<22} {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
