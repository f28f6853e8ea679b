"""Every speed and memory goal (issue 25's upper bounds), measured side by side, as a table.

Builds synthetic projects (a real git repository, real item files, a real ledger with ten rows
per item) of 10,000 and 50,000 items in a temporary folder, then times whole `drover`
processes (median of --runs, warm cache unless marked cold) and compares each with
`python -c pass` measured in the same run. A cold figure is the median of three runs, each after
an edit of every item file: of its body (the frontmatter kept: a checkout, review rounds, notes)
or of its frontmatter (every file parsed whole). Peak memory is the child's maximum resident set,
cold, frontmatter edited.
It prints figures and PASS/MISS; nothing here asserts, so a loaded machine fails no test.

Run it with `make bench`, or `python benchmarks/goals_bench.py [--sizes 10000,50000] [--runs N]`;
`--single` times only `--help` and the single-item commands (no list, check or memory rows).
The package's modules are compiled to bytecode first, as an installed wheel has them: with
PYTHONDONTWRITEBYTECODE set, an editable checkout would otherwise compile every module in
every timed process.
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
    "done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)\n"
    "assert done.returncode in (0, 1) and 'Traceback' not in done.stderr, done.stderr[-500:]\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def env() -> dict[str, str]:
    full = {**os.environ, **GIT_ENV}
    full.pop("DROVER_REPO", None)
    return full


CPU: dict[float, float] = {}  # wall median -> CPU (user + sys) median of the same runs


def run_once(argv: list[str], root: Path, stdin: str | None = None) -> tuple[float, float]:
    """One whole process: (wall milliseconds, CPU milliseconds: user + system, the child's own)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=root, input=stdin, capture_output=True, text=True, env=env())
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1) or "Traceback" in done.stderr:
        raise SystemExit(f"failed ({done.returncode}): {' '.join(argv)}\n{done.stderr}")
    return elapsed, (after.ru_utime - used.ru_utime + after.ru_stime - used.ru_stime) * 1000


def timed(argv: list[str], root: Path, runs: int, stdin: str | None = None, before=None) -> float:
    """Median wall milliseconds of `argv` over `runs` (after one untimed warm-up run).

    The median CPU time (user + system, the child's own) is kept in CPU: on a machine other
    work is loading, CPU time says what drover costs, wall time what a user waits.
    """
    times, cpus = [], []
    for n in range(runs + 1):
        if before:
            before()
        elapsed, cpu = run_once(argv, root, stdin)
        if n:
            times.append(elapsed)
            cpus.append(cpu)
    wall = statistics.median(times)
    CPU[wall] = statistics.median(cpus)
    return wall


FLOOR = [sys.executable, "-c", "pass"]


def paired(argv: list[str], root: Path, runs: int, stdin: str | None = None) -> tuple[float, float, float, float]:
    """Medians of `argv` and of `python -c pass`, run in turn (after one untimed run of each):
    (wall, CPU, floor wall, floor CPU) in milliseconds. Their ratio does not drift with the
    machine's speed over the minutes of a bench run, as a ratio to a floor timed once would."""
    walls, cpus, floor_walls, floor_cpus = [], [], [], []
    for n in range(runs + 1):
        floor_wall, floor_cpu = run_once(FLOOR, root)
        wall, cpu = run_once(argv, root, stdin)
        if n:
            walls.append(wall)
            cpus.append(cpu)
            floor_walls.append(floor_wall)
            floor_cpus.append(floor_cpu)
    return tuple(statistics.median(values) for values in (walls, cpus, floor_walls, floor_cpus))  # type: ignore[return-value]


def peak_mb(argv: list[str], root: Path) -> float:
    done = subprocess.run([sys.executable, "-c", MEASURE_RSS, *argv], cwd=root, capture_output=True,
                          text=True, env=env(), check=True)
    return int(done.stdout.strip().splitlines()[-1]) / 1024


