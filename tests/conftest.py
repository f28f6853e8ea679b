"""Every test gets its own real git repository, HOME and environment."""
from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import settings

import helpers

# re-exported: older tests import these from conftest; new ones import from helpers
from helpers import FAKE_GH, FakeGh, git, ledger_tables  # noqa: F401

# No property test has a time limit: speed is measured by benchmarks/, and a loaded machine
# (two pytest processes on two cores) must not turn a slow example into a failure.
settings.register_profile("drover", deadline=None)
settings.load_profile("drover")

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test Operator",
    "GIT_AUTHOR_EMAIL": "operator@example.invalid",
    "GIT_COMMITTER_NAME": "Test Operator",
    "GIT_COMMITTER_EMAIL": "operator@example.invalid",
}


@pytest.fixture(scope="session")
def git_template(tmp_path_factory) -> Path:
    """An empty template folder for `git init`: no sample hooks, a dozen files fewer to write and
    delete per repository (they are inert: *.sample never runs)."""
    return tmp_path_factory.mktemp("git-template")


@pytest.fixture(scope="session")
def compiled_templates(tmp_path_factory) -> Path:
    """The built-in templates compiled once per test process, as jinja's bytecode cache keeps
    them in the user's cache folder (drover/prompts/env.py): each test's HOME starts with a copy,
    as a user's does after their first prompt, so its first render loads them (a millisecond)
    instead of compiling them (50-60 ms a slot). tests/test_template_cache.py, with a cache folder
    of its own, proves what the first compile writes and that a cached render is a compiled one."""
    from drover.prompts import SLOTS
    from drover.prompts import env as template_env

    folder = tmp_path_factory.mktemp("compiled-templates")
    saved = {key: os.environ.pop(key, None) for key in ("XDG_CACHE_HOME", "DROVER_NO_CACHE")}
    os.environ["XDG_CACHE_HOME"] = str(folder)
    try:
        template_env.environment.cache_clear()
        for slot in SLOTS:
            template_env.builtin_template(slot)
    finally:
        template_env.environment.cache_clear()
        for key, value in saved.items():
            os.environ.pop(key, None)
            if value is not None:
                os.environ[key] = value
    kept = folder / "drover" / "jinja"
    assert len(list(kept.iterdir())) == len(SLOTS), "the compiled templates were not cached"
    return kept


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory, monkeypatch, git_template, compiled_templates):
    """No test sees the developer's HOME, caches, git config, colour settings or drover variables."""
    home = tmp_path_factory.mktemp("home")
    shutil.copytree(compiled_templates, home / ".cache" / "drover" / "jinja")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_TEMPLATE_DIR", str(git_template))
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Test Operator\n\temail = operator@example.invalid\n"
        "[init]\n\tdefaultBranch = main\n"
        # no `git maintenance run --auto` after each commit a test makes (1,400 a suite; drover turns it
        # off for its agents' git itself, tests/test_agents.py)
        "[maintenance]\n\tauto = false\n"
    )
    for key, value in GIT_IDENTITY.items():
        monkeypatch.setenv(key, value)
    # no process a test starts leaves bytecode in a test's repository or worktrees (`make test`
    # lets pytest itself keep the test modules' rewritten bytecode: the Makefile)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    for key in list(os.environ):
        if key.startswith("DROVER_") or key in ("NO_COLOR", "FORCE_COLOR"):
            monkeypatch.delenv(key, raising=False)
    # Every process the test starts inherits this mark; any still running afterwards outlived its test.
    token = f"{os.getpid()}-{next(_tokens)}"
    monkeypatch.setenv(LEFT_BEHIND_KEY, token)
    yield
    left = _wait_for_marked(token)
    described = ", ".join(_describe(pid) for pid in left)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # gone now, like a passing test's tmp_path (pyproject's tmp_path_retention_policy): no run
    # leaves thousands of folders for the next one's start to delete
    shutil.rmtree(home, ignore_errors=True)
    if left:
        pytest.fail(f"the test left processes behind: {described}", pytrace=False)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes seconds; run first (see pytest_collection_modifyitems)")


def pytest_collection_modifyitems(items):
    """The longest tests first: the property tests (many examples each) and those marked slow, so
    that under pytest-xdist they start at once, not last while the other processes idle."""
    def long(item) -> bool:
        function = getattr(item, "function", None)
        return getattr(function, "is_hypothesis_test", False) or item.get_closest_marker("slow") is not None

    items.sort(key=lambda item: not long(item))


