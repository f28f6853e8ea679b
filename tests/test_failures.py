"""Failure classes and the [retry] policies (docs/failures.md): the classifier on what the real
CLIs print, the policies' decisions, and `drive` with a scripted agent (tests/agents/failing_agent.py,
a real subprocess) failing each way, hostile ones included."""
from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from helpers import BIN, TESTS, configure, drover, git, ledger_rows, line_of_key, made_once, new_item, with_settings
from drover.agents.failures import Failure, classify, clean, reset_named
from drover.config import parse_config
from drover.loop.retry import Tried, decide

FAILING = TESTS / "agents" / "failing_agent.py"
NOW = datetime(2026, 12, 4, 22, 0, tzinfo=timezone.utc)

# What claude 2.1.197 printed (trimmed) when the stand-in model service answered 429, and 401.
CLAUDE_429 = "\n".join(json.dumps(event) for event in (
    {"type": "system", "subtype": "init", "model": "claude-opus"},
    {"type": "assistant", "error": "rate_limit", "message": {"model": "<synthetic>", "content": [
        {"type": "text", "text": "API Error: Request rejected (429) · This request would exceed your rate limit"}]}},
    {"type": "result", "subtype": "success", "is_error": True, "api_error_status": 429,
     "result": "API Error: Request rejected (429) · This request would exceed your rate limit"},
))
CLAUDE_401_RETRYING = json.dumps({"type": "system", "subtype": "api_retry", "attempt": 1, "max_retries": 10,
                                  "error_status": 401, "error": "authentication_failed"})
# What codex 0.171.0 printed for a 429 (request_max_retries = 0), a usage limit, and a 401.
CODEX_429 = '{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}'
CODEX_USAGE = ('{"type":"turn.failed","error":{"message":"You\u2019ve hit your usage limit. Upgrade to Pro '
               '(https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more '
               'credits or try again at 9:50 PM."}}')
CODEX_401 = ('{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: invalid x-api-key, '
             'url: http://127.0.0.1:41387/v1/responses"}}')


# --- the classifier --------------------------------------------------------------------------------


def test_claude_stream_json_429_is_rate_limited_with_the_words_that_decided_it():
    failure = classify(outcome="exited", exit_code=1, jsonl=CLAUDE_429, now=NOW)
    assert failure is not None and failure.failure == "rate_limited"
    assert "429" in failure.reason and failure.reset_at is None


