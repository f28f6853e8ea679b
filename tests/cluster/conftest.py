"""A real local Ray cluster (a head and a worker node, separate processes) for the ray executor.

`make test-cluster` runs these tests inside a network namespace of their own, where the only
address is 127.0.0.1, with DROVER_TEST_CLUSTER=1. Anywhere else they skip, saying why.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
HEAD_CPUS = 2
WORKER_CPUS = 2


def _skip_reason() -> str:
    if os.environ.get("DROVER_CLUSTER_SKIP"):
        return os.environ["DROVER_CLUSTER_SKIP"]
    if os.environ.get("DROVER_TEST_CLUSTER") != "1":
        return "cluster tests run by `make test-cluster` (a Ray cluster in a network namespace)"
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed in this environment (make test-cluster installs it)"
    return ""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _alive_nodes(address: str, env: dict) -> int:
    code = ("import ray; ray.init(address=%r, logging_level='ERROR', log_to_driver=False); "
            "print(sum(1 for node in ray.nodes() if node['Alive']))" % address)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    try:
        return int(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def _started_in_the_background() -> None:
    """The nodes start with SIGINT ignored, as `nohup ray start ... &` in a script leaves them (a
    background job of a non-interactive shell): Ray cancels a running task, the coordinator's
    Ctrl-C, by interrupting its worker's main thread, and drover's task takes SIGINT back for that
    (executors/ray.py). Whatever SIGINT was where the tests started, the nodes get the hard case."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture(scope="session")
def ray_cluster():
    """The cluster's address; the nodes are `ray start --block` processes, ended at the end."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    port = _free_port()
    address = f"127.0.0.1:{port}"
    # Ray's sockets live under its temp dir, whose path must stay short.
    temp = tempfile.mkdtemp(prefix="rayt", dir="/tmp")
    home = tempfile.mkdtemp(prefix="rayhome")
    Path(home, ".gitconfig").write_text("[user]\n\tname = Test Operator\n\temail = operator@example.invalid\n"
                                        "[init]\n\tdefaultBranch = main\n")
    # The workers' environment: what an agent on a worker node sees (git identity, this venv first).
    env = {key: value for key, value in os.environ.items() if not key.startswith("DROVER_")}
    env.update(HOME=home, GIT_CONFIG_GLOBAL=str(Path(home, ".gitconfig")), GIT_CONFIG_NOSYSTEM="1",
               PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", RAY_USAGE_STATS_ENABLED="0")
    common = ["--block", "--node-ip-address=127.0.0.1", "--disable-usage-stats",
              "--object-store-memory=200000000"]
    logs = Path(temp, "start-logs")
    logs.mkdir()
    nodes = [subprocess.Popen(
        [str(BIN / "ray"), "start", "--head", f"--port={port}", f"--num-cpus={HEAD_CPUS}",
         "--include-dashboard=false", f"--temp-dir={temp}", *common],
        env=env, stdout=open(logs / "head.log", "w"), stderr=subprocess.STDOUT, preexec_fn=_started_in_the_background)]
    try:
        deadline = time.monotonic() + 180
        while _alive_nodes(address, env) < 1:
            assert nodes[0].poll() is None, (logs / "head.log").read_text()
            assert time.monotonic() < deadline, "the head node did not start"
            time.sleep(1)
        nodes.append(subprocess.Popen(
            [str(BIN / "ray"), "start", f"--address={address}", f"--num-cpus={WORKER_CPUS}", *common],
            env=env, stdout=open(logs / "worker.log", "w"), stderr=subprocess.STDOUT, preexec_fn=_started_in_the_background))
        while _alive_nodes(address, env) < 2:
            assert nodes[1].poll() is None, (logs / "worker.log").read_text()
            assert time.monotonic() < deadline, "the worker node did not join"
            time.sleep(1)
        yield {"address": address, "env": env}
    finally:
        for node in reversed(nodes):
            node.terminate()  # `ray start --block` ends its node's processes on SIGTERM
        for node in reversed(nodes):
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                node.kill()
                node.wait()
        shutil.rmtree(temp, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
