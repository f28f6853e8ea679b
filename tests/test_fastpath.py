"""The single-item commands, list and check without click (drover/cli/fastpath.py): the same output, errors and exit
codes as through click, for every command line the fast path takes and every one it hands on."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import BIN, FINDINGS, git, ledger_tables, run, run_process
from drover.cli import fastpath, launch

# the same program through click only: what `drover` was before the fast path
CLICK_ONLY = "import sys; from drover.cli.main import main; sys.argv = ['drover', *sys.argv[1:]]; main()"


def through_click(root: Path, *args: str, stdin: str | None = None, env: dict | None = None):
    return subprocess.run([sys.executable, "-c", CLICK_ONLY, *args], cwd=root, input=stdin, text=True,
                          capture_output=True, env={**os.environ, **(env or {})})


def imports_click(root: Path, *args: str, stdin: str | None = None) -> bool:
    done = subprocess.run([sys.executable, "-X", "importtime", str(BIN / "drover"), *args], cwd=root,
                          input=stdin, text=True, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    names = [line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert not [name for name in names if name.startswith("sqlite_utils")]  # the ledger needs no migration
    return "click" in names


@pytest.fixture
def project(repo):
    assert run(repo, "init").returncode == 0
    assert run(repo, "new", "one").returncode == 0
    assert run(repo, "new", "two", "--dep", "D-1", "--kind", "bug").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "items")
    return repo


READS = [
    ["show", "D-2"], ["show", "2"], ["show", "#2", "--json"], ["show", "--json", "d1"], ["show", "D-9"],
    ["show", "X-1"], ["show", ""], ["show", "D-1", "--color"], ["show", "D-1", "--help"], ["show"],
    ["show", "D-1", "D-2"], ["show", "D-1", "--json", "--json"], ["show", "D-1", "--", "--json"],
    ["prompt", "D-2", "--slot", "implement"], ["prompt", "2", "--slot=review", "--json"],
    ["prompt", "D-1", "--slot", "branch"], ["prompt", "D-1", "--slot", "draft", "--guidance", "lean"],
    ["prompt", "D-1", "--slot", "implement", "--diff-guidance"], ["prompt", "D-1", "--slot", "bogus"],
    ["prompt", "D-1"], ["prompt", "D-1", "--slot", "implement", "--template", "Hi {{ Id }}\n"],
    ["prompt", "D-1", "--slot", "implement", "--template", "{{ Nope }}"], ["prompt", "D-7", "--slot", "implement"],
    ["prompt", "D-1", "--slot", "implement", "--slot", "review"], ["prompt", "D-1", "--slot"],
    ["audit", "D-1", "--level", "bogus"], ["audit", "D-1"], ["new"], ["new", "--issue", "x"],
    ["request-changes", "D-9", "--file", "nowhere.md"], ["request-changes", "D-1", "--file", "nowhere.md"],
    ["list"], ["list", "--json"], ["list", "--ready"], ["list", "--state", "blocked", "--state=ready"],
    ["list", "--state", "in review", "--json", "--ready"], ["list", "--state", "bogus"], ["list", "D-1"],
    ["list", "--ready", "--ready"], ["list", "--state"], ["list", "--help"],
    ["check"], ["check", "--json"], ["check", "--diff"], ["check", "--json", "--json"], ["check", "D-1"],
]


@pytest.mark.parametrize("args", READS, ids=lambda args: " ".join(args) or "empty")
def test_reads_and_refusals_are_the_same_with_and_without_click(project, args):
    fast, slow = run_process(project, *args), through_click(project, *args)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    assert "Traceback" not in fast.stderr


def test_outside_a_project_the_fast_path_says_what_click_says(tmp_path):
    for args in (["show", "D-1"], ["audit", "1", "--level", "claimed"], ["new", "x"], ["list"]):
        fast, slow = run_process(tmp_path, *args), through_click(tmp_path, *args)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
        assert fast.returncode == 2 and fast.stderr.startswith("drover: ")


WRITES = [
    (["request-changes", "2"], FINDINGS), (["request-changes", "D-2", "--file", "-"], FINDINGS),
    (["request-changes", "D-2", "--file", "findings.md"], None),
    (["audit", "d2", "--level", "reviewed", "--note", "fine"], None), (["audit", "D-2", "--level=claimed"], None),
    (["audit", "D-2", "--level", "verified", "--by", "someone"], None),
    (["new", "three", "--dep", "1", "--dep", "D-2", "-f", "#2", "--kind", "chore"], None),
    (["new", "four", "--json"], None), (["new", "--finding", "D-1", "five"], None),
]


@pytest.mark.parametrize("args,stdin", WRITES, ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_writes_are_the_same_with_and_without_click(project, tmp_path, args, stdin):
    (project / "findings.md").write_text(FINDINGS)
    twin = tmp_path / "twin"
    shutil.copytree(project, twin)
    fast, slow = run_process(project, *args, stdin=stdin), through_click(twin, *args, stdin=stdin)
    assert fast.returncode == 0, fast.stderr
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    items = {path.name: path.read_text() for path in (project / "items").iterdir()}
    assert items == {path.name: path.read_text() for path in (twin / "items").iterdir()}
    counts = {name: len(rows) for name, rows in ledger_tables(project / ".drover" / "ledger.db").items()}
    assert counts == {name: len(rows) for name, rows in ledger_tables(twin / ".drover" / "ledger.db").items()}


@pytest.mark.parametrize("args,stdin,fast", [
    (["show", "D-1"], None, True), (["prompt", "1", "--slot", "implement"], None, True),
    (["audit", "D-1", "--level", "claimed"], None, True), (["request-changes", "D-1"], FINDINGS, True),
    (["new", "six"], None, True), (["show", "D-1", "--help"], None, False), (["list"], None, True),
    (["list", "--state", "ready", "--json"], None, True), (["check"], None, True),
    (["check", "--json"], None, True), (["check", "--diff"], None, False),
])
def test_plain_single_item_commands_do_not_import_click(project, args, stdin, fast):
    assert imports_click(project, *args, stdin=stdin) is not fast


def test_the_launcher_offers_exactly_the_fast_path_commands():
    assert sorted(launch.FAST) == sorted(fastpath.SPECS)


def test_the_fast_specs_agree_with_the_click_declarations():
    """Every option the fast path reads is the click command's, with the same choices and kind."""
    import click

    from drover.cli.main import cli
    from drover.cli.parts import ItemId

    for name, spec in fastpath.SPECS.items():
        command = cli.commands[name]
        options = {opt: param for param in command.params if isinstance(param, click.Option) for opt in param.opts}
        arguments = [param for param in command.params if isinstance(param, click.Argument)]
        assert [arg.name for arg in arguments] == list(spec.positionals)
        assert sum(arg.required for arg in arguments) == spec.required
        for opt, option in spec.options.items():
            param = options[opt]
            assert (param.name, param.multiple, isinstance(param.type, ItemId)) == (
                option.param, option.multiple, option.item_id), opt
            assert (tuple(param.type.choices) if isinstance(param.type, click.Choice) else None) == option.choices
            assert param.required == (option.param in spec.must), opt
            assert not param.is_flag
        for opt, param_name in spec.flags.items():
            assert options[opt].is_flag and options[opt].name == param_name
        for arg in arguments:
            assert isinstance(arg.type, ItemId) == (arg.name in fastpath.ID_PARAMS)
        declared = {param.name: param.to_info_dict()["default"] for param in command.params if not param.required}
        for param_name, default in spec.defaults:
            assert declared[param_name] == default, param_name


