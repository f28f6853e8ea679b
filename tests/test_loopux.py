"""Issue 24's loop fit to leave alone: drive refuses what check calls an error, placeholder items
need requirements, init finds the verify command, and the small points of 8, 10 and 11."""
from __future__ import annotations

import json
import re

import pytest

from helpers import implemented, APPROVING, configure, drover, git, ledger_rows, new_item, write_requirements


@pytest.fixture
def project(repo):
    configure(repo)
    return repo


def _conflicted_override(project) -> None:
    """An implement override whose scope block holds the markers `override --update` leaves."""
    drover(project, "override", "implement", "scope", check=True)
    path = project / "prompts" / "implement.tmpl"
    lines = path.read_text().splitlines(keepends=True)
    at = next(number for number, line in enumerate(lines) if line.startswith("<% block scope")) + 2
    lines[at:at] = ["<<<<<<< yours\n", "mine\n", "||||||| base\n", "old\n", "=======\n", "theirs\n",
                    ">>>>>>> today\n"]
    path.write_text("".join(lines))
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "a conflicted override")


# --- A: drive refuses what check calls an error ---------------------------------------------


def test_drive_refuses_to_start_while_check_reports_an_error_and_names_it(project):
    item = new_item(project, "Add a thing")
    _conflicted_override(project)
    checked = drover(project, "check")
    assert checked.returncode == 1 and "conflict marker" in checked.stdout
    for args in (("drive",), ("drive", item), ("drive", "--dry-run")):
        done = drover(project, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.splitlines()
        assert lines[0] == "drover: drive: `drover check` reports 1 error; fix it first, nothing was launched:"
        assert lines[1].startswith("drover:   prompts/implement.tmpl:") and "conflict marker" in lines[1]
    assert json.loads(drover(project, "show", item, "--json").stdout)["runs"] == []


@pytest.mark.parametrize("command", ["run", "prompt"])
def test_a_launch_or_a_prompt_refuses_an_override_with_conflict_markers(project, command):
    item = new_item(project, "Add a thing")
    _conflicted_override(project)
    for args in ((command, item, "--slot", "implement") if command == "prompt" else (command, item),
                 (command, item, "--slot", "implement", "--json") if command == "prompt" else (command, item, "--dry-run")):
        done = drover(project, *args)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "<<<<<<<" not in done.stdout
        assert done.stderr.startswith("drover: prompts/implement.tmpl:") and "conflict marker" in done.stderr
    assert json.loads(drover(project, "show", item, "--json").stdout)["runs"] == []


def test_a_first_run_that_finds_its_branch_made_with_commits_says_so(project):
    """Another item's agent (or a person) made drover/d-2 before D-2 ever ran: its first run builds
    on those commits, and says so; a later run of the item, whose own commits they are, does not."""
    new_item(project, "First")
    second = new_item(project, "Second")
    git(project, "branch", "drover/d-2", "main")
    git(project, "switch", "-q", "drover/d-2")
    (project / "sitecustomize.py").write_text("print('planted')\n")
    git(project, "add", "sitecustomize.py")
    git(project, "commit", "-qm", "D-2: scaffold the module")
    git(project, "switch", "-q", "main")
    done = drover(project, "run", second, check=True)
    assert ("drover: warning: drover/d-2 exists already with 1 commit beyond main that no run of D-2 made: "
            "this run builds on them (`git branch -D drover/d-2` first to start from main)") in done.stderr.splitlines()
    again = drover(project, "run", second, check=True)
    assert "exists already" not in again.stderr


def test_a_dry_run_of_an_inline_template_ends_its_prompt_on_a_line_of_its_own(project):
    item = new_item(project, "Add a thing")
    shown = drover(project, "run", item, "--dry-run", "--template", "Do {{ Id }} now.", check=True).stdout
    assert shown.startswith(f"Do {item} now.\n--- drover: dry run; nothing was launched or written\n"), shown


# --- B: needs requirements ------------------------------------------------------------------


def test_an_item_with_the_placeholder_requirements_needs_requirements_and_is_not_driven(project):
    placeholder = drover(project, "new", "Nothing written yet", check=True).stdout.split()[0]
    written = new_item(project, "Written")  # commits both
    listed = {row["id"]: row["state"] for row in json.loads(drover(project, "list", "--json").stdout)}
    assert listed == {placeholder: "needs requirements", written: "ready"}
    assert json.loads(drover(project, "show", placeholder, "--json").stdout)["state"] == "needs requirements"
    assert drover(project, "list", "--ready").stdout.split()[0] == written
    assert placeholder not in drover(project, "list", "--ready").stdout
    only = drover(project, "list", "--state", "needs requirements").stdout
    assert only.split()[:2] == [placeholder, "needs"] and written not in only
    checked = drover(project, "check")
    assert (f"warning: items/{placeholder}.md: {placeholder} needs requirements" in checked.stdout
            and checked.returncode == 0), checked.stdout

    dry = drover(project, "drive", "--dry-run", check=True).stdout
    assert f"  items: {written}\n" in dry and f"  {placeholder}: needs requirements:" in dry
    assert f"  {placeholder}: implement" not in dry  # not taken: named only as needing requirements
    named = drover(project, "drive", placeholder)
    assert f"{placeholder}: skipped: needs requirements: items/{placeholder}.md still holds the placeholder" \
        in named.stdout, named.stdout
    assert json.loads(drover(project, "show", placeholder, "--json").stdout)["runs"] == []
    write_requirements(project, placeholder)
    assert json.loads(drover(project, "show", placeholder, "--json").stdout)["state"] == "ready"
    assert "needs requirements" not in drover(project, "list").stdout


@pytest.mark.parametrize("section, lack", [("## Requirements\n\n   \n\t\n", "has an empty `## Requirements` section"),
                                           ("## Context\n\nWhy.\n\n## Requirements\n\n## Notes\n\nMore.\n",
                                            "has an empty `## Requirements` section")])
def test_an_empty_requirements_section_needs_requirements_as_the_placeholder_does(project, section, lack):
    """A new user's item whose `## Requirements` section they emptied was `ready`, and drive
    launched the agent on an empty brief. It is `needs requirements` everywhere the state is
    decided, with the file, what it lacks and the way on; written, the item is ready."""
    item = drover(project, "new", "Nothing written yet", check=True).stdout.split()[0]
    path = project / "items" / f"{item}.md"
    front, body = path.read_text().split("---\n", 2)[1:]
    path.write_text(f"---\n{front}---\n\n{section}")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "an item with nothing asked")
    drover(project, "list", check=True)  # the cache's row, as later commands read it
    assert json.loads(drover(project, "list", "--json").stdout)[0]["state"] == "needs requirements"
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "needs requirements"
    assert drover(project, "list", "--ready").stdout.strip() == ""
    checked = drover(project, "check")
    assert (f"warning: items/{item}.md: {item} needs requirements: the file {lack}, so drive skips it" in checked.stdout
            and checked.returncode == 0), checked.stdout
    words = f"needs requirements: items/{item}.md {lack}; write them there or run `drover draft {item}`"
    assert f"  {item}: {words}\n" in drover(project, "drive", check=True).stdout
    assert f"{item}: skipped: {words}" in drover(project, "drive", item).stdout
    dry = drover(project, "run", item, "--dry-run", check=True)
    assert f"{item} needs requirements: items/{item}.md {lack}, so the agent is given no requirements" \
        in dry.stdout + dry.stderr
    assert json.loads(drover(project, "show", item, "--json").stdout)["runs"] == []
    path.write_text(f"---\n{front}---\n\n## Requirements\n\n1. Do it.\n")
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "ready"