def touch_all(root: Path) -> None:
    """Change every item file's mtime, not its bytes (a checkout, a `touch`): the metadata cache
    reads each file again and finds its digest unchanged, so it parses none."""
    stamp = time.time_ns()
    for name in os.listdir(root / "items"):
        os.utime(root / "items" / name, ns=(stamp, stamp))


def edit_all(root: Path) -> None:
    """Change every item file's body (one more newline at its end, which no listing shows), so the
    metadata cache must read every file again: the cold case of a checkout or of edits, where
    the frontmatter stays and only the bodies are read."""
    for name in os.listdir(root / "items"):
        with open(root / "items" / name, "ab") as handle:
            handle.write(b"\n")


BENCH_LINE = b"bench: 1\n"


def edit_fronts(root: Path) -> None:
    """Change every item file's frontmatter (a `bench: 1` line first in it, there one time and
    gone the next), so the metadata cache must parse every file whole: the costliest cold case."""
    for name in os.listdir(root / "items"):
        path = root / "items" / name
        data = path.read_bytes()
        if data.startswith(b"---\n" + BENCH_LINE):
            path.write_bytes(b"---\n" + data[4 + len(BENCH_LINE):])
        elif data.startswith(b"---\n"):
            path.write_bytes(b"---\n" + BENCH_LINE + data[4:])