def test_claude_rate_limit_event_names_the_reset():
    reset = int((NOW + timedelta(minutes=8)).timestamp())
    event = json.dumps({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": reset}})
    failure = classify(outcome="exited", exit_code=1, jsonl=event + "\n" + CLAUDE_429, now=NOW)
    assert failure is not None and failure.failure == "rate_limited"
    assert failure.reset_at == NOW + timedelta(minutes=8)
    assert failure.reset_text == "2026-12-04T22:08:00+00:00"


def test_an_allowed_rate_limit_event_is_no_failure_sign():
    event = json.dumps({"type": "rate_limit_event", "rate_limit_info": {"status": "allowed", "resetsAt": 1}})
    failure = classify(outcome="exited", exit_code=2, jsonl=event, log="boom", now=NOW)
    assert failure == Failure("crashed", "exited 2: boom")


def test_claude_401_and_codex_401_are_auth():
    for text in (CLAUDE_401_RETRYING, CODEX_401):
        failure = classify(outcome="exited", exit_code=1, jsonl=text, now=NOW)
        assert failure is not None and failure.failure == "auth", text
    assert "invalid x-api-key" in classify(outcome="exited", exit_code=1, jsonl=CODEX_401, now=NOW).reason


def test_codex_429_and_usage_limit_are_rate_limited_and_the_usage_limit_names_its_reset():
    plain = classify(outcome="exited", exit_code=1, jsonl=CODEX_429, now=NOW)
    assert plain is not None and plain.failure == "rate_limited" and plain.reset_at is None
    usage = classify(outcome="exited", exit_code=1, jsonl=CODEX_USAGE, now=NOW)
    assert usage is not None and usage.failure == "rate_limited"
    local = NOW.astimezone()
    expected = local.replace(hour=21, minute=50, second=0, microsecond=0)
    if expected < local - timedelta(minutes=1):
        expected += timedelta(days=1)
    assert usage.reset_at == expected.astimezone(timezone.utc)


def test_reset_times_named_in_words():
    assert reset_named("try again in 90 seconds", NOW) == NOW + timedelta(seconds=90)
    assert reset_named("retry after 2 minutes", NOW) == NOW + timedelta(minutes=2)
    assert reset_named("limit resets at 2026-12-05T02:10:00Z", NOW) == datetime(2026, 12, 5, 2, 10,
                                                                                 tzinfo=timezone.utc)
    assert reset_named("Claude AI usage limit reached|1796000000", NOW) == datetime.fromtimestamp(
        1796000000, timezone.utc)
    assert reset_named("try again at Dec 5th, 2026 1:05 AM", NOW) == NOW.astimezone().replace(
        year=2026, month=12, day=5, hour=1, minute=5, second=0, microsecond=0).astimezone(timezone.utc)
    assert reset_named("nothing here", NOW) is None


def test_the_exit_decides_before_the_words():
    assert classify(outcome="exited", exit_code=0, log="429 rate limit", now=NOW) is None
    assert classify(outcome="interrupted", exit_code=None, reason="stopped by `drover stop`",
                    log="401", now=NOW) == Failure("interrupted", "stopped by `drover stop`")
    assert classify(outcome="timeout", exit_code=None, stalled="stalled: no output for 0:05", now=NOW) == Failure(
        "stalled", "stalled: no output for 0:05")
    assert classify(outcome="timeout", exit_code=None, log="usage limit", now=NOW).failure == "timeout"
    crashed = classify(outcome="exited", exit_code=3, log="Traceback\nValueError: fell over\n"
                       "[drover] something drover wrote", now=NOW)
    assert crashed == Failure("crashed", "exited 3: ValueError: fell over")


def test_a_crashed_runs_reason_is_gits_error_not_the_hint_after_it(repo):
    """A run that ended on a failed git kept git's last line as its reason, and git writes its advice
    after its error: `crashed: exited 1: hint: run "git cherry-pick --abort".`, where the log said what
    failed. The reason passes over the `hint:` lines (coloured or not) to git's error."""
    configure(repo)
    item = new_item(repo, "Add a thing")
    agent = ("sh -c 'echo 1 > f; git add f; git commit -qm one; git switch -qc side; echo 2 > f; git commit -qam two; "
             "git switch -q -; echo 3 > f; git commit -qam three; git cherry-pick side'")
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace(f'command = "{sys.executable} ', f'command = "{agent} #', 1))
    git(repo, "commit", "-qam", "an agent whose git fails")
    done = drover(repo, "run", item)
    assert done.returncode == 1 and 'hint: run "git cherry-pick --abort".' in done.stdout, done.stdout
    [run] = runs_of(repo)
    assert run["failure"] == "crashed", run
    assert re.fullmatch(r"exited 1: error: could not apply [0-9a-f]{7,}\.\.\. two", run["reason"]), run["reason"]
    coloured = classify(outcome="exited", exit_code=1, log="fatal: bad object\n\x1b[33mhint: try again\x1b[m\n", now=NOW)
    assert coloured == Failure("crashed", "exited 1: fatal: bad object")
    assert classify(outcome="exited", exit_code=1, log="hint: all advice\n", now=NOW) == Failure(
        "crashed", "exited 1: hint: all advice")


def test_kept_words_lose_escapes_and_control_characters_and_are_cut_short():
    said = clean("\x1b[2J\x1b]0;owned\x07429 \x1b[31mred\x00" + "x" * 5000)
    assert "\x1b" not in said and "\x00" not in said and "\x07" not in said
    assert said.startswith("429") and len(said) <= 240


def test_a_class_outside_the_vocabulary_is_refused():
    with pytest.raises(ValueError):
        Failure("bored", "no")


# --- the policies -----------------------------------------------------------------------------------


def config(retry: dict | None = None, fallback: bool = False):
    agent: dict = {"fallback": {"preset": "codex", "name": "backup"}} if fallback else {}
    return parse_config({"retry": retry or {}, "agent": agent})


def test_the_documented_defaults():
    retry = config().retry
    assert [retry.policy(name) for name in ("rate_limited", "auth", "timeout", "stalled", "crashed",
                                            "no_verdict", "interrupted", "over_budget")] == [
        "wait", "stop", "fresh", "fresh", "fresh", "fresh", "stop", "park"]
    assert (retry.wait_max, retry.wait_default, retry.fresh_max) == ("6h", "10m", 1)


def test_a_wait_lasts_until_the_reset_and_never_past_wait_max():
    near = Failure("rate_limited", "429", NOW + timedelta(minutes=8))
    assert decide(near, "implement", Tried(), config(), NOW).until == NOW + timedelta(minutes=8)
    forged = Failure("rate_limited", "429", datetime(2999, 1, 1, tzinfo=timezone.utc))
    bounded = decide(forged, "implement", Tried(), config({"wait_max": "30m"}), NOW)
    assert bounded.policy == "wait" and bounded.until == NOW + timedelta(minutes=30)
    assert "bounded by [retry] wait_max" in bounded.note
    past = Failure("rate_limited", "429", NOW - timedelta(days=1))
    assert decide(past, "implement", Tried(), config(), NOW).until == NOW
    unnamed = decide(Failure("rate_limited", "429"), "implement", Tried(), config({"wait_default": "90s"}), NOW)
    assert unnamed.until == NOW + timedelta(seconds=90) and unnamed.note == "waiting 1m30s"
    assert decide(near, "implement", Tried(waits=12), config(), NOW).policy == "park"
    once = decide(near, "implement", Tried(waits=1), config({"waits_max": 1}), NOW)
    assert once.note == "parked: rate limited after 1 wait ([retry] waits_max)"


def test_fresh_runs_are_counted_then_the_item_is_parked():
    crash = Failure("crashed", "exited 3")
    assert decide(crash, "implement", Tried(), config(), NOW).policy == "fresh"
    used = decide(crash, "implement", Tried(fresh=1), config(), NOW)
    assert used.policy == "park" and "fresh_max" in used.note
    assert decide(crash, "implement", Tried(fresh=1), config({"fresh_max": 2}), NOW).policy == "fresh"


def test_fallback_takes_the_slot_once_and_parks_without_a_fallback_table():
    limited = Failure("rate_limited", "429")
    policy = {"rate_limited": "fallback"}
    assert decide(limited, "implement", Tried(), config(policy, fallback=True), NOW).note == "fallback to backup"
    assert decide(limited, "implement", Tried(fallback={"implement"}), config(policy | {"fresh_max": 3},
                                                                             fallback=True), NOW).policy == "park"
    missing = decide(limited, "implement", Tried(), config(policy), NOW)
    assert missing.policy == "park" and "no [agent.fallback]" in missing.note


def test_stop_and_park_are_the_operators_choice():
    auth = Failure("auth", "401")
    assert decide(auth, "review", Tried(), config(), NOW).policy == "stop"
    assert decide(auth, "review", Tried(), config({"auth": "park"}), NOW).policy == "park"


def test_bad_retry_settings_are_one_line_each_naming_the_key(repo):
    configure(repo)
    (repo / "drover.toml").write_text((repo / "drover.toml").read_text()
                                      .replace('auth = "stop"', 'auth = "nap"')
                                      .replace('stall = "15m"', 'stall = "soon"'))
    done = drover(repo, "list")
    assert done.returncode == 2
    assert ("drover.toml: [retry] auth: expected one of wait, fresh, fallback, stop, park, not 'nap' "
            f"(line {line_of_key(repo, 'retry', 'auth')})") in done.stderr
    assert "drover.toml: [agent] stall: expected a duration" in done.stderr
    assert f"(line {line_of_key(repo, 'agent', 'stall')})" in done.stderr
    assert "Traceback" not in done.stderr


# --- drive with a scripted agent ----------------------------------------------------------------------


def project(repo: Path, *items: str, extra: str = "", **settings: str) -> list[str]:
    """The failing agent implementing and reviewing; `settings` as `table__name=value`; the items made.
    Made once per test process for each set of arguments, then copied (helpers.made_once)."""
    return made_once(repo, ("test_failures", items, extra, tuple(sorted(settings.items()))),
                     lambda: _project(repo, *items, extra=extra, **settings))


def _project(repo: Path, *items: str, extra: str = "", **settings: str) -> list[str]:
    configure(repo, extra)
    path = repo / "drover.toml"
    text = path.read_text().replace(str(TESTS / "agents" / "loop_agent.py"), str(FAILING))
    path.write_text(with_settings(text, settings))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the failing agent")
    return [new_item(repo, title) for title in items or ("Add work",)]


def runs_of(repo: Path) -> list[dict]:
    return ledger_rows(repo, "runs")


def drive_json(repo: Path, *args: str, plan: str, **env: str) -> tuple[int, dict, str]:
    done = drover(repo, "drive", "--json", *args, env={"FAIL_PLAN": plan, **env})
    return done.returncode, json.loads(done.stdout), done.stderr


def test_a_rate_limit_with_a_near_reset_waits_then_the_item_goes_on(repo):
    [item] = project(repo)
    code, report, progress = drive_json(repo, plan="implement=rate", FAIL_RESET_IN="1")
    assert code == 0, progress
    [row] = report["items"]
    assert row["result"] == "approved"
    [failure] = row["failures"]
    assert failure["class"] == "rate_limited" and failure["action"].startswith("waiting")
    assert "429" in failure["reason"] and failure["reset_at"]
    assert re.search(rf"^{item} implement: rate_limited \(resets \d\d:\d\d\), waiting \d+s$", progress, re.M), progress
    runs = runs_of(repo)
    assert [(run["slot"], run["failure"]) for run in runs] == [("implement", "rate_limited"), ("implement", None),
                                                               ("review", None)]
    assert runs[0]["reset_at"] == failure["reset_at"]


def test_a_forged_far_future_reset_waits_no_longer_than_wait_max(repo):
    project(repo, retry__wait_max='"1s"')
    code, report, progress = drive_json(repo, plan="implement=rate_far")
    assert code == 0, progress
    [failure] = report["items"][0]["failures"]
    assert failure["reset_at"].startswith("2999-01-01")
    assert failure["action"] == "waiting 1s (bounded by [retry] wait_max)"


@pytest.mark.parametrize(("settings", "plan", "env"), [
    ({"retry__wait_max": '"99999999999999999999h"'}, "implement=rate", {"FAIL_RESET_IN": "1"}),
    ({"retry__wait_max": '"1s"', "retry__wait_default": '"99999999999999999999h"'}, "implement=lines",
     {"FAIL_LINE": "Error: 429 Too Many Requests"}),
])
def test_a_wait_longer_than_a_datetime_holds_is_a_wait_not_a_crash(repo, settings, plan, env):
    # drover.toml takes any number of hours; each was an OverflowError that ended the item `failed`
    project(repo, **settings)
    code, report, progress = drive_json(repo, plan=plan, **env)
    assert code == 0 and "OverflowError" not in progress, progress
    [failure] = report["items"][0]["failures"]
    assert failure["class"] == "rate_limited" and failure["action"].startswith("waiting ")
    assert report["items"][0]["result"] == "approved"


def test_claude_events_from_a_command_name_the_reset(repo):
    project(repo)
    code, report, progress = drive_json(repo, plan="implement=rate_claude", FAIL_RESET_IN="1")
    assert code == 0, progress
    [failure] = report["items"][0]["failures"]
    # the reset comes from the rate_limit_event, the words from claude's last event
    assert failure["class"] == "rate_limited" and failure["reset_at"]
    assert failure["reason"] == "api error 429: Claude AI usage limit reached"


def test_auth_stops_the_drive_and_the_next_item_never_starts(repo):
    first, second = project(repo, "First", "Second")
    code, report, progress = drive_json(repo, plan=f"{first}/implement=auth")
    assert code == 1
    assert [(row["id"], row["result"]) for row in report["items"]] == [(first, "failed")]
    assert report["items"][0]["failures"][0]["class"] == "auth"
    assert f"not started: {second}" in progress
    assert [run["item"] for run in runs_of(repo)] == [first]


def test_a_stop_ends_the_items_in_flight_at_their_next_step(repo):
    """auth = "stop" under --jobs 2: the item already implementing when the other's key was refused
    goes no further, no check, no review, no merge."""
    first, second = project(repo, "First", "Second")
    code, report, progress = drive_json(repo, "--jobs", "2", "--finish",
                                        plan=f"{first}/implement=after_auth {second}/implement=auth", FAIL_AFTER=second)
    assert code == 1, progress
    results = {row["id"]: row for row in report["items"]}
    assert results[second]["failures"][0]["class"] == "auth"
    assert results[first]["result"] == "failed" and "the drive stopped" in results[first]["note"], results
    assert [(run["item"], run["slot"]) for run in runs_of(repo)].count((first, "review")) == 0
    assert not json.loads(drover(repo, "show", first, "--json").stdout)["done"]


def test_a_stop_ends_a_rate_limit_wait_of_another_item(repo):
    """auth = "stop" under --jobs 2 while the other item waits out a rate limit (ten minutes named):
    the wait ends with the stop, where it ran its whole course and held the drive that long."""
    first, second = project(repo, "First", "Second")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "FAIL_RESET_IN": "600",
           "FAIL_PLAN": f"{first}/implement=rate {second}/implement=auth_after_rate", "FAIL_AFTER_RATE": first}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--json", "--jobs", "2"], cwd=repo, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, progress = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 1, progress
    results = {row["id"]: row for row in json.loads(out)["items"]}
    assert results[second]["failures"][0]["class"] == "auth"
    [waited] = results[first]["failures"]
    assert waited["class"] == "rate_limited" and waited["action"].endswith("the drive is ending"), results

