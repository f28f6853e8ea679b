#!/usr/bin/env python3
"""The loop agent, plus one way to hang for the cluster tests.

While the file `hang` exists in the folder given as the first argument, an implement run
writes its own pid and its parent's (the worker process) to `pids` there and waits for the
parent to go away, then exits: killing the worker must not leave this agent behind.
"""
import os
import runpy
import sys
import time
from pathlib import Path

folder = Path(sys.argv[1])
if os.environ.get("DROVER_SLOT") == "implement" and (folder / "hang").exists():
    parent = os.getppid()
    (folder / "pids").write_text(f"{os.getpid()} {parent}")
    while os.getppid() == parent:
        time.sleep(0.1)
    sys.exit(9)
runpy.run_path(str(Path(__file__).with_name("loop_agent.py")), run_name="__main__")
