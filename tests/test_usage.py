"""drover.agents.usage: readable text and usage figures from claude's and codex's structured output.

The event lines are shaped as claude 2.1.197 (`-p --output-format stream-json --verbose`) and
codex-cli 0.171.0 (`exec --json`) print them; tests/e2e runs the real CLIs.
"""
from __future__ import annotations

import json
import re

import pytest

from drover.agents.usage import StreamReader, describe, total

CLAUDE = [
    {"type": "system", "subtype": "init", "cwd": "/w", "model": "claude-opus-4-8[1m]", "tools": ["Bash"]},
    {"type": "assistant", "message": {"model": "claude-opus-4-8", "content": [
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make test"}}]}},
    {"type": "user", "message": {"role": "user", "content": [
        {"tool_use_id": "t1", "type": "tool_result", "content": "\n".join(f"line {n}" for n in range(12))}]}},
    {"type": "assistant", "message": {"model": "claude-opus-4-8", "content": [
        {"type": "text", "text": "All done.\nTests pass."}]}},
    {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2, "total_cost_usd": 0.0137,
     "usage": {"input_tokens": 2400, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 50,
               "output_tokens": 68}},
]

CODEX = [
    {"type": "thread.started", "thread_id": "x"},
    {"type": "turn.started"},
    {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "/bin/bash -c 'ls'",
                                      "aggregated_output": "", "exit_code": None, "status": "in_progress"}},
    {"type": "item.completed", "item": {"id": "item_1", "type": "command_execution",
                                        "command": "/bin/bash -c 'ls'", "aggregated_output": "a\nb\n",
                                        "exit_code": 0, "status": "completed"}},
    {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "All done."}},
    {"type": "turn.completed", "usage": {"input_tokens": 2400, "cached_input_tokens": 0, "output_tokens": 68}},
]


def feed(kind: str, events: list) -> tuple[list[str], StreamReader]:
    reader = StreamReader(kind)
    shown = []
    for event in events:
        shown += reader.feed(json.dumps(event) if isinstance(event, dict) else event)
    return shown, reader


def test_claude_stream_reads_as_text_with_its_usage():
    shown, reader = feed("claude", CLAUDE)
    assert shown == ["[session] claude-opus-4-8[1m] in /w", "$ make test",
                     *[f"line {n}" for n in range(8)], "... (4 more lines)",
                     "All done.", "Tests pass.", "[result] done after 2 turns"]
    assert reader.usage.as_row() == {"model": "claude-opus-4-8", "input_tokens": 2550, "output_tokens": 68,
                                     "cost_usd": 0.0137, "tool_calls": 1}



def test_a_claude_run_of_one_turn_ends_in_one_turn_not_one_turns():
    for turns, said in ((1, "1 turn"), (3, "3 turns"), ("many", "many turns"), (None, "? turns")):
        event = {"type": "result", "subtype": "success", "is_error": False, "num_turns": turns}
        shown, _ = feed("claude", [{key: value for key, value in event.items() if value is not None}])
        assert shown == [f"[result] done after {said}"], turns

def test_a_claude_run_an_api_error_ended_reads_failed_not_failed_success():
    """claude 2.1.197 ends a run it could not start (no API key, the service refused the connection)
    with `is_error` true and the subtype `success`: the log read `[result] failed (success)`."""
    ended = {"type": "result", "subtype": "success", "is_error": True, "num_turns": 1,
             "result": "API Error: Unable to connect to API (ConnectionRefused)"}
    shown, _ = feed("claude", [ended])
    assert shown == ["[result] failed after 1 turn"]
    shown, _ = feed("claude", [{**ended, "subtype": "error_max_turns"}])
    assert shown == ["[result] failed (error_max_turns) after 1 turn"]


def test_codex_stream_reads_as_text_with_its_usage_summed_over_turns():
    shown, reader = feed("codex", CODEX + CODEX[1:])
    assert shown[:4] == ["$ /bin/bash -c 'ls'", "a", "b", "(exit 0)"] and shown[4] == "All done."
    assert reader.usage.as_row() == {"model": "", "input_tokens": 4800, "output_tokens": 136,
                                     "cost_usd": None, "tool_calls": 2}


@pytest.mark.parametrize(("kind", "odd"), [("claude", '{"type": "assistant", "message": 3}'),
                                           ("codex", '{"type": "item.completed", "item": 3}')])
def test_lines_that_are_not_events_pass_through(kind, odd):
    shown, reader = feed(kind, ["WARNING: something on stderr", "[1, 2]", odd])
    assert shown == ["WARNING: something on stderr", "[1, 2]", odd]
    assert reader.usage.input_tokens is None


def test_describe_and_total():
    rows = [{"input_tokens": 1200, "output_tokens": 34, "cost_usd": 0.01, "tool_calls": 1},
            {"input_tokens": None, "output_tokens": None, "cost_usd": None, "tool_calls": None}]
    assert describe(rows[0]) == "1,200 in / 34 out tokens, $0.0100 (CLI's figure), 1 tool call"
    assert describe(rows[1]) == ""
    assert total(rows) == {"input_tokens": 1200, "output_tokens": 34, "cost_usd": 0.01, "tool_calls": 1}
    assert total([rows[1]]) == {"input_tokens": None, "output_tokens": None, "cost_usd": None, "tool_calls": None}


def test_a_rate_card_prices_a_run_and_the_clis_own_figure_is_labelled_as_the_clis():
    from drover.agents.usage import price

    rates = {"opus": (15.0, 75.0)}
    assert price("opus", 1_000_000, 200_000, 9.99, rates) == (15.0 + 15.0, "rates")
    assert price("sonnet", 1_000_000, 200_000, 0.25, rates) == (0.25, "cli")  # no rate for this model
    assert price("opus", None, 200_000, 0.25, rates) == (0.25, "cli")  # tokens unknown: no sum to make
    assert price("sonnet", 10, 10, None, rates) == (None, "")


def test_a_drives_total_is_priced_by_the_rate_card_when_an_item_had_no_run_in_it():
    """An item the drive only merged (no run of this drive) has no cost source: counted in, it made
    the summary's total `$0.0645 (CLI's figure)` while each item's own line was priced by the rate
    card, $0.0163 (a new user, overnight on tabulate)."""
    from drover.agents.usage import priced
    from drover.cli.views import drive_summary
    from drover.loop.driver import Driven

    rates = {"sonnet": (1.0, 1.0)}
    ran = total([priced({"model": "sonnet", "input_tokens": 15_000, "output_tokens": 1_300, "cost_usd": 0.0645,
                         "tool_calls": 2}, rates)])
    merged_only = total([])
    lines = drive_summary([Driven("D-1", "finished", 0, 0, "", usage=merged_only),
                           Driven("D-2", "finished", 0, 2, "", usage=ran)], finish=True)
    assert "D-2: 15,000 in / 1,300 out tokens, $0.0163, 2 tool calls" in lines
    assert "total: 15,000 in / 1,300 out tokens, $0.0163, 2 tool calls" in lines, lines


def test_a_drives_spending_lines_say_they_are_of_its_runs_beside_the_tables_whole_life_counts():
    """The summary's table counts each item's rounds and runs over its whole life, the spending
    lines after it only the runs this drive started: a new user read an item's 6 runs (its draft
    among them) beside the tokens of 2. A line before them says which runs they are."""
    from drover.cli.views import drive_summary
    from drover.loop.driver import Driven

    ran = total([{"input_tokens": 1_000, "output_tokens": 10, "cost_usd": 0.5, "usd": 0.5, "usd_source": "cli"}])
    lines = drive_summary([Driven("D-1", "finished", 1, 6, "", usage=ran)], finish=True)
    said = lines.index("spent by the runs this drive started (`drover show ID` has an item's whole life):")
    assert lines[said + 1].startswith("D-1: 1,000 in / 10 out tokens") and lines[said + 2].startswith("total: "), lines
    assert re.fullmatch(r"D-1 +finished +1 +6 *", lines[1]), lines  # the table before it: the whole life


def test_the_message_claude_makes_up_for_an_api_error_names_no_model_that_ran():
    """claude writes an API error's text as an assistant message of model `<synthetic>`: the report
    credited that model with an item approved at its first review (a new user, overnight)."""
    events = [{"type": "system", "subtype": "init", "model": "claude-sonnet-4-5", "cwd": "/w"},
              {"type": "assistant", "message": {"id": "m1", "model": "<synthetic>", "content": [
                  {"type": "text", "text": "API Error: 429 rate limited"}]}}]
    _, reader = feed("claude", events)
    assert reader.usage.model == "claude-sonnet-4-5"
    _, alone = feed("claude", events[1:])
    assert alone.usage.model == ""


def test_a_claude_run_that_ended_before_a_message_records_the_model_without_its_context_suffix():
    """claude's session names `claude-opus-4-8[1m]`, its messages `claude-opus-4-8`: a run the
    service never answered was recorded under the first name, a model of its own in the report."""
    session = {"type": "system", "subtype": "init", "model": "claude-opus-4-8[1m]", "cwd": "/w"}
    ended = {"type": "result", "subtype": "success", "is_error": True, "num_turns": 1}
    shown, reader = feed("claude", [session, ended])
    assert shown[0] == "[session] claude-opus-4-8[1m] in /w"  # shown as the CLI said it
    assert reader.usage.model == "claude-opus-4-8"
