"""drover.toml: every key's default, the commented file `init` writes, one-line errors naming the key."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from drover.cli.main import cli
from drover.cli.config_text import default_config_text
from drover.config import SCHEMA, Config, load_config, parse_config
from drover.config.keys import parse_duration
from drover.errors import ConfigError
from helpers import configure, drover, git, new_item
from drover.agents.presets import PRESETS
from drover.trackers import BACKENDS

# The registries are the lists: a preset or backend added there is named in these messages too.
PRESET_LIST = ", ".join(PRESETS)
BACKEND_LIST = ", ".join(BACKENDS)


def write_config(root: Path, text: str) -> Path:
    path = root / "drover.toml"
    path.write_text(text, encoding="utf-8")
    return path


def config_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(tmp_path, text))
    return str(caught.value)


# --- defaults and the commented file ---------------------------------------------------------


def test_an_empty_file_gives_every_default(tmp_path):
    config = load_config(write_config(tmp_path, ""))
    assert config == Config()
    assert config.prefix == "D"
    assert config.items == "items"
    assert config.commit_items is False
    assert config.agent.preset == "claude"
    assert config.agent.command == ""
    assert config.agent.name == ""
    assert config.agent.identity == "claude"
    assert config.agent.timeout == "2h"
    assert config.agent.timeout_seconds == 7200
    assert config.agent.guidance == "detailed"
    assert config.slot_agents == {}
    assert config.prompts == {"implement": "", "review": "", "draft": ""}
    assert config.base == "main"
    assert config.branch == "drover/{{ Id | lower }}"
    assert config.worktree is True
    assert config.verify == {"default": "make test"}
    assert config.max_rounds == 3
    assert config.tracker.backend == "none"
    assert config.tracker.repo == ""
    assert config.tracker.follow_up_label == "follow-up"
    assert config.tracker.register == "follow-ups.md"


def test_the_file_init_writes_states_every_default():
    text = default_config_text()
    assert parse_config(tomllib.loads(text)) == Config()
    data = tomllib.loads(text)
    for table, keys in SCHEMA.items():
        for key, (_, default) in keys.items():
            written = data
            for part in table.split("."):  # [executor.ray] is a table inside [executor]
                written = written[part]
            # a list of strings is a TOML array, kept as a tuple in the frozen Config
            assert written[key] == (list(default) if isinstance(default, tuple) else default), f"[{table}] {key}"
    assert data["verify"] == {"default": "make test"}
    # commented: every table carries an explanation, and the example slot table is commented out
    assert text.count("#") > 20
    assert "# [agent.review]" in text


def test_init_writes_the_commented_file(repo):
    result = CliRunner().invoke(cli, ["init"])
    assert result.exit_code == 0, result.output
    # the verify command is the one the repository names: none here
    from drover.cli.scaffold import config_text_for

    assert (repo / "drover.toml").read_text(encoding="utf-8") == config_text_for(repo)
    loaded = load_config(repo / "drover.toml")
    assert loaded.verify == {"default": ""}
    assert loaded._replace(verify=Config().verify) == Config()


def test_deleting_the_keys_the_header_leaves_to_defaults_changes_nothing(repo):
    """The file init writes opens by saying its keys show their defaults and to delete what you do
    not change. init chooses four for the repository (here: base master, `npm ci`, the lockfile and
    package.json as its inputs, and `npm test`); deleted, they fall back to main, no set-up, no
    inputs and `make test`, a command this repository lacks.
    So deleting every key the header does not name as init's choice must leave the same config."""
    import re

    from helpers import drover, git

    git(repo, "branch", "-m", "master")
    (repo / "package.json").write_text('{"scripts": {"test": "ava"}, "devDependencies": {"ava": "^6.0.0"}}')
    (repo / "package-lock.json").write_text("{}")
    drover(repo, "init", check=True)
    text = (repo / "drover.toml").read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    header = "".join(lines[:next(n for n, line in enumerate(lines) if not line.startswith("#"))])
    chosen = set(re.findall(r"\[([a-z.]+)\] ([a-z_]+)", header))
    kept, table = [], ""
    for line in lines:
        opened = re.match(r"\[([a-z.]+)\]", line)
        table = opened[1] if opened else table
        key = re.match(r"([a-z_]+) = ", line)
        if key is None or (table, key[1]) in chosen:
            kept.append(line)
    assert len(kept) < len(lines) - 20
    trimmed = write_config(repo.parent, "".join(kept))
    assert load_config(trimmed) == load_config(repo / "drover.toml")
    assert chosen == {("run", "base"), ("run", "setup"), ("run", "setup_inputs"), ("verify", "default")}  # no more


