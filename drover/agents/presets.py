"""The agent presets: one registry that config validates against, agents launch from and docs list.

Adding a preset is one entry here and its test in tests/test_agents.py.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

# Placeholders an argv word may hold; agents.agent_argv / agents.launch fill them in.
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
