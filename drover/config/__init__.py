"""drover.toml -> a frozen Config.

Each key is defined once, as a NamedTuple field whose default is `key(...)` (drover/config/keys.py):
its table, default, meaning, allowed values and extra check. SCHEMA, validation, the commented
drover.toml `init` writes and the tables of docs/configuration.md are all derived from those
fields. Adding a key is one `key(...)` line in the class that holds it; a table Config holds
whole is a NamedTuple in drover/config/tables.py, held by `holds(...)`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from drover.config.keys import (DECLARED, KeyInfo, as_seconds, at_least_one, at_least_zero, check_items_folder,
                                check_optional_duration, check_prefix, check_relative_paths, holds, key, keyed,
                                parse_duration)
from drover.config.tables import AgentConfig, PromptFiles, RayConfig, RetryConfig, TrackerConfig
from drover.config.tables import NotifyConfig
from drover.config.tables import BudgetConfig
from drover.config.toml import line_of, locate, overwritten, parse_toml
from drover.errors import ConfigError, did_you_mean
from drover.vocabulary import CONFIG_FILE as CONFIG_FILE, EXECUTORS, SLOTS
from drover.vocabulary import GUIDANCE_LEVELS as GUIDANCE_LEVELS  # data.py reads it from here

__all__ = ["CONFIG_FILE", "GUIDANCE_LEVELS", "KEYS", "SCHEMA", "VERIFY_DEFAULT", "AgentConfig", "Config",
           "KeyInfo", "RayConfig", "TrackerConfig", "load_config", "parse_config"]

# [verify] is an open table of key -> command string; `default` always exists.
VERIFY_DEFAULT = {"default": "make test"}

FALLBACK = "fallback"  # [agent.fallback], beside the slot tables

_TYPE_WORDS = {str: "a string", int: "an integer", bool: "true or false", dict: "a table",
               tuple: "a list of strings"}


@keyed
class Config(NamedTuple):
    """The whole drover.toml, defaults filled in; read-only, its dicts too (defaults are shared)."""

    prefix: str = key("project", "D", "item ids are D-1, D-2, ...: letters and digits, starting with a letter",
                      check=check_prefix)
    items: str = key("project", "items", "the folder holding one Markdown file per item", check=check_items_folder)
    commit_items: bool = key("project", False, "true: drover commits its own edits to item files")
    agent: AgentConfig = holds(AgentConfig)
    slot_agents: dict[str, AgentConfig] = {}
    prompts: dict[str, str] = holds(PromptFiles, dict.fromkeys(SLOTS, ""))
    base: str = key("run", "main", "the branch items start from and merge into")
    branch: str = key("run", "drover/{{ Id | lower }}", "the branch template; must render a valid git branch name")
    worktree: bool = key("run", True, "each item is worked in .drover/worktrees/<ID>; false: in this checkout")
    setup: str = key("run", "", "a command run once in each new worktree before its first agent, e.g. \"uv sync\"")
    pool: int = key("run", 0, "worktrees kept and reused between items (drover help worktrees); 0: each item gets a "
                              "new worktree, removed when it is finished; with a verify command, 2 per drive job "
                              "keeps [run] setup to once a worktree", check=at_least_zero)
    keep: tuple[str, ...] = key("run", (), "paths a pooled worktree's clean spares, from its top, e.g. "
                                           "[\"node_modules\", \".venv\"]: the next item trusts what they hold",
                                check=check_relative_paths)
    setup_inputs: tuple[str, ...] = key("run", (), "files whose change (or a change of [run] keep) makes a pooled "
                                                   "worktree run [run] setup again, e.g. [\"uv.lock\"]",
                                        check=check_relative_paths)
    check_timeout: str = key("run", "", "how long drover's check (the verify command, with its set-up) may run, "
                                        "e.g. \"30m\"; empty: the implementing agent's timeout",
                             check=check_optional_duration, convert=as_seconds)
    executor: str = key("run", "local", "where agent runs execute: local, or ray (drover help executors)",
                        choices=EXECUTORS)
    verify: dict[str, str] = dict(VERIFY_DEFAULT)
    max_rounds: int = key("review", 3, "rounds of changes an item may have (at least 1); past it request-changes "
                                       "refuses, keeps the findings and parks the item", check=at_least_one)
    require_independent: bool = key("review", False, "true: an approval by one of the item's authors (Weak) "
                                                     "does not open the gate; false: it does, and shows as Weak")
    tracker: TrackerConfig = holds(TrackerConfig)
    ray: RayConfig = holds(RayConfig)
    notify: NotifyConfig = holds(NotifyConfig)
    budget: BudgetConfig = holds(BudgetConfig)
    retry: RetryConfig = holds(RetryConfig)
    # [agent.fallback]: the agent the `fallback` policy runs in a failed slot's place (None: park instead)
    fallback_agent: AgentConfig | None = None

    def agent_for(self, slot: str) -> AgentConfig:
        """The agent a slot runs: [agent.<slot>] over [agent]."""
        return self.slot_agents.get(slot, self.agent)

    @property
    def check_timeout_seconds(self) -> int:
        """How long drover's check may run: [run] check_timeout, else the implementing agent's
        timeout (the check runs what that agent was told to run); 0: no limit."""
        if self.check_timeout.strip():
            return parse_duration(self.check_timeout)
        return self.agent_for("implement").timeout_seconds


# table -> key -> KeyInfo, in the order drover.toml lists them; SCHEMA is its (type, default) view.
KEYS: dict[str, dict[str, KeyInfo]] = {}
for _info in DECLARED[Config]:
    KEYS.setdefault(_info.table, {})[_info.name] = _info
SCHEMA: dict[str, dict[str, tuple[type, Any]]] = {
    table: {name: (info.type, info.default) for name, info in keys.items()} for table, keys in KEYS.items()
}


class _Problems:
    """Every problem found in one reading of drover.toml, each a line naming the file, the table
    and the key in SPEC's words (`drover.toml: [review] max_rounds: expected an integer`), then
    the line (when `locate` finds it) after them; raised together at the end, in the file's order."""

    def __init__(self, locate: Callable[[str, str], int | None]) -> None:
        self.found: list[tuple[int, str]] = []
        self.locate = locate

    def add(self, table: str, key: str, what: str) -> None:
        """`what` is wrong with `key` of `table` ("" key: the table itself; "" table: a key above
        every table)."""
        line = self.locate(table, key)
        place = " ".join(filter(None, [f"[{table}]" if table else "", key]))
        self.found.append((line or 0, f"{CONFIG_FILE}: {place}: {what}{f' (line {line})' if line else ''}"))

    def raise_any(self) -> None:
        if self.found:  # in the file's order (a stable sort: unplaced ones keep the order they were found in)
            found = sorted(self.found, key=lambda found: found[0])
            raise ConfigError.several([message for _, message in found], [line or None for line, _ in found])


