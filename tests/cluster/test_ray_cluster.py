"""The ray executor on a real local Ray cluster: the same drive as the local executor, node by node."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from helpers import AGENT, BIN, configure, drover, git, new_item

CLUSTER_AGENT = AGENT.with_name("cluster_agent.py")
ITEMS = 4


def make_project(root: Path, address: str, hang: Path) -> Path:
    configure(root)
    config = (root / "drover.toml").read_text()
    config = config.replace(str(AGENT), f"{CLUSTER_AGENT} {hang}")
    config = config.replace('address = "auto"', f'address = "{address}"')
    (root / "drover.toml").write_text(config)
    git(root, "commit", "-qam", "the cluster agent")
    for number in range(1, ITEMS + 1):
        new_item(root, f"Item number {number}")
    return root


def outcome(root: Path) -> dict:
    """What a drive decided: states, rounds, audits, the merged tree."""
    shown = {}
    for number in range(1, ITEMS + 1):
        item = json.loads(drover(root, "show", f"D-{number}", "--json", check=True).stdout)
        shown[item["id"]] = {
            "state": item["state"],
            "rounds": [(row["number"], row["by"], row["headline"]) for row in item["rounds"]],
            "audits": [(row["level"], row["by"], row["note"]) for row in item["audits"]],
            "files": git(root, "ls-tree", "-r", "--name-only", "main").split(),
        }
    return {"items": shown, "tree": git(root, "rev-parse", "main^{tree}").strip()}


def runs(root: Path) -> list[tuple]:
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    try:
        return conn.execute("SELECT item, slot, node, outcome, exit_status, reason FROM runs ORDER BY started").fetchall()
    finally:
        conn.close()


@pytest.fixture
def hang(tmp_path) -> Path:
    folder = tmp_path / "hang"
    folder.mkdir()
    return folder


def test_a_ray_drive_equals_the_local_drive(ray_cluster, repo, tmp_path, hang):
    project = make_project(repo, ray_cluster["address"], hang)
    local = tmp_path / "local"
    shutil.copytree(project, local, symlinks=True)
    dry = drover(project, "drive", "--executor", "ray", "--dry-run", check=True)
    assert f"  D-1: implement and review would run on the Ray cluster at {ray_cluster['address']}" in dry.stdout
    assert not (project / ".drover" / "runs").exists()
    done = drover(project, "drive", "--executor", "ray", "--jobs", "3", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{ITEMS} of {ITEMS} approved" in done.stdout
    drover(local, "drive", "--executor", "local", "--jobs", "3", "--finish", check=True)
    remote = outcome(project)
    assert remote == outcome(local)
    for number in range(1, ITEMS + 1):
        item = remote["items"][f"D-{number}"]
        assert item["state"] == "done"
        assert [row[1] for row in item["rounds"]] == ["reviewer"]
        assert item["audits"] == [("reviewed", "reviewer", "looks right")]
        assert f"d-{number}.txt" in item["files"]
        assert git(project, "show", f"main:d-{number}.txt") == "pass 1\npass 2\n"
    recorded = runs(project)
    assert len(recorded) == ITEMS * 4  # implement, review, implement, review
    assert all(node and "@127.0.0.1" in node for _, _, node, *_ in recorded), recorded
    assert all(row[3:5] == ("exited", 0) for row in recorded), recorded
    assert {row[2] for row in runs(local)} == {"local"}


def _wait_for(path: Path, process: subprocess.Popen) -> str:
    deadline = time.monotonic() + 120
    while not path.exists() or not path.read_text().strip():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.2)
    return path.read_text()


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            stat = Path(f"/proc/{pid}/stat").read_text()
            if stat.rsplit(")", 1)[-1].split()[0] == "Z":
                return True
        except (ProcessLookupError, FileNotFoundError):
            return True
        time.sleep(0.2)
    return False


def _start_drive(project: Path) -> subprocess.Popen:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.Popen([str(BIN / "drover"), "drive", "D-1", "--executor", "ray"], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_worker_killed_mid_run_leaves_the_run_interrupted_and_the_next_drive_resumes(ray_cluster, repo, hang):
    project = make_project(repo, ray_cluster["address"], hang)
    (hang / "hang").write_text("")
    drive = _start_drive(project)
    agent, worker = map(int, _wait_for(hang / "pids", drive).split())
    os.kill(worker, signal.SIGKILL)
    out, _ = drive.communicate(timeout=300)
    assert drive.returncode == 1, out
    [(item, slot, node, ended, status, reason)] = runs(project)
    assert (item, slot, ended, status) == ("D-1", "implement", "interrupted", None)
    assert reason, "the ledger says why the run ended"
    assert "implement agent interrupted" in out
    assert _gone(agent), "the agent outlived its worker"
    (hang / "hang").unlink()
    again = drover(project, "drive", "D-1", "--executor", "ray")
    assert again.returncode == 0, again.stdout + again.stderr
    first, *later = [(row[1], row[3]) for row in runs(project)]
    # the item is taken up again (how its state reads an interrupted run is the loop's business)
    assert first == ("implement", "interrupted")
    assert ("implement", "exited") in later and all(ended == "exited" for _, ended in later), later
    assert json.loads(drover(project, "show", "D-1", "--json", check=True).stdout)["state"] == "approved"


def test_ctrl_c_on_the_coordinator_cancels_the_remote_run(ray_cluster, repo, hang):
    project = make_project(repo, ray_cluster["address"], hang)
    (hang / "hang").write_text("")
    drive = _start_drive(project)
    agent, _ = map(int, _wait_for(hang / "pids", drive).split())
    drive.send_signal(signal.SIGINT)
    out, _ = drive.communicate(timeout=300)
    assert drive.returncode != 0, out
    assert _gone(agent), "the remote agent kept running after Ctrl-C"
    [(_, _, _, ended, _, reason)] = runs(project)
    assert ended == "interrupted" and reason