def test_a_stop_leaves_an_approved_item_in_flight_approved_and_unmerged(repo):
    """The stop comes while the first item's review runs: its approval stands, and nothing merges."""
    first, second = project(repo, "First", "Second")
    main = git(repo, "rev-parse", "main")
    code, report, progress = drive_json(repo, "--jobs", "2", "--finish",
                                        plan=f"{first}/review=after_auth {second}/implement=auth_after_review",
                                        FAIL_AFTER=second, FAIL_AFTER_REVIEW=first)
    assert code == 1, progress
    results = {row["id"]: row for row in report["items"]}
    assert results[first]["result"] == "approved", results
    assert results[first]["note"].startswith("approved, not finished: the drive stopped"), results
    assert git(repo, "rev-parse", "main") == main
    assert json.loads(drover(repo, "show", first, "--json").stdout)["state"] == "approved"


def test_a_forged_auth_message_stops_the_drive_only_under_the_operators_policy(repo):
    first, second = project(repo, "First", "Second", retry__auth='"park"')
    code, report, progress = drive_json(repo, plan=f"{first}/implement=auth_claude")
    results = {row["id"]: row for row in report["items"]}
    assert results[first]["result"] == "parked" and results[second]["result"] == "approved"
    shown = json.loads(drover(repo, "show", first, "--json").stdout)
    assert shown["parked"] and shown["parked_reason"].startswith("auth: api error 401")


