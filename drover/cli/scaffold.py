"""`drover init`: the files a project starts with."""
from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from drover import git
from drover.cli.config_text import default_config_text
from drover.config import CONFIG_FILE, KEYS, Config, load_config, parse_config
from drover.errors import UsageError
from drover.git.files import read_regular, read_regular_text
from drover.items.file import line_ending, write_atomic
from drover.ledger.project import STATE_DIR, check_state, find_root, trusted_stat
from drover.loop.runnable import cannot_start, tests_this_checkout

IGNORE_LINE = f"{STATE_DIR}/"


def init_project(start: Path, preset: str = "") -> list[str]:
    """Create drover.toml (unless present), the items folder, .drover/ and its ignore line;
    `preset`, when given, is the file's `[agent] preset` (`init --agent`)."""
    root = find_root(start)  # refuses outside git
    said = []
    config_path = root / CONFIG_FILE
    trusted_stat(root, root)
    fresh = trusted_stat(config_path, root) is None
    if preset and not fresh:
        raise UsageError(f"--agent {preset}: {CONFIG_FILE} exists already, and init leaves it as it is: set "
                         "[agent] preset there")
    detected = detect_verify(root) if fresh else ("", "")
    setup = detect_setup(root, detected[0]) if fresh else ("", "")
    text = config_text_for(root, detected, setup, preset) if fresh else ""
    config = parse_config(tomllib.loads(text)) if fresh else load_config(config_path)
    items = root / config.items
    check_state(root, config.items)
    # refuse before writing anything: a failed init leaves the checkout as it was
    for path, what in ((items, config.items), (root / STATE_DIR, STATE_DIR)):
        if path.exists() and not path.is_dir():
            raise UsageError(f"{what} exists and is not a folder: move it aside first")
    gitignore = root / ".gitignore"
    ignores = _gitignore_adding(gitignore)
    if fresh:
        write_atomic(config_path, text)
        said.append(f"wrote {CONFIG_FILE} (base branch: {config.base})")
        said += _verify_said(root, detected, setup)
        said += _agent_said(config)
    else:
        said.append(f"{CONFIG_FILE} already exists; left as it is")
    if not items.is_dir():
        items.mkdir(parents=True)
        said.append(f"created {config.items}/")
    (root / STATE_DIR).mkdir(exist_ok=True)
    ledger_path = root / STATE_DIR / "ledger.db"
    if not ledger_path.exists():
        # created here, migrated, so no later command (least of all a failing one) creates it
        from drover.ledger.db import Ledger

        Ledger(ledger_path).close()
        said.append(f"created {STATE_DIR}/ledger.db")
    if ignores is not None:
        write_atomic(gitignore, ignores)
        said.append(f"added {IGNORE_LINE} to .gitignore")
    if not fresh:  # set up before: the first-time steps are behind the user
        return said if len(said) > 1 else said + ["drover is set up here: nothing changed "
                                                  "(`drover check` says whether all of it is sound)"]
    steps = next_steps(config.prefix, config.verify.get("default", ""), config.items.rstrip("/"), config.setup)
    up = os.path.relpath(os.path.realpath(root), os.path.realpath(start))
    if up != ".":  # run from a subfolder: the steps' paths, and the verify command, are the top's
        steps.insert(2, f"  cd {shlex.quote(up)}   # the repository's top, where {CONFIG_FILE} is: the steps below run there")
    return said + steps


def _gitignore_adding(path: Path) -> str | None:
    """The text of the .gitignore at `path` with IGNORE_LINE added, or None when it names STATE_DIR
    already and git ignores it. Read before init writes anything: a .gitignore that cannot take the line (a folder, a
    fifo, text that is not UTF-8) refuses the init in one line, the checkout as it was. So does a
    link, which git does not read as .gitignore: read through and written back as a file, a link a
    cloned repository holds (to `/proc/self/environ`, to a key) put what it led to into the
    .gitignore that init's next step commits (hostile review 48)."""
    if path.is_symlink():
        raise UsageError(f".gitignore is a link, which git does not read as one and init does not follow: make it "
                         f"a file holding the line {IGNORE_LINE}, then run init again")
    try:
        existing = read_regular(path)  # never waits on a fifo
    except FileNotFoundError:
        existing = b""
    # named, and not taken back after (`!.drover/`: a stranger's .gitignore passed for one that ignores it,
    # and the ledger and run logs were files to commit; hostile review 49)
    if STATE_DIR.encode() in {line.strip().strip(b"/") for line in existing.splitlines()} \
            and git.ignores(path.parent, IGNORE_LINE):
        return None
    try:
        text = existing.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = existing[:exc.start].count(b"\n") + 1
        raise UsageError(f".gitignore line {line}: not UTF-8 text, which init does not rewrite: add the line "
                         f"{IGNORE_LINE} to it yourself, then run init again") from None
    nl = line_ending(text)  # a CRLF file's new line in CRLF, as drover writes an item file's
    return text + ("" if not text or text.endswith("\n") else nl) + IGNORE_LINE + nl