@pytest.mark.parametrize("args", [
    ["show", "D-1", "--jso"], ["show", "-1"], ["audit", "D-1", "--level", "claimed", "--by"],
    ["audit", "D-1", "--level", "claimed", "--note", "-x"], ["new", "a", "b"], ["new", "-fD-1", "x"],
    ["request-changes", "D-1", "--file=a", "--file=b"], ["prompt", "D-1", "--slot", "implement", "--json=1"],
])
def test_lines_the_fast_path_does_not_read_go_to_click(args):
    assert fastpath.parse(args) is None


def test_the_highest_number_on_disk_reads_names_as_before(tmp_path):
    """`new`'s floor from one regex pass over ASCII names equals the name-by-name reading it replaced."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from drover.ledger.writes import _highest_on_disk

    def by_name(names: list[str], prefix: str) -> int:
        start = len(prefix)
        numbers = [name[start:-3] for name in names
                   if name.startswith(prefix) and name.endswith(".md") and name[start:-3].isdigit()]
        return max((int(number) for number in numbers if number[0] != "0"), default=0)

    class Project:  # the two attributes _highest_on_disk reads
        def __init__(self, folder: Path) -> None:
            self.items_dir = folder
            self.config = type("Config", (), {"prefix": "D"})()

    part = st.sampled_from(["D-", "D", "d-", "E-", "D-0", "D--", "", "x"])
    digits = st.text("0123456789", max_size=4)
    suffix = st.sampled_from([".md", ".md.bak", ".txt", "", ".MD"])
    names = st.lists(st.builds(lambda a, b, c: a + b + c, part, digits, suffix).filter(
        lambda name: name not in ("", ".", "..") and "/" not in name), unique=True, max_size=12)
    folders = iter(range(10_000))

    @settings(max_examples=60, deadline=None)
    @given(names)
    def check(listed: list[str]) -> None:
        folder = tmp_path / str(next(folders))
        folder.mkdir()
        for name in listed:
            (folder / name).write_text("")
        assert _highest_on_disk(Project(folder)) == by_name(listed, "D-")

    check()
    assert _highest_on_disk(Project(tmp_path / "absent")) == 0
    other = tmp_path / "other"
    other.mkdir()
    for name in ("D-2.md", "D-\u0663\u0663.md", "D-é.md"):  # read name by name
        (other / name).write_text("")
    # Arabic-Indic 33 is no id (ids are ASCII digits), as the ASCII names' regex reads it
    assert _highest_on_disk(Project(other)) == 2


def test_check_with_problems_is_the_same_with_and_without_click(project):
    """Errors and warnings, plain and JSON: the same lines, streams and exit code either way."""
    (project / "items" / "D-3.md").write_text("---\nid: D-3\ntitle: [\n---\n")
    (project / "items" / "D-4.md").write_text("---\nid: D-4\ntitle: four\ndeps: [D-99]\n---\n\nbody\n")
    for args in (["check"], ["check", "--json"]):
        fast, slow = run_process(project, *args), through_click(project, *args)
        assert fast.returncode == 1 and "D-99" in fast.stdout
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)


def test_a_render_turns_the_collector_the_launcher_paused_back_on(monkeypatch):
    import gc

    from drover.prompts.fields import TemplateData
    from drover.prompts.env import compile_template
    from drover.prompts.render import render_template

    monkeypatch.setattr(launch, "paused", True)
    gc.disable()
    try:
        text = render_template(compile_template("{{ Id }}: {{ Title }}", "t"), TemplateData(Id="D-1", Title="x"), {})
        assert text == "D-1: x"
        assert gc.isenabled() and not launch.paused  # what a template makes is collected as always
    finally:
        gc.enable()
        gc.unfreeze()


@pytest.mark.parametrize("args", [["prompt", "D-2", "--slot", "implement"], ["show", "D-2"]])
def test_a_single_item_command_runs_with_the_collector_paused_until_it_renders(project, args):
    # what the process's collector was when the command's body ran, and when a template rendered
    probe = ("import gc, sys; import drover.prompts.render; from drover import fastpath, launch\n"
             "r = sys.modules['drover.prompts.render']\n"
             "seen = []\n"
             "body = fastpath.SPECS[sys.argv[1]].body\n"
             "def wrapped(**kw): seen.append(('body', gc.isenabled())); body(**kw)\n"
             "fastpath.SPECS[sys.argv[1]].body = wrapped\n"
             "generate = r._generate\n"
             "def spied(*a): out = generate(*a); seen.append(('render', gc.isenabled())); return out\n"
             "r._generate = spied\n"
             "sys.argv = ['drover', *sys.argv[1:]]\n"
             "try:\n    launch.main()\nfinally:\n    print(sorted(set(seen)), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe, *args], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    seen = done.stderr.strip().splitlines()[-1]
    if args[0] == "prompt":
        assert seen == "[('body', False), ('render', True)]"
    else:
        assert seen == "[('body', False)]"