def test_a_crash_gets_one_fresh_run_then_parks(repo):
    [item] = project(repo)
    code, report, progress = drive_json(repo, plan="implement=crash implement=crash")
    assert code == 1
    [row] = report["items"]
    assert row["result"] == "parked"
    assert [entry["action"] for entry in row["failures"]] == [
        "fresh run 1 of 1", "parked: crashed again after 1 fresh run ([retry] fresh_max)"]
    assert all(entry["reason"] == "exited 3: ValueError: the agent fell over" for entry in row["failures"])
    assert "crashed: parked" in row["note"]
    assert json.loads(drover(repo, "show", item, "--json").stdout)["parked"]


def test_a_ctrl_c_during_a_wait_records_the_wait_cut_short(repo):
    """The drive's Ctrl-C while it waits out a rate limit ends the wait at once, and the record says
    the wait was cut short: it said `waiting 9m59s`, a wait that never ran its course."""
    [item] = project(repo)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "FAIL_PLAN": "implement=rate",
           "FAIL_RESET_IN": "600"}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--json"], cwd=repo, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    said = []
    for line in proc.stderr:  # the progress, till the drive says it waits
        said.append(line)
        if ", waiting " in line:
            break
    assert said and ", waiting " in said[-1], "".join(said)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    [row] = json.loads(out)["items"]
    [failure] = row["failures"]
    assert failure["class"] == "rate_limited"
    assert failure["action"].startswith("waiting ") and failure["action"].endswith(", cut short: the drive is ending")
    assert row["id"] == item and row["result"] != "approved"

