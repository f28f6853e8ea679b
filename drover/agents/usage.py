"""Reading an agent CLI's structured output: readable lines for people, and what the run cost.

`claude --output-format stream-json --verbose` and `codex exec --json` print one JSON event a
line. A `StreamReader` turns each line into the text a person reads (the agent's messages,
the commands it runs and a few lines of their output) and keeps the usage: model, tokens in
and out, cost where the CLI gives it, and the number of tool calls. Lines that are not JSON
(a warning on stderr) pass through as they are.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable

from drover.errors import whole_text
from drover.vocabulary import counted

STREAMS = ("claude", "codex")
# A token figure above this is taken as this: a forged or garbled count can raise a run's total
# (and end the run) but never overflow the ledger's integer column or lower what was counted.
MAX_TOKENS = 10**12
# A cost above this (USD) is taken as this, as a worker's result may claim no more: a forged figure misstates
# money, never overflows a sum into a JSON no reader takes (Infinity)
MAX_USD = 10**9
OUTPUT_LINES = 8  # of a tool's output shown to people; the whole stream is kept in agent.jsonl


RECONNECTING = "Reconnecting..."  # how codex's notice of a retry of the service begins
SYNTHETIC = "<synthetic>"  # the model claude names on the messages it writes itself


@dataclass
class Usage:
    """What a run's output reports it used: model, tokens, cost, tool calls."""

    model: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    tool_calls: int = 0

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def count(value: Any) -> int | None:
    """A token figure from a stream: a non-negative integer (capped at MAX_TOKENS), else None."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        return None
    return min(value, MAX_TOKENS)


def money(value: Any) -> float | None:
    """A cost from a stream: a finite non-negative number (capped at MAX_USD), else None. An integer
    too large for a float (a forged 10^400) is capped too, never converted."""
    if type(value) is int:
        return float(min(value, MAX_USD)) if value >= 0 else None
    if type(value) is float and math.isfinite(value) and value >= 0:
        return min(value, float(MAX_USD))
    return None


def _add(total: int | None, more: Any) -> int | None:
    added = count(more)
    if added is None:
        return total
    return min((total or 0) + added, MAX_TOKENS)


def _most(seen: int | None, reported: int | None) -> int | None:
    """The larger of two figures for the same thing: a later line can add to a count, never lower it."""
    if reported is None:
        return seen
    return reported if seen is None else max(seen, reported)


def _clip(text: str) -> list[str]:
    lines = text.rstrip("\n").splitlines()
    if len(lines) > OUTPUT_LINES:
        lines = lines[:OUTPUT_LINES] + [f"... ({len(lines) - OUTPUT_LINES} more lines)"]
    return lines


class StreamReader:
    """Feed it the agent's output lines; it answers the lines to show and keeps `usage`."""

    def __init__(self, kind: str) -> None:
        if kind not in STREAMS:
            raise ValueError(f"stream must be one of {STREAMS}, not {kind!r}")
        self.kind = kind
        self.usage = Usage()
        # claude: each model message's usage by message id (its events repeat it, growing)
        self._messages: dict[str, tuple[int, int]] = {}
        self._sums = (0, 0)
        # the line fed last was the CLI's own notice that it is trying the service again (codex's
        # `Reconnecting... waiting for network`), no sign of the model's work: codex 0.171.0 given a
        # wrong base_url retries for ever with pauses of a minute at most, and its notices kept
        # `[agent] stall` from ever ending a run that had not reached the model (a new user, on wcwidth)
        self.retrying = False

    @property
    def usage_at_the_end(self) -> bool:
        """codex reports usage only as its turn, which in `exec` is its run, ends: a codex run whose
        figures pass a ceiling is exiting already, where claude's are counted mid-run."""
        return self.kind == "codex"

    @property
    def tokens(self) -> int:
        """Tokens in + out the stream has reported so far (what a run's ceiling is checked against)."""
        return (self.usage.input_tokens or 0) + (self.usage.output_tokens or 0)

    def feed(self, line: str) -> list[str]:
        self.retrying = False
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: a line of ten thousand "["
            return [line]
        if not isinstance(event, dict):
            return [line]
        try:
            shown = self._claude(event) if self.kind == "claude" else self._codex(event)
        except (AttributeError, TypeError, ValueError, KeyError, ArithmeticError):
            return [line]  # an event shaped unlike the ones we know: show it rather than lose it
        # a line each: a newline inside a command or a message printed the rest on the operator's screen
        # without the launch's prefix, in drover's own words; and JSON's "\ud800" is a lone surrogate,
        # which no UTF-8 holds: the log's write of it raised in the thread that reads the agent's
        # output, and the rest of the run went unread (hostile review 24)
        return [whole_text(piece) for each in shown for piece in each.split("\n")]

    # claude ------------------------------------------------------------------------------

    def _claude(self, event: dict[str, Any]) -> list[str]:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            # the session names the model with claude's context-size suffix (`claude-opus-4-8[1m]`),
            # the messages without it: a run that failed before a message was a model of its own
            # in the report's Models table (a new user, on wcwidth), and no rate card's key
            named = re.sub(r"\[[^\[\]]*\]$", "", str(event.get("model", "")))
            self.usage.model = self.usage.model or whole_text(named)
            return [f"[session] {event.get('model', '')} in {event.get('cwd', '')}"]
        if kind == "assistant":
            message = event.get("message") or {}
            # claude names a message it made up itself (an API error's text) `<synthetic>`: no model
            # ran, and the report credited it with an item (a new user, overnight on tabulate)
            if message.get("model") and message["model"] != SYNTHETIC:
                self.usage.model = whole_text(str(message["model"]))
            self._message_usage(message)
            shown: list[str] = []
            for block in message.get("content") or []:
                if block.get("type") == "text":
                    shown += block.get("text", "").splitlines()
                elif block.get("type") == "tool_use":
                    self.usage.tool_calls += 1
                    tool_input = block.get("input") or {}
                    if "command" in tool_input:
                        shown.append(f"$ {tool_input['command']}")
                    else:
                        shown.append(f"[{block.get('name', 'tool')}] {json.dumps(tool_input)[:200]}")
            return shown
        if kind == "user":
            shown = []
            for block in (event.get("message") or {}).get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    content = block.get("content")
                    if isinstance(content, list):
                        content = "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
                    shown += _clip(str(content or ""))
            return shown
        if kind == "result":
            usage = event.get("usage") or {}
            # the CLI's own total for the run; what the messages already reported is a floor
            self.usage.input_tokens = _most(self.usage.input_tokens, _input_of(usage))
            self.usage.output_tokens = _most(self.usage.output_tokens, count(usage.get("output_tokens")))
            # the CLI's figure for the whole run, raised by a later one, never lowered (as its tokens)
            cost = money(event.get("total_cost_usd"))
            if cost is not None:
                self.usage.cost_usd = cost if self.usage.cost_usd is None else max(self.usage.cost_usd, cost)
            # claude marks a run an API error ended (no key, a refused connection) is_error with the
            # subtype `success`: "failed (success)" read as a contradiction (a new user, on wcwidth)
            subtype = event.get("subtype")
            ending = "done" if not event.get("is_error") else (
                f"failed ({subtype})" if subtype and subtype != "success" else "failed")
            turns = event.get("num_turns", "?")  # the stream's word: shown as it is unless a count
            return [f"[result] {ending} after {counted(turns, 'turn') if type(turns) is int else f'{turns} turns'}"]
        return []

    def _message_usage(self, message: dict[str, Any]) -> None:
        """Count a model message's usage as it streams: claude prints each message's usage with
        each of its content blocks (output tokens as far as known), so it is kept per message id,
        the larger figure winning, and the run's running total is the sum over messages."""
        usage = message.get("usage")
        if not isinstance(usage, dict):
            return
        name = str(message.get("id") or f"unnamed-{len(self._messages)}")
        before = self._messages.get(name, (0, 0))
        now = (max(before[0], _input_of(usage) or 0), max(before[1], count(usage.get("output_tokens")) or 0))
        self._messages[name] = now
        # the sums over messages, kept as they grow (a message's figures only ever rise)
        self._sums = (self._sums[0] + now[0] - before[0], self._sums[1] + now[1] - before[1])
        self.usage.input_tokens = _most(self.usage.input_tokens, min(self._sums[0], MAX_TOKENS))
        self.usage.output_tokens = _most(self.usage.output_tokens, min(self._sums[1], MAX_TOKENS))

    # codex -------------------------------------------------------------------------------

    def _codex(self, event: dict[str, Any]) -> list[str]:
        kind = event.get("type", "")
        if kind == "turn.completed":
            usage = event.get("usage") or {}
            self.usage.input_tokens = _add(self.usage.input_tokens, usage.get("input_tokens"))
            self.usage.output_tokens = _add(self.usage.output_tokens, usage.get("output_tokens"))
            return []
        if kind in ("turn.failed", "error"):
            error = event.get("error") or event
            message = str(error.get("message", ""))
            self.retrying = kind == "error" and message.startswith(RECONNECTING)
            return [f"[error] {message}"]
        if kind not in ("item.started", "item.completed"):
            return []
        item = event.get("item") or {}
        item_type = item.get("type")
        if item_type == "command_execution":
            if kind == "item.started":
                return [f"$ {item.get('command', '')}"]
            self.usage.tool_calls += 1
            return _clip(item.get("aggregated_output") or "") + [f"(exit {item.get('exit_code')})"]
        if kind != "item.completed":
            return []
        if item_type in ("mcp_tool_call", "web_search", "file_change"):
            self.usage.tool_calls += 1
            return [f"[{item_type}]"]
        if item_type in ("agent_message", "reasoning"):
            return str(item.get("text", "")).splitlines()
        if item_type == "error":
            return [f"[warning] {item.get('message', '')}"]
        return []


