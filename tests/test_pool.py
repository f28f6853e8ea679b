"""The worktree pool ([run] pool, keep, setup_inputs; docs/worktrees.md): real git, real drover
processes, a scripted agent (tests/agents/pool_agent.py) that litters its worktree."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Callable

import pytest

from drover.agents.locks import ATTACHED
from helpers import AGENT, BIN, TESTS, configure, drover, git, ledger_rows, line_of_key, made_once, new_item

POOL_AGENT = TESTS / "agents" / "pool_agent.py"
HOSTILE_AGENT = TESTS / "agents" / "hostile_agent.py"
INDEX_AGENT = TESTS / "agents" / "index_agent.py"
CONFIG_AGENT = TESTS / "agents" / "config_agent.py"


def set_run(root: Path, **values: str) -> None:
    """Set [run] keys in drover.toml (values as TOML text) and commit."""
    path = root / "drover.toml"
    text = path.read_text()
    for name, value in values.items():
        text, count = re.subn(rf"^{name} = .*$", f"{name} = {value}", text, count=1, flags=re.M)
        assert count == 1, name
    path.write_text(text)
    git(root, "commit", "-qam", "settings")


@pytest.fixture
def pooled(repo, tmp_path, monkeypatch) -> Path:
    """A project whose agent is the littering pool agent, pool = 2, keep = ["cache"], `*.log` ignored
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_pool",), lambda: _pooled(repo))
    monkeypatch.setenv("POOL_SEEN", str(tmp_path / "seen.jsonl"))
    return repo


def _pooled(repo: Path) -> None:
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "README").write_text("base\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base files")
    configure(repo)
    text = (repo / "drover.toml").read_text().replace(str(AGENT), str(POOL_AGENT))
    (repo / "drover.toml").write_text(text)
    set_run(repo, pool="2", keep='["cache"]')


def first_driven(root: Path) -> tuple[str, str]:
    """Items "first" and "second", the first driven and finished (its worktree back in the pool, free);
    their ids. Made once per test process and copied where the project is as the fixture left it
    (helpers.made_once): a copy's $POOL_SEEN holds nothing of the first item's runs."""
    return made_once(root, ("first driven",), lambda: _first_driven(root))


def _first_driven(root: Path) -> tuple[str, str]:
    first, second = new_item(root, "first"), new_item(root, "second")
    done = drive(root, first)
    assert done.returncode == 0, done.stdout + done.stderr
    return first, second


def seen(tmp_path: Path) -> list[dict]:
    path = tmp_path / "seen.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pool_rows(root: Path) -> list[dict]:
    return ledger_rows(root, "worktree_pool", "path")


def drive(root: Path, *args: str, env: dict | None = None, process: bool = False):
    return drover(root, "drive", "--finish", *args, env=env, process=process)


# --- isolation --------------------------------------------------------------------------------


def test_the_next_item_sees_only_what_keep_spares_in_a_reused_worktree(pooled, tmp_path):
    first, second = first_driven(pooled)
    (row,) = pool_rows(pooled)
    assert row["holder"] is None and row["state"] == "free"
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = seen(tmp_path)
    implement = [entry for entry in runs if entry["item"] == second and entry["slot"] == "implement"]
    assert len(implement) == 1
    entry = implement[0]
    # the same worktree as the first item's, reused
    assert entry["worktree"] == str((pooled / row["path"]).resolve())
    # the tracked change is undone, the untracked, ignored and stray files are gone (the nested
    # cache/ too: keep names paths from the worktree's top), the kept folder's file is there
    assert entry["readme"] == "base\n"
    assert entry["seen"] == {"cache/kept.txt": first}
    assert entry["owner"] == ""


# `keep` names paths, not patterns: git reads a clean's excludes as patterns, and `cach*` spared
# cache/, `*` everything an earlier item left
@pytest.mark.parametrize("keep", ["[]", '["cach*", "stray?txt", "untracked.tx[t]"]'], ids=["no keep", "patterns"])
def test_without_keep_nothing_an_item_left_survives(pooled, tmp_path, keep):
    set_run(pooled, keep=keep)
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drive(pooled, first).returncode == 0
    assert drive(pooled, second).returncode == 0
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["seen"] == {} and entry["readme"] == "base\n"


def another_repository(tmp_path: Path) -> Path:
    """A repository of an agent's choosing, with one precious commit, that drover must never touch."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    git(elsewhere, "init", "-q", "-b", "main")
    (elsewhere / "precious.txt").write_text("mine\n")
    git(elsewhere, "add", "-A")
    git(elsewhere, "commit", "-qm", "precious")
    return elsewhere


def test_a_worktree_whose_git_file_an_agent_rewrote_is_discarded_not_reused(pooled, tmp_path, monkeypatch):
    elsewhere = another_repository(tmp_path)
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    done = drive(pooled, first, env={"POOL_HOSTILE": "git", "POOL_ELSEWHERE": str(elsewhere)})
    assert done.returncode == 0, done.stdout + done.stderr
    assert drive(pooled, second).returncode == 0
    # the other repository was never reset or cleaned
    assert (elsewhere / "precious.txt").read_text() == "mine\n"
    assert git(elsewhere, "status", "--porcelain") == ""
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["seen"] == {} and entry["readme"] == "base\n"  # a new worktree: not even the kept folder
    discarded = sqlite3.connect(pooled / ".drover" / "ledger.db").execute(
        "SELECT count(*) FROM events WHERE command = 'pool-discard'").fetchone()[0]
    assert discarded >= 1


def drive_two_planted(pooled: Path, pool: str, hostile: str, hooked: Path, planted: Callable[[], bool]) -> str:
    """Two items driven and finished one after the other (`[run] pool = pool`), each implementing
    agent planting `hostile` (pool_agent.py) after its commit, `planted` true after the first;
    the second item's id."""
    if pool != "2":  # the fixture's
        set_run(pooled, pool=pool)
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    env = {"POOL_HOSTILE": hostile, "POOL_HOOKED": str(hooked)}
    assert drive(pooled, first, env=env).returncode == 0
    assert planted()
    done = drive(pooled, second, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(pooled, "log", "--merges", "--format=%s", "main").count("drover: merge") == 2
    return second


@pytest.mark.parametrize("pool", ["0", "2"])
def test_hooks_an_agent_plants_in_the_shared_git_folder_never_run_for_drovers_git(pooled, tmp_path, pool):
    """The hooks folder is the repository's common one: an agent writes there from its worktree,
    and drover's own checkouts and merges (worktree add, the pool's checkout, the finish's merge)
    would run what it wrote as the operator."""
    hooked = tmp_path / "hooked"
    second = drive_two_planted(pooled, pool, "hooks", hooked, (pooled / ".git" / "hooks" / "post-merge").exists)
    assert not hooked.exists(), hooked.read_text()
    # git itself runs them for anyone else: the plant is live
    git(pooled, "checkout", "-q", "-b", "elsewhere")
    assert hooked.read_text() == "post-checkout planted by " + second + "\n"


@pytest.mark.parametrize("pool", ["0", "2"])
def test_programs_an_agent_names_in_the_shared_git_config_never_run_for_drovers_git(pooled, tmp_path, pool):
    """`.git/config` is the repository's common one too: a file-system monitor an agent names
    there would run at drover's next status, checkout or merge, as the operator; a signing
    program, at a merge commit drover makes."""
    hooked = tmp_path / "hooked"
    second = drive_two_planted(pooled, pool, "config", hooked,
                               lambda: git(pooled, "config", "core.fsmonitor").strip().endswith("planted-fsmonitor"))
    ran = hooked.read_text().splitlines() if hooked.exists() else []
    assert ran and all(not line.endswith("ran for []") for line in ran), ran  # the agents' git ran it, drover's never
    # git itself runs it for anyone else: the plant is live
    git(pooled, "status", "--short")
    assert hooked.read_text().splitlines()[-1] == f"fsmonitor planted by {second} ran for []"


def test_a_worktree_whose_clean_fails_is_discarded_and_the_item_gets_another(pooled, tmp_path):
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drive(pooled, first, env={"POOL_HOSTILE": "lock"}).returncode == 0
    (row,) = pool_rows(pooled)
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["seen"] == {} and entry["readme"] == "base\n"
    conn = sqlite3.connect(pooled / ".drover" / "ledger.db")
    (detail,) = conn.execute("SELECT detail FROM events WHERE command = 'pool-discard'").fetchone()
    assert json.loads(detail)["path"] == row["path"]
    registered = git(pooled, "worktree", "list", "--porcelain")
    assert registered.count("worktree ") == 2  # the main checkout and the one new pooled worktree


def test_a_kept_folder_replaced_by_a_link_is_removed(pooled, tmp_path):
    first, second = first_driven(pooled)
    (row,) = pool_rows(pooled)
    worktree = pooled / row["path"]
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "kept.txt").write_text("planted\n")
    import shutil

    shutil.rmtree(worktree / "cache")
    (worktree / "cache").symlink_to(outside)
    assert drive(pooled, second).returncode == 0
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert "cache/kept.txt" not in entry["seen"]
    assert (outside / "kept.txt").read_text() == "planted\n"  # removed the link, not what it named