def test_a_body_of_free_markdown_with_no_requirements_heading_is_ready(project):
    """SPEC 4: the body is free Markdown. An item written by hand with no `## Requirements`
    heading asks what its body says: it is driven, not held as needing requirements."""
    item = drover(project, "new", "Written by hand", check=True).stdout.split()[0]
    path = project / "items" / f"{item}.md"
    front = path.read_text().split("---\n", 2)[1]
    path.write_text(f"---\n{front}---\n\nMake the parser keep a trailing newline.\n")
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "ready"
    assert "needs requirements" not in drover(project, "check").stdout
    assert "needs requirements" not in drover(project, "run", item, "--dry-run", check=True).stderr


# --- C: init finds the verify command, and hints at [run] setup ------------------------------


def _init_with(repo, files: dict[str, str]) -> tuple[dict, str]:
    """drover init in `repo` with `files` written first: (the config it wrote, what it said)."""
    import tomllib

    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    said = drover(repo, "init", check=True).stdout
    return tomllib.loads((repo / "drover.toml").read_text()), said


# what init writes for a CMake project: the command configures build/ itself (docs/worktrees.md)
CMAKE_TEST = "cmake -S . -B build && cmake --build build && ctest --test-dir build --output-on-failure --no-tests=error"


@pytest.mark.parametrize("files, command", [
    ({"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./run-tests\n"}, "make test"),
    ({"pyproject.toml": "[project]\nname = 'x'\n\n[tool.pytest.ini_options]\ntestpaths = ['tests']\n"},
     "python -m pytest"),
    ({"setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n"}, "python -m pytest"),
    # a tox.ini whose commands run pytest, with no pytest table (tkem/cachetools); deps naming it do not count
    ({"tox.ini": "[tox]\nenvlist = py\n\n[testenv]\ndeps =\n    pytest\ncommands =\n    py.test --basetemp={envtmpdir}\n"},
     "python -m pytest"),
    ({"tox.ini": "[testenv]\ncommands = - python3 -m pytest {posargs}\n"}, "python -m pytest"),
    ({"tox.ini": "[testenv]\ndeps =\n    pytest\n    pytest-cov\ncommands = python -m unittest\n"}, ""),
    ({"tox.ini": "[testenv]\ncommands = pytest-benchmark compare\n"}, ""),
    ({"tox.ini": "commands = pytest\n"}, ""),  # no section: no INI tox reads
    ({"package.json": '{"name": "x", "scripts": {"test": "jest"}}'}, "npm test"),
    ({"Cargo.toml": "[package]\nname = \"x\"\n"}, "cargo test"),
    ({"go.mod": "module example.com/x\n"}, "go test ./..."),
    ({"Makefile": "build:\n\tcc x.c\n", "Cargo.toml": "[package]\n"}, "cargo test"),  # no test target: not make
    # a committed lockfile names the tool the tests run through
    ({"pyproject.toml": "[tool.pytest.ini_options]\n", "uv.lock": "version = 1\n"}, "uv run --locked pytest"),
    # pytest where `uv run` installs it by itself (the dev group, default-groups), and where it does not
    ({"pyproject.toml": '[dependency-groups]\ndev = ["pytest>=8"]\n[tool.pytest.ini_options]\n', "uv.lock": ""},
     "uv run --locked pytest"),
    ({"pyproject.toml": '[dependency-groups]\ntests = ["pytest", "freezegun"]\n[tool.uv]\ndefault-groups = ["tests"]\n'
                        "[tool.pytest.ini_options]\n", "uv.lock": ""}, "uv run --locked pytest"),
    ({"pyproject.toml": '[dependency-groups]\ndev = ["pytest-cov"]\ntest = ["PyTest >= 8"]\n[tool.pytest.ini_options]\n',
      "uv.lock": ""}, "uv run --locked --group test pytest"),
    ({"pyproject.toml": '[project]\nname = "x"\n[project.optional-dependencies]\ntesting = ["pytest"]\n'
                        "[tool.pytest.ini_options]\n", "uv.lock": ""}, "uv run --locked --extra testing pytest"),
    # a name no packaging tool writes is no group: it would reach drover.toml's comment as it is
    ({"pyproject.toml": '[dependency-groups]\n"t\\n[agent]\\ncommand = \'sh x\'" = ["pytest"]\n[tool.pytest.ini_options]\n',
      "uv.lock": ""}, "uv run --locked pytest"),
    ({"pyproject.toml": "[tool.pytest.ini_options]\nx = [" + "[" * 600 + "\n", "uv.lock": ""},
     "uv run --locked pytest"),  # a pyproject.toml tomllib cannot read says nothing of where pytest is
    ({"pytest.ini": "[pytest]\n", "poetry.lock": "# poetry\n"}, "poetry run pytest"),
    ({"package.json": '{"scripts": {"test": "vitest"}}', "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"}, "pnpm test"),
    ({"package.json": '{"scripts": {"test": "jest"}}', "yarn.lock": "# yarn\n"}, "yarn test"),
    ({"Makefile": "test:\n\tuv run pytest -x\n", "pyproject.toml": "[tool.pytest.ini_options]\n", "uv.lock": ""},
     "make test"),  # the Makefile's own target first, as before
    ({"uv.lock": "version = 1\n", "yarn.lock": ""}, ""),  # a lockfile alone names no tests
    ({"package.json": "[" * 100_000, "go.mod": "module x\n"}, "go test ./..."),  # past the parser's depth: no script
    ({"package.json": '[{"scripts": {"test": "jest"}}]'}, ""),  # not an object
    # a C library built with CMake: configured, built and tested with ctest in build/, no set-up needed
    ({"CMakeLists.txt": "project(x C)\nenable_testing()\n"}, CMAKE_TEST),
    ({"Makefile": "all:\n\tcc x.c\n", "CMakeLists.txt": "project(x C)\n"}, CMAKE_TEST),  # no test target
    ({"Makefile": "test:\n\t./t\n", "CMakeLists.txt": "project(x C)\n"}, "make test"),  # the Makefile's first
])
def test_init_writes_the_verify_command_the_repository_names(repo, files, command):
    config, said = _init_with(repo, files)
    assert config["verify"]["default"] == command
    assert f"verify command: {command} (" in said if command else "verify command: none found" in said
    for lock in ("uv.lock", "poetry.lock", "pnpm-lock.yaml", "yarn.lock"):
        assert (f"a {lock})" in said or f"a {lock}, pytest in its " in said) == \
            (lock in files and command not in ("make test", "")), lock
    holder = re.search(r"--(group|extra) (\S+)", command)
    if holder:  # init says where pytest is
        assert f", pytest in its {holder[1]} {holder[2]})" in said
    assert "hint:" not in said  # no shared environment here


def _setup_lines(repo) -> dict[str, str]:
    """drover.toml's lines of [run] setup, keep and setup_inputs, by key: each value with its comment."""
    return {line.split(" = ", 1)[0]: line for line in (repo / "drover.toml").read_text().splitlines()
            if line.startswith(("setup = ", "keep = ", "setup_inputs = "))}


