"""Token budgets end to end: the real claude and codex CLIs against the stand-in model service.

claude's stream-json carries each model message's usage as the message arrives, so a run is
ended mid-run, while the tool the model asked for still runs (its process group with it).
codex's `exec --json` reports usage only in `turn.completed`, at the end of the turn, so the
ceiling is enforced when the run ends (docs/budgets.md). Either way the item is parked over
budget with the figures.
"""
from __future__ import annotations

import json
import os
import re

import pytest

from clis import CLIS, cli_binary, drover, project_with_one_item, runs_table, sleepers


def set_run_tokens(repo, tokens: int) -> None:
    config = (repo / "drover.toml").read_text()
    config, found = re.subn(r"^run_tokens = \d+", f"run_tokens = {tokens}", config, count=1, flags=re.M)
    assert found
    (repo / "drover.toml").write_text(config)


@pytest.mark.parametrize("name", CLIS)
def test_a_run_that_streams_past_its_ceiling_is_ended_and_the_item_parked(name, service, repo, tmp_path):
    binary = cli_binary(name)
    env, item = project_with_one_item(name, binary, service, repo, tmp_path)
    set_run_tokens(repo, 50_000)
    service.input_tokens = 60_000  # each model turn: past the ceiling at once
    tag = f"{5000 + os.getpid() % 1000}.{len(name)}"
    # claude is ended during this tool call; codex reports its usage only once the turn is over
    service.command = f"sleep {tag}" if name == "claude" else "true"
    done = drover(repo, env, "run", item, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    [run] = runs_table(repo)
    shown = json.loads(drover(repo, env, "show", item, "--json").stdout)
    assert shown["parked"] and shown["parked_reason"] == run["reason"]
    assert run["failure"] == "over_budget"
    if name == "claude":
        # ended after the first message: 60,000 in and the 1 output token its first event shows
        assert run["reason"] == f"over budget: 60,001 of 50,000 tokens for one implement run of {item}"
        assert run["outcome"] == "over budget"
        assert not sleepers(f"sleep {tag}")  # the tool's process went with the run
        assert len(service.agent_turns()) == 1
    else:
        # both turns ran; the figures came with turn.completed
        assert run["reason"] == (f"over budget: 120,{2 * service.output_tokens:03d} of 50,000 tokens "
                                 f"for one implement run of {item}")
        assert (run["input_tokens"], run["output_tokens"]) == (120_000, 2 * service.output_tokens)
    assert run["reason"] in done.stderr
