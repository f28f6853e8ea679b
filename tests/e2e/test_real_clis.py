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
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import standin
from helpers import git, write_requirements
from drover.agents.presets import PRESETS

BIN = Path(sys.executable).parent
CLIS = ("claude", "codex")
DEAD_PROXY = "http://127.0.0.1:9"  # the discard port, closed: a request that ignores NO_PROXY fails here


def cli_binary(name: str) -> Path:
    value = os.environ.get(f"E2E_{name.upper()}_BIN", "")
    if not value and os.environ.get("E2E_REQUIRED"):
        pytest.fail(f"E2E_{name.upper()}_BIN is not set")
    if not value:
        pytest.skip(f"the real {name} is not installed for this run: `make e2e` installs and names it")
    return Path(value)


@pytest.fixture
def service():
    state = standin.Service()
    server = standin.start(state)
    yield state
    server.shutdown()
    server.server_close()


def cli_env(name: str, binary: Path, service: standin.Service, home: Path) -> dict[str, str]:
    env = {
        "PATH": os.pathsep.join([str(BIN), str(binary.parent), os.environ["PATH"]]),
        "HTTP_PROXY": DEAD_PROXY, "HTTPS_PROXY": DEAD_PROXY, "ALL_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY, "https_proxy": DEAD_PROXY,
        "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost",
    }
    if name == "claude":
        env.update({
            "ANTHROPIC_BASE_URL": service.base_url, "ANTHROPIC_API_KEY": "sk-stand-in",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1",
        })
    else:
        codex_home = home / "codex"
        codex_home.mkdir(exist_ok=True)
        (codex_home / "config.toml").write_text(
            'model = "stand-in-model"\n'
            'model_provider = "standin"\n'
            "check_for_update_on_startup = false\n\n"
            "[model_providers.standin]\n"
            'name = "stand-in"\n'
            f'base_url = "{service.base_url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "STANDIN_API_KEY"\n'
            "request_max_retries = 0\n"
            "stream_max_retries = 0\n\n"
            "[analytics]\n"
            "enabled = false\n"
        )
        env.update({"CODEX_HOME": str(codex_home), "STANDIN_API_KEY": "sk-stand-in"})
    return env


def drover(root: Path, env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([str(BIN / "drover"), *args], cwd=root, text=True, capture_output=True,
                          env={**os.environ, **env}, stdin=subprocess.DEVNULL, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"drover {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def configure(root: Path, env: dict[str, str], preset: str) -> None:
    drover(root, env, "init")
    config = (root / "drover.toml").read_text()
    config = config.replace('preset = "claude" ', f'preset = "{preset}" ', 1)
    # The operator's statement that this machine is a sandbox: claude refuses its bypass mode
    # as root without it, and CI runs as root.
    if os.geteuid() == 0:
        config = config.replace("sandboxed = false", "sandboxed = true", 1)
    config = config.replace('timeout = "2h"', 'timeout = "4m"', 1)
    (root / "drover.toml").write_text(config)
    (root / "Makefile").write_text("test:\n\ttrue\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "drover init")


def prompts_received(service: standin.Service, name: str) -> list[str]:
    """The user text of each conversation's first agent turn (the one answered with the tool call)."""
    texts = []
    for entry in service.requests:
        if entry.answered != "tool":
            continue
        if name == "claude":
            content = entry.body["messages"][0]["content"]
            blocks = [content] if isinstance(content, str) else [
                block.get("text", "") for block in content if block.get("type") == "text"]
        else:
            blocks = [part.get("text", "") for item in entry.body["input"] if item.get("role") == "user"
                      for part in (item.get("content") or []) if isinstance(part, dict)]
        texts.append(blocks)
    return texts


def runs_table(root: Path) -> list[dict]:
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute("SELECT * FROM runs ORDER BY started, rowid")]
    finally:
        conn.close()


def sleepers(tag: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def project_with_one_item(name, binary, service, repo, tmp_path):
    """The CLI's environment, drover configured for it, and one committed item: (env, item id)."""
    env = cli_env(name, binary, service, tmp_path)
    configure(repo, env, name)
    item = drover(repo, env, "new", "Add a feature file").stdout.split()[0]
    write_requirements(repo, item, "1. A file feature.txt holds the feature.")  # a placeholder item is not driven
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"item {item}")
    return env, item


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
    assert "1 of 1 approved" in lines and (repo / "feature.txt").read_text() == "one\n"
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