def compile_package() -> None:
    """Bytecode for drover's modules, as pip writes it for an install (quietly; a read-only tree is fine)."""
    import compileall

    import drover

    compileall.compile_dir(str(Path(drover.__file__).parent), quiet=2)


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
    parser.add_argument("--sizes", default="1,10000,50000")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--single", action="store_true", help="only --help and the single-item commands")
    args = parser.parse_args()
    compile_package()
    sizes = [int(size) for size in args.sizes.split(",")]
    drover = drover_argv()
    folder = Path(tempfile.mkdtemp(prefix="drover-goals-"))
    rows: list[tuple[str, str, str, str]] = []  # goal, figure, ratio/limit, verdict
    print(f"machine: {machine()}")
    try:
        empty = folder / "empty"
        empty.mkdir()
        floor = timed(FLOOR, empty, args.runs * 2)
        print(f"python -c pass: {floor:.0f} ms wall, {CPU[floor]:.0f} ms CPU at the start; each ratio below is to "
              "the python -c pass runs taken in turn with that command's")

        def ratio_row(goal: str, argv: list[str], root: Path, limit: float, stdin: str | None = None) -> None:
            ms, cpu, floor_ms, floor_cpu = paired(argv, root, args.runs * 2, stdin)
            ratio, cpu_ratio = ms / floor_ms, cpu / floor_cpu
            rows.append((goal, f"{ms:.0f} ms / {cpu:.0f} ms", f"{ratio:.1f}x / {cpu_ratio:.1f}x (goal {limit:g}x)",
                         "PASS" if ratio <= limit else ("PASS on CPU" if cpu_ratio <= limit else "MISS")))

        def abs_row(goal: str, value: float, unit: str, limit: float, cpu: float | None = None) -> None:
            figure = f"{value:.{0 if unit == 'MB' else 2}f} {unit}" + (f" / {cpu:.2f} {unit}" if cpu is not None else "")
            verdict = "PASS" if value <= limit else ("PASS on CPU" if cpu is not None and cpu <= limit else "MISS")
            rows.append((goal, figure, f"goal {limit:g} {unit}", verdict))

        ratio_row("drover --help", [*drover, "--help"], empty, 6)
        for count in sizes:
            root = folder / f"p{count}"
            started = time.perf_counter()
            make_project(root, count)
            print(f"built {count} items in {time.perf_counter() - started:.0f} s")
            target = f"D-{count // 2 + 1}"
            n = f"{count:,}"
            if not args.single and count >= 10_000:  # list and check first: the single-item commands then meet a warm cache
                cold_runs = max(1, min(3, args.runs))  # each after its own edit of every file
                cold = timed([*drover, "list"], root, cold_runs, before=lambda: edit_all(root))
                whole = timed([*drover, "list"], root, cold_runs, before=lambda: edit_fronts(root))
                warm = timed([*drover, "list"], root, args.runs)
                touched = timed([*drover, "list"], root, 1, before=lambda: touch_all(root))
                check_cold = timed([*drover, "check"], root, cold_runs, before=lambda: edit_all(root))
                check_whole = timed([*drover, "check"], root, cold_runs, before=lambda: edit_fronts(root))
                check_warm = timed([*drover, "check"], root, args.runs)
                check_touched = timed([*drover, "check"], root, 1, before=lambda: touch_all(root))
            for name, argv, stdin in (
                ("show", ["show", target], None),
                ("prompt", ["prompt", target, "--slot", "implement"], None),
                ("request-changes", ["request-changes", target], FINDINGS),
                ("audit", ["audit", target, "--level", "claimed", "--by", "bench"], None),
                ("new", ["new", "bench item"], None),
            ):
                ratio_row(f"{name} at {n} items", [*drover, *argv], root, 10 if name in ("show", "prompt") else 15, stdin)
            if args.single or count < 10_000:
                if not args.keep:
                    shutil.rmtree(root, ignore_errors=True)
                continue
            if count >= 50_000:
                abs_row(f"list warm at {n}", warm / 1000, "s", 1, CPU[warm] / 1000)
                abs_row(f"list cold at {n} (bodies edited)", cold / 1000, "s", 4, CPU[cold] / 1000)
                abs_row(f"list cold at {n} (frontmatter edited)", whole / 1000, "s", 4, CPU[whole] / 1000)
                abs_row(f"check warm at {n}", check_warm / 1000, "s", 1, CPU[check_warm] / 1000)
                abs_row(f"check cold at {n} (bodies edited)", check_cold / 1000, "s", 4, CPU[check_cold] / 1000)
                abs_row(f"check cold at {n} (frontmatter edited)", check_whole / 1000, "s", 4,
                        CPU[check_whole] / 1000)
                for what, figure in (("list", touched), ("check", check_touched)):
                    rows.append((f"{what} after a touch at {n}", f"{figure / 1000:.2f} s wall, "
                                 f"{CPU[figure] / 1000:.2f} s CPU", "(files read, none parsed; no goal)", ""))
            else:
                for what, w, c, f in (("list", warm, cold, whole), ("check", check_warm, check_cold, check_whole)):
                    rows.append((f"{what} warm / cold (bodies, frontmatter) at {n}",
                                 f"{w:.0f} / {c:.0f} / {f:.0f} ms wall, {CPU[w]:.0f} / {CPU[c]:.0f} / {CPU[f]:.0f} "
                                 "ms CPU", "(no goal at this N)", ""))
            edit_fronts(root)  # the costliest cold case: every file parsed whole
            memory = peak_mb([*drover, "list"], root)
            edit_fronts(root)
            memory = max(memory, peak_mb([*drover, "check"], root))
            abs_row(f"peak memory (list, check, cold) at {n}", memory, "MB", 60 if count <= 10_000 else 150)
            if not args.keep:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        if args.keep:
            print(f"kept: {folder}")
        else:
            shutil.rmtree(folder, ignore_errors=True)
    width = max(len(row[0]) for row in rows)
    print(f"\n{'goal':<{width}}  {'wall / CPU':>24}  {'ratio (wall / CPU) or limit':<30} verdict")
    for goal, figure, limit, verdict in rows:
        print(f"{goal:<{width}}  {figure:>24}  {limit:<30} {verdict}")
    print("\nWall time is what a user waits; CPU time (user + system) is what drover itself costs, and")
    print("stays meaningful when other work loads the machine. 'PASS on CPU': the goal holds for CPU only.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