def _input_of(usage: dict[str, Any]) -> int | None:
    """Input tokens as claude reports them: fresh, cache writes and cache reads together."""
    parts = [count(usage.get(key)) for key in ("input_tokens", "cache_creation_input_tokens",
                                               "cache_read_input_tokens")]
    known = [part for part in parts if part is not None]
    return min(sum(known), MAX_TOKENS) if known else None


def describe(usage: dict[str, Any]) -> str:
    """`12,400 in / 680 out tokens, $0.0137, 3 tool calls` from a run row or a total ("" when nothing
    is known). The money is `usd` as `priced` set it, the CLI's own figure labelled as the CLI's."""
    parts = []
    if usage.get("input_tokens") is not None or usage.get("output_tokens") is not None:
        parts.append(f"{usage.get('input_tokens') or 0:,} in / {usage.get('output_tokens') or 0:,} out tokens")
    money = money_text(usage)
    if money:
        parts.append(money)
        # a total whose cost leaves some runs out (codex reports no cost, and names no model a
        # rate card could price): said as the report says it, not a figure for every token shown
        if usage.get("unpriced_tokens"):
            parts.append(f"{usage['unpriced_tokens']:,} tokens unpriced")
    if usage.get("tool_calls"):
        parts.append(counted(usage['tool_calls'], 'tool call'))
    return ", ".join(parts)


