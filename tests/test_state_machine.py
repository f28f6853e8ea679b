"""The state machine as a whole: random sequences of the real operations on a real repository.

Each example drives one new item of its own repository through a
random sequence of implementing runs (with commits, with none, interrupted, failed), review
runs (that request changes, approve, or record nothing), manual audits, close-changes,
finish, park and unpark, calling the same core functions the commands call, with a shell
script as the agent. After every step it checks the invariants of docs/states.md.

The repository and its migrated ledger are built once and copied for each example: a copy costs
a few file writes, where `git init`, commits and migrations cost many subprocesses, and a fresh
copy keeps every example as cheap as the first (a shared repository grows an item per example).
"""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drover.prompts import data as template_data
from drover.loop import finish as finishing
from drover import git as drover_git
from drover.loop import runs
from drover.loop.verdict import review_verdict
from drover.ledger import writes
from drover.ledger.acting import acting_as
from drover.errors import DroverError
from drover.ledger.db import Ledger
from drover.ledger.project import open_project
from drover.ledger.itemstate import show_item
from drover.ledger.listing import is_ready, list_items
from drover.ledger.state import IMPLEMENT_NEXT, NOT_DRIVEN, State

AGENT = """#!/bin/sh
# the property test's agent: AGENT_MODE says what this run does
cat > /dev/null
case "$AGENT_MODE" in
  commit) echo "$DROVER_RUN" >> "$DROVER_ITEM.txt"; git add "$DROVER_ITEM.txt"; git commit -q -m "$DROVER_ITEM: work" ;;
  fail) exit 3 ;;
  sleep) sleep 30 ;;
esac
exit 0
"""

OPERATIONS = ("run commits", "run without commits", "run interrupted", "run failed",
              "review requests changes", "review approves", "review records nothing",
              "manual audit", "close-changes", "finish", "park", "unpark")


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """A factory of fresh copies of one template repository (committed, with a migrated ledger)."""
    base = tmp_path_factory.mktemp("machine")
    template = base / "template"
    template.mkdir()
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "Test Operator",
           "GIT_AUTHOR_EMAIL": "operator@example.invalid", "GIT_COMMITTER_NAME": "Test Operator",
           "GIT_COMMITTER_EMAIL": "operator@example.invalid"}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=template, check=True, capture_output=True, env=env)

    git("init", "-q", "-b", "main")
    (template / "README.md").write_text("# project\n")
    (template / ".gitignore").write_text(".drover/\n")
    agent = base / "agent.sh"
    agent.write_text(AGENT)
    (template / "drover.toml").write_text(
        '[agent]\npreset = "script"\nname = "implementer"\n'
        f'command = "sh {agent}"\n'
        '[agent.review]\nname = "reviewer"\n'
        '[review]\nmax_rounds = 3\n'
        '[verify]\ndefault = ""\n'  # nothing to test: finish needs no check of drover's own (docs/verify.md)
    )
    git("add", "-A")
    git("commit", "-q", "-m", "initial")
    # fewer folders to copy and delete per example: objects in one pack, no sample hooks
    git("repack", "-a", "-d", "-q")
    git("prune-packed")
    shutil.rmtree(template / ".git" / "hooks")
    with Ledger(open_project(template).ledger_path):
        pass  # migrated once here, so no example pays for the migrations
    counter = itertools.count()

    def fresh():
        root = base / f"example-{next(counter)}"
        shutil.copytree(template, root, symlinks=True)
        return root

    return fresh


def _env(**values: str) -> None:
    for key, value in values.items():
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)