def test_every_key_can_be_set(tmp_path):
    config = load_config(write_config(tmp_path, """
[project]
prefix = "WI"
items = "work"
commit_items = true
[agent]
preset = "script"
command = "my-agent --fast"
name = "bot"
timeout = "1h30m"
guidance = "lean"
[agent.review]
preset = "codex"
[prompts]
implement = "docs/kickoff.tmpl"
review = "docs/review.tmpl"
draft = "docs/draft.tmpl"
[run]
base = "trunk"
branch = "work/{{ Id }}"
worktree = false
[verify]
default = "pytest"
migration = "pytest && alembic check"
[review]
max_rounds = 5
[tracker]
backend = "github"
repo = "me/proj"
follow_up_label = "later"
register = "later.md"
"""))
    assert (config.prefix, config.items, config.commit_items) == ("WI", "work", True)
    assert config.agent.identity == "bot"
    assert config.agent.timeout_seconds == 5400
    assert config.agent.guidance == "lean"
    assert config.prompts == {"implement": "docs/kickoff.tmpl", "review": "docs/review.tmpl",
                              "draft": "docs/draft.tmpl"}
    assert (config.base, config.branch, config.worktree) == ("trunk", "work/{{ Id }}", False)
    assert config.verify == {"default": "pytest", "migration": "pytest && alembic check"}
    assert config.max_rounds == 5
    assert (config.tracker.backend, config.tracker.repo) == ("github", "me/proj")
    assert (config.tracker.follow_up_label, config.tracker.register) == ("later", "later.md")


def test_a_slot_table_overrides_only_what_it_names(tmp_path):
    config = load_config(write_config(tmp_path, """
[agent]
preset = "claude"
name = "writer"
timeout = "30m"
guidance = "lean"
[agent.review]
preset = "codex"
[agent.draft]
guidance = "detailed"
"""))
    review = config.agent_for("review")
    # a new preset brings its own identity: the [agent] name belongs to the other preset
    assert (review.preset, review.identity, review.timeout, review.guidance) == ("codex", "codex", "30m", "lean")
    draft = config.agent_for("draft")
    assert (draft.preset, draft.identity, draft.guidance) == ("claude", "writer", "detailed")
    assert config.agent_for("implement") == config.agent


@pytest.mark.parametrize("text, seconds", [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("600", 600)])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds


# --- errors name the key -----------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    ("[review]\nmax_rouns = 2\n", "drover.toml: [review] max_rouns: unknown key (did you mean max_rounds?) (line 2)"),
    ("[review]\nmax_rounds = \"2\"\n", "drover.toml: [review] max_rounds: expected an integer (line 2)"),
    ("[review]\nmax_rounds = true\n", "drover.toml: [review] max_rounds: expected an integer (line 2)"),
    ("[review]\nmax_rounds = 0\n", "drover.toml: [review] max_rounds: expected an integer of at least 1 (line 2)"),
    ("[project]\ncommit_items = \"yes\"\n", "drover.toml: [project] commit_items: expected true or false (line 2)"),
    ("[project]\nprefix = 3\n", "drover.toml: [project] prefix: expected a string (line 2)"),
    ("[project]\nprefix = \"D-\"\n", "drover.toml: [project] prefix: expected letters and digits, starting with a letter (line 2)"),
    ("[run]\nworktree = 1\n", "drover.toml: [run] worktree: expected true or false (line 2)"),
    ("[agent]\npreset = \"claud\"\n",
     f"drover.toml: [agent] preset: expected one of {PRESET_LIST}, not 'claud' (line 2)"),
    ("[agent]\nguidance = \"short\"\n", "drover.toml: [agent] guidance: expected one of lean, detailed, not 'short' (line 2)"),
    ("[agent]\ntimeout = \"soon\"\n", "drover.toml: [agent] timeout: expected a duration such as 2h, 90m or 45s (line 2)"),
    ("[agent.review]\npreset = \"codx\"\n",
     f"drover.toml: [agent.review] preset: expected one of {PRESET_LIST}, not 'codx' (line 2)"),
    ("[agent.review]\npresett = \"codex\"\n", "drover.toml: [agent.review] presett: unknown key (did you mean preset?) (line 2)"),
    ("[agent]\nreview = \"codex\"\n", "drover.toml: [agent.review]: expected a table (line 2)"),
    ("[tracker]\nbackend = \"jira\"\n", f"drover.toml: [tracker] backend: expected one of {BACKEND_LIST}, not 'jira' (line 2)"),
    # gh's --repo would take a URL, but the sub-issues' API path and the search's `repo:` do not: reads failed
    ("[tracker]\nrepo = \"https://github.com/acme/widgets\"\n", "drover.toml: [tracker] repo: expected owner/name "
     "such as acme/widgets (or \"\": gh infers it), not 'https://github.com/acme/widgets' (line 2)"),
    ("[tracker]\nfollow_up_label = \"\"\n", "drover.toml: [tracker] follow_up_label: expected one label, not '' (line 2)"),
    ("[tracker]\nfollow_up_label = \"later,maybe\"\n",
     "drover.toml: [tracker] follow_up_label: expected one label, not 'later,maybe' (line 2)"),
    ("[tracker]\nrepo = \"acme\"\n",
     "drover.toml: [tracker] repo: expected owner/name such as acme/widgets (or \"\": gh infers it), not 'acme' (line 2)"),
    ("[tracker]\nrepo = \"acme/widgets \"\n", "drover.toml: [tracker] repo: expected owner/name such as "
     "acme/widgets (or \"\": gh infers it), not 'acme/widgets ' (line 2)"),
    ("[verify]\nmigration = 1\n", "drover.toml: [verify] migration: expected a string (line 2)"),
    # an entry of a table of strings is named, as a [budget.rates] model is
    ("[tracker.kinds]\nwontfix = 1\n", "drover.toml: [tracker] kinds: expected a string for 'wontfix', not 1 (line 1)"),
    ("[revew]\nmax_rounds = 2\n", "drover.toml: [revew]: unknown table (did you mean review?) (line 1)"),
    ("review = 3\n", "drover.toml: [review]: expected a table (line 1)"),
    ("prefix = \"X\"\n", "drover.toml: prefix: unknown key (did you mean [project] prefix?) (line 1)"),
    # a key written as a table of its own is placed at that table's header, not at its parent's
    ("[project]\nprefix = \"D\"\n\n[review]\nmax_rounds = 2\n\n[project.sub]\nx = 1\n",
     "drover.toml: [project] sub: unknown key (line 7)"),
    ("[review]\n\n[review.extra]\ny = 2\n", "drover.toml: [review] extra: unknown key (line 3)"),
    # TOML writes a NUL as \u0000; no argument or path a program is given can hold one
    ("[agent]\ncommand = \"sh agents/a\\u0000.sh\"\n",
     "drover.toml: [agent] command: expected text without a NUL character (line 2)"),
    ("[verify]\ndefault = \"make\\u0000 test\"\n",
     "drover.toml: [verify] default: expected text without a NUL character (line 2)"),
    ("[run]\nkeep = [\".env\\u0000\"]\n", "drover.toml: [run] keep: expected text without a NUL character (line 2)"),
])
def test_errors_name_the_key(tmp_path, text, message):
    assert config_error(tmp_path, text) == message