@pytest.mark.parametrize("files, examples", [
    ({"package.json": '{"name": "x", "scripts": {"test": "jest"}}'},
     ('e.g. "npm ci"', 'e.g. ["node_modules"]', 'e.g. ["package-lock.json", "package.json"]')),
    ({"package.json": '{"scripts": {"test": "vitest"}}', "pnpm-lock.yaml": "lockfileVersion: '9.0'\n"},
     ('e.g. "pnpm install --frozen-lockfile"', 'e.g. ["node_modules"]', 'e.g. ["pnpm-lock.yaml", "package.json"]')),
    ({"Cargo.toml": "[package]\nname = \"x\"\n"}, ("none needed, cargo test builds", '["target"] keeps cargo', 'e.g. ["Cargo.lock"]')),
    ({"go.mod": "module example.com/x\n"}, ('e.g. "go mod download"', "from its top: the next item", 'e.g. ["go.mod", "go.sum"]')),
    # a Makefile's test target names no kind: the manifest beside it does
    ({"Makefile": "test:\n\tgo test ./...\n", "go.mod": "module x\n"}, ('e.g. "go mod download"', "", "")),
    ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, ('e.g. "uv sync"', 'e.g. [".venv"]', 'e.g. ["uv.lock"]')),
    # a C library's Makefile (cJSON's): no Python or Node example
    ({"Makefile": "test: t\n\t./t\n", "cJSON.c": ""}, ('e.g. "./configure"', 'e.g. ["build"]', 'e.g. ["configure"]')),
    ({"CMakeLists.txt": "project(x C)\n"}, ("none needed, the verify command configures build/ itself",
                                             '["build"] keeps CMake\'s build folder', 'e.g. ["CMakeLists.txt"]')),
], ids=["npm", "pnpm", "cargo", "go", "make-go", "python", "make-c", "cmake"])
def test_init_comments_give_examples_of_the_kind_of_project_it_found(repo, files, examples):
    """drover.toml's comments beside [run] setup, keep and setup_inputs gave a Python project's
    examples (`uv sync`, `.venv`, `uv.lock`) whatever the repository held: a Node, Rust or Go project
    read of a virtual environment and a uv lockfile it has none of."""
    _init_with(repo, files)
    lines = _setup_lines(repo)
    for key, example in zip(("setup", "keep", "setup_inputs"), examples):
        assert example in lines[key], lines[key]
    if "pyproject.toml" not in files:
        assert not any(word in line for line in lines.values() for word in ("uv", ".venv")), lines
    if "package.json" not in files:
        assert not any("node_modules" in line for line in lines.values()), lines


def test_init_for_a_cargo_crate_says_it_needs_no_setup_and_that_a_pool_keeps_target(repo):
    """A Rust crate's drover.toml said [run] setup was chosen for it while it held the default and
    the generic `e.g. "uv sync"`, and keep's example was node_modules and .venv: nothing told a
    Rust user that a pooled worktree's clean removes target/, so every item and every check
    compiled the crate afresh. The two keys' comments now say it (values unchanged: keep trades
    isolation for time, the operator's choice, docs/worktrees.md)."""
    config, _ = _init_with(repo, {"Cargo.toml": "[package]\nname = \"x\"\n"})
    assert config["run"]["setup"] == "" and config["run"]["keep"] == [] and config["run"]["pool"] == 0
    lines = _setup_lines(repo)
    assert lines["setup"].endswith("# found: Cargo.toml: none needed, cargo test builds the crate and its "
                                   "dependencies itself")
    assert lines["keep"].endswith('# with [run] pool, ["target"] keeps cargo\'s build: a pooled worktree builds '
                                  "the dependencies once, then only what each item changed (drover help worktrees)")
    assert drover(repo, "check").returncode == 0


def test_init_without_a_test_command_leaves_verify_empty_and_check_warns(repo):
    config, said = _init_with(repo, {"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" '
                                                     '&& exit 1"}}'})
    assert config["verify"]["default"] == ""
    text = (repo / "drover.toml").read_text()
    (line,) = [line for line in text.splitlines() if line.startswith("default = ")]
    assert "nothing runs before merge" in line
    assert "nothing runs before merge" in said
    checked = drover(repo, "check")
    assert checked.returncode == 0
    assert "[verify] default is empty: nothing runs before merge" in checked.stdout


@pytest.mark.parametrize("files, command, said_of_it", [
    ({"package.json": '{\n  "scripts": {"test": "ava"},\n}\n'}, "", "package.json line 3, column 1: "),
    ({"package.json": '[{"scripts": {"test": "jest"}}]'}, "", "package.json holds no object"),
    ({"package.json": "[" * 100_000, "go.mod": "module x\n"}, "go test ./...", "package.json nests deeper"),
])
def test_init_names_the_package_json_it_could_not_read(repo, files, command, said_of_it):
    """A JavaScript project's package.json with a trailing comma (npm refuses it too) gave `verify
    command: none found` and nothing more, as if the repository named no tests: init says which file
    it could not read, and where, and still writes drover.toml."""
    config, said = _init_with(repo, files)
    assert config["verify"]["default"] == command
    (warning,) = [line for line in said.splitlines() if line.startswith("warning: package.json")]
    assert warning.startswith(f"warning: {said_of_it}")
    assert warning.endswith("its test script and packages were not read; mend it, or set [verify] default "
                            "and [run] setup yourself")


def test_init_says_nothing_of_a_package_json_it_did_not_need(repo):
    _, said = _init_with(repo, {"Makefile": "test:\n\t./t\n", "package.json": "{,"})
    assert "package.json" not in said  # the Makefile's target came first: package.json was never read


_PACKAGES = '{"scripts": {"test": "ava"}, "devDependencies": {"ava": "^6.0.0"}}'
_SUBMODULE = '[submodule "lib"]\n\tpath = lib\n\turl = https://example.invalid/lib.git\n'