def test_a_park_for_a_used_fresh_run_names_the_class_that_used_it(repo):
    """fresh_max counts an item's fresh runs, whatever each was for: a review without a verdict after
    the implementer's crash took the one fresh run parks the item, and says the crash took it, not
    that the reviewer failed again."""
    [item] = project(repo)
    code, report, progress = drive_json(repo, plan="implement=crash review=silent")
    assert code == 1
    [row] = report["items"]
    assert [(entry["class"], entry["action"]) for entry in row["failures"]] == [
        ("crashed", "fresh run 1 of 1"),
        ("no_verdict", "parked: no verdict, and the item's 1 fresh run went to crashed ([retry] fresh_max)")]
    shown = json.loads(drover(repo, "show", item, "--json").stdout)
    assert "went to crashed" in shown["parked_reason"]

def test_a_silent_agent_is_stalled_its_processes_end_and_a_fresh_run_follows(repo):
    [item] = project(repo, agent__stall='"1s"')
    code, report, progress = drive_json(repo, plan="implement=stall")
    assert code == 0, progress
    [failure] = report["items"][0]["failures"]
    assert failure["class"] == "stalled" and failure["reason"].startswith("stalled: no output for")
    first = runs_of(repo)[0]
    assert (first["outcome"], first["failure"]) == ("timeout", "stalled")
    assert "[drover] stalled: no output for" in (repo / first["log_path"]).read_text()
    shown = drover(repo, "show", item).stdout
    assert "failure: stalled: no output for" in shown and "stalled: stalled" not in shown  # the class said once
    assert f"{item}: implement stalled after " in progress and f"{item}: implement timeout after " not in progress


