"""The hostile agents of tests/test_provenance.py and tests/test_gate.py, on a real Ray cluster:
an agent on a worker is as untrusted as one on this machine, and the gate holds the same way
(docs/security.md). Every test ends with base holding no commit that an independent review did
not approve at that commit, and the ledger keeping every row it had."""
from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

from helpers import TESTS, configure, drover, git, ledger_tables, new_item, one_line

HOSTILE = TESTS / "agents" / "hostile_agent.py"
GATE = TESTS / "agents" / "gate_agent.py"


def set_agent(root: Path, agent: Path, **env: str) -> None:
    """Every slot's command: `agent` under `env` (the command reaches the worker as argv; the
    test's own environment does not), committed so the checkout stays clean for finish."""
    words = " ".join(f"{key}={value}" for key, value in env.items())
    config = (root / "drover.toml").read_text()
    config = re.sub(r'(?m)^command = ".*?"', f'command = "/usr/bin/env {words} {sys.executable} {agent}"', config, count=1)
    (root / "drover.toml").write_text(config)
    git(root, "commit", "-qam", f"agent {agent.name} {words}")


@pytest.fixture
def project(ray_cluster, repo):
    configure(repo)
    config = (repo / "drover.toml").read_text()
    config = config.replace('executor = "local"', 'executor = "ray"', 1)
    config = config.replace('address = "auto"', f'address = "{ray_cluster["address"]}"', 1)
    assert 'executor = "ray"' in config and ray_cluster["address"] in config
    (repo / "drover.toml").write_text(config)
    git(repo, "commit", "-qam", "the ray executor")
    new_item(repo, "The work under attack")
    new_item(repo, "Another item")
    return repo


def shown(root: Path, item_id: str) -> dict:
    return json.loads(drover(root, "show", item_id, "--json", check=True).stdout)


def rows(root: Path) -> dict[str, list[tuple]]:
    return {name: table for name, table in ledger_tables(root / ".drover" / "ledger.db").items()
            if name in ("runs", "audits", "rounds", "items", "events")}


def refused_finish(root: Path, item_id: str) -> str:
    base = git(root, "rev-parse", "main")
    line = one_line(drover(root, "finish", item_id), 1)
    assert git(root, "rev-parse", "main") == base  # nothing merged
    return line


def test_a_reviewer_on_a_worker_that_commits_then_approves_gets_its_commits_refused(project, tmp_path):
    log = tmp_path / "hostile.jsonl"
    set_agent(project, HOSTILE, HOSTILE="commit-then-audit", HOSTILE_LOG=log)
    drover(project, "run", "D-1", check=True)
    started = git(project, "rev-parse", "refs/heads/drover/d-1").strip()
    drover(project, "review", "D-1")
    data = shown(project, "D-1")
    [audit] = data["audits"]
    review = [run for run in data["runs"] if run["slot"] == "review"][-1]
    assert audit["head"] == review["head"] == started  # bound to where the review started
    moved = git(project, "rev-parse", "refs/heads/drover/d-1").strip()
    assert moved != started  # the reviewer's own commit came home
    assert data["state"] == "in review"
    assert "since the approval" in refused_finish(project, "D-1")


def test_an_implementer_on_a_worker_cannot_approve_another_item_or_itself(project, tmp_path):
    log = tmp_path / "hostile.jsonl"
    set_agent(project, HOSTILE, HOSTILE="honest", HOSTILE_LOG=log)
    drover(project, "run", "D-2", check=True)  # implemented, never reviewed
    set_agent(project, HOSTILE, HOSTILE="audit-other", HOSTILE_TARGET="D-2", HOSTILE_LOG=log)
    drover(project, "run", "D-1", check=True)
    assert shown(project, "D-2")["audits"] == []
    assert "no review approved it" in refused_finish(project, "D-2")
    set_agent(project, HOSTILE, HOSTILE="audit-self", HOSTILE_LOG=log)
    drover(project, "run", "D-1", check=True)
    [audit] = shown(project, "D-1")["audits"]
    assert (audit["by"], audit["opens"]) == ("implementer", 0)  # recorded, opens nothing
    assert shown(project, "D-1")["state"] == "in review"
    assert "no review approved it" in refused_finish(project, "D-1")


def test_a_worker_that_force_adds_the_ledger_fails_and_the_ledger_keeps_every_row(project):
    set_agent(project, GATE, GATE_ATTACK="ledger")
    start = git(project, "rev-parse", "main").strip()
    before = rows(project)
    drover(project, "run", "D-1")
    conn = sqlite3.connect(project / ".drover" / "ledger.db")
    try:
        outcome, reason = conn.execute("SELECT outcome, reason FROM runs WHERE slot = 'implement'").fetchone()
    finally:
        conn.close()
    assert outcome == "failed" and ".drover/ledger.db" in reason and "refused" in reason
    assert git(project, "rev-parse", "refs/heads/drover/d-1").strip() == start  # nothing came home
    after = rows(project)
    assert all(set(before[name]) <= set(after[name]) for name in before)
    assert shown(project, "D-1")["state"] == "failed"


def test_an_honest_drive_on_the_cluster_still_merges_with_its_check(project):
    done = drover(project, "drive", "D-1", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert shown(project, "D-1")["state"] == "done"
