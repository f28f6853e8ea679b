"""Calls drover.agents.launch on sleeper.py so a test can send this process SIGINT.

Usage: driver.py WORKDIR. Prints "started PID" once the agent runs, then "outcome OUTCOME CODE".
"""
import sys
from pathlib import Path

from drover.agents import launch

workdir = Path(sys.argv[1])
sleeper = Path(__file__).with_name("sleeper.py")
result = launch(
    [sys.executable, str(sleeper), str(workdir / "pids")], cwd=workdir, env_add={}, prompt="",
    prompt_via="stdin", log_path=workdir / "agent.log", timeout=None, label="D-1 implement",
    echo=False, grace=2.0, on_start=lambda pid: print(f"started {pid}", flush=True),
)
print(f"outcome {result.outcome} {result.exit_code}", flush=True)