def test_codex_retrying_an_unreachable_service_for_ever_is_stalled_not_alive(repo, tmp_path):
    """codex 0.171.0 with a wrong base_url prints `Reconnecting... waiting for network` with pauses of
    a minute at most and never gives up (request_max_retries = 0 notwithstanding): each notice kept
    `[agent] stall` from ending a run that never reached the model, so a reviewer misconfigured
    held each item for the whole `[agent] timeout`, two hours by default (a new user, on wcwidth)."""
    configure(repo)
    path = repo / "drover.toml"
    text = path.read_text().replace(f'command = "{sys.executable} {TESTS / "agents" / "loop_agent.py"}"',
                                    'command = ""', 1).replace('preset = "script" ', 'preset = "codex" ', 1)
    path.write_text(with_settings(text, {"agent__stall": '"2s"', "agent__timeout": '"90s"',
                                         "retry__stalled": '"park"', "retry__timeout": '"park"'}))
    git(repo, "commit", "-qam", "codex")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "codex").write_text(
        "#!/bin/sh\ncat >/dev/null\nwhile :; do\n"
        "  echo '{\"type\":\"error\",\"message\":\"Reconnecting... waiting for network (Connection failed)\"}'\n"
        "  sleep 0.3\ndone\n")
    (bindir / "codex").chmod(0o755)
    item = new_item(repo, "Add work")
    done = drover(repo, "drive", "--json", item, env={"PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"})
    [row] = json.loads(done.stdout)["items"]
    assert row["result"] == "parked", done.stderr
    assert [failure["class"] for failure in row["failures"]] == ["stalled"], row["failures"]
    [run] = ledger_rows(repo, "runs")
    assert (run["outcome"], run["failure"]) == ("timeout", "stalled")
    assert "[error] Reconnecting... waiting for network" in (repo / run["log_path"]).read_text()  # still logged


