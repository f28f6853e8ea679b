"""The claude and codex presets, end to end with the real CLIs against a stand-in model service.

`make e2e` installs pinned versions from npm into a cache folder outside the repository and
names their programs in E2E_CLAUDE_BIN / E2E_CODEX_BIN; without those the tests skip.
Each CLI runs the whole loop: run -> review (request-changes) -> run -> review (audit) -> finish.
The model's turns come from tests/e2e/standin.py on 127.0.0.1; every other address is routed
to a closed local port, so no request leaves the machine.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from clis import (CLIS, cli_binary, cli_env, configure, drover, project_with_one_item, prompts_received,
                  runs_table, sleepers)
import standin
from helpers import git
from drover.agents.presets import PRESETS

@pytest.mark.parametrize("name", CLIS)
def test_the_whole_loop_with_the_real_cli(name, service, repo, tmp_path):
    binary = cli_binary(name)
    env, item = project_with_one_item(name, binary, service, repo, tmp_path)
    where = tmp_path / "where"
    where.mkdir()
    # A process in its own session that would outlive the run if drover did not end it.
    stray_tag = f"{4000 + os.getpid() % 1000}.{len(name)}"
    steps = [
        ("run", f"pwd > {where}/implement-1 && printf 'one\\n' > feature.txt && git add feature.txt && "
                f"git commit -qm '{item}: first pass' && (setsid sleep {stray_tag} >/dev/null 2>&1 &)"),
        ("review", f"pwd > {where}/review-1 && printf 'Handle the empty case.\\n' | drover request-changes {item}"),
        ("run", f"pwd > {where}/implement-2 && printf 'two\\n' >> feature.txt && "
                f"git commit -qam '{item}: handle the empty case'"),
        ("review", f"pwd > {where}/review-2 && drover audit {item} --level reviewed --note 'checked'"),
    ]
    for command, script in steps:
        service.command = script
        done = drover(repo, env, command, item)
        assert standin.FINAL_TEXT in done.stdout, done.stdout  # the readable text reached the operator
        assert not sleepers(f"sleep {stray_tag}"), f"a process of the {command} outlived it"
    runs = runs_table(repo)
    branch = runs[0]["branch"]
    on_branch = git(repo, "log", "--format=%s", f"main..{branch}").splitlines()
    drover(repo, env, "finish", item)

    assert [(run["slot"], run["outcome"], run["exit_status"]) for run in runs] == [
        ("implement", "exited", 0), ("review", "exited", 0), ("implement", "exited", 0), ("review", "exited", 0)]
    assert all(json.loads(run["argv"]) == list(PRESETS[name].argv) for run in runs)  # what ships is what ran
    # The model received drover's rendered prompt, byte for byte, once per run.
    received = prompts_received(service, name)
    assert len(received) == 4
    for run, texts in zip(runs, received):
        prompt = (repo / run["prompt_path"]).read_text(encoding="utf-8")
        assert prompt in texts, f"{run['slot']}: the model did not receive prompt.md as written"
    # Every tool call ran in the item's worktree.
    worktree = (repo / runs[0]["worktree"]).resolve()
    for step in ("implement-1", "review-1", "implement-2", "review-2"):
        assert Path((where / step).read_text().strip()).resolve() == worktree, step
    # The commits are on the item's branch, and finish merged it.
    assert on_branch == [f"{item}: handle the empty case", f"{item}: first pass"]
    assert git(repo, "branch", "--merged", "main").count(branch) == 1
    assert (repo / "feature.txt").read_text() == "one\ntwo\n"
    # The round and the audit are on the record.
    shown = json.loads(drover(repo, env, "show", item, "--json").stdout)
    assert shown["done"] and shown["state"] == "done"
    assert [entry["headline"] for entry in shown["rounds"]] == ["Handle the empty case."]
    assert [(entry["level"], entry["note"]) for entry in shown["audits"]] == [("reviewed", "checked")]
    # What each run cost: the stand-in's usage figures, two model turns per run.
    for run in runs:
        assert (run["input_tokens"], run["output_tokens"], run["tool_calls"]) == (
            2 * standin.INPUT_TOKENS, 2 * standin.OUTPUT_TOKENS, 1), run["id"]
        if name == "claude":
            assert run["model"] and run["cost_usd"] is not None and run["cost_usd"] > 0
    turns = 4 * 2
    assert shown["usage"]["input_tokens"] == turns * standin.INPUT_TOKENS
    assert shown["usage"]["output_tokens"] == turns * standin.OUTPUT_TOKENS
    assert shown["usage"]["tool_calls"] == 4
    text = drover(repo, env, "show", item).stdout
    assert f"  total: {turns * standin.INPUT_TOKENS:,} in / {turns * standin.OUTPUT_TOKENS:,} out tokens" in text
    # The log holds readable text; the raw stream sits beside it.
    log = (repo / runs[0]["log_path"]).read_text()
    assert standin.FINAL_TEXT in log and '"type"' not in log
    assert (repo / runs[0]["log_path"]).with_name("agent.jsonl").exists()
    # Nothing but the stand-in was asked: every request reached 127.0.0.1 and was logged.
    assert service.requests and all(entry.answered != "other" or entry.method == "GET"
                                     for entry in service.requests), [
        (entry.method, entry.path) for entry in service.requests if entry.answered == "other"]



@pytest.mark.parametrize("name", CLIS)
def test_drive_with_the_real_cli_totals_what_it_cost(name, service, repo, tmp_path):
    binary = cli_binary(name)
    env, item = project_with_one_item(name, binary, service, repo, tmp_path)
    # One script for both slots: the agent's shell knows which slot it serves.
    service.command = (
        'if [ "$DROVER_SLOT" = implement ]; then printf "one\\n" > feature.txt && git add feature.txt && '
        f'git commit -qm "{item}: the feature"; else drover audit {item} --level reviewed --note fine; fi')
    done = drover(repo, env, "drive", "--finish", item)
    lines = done.stdout.splitlines()
    per_run = (2 * standin.INPUT_TOKENS, 2 * standin.OUTPUT_TOKENS)
    tokens = f"{2 * per_run[0]:,} in / {2 * per_run[1]:,} out tokens"
    assert "1 of 1 approved, 1 finished" in lines and (repo / "feature.txt").read_text() == "one\n"
    (spent,) = [line for line in lines if line.startswith(f"{item}: ") and "tokens" in line]
    assert spent.startswith(f"{item}: {tokens}") and spent.endswith("2 tool calls")
    assert [line for line in lines if line.startswith("total: ")] == [f"total: {spent.split(': ', 1)[1]}"]
    if name == "claude":
        assert "$" in spent  # claude reports its cost; codex does not


@pytest.mark.parametrize("name", CLIS)
def test_a_timeout_during_a_tool_call_ends_the_tools_process(name, service, repo, tmp_path):
    binary = cli_binary(name)
    env = cli_env(name, binary, service, tmp_path)
    configure(repo, env, name)
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('timeout = "4m"', 'timeout = "12s"', 1))
    item = drover(repo, env, "new", "Wait for ever").stdout.split()[0]
    tag = f"{4300 + os.getpid() % 500}.{len(name)}"
    started = tmp_path / "started"
    service.command = f"touch {started} && sleep {tag}"
    done = drover(repo, env, "run", item, check=False)
    assert started.exists(), done.stdout  # the tool call was under way when the time ran out
    assert done.returncode == 1, done.stdout
    (run,) = runs_table(repo)
    assert run["outcome"] == "timeout"
    assert not sleepers(f"sleep {tag}"), "the tool's process outlived the run"


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal happens only as root")
def test_as_root_claude_refuses_its_bypass_mode_and_drover_says_so_first(service, repo, tmp_path):
    binary = cli_binary("claude")
    env = cli_env("claude", binary, service, tmp_path)
    # The real CLI, as the preset starts it, without the sandbox statement: it refuses.
    plain = {key: value for key, value in {**os.environ, **env}.items() if key != "IS_SANDBOX"}
    refused = subprocess.run([str(binary), *PRESETS["claude"].argv[1:]], input="hello", text=True,
                             capture_output=True, env=plain, cwd=repo, timeout=120)
    assert refused.returncode != 0
    assert "cannot be used with root/sudo privileges" in refused.stdout + refused.stderr
    # drover says so before launching, in one line, and the model is never asked.
    drover(repo, env, "init")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "drover init")
    item = drover(repo, env, "new", "A thing").stdout.split()[0]
    asked = len(service.requests)
    done = drover(repo, env, "run", item, check=False)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [done.stderr.splitlines()[0]]
    assert done.stderr.startswith("drover: claude refuses bypassPermissions as root: ")
    assert len(service.requests) == asked
