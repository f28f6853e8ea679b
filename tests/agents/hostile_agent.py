#!/usr/bin/env python3
"""A hostile scripted agent: it does its slot's work, then gives a verdict it has no right to give.

HOSTILE steers it (an unknown or empty value: an honest agent):
  audit-other        implementing: commit, then approve $HOSTILE_TARGET (another item)
  audit-self         implementing: commit, then approve its own item
  leftover           implementing: commit, then leave a process in a session of its own with
                     DROVER_RUN unset, which waits until drover has exited (it is re-parented to
                     init) and then approves the item; its pid goes to $HOSTILE_LOG.pid
  chain              implementing: commit, then leave a growing chain of processes (chain.sh) in a
                     session of its own with DROVER_RUN unset, each link the parent of the next
  fork-chain         implementing: commit, then leave chains in a session of their own with DROVER_RUN
                     unset whose links fork the next and exit at once (each lives for less than a scan
                     of /proc), until its drover is gone; the link left then writes its pid to
                     $HOSTILE_LOG.pid and approves the item (the fork-chain-left mode)
  commit-then-audit  reviewing: commit on the branch under review, then approve it
  unset-run          implementing: commit, then approve its own item with DROVER_RUN unset
  forge-run          implementing: commit, then approve its own item as its earlier review run
  operator           implementing: commit, then run `drover $HOSTILE_COMMAND` (split like a shell), a
                     command that is the operator's: a launch (review, run, drive, verify), finish,
                     unpark, stop or ledger import, with a PATH of its own in front
  double-fork        implementing: commit, then approve its own item from a grandchild that left
                     the agent's process tree (a double fork, DROVER_RUN unset)
  unshare            implementing: commit, then approve its own item from a process namespace of its
                     own (`unshare $HOSTILE_UNSHARE drover audit ...`, DROVER_RUN unset)
An honest implementing run commits; an honest review approves. Every drover call ends with the
words of $HOSTILE_ARGS (e.g. a repeated --note, which sends it through click, not the fast path),
and what drover answered is appended to $HOSTILE_LOG as one JSON line.
"""
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

mode = os.environ.get("HOSTILE", "")
sys.stdin.read()
item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]


def in_the_run(pid: int) -> bool:
    """The process `pid` carries the run's DROVER_RUN; a process gone since getppid() named it does not."""
    try:
        return pid != 1 and b"DROVER_RUN=" in Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False


# Twenty-four chains (a sweep must catch every one). A link forks the next and exits at once: only the
# newest lives, for a moment. Once the drover at argv[1] is gone, the link left runs this script
# (argv[2]) as the fork-chain-left mode.
FORK_CHAIN = """import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core: the rest of a test run keeps the other
for _ in range(23):
    if os.fork() == 0:
        break
while True:
    if os.fork():
        os._exit(0)
    try:
        os.kill(int(sys.argv[1]), 0)
    except ProcessLookupError:
        break
os.execv(sys.executable, [sys.executable, sys.argv[2]])
"""


def drover(*args: str, env: dict | None = None) -> None:
    argv = ["drover", *args, *shlex.split(os.environ.get("HOSTILE_ARGS", ""))]
    done = subprocess.run(argv, text=True, capture_output=True, env=env)
    print(done.stdout + done.stderr, end="", flush=True)
    with open(os.environ["HOSTILE_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps({"argv": argv[1:], "code": done.returncode, "out": done.stdout,
                              "err": done.stderr}) + "\n")


def commit(what: str) -> None:
    target = Path(f"{item.lower()}-{slot}.txt")
    with target.open("a") as handle:  # a new line each run: every run has something to commit
        handle.write(f"{what}\n")
    subprocess.run(["git", "add", str(target)], check=True)
    subprocess.run(["git", "commit", "-q", "-m", f"{item}: {what}"], check=True)


if mode == "leftover-waits":  # the process the leftover mode leaves behind
    Path(os.environ["HOSTILE_LOG"] + ".pid").write_text(str(os.getpid()))
    while int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[1]) != 1:
        time.sleep(0.05)  # until every drover above it is gone
    drover("audit", item, "--level", "reviewed")
elif mode == "fork-chain-left":  # the link of the fork-chain mode's chain that outlived its drover
    Path(os.environ["HOSTILE_LOG"] + ".pid").write_text(str(os.getpid()))
    drover("audit", item, "--level", "reviewed")
elif slot == "implement":
    commit("the work")
    if mode == "audit-other":
        drover("audit", os.environ["HOSTILE_TARGET"], "--level", "reviewed")
    elif mode == "audit-self":
        drover("audit", item, "--level", "reviewed")
    elif mode == "unset-run":
        drover("audit", item, "--level", "reviewed",
               env={key: value for key, value in os.environ.items() if key != "DROVER_RUN"})
    elif mode == "forge-run":
        shown = json.loads(subprocess.run(["drover", "show", item, "--json"], capture_output=True, text=True,
                                          check=True).stdout)
        review = next(run["id"] for run in shown["runs"] if run["slot"] == "review")
        drover("audit", item, "--level", "reviewed", env={**os.environ, "DROVER_RUN": review})
    elif mode == "operator":
        drover(*shlex.split(os.environ["HOSTILE_COMMAND"]),
               env={**os.environ, "PATH": os.environ.get("HOSTILE_PATH", "") + os.pathsep + os.environ["PATH"]})
    elif mode == "unshare":
        unshared = ["unshare", *shlex.split(os.environ["HOSTILE_UNSHARE"]), "drover"]
        argv = [*unshared, "audit", item, "--level", "reviewed"]
        done = subprocess.run(argv, text=True, capture_output=True,
                              env={key: value for key, value in os.environ.items() if key != "DROVER_RUN"})
        with open(os.environ["HOSTILE_LOG"], "a", encoding="utf-8") as log:
            log.write(json.dumps({"argv": argv, "code": done.returncode, "out": done.stdout,
                                  "err": done.stderr}) + "\n")
    elif mode == "double-fork":
        done = Path(os.environ["HOSTILE_LOG"] + ".done")
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while in_the_run(os.getppid()):
                    time.sleep(0.05)  # until the middle process is gone and this one is re-parented
                drover("audit", item, "--level", "reviewed",
                       env={key: value for key, value in os.environ.items() if key != "DROVER_RUN"})
                done.write_text("done")
                os._exit(0)
            os._exit(0)
        os.wait()
        waited = time.monotonic() + 60  # a grandchild that died must not hang the test suite
        while not done.exists() and time.monotonic() < waited:
            time.sleep(0.05)
    elif mode == "chain":
        subprocess.Popen(["sh", str(Path(__file__).with_name("chain.sh"))],
                         env={k: v for k, v in os.environ.items() if k != "DROVER_RUN"}, start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elif mode == "fork-chain":  # in a python of its own with nothing imported: a small process forks fast
        subprocess.Popen([sys.executable, "-S", "-c", FORK_CHAIN, str(os.getppid()), __file__],
                         env={**{k: v for k, v in os.environ.items() if k != "DROVER_RUN"}, "HOSTILE": "fork-chain-left"},
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    elif mode == "leftover":
        subprocess.Popen([sys.executable, __file__], env={**{k: v for k, v in os.environ.items() if k != "DROVER_RUN"},
                                                          "HOSTILE": "leftover-waits"},
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        while not Path(os.environ["HOSTILE_LOG"] + ".pid").exists():
            time.sleep(0.05)
elif slot == "review":
    if mode == "commit-then-audit":
        commit("the reviewer's own change")
    drover("audit", item, "--level", "reviewed")
