"""Root before launch: run --dry-run, check and the launch name claude's refusal under uid 0."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import helpers
from helpers import git

REFUSAL = "claude refuses bypassPermissions as root"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs uid 0 (the detection is unit-tested in test_agents)")


def drover(root: Path, *args: str) -> subprocess.CompletedProcess:
    return helpers.drover(root, *args, env={"IS_SANDBOX": None})


@pytest.fixture
def project(repo, monkeypatch):
    assert drover(repo, "init").returncode == 0
    # A claude that would start: the refusal must come from drover, before any launch.
    fake = repo.parent / "fakebin"
    fake.mkdir()
    (fake / "claude").write_text("#!/bin/sh\necho launched > \"$DROVER_REPO/../launched\"\n")
    (fake / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    assert drover(repo, "new", "A thing").returncode == 0
    return repo


def test_dry_run_check_and_launch_name_the_refusal(project):
    dry = drover(project, "run", "D-1", "--dry-run")
    assert dry.returncode == 0
    notes = [line for line in dry.stdout.splitlines() if REFUSAL in line]
    assert len(notes) == 1 and "[agent] sandboxed = true" in notes[0] and "IS_SANDBOX=1" in notes[0]
    assert "env: IS_SANDBOX" not in dry.stdout  # never set silently
    check = drover(project, "check")
    assert sum(REFUSAL in line for line in (check.stdout + check.stderr).splitlines()) == 1
    launched = drover(project, "run", "D-1")
    assert launched.returncode == 1
    assert launched.stderr.strip().splitlines()[-1].startswith(f"drover: {REFUSAL}")
    assert not (project.parent / "launched").exists()


def test_check_json_codes_the_refusal_as_root_apart_from_a_missing_agent(project):
    problems = json.loads(drover(project, "check", "--json").stdout)["problems"]
    refused = [(problem["code"], problem["severity"]) for problem in problems if REFUSAL in problem["message"]]
    assert refused == [("agent-as-root", "warning")]
    assert "agent-missing" not in {problem["code"] for problem in problems}  # claude is on PATH


def test_sandboxed_passes_is_sandbox_and_says_so(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("sandboxed = false", "sandboxed = true", 1))
    dry = drover(project, "run", "D-1", "--dry-run")
    assert dry.returncode == 0 and "env: IS_SANDBOX=1\n" in dry.stdout and REFUSAL not in dry.stdout
    check = drover(project, "check")
    assert REFUSAL not in check.stdout + check.stderr


def test_a_slot_table_can_say_sandboxed(project):
    config = project / "drover.toml"
    config.write_text(config.read_text() + "\n[agent.review]\nsandboxed = true\n")
    assert "env: IS_SANDBOX=1\n" in drover(project, "review", "D-1", "--dry-run").stdout
    assert REFUSAL in drover(project, "run", "D-1", "--dry-run").stdout
