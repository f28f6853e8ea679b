"""What the end-to-end tests share: the real CLIs' programs and environments (offline, against the
stand-in model service), drover run as a process, and what the ledger and the service recorded."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import standin
from helpers import git, ledger_rows, write_requirements


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
    return ledger_rows(root, "runs")


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
