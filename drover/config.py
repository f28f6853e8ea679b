"""drover.toml -> a frozen Config.

Each key is defined once, as a dataclass field made by `key(...)`: its table, default, meaning,
allowed values and extra check. SCHEMA, validation, the commented drover.toml `init` writes and
the tables of docs/configuration.md are all derived from those fields. Adding a key is one
`key(...)` line in the dataclass that holds it.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import field, fields, replace
from pathlib import Path
from typing import Any

from dataclasses import dataclass
from drover.errors import ConfigError, did_you_mean
from drover.agents.presets import PRESETS
from drover.trackers import BACKENDS
from drover.vocabulary import CONFIG_FILE as CONFIG_FILE, EXECUTORS, PREFIX_PATTERN, SLOTS
from drover.vocabulary import GUIDANCE_LEVELS as GUIDANCE_LEVELS  # data.py reads it from here

# [verify] is an open table of key -> command string; `default` always exists.
VERIFY_DEFAULT = {"default": "make test"}

_TYPE_WORDS = {str: "a string", int: "an integer", bool: "true or false", dict: "a table"}
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class KeyInfo:
    """One key of drover.toml, as its field declares it."""

    table: str
    name: str
    type: type
    default: Any
    meaning: str
    # the allowed values; for a preset or a tracker backend the registry's live keys, so that an
    # entry added to presets.PRESETS or trackers.BACKENDS is accepted (and documented) with nothing else
    choices: Collection[str] = ()
    # returns "" when the value is fine, else what was expected ("an integer of at least 1")
    check: Callable[[Any], str] | None = None
    # turns an accepted other spelling into the declared type before the checks (e.g. 45 -> "45s")
    convert: Callable[[Any], Any] | None = None


def key(table: str, default: Any, meaning: str, *, choices: Collection[str] = (),
        check: Callable[[Any], str] | None = None, convert: Callable[[Any], Any] | None = None) -> Any:
    """A dataclass field that is also a drover.toml key: the one place its facts are written.

    A dict default is a table of strings; what the user writes is laid over it.
    """
    metadata = {"table": table, "meaning": meaning, "choices": choices, "check": check, "convert": convert,
                "default": default}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def parse_duration(text: str) -> int:
    """'2h', '90m', '1h30m', '45s' or a bare number of seconds -> seconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    match = _DURATION.match(text)
    if not text or not match:
        raise ValueError(text)
    hours, minutes, seconds = (int(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def _duration(value: str) -> str:
    try:
        parse_duration(value)
    except ValueError:
        return "a duration such as 2h, 90m or 45s"
    return ""


def _prefix(value: str) -> str:
    return "" if re.fullmatch(PREFIX_PATTERN, value) else "letters and digits, starting with a letter"


def _seconds(value: Any) -> Any:
    """`timeout = 45` is seconds, as the documentation says."""
    return f"{value}s" if isinstance(value, int) and not isinstance(value, bool) else value


def _items_folder(value: str) -> str:
    """The items folder lies inside the repository, outside drover's and git's own state."""
    from pathlib import PurePosixPath

    parts = PurePosixPath(value.strip()).parts if value.strip() else ()
    if not parts or parts == (".",) or PurePosixPath(value).is_absolute() or ".." in parts:
        return f"a folder inside the repository, not {value!r}"
    if parts[0] in (".drover", ".git"):
        return f"a folder outside {parts[0]}/ (drover's and git's state), not {value!r}"
    return ""


def _at_least_one(value: int) -> str:
    return "" if value >= 1 else "an integer of at least 1"


def _strings(value: dict[str, Any]) -> str:
    return "" if all(isinstance(word, str) for word in value.values()) else "a table of strings"


# label -> kind for `drover new --issue`; a project's [tracker] kinds adds to these
KIND_LABELS = {"bug": "bug", "enhancement": "feature", "feature": "feature", "documentation": "docs",
               "chore": "chore", "refactor": "refactor", "performance": "performance", "security": "security"}


@dataclass(frozen=True)
class AgentConfig:
    """One agent: its preset or command, identity, timeout and guidance ([agent] or a slot's table)."""

    preset: str = key("agent", "claude", "the agent CLI to launch", choices=PRESETS.keys())
    command: str = key("agent", "", "argv as shell-like words (never run through a shell); overrides the preset")
    name: str = key("agent", "", "identity recorded as author / auditor; default: the preset name")
    timeout: str = key("agent", "2h", "the agent's whole process group is ended after this long "
                                            "(2h, 90m, 1h30m, 45s or seconds)", check=_duration, convert=_seconds)
    guidance: str = key("agent", "detailed", "how much coaching the built-in prompts carry",
                        choices=GUIDANCE_LEVELS)
    sandboxed: bool = key("agent", False, "true states this machine is a sandbox: the preset then runs unattended "
                                          "as root (claude: IS_SANDBOX=1); see `drover help agents`")

    @property
    def identity(self) -> str:
        """Who this agent is in the ledger: `name`, else the preset."""
        return self.name or self.preset

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)


@dataclass(frozen=True)
class PromptFiles:
    """[prompts]: Config keeps these as a dict by slot; this type only declares the keys."""

    implement: str = key("prompts", "", "override file for the implement slot; \"\" renders the built-in template")
    review: str = key("prompts", "", "override file for the review slot")
    draft: str = key("prompts", "", "override file for the draft slot")


@dataclass(frozen=True)
class TrackerConfig:
    """The [tracker] table."""

    backend: str = key("tracker", "none", "where issues live", choices=BACKENDS.keys())
    repo: str = key("tracker", "", "owner/name for github; \"\" lets gh use this checkout's remote")
    follow_up_label: str = key("tracker", "follow-up", "the label that marks follow-up issues (github)")
    register: str = key("tracker", "follow-ups.md", "the follow-up register file (backend file)")
    # key() gives a dict default its own default_factory, so no instance shares the table
    kinds: dict[str, str] = key("tracker", KIND_LABELS, "issue label -> item kind for `drover new --issue`; "  # noqa: RUF009
                                "yours are added to these", check=_strings)


@dataclass(frozen=True)
class RayConfig:
    """[executor.ray]: where `[run] executor = "ray"` sends runs (docs/executors.md)."""

    address: str = key("executor.ray", "auto", "the Ray cluster: auto (the one this machine joined) or "
                                               "ray://host:10001")
    num_cpus: int = key("executor.ray", 1, "CPUs Ray reserves for each agent run (at least 1)",
                        check=_at_least_one)
    runtime_env: dict[str, Any] = key("executor.ray", {}, "Ray's runtime_env for each run, e.g. "  # noqa: RUF009
                                                          "{ pip = [\"drover-cli[ray]\"] }")


@dataclass(frozen=True)
class Config:
    """The whole drover.toml, defaults filled in."""

    prefix: str = key("project", "D", "item ids are D-1, D-2, ...: letters and digits, starting with a letter",
                      check=_prefix)
    items: str = key("project", "items", "the folder holding one Markdown file per item", check=_items_folder)
    commit_items: bool = key("project", False, "true: drover commits its own edits to item files")
    agent: AgentConfig = field(default_factory=AgentConfig, metadata={"holds": AgentConfig})
    slot_agents: dict[str, AgentConfig] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=lambda: {slot: "" for slot in SLOTS},
                                    metadata={"holds": PromptFiles})
    base: str = key("run", "main", "the branch items start from and merge into")
    branch: str = key("run", "drover/{{ Id | lower }}", "the branch template; must render a valid git branch name")
    worktree: bool = key("run", True, "each item is worked in .drover/worktrees/<ID>; false: in this checkout")
    setup: str = key("run", "", "a command run once in each new worktree before its first agent, e.g. \"uv sync\"")
    executor: str = key("run", "local", "where agent runs execute: local, or ray (drover help executors)",
                        choices=EXECUTORS)
    verify: dict[str, str] = field(default_factory=lambda: dict(VERIFY_DEFAULT))
    max_rounds: int = key("review", 3, "rounds of changes an item may have (at least 1); past it request-changes "
                                       "refuses, keeps the findings and parks the item", check=_at_least_one)
    require_independent: bool = key("review", False, "true: an approval by one of the item's authors (Weak) "
                                                     "does not open the gate; false: it does, and shows as Weak")
    tracker: TrackerConfig = field(default_factory=TrackerConfig, metadata={"holds": TrackerConfig})
    ray: RayConfig = field(default_factory=RayConfig, metadata={"holds": RayConfig})

    def agent_for(self, slot: str) -> AgentConfig:
        """The agent a slot runs: [agent.<slot>] over [agent]."""
        return self.slot_agents.get(slot, self.agent)


