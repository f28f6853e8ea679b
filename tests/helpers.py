"""What tests share: run drover and git, canned answers for the fake gh, hypothesis strategies.

Tests import from here (or take a fixture from conftest.py), never from another test module.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path

from hypothesis import strategies as st

TESTS = Path(__file__).resolve().parent
AGENT = TESTS / "agents" / "loop_agent.py"
# the loop agent's reviewer approves at its first review: for a drive whose send-back round is not
# what the test is about (half the agent runs of its default, which asks for changes once)
APPROVING = {"AGENT_MODE": "approving"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def ledger_rows(root: Path, table: str, order: str = "started, rowid") -> list[dict]:
    """One table of the project's ledger as dicts by column, in `order`."""
    conn = sqlite3.connect(root / ".drover" / "ledger.db")
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY {order}")]
    finally:
        conn.close()


def ledger_tables(path: Path) -> dict[str, list[tuple]]:
    """Every table of a SQLite file, its rows sorted: for before/after comparisons."""
    conn = sqlite3.connect(path)
    try:
        names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {name: sorted(conn.execute(f"SELECT * FROM [{name}]").fetchall(), key=repr) for name in names}
    finally:
        conn.close()


# --- drover's command line, in this process or as a process of its own -------------------------

BIN = Path(sys.executable).parent