# usd_source -> how the figure is labelled; a figure from the operator's rates needs no label
SOURCE_LABELS = {"rates": "", "cli": " (CLI's figure)", "mixed": " (in part the CLI's figure)"}


def money_text(usage: dict[str, Any]) -> str:
    """`$0.4200`, `$0.4200 (CLI's figure)` or "" : what a run or a total cost, and who says so."""
    if "usd_source" in usage:
        usd, source = usage.get("usd"), usage.get("usd_source") or ""
    else:  # a row nobody priced: all it can show is the CLI's figure
        usd, source = usage.get("cost_usd"), "cli"
    if usd is None:
        return ""
    return f"${usd:.4f}{SOURCE_LABELS.get(source, '')}"


def priced(row: dict[str, Any], rates: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """`row` (a run's usage) with `usd` and `usd_source` from `price`."""
    usd, source = price(row.get("model") or "", row.get("input_tokens"), row.get("output_tokens"),
                        row.get("cost_usd"), rates)
    return {**row, "usd": usd, "usd_source": source}


def total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The sum of runs' usage; a figure no run reported stays None. Priced rows (`priced`) also sum
    to `usd`, whose `usd_source` is "rates", "cli", "mixed" (some of each) or "" (none known), and
    `unpriced_tokens`, the tokens (in and out) of the runs `usd` leaves out; rows that are totals
    themselves (a drive's items) add theirs."""
    keys = ("input_tokens", "output_tokens", "cost_usd", "tool_calls")
    summed: dict[str, Any] = dict.fromkeys(keys)
    for row in rows:
        for key in keys:
            if row.get(key) is not None:
                summed[key] = (summed[key] or 0) + row[key]
    if rows and all("usd_source" in row for row in rows):
        summed["usd"], summed["usd_source"] = sum_costs((row.get("usd"), row["usd_source"]) for row in rows)
        summed["unpriced_tokens"] = sum(row["unpriced_tokens"] if "unpriced_tokens" in row else
                                        0 if row.get("usd") is not None else
                                        (row.get("input_tokens") or 0) + (row.get("output_tokens") or 0)
                                        for row in rows)
    return summed


def sum_costs(costs: Iterable[tuple[float | None, str]]) -> tuple[float | None, str]:
    """The sum of the (usd, source) costs known, and whose figures they are: the one source they
    share, "mixed" (some of each), or (None, "") when none is known."""
    known = [(usd, source) for usd, source in costs if usd is not None]
    if not known:
        return None, ""
    sources = {source for _, source in known}
    return sum(usd for usd, _ in known), sources.pop() if len(sources) == 1 else "mixed"


def price(model: str, input_tokens: int | None, output_tokens: int | None, cli_usd: float | None,
          rates: dict[str, tuple[float, float]]) -> tuple[float | None, str]:
    """What a run cost and who says so: (usd, "rates") from the operator's rate card (USD per
    million tokens in and out, by model) when it names the run's model and the tokens are known;
    else the CLI's own figure, labelled "cli"; else (None, ""). The CLI's figure comes from its
    own price table and may not be what the operator pays, which is why it is labelled."""
    rate = rates.get(model)
    if rate is not None and input_tokens is not None and output_tokens is not None:
        return (input_tokens * rate[0] + output_tokens * rate[1]) / 1_000_000, "rates"
    if cli_usd is not None:
        return cli_usd, "cli"
    return None, ""