LEFT_BEHIND_KEY = "DROVER_TEST_MARK"
# multiprocessing's resource tracker is started by the first test that spawns workers and is
# meant to live as long as pytest does: not a process the test left behind.
SESSION_HELPER = b"multiprocessing.resource_tracker"
_tokens = itertools.count(1)


def _marked(token: str) -> list[int]:
    """Running processes marked with this test's token, less pytest's own session helpers."""
    from drover.agents.procs import marked_processes

    found = []
    for pid in marked_processes(LEFT_BEHIND_KEY, token):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if SESSION_HELPER in handle.read():
                    continue
        except OSError:
            continue
        found.append(pid)
    return found


def _wait_for_marked(token: str, patience: float = 10.0) -> list[int]:
    """Processes may be a moment from exiting (a signal in flight): give them that moment."""
    deadline = time.monotonic() + patience
    while (left := _marked(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _describe(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    return f"{pid} ({' '.join(word.decode(errors='replace') for word in words if word)[:80]})"


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`drover demo` run once for the whole test run (three items driven to done with rounds: seconds
    of agents): its folder, which no test changes (copy it), and what it printed. Under pytest-xdist
    the first process to ask runs it in the run's folder; the others wait for it (as test_packaging's wheel)."""
    import fcntl
    import json

    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "demo-run"
    shared.mkdir(exist_ok=True)
    root, said = shared / "demo", shared / "said.json"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not said.exists():
            shutil.rmtree(root, ignore_errors=True)  # what a failed run left
            home = shared / "home"
            home.mkdir(exist_ok=True)
            env = {key: value for key, value in os.environ.items() if not key.startswith("DROVER_")}
            env.update({"PATH": f"{helpers.BIN}{os.pathsep}{os.environ['PATH']}", "HOME": str(home),
                        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "PYTHONDONTWRITEBYTECODE": "1"})
            done = subprocess.run([str(helpers.BIN / "drover"), "demo", str(root)], text=True, capture_output=True,
                                  env=env, timeout=600)
            said.write_text(json.dumps([done.returncode, done.stdout, done.stderr]))
    code, out, err = json.loads(said.read_text())
    return root, subprocess.CompletedProcess(["drover", "demo", str(root)], code, out, err)


@pytest.fixture(scope="session")
def repo_template(tmp_path_factory, git_template) -> Path:
    """The repository `repo` gives, made once per session: a copy costs a few file writes, where
    `git init` and a commit cost three processes."""
    root = tmp_path_factory.mktemp("repo-template") / "project"
    root.mkdir()
    # the session's fixtures come before a test's isolated_env: the same settings, given here
    env = {**os.environ, **GIT_IDENTITY, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
           "GIT_TEMPLATE_DIR": str(git_template)}
    for args in (["init", "-q", "-b", "main"], ["add", "README.md"], ["commit", "-q", "-m", "initial"]):
        if args[0] == "add":
            (root / "README.md").write_text("# project\n")
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    helpers.TEMPLATES[:] = [tmp_path_factory.mktemp("configured")]  # helpers.configure's copies
    return root


@pytest.fixture
def repo(tmp_path, monkeypatch, repo_template) -> Path:
    """A real git repository on branch main with one commit, as the working directory."""
    root = tmp_path / "project"
    shutil.copytree(repo_template, root, symlinks=True)
    helpers.FRESH.clear()
    helpers.FRESH[root] = (helpers.files_state(root), ())
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def gh(repo, tmp_path, monkeypatch) -> FakeGh:
    """The fake gh first on PATH, answering from an empty canned directory."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a copy with the execute bit set, whatever the checkout did to the file's mode, run by this
    # interpreter: `env python3` can find a version manager's shim first on PATH (pyenv's spends
    # 160 ms of CPU choosing a python, each call)
    script = FAKE_GH.read_text(encoding="utf-8").replace("#!/usr/bin/env python3", f"#!{sys.executable}", 1)
    (bin_dir / "gh").write_text(script, encoding="utf-8")
    (bin_dir / "gh").chmod(0o755)
    data = tmp_path / "gh-data"
    data.mkdir()
    log = tmp_path / "gh-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_GH_DATA", str(data))
    monkeypatch.setenv("FAKE_GH_LOG", str(log))
    return FakeGh(data, log)