def test_a_stalled_run_parked_by_its_policy_names_the_class_once(repo):
    [item] = project(repo, agent__stall='"1s"', retry__stalled='"park"')
    code, report, progress = drive_json(repo, plan="implement=stall")
    assert report["items"][0]["result"] == "parked", progress
    reason = json.loads(drover(repo, "show", item, "--json").stdout)["parked_reason"]
    assert reason.startswith("stalled: no output for ") and "stalled: stalled" not in reason, reason


def test_a_timeout_is_its_own_class_and_parks_under_park(repo):
    project(repo, agent__timeout='"1s"', agent__stall='"0"', retry__timeout='"park"')
    code, report, progress = drive_json(repo, plan="implement=sleep")
    [row] = report["items"]
    assert row["result"] == "parked" and row["failures"][0]["class"] == "timeout"
    assert runs_of(repo)[0]["failure"] == "timeout"


def test_a_review_that_failed_after_its_verdict_is_not_reviewed_again(repo):
    # a fresh review met the first one's findings still outstanding, with no implementing run
    # between: it approved them unaddressed (or spent another round), then the item was parked
    [item] = project(repo)
    code, report, progress = drive_json(repo, "--finish", plan="review=changes_crash review=approve_crash")
    assert code == 0, progress
    [row] = report["items"]
    assert row["result"] == "finished" and row["rounds"] == 1
    assert [(failure["class"], failure["action"]) for failure in row["failures"]] == [
        ("crashed", "its verdict stands: not run again")] * 2
    assert [(run["slot"], run["failure"]) for run in runs_of(repo)] == [
        ("implement", None), ("review", "crashed"), ("implement", None), ("review", "crashed")]
    assert f"{item}: review exit 3 after" in progress and "it recorded: changes requested (1 finding)" in progress


def test_a_review_without_a_verdict_gets_one_fresh_review(repo):
    project(repo)
    code, report, progress = drive_json(repo, plan="review=silent")
    assert code == 0, progress
    [failure] = report["items"][0]["failures"]
    assert failure["class"] == "no_verdict" and failure["action"] == "fresh run 1 of 1"
    assert [(run["slot"], run["failure"]) for run in runs_of(repo)] == [
        ("implement", None), ("review", "no_verdict"), ("review", None)]


def test_the_fallback_agent_takes_a_rate_limited_slot(repo):
    fallback = f'\n[agent.fallback]\ncommand = "{sys.executable} {FAILING}"\npreset = "script"\nname = "backup"\n'
    project(repo, extra=fallback, retry__rate_limited='"fallback"')
    code, report, progress = drive_json(repo, plan="implement=rate")
    assert code == 0, progress
    assert "fallback agent backup (preset script)" in progress
    assert report["items"][0]["failures"][0]["action"] == "fallback to backup"
    assert [(run["slot"], run["agent"]) for run in runs_of(repo)] == [
        ("implement", "implementer"), ("implement", "backup"), ("review", "reviewer")]


def test_fallback_without_a_fallback_table_is_said_at_the_start_and_parks(repo):
    project(repo, retry__rate_limited='"fallback"')
    code, report, progress = drive_json(repo, plan="implement=rate")
    assert progress.count("there is no [agent.fallback]: fallback parks the item") == 1
    assert report["items"][0]["result"] == "parked"


def test_a_hostile_reason_reaches_the_ledger_and_screen_without_escapes(repo):
    [item] = project(repo, retry__rate_limited='"park"')
    code, report, progress = drive_json(repo, plan="implement=escape")
    [failure] = report["items"][0]["failures"]
    assert failure["class"] == "rate_limited"
    for text in (failure["reason"], progress, drover(repo, "show", item).stdout, runs_of(repo)[0]["reason"]):
        assert "\x1b" not in text and "\x07" not in text and "\x00" not in text
    assert len(failure["reason"]) <= 240


ODD_LINES = {  # hostile review 24: each raised in the classifier, and the whole drive ended with a traceback
    "nested": '{"type": "result", "is_error": true, "result": ' + "[" * 5_000,  # within the log tail read
    "epoch": '{"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1%s}}' % ("0" * 400),
    "surrogate": json.dumps({"type": "result", "is_error": True, "result": "429 rate limit \ud800"}),
    "year-one": "Error: 429 rate limit, resets at 0001-01-01T00:00:00+05:00",
}


