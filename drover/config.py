"""drover.toml -> a frozen Config. Every key, its default and its type live in one table."""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable

from .errors import ConfigError, did_you_mean
from .presets import PRESET_NAMES as PRESETS
from .trackers import BACKENDS
from .vocabulary import GUIDANCE_LEVELS, PREFIX_PATTERN, SLOTS

CONFIG_FILE = "drover.toml"
TRACKER_BACKENDS = tuple(BACKENDS)

# table -> key -> (type, default). `str` values may be further checked in _check_value.
SCHEMA: dict[str, dict[str, tuple[type, Any]]] = {
    "project": {"prefix": (str, "D"), "items": (str, "items"), "commit_items": (bool, False)},
    "agent": {
        "preset": (str, "claude"),
        "command": (str, ""),
        "name": (str, ""),
        "timeout": (str, "2h"),
        "guidance": (str, "detailed"),
        "sandboxed": (bool, False),
    },
    "prompts": {slot: (str, "") for slot in SLOTS},
    "run": {"base": (str, "main"), "branch": (str, "drover/{{ Id | lower }}"), "worktree": (bool, True),
            "executor": (str, "local")},
    "review": {"max_rounds": (int, 3)},
    "tracker": {
        "backend": (str, "none"),
        "repo": (str, ""),
        "follow_up_label": (str, "follow-up"),
        "register": (str, "follow-ups.md"),
    },
    # [executor.ray]: where `[run] executor = "ray"` sends runs (docs/executors.md).
    "executor.ray": {"address": (str, "auto"), "num_cpus": (int, 1), "runtime_env": (dict, {})},
}
EXECUTORS = ("local", "ray")
# [verify] is an open table of key -> command string; `default` always exists.
VERIFY_DEFAULT = {"default": "make test"}

_TYPE_WORDS = {str: "a string", int: "an integer", bool: "true or false", dict: "a table"}
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")


@dataclass(frozen=True)
class AgentConfig:
    preset: str = "claude"
    command: str = ""
    name: str = ""
    timeout: str = "2h"
    guidance: str = "detailed"
    sandboxed: bool = False  # the operator says this machine is a sandbox (drover/presets.py)

    @property
    def identity(self) -> str:
        """Who this agent is in the ledger: `name`, else the preset."""
        return self.name or self.preset

    @property
    def timeout_seconds(self) -> int:
        return parse_duration(self.timeout)


@dataclass(frozen=True)
class TrackerConfig:
    backend: str = "none"
    repo: str = ""
    follow_up_label: str = "follow-up"
    register: str = "follow-ups.md"


@dataclass(frozen=True)
class RayConfig:
    address: str = "auto"
    num_cpus: int = 1
    runtime_env: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    prefix: str = "D"
    items: str = "items"
    commit_items: bool = False
    agent: AgentConfig = field(default_factory=AgentConfig)
    slot_agents: dict[str, AgentConfig] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=lambda: {slot: "" for slot in SLOTS})
    base: str = "main"
    branch: str = "drover/{{ Id | lower }}"
    worktree: bool = True
    verify: dict[str, str] = field(default_factory=lambda: dict(VERIFY_DEFAULT))
    max_rounds: int = 3
    tracker: TrackerConfig = field(default_factory=TrackerConfig)
    executor: str = "local"
    ray: RayConfig = field(default_factory=RayConfig)

    def agent_for(self, slot: str) -> AgentConfig:
        """The agent a slot runs: [agent.<slot>] over [agent]."""
        return self.slot_agents.get(slot, self.agent)


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


def _where(table: str, key: str) -> str:
    return f"{CONFIG_FILE}: [{table}] {key}"


def _check_value(table: str, key: str, value: Any, shown: str = "") -> Any:
    """`shown` is the table as the user wrote it ([agent.review] checks against [agent])."""
    expected: Any  # not `type`: isinstance against a `type` would narrow `value` to object below
    expected, _ = SCHEMA[table][key]
    where = _where(shown or table, key)
    if (table, key) == ("agent", "timeout") and isinstance(value, int) and not isinstance(value, bool):
        value = f"{value}s"  # `timeout = 45` is seconds, as the documentation says
    # bool is an int in Python; keep them apart so `max_rounds = true` is an error.
    if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {_TYPE_WORDS[expected]}")
    choices = {
        ("agent", "preset"): PRESETS,
        ("agent", "guidance"): GUIDANCE_LEVELS,
        ("tracker", "backend"): TRACKER_BACKENDS,
        ("run", "executor"): EXECUTORS,
    }.get((table, key))
    if choices and value not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(choices)}, not {value!r}")
    if (table, key) == ("agent", "timeout"):
        try:
            parse_duration(value)
        except ValueError:
            raise ConfigError(f"{where}: expected a duration such as 2h, 90m or 45s") from None
    if (table, key) in (("review", "max_rounds"), ("executor.ray", "num_cpus")) and value < 1:
        raise ConfigError(f"{where}: expected an integer of at least 1")
    if (table, key) == ("project", "items"):
        _check_items_folder(where, value)
    if (table, key) == ("project", "prefix") and not re.fullmatch(PREFIX_PATTERN, value):
        raise ConfigError(f"{where}: expected letters and digits, starting with a letter")
    return value