def _agent_said(config: Config) -> list[str]:
    """`agent: codex`, and what to install where its program is not on PATH: the first run would
    otherwise be the first to say so."""
    from drover.agents.presets import binary_missing

    missing = binary_missing(config.agent)
    return [f"agent: {config.agent.preset}" + (f" ({missing})" if missing else "")]


def config_text_for(root: Path, detected: tuple[str, str] | None = None, setup: tuple[str, str] | None = None,
                    preset: str = "") -> str:
    """The commented drover.toml: its `base` the branch this repository works from, its verify
    command the one the repository's files name (`detected`, or detect_verify now), its `[run]
    setup` the install that command needs in each worktree (`setup`, or detect_setup now), else a
    hint at one when a shared environment would make worktrees import the main checkout's code."""
    command, found = detected or detect_verify(root)
    install, why = setup or detect_setup(root, command)
    notes = {("verify", "default"): f"found: {found}" if command else NO_VERIFY}
    shared = shared_environment(root)
    inputs = SETUP_INPUTS.get(_installs(install), ())
    if install:
        notes[("run", "setup")] = f"found: {why}"
    elif shared:
        hint = PYTEST_SETUP_HINT if command == "python -m pytest" else SETUP_HINT
        notes[("run", "setup")] = hint.format(shared=shared)
    if command in BUILDS_ITSELF and not _installs(install) and not shared:
        # no install to name; what the command needs is its build kept
        notes.setdefault(("run", "setup"), BUILDS_ITSELF[command][0])
        notes[("run", "keep")] = BUILDS_ITSELF[command][1]
    if inputs:
        notes[("run", "setup_inputs")] = INPUTS_NOTE
    for key, example in zip(("setup", "keep", "setup_inputs"), KIND_EXAMPLES.get(project_kind(root, command), ())):
        notes.setdefault(("run", key), _with_example(KEYS["run"][key].meaning, example))
    return default_config_text(base=git.detect_base(root), verify={"default": command}, notes=notes, setup=install,
                               setup_inputs=inputs, preset=preset)


# The examples the comments beside [run] setup, keep and setup_inputs give, by the kind of project
# init finds (project_kind): the keys' own meanings mix a Python project's (`uv sync`, `.venv`,
# `uv.lock`) with `node_modules`, and a Rust or Go project has none of them. "" leaves the example
# out: Go keeps its modules and build cache outside the worktree, so nothing there is worth keeping.
KIND_EXAMPLES = {
    "python": ('"uv sync"', '[".venv"]', '["uv.lock"]'),
    "npm": ('"npm ci"', '["node_modules"]', '["package-lock.json", "package.json"]'),
    "pnpm": ('"pnpm install --frozen-lockfile"', '["node_modules"]', '["pnpm-lock.yaml", "package.json"]'),
    "yarn": ('"yarn install --frozen-lockfile"', '["node_modules"]', '["yarn.lock", "package.json"]'),
    "cargo": ('"cargo fetch --locked"', '["target"]', '["Cargo.lock"]'),
    "go": ('"go mod download"', "", '["go.mod", "go.sum"]'),
    # a C or C++ project: what its Makefile builds beside the sources no path in keep can spare
    "make": ('"./configure"', '["build"]', '["configure"]'),
    "cmake": ('"cmake -S . -B build"', '["build"]', '["CMakeLists.txt"]'),
}
_EXAMPLE = re.compile(r', e\.g\. (?:"[^"]*"|\[[^\]]*\])')
PYTHON_FILES = ("pyproject.toml", "setup.py", "setup.cfg", "uv.lock", "poetry.lock", "requirements.txt")


