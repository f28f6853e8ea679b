"""The agent presets: one registry that config validates against, agents launch from and docs list.

Adding a preset is one entry here and its test in tests/test_agents.py.
"""
from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping, Protocol

from drover.errors import ConfigError
from drover.vocabulary import CONFIG_FILE

# Placeholders an argv word may hold; presets.agent_argv / launch.launch fill them in.
PROMPT_FILE = "{prompt_file}"
PROMPT_TEXT = "{prompt}"


@dataclass(frozen=True)
class Preset:
    """How one agent CLI is started, how its prompt reaches it, and what it needs from the machine."""

    name: str
    argv: tuple[str, ...]
    prompt_via: str
    install_hint: str
    binary: str
    # The structured output the argv asks for, read by drover/agents/usage.py ("" = plain text).
    stream: str = ""
    # argv words with which the CLI refuses to run as root (uid 0) unless told it is in a sandbox.
    root_refuses: tuple[str, ...] = ()
    # What `[agent] sandboxed = true` adds to the environment for this CLI.
    sandbox_env: tuple[tuple[str, str], ...] = ()
    # The CLI version the argv was checked against (docs/agents.md's table is generated from this).
    checked: str = ""


# The flags were checked against each CLI's --help and, for claude and codex, proven end to end
# (tests/e2e); docs/agents.md records versions and reasons.
PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset("claude", ("claude", "-p", "--permission-mode", "bypassPermissions",
                          "--output-format", "stream-json", "--verbose"),
               "stdin", "npm install -g @anthropic-ai/claude-code", "claude", stream="claude",
               root_refuses=("bypassPermissions", "--dangerously-skip-permissions"), sandbox_env=(("IS_SANDBOX", "1"),),
               checked="Claude Code 2.1.197, end to end"),
        Preset("codex", ("codex", "exec", "--sandbox", "danger-full-access", "--color", "never", "--json",
                         "-c", "allow_login_shell=false", "-"),
               "stdin", "npm install -g @openai/codex", "codex", stream="codex", checked="codex-cli 0.171.0, end to end"),
        Preset("aider", ("aider", "--message-file", PROMPT_FILE, "--yes-always", "--no-gitignore",
                         "--no-dirty-commits", "--no-check-update", "--no-pretty"),
               "file", "python -m pip install aider-install && aider-install", "aider", checked="aider 0.86.2"),
        Preset("gemini", ("gemini", "--prompt", "", "--approval-mode", "yolo", "--skip-trust"),
               "stdin", "npm install -g @google/gemini-cli", "gemini", checked="gemini-cli 0.61.0"),
        Preset("opencode", ("opencode", "run", "--auto"),
               "stdin", "npm install -g opencode-ai", "opencode", checked="opencode 1.18.33"),
        Preset("demo", (sys.executable, "-m", "drover.cli.demo", "agent"),
               "stdin", "it ships with drover", sys.executable),
        Preset("script", (), "stdin", "", ""),
    )
}


class AgentSettings(Protocol):
    """What this module reads of an [agent] table (drover.config.AgentConfig has it)."""

    @property
    def preset(self) -> str: ...
    @property
    def command(self) -> str: ...
    @property
    def sandboxed(self) -> bool: ...


def resolve_agent(agent: AgentSettings) -> Preset:
    """The preset an [agent] table names, with `command` (if set) replacing its argv."""
    try:
        preset = PRESETS[agent.preset]
    except KeyError:
        raise ConfigError(f"{CONFIG_FILE}: [agent] preset: expected one of {', '.join(PRESETS)}, "
                          f"not {agent.preset!r}") from None
    if not agent.command.strip():
        if not preset.argv:
            raise ConfigError(f"{CONFIG_FILE}: [agent] command: the {preset.name} preset runs this command, "
                              "and it is empty")
        return preset
    try:
        words = tuple(shlex.split(agent.command))
    except ValueError as exc:
        raise ConfigError(f"{CONFIG_FILE}: [agent] command: {exc}") from None
    # A command says how it wants the prompt by naming a placeholder; otherwise stdin.
    if any(PROMPT_TEXT in word for word in words):
        via = "arg"
    elif any(PROMPT_FILE in word for word in words):
        via = "file"
    else:
        via = "stdin"
    return replace(preset, argv=words, prompt_via=via, binary=words[0])


def agent_argv(agent: AgentSettings, prompt_file: Path) -> tuple[list[str], str]:
    """The argv to run (prompt file filled in) and how the prompt travels: stdin, file or arg."""
    preset = resolve_agent(agent)
    argv = [word.replace(PROMPT_FILE, str(prompt_file)) for word in preset.argv]
    return argv, preset.prompt_via


def _installed(binary: str, cwd: Path | None) -> bool:
    if os.sep in binary and not os.path.isabs(binary):
        # A relative path is looked up from the agent's directory, known only at launch.
        return cwd is None or os.access(Path(cwd) / binary, os.X_OK)
    import shutil  # here: only a launch or `check` asks, and shutil (with lzma) is a few ms of every command

    return shutil.which(binary) is not None


def binary_missing(agent: AgentSettings, *, cwd: Path | None = None) -> str:
    """"" when the agent's program can be found; else one line saying what to install."""
    preset = resolve_agent(agent)
    if _installed(preset.binary, cwd):
        return ""
    own = PRESETS[agent.preset]
    if preset.binary == own.binary and own.install_hint:
        return f"{own.name} is not installed: {own.install_hint}"
    return f"{preset.binary} (from [agent] command) is not installed or not on PATH"


def stream_of(agent: AgentSettings) -> str:
    """The structured output the agent prints: the preset's own argv asks for it; a command does not."""
    return PRESETS[agent.preset].stream if not agent.command.strip() else ""


def sandbox_env(agent: AgentSettings) -> dict[str, str]:
    """What the preset adds when `[agent] sandboxed = true` says the machine is a sandbox."""
    return dict(PRESETS[agent.preset].sandbox_env) if agent.sandboxed else {}


def root_refusal(agent: AgentSettings, *, uid: int | None = None, environ: Mapping[str, str] | None = None) -> str:
    """One line when the agent's CLI will refuse to start for this user (uid 0), with the fixes; else ""."""
    own = PRESETS[agent.preset]
    uid = os.geteuid() if uid is None else uid
    environ = os.environ if environ is None else environ
    if uid != 0 or not own.root_refuses or agent.sandboxed:
        return ""
    needed = dict(own.sandbox_env)
    if needed and all(environ.get(key) == value for key, value in needed.items()):
        return ""  # the operator exported the CLI's own sandbox switch
    argv = resolve_agent(agent).argv
    refused = [word for word in argv[1:] if word in own.root_refuses]
    if not argv or os.path.basename(argv[0]) != own.binary or not refused:
        return ""  # a command of its own without the refused mode
    switch = " ".join(f"{key}={value}" for key, value in needed.items())
    return (f"{own.name} refuses {refused[0]} as root: if this machine is a sandbox set "
            f"[agent] sandboxed = true (drover then passes {switch}), or run drover as another user, "
            f"or set [agent] command to a narrower permission mode")