def test_checks_run_in_pooled_worktrees_cleaned_like_the_items(pooled, tmp_path):
    # the verify command fails when an earlier check's litter is there, and leaves its own
    path = pooled / "drover.toml"
    path.write_text(re.sub(r'^default = ""', 'default = "test ! -e check-litter && touch check-litter"',
                           path.read_text(), count=1, flags=re.M))
    git(pooled, "commit", "-qam", "a verify command")
    items = [new_item(pooled, f"item {n}") for n in range(3)]
    for item in items:
        done = drive(pooled, item)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "check passed" in done.stdout
    conn = sqlite3.connect(pooled / ".drover" / "ledger.db")
    assert conn.execute("SELECT count(*) FROM checks WHERE exit_status = 0").fetchone()[0] == 3
    assert conn.execute("SELECT count(*) FROM rounds").fetchone()[0] == 0
    rows = pool_rows(pooled)
    assert len(rows) == 2 and {row["state"] for row in rows} == {"free"}  # an item's and a check's, reused
    assert not (pooled / ".drover" / "checks").exists() or not any((pooled / ".drover" / "checks").iterdir())
    # each check's log names the pooled worktree it ran in, not a scratch folder it never made
    for check in conn.execute("SELECT log_path FROM checks").fetchall():
        first = (pooled / check[0]).read_text().splitlines()[0]
        assert first.endswith(tuple(f" in {pooled / row['path']}" for row in rows)), first


# --- a worktree none can have ----------------------------------------------------


def test_a_missing_base_branch_is_said_once_as_without_a_pool(pooled):
    set_run(pooled, base='"nonexistent"')
    item = new_item(pooled, "first")
    pooled_run = drover(pooled, "run", item)
    set_run(pooled, pool="0")
    plain_run = drover(pooled, "run", item)
    assert pooled_run.returncode == plain_run.returncode == 2
    assert pooled_run.stderr == plain_run.stderr
    assert pooled_run.stderr.splitlines() == [f"drover: base branch 'nonexistent' does not exist in {pooled}: "
                                              "check [run] base in drover.toml"]
    assert pool_rows(pooled) == []


# --- set-up only when its inputs change ----------------------------------------------------------


def test_setup_runs_again_only_when_a_setup_input_changed(pooled, tmp_path):
    log = tmp_path / "setup-runs.log"
    (pooled / "deps.lock").write_text("one\n")
    git(pooled, "add", "deps.lock")
    git(pooled, "commit", "-qm", "lock")
    set_run(pooled, pool="1", setup=f'"echo ran >> {log}"', setup_inputs='["deps.lock"]')
    items = [new_item(pooled, f"item {n}") for n in range(3)]
    assert drive(pooled, items[0]).returncode == 0
    assert log.read_text().count("ran") == 1
    assert drive(pooled, items[1]).returncode == 0
    assert log.read_text().count("ran") == 1  # same inputs, same worktree: no set-up
    (pooled / "deps.lock").write_text("two\n")
    git(pooled, "commit", "-qam", "lock changed")
    done = drive(pooled, items[2])
    assert done.returncode == 0
    assert log.read_text().count("ran") == 2
    # and it says why it runs again: which of its inputs changed (a new user's set-up ran again, an
    # install of minutes, saying only that one of them had)
    assert f"{items[2]}: [run] setup (deps.lock changed since it ran in this worktree) ..." in done.stdout + done.stderr
    (row,) = pool_rows(pooled)
    assert row["setup_at"] and row["setup_digest"]
    set_run(pooled, pool="1", setup=f'"echo ran again >> {log}"', setup_inputs='["deps.lock"]')
    later = new_item(pooled, "item 3")
    done = drive(pooled, later)
    assert done.returncode == 0 and log.read_text().count("ran") == 3
    assert f"{later}: [run] setup (the set-up command changed since it ran in this worktree) ..." in done.stdout + done.stderr


def test_a_server_a_finished_setup_started_is_not_taken_for_the_orphan_of_a_killed_drover(pooled, tmp_path):
    """Hostile review 48: a set-up may start a server that outlives it by design and serves every
    worktree (a Gradle daemon, a compiler cache's server: started once, shared by user), and it
    carries the set-up's DROVER_SETUP. The next set-up in that worktree ended it, saying a killed
    drover had left it running, under the builds of every other worktree that used it. Only what a
    set-up its drover never saw end left running is an orphan."""
    log, pidfile = tmp_path / "setup-runs.log", tmp_path / "server.pid"
    (pooled / "deps.lock").write_text("one\n")
    git(pooled, "add", "deps.lock")
    git(pooled, "commit", "-qm", "lock")
    # the server starts with the first set-up and is shared by every later one, wherever it runs
    # (in a session of its own before the set-up exits, as a daemon is: the set-up's group is ended then)
    setup = (f"[ -e {pidfile} ] || {{ setsid sh -c 'echo $$ > {pidfile}.new; exec sleep 120' </dev/null >/dev/null 2>&1 & "
             f"while [ ! -s {pidfile}.new ]; do sleep 0.01; done; mv {pidfile}.new {pidfile}; }}; echo ran >> {log}")
    set_run(pooled, pool="1", setup=json.dumps(setup), setup_inputs='["deps.lock"]')
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drive(pooled, first).returncode == 0
    server = int(pidfile.read_text())
    try:
        assert _still_runs(server)
        (pooled / "deps.lock").write_text("two\n")
        git(pooled, "commit", "-qam", "lock changed")
        done = drive(pooled, second)
        assert done.returncode == 0, done.stdout + done.stderr
        assert log.read_text().count("ran") >= 2  # the set-up ran again in the same worktree
        assert "a killed drover left running" not in done.stdout + done.stderr
        assert _still_runs(server)
    finally:
        os.kill(server, signal.SIGKILL)