@pytest.mark.parametrize("files, setup, inputs", [
    ({"package.json": _PACKAGES, "package-lock.json": "{}"}, "npm ci", ["package-lock.json", "package.json"]),
    ({"package.json": _PACKAGES}, "npm install --no-package-lock", ["package.json"]),
    ({"package.json": _PACKAGES, "pnpm-lock.yaml": ""}, "pnpm install --frozen-lockfile",
     ["pnpm-lock.yaml", "package.json"]),
    ({"package.json": _PACKAGES, "yarn.lock": ""}, "yarn install --frozen-lockfile", ["yarn.lock", "package.json"]),
    ({"pyproject.toml": "[tool.pytest.ini_options]\n", "poetry.lock": "", ".venv/pyvenv.cfg": ""}, "poetry install",
     ["poetry.lock", "pyproject.toml"]),
    ({"package.json": '{"scripts": {"test": "node test.js"}, "dependencies": {}}'}, "", []),  # no packages to install
    ({"pyproject.toml": "[tool.pytest.ini_options]\n", "uv.lock": ""}, "", []),  # `uv run` makes its own environment
    ({"Makefile": "test:\n\tnpm test\n", "package.json": _PACKAGES}, "", []),  # the project's own recipe
    # `git worktree add` checks out no submodule (docs/worktrees.md, "A repository with submodules")
    ({".gitmodules": _SUBMODULE, "CMakeLists.txt": "add_subdirectory(lib)\n"}, "git submodule update --init", []),
    ({".gitmodules": _SUBMODULE, "package.json": _PACKAGES, "package-lock.json": "{}"},
     "git submodule update --init && npm ci", ["package-lock.json", "package.json"]),
])
def test_init_writes_the_setup_its_verify_command_needs_in_each_worktree(repo, files, setup, inputs):
    """A worktree holds the tracked files alone: a test script's tools (node_modules) and a poetry
    environment are installed in it before its first agent and drover's check (docs/commands.md).
    What the set-up installs from (its lockfile, its manifest) is `[run] setup_inputs`, so a pooled
    worktree installs again when a branch changes its dependencies."""
    config, said = _init_with(repo, files)
    assert config["run"]["setup"] == setup
    assert config["run"]["setup_inputs"] == inputs
    told = [line for line in said.splitlines() if line.startswith("[run] setup: ")]
    assert [line.split(" (")[0] for line in told] == ([f"[run] setup: {setup}"] if setup else [])
    told = [line for line in said.splitlines() if line.startswith("[run] setup_inputs: ")]
    assert [line.split(" (")[0] for line in told] == ([f"[run] setup_inputs: {', '.join(inputs)}"] if inputs else [])
    # the first next step runs the verify command where nothing is installed yet (a fresh clone):
    # after the set-up, or `npm test` fails on tools node_modules does not hold
    lines = said.splitlines()
    first = lines[lines.index("next steps:") + 1]
    verify = config["verify"]["default"]
    assert first.startswith(f"  {setup} && {verify}   # [run] setup, then the verify command" if setup else
                            f"  {verify}   # the verify command"), first
    if setup:  # said in the file too, and no hint at another set-up beside it (poetry's .venv/)
        (line,) = [line for line in (repo / "drover.toml").read_text().splitlines() if line.startswith("setup = ")]
        assert "# found: " in line and "each new worktree" in line
        assert "hint:" not in said


@pytest.mark.parametrize("files, seen", [
    ({".venv/pyvenv.cfg": "home = /usr/bin\n"}, ".venv/"),
    ({"venv/bin/python": ""}, "venv/"),
    ({"Makefile": "dev:\n\tpip install -e '.[test]'\n"}, "pip install -e"),
])
def test_init_hints_at_run_setup_when_worktrees_would_share_an_environment(repo, files, seen):
    _, said = _init_with(repo, files)
    (hint,) = [line for line in said.splitlines() if line.startswith("hint: ")]
    assert seen in hint and "[run] setup" in hint and "main checkout's code" in hint
    (setup,) = [line for line in (repo / "drover.toml").read_text().splitlines() if line.startswith("setup = ")]
    assert seen in setup and "main checkout's code" in setup


def test_init_hints_at_a_python_set_up_that_the_pytest_verify_command_runs_in(repo):
    """A checkout with .venv/ and pytest configured: the hint's example installed the package
    without pytest, and the verify command stayed `python -m pytest`, PATH's python, outside the
    environment the set-up makes (a new user, on wcwidth)."""
    _, said = _init_with(repo, {".venv/pyvenv.cfg": "home = /usr/bin\n", "tox.ini": "[pytest]\naddopts = -q\n"})
    config = (repo / "drover.toml").read_text()
    assert re.search(r'^default = "python -m pytest" ', config, re.M), config
    (setup,) = [line for line in config.splitlines() if line.startswith("setup = ")]
    assert '.venv/bin/pip install -e . pytest' in setup and '.venv/bin/python -m pytest' in setup, setup


def _bin(tmp_path, python: str) -> str:
    """A PATH of git and a `python` that runs `python` (the shell line after the interpreter), no make."""
    import shutil
    import sys

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "git").symlink_to(shutil.which("git"))
    (folder / "python").write_text(f"#!/bin/sh\nexec {sys.executable} {python} \"$@\"\n")
    (folder / "python").chmod(0o755)
    return str(folder)


@pytest.mark.parametrize("files, python, warned", [
    ({"Makefile": "test:\n\t./run-tests\n"}, "", "`make` is not on PATH"),
    ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "-S", "has no module named 'pytest'"),  # no site-packages
    ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "", ""),  # this interpreter has pytest
])
def test_init_warns_when_the_verify_command_it_chose_cannot_run_here(repo, tmp_path, files, python, warned):
    from helpers import run

    for name, text in files.items():
        (repo / name).write_text(text)
    done = run(repo, "init", env={"PATH": _bin(tmp_path, python)})
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stdout.splitlines() if line.startswith("warning: the verify command")]
    if warned:
        (line,) = warnings
        assert warned in line and "[verify] default" in line
    else:
        assert warnings == []
    command = "make test" if "Makefile" in files else "python -m pytest"
    assert f"  {command}   # the verify command" in done.stdout.split("next steps:")[1]


def test_check_warns_of_each_verify_command_that_cannot_run_here(repo, tmp_path):
    """What init says of the command it chose, check says of every [verify] command, whoever wrote
    it: drover's check fails on every item while one cannot start."""
    from helpers import run

    drover(repo, "init", check=True)
    config = (repo / "drover.toml").read_text()
    config = re.sub(r'(?m)^default = .*$', 'default = "python -m pytest"\nmigration = "pytset -q"\n'
                    'docs = "python -m pytest --doctest-glob=*.md"\nlint = "git --version"\n'
                    'activated = ". .venv/bin/activate && type pytest"', config, count=1)  # the shell's own words
    (repo / "drover.toml").write_text(config)
    bare = _bin(tmp_path, "-S")  # a python with no site-packages
    done = run(repo, "check", "--json", env={"PATH": bare})
    assert done.returncode == 0, done.stdout + done.stderr  # warnings only
    found = {problem["message"].split(":")[1].strip(): problem for problem in json.loads(done.stdout)["problems"]
             if problem["code"] == "verify-cannot-run"}
    assert sorted(found) == ["[verify] default cannot run here", "[verify] docs cannot run here",
                             "[verify] migration cannot run here"]
    assert {problem["severity"] for problem in found.values()} == {"warning"}
    assert "has no module named 'pytest'" in found["[verify] default cannot run here"]["message"]
    assert "`pytset` is not on PATH" in found["[verify] migration cannot run here"]["message"]
    header = run(repo, "drive", "--dry-run", env={"PATH": bare}).stdout.split("--- drover: dry run")[0]
    assert sorted(line.split(":")[1].strip() for line in header.splitlines() if "[verify]" in line) == sorted(found)
    # with a python that has pytest, only the typo is left
    (tmp_path / "with-site").mkdir()
    done = run(repo, "check", "--json", env={"PATH": _bin(tmp_path / "with-site", "")})
    left = [problem["message"] for problem in json.loads(done.stdout)["problems"] if problem["code"] == "verify-cannot-run"]
    assert len(left) == 1 and "`pytset` is not on PATH" in left[0]