def _check_items_folder(where: str, value: str) -> None:
    """The items folder lies inside the repository, outside drover's and git's own state."""
    from pathlib import PurePosixPath

    parts = PurePosixPath(value.strip()).parts if value.strip() else ()
    if not parts or parts == (".",):
        raise ConfigError(f"{where}: expected a folder inside the repository, not {value!r}")
    if PurePosixPath(value).is_absolute() or ".." in parts:
        raise ConfigError(f"{where}: expected a folder inside the repository, not {value!r}")
    if parts[0] in (".drover", ".git"):
        raise ConfigError(f"{where}: expected a folder outside {parts[0]}/ (drover's and git's state), not {value!r}")


def _read_table(table: str, raw: Any, nested: tuple[str, ...] = (), shown: str = "") -> dict[str, Any]:
    shown = shown or table
    if not isinstance(raw, dict):
        raise ConfigError(f"{CONFIG_FILE}: [{shown}]: expected a table")
    values = {}
    for key, value in raw.items():
        if key in nested:
            continue
        if key not in SCHEMA[table]:
            if nested and isinstance(value, dict):
                # [agent.<name>] with a name that is not a slot
                raise ConfigError(f"{CONFIG_FILE}: [{shown}.{key}]: unknown slot (expected one of "
                                  f"{', '.join(nested)})" + _suggest(key, nested))
            raise ConfigError(f"{_where(shown, key)}: unknown key" + _suggest(key, SCHEMA[table]))
        values[key] = _check_value(table, key, value, shown)
    return values


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = did_you_mean(word, choices)
    return f" (did you mean {close}?)" if close else ""


def parse_config(data: dict[str, Any]) -> Config:
    """Validate a parsed drover.toml and build the Config."""
    known = {table for table in SCHEMA if "." not in table} | {"verify", "executor"}
    for table, value in data.items():
        if table in known:
            continue
        if not isinstance(value, dict):
            # a key above every table: say which table it belongs in, when it belongs in one
            homes = [name for name, keys in SCHEMA.items() if table in keys]
            hint = f" (did you mean [{homes[0]}] {table}?)" if homes else ""
            raise ConfigError(f"{CONFIG_FILE}: {table}: unknown key{hint}")
        raise ConfigError(f"{CONFIG_FILE}: [{table}]: unknown table" + _suggest(table, known))
    project = _read_table("project", data.get("project", {}))
    agent_raw = data.get("agent", {})
    agent = AgentConfig(**_read_table("agent", agent_raw, nested=SLOTS))
    slot_agents = {}
    if isinstance(agent_raw, dict):
        for slot in SLOTS:
            if slot in agent_raw:
                # a slot table names only what differs from [agent]; timeout and the rest carry over
                overrides = _read_table("agent", agent_raw[slot], shown=f"agent.{slot}")
                if "preset" in overrides and "name" not in overrides:
                    overrides["name"] = ""
                if "preset" in overrides and "command" not in overrides:
                    overrides["command"] = ""
                slot_agents[slot] = replace(agent, **overrides)
    prompts = {slot: "" for slot in SLOTS} | _read_table("prompts", data.get("prompts", {}))
    run = _read_table("run", data.get("run", {}))
    review = _read_table("review", data.get("review", {}))
    tracker = TrackerConfig(**_read_table("tracker", data.get("tracker", {})))
    ray = RayConfig(**_read_table("executor.ray", _executor_table(data.get("executor", {})), shown="executor.ray"))
    verify_raw = data.get("verify", {})
    if not isinstance(verify_raw, dict):
        raise ConfigError(f"{CONFIG_FILE}: [verify]: expected a table")
    verify = dict(VERIFY_DEFAULT)
    for key, value in verify_raw.items():
        if not isinstance(value, str):
            raise ConfigError(f"{CONFIG_FILE}: [verify] {key}: expected a string")
        verify[key] = value
    if tracker.backend == "github" and not tracker.repo:
        pass  # gh infers the repository from the checkout's remote; an empty repo is allowed
    return Config(
        **project,
        agent=agent,
        slot_agents=slot_agents,
        prompts=prompts,
        **{key: run[key] for key in run},
        verify=verify,
        **review,
        tracker=tracker,
        ray=ray,
    )


def _executor_table(raw: Any) -> Any:
    """[executor.<name>]: one table per executor that has settings; only ray has any."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{CONFIG_FILE}: [executor]: expected a table")
    for name in raw:
        if name != "ray":
            raise ConfigError(f"{CONFIG_FILE}: [executor.{name}]: unknown table (expected [executor.ray])")
    return raw.get("ray", {})


def load_config(path: Path) -> Config:
    """Read and validate drover.toml; every problem is one ConfigError naming the key."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", path=CONFIG_FILE) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", path=CONFIG_FILE) from None
    text = text.removeprefix("\ufeff")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = getattr(exc, "lineno", None) or _line_of(str(exc))
        message = str(exc).split(" (at line")[0]
        raise ConfigError(message, path=CONFIG_FILE, line=line) from None
    return parse_config(data)


def _line_of(message: str) -> int | None:
    match = re.search(r"at line (\d+)", message)
    return int(match.group(1)) if match else None


def default_config_text() -> str:
    """The commented drover.toml `drover init` writes (kept beside the built-in templates)."""
    from .resources import read_resource

    return read_resource("drover.toml")
