"""Mixed presets end to end: the real claude implements and the real codex reviews one item
(`[agent.review] preset = "codex"`), as a new user's first drive set them up (docs/agents.md,
"Mixed presets"). claude reports its cost and codex none, so the totals say what the cost leaves out.
"""
from __future__ import annotations

import json
import os

from clis import cli_binary, cli_env, drover, project_with_one_item, runs_table
import standin
from helpers import git

# One script for both slots: the implementer commits, the reviewer approves.
WORK = ('if [ "$DROVER_SLOT" = implement ]; then printf "feature\\n" > feature.txt && git add feature.txt && '
        'git commit -qm "$DROVER_ITEM: feature"; else drover audit "$DROVER_ITEM" --level reviewed --note ok; fi')


def test_claude_implements_codex_reviews_and_the_totals_say_what_the_cost_leaves_out(service, repo, tmp_path):
    env, item = project_with_one_item("claude", cli_binary("claude"), service, repo, tmp_path)
    codex_env = cli_env("codex", cli_binary("codex"), service, tmp_path)
    env = {**codex_env, **env, "PATH": os.pathsep.join([codex_env["PATH"], env["PATH"]])}
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('# [agent.review]', '[agent.review]', 1).replace(
        '# preset = "codex"', 'preset = "codex"', 1))
    git(repo, "commit", "-qam", "codex reviews")
    service.command = WORK
    done = drover(repo, env, "drive", "--finish", item)
    runs = runs_table(repo)
    assert [(run["slot"], run["agent"], run["exit_status"]) for run in runs] == [
        ("implement", "claude", 0), ("review", "codex", 0)], done.stdout
    assert runs[0]["cost_usd"] and runs[1]["cost_usd"] is None and not runs[1]["model"]  # codex names neither
    per_run = 2 * (standin.INPUT_TOKENS + standin.OUTPUT_TOKENS)  # two model turns a run
    shown = json.loads(drover(repo, env, "show", item, "--json").stdout)
    assert shown["state"] == "done"
    assert [(entry["by"], entry["authors"]) for entry in shown["audits"]] == [("codex", ["claude"])]  # independent
    assert shown["usage"]["unpriced_tokens"] == per_run
    (spent,) = [line for line in done.stdout.splitlines() if line.startswith(f"{item}: ") and "tokens" in line]
    assert "(CLI's figure)" in spent and spent.endswith(f", {per_run:,} tokens unpriced, 2 tool calls"), spent
    assert f"total: {spent.split(': ', 1)[1]}" in done.stdout.splitlines()