def _check_value(info: KeyInfo, value: Any) -> str:
    """"" when `value` suits the key; else what is wrong with it."""
    # bool is an int in Python; keep them apart so `max_rounds = true` is an error.
    if not isinstance(value, info.type) or (info.type is int and isinstance(value, bool)):
        return f"expected {_TYPE_WORDS[info.type]}"
    if isinstance(value, tuple) and not all(isinstance(entry, str) for entry in value):
        return f"expected {_TYPE_WORDS[tuple]}"
    if any("\0" in text for text in (value if isinstance(value, tuple) else (value,)) if isinstance(text, str)):
        return "expected text without a NUL character"  # no argument or path a program is given holds one
    # a key's default is one of its choices: the preset and tracker registries (3 ms of imports) are
    # not asked about the `claude` and `none` that `drover init` writes into every drover.toml
    if value != info.default and info.choices and value not in info.choices:
        return f"expected one of {', '.join(info.choices)}, not {value!r}"
    expected = info.check(value) if info.check else ""
    return f"expected {expected}" if expected else ""


def _read_table(table: str, raw: Any, problems: _Problems, nested: tuple[str, ...] = (),
                shown: str = "") -> dict[str, Any]:
    shown = shown or table
    if not isinstance(raw, dict):
        problems.add(shown, "", "expected a table")
        return {}
    values = {}
    for name, value in raw.items():
        if name in nested:
            continue
        if name not in KEYS[table]:
            if nested and isinstance(value, dict):
                # [agent.<name>] with a name that is not a slot
                problems.add(f"{shown}.{name}", "", f"unknown slot (expected one of {', '.join(nested)})"
                             + _suggest(name, nested))
            else:
                problems.add(shown, name, "unknown key" + _suggest(name, KEYS[table]))
            continue
        info = KEYS[table][name]
        value = info.convert(value) if info.convert else value
        problem = _check_value(info, value)
        if problem:
            problems.add(shown, name, problem)
        else:
            values[name] = {**info.default, **value} if info.type is dict else value
    return values


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = did_you_mean(word, choices)
    return f" (did you mean {close}?)" if close else ""