def test_a_nul_in_the_agent_command_is_one_line_and_no_run(repo):
    """Hostile review 36: `command = "sh agents/a\\u0000.sh"` (TOML's escape) was taken, and `drover run`
    ended in a Python traceback (`ValueError: embedded null byte` from the launch) with a run row
    left unfinished, the item then `interrupted`. The key is refused with one line, exit 2, before
    anything is written."""
    configure(repo)
    new_item(repo, "Add a thing")
    config = repo / "drover.toml"
    config.write_text(config.read_text() + '\n[agent.implement]\ncommand = "sh agents/a\\u0000.sh"\n')
    done = drover(repo, "run", "D-1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert "[agent.implement] command: expected text without a NUL character" in done.stderr, done.stderr
    assert not (repo / ".drover" / "runs").exists() or not any((repo / ".drover" / "runs").iterdir())


def test_bad_toml_syntax_names_the_line(tmp_path):
    message = config_error(tmp_path, "[project]\nprefix = \"D\"\n\n[review]\nmax_rounds = \n")
    assert message.startswith("drover.toml:5: ")
    assert "\n" not in message


@pytest.mark.parametrize("value", ["[" * 5000 + "]" * 5000, "{a = " * 3000 + "1" + "}" * 3000,
                                   "[\n" + "[1, [\n" * 1000 + "]]" * 1000 + "]"])
def test_toml_nested_past_the_parsers_depth_names_the_line(tmp_path, value):
    """tomllib recurses once a level: a value a few hundred arrays deep ended every command in a
    RecursionError traceback."""
    message = config_error(tmp_path, f"[project]\nprefix = \"D\"\n\n[review]\nx = {value}\n")
    line = 5 if "\n" not in value else 5 + 50  # where the brackets pass 100 deep
    assert message == f"drover.toml:{line}: arrays or inline tables nested too deeply to read"


def test_a_table_declared_twice_is_named_as_toml_writes_it(tmp_path):
    assert config_error(tmp_path, "[run]\npool = 1\n\n[review]\n\n[run.x]\n[run]\n") == \
        "drover.toml:7: Cannot declare [run] twice"
    assert config_error(tmp_path, "[agent.review]\nname = 'a'\n[agent.review]\n") == \
        "drover.toml:3: Cannot declare [agent.review] twice"


def test_a_key_written_twice_is_named_with_its_first_line(tmp_path):
    """A new user's drover.toml with `base` written twice under [run] said tomllib's words,
    `drover.toml:14: Cannot overwrite a value`: neither the key nor where it was first written."""
    assert config_error(tmp_path, "[run]\nbase = \"main\"\npool = 1\n\n# again\nbase = \"trunk\"\n") == \
        "drover.toml:6: `base` in [run] is set twice (first on line 2): keep one"
    assert config_error(tmp_path, "[agent]\nreview.name = 'a'\nreview.name = 'b'\n") == \
        "drover.toml:3: `name` in [agent.review] is set twice (first on line 2): keep one"
    assert config_error(tmp_path, "[run]\npool = 1\n[run.pool]\nx = 1\n") == \
        "drover.toml:3: [run.pool] is a table, but `pool` in [run] is set already (line 2): rename one"


def _one_line_error(result, exit_code: int = 2) -> str:
    assert result.exit_code == exit_code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("drover: ")
    return lines[0]


@pytest.mark.parametrize("text, line", [
    ("[review]\nmax_rouns = 2\n", "drover: drover.toml: [review] max_rouns: unknown key (did you mean max_rounds?) (line 2)"),
    ("[review]\nmax_rounds = \"two\"\n", "drover: drover.toml: [review] max_rounds: expected an integer (line 2)"),
    ("[review\nmax_rounds = 2\n", None),
])
@pytest.mark.parametrize("command", [["list"], ["list", "--json"], ["show", "D-1"], ["new", "x"],
                                     ["request-changes", "D-1"], ["init"]])
def test_a_broken_config_is_one_line_and_exit_2_for_every_command(repo, text, line, command):
    write_config(repo, text)
    (repo / "items").mkdir()
    before = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if ".git" not in p.parts)
    result = CliRunner().invoke(cli, command, input="finding\n")
    said = _one_line_error(result)
    if line:
        assert said == line
    else:
        assert said.startswith("drover: drover.toml:1: ")
    after = sorted(p.relative_to(repo).as_posix() for p in repo.rglob("*") if ".git" not in p.parts)
    assert after == before