@pytest.mark.parametrize("line", sorted(ODD_LINES))
def test_a_line_the_classifier_cannot_read_fails_its_run_not_the_drive(repo, line):
    first, second = project(repo, "First", "Second", retry__crashed='"park"', retry__rate_limited='"park"')
    done = drover(repo, "drive", "--json", env={"FAIL_PLAN": f"{first}/implement=lines", "FAIL_LINE": ODD_LINES[line]},
                  process=True)
    assert "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert [(row["id"], row["result"]) for row in report["items"]] == [(first, "parked"), (second, "approved")]
    [failure] = report["items"][0]["failures"]
    assert failure["class"] in ("crashed", "rate_limited") and "\ud800" not in failure["reason"]
    assert runs_of(repo)[0]["failure"] == failure["class"]


def test_drive_summary_names_each_class_and_what_was_done(repo):
    [item] = project(repo)
    done = drover(repo, "drive", env={"FAIL_PLAN": "implement=crash"})
    assert done.returncode == 0, done.stdout
    assert re.search(rf"^{item}: crashed: fresh run 1 of 1 \(run \S+\)$", done.stdout, re.M), done.stdout
    assert "retry: rate_limited wait, auth stop" in done.stdout


def test_drover_stop_makes_the_run_interrupted_and_the_drive_stops_by_default(repo):
    import os
    import subprocess
    import time

    from helpers import BIN

    [item] = project(repo)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "FAIL_PLAN": "implement=sleep"}
    proc = subprocess.Popen([str(BIN / "drover"), "drive", "--json"], cwd=repo, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(run["pid"] for run in _maybe_runs(repo)):
            time.sleep(0.1)
        stopped = drover(repo, "stop", item, process=True)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert stopped.returncode == 0, stopped.stderr
    [row] = json.loads(out)["items"]
    [failure] = row["failures"]
    assert failure["class"] == "interrupted" and "drover stop" in failure["reason"]
    assert failure["action"] == "stopping the drive" and proc.returncode == 1
    assert runs_of(repo)[0]["failure"] == "interrupted"


def _maybe_runs(repo: Path) -> list[dict]:
    try:
        return runs_of(repo)
    except sqlite3.Error:
        return []


def test_a_drive_after_a_sigkilled_one_waits_out_the_rate_limit_its_predecessor_met(repo):
    """A night's drive was SIGKILLed while it waited out a rate limit whose reset it had on record; the
    `drover drive` that resumed the item launched at once, into the same limit (another failed run, and
    another wait). The resumed item waits for the recorded reset first, as a policy of `wait` would
    have, and says so."""
    [item] = project(repo)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "FAIL_PLAN": "implement=rate",
           "FAIL_RESET_IN": "5"}
    killed = subprocess.Popen([str(BIN / "drover"), "drive"], cwd=repo, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    deadline = datetime.now() + timedelta(seconds=60)
    while datetime.now() < deadline and not any(run["failure"] == "rate_limited" for run in runs_of(repo)):
        time.sleep(0.05)
    killed.kill()
    killed.communicate(timeout=30)
    [limited] = runs_of(repo)
    assert limited["failure"] == "rate_limited" and limited["reset_at"]
    code, report, progress = drive_json(repo, plan="implement=rate", FAIL_RESET_IN="5")
    assert code == 0, progress
    said = [line for line in progress.splitlines() if line.startswith(f"{item} implement: rate_limited")]
    assert len(said) == 1 and f"run {limited['id']} of an earlier drive" in said[0] and "waiting" in said[0], progress
    again = [run for run in runs_of(repo) if run["slot"] == "implement"][1]
    started = datetime.fromisoformat(again["started"].replace("Z", "+00:00"))
    assert started >= datetime.fromisoformat(limited["reset_at"]), (again["started"], limited["reset_at"])
    [row] = report["items"]
    assert [failure["run"] for failure in row["failures"]] == [limited["id"]], row["failures"]