def drover(root: Path, *args: str, stdin: str | None = None, env: dict | None = None, check: bool = False,
           process: bool = False) -> subprocess.CompletedProcess:
    """`drover ARGS` in `root`, this interpreter's bin first on PATH (where the agents find `drover`).

    In this process (click's runner on the real group) unless `process`: a test that needs the
    process itself (signals, kills, locks held by another process, the entry point's own exit
    codes, a terminal) asks for one."""
    extra = {"PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    done = run(root, *args, stdin=stdin, env=extra, process=process)
    if check and done.returncode != 0:
        raise AssertionError(f"drover {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done


def run(root: Path, *args: str, stdin: str | None = None, env: dict | None = None,
        process: bool = False) -> subprocess.CompletedProcess:
    """`drover ARGS` in `root` with the test's environment plus `env` (PATH as the test has it; a
    None value unsets a variable)."""
    if process:
        full = {key: value for key, value in {**os.environ, **(env or {})}.items() if value is not None}
        return subprocess.run([str(BIN / "drover"), *args], cwd=root, input=stdin, text=True,
                              capture_output=True, env=full)
    return in_process(root, args, stdin, env or {})


def run_process(root: Path, *args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """`run` as a process of its own, the `drover` executable's entry point first."""
    return run(root, *args, stdin=stdin, env=env, process=True)


def in_process(root: Path, args: tuple[str, ...], stdin: str | None, env: dict) -> subprocess.CompletedProcess:
    """One command line through click's runner, in `root`; what it prints comes back as a process's
    would. An exception that is no exit propagates: a traceback must fail the test, not vanish."""
    from click.testing import CliRunner

    from drover.cli.main import cli

    if "DROVER_FAILPOINT" in env or "DROVER_FAILPOINT" in os.environ:
        raise AssertionError("a failpoint signals the process it is in: run this drover with process=True")
    here = os.getcwd()
    os.chdir(root)
    try:
        result = CliRunner().invoke(cli, list(args), input=stdin, env=env, prog_name="drover",
                                    catch_exceptions=False)
    finally:
        os.chdir(here)
        forget_caches()
        stop_adopting()
        let_go_of_launcher_locks()
    return subprocess.CompletedProcess(["drover", *args], result.exit_code, result.stdout, result.stderr)


def stop_adopting() -> None:
    """A launch makes drover a subreaper (its agents' orphans come to it, not to init) for the
    rest of its process: here, for the rest of the command, so later tests' orphans go to init."""
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(36, 0, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER, off


def let_go_of_launcher_locks() -> None:
    """A drover that launched holds its launcher lock (.drover/launchers/) until its process ends,
    and every process below it is refused as the operator (acting.traced_run): let go of it here,
    as that end would, or each later `drover` process the test starts would descend from it."""
    from drover.agents import locks, procs

    procs.unmark_launcher()  # and the name it gave its process, which an end would take away too
    for fd in locks._holding.values():
        os.close(fd)
    locks._holding.clear()
    locks._launches_for.clear()  # and the project it would take one for: a later test's is another


# Module-level memos of drover's whose answers depend on files a test changes between two
# commands (git's global safe.directory list): emptied after each command run in this process.
STALE_MEMOS = ("_SAFE",)
# drover's caches (functools' and STALE_MEMOS), found by looking over its modules again only
# when a module was imported since the last look
_caches: list = []
_modules_seen = 0


def forget_caches() -> None:
    """Empty drover's in-memory caches, as the end of a process would: the next command reads
    the files, the environment and the configuration afresh."""
    global _modules_seen
    if len(sys.modules) != _modules_seen:
        _modules_seen = len(sys.modules)
        _caches[:] = [value for name, module in list(sys.modules.items())
                      if name == "drover" or name.startswith("drover.")
                      for key, value in vars(module).items()
                      if (key in STALE_MEMOS and isinstance(value, dict))
                      or (callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", None) == name)]
    for cache in _caches:
        cache.clear() if isinstance(cache, dict) else cache.cache_clear()


# --- set-ups made once per test process, then copied (made_once) ---------------------------------
# conftest's `repo` fixture records the repository it hands out (its files' state then); `configure`
# on one still in that state copies what it made the first time for the same `extra` and settings:
# init's migrations and a commit cost tens of milliseconds, a copy a few file writes. What a copy
# gives is known too, so set-ups chain: `new_item` on a repository still as `configure` (or a
# test file's project fixture, or an earlier `new_item`) left it copies what the same steps made.

FRESH: dict[Path, tuple] = {}  # a repository -> (its files' state, the set-ups that made it) when last known
# (set-ups, settings) -> a copy of what they made, what make returned, the folder they were made in and
# the files that name it (its worktrees' links, made_once)
CONFIGURED: dict[tuple, tuple[Path, object, bytes, list[Path]]] = {}
TEMPLATES: list[Path] = []  # where conftest keeps the copies (one folder, set per session)
MADE: set[tuple] = set()  # the set-ups made once without a copy kept (made_once's `rare`)


def files_state(root: Path) -> tuple:
    """Every path under `root` with its size and modification time: equal means untouched. A walk of
    os.scandir's entries, which carry what lstat says (a quarter of the CPU of Path.rglob and a
    Path per file: this runs two or three times a set-up, thousands of times a suite)."""
    found = []

    def walk(folder: str, prefix: str) -> None:
        with os.scandir(folder) as entries:
            for entry in entries:
                status = entry.stat(follow_symlinks=False)
                found.append((prefix + entry.name, status.st_size, status.st_mtime_ns))
                if entry.is_dir(follow_symlinks=False):  # a link to a folder is a path, not gone into
                    walk(entry.path, prefix + entry.name + os.sep)

    walk(str(root), "")
    return tuple(sorted(found))


def _settings() -> tuple:
    """What drover init and git read besides the repository: drover's and git's variables (less
    the per-test paths) and the global git config's text."""
    variables = tuple(sorted((key, value) for key, value in os.environ.items() if key.startswith(("DROVER_", "GIT_"))
                             and key not in ("DROVER_TEST_MARK", "GIT_CONFIG_GLOBAL")))
    global_config = Path(os.environ.get("GIT_CONFIG_GLOBAL", os.devnull))
    return variables, global_config.read_text() if global_config.is_file() else ""


def configure(root: Path, extra: str = "") -> None:
    """`drover init` set up for the scripted loop agent (implementer, reviewer), `extra` appended
    to drover.toml, committed."""
    made_once(root, ("configure", extra), lambda: _configure(root, extra))


def initialized(root: Path) -> None:
    """`drover init` and nothing more, as a test of the other commands starts from."""
    made_once(root, ("init",), lambda: drover(root, "init", check=True))


def made_once(root: Path, what: tuple, make: Callable[[], object], rare: bool = False):
    """`make()` in `root` and what it returns, or, on a repository still as the `repo` fixture or an
    earlier `made_once` left it, a copy of what the same `make` did after the same steps earlier
    this session under the same settings (and what it returned then). `what` names the set-up: a
    test file's project fixture (`configure`, items, commits) passes its own name, so its tests
    copy one project made once per test process instead of running git and drover again for each.
    `rare`: a set-up most tests make only once (an item of one title after given steps) keeps its copy
    at its second make, not its first: the folder holds no copies that no test uses."""
    known = FRESH.get(root)
    fresh = known is not None and known[0] == files_state(root)
    key = (known[1] if known else None, *what, _settings())
    if fresh and key in CONFIGURED:
        copy, value, made_in, links = CONFIGURED[key]
        for path in root.iterdir():  # the same files as the copy's start: none is left over
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        shutil.copytree(copy, root, symlinks=True, dirs_exist_ok=True)
        for name in links:  # the worktrees' links, as `git worktree repair` would write them
            link = root / name
            link.write_bytes(link.read_bytes().replace(made_in, str(root).encode()))
        FRESH[root] = (files_state(root), key)
        return deepcopy(value)  # each test its own: one that changes it changes no later test's
    value = make()
    FRESH.pop(root, None)  # what a nested made_once knew is this one's to say
    if not fresh or not TEMPLATES:
        return value
    if rare and key not in MADE:
        MADE.add(key)
        FRESH[root] = (files_state(root), key)
        return value
    # a project that names its own folder is no copy for another folder, unless only its git
    # worktrees' links name it (a drive's set-up: each worktree's `.git` file and its gitdir in the
    # repository's .git/worktrees/): those are rewritten for the folder each copy goes to
    naming = [path.relative_to(root) for path in root.rglob("*")
              if path.is_file() and str(root).encode() in path.read_bytes()]
    if not all(_worktree_link(root, name) for name in naming):
        return value
    copy = TEMPLATES[0] / f"configured-{len(CONFIGURED)}"
    shutil.copytree(root, copy, symlinks=True)
    CONFIGURED[key] = (copy, deepcopy(value), str(root).encode(), naming)
    FRESH[root] = (files_state(root), key)
    return value


def _worktree_link(root: Path, name: Path) -> bool:
    """`name` (under `root`) is one of git's links between the repository and a worktree of it: a
    worktree's `.git` file, or the `gitdir` file of .git/worktrees/<name>/, and holds nothing else."""
    text = (root / name).read_text(errors="replace")
    if name.name == ".git" and name.parent != Path("."):
        return text.startswith("gitdir: ") and text.count("\n") == 1
    return name.parts[:2] == (".git", "worktrees") and name.name == "gitdir" and len(name.parts) == 4 \
        and text.count("\n") == 1


def _configure(root: Path, extra: str) -> None:
    drover(root, "init", check=True)
    config = (root / "drover.toml").read_text()
    config = config.replace('preset = "claude" ', 'preset = "script" ', 1)
    config = config.replace('command = ""  ', f'command = "{sys.executable} {AGENT}"', 1)
    config = config.replace('name = ""     ', 'name = "implementer"', 1)
    # no verify command (init finds none here): the scripted projects have nothing to test, so
    # drover checks nothing before a merge (tests/test_verify.py gives its projects one)
    config = re.sub(r'^default = ".*?"', 'default = ""', config, count=1, flags=re.M)
    config += '\n[agent.review]\nname = "reviewer"\n' + extra
    (root / "drover.toml").write_text(config)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "drover init")


def new_item(root: Path, title: str, *args: str) -> str:
    """`drover new`, its requirements written (a placeholder item is not ready), committed; on a
    repository as a set-up left it, a copy of what the same `new_item` did there before (made_once)."""
    return made_once(root, ("new_item", title, args), lambda: _new_item(root, title, *args), rare=True)


def implemented(root: Path, title: str) -> str:
    """`new_item` of `title`, then one implementing run of it (`drover run`: the loop agent commits a
    pass on the item's branch, in its worktree); its id. On a set-up as made before in this test
    process (made_once) under the same AGENT_ variables, a copy of what the same run left."""
    item = new_item(root, title)
    ran(root, item)
    return item


def ran(root: Path, item: str) -> None:
    """`drover run ITEM`, which must succeed: one implementing run of an item the set-up made. On a
    set-up as made before in this test process (made_once) under the same AGENT_ variables, a copy
    of what the same run left."""
    agent = tuple(sorted((key, value) for key, value in os.environ.items() if key.startswith("AGENT_")))
    made_once(root, ("implemented", item, agent), lambda: drover(root, "run", item, check=True))


def _new_item(root: Path, title: str, *args: str) -> str:
    out = drover(root, "new", title, *args, check=True).stdout
    item_id, path = out.split()[:2]
    write_requirements(root, item_id, path=root / path)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"item {item_id}")
    return item_id


def write_requirements(root: Path, item_id: str, text: str = "1. Do what the title says.", *,
                       path: Path | None = None) -> None:
    """Replace `drover new`'s placeholder requirements in the item file with `text`."""
    from drover.items.file import REQUIREMENTS_PLACEHOLDER

    path = path or root / "items" / f"{item_id}.md"
    path.write_text(path.read_text().replace(REQUIREMENTS_PLACEHOLDER.format(id=item_id), text))


# --- the fake gh (the fixture that puts it on PATH is `gh`, in conftest.py) ------------------

FAKE_GH = TESTS / "fake_gh" / "gh"


class FakeGh:
    """Canned answers for the fake gh, and the calls it recorded."""

    def __init__(self, data: Path, log: Path):
        self.data = data
        self.log = log

    def answer(self, key: str, value, *, stderr: str = "") -> None:
        if stderr:
            (self.data / f"{key}.err").write_text(stderr)
        if isinstance(value, str):
            (self.data / f"{key}.txt").write_text(value)
        else:
            (self.data / f"{key}.json").write_text(json.dumps(value))

    def fail(self, key: str, stderr: str) -> None:
        (self.data / f"{key}.fail").write_text(stderr)

    def slow(self, key: str, seconds: float) -> None:
        (self.data / f"{key}.sleep").write_text(str(seconds))

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def gh_issue(number, title="", body="", state="OPEN", labels=()):
    """One issue as `gh issue list/view --json` prints it."""
    return {
        "number": number,
        "title": title or f"issue {number}",
        "body": body,
        "state": state,
        "url": f"https://github.com/acme/widgets/issues/{number}",
        "labels": [{"id": f"L{i}", "name": name, "description": "", "color": "ededed"} for i, name in enumerate(labels)],
    }


# --- item text, for property tests --------------------------------------------------------

line = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"), max_size=30)
para = st.lists(line, max_size=4).map(lambda lines: "".join(f"{line}\n" for line in lines))
other_section = st.sampled_from(["## Notes", "## Guarantees", "# Top", "### Deep", "## Changes requested later"]).flatmap(
    lambda heading: para.map(lambda text: f"{heading}\n{text}"))
fenced = para.map(lambda text: f"```\n## fenced heading\n{text}```\n")
chunk = st.one_of(para, other_section, fenced)
findings_text = st.lists(st.one_of(line, st.sampled_from(["# H1", "## H2", "### H3", "```", "~~~", "## Guarantees", ""])),
                          min_size=1, max_size=8).map("\n".join).filter(lambda s: s.strip())


# --- the intent journal and hostile input (issue 11): drover run plainly, agreement checks ---

from drover.items.file import demote_headings, parse_item, read_item  # noqa: E402 - the agreement checks
from drover.ledger.db import Ledger  # noqa: E402

FINDINGS = "## The parser accepts unknown keys\nReject them, naming the key.\n"


def leftovers(root: Path) -> list[str]:
    """Temporary files anywhere drover stages or writes items."""
    found = [p.name for p in (root / "items").glob(".*")] if (root / "items").is_dir() else []
    tmp = root / ".drover" / "tmp"
    found += [p.name for p in tmp.iterdir()] if tmp.is_dir() else []
    parked = root / ".drover" / "parked"
    found += [p.name for p in parked.glob(".*")] if parked.is_dir() else []
    return found


def assert_agrees(root: Path) -> dict[str, int]:
    """Open the ledger as any command does (finishing what a kill left), then compare every item
    file with the ledger; returns counts of what was seen. Fails on any disagreement."""
    with Ledger(root / ".drover" / "ledger.db") as ledger:
        assert ledger.pending_intents() == []
        allocated = {row["id"] for row in ledger._rows("SELECT id FROM items WHERE number IS NOT NULL")}
        rounds = {}
        for row in ledger._rows("SELECT * FROM rounds ORDER BY item, number"):
            rounds.setdefault(row["item"], []).append(row)
    assert leftovers(root) == []
    files = {path.stem: path for path in (root / "items").glob("*.md")}
    assert set(files) == allocated, "every allocated id has its file and every file its row"
    seen = {"outstanding": 0, "cleared": 0}
    for item_id, path in files.items():
        item = read_item(path, "D")
        mine = rounds.get(item_id, [])
        uncleared = [row for row in mine if row["cleared_at"] is None]
        if item.outstanding:
            seen["outstanding"] += 1
            assert uncleared, f"{item_id}: findings in the file, no uncleared round"
            written = demote_headings(item.changes.strip("\n") + "\n")
            assert hashlib.sha256(written.encode()).hexdigest() == mine[-1]["digest"], item_id
        elif item.cleared:
            seen["cleared"] += 1
            assert mine and not uncleared, f"{item_id}: a cleared block, an uncleared round"
            assert f"round {mine[-1]['number']} was discharged" in item.changes
        else:
            assert not uncleared, f"{item_id}: no findings in the file, an uncleared round"
    return seen


def seed_four_items(root: Path) -> None:
    """`drover init`, four items D-1..D-4 (D-1 closes issue 7), committed: the stress tests' start."""
    assert run(root, "init").returncode == 0
    for n in range(4):
        assert run(root, "new", f"seed {n}").returncode == 0
    item = root / "items" / "D-1.md"
    item.write_text(item.read_text().replace("deps: []", "deps: []\ncloses: [7]"))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "items")


def one_line(done, code: int = 2) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drover: "), done.stderr
    return lines[0]


def invoke(*args: str, env: dict | None = None):
    """The drover command line in-process (click's runner); exceptions propagate to the test."""
    from click.testing import CliRunner

    from drover.cli.main import cli

    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


# Frontmatter that must make an item unreadable (test_hostile.py), with the words that say why;
# test_fast_paths.py checks the flat fast path leaves each to the same refusal.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + n)}: &{chr(98 + n)} [" + ", ".join([f"*{chr(97 + n)}"] * 10) + "]\n" for n in range(8)
)
HOSTILE_FRONTMATTER = [
    ("x: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 100 levels deep"),
    ("x:\n" + "".join("  " * n + "- \n" for n in range(1, 1200)), "nest"),  # libyaml: "maximum nesting depth"
    (BOMB, "aliases expand to more than 100000 values"),
    # block nesting libyaml reads (to 1,000 levels) and drover's JSON and checks recursed through:
    # a traceback of every list, show, check and report from 500 levels on (hostile review 49); one
    # that nests only through an alias of a nested anchor
    ("title: t\nx:\n" + "".join("  " * n + "- \n" for n in range(1, 600)), "YAML: nested"),
    ("title: t\na: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n",
     "YAML: nested more than 100 levels deep"),
    ("title: [a, b]\n", "title: must be text, not a list"),
    ("title: t\ncloses: seven\n", "closes: 'seven' is not an issue number"),
    # str.isdigit takes these; an issue number is ASCII digits above 0 (the one "²" fell out of
    # closes without a word, "٣" read as issue 3, "0" reached the tracker)
    ("title: t\ncloses: ['²']\n", "closes: '²' is not an issue number"),
    ("title: t\ncloses: ['#٣']\n", "closes: '#٣' is not an issue number"),
    ("title: t\ncloses: ['0']\n", "closes: '0' is not an issue number"),
    ("title: t\ncloses: ['##12']\n", "closes: '##12' is not an issue number"),
    ("title: t\norigin: '٣'\n", "origin: '٣' is not an issue number"),
    # past the highest issue number (past SQLite's integers: dispose was a traceback), and past the
    # 4300 digits int() reads, quoted or not, and a date no month has: each a traceback of every list
    ("title: t\ncloses: [12345678901234567890123]\n", "closes: 12345678901234567890123 is not an issue number"),
    ("title: t\ncloses: ['#" + "9" * 5000 + "']\n", "99' is not an issue number"),
    ("title: t\ncloses: [" + "9" * 5000 + "]\n", "no value can be made of it (Exceeds the limit (4300 digits)"),
    ("title: t\ndue: 2024-02-30\n", "no value can be made of it (day is out of range for month)"),
    # an integer int() reads in another base, with no decimal limit, or that YAML makes of base-60
    # parts: past 4300 digits, a traceback where JSON or show wrote it (hostile review 48)
    ("title: t\nx: 0x" + "f" * 4000 + "\n", "no value can be made of it (Exceeds the limit (4300 digits)"),
    ("title: t\nx: 0b" + "1" * 15000 + "\n", "no value can be made of it (Exceeds the limit (4300 digits)"),
    ("title: t\nx: 1" + ":1" * 3000 + "\n", "no value can be made of it (Exceeds the limit (4300 digits)"),
    # a base-60 float YAML adds up in an integer it turns into a float each part: past 60 ** 173 no
    # float holds it (OverflowError), a traceback of every list, show, check and drive (hostile review 49)
    ("title: t\nx: 1" + ":1" * 200 + ".5\n", "no value can be made of it (int too large to convert to float)"),
    ("title: t\nx: [!!float 1" + ":0" * 200 + "]\n", "no value can be made of it (int too large to convert to float)"),
    # a tag whose constructor reads the text without a check (KeyError, AttributeError), and a key
    # JSON has none for (the cache and show --json write the frontmatter as JSON): each a traceback
    # of every list, show, check and drive (hostile review 47)
    ("title: t\nok: !!bool maybe\n", "no value can be made of it (not a value of its tag)"),
    ("title: t\nat: !!timestamp nope\n", "no value can be made of it (not a value of its tag)"),
    ("title: t\n2024-01-01: x\n", "a key must be text, a number, true, false or null, not date"),
    ("title: t\nx: {? !!binary aGk= : y}\n", "a key must be text, a number, true, false or null, not bytes"),
    ("title: t\nshelved: maybe\n", "shelved: 'maybe' is not yes or no"),
    ("title: t\ndeps: D-1\n", "deps: must be a list of ids (deps: [D-1])"),
    ("title: t\ntitle: u\n", "duplicate key 'title'"),
]


def wait_for(path: Path, timeout: float = 30) -> str:
    """The text of `path` once it exists and holds something; fails after `timeout` seconds."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


# --- the ray executor's two halves in this process, without Ray -----------------------------

class InlineExecutor:
    """The ray executor's path in this process: payload -> worker (a scratch clone) -> bring home.

    `between` runs after the worker is done and before its result comes home: where a test
    does what an operator or an agent might do meanwhile; `tamper` is handed the worker's result
    to change before it comes home: what a hostile worker might send.
    """

    name = "inline"

    def __init__(self, between=None, tamper=None):
        self.between = between
        self.tamper = tamper

    def submit(self, project, ledger, launch, *, echo, on_start, progress=None):
        return _InlineHandle(self, project, ledger, launch)

    def start(self) -> None:
        pass

    def where(self) -> str:
        return "this process"

    def close(self) -> None:
        pass


class _InlineHandle:
    def __init__(self, executor, project, ledger, launch):
        self.executor = executor
        self.args = (project, ledger, launch)

    def cancel(self) -> None:
        pass

    def collect(self, cancel=None):
        from drover.executors.ray import base_bundle, bring_home, make_payload
        from drover.executors.worker import work

        project, ledger, launch = self.args
        base = base_bundle(project.root, project.config.base)
        base_sha = git(project.root, "rev-parse", f"refs/heads/{project.config.base}").strip()
        result = work(make_payload(project, ledger, launch, base_sha), base)
        result["node"] = "inline"
        if self.executor.between is not None:
            self.executor.between()
        if self.executor.tamper is not None:
            self.executor.tamper(result)
        return bring_home(project, ledger, launch, result)


# --- [project] commit_items: every write one commit (test_commit_items.py, tests/stress) -------------

DROVER_COMMIT = re.compile(
    r"drover: (?:new item (?P<new>[A-Z]+-\d+): .+"
    r"|changes requested on (?P<requested>[A-Z]+-\d+) \(round (?P<round>\d+)\)"
    r"|changes on (?P<cleared>[A-Z]+-\d+) cleared \(round (?P<cleared_round>\d+)\)(?: by a \w+ audit)?)"
)


def assert_each_write_committed(root: Path, base: str, seeded: int = 0) -> int:
    """With commit_items: since commit `base`, each item-file write the ledger records (an item
    numbered above `seeded`, a round, a clear) is one commit of that file alone, whose message
    names the write and whose text is the one that write made; nothing of drover's is left
    uncommitted, staged or owed. Opens the ledger first, as any command does (finishing what a
    kill left). Returns the number of commits."""
    from collections import Counter

    with Ledger(root / ".drover" / "ledger.db") as ledger:
        assert ledger.pending_intents() == [] and ledger.owed_commits() == []
        made = ledger._rows("SELECT id FROM items WHERE number > ?", (seeded,))
        rounds = ledger._rows("SELECT * FROM rounds ORDER BY item, number")
    expected: Counter = Counter(("new", row["id"]) for row in made)
    expected.update(("requested", row["item"], row["number"]) for row in rounds)
    clears: dict[tuple[str, str], int] = {}  # one clear marks every uncleared round at one time
    for row in rounds:
        if row["cleared_at"]:
            key = (row["item"], row["cleared_at"])
            clears[key] = max(clears.get(key, 0), row["number"])
    expected.update(("cleared", item, number) for (item, _), number in clears.items())
    digests = {(row["item"], row["number"]): row["digest"] for row in rounds}
    commits = git(root, "rev-list", "--reverse", f"{base}..HEAD").split()
    found: Counter = Counter()
    for sha in commits:
        message = git(root, "log", "-1", "--format=%B", sha).strip()
        words = DROVER_COMMIT.fullmatch(message)
        assert words, f"{sha}: not a message drover writes: {message!r}"
        item_id = words["new"] or words["requested"] or words["cleared"]
        path = f"items/{item_id}.md"
        assert git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", sha).split() == [path], message
        item = parse_item(git(root, "show", f"{sha}:{path}"), root / path, item_id.split("-")[0])
        if words["new"]:
            found["new", item_id] += 1
        elif words["requested"]:
            number = int(words["round"])
            written = demote_headings(item.changes.strip("\n") + "\n")
            assert hashlib.sha256(written.encode()).hexdigest() == digests.get((item_id, number)), message
            found["requested", item_id, number] += 1
        else:
            number = int(words["cleared_round"])
            assert item.cleared and f"round {number} was discharged" in item.changes, message
            found["cleared", item_id, number] += 1
    assert found == expected, (found - expected, expected - found)
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in status if "items/" in line] == []
    return len(commits)


# --- a ledger for the report (tests/test_report.py, tests/browser/) -----------------------------

REPORT_HOSTILE = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
REPORT_CLASSES = ("rate_limited", "auth", "timeout", "stalled", "crashed")


def seed_report_ledger(root: Path, count: int = 200) -> dict:
    """`drover init`, `count` item files and their ledger rows written through the ledger's API in one
    transaction: merged, over budget, parked, failed (classified and not), open and untouched
    items, agents alpha and beta on two models, a reviewer, hostile titles and reasons. Returns
    what the report must find."""
    from datetime import datetime, timedelta, timezone

    from drover.items.file import new_item_text
    from drover.ledger.db import Ledger
    from drover.ledger.rows import Check, NewRun
    from drover.vocabulary import OVER_BUDGET

    configure(root)
    start = datetime(2026, 12, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> str:
        return (start + timedelta(seconds=seconds)).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    want: dict = {"merged": [], "over_budget": [], "parked": [], "failed": [], "edges": [], "runs": 0,
                  "input": 0, "output": 0, "failures": {}, "first": {}, "ids": [], "agent_failures": {}}
    titles = {3: REPORT_HOSTILE[0], 4: REPORT_HOSTILE[1]}
    for number in range(1, count + 1):
        item_id = f"D-{number}"
        deps = [f"D-{number // 2}"] if number % 3 == 0 and number > 2 else []
        if number % 5 == 0:
            deps.append(f"D-{number - 1}")
        want["edges"] += [(dep, item_id) for dep in deps]
        want["ids"].append(item_id)
        (root / "items" / f"{item_id}.md").write_text(
            new_item_text(item_id, titles.get(number, f"Item number {number}"), "feature", deps), encoding="utf-8")
    with Ledger(root / ".drover" / "ledger.db") as ledger, ledger.write():
        table = ledger.db.table
        for number in range(1, count + 1):
            item_id, fate, t = f"D-{number}", number % 10, number * 600.0
            if fate == 9:
                continue  # untouched: a file, no ledger row
            agent, model = ("alpha", "m-large") if number % 2 else ("beta", "m-small")

            def run(slot: str, who: str, exit_status: int, failure: str | None, tokens: tuple[int, int] | None,
                    began: float, kind: str | None = model) -> None:
                run_id = f"r{number}-{slot}-{int(began)}"
                ledger.start_run(NewRun(run_id, item_id, slot, who, started=at(began)))
                table("runs").update(run_id, {"finished": at(began + 120), "exit_status": exit_status,
                                              "outcome": "exited", "model": kind,
                                              "input_tokens": tokens and tokens[0], "output_tokens": tokens and tokens[1],
                                              "cost_usd": 0.001 * number if tokens else None, "failure": failure,
                                              "reason": f"exit {exit_status} <b>bold</b>" if exit_status else None})
                want["runs"] += 1
                if tokens:
                    want["input"] += tokens[0]
                    want["output"] += tokens[1]
                if exit_status:
                    name = failure or "unclassified"
                    want["failures"][name] = want["failures"].get(name, 0) + 1
                    mine = want["agent_failures"].setdefault(who, {})
                    mine[name] = mine.get(name, 0) + 1

            if fate == 6:
                run("implement", agent, 1, REPORT_CLASSES[number // 10 % len(REPORT_CLASSES)], (1000 + number, 10), t)
                want["failed"].append(item_id)
                continue
            if fate == 7:
                run("implement", agent, 2, None, None, t)
                want["failed"].append(item_id)
                continue
            run("implement", agent, 0, None, (1000 + number, 100 + number), t)
            if fate == 8:
                continue
            run("review", "reviewer", 0, None, None, t + 200, kind=None)
            if fate == 4:
                ledger.park(item_id, f"{OVER_BUDGET}item used 250,000 tokens of 200,000 <script>x</script>")
                want["over_budget"].append(item_id)
                continue
            if fate == 5:
                ledger.park(item_id, 'the operator decides "><img src=x onerror=alert(2)>')
                want["parked"].append(item_id)
                continue
            first = number % 4 == 0
            if not first:
                table("rounds").insert({"item": item_id, "number": 1, "digest": "d" * 64, "headline": "Fix it",
                                        "by": "reviewer", "at": at(t + 300)})
                run("implement", agent, 0, None, (500, 50), t + 400)
                run("review", "reviewer", 0, None, None, t + 500, kind=None)
            if fate == 3:
                ledger.add_check(Check(f"c{number}-bad", item_id, "h" * 40, "b" * 40, "make test", 1, "exited",
                                       at(t + 250), 1.0, "FAILED", "", at(t + 251)))
                # a check Ctrl-C ended: neither passed nor failed, the report counts it in neither
                ledger.add_check(Check(f"c{number}-cut", item_id, "h" * 40, "b" * 40, "make test", None, "interrupted",
                                       at(t + 260), 1.0, "interrupted", "", at(t + 261)))
            ledger.add_check(Check(f"c{number}", item_id, "h" * 40, "b" * 40, "make test", 0, "exited",
                                   at(t + 550), 1.0, "ok", "", at(t + 551)))
            table("audits").insert({"item": item_id, "level": "reviewed", "by": "reviewer", "note": "<i>fine</i>",
                                    "at": at(t + 600), "authors": "[]", "head": "h" * 40, "run": "", "opens": 1})
            ledger.mark_done(item_id)
            want["merged"].append(item_id)
            want["first"][item_id] = first
    return want


def setting(text: str, table: str, name: str, value: str) -> str:
    """drover.toml's text with `name = value` in `[table]` (where `drover init` wrote every key)."""
    head = re.search(rf"^\[{re.escape(table)}\][^\n]*$", text, flags=re.M)
    assert head is not None, table
    start = head.end()
    rest = re.sub(rf"^{name} = [^\n]*$", f"{name} = {value}", text[start:], count=1, flags=re.M)
    return text[:start] + rest


def with_settings(text: str, settings: dict[str, str]) -> str:
    """drover.toml's text with each `table__name=value` of `settings` set (setting)."""
    for where, value in settings.items():
        table, name = where.split("__")
        text = setting(text, table, name, value)
    return text


def line_of_key(root: Path, table: str, key: str) -> int:
    """The line of drover.toml at `root` where `key` of `[table]` is written: what a problem with it names."""
    lines = (root / "drover.toml").read_text(encoding="utf-8").splitlines()
    start = next(number for number, line in enumerate(lines, 1) if line.split("#")[0].strip() == f"[{table}]")
    return next(number for number, line in enumerate(lines, 1)
                if number > start and line.split("=")[0].strip() == key)


def outside_fences(text: str) -> list[str]:
    """The prompt's lines outside every backtick fence, as Markdown reads fences (any indent, since
    an agent reads a fence in a list item as one too): what the agent (implementer, reviewer) takes as the prompt's own."""
    lines, fence = [], ""
    for line in text.split("\n"):
        bare = line.strip()
        run = re.match(r"`{3,}", bare)
        if not fence and run:
            fence = run.group()
        elif fence and run and bare == "`" * len(bare) and len(bare) >= len(fence):
            fence = ""
        elif not fence:
            lines.append(bare)
    assert not fence, "a fence the prompt never closed"
    return lines