def parse_config(data: dict[str, Any],
                 locate: Callable[[str, str], int | None] = lambda table, key: None) -> Config:
    """Validate a parsed drover.toml and build the Config; every problem is reported, one line each,
    at the line `locate` finds for its table and key (toml.locate)."""
    problems = _Problems(locate)
    # [executor.ray] arrives as data["executor"]["ray"]: one table per executor that has settings
    known = {table for table in KEYS if "." not in table} | {"verify", "executor"}
    for table, value in data.items():
        if table in known:
            continue
        if not isinstance(value, dict):
            # a key above every table: say which table it belongs in, when it belongs in one
            homes = [name for name, keys in KEYS.items() if table in keys]
            hint = f" (did you mean [{homes[0]}] {table}?)" if homes else ""
            problems.add("", table, f"unknown key{hint}")
        else:
            problems.add(table, "", "unknown table" + _suggest(table, known))
    project = _read_table("project", data.get("project", {}), problems)
    agent_raw = data.get("agent", {})
    agent = AgentConfig(**_read_table("agent", agent_raw, problems, nested=(*SLOTS, FALLBACK)))
    slot_agents = {}
    if isinstance(agent_raw, dict):
        for slot in (*SLOTS, FALLBACK):
            if slot in agent_raw:
                # a slot table names only what differs from [agent]; timeout and the rest carry over
                overrides = _read_table("agent", agent_raw[slot], problems, shown=f"agent.{slot}")
                if "preset" in overrides and "name" not in overrides:
                    overrides["name"] = ""
                if "preset" in overrides and "command" not in overrides:
                    overrides["command"] = ""
                slot_agents[slot] = agent._replace(**overrides)
    prompts = {slot: "" for slot in SLOTS} | _read_table("prompts", data.get("prompts", {}), problems)
    run = _read_table("run", data.get("run", {}), problems)
    review = _read_table("review", data.get("review", {}), problems)
    tracker = TrackerConfig(**_read_table("tracker", data.get("tracker", {}), problems))
    verify = dict(VERIFY_DEFAULT)
    verify_raw = data.get("verify", {})
    if not isinstance(verify_raw, dict):
        problems.add("verify", "", "expected a table")
        verify_raw = {}
    for name, value in verify_raw.items():
        if isinstance(value, str) and "\0" in value:
            problems.add("verify", name, "expected text without a NUL character")
        elif isinstance(value, str):
            verify[name] = value
        else:
            problems.add("verify", name, "expected a string")
    executor_raw = data.get("executor", {})
    if not isinstance(executor_raw, dict):
        problems.add("executor", "", "expected a table")
        executor_raw = {}
    for name in executor_raw:
        if name != "ray":
            problems.add(f"executor.{name}", "", "unknown table (expected [executor.ray])")
    ray = RayConfig(**_read_table("executor.ray", executor_raw.get("ray", {}), problems))
    notify = NotifyConfig(**_read_table("notify", data.get("notify", {}), problems))
    budget = BudgetConfig(**_read_table("budget", data.get("budget", {}), problems))
    retry = RetryConfig(**_read_table("retry", data.get("retry", {}), problems))
    fallback_agent = slot_agents.pop(FALLBACK, None)
    problems.raise_any()
    # an empty [tracker] repo with github is allowed: gh infers the repository from the remote
    return Config(**project, agent=agent, slot_agents=slot_agents, prompts=prompts, **run, verify=verify,
                  **review, tracker=tracker, ray=ray, notify=notify, budget=budget,
                  retry=retry, fallback_agent=fallback_agent)


def load_config(path: Path) -> Config:
    """Read and validate drover.toml; every problem is a line of one ConfigError naming the key."""
    try:
        from drover.git.files import read_regular  # a fifo there is no drover.toml to wait on

        text = read_regular(path).decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=CONFIG_FILE) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=CONFIG_FILE) from None
    text = text.removeprefix("\ufeff")
    try:
        data = parse_toml(path, text)
    except ValueError as exc:  # tomllib.TOMLDecodeError, named without importing tomllib
        line = getattr(exc, "lineno", None) or line_of(str(exc))
        raise ConfigError(overwritten(str(exc), text, line), path=CONFIG_FILE, line=line) from None
    return parse_config(data, locate(text))