@pytest.mark.parametrize("files, warned", [
    ({}, True),  # an older init's default, in a repository with no Makefile
    ({"Makefile": "test:\n\ttrue\n"}, False),
    ({"configure": "#!/bin/sh\n"}, False),  # a set-up of ./configure makes one
    ({"CMakeLists.txt": "project(x)\n"}, False),
])
def test_check_warns_of_a_make_verify_command_where_no_makefile_is(repo, files, warned):
    """An upgraded project kept `[verify] default = "make test"`, which a week-old init wrote for
    every repository: check said nothing, and every item's check then failed (`No rule to make
    target 'test'`), sending approved items back as rounds."""
    drover(repo, "init", check=True)
    for name, text in files.items():
        (repo / name).write_text(text)
    config = re.sub(r'(?m)^default = .*$', 'default = "make test"\nother = "make -C build test"',
                    (repo / "drover.toml").read_text(), count=1)
    (repo / "drover.toml").write_text(config)
    done = drover(repo, "check", "--json")
    assert done.returncode == 0, done.stdout + done.stderr  # a warning
    said = [problem["message"] for problem in json.loads(done.stdout)["problems"]
            if problem["code"] == "verify-cannot-run"]
    if warned:
        (line,) = said  # not `make -C build test`: its option names the folder
        assert "[verify] default cannot run here: `make` finds no Makefile here" in line, line
    else:
        assert said == []


def _environment(tmp_path, installs: list[str]) -> str:
    """A PATH of git and a virtual environment's bin whose site-packages holds a `.pth` naming each of
    `installs`, as `pip install -e .` of a src layout writes one, and this interpreter's packages
    (pytest among them), with a `pytest` script as pip writes one."""
    import shutil
    import sysconfig
    import venv

    home = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(home)
    (site,) = home.glob("lib/python*/site-packages")
    (site / "__editable__.project-0.1.pth").write_text("".join(f"{path}\n" for path in installs))
    (site / "runner.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (home / "bin" / "pytest").write_text(f"#!{home / 'bin' / 'python'}\nimport sys\nfrom pytest import console_main\n"
                                         "sys.exit(console_main())\n")
    (home / "bin" / "pytest").chmod(0o755)
    (home / "bin" / "git").symlink_to(shutil.which("git"))
    return str(home / "bin")


@pytest.mark.parametrize("layout, command, settings, warned", [
    # an install that points at this checkout's src/: a worktree's tests import it, whichever way pytest starts
    ("src/project", "python -m pytest", "", "src"),
    ("src/project", "pytest -q", "", "src"),
    ("src/project", "python -m pytest", 'pythonpath = ["src"]\n', ""),  # pytest puts the worktree's src/ first
    # a package at the top: python -m puts the worktree's folder first, the pytest script does not
    ("project", "python -m pytest", "", ""),
    ("project", "pytest -q", "", "."),
    ("project", "pytest -q", 'pythonpath = ["."]\n', ""),
    ("project conftest.py", "pytest -q", "", ""),  # a conftest.py at the top: pytest puts its folder first
])
def test_init_and_check_warn_when_a_worktrees_tests_would_import_this_checkouts_code(repo, tmp_path, layout, command,
                                                                                     settings, warned):
    """A project installed with `pip install -e .` into an environment outside the repository: from
    an item's worktree its tests import the package where the install points, this checkout, so
    drover's check tests the main checkout's code and passes what a branch broke (docs/verify.md)."""
    from helpers import run

    package, *beside = layout.split()
    (repo / package).mkdir(parents=True)
    (repo / package / "__init__.py").write_text("ANSWER = 42\n")
    for name in beside:
        (repo / name).write_text("")
    (repo / "pyproject.toml").write_text(f"[project]\nname = 'project'\n\n[tool.pytest.ini_options]\n{settings}")
    path = _environment(tmp_path, [str(repo / package.rpartition("/")[0])])
    done = run(repo, "init", env={"PATH": path})
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("warning: the verify command")]
    assert len(said) == (warned == "src")  # init writes python -m pytest: only a package under src/ is at stake
    config = (repo / "drover.toml").read_text()
    (repo / "drover.toml").write_text(config.replace('default = "python -m pytest"', f'default = "{command}"', 1))
    checked = run(repo, "check", "--json", env={"PATH": path})
    found = [problem["message"] for problem in json.loads(checked.stdout)["problems"]
             if problem["code"].startswith("verify-")]
    if warned:
        (message,) = found
        assert message.startswith(f"drover.toml: [verify] default tests the wrong code: `{command.split()[0]}` (")
        assert f"imports project from this checkout's {package}/ through an install of it" in message
        assert f'(pythonpath = ["{warned}"])' in message
        if command == "python -m pytest":  # what init wrote: it said the same
            assert said[0].removeprefix("warning: the verify command ") in message
    else:
        assert found == []
    # and where a drive starts, which is where an unattended night begins
    header = run(repo, "drive", "--dry-run", env={"PATH": path}).stdout.split("--- drover: dry run")[0]
    shown = [line.strip() for line in header.splitlines() if "[verify]" in line]
    assert shown == ([f"warning: [verify] default {message.split('[verify] default ', 1)[1]}"] if warned else [])