def test_a_setup_input_an_agent_made_a_sparse_file_of_gigabytes_is_not_read_whole(pooled, tmp_path):
    """Hostile review 38: the implementer truncates its lockfile to 64 GB (sparse: no disk used);
    the item's next run in the worktree hashed it whole for its set-up digest, a minute a 64 GB and
    hours a few terabytes, no timeout on drover's own read. It now counts by size and times past
    INPUT_BYTES: the set-up runs again at once, as for any changed input."""
    log = tmp_path / "setup-runs.log"
    (pooled / "deps.lock").write_text("one\n")
    git(pooled, "add", "deps.lock")
    git(pooled, "commit", "-qm", "lock")
    set_run(pooled, pool="1", setup=f'"echo ran >> {log}"', setup_inputs='["deps.lock"]')
    item = new_item(pooled, "one")
    assert drover(pooled, "run", item).returncode == 0
    (row,) = pool_rows(pooled)
    os.truncate(pooled / row["path"] / "deps.lock", 64 << 30)
    started = time.monotonic()
    done = drover(pooled, "run", item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert time.monotonic() - started < 20
    assert log.read_text().count("ran") == 2


def test_a_setup_that_failed_leaves_no_half_made_kept_folder_to_the_next(pooled, tmp_path):
    """A set-up killed or failed half-way left a `.venv` without its `bin/pip` in a kept folder, and
    `python -m venv .venv` passed over it at every later set-up there: the worktree was poisoned
    for good (a new user, on attrs). A set-up where the last one did not end well starts without
    the kept paths; one that ended well keeps them when the inputs change."""
    log = tmp_path / "setup.log"
    fail = tmp_path / "fail-once"
    fail.write_text("")
    script = tmp_path / "setup.sh"
    script.write_text(f"if [ -e .venv ]; then echo found >> {log}; else echo fresh >> {log}; fi\n"
                      f"mkdir -p .venv && touch .venv/half\nif [ -e {fail} ]; then rm {fail}; exit 1; fi\n"
                      "touch .venv/whole\n")
    (pooled / "deps.lock").write_text("one\n")
    git(pooled, "add", "deps.lock")
    git(pooled, "commit", "-qm", "lock")
    set_run(pooled, pool="1", setup=f'"sh {script}"', keep='[".venv"]', setup_inputs='["deps.lock"]')
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    failed = drive(pooled, first)
    assert failed.returncode != 0 and log.read_text().splitlines() == ["fresh"], failed.stdout + failed.stderr
    done = drive(pooled, first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert log.read_text().splitlines() == ["fresh", "fresh"]  # the half-made .venv was not there
    said = done.stdout.splitlines()
    assert f"{first}: [run] setup ..." in said and any(line.startswith(f"{first}: [run] setup done in ") for line in said)
    (pooled / "deps.lock").write_text("two\n")
    git(pooled, "commit", "-qam", "lock changed")
    assert drive(pooled, second).returncode == 0
    assert log.read_text().splitlines() == ["fresh", "fresh", "found"]  # ended well: kept as it was


def test_what_setup_leaves_outside_keep_is_warned_of_and_a_changed_keep_sets_each_worktree_up_again(pooled, tmp_path):
    """Set-up that made a file outside `keep` lost it at the next clean, while the worktree still
    counted as set up (the digest covered the command and setup_inputs only): nothing said so, and
    putting the file into `keep` afterwards did not run set-up again. Now a set-up that ran names
    what the next clean removes, and `keep` is part of the digest."""
    log = tmp_path / "setup-runs.log"
    odd = "evil\x1b[2Jname"  # set-up runs what the branch holds: a name may be an agent's
    script = tmp_path / "setup.sh"
    script.write_text(f"echo ran >> {log}; mkdir -p cache; touch cache/kept .ready \"$(printf 'evil\\033[2Jname')\"\n")
    set_run(pooled, pool="1", setup=f'"sh {script}"')
    items = [new_item(pooled, f"item {n}") for n in range(3)]
    first = drive(pooled, items[0])
    assert first.returncode == 0, first.stdout + first.stderr
    (warned,) = [line for line in first.stdout.splitlines() if "warning: after [run] setup" in line]
    assert warned.startswith(f"{items[0]}: warning: after [run] setup, .drover/pool/w1 holds ")
    assert ".ready" in warned and "evil" in warned and "cache" not in warned and "the next clean removes them" in warned
    assert "\x1b" not in first.stdout and odd not in warned
    second = drive(pooled, items[1])
    assert second.returncode == 0 and log.read_text().count("ran") == 1  # as documented: set up already
    assert "warning: after [run] setup" not in second.stdout
    set_run(pooled, keep='["cache", ".ready"]')
    third = drive(pooled, items[2])
    assert third.returncode == 0, third.stdout + third.stderr
    assert log.read_text().count("ran") == 2  # keep changed: set-up ran again in the worktree
    (warned,) = [line for line in third.stdout.splitlines() if "warning: after [run] setup" in line]
    assert "evil" in warned and ".ready" not in warned and "the next clean removes it," in warned


def test_a_check_of_base_without_what_setup_left_outside_keep_names_the_set_up_not_base(pooled):
    """A set-up that makes build/ outside `keep`: the next check in that pooled worktree finds it gone
    and fails, and so does base's own check there, so the drive said "mend main", while the warning
    after set-up went only to an earlier drive's output. Now the advice names the set-up as the
    likelier cause, from the warning kept with the set-up's event."""
    set_run(pooled, pool="4", setup='"mkdir -p build && echo fresh > build/stamp"', default='"test -f build/stamp"')
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drive(pooled, first).returncode == 0  # set-up ran for its check: build/ was there
    done = drover(pooled, "drive", second)
    assert done.returncode == 1 and f"{second}: checking main itself" in done.stdout, done.stdout
    (row,) = [line for line in done.stdout.splitlines() if line.startswith(f"{second} ") and " failed " in line]
    assert "fails on main itself too" in row and "mend main" not in row, row
    assert "the likelier cause is [run] setup, not main: after [run] setup, .drover/pool/" in row, row
    assert "holds build/ outside [run] keep" in row and "add what set-up makes to [run] keep" in row, row
    # the item's own failed check said so as it failed, not only in its log (its round went to the
    # implementer as if the work had broken the tests: a new user, on wcwidth)
    lines = done.stdout.splitlines()
    failed = lines.index(next(line for line in lines if line.startswith(f"{second}: check failed (test -f")))
    assert lines[failed + 1].startswith(f"{second}: the check ran without what an earlier [run] setup made there: "
                                        "after [run] setup, .drover/pool/"), lines[failed:failed + 2]
    (of_base,) = [check for check in ledger_rows(pooled, "checks") if check["head"] == check["base"]]
    assert "# [run] setup ran here before, not for this check: after [run] setup" in \
        (pooled / of_base["log_path"]).read_text()


def test_with_a_check_a_pool_of_two_a_job_sets_each_worktree_up_once_and_a_smaller_one_is_warned(pooled, tmp_path):
    log = tmp_path / "setup-runs.log"
    set_run(pooled, pool="1", setup=f'"pwd >> {log}"', default='"true"')  # [verify] default: a check that passes
    items = [new_item(pooled, f"item {n}") for n in range(3)]
    small = drive(pooled, items[0])
    assert small.returncode == 0, small.stdout + small.stderr
    assert "warning: [run] pool = 1 is under two worktrees a job (2 for --jobs 1)" in small.stdout
    # each set-up says whose worktree it readies: the item's own, or the one drover's check takes
    said = small.stdout.splitlines()
    assert f"{items[0]}: [run] setup ..." in said and f"{items[0]}: [run] setup for drover's check ..." in said
    set_run(pooled, pool="2")
    log.unlink()
    done = drive(pooled, *items[1:])
    assert done.returncode == 0 and "warning: [run] pool" not in done.stdout
    # the item's worktree and its check's: each set up once, kept for the next item and its check
    ran = log.read_text().splitlines()
    assert len(ran) <= 2 and len(ran) == len(set(ran)), ran
    assert len(pool_rows(pooled)) == 2


def test_a_pool_under_two_a_job_is_warned_of_when_keep_alone_spares_a_build(pooled):
    """A cargo crate keeps `target/` and needs no set-up (`cargo test` builds it): with pool = 2
    and --jobs 2 each check took a worktree it could not keep and compiled the crate afresh, and
    the drive's header said nothing, since the warning looked at [run] setup alone."""
    set_run(pooled, pool="1", default='"true"')  # keep = ["cache"], no [run] setup
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    small = drive(pooled, first)
    assert small.returncode == 0, small.stdout + small.stderr
    assert ("warning: [run] pool = 1 is under two worktrees a job (2 for --jobs 1): an item and drover's check "
            "of it each hold one, so checks would start without what [run] keep spares and build it again for "
            "every item; set pool = 2") in small.stdout
    set_run(pooled, pool="2")
    done = drive(pooled, second)
    assert done.returncode == 0 and "warning: [run] pool" not in done.stdout


# --- a kill in the middle of a clean ---------------------------------------------------------------


def test_a_worktree_a_killed_drover_left_half_cleaned_is_discarded_by_the_next_drive(pooled, tmp_path):
    first, second = first_driven(pooled)
    (row,) = pool_rows(pooled)
    killed = drive(pooled, second, env={"DROVER_FAILPOINT": "pool-cleaning"}, process=True)
    assert killed.returncode == -9
    (left,) = pool_rows(pooled)
    assert left["state"] == "cleaning" and left["holder"] == second
    worktree = pooled / row["path"]
    assert (worktree / "untracked.txt").exists()  # killed before the clean: the litter is there
    listed = drover(pooled, "worktrees", "--json", check=True)
    assert json.loads(listed.stdout)["worktrees"][0]["state"] == "cleaning"
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    # discarded and made again: nothing of the first item's, not even its kept folder
    assert entry["seen"] == {} and entry["readme"] == "base\n"
    events = sqlite3.connect(pooled / ".drover" / "ledger.db").execute(
        "SELECT detail FROM events WHERE command = 'pool-discard'").fetchall()
    assert [json.loads(detail)["path"] for (detail,) in events] == [row["path"]]


# --- --jobs ---------------------------------------------------------------------------------------


def test_jobs_two_never_put_two_items_in_one_worktree(pooled, tmp_path):
    items = [new_item(pooled, f"item {n}") for n in range(6)]
    done = drive(pooled, "--jobs", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    entries = seen(tmp_path)
    assert {entry["item"] for entry in entries} == set(items)
    # the agent writes .owner in its worktree and reports any it finds: only its own, ever
    assert all(entry["owner"] in ("", entry["item"]) for entry in entries), entries
    conn = sqlite3.connect(pooled / ".drover" / "ledger.db")
    runs = conn.execute("SELECT item, worktree, started, finished FROM runs ORDER BY started").fetchall()
    spans: dict[str, dict[str, list[str]]] = {}
    for item, worktree, started, finished in runs:
        span = spans.setdefault(worktree, {}).setdefault(item, [started, finished])
        span[0], span[1] = min(span[0], started), max(span[1], finished)
    for worktree, held in spans.items():
        ordered = sorted(held.values())
        for before, after in zip(ordered, ordered[1:]):
            assert before[1] <= after[0], (worktree, held)
    assert len(spans) >= 2 and len({entry["worktree"] for entry in entries}) <= 2 + 1


def test_a_check_worktree_a_killed_drover_left_is_discarded_by_its_holder_alone_while_another_job_takes_one(
        pooled, monkeypatch):
    # a drive killed in D-1's check leaves the check's worktree held by a dead drover; the next
    # drive's D-1 job discards it while another job's check claims a worktree at that moment: the
    # other once took that very row (its holder dead), and D-1's discard removed it from under it
    # (a new user on tkem/cachetools: a FileNotFoundError, then `w1 already exists`)
    import threading

    from drover.ledger.db import Ledger
    from drover.ledger.project import open_project
    from drover.loop import pool

    monkeypatch.chdir(pooled)
    project = open_project()
    head = git(pooled, "rev-parse", "HEAD").strip()
    with Ledger(project.ledger_path) as ledger:
        killed = pool.acquire(project, ledger, pool.check_holder("D-1"), commit=head)
        ledger.set_pooled(project.relpath(killed), pid=1 << 30, pid_start="")  # above any pid_max: no process
        assert not pool.holder_alive(ledger.pool_rows()[0])
    claimed, taken, jobs = threading.Event(), [], []
    claim, discard = Ledger.claim_pooled, pool.discard_worktree

    def claim_and_say(self, holder, *args, **kwargs):
        row = claim(self, holder, *args, **kwargs)
        if holder == pool.check_holder("D-2"):
            claimed.set()
        return row

    def another_job_takes() -> None:
        with Ledger(project.ledger_path) as ledger:
            taken.append(pool.acquire(project, ledger, pool.check_holder("D-2"), commit=head))

    def discard_as_another_job_claims(root: Path, worktree: Path) -> None:
        if not claimed.is_set():
            jobs.append(threading.Thread(target=another_job_takes))
            jobs[0].start()
            assert claimed.wait(60)
        discard(root, worktree)

    monkeypatch.setattr(Ledger, "claim_pooled", claim_and_say)
    monkeypatch.setattr(pool, "discard_worktree", discard_as_another_job_claims)
    with Ledger(project.ledger_path) as ledger:
        mine = pool.acquire(project, ledger, pool.check_holder("D-1"), commit=head)
        jobs[0].join(60)
        (other,) = taken
        assert mine != other and mine.is_dir() and other.is_dir()
        assert {row.holder: project.root / row.path for row in ledger.pool_rows()} == {
            "D-1:check": mine, "D-2:check": other}

# --- drover worktrees and prune ---------------------------------------------------------------------


def test_drover_run_says_when_its_setup_starts_and_ends(pooled, tmp_path):
    """`drover run` printed nothing while a 19 s set-up ran, then `exited 0 after 0.1s` (a new user,
    on attrs): the set-up's start and end are progress lines, before the run's own."""
    set_run(pooled, setup='"sleep 0.2"')
    item = new_item(pooled, "one")
    done = drover(pooled, "run", item, check=True, process=True)
    said = done.stdout.splitlines()
    assert said[0] == f"{item}: [run] setup ..." and said[1].startswith(f"{item}: [run] setup done in "), done.stdout
    assert said[2].startswith(f"{item}: implement run ")


def test_a_later_run_in_the_worktree_an_item_holds_is_its_last_use(pooled):
    """`drover worktrees` said `used 6m` of a worktree whose item's second run had started in it two
    minutes before: only taking a worktree wrote `used`, not an item's later runs in the one it
    holds (a new user, on attrs)."""
    item = new_item(pooled, "one")
    drover(pooled, "run", item, check=True)
    (row,) = pool_rows(pooled)
    with sqlite3.connect(pooled / ".drover" / "ledger.db") as db:  # as if it ran ten minutes ago
        db.execute("UPDATE worktree_pool SET used = '2026-01-01T00:00:00.000Z'")
    drover(pooled, "run", item, check=True)
    (again,) = pool_rows(pooled)
    assert again["path"] == row["path"] and again["used"] > row["used"]
    shown = drover(pooled, "worktrees", check=True).stdout
    assert shown.splitlines()[1].split()[-1].endswith("s"), shown  # used seconds ago


def test_an_item_goes_on_in_its_worktree_whose_git_file_names_its_folder_by_a_relative_path(pooled):
    """git reads a relative `gitdir:` in a worktree's `.git` from the worktree (git 2.48 writes one so
    with worktree.useRelativePaths), and so does the pool's fitness check; the check that an item's
    held worktree is still on its branch read it from drover's own folder instead, found no HEAD, and
    refused the item's next run there as on "a detached HEAD"."""
    item = new_item(pooled, "relative")
    drover(pooled, "run", item, check=True)
    (row,) = pool_rows(pooled)
    worktree = pooled / row["path"]
    private = Path((worktree / ".git").read_text().strip().removeprefix("gitdir: "))
    (worktree / ".git").write_text(f"gitdir: {os.path.relpath(private, worktree)}\n")
    assert git(worktree, "rev-parse", "--abbrev-ref", "HEAD").strip() == f"drover/{item.lower()}"
    done = drover(pooled, "run", item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [again["path"] for again in pool_rows(pooled)] == [row["path"]]


def test_a_dry_run_names_the_pooled_worktree_the_launch_works_in(pooled, tmp_path):
    """`drover run D-5 --dry-run` said `directory: .drover/worktrees/D-5 (a worktree, created at
    launch)` and `DROVER_WORKTREE=.../.drover/worktrees/D-5`; the run then worked in
    .drover/pool/w1 (a new user, on markupsafe): with [run] pool a dry run names the pooled worktree."""
    first, second = new_item(pooled, "first"), new_item(pooled, "second")

    def plan(item: str) -> dict:
        return json.loads(drover(pooled, "run", item, "--dry-run", "--json", check=True).stdout)

    before = plan(first)
    assert before["cwd"] == ".drover/pool/w1", before["cwd"]
    assert before["env"]["DROVER_WORKTREE"] == str(pooled / ".drover" / "pool" / "w1")
    drover(pooled, "run", first, check=True)
    (row,) = pool_rows(pooled)
    assert row["path"] == before["cwd"] and row["holder"] == first
    shown = drover(pooled, "run", first, "--dry-run", check=True).stdout
    assert "directory: .drover/pool/w1 (a pooled worktree: [run] pool)" in shown.splitlines(), shown
    assert plan(second)["cwd"] == ".drover/pool/w2"  # w1 is first's: the next one is new
    assert not (pooled / ".drover" / "worktrees").exists() and len(pool_rows(pooled)) == 1  # nothing made


def test_a_dry_runs_mend_of_a_branch_behind_base_never_names_a_free_pooled_worktree(pooled):
    """Hostile review 38: the dry run of an item whose branch lags base named the free pooled worktree
    the launch would take: `git -C .drover/pool/w1 merge --ff-only main`, which, run, moved the
    earlier item's branch that w1 still has checked out, and left the item's behind."""
    set_run(pooled, pool="1")
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    git(pooled, "branch", f"drover/{second.lower()}")
    (pooled / "moved").write_text("base moves\n")
    git(pooled, "add", "moved")
    git(pooled, "commit", "-qm", "base moves")
    assert drive(pooled, first).returncode == 0
    (row,) = pool_rows(pooled)
    assert row["state"] == "free" and git(pooled / row["path"], "branch", "--show-current").strip() != f"drover/{second.lower()}"
    said = drover(pooled, "run", second, "--dry-run", check=True).stderr
    assert f"(`git branch -f drover/{second.lower()} main` first to start from main as it is now)" in said, said


def test_worktrees_lists_the_pool_and_prune_empties_it(pooled, tmp_path):
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drover(pooled, "run", second).returncode == 0  # implementing: second holds a worktree
    assert drive(pooled, first).returncode == 0  # another, back to the pool when finished
    listed = json.loads(drover(pooled, "worktrees", "--json", check=True).stdout)
    assert listed["pool"] == 2
    holders = sorted((row["holder"] or "", row["state"]) for row in listed["worktrees"])
    assert holders == [("", "free"), (second, "held")]
    text = drover(pooled, "worktrees", check=True).stdout.splitlines()
    assert text[0].split() == ["path", "held", "by", "state", "set", "up", "used"]
    # show names the worktree the item holds (where a parked item's conflict is resolved by hand)
    held = next(row["path"] for row in listed["worktrees"] if row["holder"] == second)
    assert f"  worktree: {held}" in drover(pooled, "show", second, check=True).stdout.splitlines()
    assert json.loads(drover(pooled, "show", first, "--json", check=True).stdout)["worktree"] == ""  # done
    assert any(line.split()[1:3] == [second, "held"] for line in text[1:])
    assert any(line.split()[1:3] == ["-", "free"] for line in text[1:])
    assert {line.split()[3] for line in text[1:]} == {"-"}  # no [run] setup: nothing to set up, not `never`
    pruned = drover(pooled, "worktrees", "prune", check=True).stdout.splitlines()
    assert sorted(line.split()[0] for line in pruned) == ["kept", "removed"]
    kept = next(line for line in pruned if line.startswith("kept"))  # and how to remove it, should one wish
    assert kept.endswith(f": held by {second}, not finished (--held removes it too; {second} goes on in another)")
    assert [row["holder"] for row in pool_rows(pooled)] == [second]
    held_path = pooled / pool_rows(pooled)[0]["path"]
    pruned = drover(pooled, "worktrees", "prune", "--held", check=True).stdout
    assert pruned.startswith("removed ") and pool_rows(pooled) == [] and not held_path.exists()
    assert drover(pooled, "worktrees", check=True).stdout == "no pooled worktrees\n"
    # the item goes on in a new pooled worktree: its commit is on its branch
    assert drive(pooled, second).returncode == 0


def test_an_agent_cannot_prune_the_pool_from_inside_its_run(pooled, tmp_path):
    """`worktrees prune --held` is the operator's: from inside a run it removed another item's held
    worktree with its work in progress, and the worktree of the run still going."""
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    assert drover(pooled, "run", second).returncode == 0  # second holds a worktree, its work in progress there
    (held,) = pool_rows(pooled)
    progress = pooled / held["path"] / "untracked.txt"
    assert progress.read_text() == second
    # the first item's implementer (tests/agents/hostile_agent.py) gives the operator's command
    text = (pooled / "drover.toml").read_text().replace(str(POOL_AGENT), str(HOSTILE_AGENT))
    (pooled / "drover.toml").write_text(text)
    git(pooled, "commit", "-qam", "the hostile agent")
    log = tmp_path / "hostile.jsonl"
    drover(pooled, "run", first, env={"HOSTILE": "operator", "HOSTILE_COMMAND": "worktrees prune --held",
                                      "HOSTILE_LOG": str(log)})
    (attempt,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert attempt["code"] != 0 and "Traceback" not in attempt["err"], attempt
    assert "refused: this process acts for run " in attempt["err"], attempt
    rows = pool_rows(pooled)
    assert sorted(row["holder"] for row in rows) == sorted([first, second])
    assert all((pooled / row["path"]).is_dir() for row in rows)
    assert progress.read_text() == second


def test_with_the_pool_off_worktrees_says_so(repo):
    configure(repo)
    out = drover(repo, "worktrees", check=True).stdout
    assert out.startswith("the pool is off ([run] pool = 0)")


@pytest.mark.parametrize("setting, said", [
    ('keep = "node_modules"', "drover.toml: [run] keep: expected a list of strings"),
    ("keep = [1]", "drover.toml: [run] keep: expected a list of strings"),
    ('keep = ["../up"]', "drover.toml: [run] keep: expected paths inside the worktree, not '../up'"),
    ('setup_inputs = [".git/config"]', "drover.toml: [run] setup_inputs: expected paths outside git's own files"),
    ("pool = -1", "drover.toml: [run] pool: expected an integer of at least 0"),
])
def test_a_bad_pool_setting_is_one_line(repo, setting, said):
    configure(repo)
    name, value = setting.split(" = ", 1)
    path = repo / "drover.toml"
    path.write_text(re.sub(rf"^{name} = .*$", f"{name} = {value}", path.read_text(), count=1, flags=re.M))
    done = drover(repo, "worktrees")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.startswith(f"drover: {said}"), done.stderr
    assert done.stderr.endswith(f" (line {line_of_key(repo, 'run', name)})\n"), done.stderr
    assert not (repo / ".drover" / "ledger.db").exists() or pool_rows(repo) == []


def test_a_tracked_file_marked_skip_worktree_and_the_worktrees_own_refs_do_not_reach_the_next_item(pooled, tmp_path):
    """`git update-index --skip-worktree` hides a changed tracked file from git status, and a forced
    checkout and a clean leave it as it is; refs under refs/worktree/ and refs/bisect/ live in the
    worktree's private folder. None of it reaches the next holder."""
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    done = drive(pooled, first, env={"POOL_HOSTILE": "skip-worktree"})
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = pool_rows(pooled)
    assert git(pooled / row["path"], "ls-files", "-v", "README").startswith("S ")  # the plant is there
    assert drive(pooled, second).returncode == 0
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["worktree"] == str(pooled / row["path"])  # the same worktree, reused
    assert entry["readme"] == "base\n" and entry["refs"] == []


def test_an_index_a_holder_wrote_where_drover_kept_its_own_does_not_reach_the_next_item(pooled, tmp_path):
    """drover kept the index its checkout wrote in the worktree's private git folder, which the holder
    writes as it commits: a holder that copied its own index there (a changed README marked
    skip-worktree) had it put back, and the forced checkout and the clean passed over README. The
    kept index is now in drover's own folder, beside the worktree."""
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    done = drive(pooled, first, env={"POOL_HOSTILE": "kept-index"})
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = pool_rows(pooled)
    worktree = pooled / row["path"]
    assert git(worktree, "ls-files", "-v", "README").startswith("S ")  # the plant is there
    assert drive(pooled, second).returncode == 0
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["worktree"] == str(worktree)  # the same worktree, reused
    assert entry["readme"] == "base\n"


@pytest.mark.parametrize("hide", ["assume-unchanged", "forged", "time-set-back"])
def test_a_tracked_file_a_holder_hid_from_git_in_the_index_does_not_reach_the_next_item(pooled, tmp_path, hide):
    """The index is the holder's to write (tests/agents/index_agent.py): a changed tracked file marked
    assume-unchanged (which git trusts as it checks out once the index holds 1000 entries), one whose
    entry has the changed file's stat data and the committed blob id, or one rewritten at its size
    with its modification time set back, once the shared config told git to trust no ctime: the
    forced checkout and the clean passed over it, and the next holder (or drover's check) ran the
    holder's text."""
    text = (pooled / "drover.toml").read_text().replace(str(POOL_AGENT), str(INDEX_AGENT))
    (pooled / "drover.toml").write_text(text)
    git(pooled, "commit", "-qam", "the index agent")
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    done = drive(pooled, first, env={"INDEX_HIDE": hide})
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = pool_rows(pooled)
    worktree = pooled / row["path"]
    assert (worktree / "README").read_text() != "base\n"  # the plant is there,
    assert git(worktree, "status", "--porcelain", "--", "README") == ""  # and git sees no change in it
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["worktree"] == str(worktree)  # the same worktree, reused
    assert entry["readme"] == "base\n"


def check_after_a_config_plant(pooled: Path, tmp_path: Path, plant: str, verify: str) -> tuple[str, Path, Path]:
    """The second of two items implemented (it holds one pooled worktree), then the first driven and
    finished by config_agent.py planting `plant` in the other, which it gives back: (the second's id,
    the planted worktree, the file each check appends its folder to). `verify` is [verify] default,
    run after that folder is noted."""
    checked = tmp_path / "checked-in"
    text = (pooled / "drover.toml").read_text().replace(str(POOL_AGENT), str(CONFIG_AGENT))
    (pooled / "drover.toml").write_text(text)
    set_run(pooled, default=json.dumps(f"pwd >> {checked} && {verify}"))
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    drover(pooled, "run", second, check=True)  # the second item holds a worktree of its own
    (held,) = pool_rows(pooled)
    done = drive(pooled, first, env={"CONFIG_PLANT": plant, "CONFIG_RAN": str(tmp_path / "planted-ran")})
    assert done.returncode == 0, done.stdout + done.stderr
    (planted,) = [pooled / row["path"] for row in pool_rows(pooled) if row["path"] != held["path"]]
    return second, planted, checked


def test_an_untracked_file_the_shared_config_made_git_fold_into_a_tracked_ones_name_does_not_reach_the_next_check(
        pooled, tmp_path):
    """`git config core.ignoreCase true` (the shared config) on a file system that tells case apart:
    git took an untracked `makefile` for the tracked `Makefile`, so the clean passed over it, and the
    next item's check (`make test`, which reads `makefile` first) in that worktree ran the holder's
    text in place of the project's tests."""
    (pooled / "Makefile").write_text("test:\n\t@true\n")
    git(pooled, "add", "Makefile")
    git(pooled, "commit", "-qm", "the project's tests")
    second, planted, checked = check_after_a_config_plant(pooled, tmp_path, "ignorecase", "make test")
    assert (planted / "makefile").exists()  # the plant is there,
    assert git(planted, "status", "--porcelain", "--ignored", "--", "makefile") == ""  # and git sees nothing there
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{second}: check passed (" in done.stdout
    assert checked.read_text().splitlines()[-1] == str(planted)  # the second item's check, in that worktree,
    assert not (tmp_path / "planted-ran").exists()  # ran the project's Makefile
    assert git(pooled, "log", "--merges", "--format=%s", "main").count("drover: merge") == 2


def test_a_mode_the_shared_config_told_git_to_overlook_does_not_reach_the_next_check(pooled, tmp_path):
    """`chmod -x check.sh` on a tracked script, then `git config core.fileMode false` (the shared
    config): the forced checkout kept the holder's mode, and the next item's check in that worktree
    could not run (126), failing that item for what another item's agent did."""
    (pooled / "check.sh").write_text("#!/bin/sh\nexit 0\n")
    (pooled / "check.sh").chmod(0o755)
    git(pooled, "add", "check.sh")
    git(pooled, "commit", "-qm", "the project's tests")
    second, planted, checked = check_after_a_config_plant(pooled, tmp_path, "filemode", "./check.sh")
    assert not os.access(planted / "check.sh", os.X_OK)  # the plant is there,
    assert git(planted, "status", "--porcelain", "--", "check.sh") == ""  # and git sees no change there
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{second}: check passed (" in done.stdout
    assert checked.read_text().splitlines()[-1] == str(planted)  # the second item's check, in that worktree
    assert git(pooled, "log", "--merges", "--format=%s", "main").count("drover: merge") == 2


@pytest.mark.parametrize("named", ["another repository", "a link in a loop"])
def test_a_worktree_whose_common_folder_an_agent_rewrote_is_discarded_not_reused(pooled, tmp_path, named):
    """The private git folder's `commondir` names the repository the worktree belongs to: pointed
    elsewhere, drover's checkout and clean would run in that other repository. Pointed at a link
    that leads to itself, the look at where it leads raised out of the drive (Python's resolve)."""
    if named == "another repository":
        elsewhere = another_repository(tmp_path)
    else:
        elsewhere = tmp_path / "loop"
        elsewhere.mkdir()
        (elsewhere / ".git").symlink_to(".git")
    first, second = new_item(pooled, "first"), new_item(pooled, "second")
    done = drive(pooled, first, env={"POOL_HOSTILE": "commondir", "POOL_ELSEWHERE": str(elsewhere)})
    assert done.returncode == 0, done.stdout + done.stderr
    done = drive(pooled, second)
    assert done.returncode == 0, done.stdout + done.stderr
    if named == "another repository":
        assert git(elsewhere, "branch", "--format=%(refname:short)").split() == ["main"]
        assert git(elsewhere, "status", "--porcelain") == ""
    (entry,) = [entry for entry in seen(tmp_path) if entry["item"] == second and entry["slot"] == "implement"]
    assert entry["seen"] == {} and entry["readme"] == "base\n"
    discarded = sqlite3.connect(pooled / ".drover" / "ledger.db").execute(
        "SELECT count(*) FROM events WHERE command = 'pool-discard'").fetchone()[0]
    assert discarded >= 1


def test_an_item_that_holds_a_pooled_worktree_goes_on_in_it_after_the_pool_is_turned_off(pooled, tmp_path):
    item = new_item(pooled, "held")
    assert drover(pooled, "run", item).returncode == 0  # the implementer works in a pooled worktree
    [row] = pool_rows(pooled)
    held = pooled / row["path"]
    set_run(pooled, pool="0")
    # its branch is checked out there: git refuses it anywhere else, so the item goes on in it
    done = drive(pooled, item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "already checked out" not in done.stdout + done.stderr
    assert {Path(entry["worktree"]).resolve() for entry in seen(tmp_path)} == {held.resolve()}
    assert json.loads(drover(pooled, "show", item, "--json", check=True).stdout)["state"] == "done"
    # the finish gives it back to a pool of none: it is removed
    assert pool_rows(pooled) == [] and not held.exists()


# --- a parked item's worktree -----------------------------------------------------------------------


def events(root: Path, command: str) -> list[tuple[str, dict]]:
    rows = sqlite3.connect(root / ".drover" / "ledger.db").execute(
        "SELECT item, detail FROM events WHERE command = ? ORDER BY rowid", (command,)).fetchall()
    return [(item, json.loads(detail or "{}")) for item, detail in rows]


def test_a_parked_items_clean_worktree_goes_to_the_next_holder_and_it_takes_one_again_when_unparked(repo, tmp_path):
    configure(repo)  # the loop agent: it commits all it writes
    log = tmp_path / "setups.log"
    parked, dirty_for, clean_for = (new_item(repo, title) for title in ("parked", "second", "third"))
    # drover's check fails for `parked` only: past max_rounds = 1 drover parks it
    (repo / "drover.toml").write_text((repo / "drover.toml").read_text().replace("max_rounds = 3", "max_rounds = 1"))
    set_run(repo, pool="2", setup=f'"echo $(basename $PWD) >> {log}"', default=f'"test $DROVER_ITEM != {parked}"')
    drive(repo, parked)
    assert json.loads(drover(repo, "show", parked, "--json", check=True).stdout)["state"] == "parked"
    (held,) = [row["path"] for row in pool_rows(repo) if row["holder"] == parked]
    # uncommitted work in it: the parked item keeps it, and the next check pays a new worktree
    (repo / held / "notes.txt").write_text("mine\n")
    assert drive(repo, dirty_for).returncode == 0
    assert [row["path"] for row in pool_rows(repo) if row["holder"] == parked] == [held]
    assert (repo / held / "notes.txt").read_text() == "mine\n" and events(repo, "pool-reclaim") == []
    # nothing uncommitted: the full pool's next holder takes it, and no worktree is added or set up
    (repo / held / "notes.txt").unlink()
    setups = log.read_text().splitlines()
    assert drive(repo, clean_for).returncode == 0
    assert log.read_text().splitlines() == setups
    rows = pool_rows(repo)
    assert len(rows) == 2 and parked not in [row["holder"] for row in rows] and held in [row["path"] for row in rows]
    assert [(item, detail["path"]) for item, detail in events(repo, "pool-reclaim")] == [(parked, held)]
    # unparked, it takes a pooled worktree again on its branch, with both passes it committed
    set_run(repo, default='"true"')
    drover(repo, "unpark", parked, check=True)
    done = drive(repo, parked)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(repo, "show", f"main:{parked.lower()}.txt").splitlines()[:2] == ["pass 1", "pass 2"]
    assert len(pool_rows(repo)) == 2


def test_putting_back_the_kept_index_replaces_a_link_the_holder_left_in_its_place(tmp_path):
    """The holder may leave its private folder's `index` a link to any file: putting back the kept
    index replaces the link and writes nothing through it (the file it leads to may be one the
    operator may write and the holder may not)."""
    from drover.git.cleaning import restore_index
    from drover.git.files import folder_fd

    private, outside, kept = tmp_path / "private", tmp_path / "operators-file", tmp_path / "w1.index"
    private.mkdir()
    outside.write_text("the operator's\n")
    kept.write_bytes(b"DIRC kept")
    (private / "index").symlink_to(outside)
    folder = folder_fd(private)
    try:
        restore_index(folder, kept)
    finally:
        os.close(folder)
    assert outside.read_text() == "the operator's\n"
    assert not (private / "index").is_symlink() and (private / "index").read_bytes() == b"DIRC kept"
    assert kept.read_bytes() == b"DIRC kept"  # kept for the next holder too


def driving_in_setup(root: Path, tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    """`drover drive` of a new item as a process of its own, in a session of its own, returned with
    the item and the file of the set-up's pids once its `[run] setup` (a shell waiting on a minute's
    sleep) has started."""
    pids = tmp_path / "setup.pids"
    set_run(root, setup=json.dumps(f"echo $$ >> {pids}; sleep 60 & echo $! >> {pids}; wait"))
    item = new_item(root, "first")
    driving = subprocess.Popen([str(BIN / "drover"), "drive", item], cwd=root, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    deadline = time.monotonic() + 60
    while len(pids.read_text().split()) < 2 if pids.exists() else True:
        if time.monotonic() > deadline or driving.poll() is not None:
            driving.kill()
            driving.communicate()
            raise AssertionError("the setup never started")
        time.sleep(0.05)
    return driving, item, pids


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_setup_ends_it_and_the_run_is_interrupted_with_no_agent_started(pooled, tmp_path, signum):
    """The setup ran as a plain child in drover's process group: SIGTERM left it to run its course
    and the agent was started after it, and Ctrl-C reached it straight from the terminal, so the run
    was recorded as a setup that failed. Now it is launched as an agent is, and ended with the drive.
    The report read the run as an unclassified failure while `show` said interrupted, and the
    progress said the agent was interrupted though none had started: now the run is classed
    `interrupted`, as an agent a signal ended is, and the progress names the set-up."""
    driving, item, pids = driving_in_setup(pooled, tmp_path)
    try:
        os.kill(driving.pid, signum)
        out, err = driving.communicate(timeout=30)
    finally:
        if driving.poll() is None:
            driving.kill()
    assert driving.returncode == 128 + signum, out + err
    assert all(not os.path.exists(f"/proc/{pid}") for pid in map(int, pids.read_text().split()))
    (run,) = json.loads(drover(pooled, "show", item, "--json", check=True).stdout)["runs"]
    assert run["outcome"] == "interrupted"
    assert [entry for entry in seen(tmp_path) if entry["item"] == item] == []  # no agent started
    (line,) = json.loads(drover(pooled, "report", "--json", check=True).stdout)["runs"]
    assert (line["failure"], line["reason"]) == ("interrupted", run["reason"])
    assert "unclassified" not in drover(pooled, "report", check=True).stdout
    assert f"{item}: implement: [run] setup interrupted; no agent started" in out
    assert "agent interrupted" not in out and "implement interrupted after" not in out


def test_a_signal_another_thread_of_drovers_takes_during_the_setup_still_ends_the_drive(pooled, tmp_path):
    """The kernel hands a signal sent to drover to any of its threads that does not block it, and a
    thread that changes its mask at that moment (one starting, one that just started a process) takes
    it from the main thread it was meant for: Python then runs the handler only when the main thread
    runs again, and the drive's main thread slept on a lock until the item's job ended. Under load,
    once in some 40 drives, a SIGTERM during the set-up went unheard until the setup's minute was
    over. Here the signal goes to another thread on purpose (tgkill): the drive ends at once."""
    import ctypes

    driving, item, pids = driving_in_setup(pooled, tmp_path)
    try:
        others = sorted(int(tid) for tid in os.listdir(f"/proc/{driving.pid}/task") if int(tid) != driving.pid)
        assert others, "the drive runs its item in a thread of its own"
        tgkill = getattr(ctypes.CDLL(None, use_errno=True), "tgkill", None)  # glibc 2.30 and later
        if tgkill is None:
            pytest.skip("this C library has no tgkill, which sends a signal to one thread of another process")
        assert tgkill(driving.pid, others[0], signal.SIGTERM) == 0
        out, err = driving.communicate(timeout=30)
    finally:
        if driving.poll() is None:
            driving.kill()
            driving.communicate()
        for pid in map(int, pids.read_text().split()) if pids.exists() else ():
            if os.path.exists(f"/proc/{pid}"):
                os.kill(pid, signal.SIGKILL)
    assert driving.returncode == 128 + signal.SIGTERM, out + err
    assert f"{item}: implement: [run] setup interrupted; no agent started" in out
    assert [entry for entry in seen(tmp_path) if entry["item"] == item] == []  # no agent started


# --- an item's run is claimed before its worktree and set-up ----------------------------------------


def held_in_setup(root: Path, tmp_path: Path, item: str, env: dict | None = None) -> tuple[subprocess.Popen, Path]:
    """`drover run ITEM` as a process of its own, returned once its `[run] setup` (which waits for
    the file it returns, see waiting_setup) has started."""
    started = tmp_path / "setup.started"
    running = subprocess.Popen([str(BIN / "drover"), "run", item], cwd=root, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True,
                               env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})})
    deadline = time.monotonic() + 60
    while not started.exists():
        if time.monotonic() > deadline or running.poll() is not None:
            running.kill()
            raise AssertionError("the setup never started: " + "".join(running.communicate()))
        time.sleep(0.05)
    return running, tmp_path / "setup.go"


def ended(first: subprocess.Popen, go: Path) -> tuple[int, str]:
    """Let the held set-up go on, and the drover run that waited on it end: its exit status and output.
    Killed, should it outlive the minute."""
    go.touch()
    try:
        out, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    return first.returncode, out + err


def listed_state(root: Path, item: str) -> str:
    return {row["id"]: row["state"] for row in json.loads(drover(root, "list", "--json", check=True).stdout)}[item]


def waiting_setup(tmp_path: Path) -> str:
    """A `[run] setup` (as TOML text) that notes each start in setup.started and waits for setup.go."""
    started, go = tmp_path / "setup.started", tmp_path / "setup.go"
    return json.dumps(f"echo $$ >> {started}; while [ ! -e {go} ]; do sleep 0.05; done")


@pytest.mark.parametrize("pool", ["0", "2"])
def test_an_item_in_its_setup_is_running_and_a_second_run_or_drive_of_it_is_refused(pooled, tmp_path, pool):
    """While `[run] setup` ran for an item nothing had claimed it: `list` said ready, a second
    `drover run` of it was accepted, set the same worktree up at the same time and launched a second
    implementer beside the first. A run is now claimed before its worktree and set-up."""
    set_run(pooled, pool=pool, setup=waiting_setup(tmp_path))
    item = new_item(pooled, "first")
    first, go = held_in_setup(pooled, tmp_path, item)
    try:
        assert listed_state(pooled, item) == "running"
        # the lock's text is anyone's to write (the set-up runs the branch's code): not who holds it
        (lock,) = (pooled / ".drover" / "runs").glob(f"*-{item}-implement-*/{ATTACHED}")
        lock.write_text("1 forged\n")
        second = drover(pooled, "run", item, process=True)
        assert second.returncode == 1, second.stdout + second.stderr
        assert f"drover: {item} already has a live run " in second.stderr
        assert f"(drover pid {first.pid}, before its agent starts)" in second.stderr, second.stderr
        driven = drover(pooled, "drive", item)
        assert re.search(rf"^{item} +skipped +0 +1 +running$", driven.stdout, re.M), driven.stdout + driven.stderr
        stopped = drover(pooled, "stop", item)
        assert stopped.returncode == 1 and "is being set up (drover pid " in stopped.stderr, stopped.stderr
    finally:
        status, said = ended(first, go)
    assert status == 0, said
    assert len((tmp_path / "setup.started").read_text().split()) == 1  # set up once
    assert [entry["slot"] for entry in seen(tmp_path) if entry["item"] == item] == ["implement"]
    runs = json.loads(drover(pooled, "show", item, "--json", check=True).stdout)["runs"]
    assert [(run["slot"], run["outcome"]) for run in runs] == [("implement", "exited")]


def test_a_drover_killed_in_the_setup_leaves_the_item_interrupted_and_no_claim(pooled, tmp_path):
    """The claim is the run's lock, which the kernel lets go of when its drover dies: the run is
    recorded unended (interrupted, which a drive resumes), and the next run is accepted."""
    set_run(pooled, setup=waiting_setup(tmp_path))
    item = new_item(pooled, "first")
    first, go = held_in_setup(pooled, tmp_path, item)
    first.kill()
    first.communicate(timeout=30)
    go.touch()  # ends the set-up the killed drover left behind (docs/worktrees.md, "Left alone")
    assert listed_state(pooled, item) == "interrupted"
    again = drover(pooled, "run", item)
    assert again.returncode == 0, again.stdout + again.stderr
    assert [entry["slot"] for entry in seen(tmp_path) if entry["item"] == item] == ["implement"]


@pytest.mark.parametrize("planted", ["link", "fifo", "folder"])
def test_what_an_agent_puts_in_place_of_a_dead_runs_lock_never_makes_it_live_nor_holds_drover(pooled, tmp_path,
                                                                                              planted):
    """A run a `kill -9` left unended is not live: its lock is free. A later agent that puts a link
    to itself, a fifo or a folder where that lock was made the item `running` for ever (no command
    cleared it), and with a fifo every `list` and `drive` waited for good. Neither any more."""
    set_run(pooled, setup=waiting_setup(tmp_path))
    item = new_item(pooled, "first")
    first, go = held_in_setup(pooled, tmp_path, item)
    first.kill()
    first.communicate(timeout=30)
    go.touch()
    (lock,) = (pooled / ".drover" / "runs").glob(f"*-{item}-implement-*/{ATTACHED}")
    lock.unlink()
    if planted == "link":
        lock.symlink_to(ATTACHED)  # a link to itself: ELOOP
    elif planted == "fifo":
        os.mkfifo(lock)
    else:
        lock.mkdir()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    try:
        listed = subprocess.run([str(BIN / "drover"), "list", "--json"], cwd=pooled, capture_output=True, text=True,
                                env=env, timeout=60, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail("drover list waited on what the agent put in place of the lock")
    assert {row["id"]: row["state"] for row in json.loads(listed.stdout)}[item] == "interrupted"
    again = drover(pooled, "run", item)
    assert again.returncode == 0, again.stdout + again.stderr


def test_prune_held_keeps_the_worktree_of_a_live_run_in_its_setup_and_while_its_agent_works(repo, tmp_path):
    """`worktrees prune --held` removed the pooled worktree an agent was working in (the item was
    `running`): the agent lost its directory and the run failed. A live run's worktree is kept, from
    its set-up on, and prune says why."""
    configure(repo)
    set_run(repo, pool="2", setup=waiting_setup(tmp_path))
    item = new_item(repo, "first")
    marker, release = tmp_path / "agent.started", tmp_path / "agent.go"
    # the agent works till the test lets it go (a minute at most)
    first, go = held_in_setup(repo, tmp_path, item, env={"AGENT_MARKER": str(marker), "AGENT_SLOW_ITEM": f"{item}:60",
                                                         "AGENT_SLOW_UNTIL": str(release)})
    try:
        (row,) = pool_rows(repo)
        pruned = drover(repo, "worktrees", "prune", "--held", check=True).stdout
        assert pruned.startswith(f"kept {row['path']}: {item} has a live run "), pruned
        assert "before its agent starts" in pruned
        go.touch()
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert time.monotonic() < deadline and first.poll() is None, "the agent never started"
            time.sleep(0.05)
        pruned = drover(repo, "worktrees", "prune", "--held", check=True).stdout
        assert re.fullmatch(rf"kept {row['path']}: {item} has a live run \S+ \(pid \d+\)\n", pruned), pruned
    finally:
        release.touch()
        status, said = ended(first, go)
    assert status == 0, said
    assert (repo / row["path"]).is_dir() and [r["holder"] for r in pool_rows(repo)] == [item]
    # with the run over and its drover gone, --held removes it as before
    assert drover(repo, "worktrees", "prune", "--held", check=True).stdout == f"removed {row['path']}\n"


def test_a_link_in_place_of_a_free_pooled_worktree_never_leads_the_pool_into_another(pooled, tmp_path):
    """Hostile review 43: an agent put a link in place of a free pooled worktree (`.drover/pool/w1`)
    to the operator's own linked worktree (`git worktree add ../mine`): its `.git` names this
    repository's folder for it, which names it back, so the next taking found it fit, forced it
    onto the next item's branch and cleaned it, the operator's untracked notes gone, and the agent
    ran there. A link there is no pooled worktree: discarded as a link, the worktree it names whole."""
    first, second = first_driven(pooled)
    (row,) = pool_rows(pooled)
    assert row["state"] == "free"
    mine = tmp_path / "mine"
    git(pooled, "worktree", "add", "-q", "-b", "mine", str(mine))
    (mine / "notes.txt").write_text("the operator's own\n")
    pooled_path = pooled / row["path"]
    shutil.rmtree(pooled_path)
    pooled_path.symlink_to(mine)

    drive(pooled, second)

    assert (mine / "notes.txt").read_text() == "the operator's own\n"
    assert git(mine, "branch", "--show-current").strip() == "mine"
    assert not any(entry["worktree"] == str(mine.resolve()) for entry in seen(tmp_path))


def _still_runs(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _setup_orphaned(pooled: Path, tmp_path: Path, started: Path) -> tuple[str, int]:
    """A new item's run killed with SIGKILL (drover alone) during its set-up, which runs on in a
    session of its own: (the item, the set-up's pid, which it wrote to `started`)."""
    item = new_item(pooled, "first")
    first, _ = held_in_setup(pooled, tmp_path, item)
    orphan = int(started.read_text().split()[0])
    first.kill()
    first.communicate(timeout=30)
    assert _still_runs(orphan)
    return item, orphan


def test_a_setup_a_killed_drover_left_running_is_ended_when_its_worktree_is_removed(pooled, tmp_path):
    """The orphan's token lives in the worktree's private git folder, which goes with the worktree:
    a `worktrees prune --held` after the kill removed it with the install still running, and the
    worktree made again at the same path ran its set-up beside that install (writing by path into
    the new folder), nothing left to name it. The prune ends it first, and says so."""
    started, go = tmp_path / "setup.started", tmp_path / "setup.go"
    set_run(pooled, setup=json.dumps(f"echo $$ >> {started}; while [ ! -e {go} ]; do sleep 0.05; done"))
    try:
        _, orphan = _setup_orphaned(pooled, tmp_path, started)
        pruned = drover(pooled, "worktrees", "prune", "--held", check=True).stdout
        assert re.fullmatch(rf"removed \.drover/pool/w1 \(ended a \[run\] setup a killed drover left running "
                            rf"there \(pid {orphan}( and \d+ more)?\)\)\n", pruned), pruned
        assert not _still_runs(orphan)
        assert not (pooled / ".drover" / "pool" / "w1").exists()
    finally:
        go.touch()


def test_a_setup_a_killed_drover_left_running_is_ended_before_the_setup_runs_there_again(pooled, tmp_path):
    """A new user killed a drive with `kill -9` during `npm ci` and drove again at once: the new
    set-up ran in the same worktree beside the orphaned one, two installs writing one node_modules,
    and the digest then called whatever they left set up. The orphan is ended first, and said."""
    started, go = tmp_path / "setup.started", tmp_path / "setup.go"
    # the first set-up waits for setup.go; the one after it, in the same worktree, does not
    setup = f"echo $$ >> {started}; [ -e {go}.again ] && exit 0; touch {go}.again; while [ ! -e {go} ]; do sleep 0.05; done"
    set_run(pooled, setup=json.dumps(setup))
    try:
        item, orphan = _setup_orphaned(pooled, tmp_path, started)
        again = drover(pooled, "run", item)
        assert again.returncode == 0, again.stdout + again.stderr
        assert not _still_runs(orphan)
        worktree = pooled / ".drover" / "pool" / "w1"
        assert (f"{item}: ended a [run] setup a killed drover left running in {worktree} (pid {orphan}"
                in again.stdout + again.stderr)
        assert len(started.read_text().split()) == 2  # the set-up ran again, alone
    finally:
        go.touch()


def test_a_rewritten_git_file_never_leads_prune_to_end_a_setup_elsewhere(pooled, tmp_path):
    """Hostile review 50: the prune's ender of a set-up left running read the token in whatever
    folder the pooled worktree's `.git` file names, and that file is the agent's to rewrite. An
    agent pointed a free pooled worktree's `.git` at the operator's own linked worktree's private
    folder, where a set-up of another drive kept its token: the operator's next `worktrees prune`
    ended that live set-up, long after the agent's run. Only a process that carries the mark of a
    set-up in the worktree removed is ended, whatever token the folder holds."""
    first_driven(pooled)
    (row,) = pool_rows(pooled)
    assert row["state"] == "free"
    mine = tmp_path / "mine"
    git(pooled, "worktree", "add", "-q", "-b", "mine", str(mine))
    private = pooled / ".git" / "worktrees" / "mine"
    token = os.urandom(16).hex()
    (private / "drover-setup-running").write_text(token)
    # a set-up of another drive running in the operator's worktree, with the marks a set-up there carries
    live = subprocess.Popen(["sleep", "600"], env={**os.environ, "DROVER_SETUP": str(mine), "DROVER_SETUP_RUN": token},
                            start_new_session=True)
    try:
        (pooled / row["path"] / ".git").write_text(f"gitdir: {private}\n")
        pruned = drover(pooled, "worktrees", "prune", check=True).stdout
        assert pruned == f"removed {row['path']}\n", pruned
        assert live.poll() is None
        assert (mine / ".git").read_text() == f"gitdir: {private}\n"
    finally:
        live.kill()
        live.wait()
