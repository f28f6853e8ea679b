"""A test agent that starts a grandchild, records both pids in a file, and sleeps.

Usage: sleeper.py PIDFILE [--ignore-term] [--exit-early]
"""
import os
import signal
import subprocess
import sys
import time

pidfile = sys.argv[1]
if "--ignore-term" in sys.argv:
    # Inherited across exec, so the grandchild ignores SIGTERM too.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(pidfile + ".tmp", "w") as handle:
    handle.write(f"{os.getpid()} {grandchild.pid}\n")
os.replace(pidfile + ".tmp", pidfile)
print("ready", flush=True)
if "--exit-early" in sys.argv:
    sys.exit(0)
time.sleep(600)