def test_a_fifo_in_place_of_a_pytest_settings_file_holds_no_check_nor_drive(repo, tmp_path):
    """The look reads pytest's settings files for `pythonpath`: a fifo an agent puts in place of one
    (an agent with `worktree = false` writes the main checkout) is no file, never a wait."""
    import os
    import subprocess

    from helpers import BIN

    (repo / "src" / "project").mkdir(parents=True)
    (repo / "src" / "project" / "__init__.py").write_text("")
    (repo / "pyproject.toml").write_text("[project]\nname = 'project'\n\n[tool.pytest.ini_options]\n")
    path = _environment(tmp_path, [str(repo / "src")])
    assert drover(repo, "init", env={"PATH": path}).returncode == 0
    os.mkfifo(repo / "pytest.ini")
    for args in (["check"], ["drive", "--dry-run"]):
        done = subprocess.run([str(BIN / "drover"), *args], cwd=repo, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PATH": path})
        assert "[verify] default tests the wrong code" in done.stdout + done.stderr, args


# --- D: every state list can show is a --state choice ----------------------------------------


@pytest.mark.parametrize("extra", [(), ("--json",)])
def test_list_accepts_every_state_as_a_choice(project, extra):
    from drover.ledger.state import State

    item = new_item(project, "Fails")
    env = {"AGENT_MODE": "fail"}
    assert drover(project, "run", item, env=env).returncode != 0
    for state in State:
        done = drover(project, "list", "--state", state.value, *extra)
        assert done.returncode == 0, (state, done.stderr)
    failed = drover(project, "list", "--state", "failed", *extra).stdout
    assert item in failed
    assert item not in drover(project, "list", "--state", "interrupted", *extra).stdout
    # through click too (an option the fast path leaves to it)
    assert item in drover(project, "--color", "never", "list", "--state", "failed").stdout


# --- E: the small ones of point 10 ------------------------------------------------------------


def test_prompt_without_slot_renders_the_slot_the_item_is_at(project):
    item = new_item(project, "Add a thing")
    placeholder = drover(project, "new", "Unwritten", check=True).stdout.split()[0]
    for extra in ((), ("--json",)):
        implement = drover(project, "prompt", item, *extra, check=True).stdout
        assert "You are the implementing agent" in implement
        draft = drover(project, "prompt", placeholder, *extra, check=True).stdout
        assert "You are drafting one work item's requirements" in draft
    drover(project, "run", item, check=True)
    assert json.loads(drover(project, "show", item, "--json").stdout)["state"] == "in review"
    review = drover(project, "prompt", item, check=True).stdout
    assert "You are the reviewing agent" in review
    assert json.loads(drover(project, "prompt", item, "--json", check=True).stdout)["slot"] == "review"
    assert "You are the implementing agent" in drover(project, "prompt", item, "--slot", "implement").stdout


def test_help_states_and_executors_are_topics_and_help_completes_them(repo):
    listed = drover(repo, "help", check=True).stdout
    assert "  states\n" in listed and "  executors\n" in listed
    assert drover(repo, "help", "states", check=True).stdout.startswith("# Item states")
    assert drover(repo, "help", "executors", check=True).stdout.startswith("# ")
    env = {"_DROVER_COMPLETE": "bash_complete", "COMP_WORDS": "drover help st", "COMP_CWORD": "2"}
    completed = drover(repo, env=env).stdout.splitlines()
    assert "plain,states" in completed and "plain,status" not in completed
    env["COMP_WORDS"] = "drover help "
    completed = drover(repo, env=env).stdout.splitlines()
    assert {"plain,configuration", "plain,executors", "plain,drive"} <= set(completed)


def test_check_diff_says_so_when_nothing_is_stale(project):
    words = drover(project, "check", "--diff")
    assert words.stdout.splitlines()[0] == "no stale overrides: nothing to diff"
    unified = drover(project, "check", "--diff", "--format", "unified")
    assert unified.stdout == "" and "drover: no stale overrides: nothing to diff" in unified.stderr


def test_a_dirty_checkout_refusal_sums_up_untracked_folders_and_says_to_ignore_them(project):
    item = implemented(project, "Add a thing")
    drover(project, "audit", item, "--level", "reviewed", check=True)
    venv = project / ".venv" / "lib"
    venv.mkdir(parents=True)
    for number in range(30):
        (venv / f"m{number}.py").write_text("")
    (project / "scratch.txt").write_text("")
    for args in (("finish", item), ("drive", "--finish")):
        done = drover(project, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stderr.splitlines()
        assert "add the untracked paths to .gitignore" in lines[0] and "commit or stash" not in lines[0]
        assert "drover:   .venv/ (untracked, 30 files)" in lines and "drover:   scratch.txt (untracked)" in lines
        assert len(lines) == 3
    (project / "README.md").write_text("changed\n")
    lines = drover(project, "finish", item).stderr.splitlines()
    assert "commit or stash the changes" in lines[0] and "drover:   README.md (changed)" in lines


def test_log_follow_on_an_item_without_a_run_waits_for_its_first(project):
    import select
    import subprocess

    from helpers import BIN

    item = new_item(project, "Add a thing")
    follower = subprocess.Popen([str(BIN / "drover"), "log", item, "--follow"], cwd=project, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the run starts only once the follower has said it waits: a follower started late on a
        # loaded machine would otherwise find the run already there and never wait
        assert select.select([follower.stderr], [], [], 60)[0], "log --follow said nothing in 60 s"
        waiting = follower.stderr.readline()
        assert follower.poll() is None  # waiting, not exit 2
        drover(project, "run", item, check=True)
        out, err = follower.communicate(timeout=60)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()
    assert follower.returncode == 0, err
    assert f"{item} has no run yet; waiting for its first" in waiting
    assert f"script agent: implement {item}" in out
    # an item that does not exist is said at once
    assert drover(project, "log", "D-99", "--follow").returncode == 2


def test_show_json_gives_null_tool_calls_when_no_run_reported_any(project):
    item = implemented(project, "Add a thing")
    for args in (("show", item, "--json"), ("--color", "never", "show", item, "--json")):
        usage = json.loads(drover(project, *args, check=True).stdout)["usage"]
        assert usage == {"input_tokens": None, "output_tokens": None, "cost_usd": None, "tool_calls": None,
                         "usd": None, "usd_source": "", "unpriced_tokens": 0}


def test_drive_dry_run_says_a_blocked_item_follows_its_dep(project):
    first = new_item(project, "First")
    second = new_item(project, "Second", "--dep", first)
    finish = drover(project, "drive", "--dry-run", "--finish", check=True).stdout
    assert f"  {second}: blocked on {first}: follows in this drive once {first} is finished" in finish
    plain = drover(project, "drive", "--dry-run", check=True).stdout
    assert f"  {second}: blocked on {first}: waits until {first} is finished" in plain


def test_the_drive_header_names_the_items_that_follow_as_their_deps_are_finished(project):
    """`drive --finish` takes a blocked item once its dep is finished: its header says so up front
    (without --finish nothing follows; given ids are what they are)."""
    first = new_item(project, "First")
    second = new_item(project, "Second", "--dep", first)
    third = new_item(project, "Third", "--dep", second)
    finish = drover(project, "drive", "--dry-run", "--finish", check=True).stdout
    assert f"  items: {first}\n  then, as their deps are finished: {second}, {third}\n" in finish
    assert "then, as their deps" not in drover(project, "drive", "--dry-run", check=True).stdout
    assert "then, as their deps" not in drover(project, "drive", first, "--dry-run", "--finish", check=True).stdout


def test_drive_dry_run_json_prints_the_plan_as_json_on_stdout_and_the_header_on_stderr(project):
    first = new_item(project, "First")
    second = new_item(project, "Second", "--dep", first)
    done = drover(project, "drive", "--dry-run", "--json", "--finish", check=True)
    assert json.loads(done.stdout) == {
        "dry_run": True, "executor": "local", "where": "this machine", "finish": True,
        "items": [{"id": first, "next": "run", "waiting": [], "note": "implement and review would run on this machine"},
                  {"id": second, "next": "blocked", "waiting": [first],
                   "note": f"blocked on {first}: follows in this drive once {first} is finished"}]}
    assert "drover drive" in done.stderr and "dry run; nothing was launched" in done.stderr
    named = json.loads(drover(project, "drive", second, "--dry-run", "--json", check=True).stdout)
    assert [(row["id"], row["next"]) for row in named["items"]] == [(second, "run")]
    drover(project, "run", first, check=True)  # committed work, in review: the drive starts at the review
    reviewing = json.loads(drover(project, "drive", first, "--dry-run", "--json", check=True).stdout)
    assert reviewing["items"] == [{"id": first, "next": "run", "waiting": [],
                                   "note": "review would run on this machine (implement again only if it sends back)"}]


def test_the_drive_header_gives_the_cap_in_rounds_and_one_round_in_the_singular(project):
    new_item(project, "First")
    assert "; cap: 3 rounds; " in drover(project, "drive", "--dry-run", check=True).stdout
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("max_rounds = 3", "max_rounds = 1", 1))
    git(project, "commit", "-qam", "one round")
    header = drover(project, "drive", "--dry-run", check=True).stdout
    assert "; cap: 1 round; " in header and "1 rounds" not in header


# --- F: the regressions of point 11 --------------------------------------------------------------


def test_init_points_at_the_executors_help_topic(repo):
    drover(repo, "init", check=True)
    text = (repo / "drover.toml").read_text()
    assert "docs/executors.md" not in text and "drover help executors" in text


def test_the_ray_install_hint_names_the_drover_cli_distribution(project):
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    for page in ("README.md", "docs/executors.md"):
        text = (root / page).read_text()
        assert "drover-cli[ray]" in text and "'drover[ray]'" not in text and '"drover[ray]"' not in text, page
    from drover.executors import ray

    assert "pip install 'drover-cli[ray]'" in ray.INSTALL


def test_check_fails_when_the_items_folder_is_a_file(project):
    folder = project / "items"
    folder.rmdir()
    folder.write_text("not a folder\n")
    for args in (("check",), ("check", "--json")):
        done = drover(project, *args)
        assert done.returncode == 1, done.stdout
        assert "items: not a folder" in done.stdout


def test_check_fails_and_drive_refuses_when_the_items_folder_named_does_not_exist(project):
    new_item(project, "Add a thing")
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('items = "items"', 'items = "itmes"', 1))
    done = drover(project, "check")
    assert done.returncode == 1, done.stdout
    assert "drover.toml: [project] items: no folder 'itmes'" in done.stdout
    problems = json.loads(drover(project, "check", "--json").stdout)["problems"]
    found = next(problem for problem in problems if "itmes" in problem["message"])
    assert (found["code"], found["severity"], found["path"]) == ("items-folder", "error", "drover.toml")
    driven = drover(project, "drive")
    assert driven.returncode == 1 and "no folder 'itmes'" in driven.stdout + driven.stderr
    assert "nothing to drive" not in driven.stdout


def test_a_freshly_initialised_project_has_its_items_folder_and_checks_clean(repo):
    drover(repo, "init", check=True)
    done = drover(repo, "check")
    assert done.returncode == 0 and "[project] items" not in done.stdout, done.stdout


def test_check_json_codes_the_new_findings(project):
    drover(project, "new", "Unwritten", check=True)
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('default = "make test"', 'default = ""'))
    problems = json.loads(drover(project, "check", "--json").stdout)["problems"]
    codes = {problem["code"]: problem["severity"] for problem in problems}
    assert codes["needs-requirements"] == "warning" and codes["verify-empty"] == "warning"
    empty = next(problem for problem in problems if problem["code"] == "verify-empty")
    written = next(at for at, text in enumerate(config.read_text().splitlines(), 1) if text.startswith('default = ""'))
    assert (empty["path"], empty["line"]) == ("drover.toml", written)
    (project / "items").rename(project / "elsewhere")
    (project / "items").write_text("")
    problems = json.loads(drover(project, "check", "--json").stdout)["problems"]
    assert {"code": "items-folder", "severity": "error"}.items() <= next(
        problem for problem in problems if problem["code"] == "items-folder").items()