def test_outside_a_project_is_one_line_and_exit_2(repo):
    result = CliRunner().invoke(cli, ["list"])
    said = _one_line_error(result)
    assert "drover.toml" in said and "drover init" in said
    assert not (repo / ".drover").exists()


def test_an_agent_table_for_a_slot_that_does_not_exist_names_the_slots(tmp_path):
    path = tmp_path / "drover.toml"
    path.write_text('[agent.reveiw]\npreset = "codex"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        "drover.toml: [agent.reveiw]: unknown slot (expected one of implement, review, draft, fallback)"
        " (did you mean review?) (line 1)"
    )


# --- one definition per key ----------------------------------------------------------------------


def test_every_problem_is_reported_at_once_one_line_each(repo):
    # in the file's order, each at its line: the unknown table at the end is read first, said last
    write_config(repo, '[agent]\npreset = "codx"\n[review]\nmax_round = 2\n[tracker]\nbackend = "jira"\n'
                       '[revew]\n')
    result = CliRunner().invoke(cli, ["list"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"drover: drover.toml: [agent] preset: expected one of {PRESET_LIST}, not 'codx' (line 2)",
        "drover: drover.toml: [review] max_round: unknown key (did you mean max_rounds?) (line 4)",
        f"drover: drover.toml: [tracker] backend: expected one of {BACKEND_LIST}, not 'jira' (line 6)",
        "drover: drover.toml: [revew]: unknown table (did you mean review?) (line 7)",
    ]


def test_the_docs_tables_are_rendered_from_the_key_declarations():
    from drover.config import KEYS
    from drover.cli.config_text import markdown_table

    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    for table, keys in KEYS.items():
        assert markdown_table(keys) in page, f"docs/configuration.md: [{table}] table is stale"


def test_a_key_declared_once_reaches_schema_file_and_docs():
    from drover.config import KEYS

    text = default_config_text()
    for table, keys in KEYS.items():
        for name, info in keys.items():
            assert SCHEMA[table][name] == (type(info.default), info.default)
            assert info.meaning in text, f"[{table}] {name}: meaning missing from the commented file"
    assert default_config_text(base="master").count('base = "master"') == 1



def test_each_declared_default_is_the_value_a_config_without_the_key_holds():
    """`key(...)` declares a NamedTuple field's default; @keyed puts the plain value in its place."""
    from drover.config import KEYS, AgentConfig, RayConfig, TrackerConfig
    from drover.config.keys import KeyInfo

    config = Config()
    held = {"agent": config.agent, "tracker": config.tracker, "executor.ray": config.ray, "notify": config.notify,
            "budget": config.budget, "retry": config.retry}
    for table, keys in KEYS.items():
        for name, info in keys.items():
            if table == "prompts":
                value = config.prompts[name]
            else:
                value = getattr(held[table], name) if table in held else getattr(config, name)
            assert value == info.default and not isinstance(value, KeyInfo), f"[{table}] {name}"
    # a slot's table is [agent] with its own keys laid over; the rest stays as read-only tuples
    assert AgentConfig(preset="codex")._replace(name="x") == AgentConfig(preset="codex", name="x")
    assert TrackerConfig().kinds["bug"] == "bug" and RayConfig().runtime_env == {}
    with pytest.raises(AttributeError):
        config.agent.preset = "codex"  # type: ignore[misc]


@pytest.mark.parametrize("data, imported", [
    ({"project": {"prefix": "D"}}, []),
    ({"agent": {"preset": "codex"}, "tracker": {"backend": "file"}}, ["drover.agents.presets", "drover.trackers"]),
    ({"agent": {"preset": "claude"}, "tracker": {"backend": "none"}}, []),  # the defaults, as `drover init` writes them
])
def test_the_preset_and_backend_registries_are_imported_only_to_check_a_value(data, imported):
    """[agent] preset and [tracker] backend are checked against the live registries, read when a file sets them."""
    import json
    import subprocess
    import sys

    code = ("import json, sys; from drover.config import parse_config; "
            f"config = parse_config(json.loads({json.dumps(json.dumps(data))})); "
            "print(json.dumps([config.agent.preset, config.tracker.backend, "
            "sorted(m for m in ('drover.agents.presets', 'drover.trackers') if m in sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    preset, backend, modules = json.loads(done.stdout)
    assert (preset, backend) == (data.get("agent", {}).get("preset", "claude"),
                                 data.get("tracker", {}).get("backend", "none"))
    assert modules == imported


def test_every_keys_default_is_one_of_its_choices():
    """A value equal to its key's default is taken without asking the key's choices (config.py)."""
    from drover.config import KEYS

    chosen = [info for table in KEYS.values() for info in table.values() if info.choices]
    assert {(info.table, info.name) for info in chosen} >= {("agent", "preset"), ("tracker", "backend")}
    assert [(info.table, info.name) for info in chosen if info.default not in info.choices] == []

# --- the parsed-TOML cache (config.py, docs/decisions.md) --------------------------------------


def test_the_toml_cache_gives_what_parsing_gives_and_follows_every_edit(tmp_path, monkeypatch):
    import json

    from drover.config.toml import toml_cache as _toml_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = write_config(tmp_path, '[project]\nprefix = "Q"\n[review]\nmax_rounds = 2\n')
    first = load_config(path)
    kept = Path(_toml_cache(path))
    assert json.loads(kept.read_text())["data"] == tomllib.loads(path.read_text())
    assert load_config(path) == first and first.prefix == "Q"  # from the cache
    # a new text, even of the same size and in the same second, is parsed again
    write_config(tmp_path, '[project]\nprefix = "R"\n[review]\nmax_rounds = 2\n')
    assert load_config(path).prefix == "R"
    # a cache that lies about its text, or is not JSON, is not believed
    kept.write_text(json.dumps({"text": "other", "python": "x", "data": {"project": {"prefix": "Z"}}}))
    assert load_config(path).prefix == "R"
    kept.write_text("{not json")
    assert load_config(path).prefix == "R"
    for garbled in ("[" * 100_000, '{"text": ' + "9" * 5000 + "}"):  # past the parser's depth, past int's digits
        kept.write_text(garbled)
        assert load_config(path).prefix == "R"
    # errors are the parser's, every time
    write_config(tmp_path, "[project\n")
    for _ in range(2):
        with pytest.raises(ConfigError) as caught:
            load_config(path)
        assert str(caught.value).startswith("drover.toml:1: ")


def test_toml_json_cannot_hold_is_parsed_each_time(tmp_path, monkeypatch):
    from drover.config.toml import toml_cache as _toml_cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for text in ('[verify]\nwhen = 1979-05-27\n', '[project]\nratio = nan\n'):
        path = write_config(tmp_path, text)
        with pytest.raises(ConfigError):
            load_config(path)  # unknown keys: the same error with or without a cache
        assert not Path(_toml_cache(path)).exists()
    unwritable = tmp_path / "file"
    unwritable.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(unwritable))  # the cache folder cannot be made
    assert load_config(write_config(tmp_path, '[project]\nprefix = "S"\n')).prefix == "S"


def test_a_command_with_the_config_cached_does_not_import_tomllib(repo, tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = "import sys; from drover.ledger.project import open_project; open_project()"
    assert subprocess.run([sys.executable, "-c", "from drover.cli.scaffold import init_project; "
                           "from pathlib import Path; list(init_project(Path.cwd()))"], cwd=repo, env=env).returncode == 0
    seen = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=repo, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        seen.append("tomllib" in [line.split("|")[-1].strip() for line in done.stderr.splitlines()])
    assert seen == [True, False]


def test_the_shipped_destinations_read_through_the_toml_cache_as_parsed(tmp_path, monkeypatch):
    import json

    from drover.prompts import data
    from drover.config.toml import toml_cache as _toml_cache
    from drover.prompts.resources import builtin_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    shipped = builtin_dir() / "destinations.toml"
    try:
        data._destination_table.cache_clear()
        parsed = data.destinations("D-3")
        kept = Path(_toml_cache(shipped, "destinations"))
        assert json.loads(kept.read_text())["data"] == tomllib.loads(shipped.read_text())
        data._destination_table.cache_clear()
        assert data.destinations("D-3") == parsed and parsed  # from the cache
        kept.write_text("{not json")
        data._destination_table.cache_clear()
        assert data.destinations("D-3") == parsed
    finally:
        data._destination_table.cache_clear()


def test_a_problem_is_placed_at_the_line_that_writes_it_however_the_table_is_written(tmp_path):
    text = ('# drover\n'
            '[ agent . "review" ]\n'           # 2: a spaced, quoted header
            'preset = "codx"\n'                # 3
            '[run]\n'                          # 4
            'worktree = {}\n'                  # 5
            'keep = ["a",\n'                   # 6: a value over two lines
            '  1]\n'
            '[agent]\n'                        # 8
            'implement = { presett = "x" }\n'  # 9: an inline table names the line of its key
            'draft.name = 3\n')                # 10: a dotted key
    path = tmp_path / "drover.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.lines == (
        f"drover.toml: [agent.review] preset: expected one of {PRESET_LIST}, not 'codx' (line 3)",
        "drover.toml: [run] worktree: expected true or false (line 5)",
        "drover.toml: [run] keep: expected a list of strings (line 6)",
        "drover.toml: [agent.implement] presett: unknown key (did you mean preset?) (line 9)",
        "drover.toml: [agent.draft] name: expected a string (line 10)",
    )


def test_a_nul_in_an_item_body_given_as_the_prompt_argument_fails_the_run_in_one_line(repo):
    """Hostile review 37: review 36 refused a NUL in drover.toml, but one reaches an argument through
    the prompt too: an item body holding a NUL byte (a file any branch can commit), with an agent
    command that takes the prompt as `{prompt}`, ended `drover run` in a traceback (`ValueError:
    embedded null byte`) with its run row unfinished, the item `interrupted`. The run fails to start,
    in one line, and is recorded so."""
    configure(repo, '\n[agent.implement]\ncommand = "echo {prompt}"\n')
    new_item(repo, "Add a thing")
    item = repo / "items" / "D-1.md"
    item.write_text(item.read_text().replace("## Requirements", "## Requirements\n\n1. Keep the \0 byte.", 1))
    done = drover(repo, "run", "D-1")
    assert done.returncode == 2, repr(done.stdout + done.stderr)  # as any agent that cannot start
    assert "Traceback" not in done.stderr and "the prompt holds a NUL character" in done.stderr, done.stderr
    shown = json.loads(drover(repo, "show", "D-1", "--json", check=True).stdout)
    assert shown["state"] == "failed", shown


def test_a_nul_in_an_items_title_rendered_into_the_branch_is_one_line(repo):
    """Hostile review 37: a title holding a NUL (YAML's `"\\0"` escape), through a branch template that
    names `{{ Title }}`, reached git's argument list when drover asked whether git takes the name: `drover
    run` (even `--dry-run`) ended in a traceback, `ValueError: embedded null byte`. The name is refused
    without asking git, in one line."""
    configure(repo)
    new_item(repo, "Add a thing")
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('branch = "drover/{{ Id | lower }}"', 'branch = "drover/{{ Title }}"', 1))
    item = repo / "items" / "D-1.md"
    item.write_text(item.read_text().replace("title: Add a thing", 'title: "Add\\0thing"', 1))
    for args in (("run", "D-1", "--dry-run"), ("run", "D-1")):
        done = drover(repo, *args)
        assert done.returncode == 2, repr(done.stdout + done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
        assert "renders 'drover/Add\\x00thing' for D-1, which is not a valid git branch name" in done.stderr, done.stderr


def test_a_title_rendered_into_the_base_branchs_name_is_refused(repo):
    """Hostile review 38: through a branch template that is the title alone, an item titled `main` (an
    issue's title, through `new --issue`) made its branch base itself: the implementer committed
    straight onto main, with no review, check or finish. The launch is refused in one line, nothing run."""
    configure(repo)
    new_item(repo, "main")
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('branch = "drover/{{ Id | lower }}"', 'branch = "{{ Title }}"', 1))
    git(repo, "commit", "-qam", "branch from the title")
    git(repo, "checkout", "-q", "-b", "elsewhere")  # main is checked out in no worktree: git would take it
    base_before = git(repo, "rev-parse", "main")
    for args in (("run", "D-1", "--dry-run"), ("run", "D-1"), ("prompt", "D-1", "--slot", "branch")):
        done = drover(repo, *args)
        assert done.returncode == 2, repr(done.stdout + done.stderr)
        assert done.stderr == ("drover: drover.toml: [run] branch renders 'main' for D-1, which is [run] base: an "
                               "item's work never goes on base but through its review and finish\n"), done.stderr
    assert git(repo, "rev-parse", "main") == base_before
    assert not (repo / ".drover" / "worktrees" / "D-1").exists()