def _declared(cls: type) -> list[KeyInfo]:
    """The keys a dataclass declares, in field order, nested holders expanded where they sit."""
    found: list[KeyInfo] = []
    for item in fields(cls):
        meta = item.metadata
        if "holds" in meta:
            found += _declared(meta["holds"])
        elif "table" in meta:
            default = meta["default"]
            found.append(KeyInfo(meta["table"], item.name, type(default), default, meta["meaning"],
                                 meta["choices"], meta["check"], meta["convert"]))
    return found


# table -> key -> KeyInfo, in the order drover.toml lists them; SCHEMA is its (type, default) view.
KEYS: dict[str, dict[str, KeyInfo]] = {}
for _info in _declared(Config):
    KEYS.setdefault(_info.table, {})[_info.name] = _info
SCHEMA: dict[str, dict[str, tuple[type, Any]]] = {
    table: {name: (info.type, info.default) for name, info in keys.items()} for table, keys in KEYS.items()
}


class _Problems:
    """Every problem found in one reading of drover.toml; raised together at the end."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def add(self, message: str) -> None:
        self.lines.append(message)

    def raise_any(self) -> None:
        if self.lines:
            raise ConfigError.several(self.lines)


def _where(table: str, name: str) -> str:
    return f"{CONFIG_FILE}: [{table}] {name}"


def _check_value(info: KeyInfo, value: Any, shown: str) -> str:
    """"" when `value` suits the key; else the one-line problem. `shown` is the table as written."""
    where = _where(shown, info.name)
    # bool is an int in Python; keep them apart so `max_rounds = true` is an error.
    if not isinstance(value, info.type) or (info.type is int and isinstance(value, bool)):
        return f"{where}: expected {_TYPE_WORDS[info.type]}"
    if info.choices and value not in info.choices:
        return f"{where}: expected one of {', '.join(info.choices)}, not {value!r}"
    expected = info.check(value) if info.check else ""
    return f"{where}: expected {expected}" if expected else ""


def _read_table(table: str, raw: Any, problems: _Problems, nested: tuple[str, ...] = (),
                shown: str = "") -> dict[str, Any]:
    shown = shown or table
    if not isinstance(raw, dict):
        problems.add(f"{CONFIG_FILE}: [{shown}]: expected a table")
        return {}
    values = {}
    for name, value in raw.items():
        if name in nested:
            continue
        if name not in KEYS[table]:
            if nested and isinstance(value, dict):
                # [agent.<name>] with a name that is not a slot
                problems.add(f"{CONFIG_FILE}: [{shown}.{name}]: unknown slot (expected one of "
                             f"{', '.join(nested)})" + _suggest(name, nested))
            else:
                problems.add(f"{_where(shown, name)}: unknown key" + _suggest(name, KEYS[table]))
            continue
        info = KEYS[table][name]
        value = info.convert(value) if info.convert else value
        problem = _check_value(info, value, shown)
        if problem:
            problems.add(problem)
        else:
            values[name] = {**info.default, **value} if info.type is dict else value
    return values


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = did_you_mean(word, choices)
    return f" (did you mean {close}?)" if close else ""


def parse_config(data: dict[str, Any]) -> Config:
    """Validate a parsed drover.toml and build the Config; every problem is reported, one line each."""
    problems = _Problems()
    # [executor.ray] arrives as data["executor"]["ray"]: one table per executor that has settings
    known = {table for table in KEYS if "." not in table} | {"verify", "executor"}
    for table, value in data.items():
        if table in known:
            continue
        if not isinstance(value, dict):
            # a key above every table: say which table it belongs in, when it belongs in one
            homes = [name for name, keys in KEYS.items() if table in keys]
            hint = f" (did you mean [{homes[0]}] {table}?)" if homes else ""
            problems.add(f"{CONFIG_FILE}: {table}: unknown key{hint}")
        else:
            problems.add(f"{CONFIG_FILE}: [{table}]: unknown table" + _suggest(table, known))
    project = _read_table("project", data.get("project", {}), problems)
    agent_raw = data.get("agent", {})
    agent = AgentConfig(**_read_table("agent", agent_raw, problems, nested=SLOTS))
    slot_agents = {}
    if isinstance(agent_raw, dict):
        for slot in SLOTS:
            if slot in agent_raw:
                # a slot table names only what differs from [agent]; timeout and the rest carry over
                overrides = _read_table("agent", agent_raw[slot], problems, shown=f"agent.{slot}")
                if "preset" in overrides and "name" not in overrides:
                    overrides["name"] = ""
                if "preset" in overrides and "command" not in overrides:
                    overrides["command"] = ""
                slot_agents[slot] = replace(agent, **overrides)
    prompts = {slot: "" for slot in SLOTS} | _read_table("prompts", data.get("prompts", {}), problems)
    run = _read_table("run", data.get("run", {}), problems)
    review = _read_table("review", data.get("review", {}), problems)
    tracker = TrackerConfig(**_read_table("tracker", data.get("tracker", {}), problems))
    verify = dict(VERIFY_DEFAULT)
    verify_raw = data.get("verify", {})
    if not isinstance(verify_raw, dict):
        problems.add(f"{CONFIG_FILE}: [verify]: expected a table")
        verify_raw = {}
    for name, value in verify_raw.items():
        if isinstance(value, str):
            verify[name] = value
        else:
            problems.add(f"{CONFIG_FILE}: [verify] {name}: expected a string")
    executor_raw = data.get("executor", {})
    if not isinstance(executor_raw, dict):
        problems.add(f"{CONFIG_FILE}: [executor]: expected a table")
        executor_raw = {}
    for name in executor_raw:
        if name != "ray":
            problems.add(f"{CONFIG_FILE}: [executor.{name}]: unknown table (expected [executor.ray])")
    ray = RayConfig(**_read_table("executor.ray", executor_raw.get("ray", {}), problems))
    problems.raise_any()
    # an empty [tracker] repo with github is allowed: gh infers the repository from the remote
    return Config(**project, agent=agent, slot_agents=slot_agents, prompts=prompts, **run, verify=verify,
                  **review, tracker=tracker, ray=ray)


def load_config(path: Path) -> Config:
    """Read and validate drover.toml; every problem is a line of one ConfigError naming the key."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=CONFIG_FILE) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=CONFIG_FILE) from None
    text = text.removeprefix("\ufeff")
    try:
        data = parse_toml(path, text)
    except ValueError as exc:  # tomllib.TOMLDecodeError, named without importing tomllib
        line = getattr(exc, "lineno", None) or _line_of(str(exc))
        message = str(exc).split(" (at line")[0]
        raise ConfigError(message, path=CONFIG_FILE, line=line) from None
    return parse_config(data)


