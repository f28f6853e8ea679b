"""Token budgets: how soon a run is ended once its stream crosses the ceiling, and what counting
usage costs per line of a claude stream. Nothing asserts.

The latency is measured from the moment a stand-in agent has printed one usage line past its
ceiling (it notes the time, then sleeps) to the moment `launch` returns with its process group
ended: the watch loop's poll (0.2 s) and the SIGTERM. The reading cost is StreamReader.feed over
claude `assistant` events that each carry a new message's usage.

    python benchmarks/budget_bench.py [--runs 5] [--lines 20000]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from drover.agents.launch import launch
from drover.agents.usage import StreamReader


def message(number: int, tokens_in: int) -> str:
    return json.dumps({"type": "assistant", "message": {
        "id": f"msg_{number}", "usage": {"input_tokens": tokens_in, "output_tokens": 1},
        "content": [{"type": "text", "text": "working"}]}})


def kill_latency(runs: int) -> list[float]:
    seen = []
    with tempfile.TemporaryDirectory() as scratch:
        stamp = Path(scratch) / "crossed"
        code = (f"import time; print({message(1, 5000)!r}, flush=True); "
                f"open({str(stamp)!r}, 'w').write(repr(time.time())); time.sleep(300)")
        for number in range(runs):
            result = launch([sys.executable, "-c", code], cwd=Path(scratch), env_add={}, prompt="",
                            prompt_via="stdin", log_path=Path(scratch) / f"run{number}" / "agent.log",
                            timeout=None, label="bench", echo=False, stream="claude", token_ceiling=1000)
            ended = time.time()
            if result.outcome != "over budget":
                raise SystemExit(f"the run was not ended at its ceiling: {result}")
            seen.append(ended - float(stamp.read_text()))
    return seen


def reading_cost(lines: int) -> float:
    events = [message(number, 100) for number in range(lines)]
    reader = StreamReader("claude")
    start = time.perf_counter()
    for line in events:
        reader.feed(line)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", type=int, default=20000)
    args = parser.parse_args()
    latencies = kill_latency(args.runs)
    print(f"budget: usage line past the ceiling -> run ended: median {statistics.median(latencies):.3f} s, "
          f"max {max(latencies):.3f} s over {args.runs} runs")
    spent = reading_cost(args.lines)
    print(f"budget: StreamReader.feed over {args.lines:,} claude message lines with usage: {spent:.3f} s "
          f"({spent / args.lines * 1e6:.1f} us a line)")


if __name__ == "__main__":
    main()