def test_a_launchs_warnings_show_a_titles_controls_as_question_marks(repo):
    """Hostile review 38: a launch's warnings (`run`, `run --dry-run`, `prompt`) were printed as they
    came: a branch a title renders through `drover/{{ Title }}`, which git takes with a bidi override or
    C1's CSI (U+009B) in it, reordered drover's own words after it on the terminal or started an escape."""
    configure(repo)
    new_item(repo, "x\u202ey\u009bz")
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('branch = "drover/{{ Id | lower }}"', 'branch = "drover/{{ Title }}"', 1))
    git(repo, "commit", "-qam", "branch from the title")
    git(repo, "branch", "drover/x\u202ey\u009bz")
    (repo / "moved").write_text("base moves\n")
    git(repo, "add", "moved")
    git(repo, "commit", "-qm", "base moves")
    done = drover(repo, "run", "D-1", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("drover: warning: drover/x?y?z holds no commit of its own and lacks 1 commit of main"), \
        done.stderr


def test_a_title_rendered_into_a_case_variant_of_the_base_branchs_name_is_refused(repo):
    """Hostile review 39: hostile review 38 refused a branch rendered `main` and let `MAIN` through.
    Where the file system ignores case (macOS, Windows), git keeps loose refs as files and
    `refs/heads/MAIN` is `refs/heads/main`: the implementer's commits moved base. Refused as base is."""
    configure(repo)
    new_item(repo, "MAIN")
    config = repo / "drover.toml"
    config.write_text(config.read_text().replace('branch = "drover/{{ Id | lower }}"', 'branch = "{{ Title }}"', 1))
    git(repo, "commit", "-qam", "branch from the title")
    base_before = git(repo, "rev-parse", "main")
    for args in (("run", "D-1", "--dry-run"), ("run", "D-1"), ("prompt", "D-1", "--slot", "branch")):
        done = drover(repo, *args)
        assert done.returncode == 2, repr(done.stdout + done.stderr)
        assert done.stderr == ("drover: drover.toml: [run] branch renders 'MAIN' for D-1, which is [run] base 'main' to "
                               "a file system that ignores case: an item's work never goes on base but through its "
                               "review and finish\n"), done.stderr
    assert git(repo, "rev-parse", "main") == base_before and "MAIN" not in git(repo, "branch", "--list")