# The parsed TOML of each project's drover.toml (and of the shipped destinations.toml), kept in
# the user's cache folder as JSON beside the exact text it came from: importing tomllib is a few
# ms of every command, reading JSON is not. The cache is used only when the text is the same to
# the character (and the Python the same), so it cannot be stale; TOML that JSON cannot hold
# (dates, nan) is never kept. docs/decisions.md.


def parse_toml(path: Path, text: str, kind: str = "config") -> dict[str, Any]:
    """`text` (the file at `path`) parsed as TOML, through the cache; raises tomllib.TOMLDecodeError."""
    data = _cached_toml(path, text, kind)
    if data is None:
        import tomllib

        data = tomllib.loads(text)
        _keep_toml(path, text, data, kind)
    return data


def _toml_cache(path: Path, kind: str = "config") -> str:
    import os
    import zlib

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    where = zlib.crc32(os.path.abspath(path).encode("utf-8", "surrogateescape"))
    return os.path.join(base, "drover", f"{kind}-{where:08x}.json")


def _cached_toml(path: Path, text: str, kind: str) -> dict[str, Any] | None:
    import json
    import sys

    try:
        with open(_toml_cache(path, kind), encoding="utf-8") as handle:
            kept = json.load(handle)
        if kept["text"] == text and kept["python"] == sys.version and isinstance(kept["data"], dict):
            return kept["data"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def _keep_toml(path: Path, text: str, data: dict[str, Any], kind: str) -> None:
    import json
    import os
    import sys

    try:
        dumped = json.dumps({"text": text, "python": sys.version, "data": data}, ensure_ascii=False)
        if json.loads(dumped)["data"] != data:
            return  # a value JSON would change (nan): parse it each time
        cache = _toml_cache(path, kind)
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        partial = f"{cache}.{os.getpid()}"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(dumped)
        os.replace(partial, cache)
    except (OSError, TypeError, ValueError):
        pass  # dates and times are not JSON; an unwritable cache costs only the speed


def _line_of(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None