class Walk:
    """One item walked through a sequence, with what the invariants need to remember."""

    def __init__(self, project, ledger: Ledger, item_id: str):
        self.project, self.ledger, self.item = project, ledger, item_id

    def state(self) -> dict:
        return show_item(self.project, self.ledger, self.item)

    def launch(self, slot: str, mode: str, interrupt: bool = False) -> runs.RunResult | None:
        try:
            launch = runs.prepare(self.project, self.ledger, self.item, slot)
        except DroverError:
            return None
        cancel = threading.Event()
        if interrupt:
            cancel.set()
        _env(AGENT_MODE=mode)
        return runs.execute(self.project, self.ledger, launch, echo=False, cancel=cancel)

    def act(self, operation: str, before: dict) -> dict | None:
        """Apply one operation and check what it alone promises; returns show's data when it read it."""
        after = None
        project, ledger, item = self.project, self.ledger, self.item
        if operation.startswith("run "):
            mode = {"run commits": "commit", "run without commits": "none",
                    "run interrupted": "sleep", "run failed": "fail"}[operation]
            result = self.launch("implement", mode, interrupt=mode == "sleep")
            assert (result is None) == (before["state"] in (State.DONE, State.PARKED)), before
            after = self.state()
            if result is not None and mode == "sleep":
                assert after["state"] == State.INTERRUPTED, after
            if result is not None and mode == "fail":
                assert after["state"] == State.FAILED, after
            if result is not None and mode == "commit":
                assert after["state"] in (State.IN_REVIEW, State.CHANGES_REQUESTED), after
            return after
        elif operation.startswith("review "):
            result = self.launch("review", "none")
            # a review is refused exactly where drive would not review: done, parked, unfinished
            # work, and no implementing run yet (there is nothing but base to judge)
            refused = (State.DONE, State.PARKED, State.INTERRUPTED, State.FAILED)
            never = not any(run["slot"] == "implement" for run in before["runs"])
            assert (result is None) == (before["state"] in refused or never), before
            if result is None:
                return None
            # the run's verdict, recorded as that run after it ended: as an outbox's replay is
            # (a claim of $DROVER_RUN acts only while its run has not ended)
            with acting_as(result.run_id):
                if operation == "review requests changes":
                    try:
                        writes.request_changes(project, ledger, item, "# Not yet\n\nAgain.\n")
                    except DroverError:
                        assert self.state()["state"] == State.PARKED
                elif operation == "review approves":
                    writes.audit(project, ledger, item, "reviewed")
            verdict = review_verdict(ledger, result.run_id)
            expected = {"review requests changes": ("changes requested", "parked"),
                        "review approves": ("approved",), "review records nothing": ("",)}[operation]
            assert verdict in expected, (operation, verdict)
            if operation == "review approves":
                after = self.state()
                reviewed = ledger.run(result.run_id).head
                assert after["audits"][-1]["head"] == reviewed
                covered = bool(reviewed) and reviewed == after["head"]
                assert (after["state"] == State.APPROVED) == covered, after
            return after
        elif operation == "manual audit":
            writes.audit(project, ledger, item, "reviewed", by="Ann")
            after = self.state()
            assert after["audits"][-1]["head"] == after["head"]
            return after
        elif operation == "close-changes":
            try:
                writes.close_changes(project, ledger, item)
            except DroverError:
                assert not before["outstanding"]
        elif operation == "finish":
            self.finish(before)
        elif operation == "park":
            writes.park(project, ledger, item, "the operator takes it")
        elif operation == "unpark":
            try:
                writes.unpark(project, ledger, item)
            except DroverError:
                assert not before["parked"]
        return after

    def finish(self, before: dict) -> None:
        base = drover_git.head_of(self.project.root, self.project.config.base)
        try:
            finished = finishing.finish(self.project, self.ledger, self.item)
        except DroverError:
            # an approved item with commits to merge and a clean checkout is never refused
            assert not (before["state"] == State.APPROVED and before["branch"]
                        and drover_git.commits_beyond(self.project.root, drover_git.head_of(self.project.root, before["branch"]),
                                                      base)), before
            return
        if before["done"]:
            assert finished.lines
            return
        # finish merged: the item was approved, and its approval covered every merged commit
        assert before["state"] == State.APPROVED and before["approved_head"] == before["head"], before
        merged = subprocess.run(["git", "rev-list", f"{base}..{before['head']}"], cwd=self.project.root,
                                capture_output=True, text=True, check=True).stdout.split()
        covered = subprocess.run(["git", "rev-list", before["approved_head"]], cwd=self.project.root,
                                 capture_output=True, text=True, check=True).stdout.split()
        assert merged and set(merged) <= set(covered)
        assert self.state()["state"] == State.DONE

    def check(self, shown: dict | None = None) -> dict:
        """list, show --json, drive's next step and the prompt's posture agree; returns show's data."""
        shown = shown or self.state()
        state = State(shown["state"])
        (row,) = [row for row in list_items(self.project, self.ledger) if row.entry.id == self.item]
        assert row.state == state, (row.state, shown)
        if state == State.APPROVED:
            assert shown["approved_head"] and shown["approved_head"] == shown["head"]
        else:
            assert not shown["approved_head"] or state == State.DONE
        if state in (State.INTERRUPTED, State.FAILED):
            assert shown["reason"]
        if state in IMPLEMENT_NEXT:
            posture = template_data.build(self.project, self.ledger, self.item, "implement").Posture
            expected = {State.INTERRUPTED: "resume", State.FAILED: "resume",
                        State.CHANGES_REQUESTED: "revise"}.get(state)
            if expected:
                assert posture == expected, (state, posture)
            else:
                assert posture in ("build", "continue"), (state, posture)
        assert is_ready(row) == (state not in NOT_DRIVEN | {State.APPROVED} and row.deps_done)
        return shown


# 100 sequences (each runs agents and git) in `make test`, the same ones every time (derandomize);
# DROVER_STATE_EXAMPLES=1000 walks further.
@settings(max_examples=int(os.environ.get("DROVER_STATE_EXAMPLES", "100")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.sampled_from(OPERATIONS), min_size=1, max_size=5))
def test_random_sequences_keep_the_invariants(machine, monkeypatch, sequence):
    root = machine()
    monkeypatch.chdir(root)
    # Walk sets these in os.environ; registering them here has monkeypatch restore them after the
    # test, so the agent mode does not leak into tests that run later in the session
    monkeypatch.delenv("AGENT_MODE", raising=False)
    monkeypatch.delenv("DROVER_RUN", raising=False)
    project = open_project(root)
    try:
        with Ledger(project.ledger_path) as ledger:
            item = writes.new_item(project, ledger, "A thing", "feature", [])
            walk = Walk(project, ledger, item)
            shown = walk.check()
            for operation in sequence:
                shown = walk.check(walk.act(operation, shown))
    finally:
        # the example's repository (its worktree inside) is done with: free the disk
        monkeypatch.chdir(root.parent)
        shutil.rmtree(root, ignore_errors=True)
