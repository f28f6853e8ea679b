"""The executor interface, the worker's side without Ray, bundle validation, and the ray switch."""
from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest

from drover.loop import runs
from drover.executors.ray import take_bundle
from drover.ledger.db import Ledger
from drover.ledger.project import open_project
from helpers import InlineExecutor, configure, drover, git, made_once, new_item


@pytest.fixture
def project(repo):
    """drover configured, item D-1 committed (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_executors",), lambda: (configure(repo), new_item(repo, "Add a thing")))
    return repo


def launch_remote(root: Path, slot: str) -> runs.RunResult:
    project = open_project(root)
    with Ledger(project.ledger_path) as ledger:
        launch = runs.prepare(project, ledger, "D-1", slot)
        return runs.execute(project, ledger, launch, echo=False, executor=InlineExecutor())


@pytest.mark.parametrize("odd", ["a folder", "not UTF-8"])
def test_an_items_entry_that_is_no_readable_item_file_stops_no_remote_run(project, odd):
    """The payload carries the item files to the worker: a folder called `notes.md` among them
    failed every remote run as `could not start <agent>: Is a directory`, and a file that is not
    UTF-8 in a traceback. Such an entry is no item file (list calls it unreadable) and stays home."""
    if odd == "a folder":
        (project / "items" / "notes.md").mkdir()
    else:
        (project / "items" / "latin.md").write_bytes(b"caf\xe9\n")
    implemented = launch_remote(project, "implement")
    assert (implemented.outcome, implemented.exit_code, implemented.notes) == ("exited", 0, ())


def test_a_worker_runs_in_a_scratch_clone_and_its_commits_and_verdicts_come_home(project):
    implemented = launch_remote(project, "implement")
    assert (implemented.outcome, implemented.exit_code, implemented.notes) == ("exited", 0, ())
    assert git(project, "log", "-1", "--format=%s", "drover/d-1").strip() == "D-1: pass 1"
    assert (project / ".drover" / "worktrees" / "D-1" / "d-1.txt").read_text() == "pass 1\n"
    reviewed = launch_remote(project, "review")
    assert reviewed.exit_code == 0, Path(reviewed.log_path).read_text()
    shown = drover(project, "show", "D-1", check=True).stdout
    assert "changes requested" in shown
    conn = sqlite3.connect(project / ".drover" / "ledger.db")
    rounds = conn.execute("SELECT number, by FROM rounds").fetchall()
    nodes = conn.execute("SELECT slot, node FROM runs ORDER BY started").fetchall()
    assert rounds == [(1, "reviewer")]  # replayed as the review run's agent
    assert nodes == [("implement", "inline"), ("review", "inline")]
    assert "Pass 1 is not enough" in (project / "items" / "D-1.md").read_text()
    assert "script agent: review D-1" in Path(reviewed.log_path).read_text()
    # second round: implement again, then the review approves
    launch_remote(project, "implement")
    launch_remote(project, "review")
    assert "approved" in drover(project, "show", "D-1", check=True).stdout


def test_a_bundle_that_carries_another_branch_is_refused(project, tmp_path):
    git(project, "branch", "drover/d-1")
    bundle = tmp_path / "evil.bundle"
    git(project, "commit", "-q", "--allow-empty", "-m", "on main")
    git(project, "bundle", "create", "-q", str(bundle), "main")
    before = git(project, "rev-parse", "drover/d-1", "main")
    problem = take_bundle(project, "drover/d-1", bundle.read_bytes())
    assert "only refs/heads/drover/d-1 is taken" in problem and "refs/heads/main" in problem
    assert git(project, "rev-parse", "drover/d-1", "main") == before
    assert take_bundle(project, "drover/d-1", b"not a bundle") != ""


def test_a_bundle_that_does_not_fast_forward_the_branch_is_refused(project, tmp_path):
    git(project, "switch", "-q", "-c", "drover/d-1")
    git(project, "commit", "-q", "--allow-empty", "-m", "here")
    head = git(project, "rev-parse", "HEAD")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project), str(other))
    git(other, "checkout", "-q", "-B", "drover/d-1", "origin/main")
    git(other, "commit", "-q", "--allow-empty", "-m", "there")
    bundle = tmp_path / "b.bundle"
    git(other, "bundle", "create", "-q", str(bundle), "refs/heads/drover/d-1")
    problem = take_bundle(project, "drover/d-1", bundle.read_bytes())
    assert problem.startswith("git merge:")
    assert git(project, "rev-parse", "HEAD") == head


@pytest.mark.skipif(importlib.util.find_spec("ray") is not None, reason="Ray is installed here")
def test_choosing_ray_without_ray_is_one_line_and_exit_2(project):
    done = drover(project, "drive", "--executor", "ray")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["drover: the ray executor needs Ray: pip install 'drover-cli[ray]'"]
    (project / "drover.toml").write_text((project / "drover.toml").read_text()
                                         .replace('executor = "local"', 'executor = "ray"'))
    done = drover(project, "run", "D-1")
    assert done.returncode == 2 and "pip install 'drover-cli[ray]'" in done.stderr
    checked = drover(project, "check")  # a warning: dry runs and the rest of check still work
    assert checked.returncode == 0, checked.stdout
    assert ("warning: drover.toml: [run] executor = \"ray\": the ray executor needs Ray: pip install "
            "'drover-cli[ray]'; run and drive refuse until it is installed") in checked.stdout.splitlines()
    assert not (project / ".drover" / "runs").exists() or not any((project / ".drover" / "runs").iterdir())


def test_drive_dry_run_says_where_each_run_would_go(project):
    new_item(project, "Another")
    done = drover(project, "drive", "--dry-run", check=True)
    assert "  executor: local: runs go to this machine" in done.stdout
    assert "  D-1: implement and review would run on this machine" in done.stdout
    assert "  D-2: implement and review would run on this machine" in done.stdout
    assert not (project / ".drover" / "runs").exists()


@pytest.mark.parametrize("toml, said", [
    ({"run": {"executor": "k8s"}}, "[run] executor: expected one of local, ray, not 'k8s'"),
    ({"executor": {"k8s": {}}}, "[executor.k8s]: unknown table (expected [executor.ray])"),
    ({"executor": {"ray": {"num_cpus": 0}}}, "[executor.ray] num_cpus: expected an integer of at least 1"),
    ({"executor": {"ray": {"runtime_env": "pip"}}}, "[executor.ray] runtime_env: expected a table"),
    ({"executor": {"ray": {"adress": "auto"}}}, "[executor.ray] adress: unknown key (did you mean address?)"),
])
def test_executor_settings_are_checked(toml, said):
    from drover.config import parse_config
    from drover.errors import ConfigError

    with pytest.raises(ConfigError) as raised:
        parse_config(toml)
    assert str(raised.value).endswith(said)


def test_executor_settings_are_read():
    from drover.config import RayConfig, parse_config

    config = parse_config({"run": {"executor": "ray"}, "executor": {"ray": {
        "address": "ray://head:10001", "num_cpus": 4, "runtime_env": {"pip": ["drover-cli[ray]"]}}}})
    assert config.executor == "ray"
    assert config.ray == RayConfig("ray://head:10001", 4, {"pip": ["drover-cli[ray]"]})


def test_a_bundle_that_names_the_branch_twice_is_refused(project, tmp_path):
    """git bundle list-heads gives every line of a bundle's header, and a fetch of the branch takes
    the last: a header naming the branch at a clean commit, then again at one that adds
    .drover/ledger.db, had the first checked for drover's state and the second fetched into the
    branch (hostile review 25)."""
    git(project, "branch", "drover/d-1")  # the checkout stays on main: the bundle's ref is fetched
    before = git(project, "rev-parse", "refs/heads/drover/d-1").strip()
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(project), str(other))
    git(other, "checkout", "-q", "-B", "drover/d-1", "origin/main")
    git(other, "commit", "-q", "--allow-empty", "-m", "clean")
    clean = git(other, "rev-parse", "HEAD").strip()
    (other / ".drover").mkdir(exist_ok=True)
    (other / ".drover" / "ledger.db").write_bytes(b"a ledger of the agent's")
    git(other, "add", "-f", ".drover/ledger.db")
    git(other, "commit", "-q", "-m", "the ledger")
    evil = git(other, "rev-parse", "HEAD").strip()
    made = tmp_path / "made.bundle"
    git(other, "bundle", "create", "-q", str(made), "origin/main..refs/heads/drover/d-1")
    header, _, pack = made.read_bytes().partition(b"\n\n")
    lines = [line for line in header.split(b"\n") if not line[:1].isalnum()]  # signature, prerequisites
    lines += [f"{clean} refs/heads/drover/d-1".encode(), f"{evil} refs/heads/drover/d-1".encode()]
    problem = take_bundle(project, "drover/d-1", b"\n".join(lines) + b"\n\n" + pack)
    assert "refs/heads/drover/d-1 twice" in problem
    assert git(project, "rev-parse", "refs/heads/drover/d-1").strip() == before