def test_the_drive_header_says_what_holds_back_an_item_it_will_not_take(project):
    """A new user's drive printed `items: nothing is ready` and stopped there: the one item left
    waited on a parked dep. The header names each blocked item the drive will not take, with each
    dep that holds it back, its state, and what frees it."""
    first = new_item(project, "First")
    second = new_item(project, "Second", "--dep", first)
    drover(project, "park", first, "--why", "the operator looks first", check=True)
    said = drover(project, "drive", "--dry-run", "--finish", check=True).stdout
    assert "  items: nothing is ready\n" in said
    assert f"  waiting: {second} on {first} (parked: `drover unpark {first}`)\n" in said
    drover(project, "unpark", first, check=True)
    said = drover(project, "drive", "--dry-run", "--finish", check=True).stdout
    assert "waiting:" not in said  # the dep is in this drive: the plan says the rest


def test_a_drive_of_given_items_is_not_stopped_by_another_items_broken_file(project):
    """A new user's `drive D-1 --dry-run` was refused for D-2's broken YAML, though one bad item
    stops no command about another (docs/items.md). Given ids, only their own files and their
    deps' count (and every error not about one item's file); a whole drive still refuses."""
    first = new_item(project, "First")
    broken = new_item(project, "Broken")
    third = new_item(project, "Third", "--dep", broken)
    path = project / "items" / f"{broken}.md"
    path.write_text(path.read_text().replace(f"id: {broken}\n", f"id: {broken}\ndeps: [{first}\n", 1))
    done = drover(project, "drive", first, "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  items: {first}\n" in done.stdout
    whole = drover(project, "drive", "--dry-run")
    assert whole.returncode == 1 and f"items/{broken}.md" in whole.stderr, whole.stderr
    on_it = drover(project, "drive", third, "--dry-run")  # its dep is the broken one
    assert on_it.returncode == 1 and f"items/{broken}.md" in on_it.stderr, on_it.stderr


def test_a_drive_without_finish_says_what_merges_the_items_it_approved(project):
    """A new user drove without --finish: the summary said `1 of 1 approved` and the next drive
    `nothing is ready`, `nothing to drive`, with no word of `finish`. The summary of a drive that
    approved an item and its next drive's header both name the command that merges it."""
    item = new_item(project, "Add a thing")
    done = drover(project, "drive", env=APPROVING, check=True)
    assert done.stdout.splitlines()[-2:] == [
        "1 of 1 approved", f"approved, not merged: {item}: `drover finish {item}` merges it (or `drover drive --finish`)"]
    again = drover(project, "drive", env=APPROVING, check=True).stdout
    assert "  items: nothing is ready\n" in again
    assert f"  approved, not merged: {item}: `drover finish {item}` merges it (or `drover drive --finish`)\n" in again
    finished = drover(project, "drive", "--finish", env=APPROVING, check=True).stdout
    assert "not merged" not in finished and finished.splitlines()[-1] == "1 of 1 approved, 1 finished"


def test_a_resumed_run_whose_branch_has_no_commit_of_its_own_and_is_behind_base_says_so(project):
    """A new user's first run failed (their agent script was not committed yet); they committed it on
    main and ran again: the run resumed on the branch the first had made from the older main, without
    the script, and failed the same way, saying nothing of why. The run now says its branch lacks
    base's newer commits and how to bring it up to date; once it is, the warning is gone."""
    item = new_item(project, "Add a thing")
    failed = drover(project, "run", item, env={"AGENT_MODE": "fail"})
    assert failed.returncode == 1 and "warning" not in failed.stderr, failed.stderr
    (project / "agent.sh").write_text("echo the agent\n")
    git(project, "add", "agent.sh")
    git(project, "commit", "-qm", "the agent script")
    warning = (f"drover: warning: drover/{item.lower()} holds no commit of its own and lacks 1 commit of main: this run "
               f"starts from the older main (`git -C .drover/worktrees/{item} merge --ff-only main` first to start "
               "from main as it is now)")
    dry = drover(project, "run", item, "--dry-run", check=True)
    assert warning.removeprefix("drover: ") in dry.stdout + dry.stderr, dry.stdout[-600:] + dry.stderr
    again = drover(project, "run", item, env={"AGENT_MODE": "fail"})
    assert warning in again.stderr.splitlines(), again.stderr
    git(project / ".drover" / "worktrees" / item, "merge", "-q", "--ff-only", "main")
    done = drover(project, "run", item, check=True)
    assert "holds no commit" not in done.stderr and (project / ".drover" / "worktrees" / item / "agent.sh").exists()


def test_a_drive_that_implements_an_empty_branch_again_says_it_is_behind_base(project):
    """A new user (on markupsafe): an item's run ended well and committed nothing (their agent script
    had no case for it); they mended the script on main and drove again: `nothing to review: ...:
    implement again`, and the run, on the branch made from the older main without the mended script,
    committed nothing again; the item ended `failed`, and nothing said why. A run that continues such
    a branch now says it lacks base's newer commits, as a first or resumed run does."""
    item = new_item(project, "Add a thing")
    drover(project, "run", item, env={"AGENT_MODE": "idle"}, check=True)
    (project / "agent.sh").write_text("echo the agent\n")
    git(project, "add", "agent.sh")
    git(project, "commit", "-qm", "the agent script")
    warning = (f"{item}: warning: drover/{item.lower()} holds no commit of its own and lacks 1 commit of main: this "
               f"run starts from the older main (`git -C .drover/worktrees/{item} merge --ff-only main` first to "
               "start from main as it is now)")
    drove = drover(project, "drive", env={"AGENT_MODE": "idle"})
    assert f"{item}: nothing to review: drover/{item.lower()} has no commits beyond main (the implementing runs " \
           "committed nothing): implement again" in drove.stdout, drove.stdout
    assert warning in drove.stdout.splitlines(), drove.stdout


def test_a_drive_of_the_ready_items_names_each_item_that_needs_requirements_and_the_way_on(project):
    """A new user's `drover new`, then `drover drive`, said `items: nothing is ready` and `nothing
    to drive`: the item still held the placeholder, and nothing said so. The header names it, with
    the file to write and the draft that writes it; once written, the drive takes it."""
    placeholder = drover(project, "new", "Nothing written yet", check=True).stdout.split()[0]
    said = drover(project, "drive", check=True).stdout
    assert "  items: nothing is ready\n" in said
    assert (f"  {placeholder}: needs requirements: items/{placeholder}.md still holds the placeholder; "
            f"write them there or run `drover draft {placeholder}`\n") in said
    write_requirements(project, placeholder)
    said = drover(project, "drive", "--dry-run", check=True).stdout
    assert f"  items: {placeholder}\n" in said and "needs requirements" not in said


def test_a_run_by_hand_of_an_item_that_needs_requirements_warns_that_the_agent_gets_none(project):
    """README's steps went `drover new`, `drover prompt`, `drover run`: a new user's agent was
    launched on the placeholder, and nothing said so. A run by hand still launches (as for a ready
    item, docs/states.md) and warns, --dry-run too; once the requirements are written it does not."""
    item = drover(project, "new", "Nothing written yet", check=True).stdout.split()[0]
    warning = (f"{item} needs requirements: items/{item}.md still holds the placeholder, so the agent is given "
               f"no requirements (write them, or `drover draft {item}` first)")
    dry = drover(project, "run", item, "--dry-run", check=True)
    assert warning in dry.stdout + dry.stderr
    done = drover(project, "run", item, check=True)
    assert f"drover: warning: {warning}" in done.stderr.splitlines(), done.stderr
    write_requirements(project, item)
    assert "needs requirements" not in drover(project, "run", item, "--dry-run", check=True).stderr


def test_check_asks_whether_a_verify_key_close_to_default_meant_default(project):
    """A new user wrote `defualt = "..."` under [verify]: the table's keys are the project's own (an
    item with `defualt: yes` would run it), so drover took it, and every item's check ran the
    default `make test` in a repository with no Makefile; check warned only that the key's command
    does not contain `make test`. It now asks whether the key meant default."""
    config = project / "drover.toml"
    config.write_text(re.sub(r'^default = ".*?"', 'defualt = "python -m pytest"', config.read_text(), count=1, flags=re.M))
    checked = drover(project, "check")
    assert checked.returncode == 0, checked.stdout
    written = next(at for at, text in enumerate(config.read_text().splitlines(), 1) if text.startswith("defualt = "))
    # the file and line in front, as every other finding about drover.toml (Finding.at)
    assert (f"warning: drover.toml:{written}: [verify] defualt: did you mean default? [verify] defualt runs only "
            "for items that set defualt: yes; every other item's check runs [verify] default ('make test')"
            ) in checked.stdout.splitlines(), checked.stdout
    assert "does not contain the default command" not in checked.stdout
    problems = json.loads(drover(project, "check", "--json").stdout)["problems"]
    assert {"code": "misspelt-key", "severity": "warning", "path": "drover.toml", "line": written}.items() <= next(
        problem for problem in problems if "defualt" in problem["message"]).items()
    config.write_text(config.read_text().replace("defualt = ", "migration = ", 1))
    assert "did you mean" not in drover(project, "check").stdout


def test_a_dry_run_with_a_base_branch_that_does_not_exist_refuses_as_the_run_does(project):
    """A new user's `[run] base = "master"` in a repository whose branch is main: `drover run D-1`
    refused (exit 2), but `drover run D-1 --dry-run`, asked first to see what would happen, exited 0
    and said nothing of it. The dry run refuses in the run's words and exit code."""
    item = new_item(project, "Add a thing")
    config = project / "drover.toml"
    config.write_text(re.sub(r'^base = ".*?"', 'base = "master"', config.read_text(), count=1, flags=re.M))
    git(project, "commit", "-qam", "base master")
    real = drover(project, "run", item)
    assert real.returncode == 2 and "base branch 'master' does not exist" in real.stderr, real.stderr
    for args in (("run", item, "--dry-run"), ("run", item, "--dry-run", "--json")):
        dry = drover(project, *args)
        assert dry.returncode == 2, dry.stdout + dry.stderr
        assert dry.stderr.splitlines() == real.stderr.splitlines()[-1:], dry.stderr
        assert dry.stdout == ""


def test_an_item_keeps_its_branch_when_the_branch_template_changes(project):
    """The branch an item's implementing runs worked on is the item's: a later change of `[run]
    branch` (or of a title it renders) names a new branch for new items only, never one that
    starts again from base beside the item's work."""
    item = implemented(project, "Add a thing")
    [first] = ledger_rows(project, "runs")
    config = (project / "drover.toml").read_text()
    assert 'branch = "drover/{{ Id | lower }}"' in config
    (project / "drover.toml").write_text(config.replace('branch = "drover/{{ Id | lower }}"',
                                                        'branch = "work/{{ Id | lower }}"', 1))
    git(project, "commit", "-qam", "another branch template")
    dry = drover(project, "run", item, "--dry-run", check=True).stdout
    assert f"branch: {first['branch']}" in dry, dry
    drover(project, "run", item, check=True)
    assert {row["branch"] for row in ledger_rows(project, "runs")} == {first["branch"]}
    assert git(project, "branch", "--list", "work/*").strip() == ""
    later = new_item(project, "Add another")
    assert f"branch: work/{later.lower()}" in drover(project, "run", later, "--dry-run", check=True).stdout


def test_a_dry_run_says_whether_the_items_worktree_is_there_or_made_at_launch(project):
    item = new_item(project, "Add a thing")
    first = drover(project, "run", item, "--dry-run", check=True).stdout
    assert f"directory: .drover/worktrees/{item} (a worktree, created at launch)" in first, first
    drover(project, "run", item, check=True)
    again = drover(project, "run", item, "--dry-run", check=True).stdout
    assert f"directory: .drover/worktrees/{item} (the item's worktree)" in again, again
