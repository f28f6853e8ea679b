"""Calls drover.agents.launch.launch on sleeper.py so a test can send this process SIGINT or SIGTERM.

Usage: driver.py WORKDIR [SLEEPER ARGS...]. SIGTERM is handled as drover's CLI handles it.
Prints "started PID" once the agent runs, then "outcome OUTCOME CODE".
"""
import os
import signal
import sys
from pathlib import Path

from drover.agents.launch import launch


def terminated(signum, frame):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, terminated)
# Python's own Ctrl-C handler, even when this process was started with SIGINT ignored (a test run
# started in the background by a non-interactive shell): drover's CLI installs its own too (exits.py).
signal.signal(signal.SIGINT, signal.default_int_handler)
workdir = Path(sys.argv[1])
sleeper = Path(__file__).with_name("sleeper.py")
result = launch(
    [sys.executable, str(sleeper), str(workdir / "pids"), *sys.argv[2:]], cwd=workdir,
    # a mark of this driver's own: the end of a run ends every process carrying its mark, and two test
    # processes' temporary folders can share a name (test_x_0 on each xdist worker)
    env_add={"DROVER_RUN": f"driven-{os.getpid()}"}, prompt="",
    prompt_via="stdin", log_path=workdir / "agent.log", timeout=None, label="D-1 implement",
    echo=False, grace=2.0, on_start=lambda pid: print(f"started {pid}", flush=True),
)
print(f"outcome {result.outcome} {result.exit_code}", flush=True)
