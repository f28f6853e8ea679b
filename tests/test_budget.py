"""Token budgets ([budget], docs/budgets.md): refused before a launch, ended mid-run, parked with the
figures; the drive's ceiling stops the drive; money from the rate card or labelled as the CLI's.

The agent is tests/agents/stream_agent.py, a real process that prints claude's stream-json (or
codex's exec --json) with the usage each test scripts, run through the claude (codex) preset from
a folder put first on PATH.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path


import pytest

from helpers import TESTS, configure, drover, git, ledger_rows, new_item

STREAM_AGENT = TESTS / "agents" / "stream_agent.py"


def runs_of(root: Path, item: str | None = None) -> list[dict]:
    return [run for run in ledger_rows(root, "runs") if item is None or run["item"] == item]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class Streaming:
    """A project whose agent is the streaming scripted agent, and how to run drover there."""

    def __init__(self, root: Path, bindir: Path):
        self.root = root
        self.bindir = bindir
        self.script: dict = {}
        self.kind = "claude"

    def env(self) -> dict[str, str]:
        return {"PATH": f"{self.bindir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                "STREAM_AGENT": json.dumps(self.script), "STREAM_KIND": self.kind}

    def drover(self, *args: str, process: bool = False):
        return drover(self.root, *args, env=self.env(), process=process)


def set_budget(root: Path, **values: int) -> None:
    """Set [budget] keys in the drover.toml `init` wrote (every key is there at its default)."""
    config = (root / "drover.toml").read_text()
    for name, value in values.items():
        config, found = re.subn(rf"^{name} = \d+", f"{name} = {value}", config, count=1, flags=re.M)
        assert found, name
    (root / "drover.toml").write_text(config)


def set_rates(root: Path, lines: str) -> None:
    config = (root / "drover.toml").read_text()
    (root / "drover.toml").write_text(re.sub(r"^\[budget\.rates\].*$", lambda m: m.group(0) + "\n" + lines,
                                             config, count=1, flags=re.M))


def streaming_project(root: Path, tmp_path: Path, preset: str = "claude", **budget: int) -> Streaming:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    for name in ("claude", "codex"):
        program = bindir / name
        program.write_text(f"#!/bin/sh\nexec {sys.executable} {STREAM_AGENT} \"$@\"\n")
        program.chmod(0o755)
    configure(root)
    set_budget(root, **budget)
    config = (root / "drover.toml").read_text()
    config = config.replace('preset = "script" ', f'preset = "{preset}" ', 1)
    config = config.replace(f'command = "{sys.executable} {TESTS / "agents" / "loop_agent.py"}"', 'command = ""', 1)
    config = config.replace("sandboxed = false", "sandboxed = true", 1)  # the claude preset refuses root without it
    (root / "drover.toml").write_text(config)
    git(root, "commit", "-qam", "the streaming agent")
    return Streaming(root, bindir)


def test_the_budget_table_is_validated_one_line_naming_the_key(repo):
    configure(repo)
    written = (repo / "drover.toml").read_text()
    for before, after, named in (
            ("run_tokens = 0", "run_tokens = -5", "[budget] run_tokens: expected a number of tokens"),
            ("drive_tokens = 0", "drive_tokens = \"lots\"", "[budget] drive_tokens: expected an integer"),
            ("item_tokens = 0", "item_token = 5", "[budget] item_token: unknown key (did you mean item_tokens?)"),
            ("[budget.rates]", "[budget.rates]\nopus = { input = 15 }", "[budget] rates: expected { input"),
            ("[budget.rates]", "[budget.rates]\nopus = { input = 15, output = \"75\" }", "for 'opus'"),
            ("[budget.rates]", "[budget.rates]\nopus = { input = -1, output = 1 }", "for 'opus'"),
            ("[budget.rates]", "[budget.rates]\nopus = 3", "[budget] rates")):
        assert before in written
        (repo / "drover.toml").write_text(written.replace(before, after, 1))
        done = drover(repo, "list")
        assert done.returncode == 2, after
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and named in lines[0] and "drover.toml" in lines[0], done.stderr
    (repo / "drover.toml").write_text(written.replace("[budget.rates]", "[budget.rates]\nopus = { input = 15, output = 75 }"))
    assert drover(repo, "list").returncode == 0


def test_a_run_that_streams_past_its_ceiling_is_ended_with_its_process_group_and_the_item_parked(repo, tmp_path):
    project = streaming_project(repo, tmp_path, run_tokens=1000)
    item = new_item(repo, "Add a thing")
    pidfile = tmp_path / "pids"
    # 1,200 tokens reported at once, then a long sleep beside a child: only the ceiling ends it
    project.script = {"messages": [[1150, 50]], "sleep": 300, "pidfile": str(pidfile)}
    done = project.drover("run", item)
    assert done.returncode == 1, done.stdout + done.stderr
    reason = f"over budget: 1,200 of 1,000 tokens for one implement run of {item}"
    assert reason in done.stderr and "parked" in done.stderr
    agent, child = (int(word) for word in pidfile.read_text().split())
    assert not alive(agent) and not alive(child)  # the whole group went
    [run] = runs_of(repo)
    assert (run["outcome"], run["failure"], run["reason"]) == ("over budget", "over_budget", reason)
    assert (run["input_tokens"], run["output_tokens"]) == (1150, 50)
    assert not (repo / ".drover" / "worktrees" / item / f"{item}.txt").exists()  # it never got to the work
    shown = json.loads(project.drover("show", item, "--json").stdout)
    assert shown["parked"] and shown["parked_reason"] == reason and shown["state"] == "parked"
    assert "over budget" in (repo / run["log_path"]).read_text()


def test_an_item_at_its_budget_is_refused_before_the_launch_and_parked_with_the_figures(repo, tmp_path):
    project = streaming_project(repo, tmp_path, item_tokens=2000)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1500, 500]]}  # exactly the budget: the run ends well
    assert project.drover("run", item).returncode == 0
    assert len(runs_of(repo)) == 1
    for slot in ("review", "run", "draft"):
        if slot != "review":
            project.drover("unpark", item)
        done = project.drover(slot, item)
        assert done.returncode == 1
        assert f"{item}: over budget: 2,000 of 2,000 tokens for {item}: parked; no" in done.stderr, done.stderr
        assert len(runs_of(repo)) == 1  # nothing launched, nothing recorded
        shown = json.loads(project.drover("show", item, "--json").stdout)
        assert shown["parked_reason"] == f"over budget: 2,000 of 2,000 tokens for {item}"


def test_a_runs_ceiling_is_what_is_left_of_its_items_budget(repo, tmp_path):
    project = streaming_project(repo, tmp_path, run_tokens=5000, item_tokens=3000)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1800, 200]]}
    assert project.drover("run", item).returncode == 0
    # 1,000 left for the item: a run reporting 600, then 600 more, is ended at the second message
    project.script = {"messages": [[550, 50], [550, 50]], "sleep": 300}
    done = project.drover("run", item)
    assert done.returncode == 1
    reason = f"over budget: 3,200 of 3,000 tokens for {item}"
    assert reason in done.stderr
    first, second = runs_of(repo)
    assert (second["outcome"], second["failure"], second["reason"]) == ("over budget", "over_budget", reason)
    assert first["failure"] is None
    assert json.loads(project.drover("show", item, "--json").stdout)["parked_reason"] == reason


def test_the_drive_ceiling_stops_the_drive_and_reports_the_items_not_started(repo, tmp_path):
    project = streaming_project(repo, tmp_path, drive_tokens=1500)
    first = new_item(repo, "First")
    second = new_item(repo, "Second")
    # implement 1,000: then 500 are left for the review, which waits after its usage to be ended there
    project.script = {"messages": [[900, 100]], "sleep": 60, "sleep_slot": "review"}
    done = project.drover("drive", first, second, "--report", str(tmp_path / "morning.html"))
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "  budget: drive 1,500 tokens (drover help budgets)" in out
    runs = runs_of(repo)
    # the first item's implement ran whole; its review was ended at what was left of the drive
    assert [(run["item"], run["slot"], run["outcome"]) for run in runs] == [
        (first, "implement", "exited"), (first, "review", "over budget")]
    assert runs[1]["reason"] == "over budget: 2,000 of 1,500 tokens for this drive"
    assert f"{second}: stopped: over budget: 2,000 of 1,500 tokens for this drive: " \
           "no implement agent was launched" in out
    assert f"{second}: implement by" not in out  # no line says an agent starts that the ceiling refused
    assert f"{first}: implement by" in out
    summary = out[out.index("item "):]
    assert re.search(rf"^{first} +over budget +0 +2 ", summary, re.M), summary
    assert re.search(rf"^{second} +over budget +0 +0 ", summary, re.M), summary
    for item in (first, second):  # the drive stopped; neither item is over its own budget
        shown = json.loads(project.drover("show", item, "--json").stdout)
        assert not shown["parked"], item
    assert json.loads(project.drover("show", second, "--json").stdout)["runs"] == []
    # the morning page: the item the ceiling never let start is over budget, and says why (no ledger row does)
    page = (tmp_path / "morning.html").read_text()
    assert re.search(rf"<tr><td>over budget</td><td>{second}</td><td>[^<]*</td><td>over budget: 2,000 of "
                     r"1,500 tokens for this drive[^<]*</td></tr>", page), page


def test_a_run_that_ended_on_its_own_past_the_drives_ceiling_is_no_failure(repo, tmp_path):
    """codex reports usage as it ends: its run went past the drive's ceiling but was not ended for
    it, and did its work. It is no over_budget run (under --jobs N the others' spending may be what
    crossed the line); the drive launches nothing after it. Slow to exit after its last line (a
    loaded machine), it is still no run drover ended."""
    project = streaming_project(repo, tmp_path, "codex", drive_tokens=1500)
    project.kind = "codex"
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1900, 100]], "linger": 0.5}
    done = project.drover("drive", item)
    assert done.returncode == 1
    [run] = runs_of(repo)
    assert (run["slot"], run["outcome"], run["exit_status"], run["failure"]) == ("implement", "exited", 0, None)
    assert f"{item}: stopped: over budget: 2,000 of 1,500 tokens for this drive: no review agent was launched" \
        in done.stdout, done.stdout
    assert f"{item}: review by" not in done.stdout


def test_a_cli_that_reports_usage_only_at_the_end_is_held_to_its_ceiling_after_it_exits(repo, tmp_path):
    project = streaming_project(repo, tmp_path, "codex", run_tokens=1000)
    project.kind = "codex"
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1900, 100]]}  # codex: one turn.completed, at the end
    done = project.drover("run", item)
    assert done.returncode == 1
    reason = f"over budget: 2,000 of 1,000 tokens for one implement run of {item}"
    assert reason in done.stderr
    [run] = runs_of(repo)
    assert (run["failure"], run["reason"], run["input_tokens"]) == ("over_budget", reason, 1900)
    assert json.loads(project.drover("show", item, "--json").stdout)["parked_reason"] == reason


FORGED = [
    json.dumps({"type": "result", "usage": {"input_tokens": 1, "output_tokens": 1}}),  # a smaller "total"
    json.dumps({"type": "assistant", "message": {"id": "msg_1", "usage": {"input_tokens": 2, "output_tokens": 0}}}),
    json.dumps({"type": "assistant", "message": {"id": "msg_9", "usage": {"input_tokens": -5000, "output_tokens": True}}}),
    json.dumps({"type": "assistant", "message": {"id": "msg_8", "usage": {"input_tokens": "lots", "output_tokens": 1.5}}}),
    json.dumps({"type": "assistant", "message": {"usage": ["not", "a", "table"]}}),
    "[" * 100_000,  # too deep for the JSON parser
    json.dumps({"type": "result", "usage": "none"}),
    "{\"type\": \"assistant\", \"message\": ",
]


def test_forged_or_malformed_usage_lines_cannot_lower_a_recorded_total_or_crash_drover(repo, tmp_path):
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[3000, 300]], "forged": FORGED, "result": [10, 10]}
    done = project.drover("run", item)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = runs_of(repo)
    assert (run["input_tokens"], run["output_tokens"]) == (3000, 300)


def test_a_forged_huge_count_raises_the_total_without_overflowing_the_ledger(repo, tmp_path):
    project = streaming_project(repo, tmp_path, run_tokens=1000)
    item = new_item(repo, "Add a thing")
    huge = json.dumps({"type": "assistant", "message": {"id": "x", "usage": {"input_tokens": 10**30}}})
    project.script = {"messages": [[10, 10]], "forged": [huge], "sleep": 300}
    done = project.drover("run", item)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [run] = runs_of(repo)
    assert run["failure"] == "over_budget" and run["input_tokens"] == 10**12  # capped


def test_a_forged_cost_that_is_no_sum_of_money_neither_stops_the_reader_nor_reaches_the_report(repo, tmp_path):
    # hostile review 24: an integer too large for a float raised OverflowError in the thread that
    # reads the agent's output, which died: the rest of the run went unlogged and uncounted (a
    # ceiling no longer looked at), and an Infinity, a NaN or a negative cost was taken as it came
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    costs = ["1" + "0" * 400, "Infinity", "NaN", "-Infinity", "-5", "true", "1e308"]
    forged = ['{"type": "result", "usage": {}, "total_cost_usd": %s}' % cost for cost in costs]
    project.script = {"messages": [[10, 10]], "forged": forged, "cost": 0.5}
    done = project.drover("run", item)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = runs_of(repo)
    log = (repo / run["log_path"]).read_text()
    assert log.rstrip().endswith("[result] done after 1 turn")  # the closing line was read and logged
    assert run["cost_usd"] == 10**9  # capped, and the closing 0.5 did not lower it

    def strict(word: str):
        raise AssertionError(f"not JSON: {word}")

    for _ in range(2):  # two runs' capped costs still sum to a number JSON holds
        assert project.drover("run", item).returncode in (0, 1)
    report = project.drover("report", "--json")
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout, parse_constant=strict)["totals"]["cost_usd"] <= 3 * 10**9


def test_a_lone_surrogate_in_the_stream_neither_stops_the_reader_nor_the_runs_record(repo, tmp_path):
    # hostile review 24: JSON's "\udc80" decodes to a lone surrogate, which no UTF-8 holds: in a
    # message's text it raised in the thread that reads the agent's output (the rest of the run unread),
    # and as the model's name it failed the write of the run's end to the ledger
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    text = {"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "a\udc80b"}]}}
    model = {"type": "assistant", "message": {"id": "n", "model": "opus\ud800", "content": []}}
    project.script = {"messages": [[10, 10]], "forged": [json.dumps(text), json.dumps(model)], "model": "x\udfff"}
    done = project.drover("run", item)
    assert done.returncode == 0 and "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    [run] = runs_of(repo)
    assert run["finished"] and run["model"] == "opus\ufffd"  # the last message's
    log = (repo / run["log_path"]).read_text()
    assert "a\ufffdb" in log and log.rstrip().endswith("[result] done after 1 turn")


def test_a_line_break_inside_a_streamed_event_cannot_print_a_line_of_drovers_own(repo, tmp_path):
    # hostile review 24: a tool's command (or a codex message, a result's turns) was shown as one line
    # whatever it held, so the line after its newline reached the operator's screen without the
    # launch's `[D-1 implement 0:00]` in front, in the words of drover's own progress
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    forged = f"true\n{item}: approved (reviewed by reviewer)\n{item}: finished: merged into main"
    tool = {"type": "assistant", "message": {"id": "t", "content": [{"type": "tool_use", "name": "Bash",
                                                                       "input": {"command": forged}}]}}
    turns = {"type": "result", "num_turns": f"2\n{item}: finished: merged into main"}
    project.script = {"messages": [[10, 10]], "forged": [json.dumps(tool), json.dumps(turns)]}
    done = project.drover("run", item)
    assert done.returncode == 0, done.stdout + done.stderr
    said = [line for line in done.stdout.splitlines() if "merged into main" in line or "approved (" in line]
    assert len(said) == 3 and all(line.startswith(f"[{item} implement ") for line in said), done.stdout


def test_the_stream_reader_counts_each_message_once_and_never_down():
    from drover.agents.usage import StreamReader

    reader = StreamReader("claude")
    message = {"type": "assistant", "message": {"id": "m1", "usage": {"input_tokens": 100, "output_tokens": 1,
                                                                      "cache_read_input_tokens": 20}}}
    reader.feed(json.dumps(message))
    reader.feed(json.dumps(message))  # claude repeats a message's usage with each content block
    assert reader.tokens == 121
    message["message"]["id"] = "m2"
    reader.feed(json.dumps(message))
    assert reader.tokens == 242
    message["message"]["id"] = "m1"
    message["message"]["usage"] = {"input_tokens": 5, "output_tokens": 0}  # m1 again, smaller: no lower
    reader.feed(json.dumps(message))
    assert reader.tokens == 242
    for line in FORGED:  # one of them is a new message of 2 tokens in
        reader.feed(line)
    assert (reader.usage.input_tokens, reader.usage.output_tokens) == (242, 2)
    reader.feed(json.dumps({"type": "result", "usage": {"input_tokens": 300, "output_tokens": 60}}))
    assert (reader.usage.input_tokens, reader.usage.output_tokens) == (300, 60)  # the CLI's total, when larger


def test_money_comes_from_the_rate_card_else_the_clis_figure_labelled_as_the_clis(repo, tmp_path):
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1_000_000, 100_000]], "model": "opus-x", "cost": 0.42}
    assert project.drover("run", item).returncode == 0
    shown = project.drover("show", item).stdout
    assert "$0.4200 (CLI's figure)" in shown
    data = json.loads(project.drover("show", item, "--json").stdout)
    assert (data["runs"][0]["usd"], data["runs"][0]["usd_source"]) == (0.42, "cli")
    assert (data["usage"]["usd"], data["usage"]["usd_source"]) == (0.42, "cli")

    set_rates(repo, "opus-x = { input = 15, output = 75.0 }")
    shown = project.drover("show", item).stdout
    assert "$22.5000\n" in shown and "CLI's figure" not in shown  # 1M in at $15 + 0.1M out at $75
    data = json.loads(project.drover("show", item, "--json").stdout)
    assert (data["runs"][0]["usd"], data["runs"][0]["usd_source"]) == (22.5, "rates")
    assert (data["usage"]["usd"], data["usage"]["usd_source"]) == (22.5, "rates")
    assert data["runs"][0]["cost_usd"] == 0.42  # the CLI's own figure stays on the record
    report = json.loads(project.drover("report", "--json").stdout)  # the report reads the same card
    assert report["rated_models"] == ["opus-x"] and report["totals"]["cost_source"] == "rates"

    # a review by a model the card does not name: the total is in part the CLI's figure
    project.script = {"messages": [[10, 10]], "model": "other", "cost": 0.5}
    assert project.drover("review", item).returncode == 0
    data = json.loads(project.drover("show", item, "--json").stdout)
    assert (data["usage"]["usd"], data["usage"]["usd_source"]) == (23.0, "mixed")
    assert "total: 1,000,010 in / 100,010 out tokens, $23.0000 (in part the CLI's figure)" in \
        project.drover("show", item).stdout


def test_a_total_over_runs_some_with_no_cost_says_how_many_tokens_it_leaves_out(repo, tmp_path):
    """claude implementing and codex reviewing (a new user, on wcwidth): codex reports no cost, and
    `show`'s total read `14,400 in / 408 out tokens, $0.0548 (CLI's figure)`, a price for every
    token shown where the report said the same cost left 9,872 tokens unpriced."""
    project = streaming_project(repo, tmp_path)
    codex = tmp_path / "bin" / "codex"  # the stand-in codex prints codex's stream, which has no cost
    codex.write_text(f"#!/bin/sh\nSTREAM_KIND=codex exec {sys.executable} {STREAM_AGENT} \"$@\"\n")
    config = (repo / "drover.toml").read_text()
    (repo / "drover.toml").write_text(config.replace('[agent.review]\n', '[agent.review]\npreset = "codex"\n', 1))
    git(repo, "commit", "-qam", "codex reviews")
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1000, 100]], "cost": 0.25}
    out = project.drover("drive", item).stdout
    assert [json.loads(run["argv"])[0] for run in runs_of(repo, item)] == ["claude", "codex"]
    spent = "2,000 in / 200 out tokens, $0.2500 (CLI's figure), 1,100 tokens unpriced"
    assert f"{item}: {spent}" in out and f"total: {spent}" in out, out
    assert f"total: {spent}" in project.drover("show", item).stdout
    data = json.loads(project.drover("show", item, "--json").stdout)
    assert (data["usage"]["usd"], data["usage"]["unpriced_tokens"]) == (0.25, 1100)
    report = json.loads(project.drover("report", "--json").stdout)
    assert report["totals"]["unpriced_tokens"] == 1100  # the report said so already: show agrees


def test_the_drive_summary_labels_the_clis_figure(repo, tmp_path):
    project = streaming_project(repo, tmp_path)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1000, 100]], "cost": 0.25}
    out = project.drover("drive", item).stdout
    assert f"{item}: 2,000 in / 200 out tokens, $0.5000 (CLI's figure)" in out, out
    assert "total: 2,000 in / 200 out tokens, $0.5000 (CLI's figure)" in out
    # a drive's summary counts the runs it started, not the item's whole life: an implementing run
    # by hand first, then a drive that only reviews
    second = new_item(repo, "Another thing")
    assert project.drover("run", second).returncode == 0
    out = project.drover("drive", second).stdout
    assert f"{second}: 1,000 in / 100 out tokens, $0.2500 (CLI's figure)" in out, out
    assert "total: 1,000 in / 100 out tokens, $0.2500 (CLI's figure)" in out


def test_the_ceiling_travels_with_the_run_to_a_worker(repo, tmp_path, monkeypatch):
    from drover.ledger.db import Ledger
    from drover.ledger.project import open_project
    from drover.loop import budgets, runs
    from helpers import InlineExecutor, stop_adopting

    project = streaming_project(repo, tmp_path, run_tokens=1000)
    item = new_item(repo, "Add a thing")
    project.script = {"messages": [[1150, 50]], "sleep": 300}
    for name, value in project.env().items():
        monkeypatch.setenv(name, value)
    opened = open_project(repo)
    try:
        with Ledger(opened.ledger_path) as ledger:
            launch = runs.prepare(opened, ledger, item, "implement")
            # the ray executor's path: the payload to a worker's scratch clone, the result home
            with pytest.raises(budgets.OverBudget, match="over budget: 1,200 of 1,000 tokens for one implement run"):
                runs.execute(opened, ledger, launch, echo=False, executor=InlineExecutor())
    finally:
        stop_adopting()
    [run] = runs_of(repo)
    assert (run["node"], run["outcome"], run["failure"]) == ("inline", "over budget", "over_budget")
    assert json.loads(project.drover("show", item, "--json").stdout)["parked"]


def test_a_drive_whose_agents_report_no_usage_says_its_budget_counts_nothing(repo):
    """A new user set `[budget]` with a scripted agent (`[agent] command`, read as plain text): the
    header said `budget: run 100,000, ...` and a run past it went on to merge, nothing said why."""
    configure(repo)
    set_budget(repo, run_tokens=1000, item_tokens=5000)
    git(repo, "commit", "-qam", "budget")
    header = drover(repo, "drive", "--dry-run", check=True).stdout
    assert "  budget: run 1,000, item 5,000 tokens (drover help budgets)\n" \
           "  warning: [budget]: the implement and review agents report no usage (an [agent] command is read as " \
           "plain text): their runs count no tokens and no ceiling ends them\n" in header, header


def test_a_budget_warns_only_of_the_slots_whose_agent_reports_no_usage(repo, tmp_path):
    project = streaming_project(repo, tmp_path, run_tokens=1000)
    assert "warning: [budget]" not in project.drover("drive", "--dry-run").stdout
    config = (repo / "drover.toml").read_text()
    (repo / "drover.toml").write_text(config.replace('[agent.review]\n', '[agent.review]\npreset = "aider"\n', 1))
    header = project.drover("drive", "--dry-run").stdout
    assert "  warning: [budget]: the review agent reports no usage (preset aider): its runs count no tokens and " \
           "no ceiling ends them\n" in header, header