def project_kind(root: Path, verify: str) -> str:
    """The kind of project whose examples drover.toml's comments give (KIND_EXAMPLES): the tool of
    `verify`, init's verify command, else the manifest the repository holds (a Python one first,
    as the keys' own examples are); "" when it holds none init knows."""
    tool = verify.split(" ", 1)[0]
    if tool in ("python", "uv", "poetry"):
        return "python"
    if tool in KIND_EXAMPLES and tool != "make":  # a Makefile's test target runs any language's tests
        return tool
    if any((root / name).is_file() for name in PYTHON_FILES):
        return "python"
    if (root / "package.json").is_file():
        tools = [command.split(" ", 1)[0] for lock, command in NODE_LOCKS if (root / lock).is_file()]
        return tools[0] if tools else "npm"
    for name, kind in (("Cargo.toml", "cargo"), ("go.mod", "go")):
        if (root / name).is_file():
            return kind
    if tool == "make":  # no manifest of another language: a C or C++ project's Makefile
        return "make"
    return "cmake" if (root / "CMakeLists.txt").is_file() else ""


def _with_example(meaning: str, example: str) -> str:
    """A key's meaning with its `e.g. ...` in place of the one it gives ("": none)."""
    return _EXAMPLE.sub(f", e.g. {example}" if example else "", meaning, count=1)


# A CMake project's tests (docs/worktrees.md, "A C library"): the command configures build/ itself;
# ctest's --no-tests=error fails a build that declares no tests rather than pass it (CMake 3.20+).
CMAKE_TEST = "cmake -S . -B build && cmake --build build && ctest --test-dir build --output-on-failure --no-tests=error"
# The comments beside [run] setup and keep, by the verify command init found, for a command that
# builds everything it needs itself: no [run] setup is needed, but a pooled worktree's clean removes
# the build folder unless keep names it, and every item and every check then builds afresh
# (docs/worktrees.md, "A Rust crate" and "A C library").
BUILDS_ITSELF = {
    "cargo test": ("found: Cargo.toml: none needed, cargo test builds the crate and its dependencies itself",
                   "with [run] pool, [\"target\"] keeps cargo's build: a pooled worktree builds the dependencies "
                   "once, then only what each item changed (drover help worktrees)"),
    CMAKE_TEST: ("found: CMakeLists.txt: none needed, the verify command configures build/ itself (its options, "
                 "e.g. -DBUILD_TESTING=ON, go into [verify] default)",
                 "with [run] pool, [\"build\"] keeps CMake's build folder: a pooled worktree configures and "
                 "compiles once, then only what each item changed (drover help worktrees)"),
}
# The comment beside an empty verify command: what an empty one means (docs/configuration.md).
NO_VERIFY = "nothing runs before merge until this is set: the command that runs the tests, e.g. \"make test\""
SETUP_HINT = ("{shared} found: worktrees otherwise import the main checkout's code; give each its own, "
              "e.g. \"python -m venv .venv && .venv/bin/pip install -e .\"")
# ... and when the verify command is a plain `python -m pytest`: the set-up's environment needs
# pytest, and the command must run in it; the hint alone gave neither, so the check ran PATH's
# python, outside the worktree's .venv (a new user, on wcwidth)
PYTEST_SETUP_HINT = ("{shared} found: worktrees otherwise import the main checkout's code; give each its own, "
                     "e.g. \"python -m venv .venv && .venv/bin/pip install -e . pytest\", with [verify] default "
                     "= \".venv/bin/python -m pytest\" (drover help worktrees)")


def detect_verify(root: Path) -> tuple[str, str]:
    """The command that runs this repository's tests, as its files name it, and where it was found;
    ("", "") when none does. The first that applies: a Makefile `test` target, pytest
    configuration, an npm `test` script, a Cargo.toml, a go.mod, a CMakeLists.txt; pytest and the `test` script run
    through the tool whose lockfile the repository commits (_through_lock)."""
    for name in ("GNUmakefile", "makefile", "Makefile"):
        if _MAKE_TEST.search(_text(root / name)):
            return "make test", f"a `test` target in {name}"
    found = _pytest_configuration(root)
    if found:
        command, found = _through_lock(root, found, "python -m pytest", PYTHON_LOCKS)
        holder = _pytest_holder(root) if command.startswith("uv ") else None
        if holder:  # `uv run` would not install pytest by itself
            kind, name = holder
            return f"uv run --locked --{kind} {shlex.quote(name)} pytest", f"{found}, pytest in its {kind} {name}"
        return command, found
    scripts = _package_json(root).get("scripts")
    test = scripts.get("test") if isinstance(scripts, dict) else None
    if isinstance(test, str) and test.strip() and "no test specified" not in test:  # npm init's stub fails
        return _through_lock(root, "a `test` script in package.json", "npm test", NODE_LOCKS)
    if (root / "Cargo.toml").is_file():
        return "cargo test", "Cargo.toml"
    if (root / "go.mod").is_file():
        return "go test ./...", "go.mod"
    if (root / "CMakeLists.txt").is_file():
        return CMAKE_TEST, "CMakeLists.txt, built in build/ and tested with ctest"
    return "", ""


