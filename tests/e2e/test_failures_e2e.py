"""Failure classes and [retry] policies with the real claude and codex CLIs against the stand-in
model service answering with scripted errors (tests/e2e/standin.py): a 429 is rate_limited and,
under `wait`, resumed after a short reset; a 401 is auth and stops the drive; a service that stops
answering makes the run stalled; a fallback agent takes a rate-limited slot. docs/failures.md says
what each CLI shows and what it does not.
"""
from __future__ import annotations

import json
import os
import time

import pytest

from clis import CLIS, cli_binary, cli_env, drover, project_with_one_item, runs_table
from helpers import git, with_settings, write_requirements

# One script for both slots: the implementer commits, the reviewer approves.
WORK = ('if [ "$DROVER_SLOT" = implement ]; then printf "feature\\n" > feature.txt && git add feature.txt && '
        'git commit -qm "$DROVER_ITEM: feature"; else drover audit "$DROVER_ITEM" --level reviewed --note ok; fi')


# As the Anthropic API answers a spent limit, a retry two minutes off: claude then gives up at once
# (with a short retry-after, or none, it retries a 429 itself and drover never sees it).
SPENT = {"retry-after": "120", "anthropic-ratelimit-unified-status": "rejected",
         "anthropic-ratelimit-unified-reset": str(int(time.time()) + 120)}


def settle(repo, env, **settings: str) -> None:
    """drover.toml's `table__name=value` settings, committed."""
    path = repo / "drover.toml"
    text = path.read_text()
    path.write_text(with_settings(text, settings))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "settings")


def drive(repo, env, *args: str) -> tuple[int, dict, str]:
    done = drover(repo, env, "drive", "--json", *args, check=False)
    return done.returncode, json.loads(done.stdout), done.stderr


def quick_auth(name: str, env: dict[str, str]) -> dict[str, str]:
    # claude retries a 401 ten times with growing pauses (minutes) before it gives up; the
    # operator's CLAUDE_CODE_MAX_RETRIES shortens that, and drover leaves the CLI's own setting alone
    return {**env, "CLAUDE_CODE_MAX_RETRIES": "0"} if name == "claude" else env


@pytest.mark.parametrize("name", CLIS)
def test_a_429_is_rate_limited_and_the_drive_resumes_after_the_wait(name, service, repo, tmp_path):
    env, item = project_with_one_item(name, cli_binary(name), service, repo, tmp_path)
    service.command = WORK
    # neither CLI names a reset for a plain 429 (docs/failures.md): drover waits wait_default
    settle(repo, env, retry__wait_default='"2s"')
    service.fail_status, service.fail_for = 429, 1.0  # a limit that lifts a second after the first request
    service.fail_headers = SPENT
    code, report, progress = drive(repo, env)
    assert code == 0, progress
    [row] = report["items"]
    assert row["result"] == "approved"
    assert row["failures"], (progress, [entry.answered for entry in service.requests])
    failure = row["failures"][0]
    assert failure["class"] == "rate_limited" and "429" in failure["reason"]
    assert failure["action"] == "waiting 2s"
    assert f"{item} implement: rate_limited, waiting 2s" in progress
    runs = runs_table(repo)
    assert runs[0]["failure"] == "rate_limited" and runs[-1]["failure"] is None
    assert any(entry.answered.startswith("error 429") for entry in service.requests)
    assert any(entry.answered == "final" for entry in service.requests)


def test_codex_usage_limit_names_its_reset_and_the_wait_is_bounded(service, repo, tmp_path):
    env, item = project_with_one_item("codex", cli_binary("codex"), service, repo, tmp_path)
    service.command = WORK
    settle(repo, env, retry__wait_max='"2s"')
    service.fail_status, service.fail_for = 429, 1.0
    service.fail_body = {"error": {"type": "usage_limit_reached", "message": "usage limit",
                                   "resets_in_seconds": 3600, "resets_at": int(time.time()) + 3600}}
    code, report, progress = drive(repo, env)
    assert code == 0, progress
    failure = report["items"][0]["failures"][0]
    assert failure["class"] == "rate_limited" and "usage limit" in failure["reason"]
    assert failure["reset_at"], "codex names the reset: `try again at 10:50 PM`"
    assert failure["action"] == "waiting 2s (bounded by [retry] wait_max)"


