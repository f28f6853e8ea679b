"""A test agent that starts a grandchild, records the pids in a file, and sleeps.

Usage: sleeper.py PIDFILE [--ignore-term] [--exit-early] [--escape]
With --escape it also starts a process that leaves its group: a double fork into a new
session (as `setsid cmd &` or a daemon does), whose pid is recorded third.
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
pids = [os.getpid(), grandchild.pid]
if "--escape" in sys.argv:
    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        second = os.fork()
        if second == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)"])
        os.write(write_end, str(second).encode())
        os._exit(0)
    os.waitpid(first, 0)  # the middle process is gone: the escaped one is an orphan
    pids.append(int(os.read(read_end, 32)))
with open(pidfile + ".tmp", "w") as handle:
    handle.write(" ".join(map(str, pids)) + "\n")
os.replace(pidfile + ".tmp", pidfile)
print("ready", flush=True)
if "--exit-early" in sys.argv:
    sys.exit(0)
time.sleep(600)