def _pytest_configuration(root: Path) -> str:
    """Where this repository configures pytest ("pytest configuration in pyproject.toml"); "" nowhere."""
    if re.search(r"^\[tool\.pytest[.\]]", _text(root / "pyproject.toml"), re.M):
        return "pytest configuration in pyproject.toml"
    for name, table in (("setup.cfg", "tool:pytest"), ("pytest.ini", "pytest"), ("tox.ini", "pytest")):
        if re.search(rf"^\[{re.escape(table)}\]", _text(root / name), re.M):
            return f"pytest configuration in {name}"
    if _TOX_RUNS_PYTEST.search(_tox_commands(_text(root / "tox.ini"))):
        return "pytest in tox.ini's commands"
    return ""


# A tox command that starts pytest: `pytest`, `py.test`, `python -m pytest` (tox's `-` prefix, which
# ignores its exit status, allowed), not `pytest-cov` nor a word that only ends in pytest.
_TOX_RUNS_PYTEST = re.compile(r"^-?\s*(?:python[\d.]*\s+-m\s+)?(?:py\.test|pytest)(?![\w.-])", re.M)


def _tox_commands(text: str) -> str:
    """The lines of every `commands` key of a tox.ini, one command a line; "" when it reads as no INI
    (tox.ini with no pytest table still names how the project runs its tests: tkem/cachetools)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return ""
    return "\n".join(line.strip() for section in parser.sections()
                     for line in parser.get(section, "commands", fallback="").splitlines())


def _through_lock(root: Path, found: str, plain: str, locks: tuple[tuple[str, str], ...]) -> tuple[str, str]:
    """The command as the tool whose lockfile the repository commits runs it (`uv run --locked
    pytest` beside a uv.lock): the tests then run in the environment the lock pins, which that tool
    makes in each worktree, not in whatever `python` or `npm` is on PATH; `plain` with none."""
    for lock, command in locks:
        if (root / lock).is_file():
            return command, f"{found} and a {lock}"
    return plain, found


def _pytest_holder(root: Path) -> tuple[str, str] | None:
    """Where a uv project keeps pytest when `uv run` would not install it by itself: ("group", NAME)
    for a dependency group outside the groups it installs (`dev`, or `[tool.uv] default-groups`),
    ("extra", NAME) for an optional dependency (it installs none unasked); None when one of those
    groups holds it, or pyproject.toml names it nowhere that says."""
    try:
        data = tomllib.loads(_text(root / "pyproject.toml"))
    except (ValueError, RecursionError):  # tomllib.TOMLDecodeError, or nested past its depth
        return None
    uv = _table(_table(data, "tool"), "uv")
    defaults = uv.get("default-groups", ["dev"])
    groups = [name for name, entries in sorted(_table(data, "dependency-groups").items())
              if _PACKAGING_NAME.fullmatch(name) and _names_pytest(entries)]
    if groups and (defaults == "all" or isinstance(defaults, list) and set(groups) & set(defaults)):
        return None  # `uv run` installs it
    if groups:
        return "group", groups[0]
    extras = [name for name, entries in sorted(_table(_table(data, "project"), "optional-dependencies").items())
              if _PACKAGING_NAME.fullmatch(name) and _names_pytest(entries)]
    return ("extra", extras[0]) if extras else None


# A group's or an extra's name as packaging writes one (PEP 735, PEP 685): any other is no name uv
# takes, and would reach the command line and the comment init writes beside it as it is.
_PACKAGING_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _names_pytest(entries: Any) -> bool:
    """A list of requirements that holds pytest itself (`pytest>=8`, not `pytest-cov`)."""
    return isinstance(entries, list) and any(isinstance(entry, str) and re.match(r"\s*pytest(?![\w.-])", entry, re.I)
                                             for entry in entries)


# Lockfiles that name the tool a project runs its tests through, and the command each gives.
# uv's --locked: a branch that changes its dependencies without locking them fails the check in
# uv's words, where without it uv would rewrite uv.lock in the check's worktree and pass on an
# environment the branch does not commit.
PYTHON_LOCKS = (("uv.lock", "uv run --locked pytest"), ("poetry.lock", "poetry run pytest"))
NODE_LOCKS = (("pnpm-lock.yaml", "pnpm test"), ("yarn.lock", "yarn test"))


def detect_setup(root: Path, verify: str) -> tuple[str, str]:
    """The `[run] setup` each new worktree needs before `verify` (detect_verify's command) can run
    there, and why; ("", "") when it needs none. A worktree holds the tracked files alone: the
    submodules `.gitmodules` declares (`git worktree add` checks out none: docs/worktrees.md), a
    Node project's packages (node_modules, where its test script finds its tools) and a poetry
    project's environment are made in it by the tool's own install. uv needs none: `uv run` makes its own."""
    install, why = _install(root, verify)
    if not re.search(r'^\s*\[submodule\s+"', _text(root / ".gitmodules"), re.M):
        return install, why
    said = "the submodules .gitmodules declares: git worktree add checks out none in each new worktree"
    return (f"{SUBMODULES} && {install}", f"{said}; then {why}") if install else (SUBMODULES, said)


# The set-up's first step in a repository with submodules (detect_setup).
SUBMODULES = "git submodule update --init"


def _installs(setup: str) -> str:
    """The install part of a set-up detect_setup wrote: without its submodules' step."""
    return setup.removeprefix(SUBMODULES).removeprefix(" && ")


def _install(root: Path, verify: str) -> tuple[str, str]:
    """detect_setup's install of what `verify` needs, without the submodules."""
    if verify == "poetry run pytest":
        return "poetry install", "the environment poetry.lock pins: each new worktree makes its own"
    install = NODE_INSTALLS.get(verify)
    if install is None or not _declares_packages(root):
        return "", ""
    lock, locked, unlocked = install
    if (root / lock).is_file():
        return locked, f"package.json's packages, as {lock} pins them: each new worktree installs its own"
    return unlocked, "package.json's packages, no lockfile committed: each new worktree installs its own"


def _declares_packages(root: Path) -> bool:
    package = _package_json(root)
    return any(isinstance(package.get(key), dict) and package[key] for key in ("dependencies", "devDependencies"))


def _package_json(root: Path) -> dict[str, Any]:
    """package.json's object; {} when there is none or it is not one (not JSON, nested past the
    parser's depth, an array)."""
    try:
        package = json.loads(_text(root / "package.json") or "{}")
    except (ValueError, RecursionError):
        return {}
    return package if isinstance(package, dict) else {}


def package_json_problem(root: Path) -> str:
    """Why a package.json gave detect_verify nothing to read ("package.json line 3, column 5:
    Expecting ..."); "" when it parses as an object, or there is none (_package_json reads it as {})."""
    text = _text(root / "package.json")
    if not text:
        return ""
    try:
        package = json.loads(text)
    except json.JSONDecodeError as error:
        return f"package.json line {error.lineno}, column {error.colno}: {error.msg}"
    except (ValueError, RecursionError):
        return "package.json nests deeper than drover reads"
    return "" if isinstance(package, dict) else "package.json holds no object"


# The test script's tool -> its lockfile, the install that keeps to it, and the install without
# one (npm's writes no package-lock.json the project chose not to commit).
NODE_INSTALLS = {"npm test": ("package-lock.json", "npm ci", "npm install --no-package-lock"),
                 "pnpm test": ("pnpm-lock.yaml", "pnpm install --frozen-lockfile", "pnpm install"),
                 "yarn test": ("yarn.lock", "yarn install --frozen-lockfile", "yarn install")}


# The set-up init writes -> what it installs from: the lockfile it keeps to and the manifest beside
# it (docs/decisions.md). A pooled worktree runs set-up again when one of them changes; left empty,
# a branch that adds a package would meet the packages the worktree's first holder installed.
SETUP_INPUTS = {"npm ci": ("package-lock.json", "package.json"),
                "pnpm install --frozen-lockfile": ("pnpm-lock.yaml", "package.json"),
                "yarn install --frozen-lockfile": ("yarn.lock", "package.json"),
                "npm install --no-package-lock": ("package.json",), "pnpm install": ("package.json",),
                "yarn install": ("package.json",),
                "poetry install": ("poetry.lock", "pyproject.toml")}
INPUTS_NOTE = "found: what [run] setup installs from: a change runs it again in a pooled worktree"


# A rule for the target `test` (not a variable assignment `test := ...`).
_MAKE_TEST = re.compile(r"^test[ \t]*::?(?!=)", re.M)


def shared_environment(root: Path) -> str:
    """What makes worktrees share one Python environment ("" when nothing does): a virtual
    environment folder in the checkout, or an editable install the Makefile or README does."""
    for name in (".venv", "venv"):
        if (root / name / "pyvenv.cfg").is_file() or (root / name / "bin").is_dir():
            return f"{name}/"
    for name in ("Makefile", "makefile", "GNUmakefile", "README.md", "CONTRIBUTING.md"):
        if re.search(r"pip3? install (?:[^\n]*\s)?(?:-e|--editable)\b", _text(root / name)):
            return f"an editable install (pip install -e, in {name})"
    return ""


def _text(path: Path) -> str:
    """A small text file's contents; "" when it is absent, unreadable, not text, or no regular file
    (a fifo there is no file to wait on)."""
    try:
        return read_regular_text(path)
    except (OSError, UnicodeDecodeError):
        return ""


def _verify_said(root: Path, detected: tuple[str, str], setup: tuple[str, str]) -> list[str]:
    """What init says of the verify command it wrote (`detected`: detect_verify's answer), of the
    set-up it wrote (`setup`: detect_setup's) and of a shared environment."""
    command, found = detected
    said = [f"verify command: {command} ({found})" if command else
            "verify command: none found; nothing runs before merge until [verify] default is set"]
    unread = package_json_problem(root) if command in ("", "cargo test", "go test ./...", CMAKE_TEST) else ""
    if unread:  # "none found" alone would hide the test script a JavaScript project sees there
        said.append(f"warning: {unread}: its test script and packages were not read; mend it, or set "
                    "[verify] default and [run] setup yourself")
    if setup[0]:
        said.append(f"[run] setup: {setup[0]} ({setup[1]})")
    if SETUP_INPUTS.get(_installs(setup[0])):
        said.append(f"[run] setup_inputs: {', '.join(SETUP_INPUTS[_installs(setup[0])])} (a change runs [run] setup again "
                    "in a pooled worktree)")
    problem = cannot_start(command, root) if command else ""
    if problem:
        said.append(f"warning: the verify command cannot run here: {problem}. drover's check runs it before each "
                    "review and merge and fails while it cannot: install what it needs, or change [verify] default")
    wrong = tests_this_checkout(command, root) if command and not problem else ""
    if wrong:
        said.append(f"warning: the verify command tests the wrong code: {wrong}")
    shared = shared_environment(root)
    if shared and not _installs(setup[0]) and not wrong:  # the warning above says it of this very python
        said.append(f"hint: {shared} found: an agent's worktree would import the main checkout's code through it; "
                    "set [run] setup to give each worktree its own environment (drover help configuration)")
    return said


def next_steps(prefix: str, verify: str = "", items: str = "items", setup: str = "") -> list[str]:
    """What a person does after init, in order: the verify command first, after the set-up init
    wrote (`setup`), which a fresh clone needs before its tests can run (`npm ci && npm test`)."""
    first = (f"  {setup} && {verify}   # [run] setup, then the verify command: see that it passes here, as "
             "drover's check will need" if setup else
             f"  {verify}   # the verify command: see that it passes here, as drover's check will need")
    return [
        "",
        "next steps:",
        *([first] if verify else []),
        f"  git add {CONFIG_FILE} .gitignore && git commit -m 'Set up drover'",
        '  drover new "What the first item should do"',
        f"  drover draft {prefix}-1          # or write its requirements yourself",
        f"  git add {items}/ && git commit -m 'The first items'   # the item files are yours to commit "
        "(drover commits its own edits with [project] commit_items = true)",
        f"  drover run --dry-run {prefix}-1  # see the prompt and the launch, change nothing",
        "  drover help configuration   # every key of drover.toml explained",
    ]