@pytest.mark.parametrize("name", CLIS)
def test_a_401_is_auth_and_stops_the_drive(name, service, repo, tmp_path):
    env, first = project_with_one_item(name, cli_binary(name), service, repo, tmp_path)
    env = quick_auth(name, env)
    second = drover(repo, env, "new", "Another feature").stdout.split()[0]
    write_requirements(repo, second, "1. Another file.")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"item {second}")
    service.command = WORK
    service.fail_status, service.fail_until = 401, time.time() + 3600
    code, report, progress = drive(repo, env)
    assert code == 1
    assert [(row["id"], row["result"]) for row in report["items"]] == [(first, "failed")]
    failure = report["items"][0]["failures"][0]
    assert failure["class"] == "auth" and failure["action"] == "stopping the drive"
    assert "401" in failure["reason"] or "API key" in failure["reason"]
    assert f"not started: {second}" in progress
    assert [run["item"] for run in runs_table(repo)] == [first]


@pytest.mark.parametrize("name", CLIS)
def test_a_service_that_stops_answering_makes_the_run_stalled(name, service, repo, tmp_path):
    env, item = project_with_one_item(name, cli_binary(name), service, repo, tmp_path)
    service.stall = True
    # the stall clock also runs while the CLI starts; a loaded two-core machine has kept
    # claude silent for over 4 s before its first request, so the ceiling leaves room for that
    settle(repo, env, agent__stall='"12s"', retry__stalled='"park"')
    try:
        code, report, progress = drive(repo, env)
    finally:
        service.stall = False
    [row] = report["items"]
    assert row["result"] == "parked", progress
    assert row["failures"][0]["class"] == "stalled"
    [run] = runs_table(repo)
    assert (run["outcome"], run["failure"]) == ("timeout", "stalled")
    answered = [entry.answered for entry in service.requests]
    assert "stalled" in answered, (answered, progress)
    shown = json.loads(drover(repo, env, "show", item, "--json").stdout)
    assert shown["parked_reason"].startswith("stalled: no output for")  # the class named once


@pytest.mark.parametrize("name", CLIS)
def test_the_fallback_agent_takes_a_rate_limited_slot(name, service, repo, tmp_path):
    other = "codex" if name == "claude" else "claude"
    env, item = project_with_one_item(name, cli_binary(name), service, repo, tmp_path)
    other_env = cli_env(other, cli_binary(other), service, tmp_path)
    env = {**other_env, **env, "PATH": os.pathsep.join([other_env["PATH"], env["PATH"]])}
    sandboxed = "sandboxed = true\n" if os.geteuid() == 0 else ""
    (repo / "drover.toml").write_text((repo / "drover.toml").read_text()
                                      + f'\n[agent.fallback]\npreset = "{other}"\n{sandboxed}')
    settle(repo, env, retry__rate_limited='"fallback"')
    service.command = WORK
    # only the slot's own CLI is limited: its protocol's requests answer 429
    service.fail_status, service.fail_until = 429, time.time() + 3600
    service.fail_headers = SPENT
    service.fail_only = "/messages" if name == "claude" else "/responses"
    code, report, progress = drive(repo, env)
    assert code == 0, progress
    [row] = report["items"]
    assert row["result"] == "approved"
    assert [entry["action"] for entry in row["failures"]] == [f"fallback to {other}", f"fallback to {other}"]
    assert [(run["slot"], run["agent"], run["failure"]) for run in runs_table(repo)] == [
        ("implement", name, "rate_limited"), ("implement", other, None),
        ("review", name, "rate_limited"), ("review", other, None)]
    assert (repo / ".drover" / "worktrees" / item / "feature.txt").exists()


def test_codex_at_an_address_nothing_answers_is_stalled_not_kept_alive_by_its_retries(service, repo, tmp_path):
    """codex with a base_url nothing listens on never gives up (request_max_retries = 0 and all): it
    prints `Reconnecting... waiting for network` with pauses growing to a minute. Those notices are
    no sign of work, so `[agent] stall` ends the run; before, each one kept the run alive until
    `[agent] timeout` (docs/failures.md). The stall is longer than codex's longest pause."""
    env, item = project_with_one_item("codex", cli_binary("codex"), service, repo, tmp_path)
    config = tmp_path / "codex" / "config.toml"
    config.write_text(config.read_text().replace(service.base_url, "http://127.0.0.1:9", 1))
    settle(repo, env, agent__stall='"75s"', retry__stalled='"park"', retry__timeout='"park"')
    code, report, progress = drive(repo, env)
    [row] = report["items"]
    assert row["result"] == "parked", progress
    assert [failure["class"] for failure in row["failures"]] == ["stalled"], row["failures"]
    [run] = runs_table(repo)
    assert "Reconnecting... waiting for network" in (repo / run["log_path"]).read_text()
    assert not service.requests  # it never reached the stand-in
