"""No input is a traceback: each hostile input is one line naming the file, exit 2 (1 for
check), and nothing written. Real processes, real files, a real ledger."""
from __future__ import annotations

import sqlite3
import subprocess

import pytest

from helpers import BIN, BOMB, FINDINGS, HOSTILE_FRONTMATTER, drover, ledger_tables, made_once, one_line, run



@pytest.fixture
def project(repo):
    """drover init and one item, uncommitted (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_hostile",), lambda: _project(repo))
    return repo


def _project(repo) -> None:
    assert run(repo, "init").returncode == 0
    assert run(repo, "new", "a good item").returncode == 0


def state(root):
    """Every file but git's, and every ledger row but the metadata cache's."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
             if p.is_file() and ".git" not in p.parts and not p.name.startswith("ledger.db")}
    ledger = root / ".drover" / "ledger.db"
    rows = {k: v for k, v in ledger_tables(ledger).items() if k != "item_files"} if ledger.exists() else {}
    return files, rows


def write_item(root, item_id: str, frontmatter: str) -> None:
    (root / "items" / f"{item_id}.md").write_text(f"---\nid: {item_id}\n{frontmatter}---\n\n## Requirements\n\n- x\n")


@pytest.mark.parametrize("frontmatter, reason", HOSTILE_FRONTMATTER)
def test_a_hostile_item_is_one_unreadable_item(project, frontmatter, reason):
    write_item(project, "D-2", frontmatter)
    listed = run(project, "list")
    assert listed.returncode == 0 and "Traceback" not in listed.stderr
    assert "a good item" in listed.stdout and "D-2" in listed.stdout
    checked = run(project, "check")
    assert checked.returncode == 1 and reason in checked.stdout
    before = state(project)
    refused = one_line(run(project, "request-changes", "D-2", stdin=FINDINGS))
    assert "items/D-2.md" in refused and reason in refused
    assert state(project) == before


def test_the_pure_python_parser_refuses_the_same_inputs():
    from drover.items.frontmatter_rules import FrontmatterError
    from drover.items.strict_yaml import PureStrictLoader, StrictYAMLHandler

    load = StrictYAMLHandler(PureStrictLoader).load

    for source, reason in (("x: " + "[" * 5000 + "]" * 5000, "nested"), (BOMB, "aliases"),
                           ("a: 1\na: 2", "duplicate key"), ("x:\n" + "".join("  " * n + "- \n" for n in range(1, 1200)), "nested")):
        with pytest.raises(FrontmatterError) as caught:
            load(source)
        assert reason in caught.value.detail
    assert load("id: D-1\ndeps: [D-2]\n") == {"id": "D-1", "deps": ["D-2"]}


def test_a_long_list_without_aliases_is_no_bomb():
    """The depth walk (hostile review 49) reads frontmatters without aliases too: a list of more
    than MAX_NODES entries of its own is read, as before, not taken for an alias bomb."""
    from drover.items.strict_yaml import MAX_NODES, PureStrictLoader, StrictLoader, StrictYAMLHandler

    source = "title: t\nx:\n" + "- 1\n" * (MAX_NODES + 1)
    for loader in (StrictLoader, PureStrictLoader):
        assert len(StrictYAMLHandler(loader).load(source)["x"]) == MAX_NODES + 1


def test_non_utf8_findings_on_stdin(project):
    before = state(project)
    done = subprocess.run([str(BIN / "drover"), "request-changes", "D-1"], cwd=project,
                          input=b"## bad \xff\xfe bytes\n", capture_output=True)
    line = one_line(subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(), done.stderr.decode()))
    assert "standard input" in line and "not UTF-8" in line
    assert state(project) == before


def test_findings_from_dev_zero_and_endless_stdin_stop_at_the_cap(project):
    before = state(project)
    line = one_line(run(project, "request-changes", "D-1", "--file", "/dev/zero"))
    assert line == "drover: /dev/zero: findings larger than 1 MB refused"
    with open("/dev/zero", "rb") as zero:
        done = subprocess.run([str(BIN / "drover"), "request-changes", "D-1"], cwd=project,
                              stdin=zero, capture_output=True, text=True)
    assert one_line(done) == "drover: standard input: findings larger than 1 MB refused"
    assert state(project) == before


def test_findings_past_what_the_next_prompt_carries_are_refused_and_those_within_render(project):
    """Hostile review 35: the cap was 10 MB, the render's output cap 4 MB: a reviewer's findings of
    2 MB to 10 MB were recorded, then every implement prompt of the item failed as
    `implement.tmpl: template failed`. At 1 MB they are refused; findings of exactly 1 MB render."""
    before = state(project)
    done = run(project, "request-changes", "D-1", stdin="- " + "f" * (2 << 20) + "\n")
    assert one_line(done) == "drover: standard input: findings larger than 1 MB refused"
    assert state(project) == before
    assert run(project, "request-changes", "D-1", stdin="- " + "f" * ((1 << 20) - 3) + "\n").returncode == 0
    for slot in ("implement", "review", "draft"):
        prompted = run(project, "prompt", "D-1", "--slot", slot)
        assert prompted.returncode == 0, prompted.stderr


def test_a_non_utf8_config(project):
    config = project / "drover.toml"
    config.write_bytes(config.read_bytes() + b"\n# caf\xe9\n")
    before = state(project)
    line = one_line(run(project, "list"))
    assert line.startswith("drover: drover.toml: not UTF-8 text")
    assert state(project) == before


def test_a_ledger_from_a_newer_drover_is_refused(project):
    ledger = project / ".drover" / "ledger.db"
    with sqlite3.connect(ledger) as conn:
        conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                     "VALUES ('drover', '0099_future', '2030-01-01')")
    conn.close()
    before = state(project)
    for args in (["list"], ["new", "x"], ["request-changes", "D-1"]):
        line = one_line(run(project, *args, stdin=FINDINGS))
        assert "ledger.db is from a newer drover (migration 0099_future)" in line
    assert state(project) == before


@pytest.mark.parametrize("items, said", [
    ('""', "expected a folder inside the repository"),
    ('"../elsewhere"', "expected a folder inside the repository"),
    ('"/tmp"', "expected a folder inside the repository"),
    ('".drover/items"', "expected a folder outside .drover/"),
    ('"linked"', "leads outside the repository"),
])
def test_an_items_folder_outside_the_repository_is_refused(project, tmp_path, items, said):
    (project / "linked").symlink_to(tmp_path)
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('items = "items"', f"items = {items}", 1))
    assert f"items = {items}" in config.read_text()
    before = state(project)
    line = one_line(run(project, "new", "x"))
    assert line.startswith("drover: drover.toml") and said in line
    assert state(project) == before


def test_an_item_starting_with_a_bom_parses_and_keeps_it(project):
    path = project / "items" / "D-1.md"
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert "a good item" in run(project, "list").stdout
    assert run(project, "request-changes", "D-1", stdin=FINDINGS).returncode == 0
    text = path.read_bytes()
    assert text.startswith(b"\xef\xbb\xbf---") and b"The parser accepts unknown keys" in text


def test_a_symlinked_item_is_refused_by_writes(project, tmp_path):
    target = tmp_path / "elsewhere.md"
    path = project / "items" / "D-1.md"
    target.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(target)
    before = state(project)
    for args in (["request-changes", "D-1"], ["close-changes", "D-1"], ["audit", "D-1", "--level", "reviewed"]):
        line = one_line(run(project, *args, stdin=FINDINGS))
        assert line == "drover: items/D-1.md: is a symbolic link; drover writes only regular item files"
    assert path.is_symlink() and state(project) == before


def test_timeout_in_plain_seconds_is_accepted(project):
    from drover.config import load_config

    config = project / "drover.toml"
    text = config.read_text()
    assert 'timeout = "2h"' in text
    config.write_text(text.replace('timeout = "2h"', "timeout = 45", 1))
    assert run(project, "list").returncode == 0
    assert load_config(config).agent.timeout_seconds == 45


def test_libyaml_is_used_when_present_and_both_parsers_agree():
    import yaml

    from drover.items.strict_yaml import StrictLoader, PureStrictLoader, StrictYAMLHandler

    if getattr(yaml, "__with_libyaml__", False):
        assert issubclass(StrictLoader, yaml.CSafeLoader)
    assert issubclass(PureStrictLoader, yaml.SafeLoader) and not issubclass(PureStrictLoader, getattr(yaml, "CSafeLoader", ()))
    sources = [
        "id: D-4\ntitle: 'Quoted: yes'\nkind: bug\ndeps: [D-1, D-2]\ncloses: [12, \"#13\"]\nshelved: no\nmigration: yes\n",
        "id: D-5\ntitle: Émile's item\nmeta:\n  nested: {a: 1, b: [x, y]}\nanchor: &a [1, 2]\nagain: *a\n",
    ]
    for source in sources:
        assert StrictYAMLHandler(StrictLoader).load(source) == StrictYAMLHandler(PureStrictLoader).load(source)


def test_a_dependency_chain_thousands_long_is_checked_without_recursion():
    from drover.loop.checks import dependency_cycles

    chain = {f"D-{n}": (f"D-{n - 1}",) if n > 1 else () for n in range(1, 5001)}
    assert dependency_cycles(chain) == []
    chain["D-1"] = ("D-5000",)
    (cycle,) = dependency_cycles(chain)
    assert len(cycle) == 5001 and cycle[0] == cycle[-1]
    assert dependency_cycles({"D-1": ("D-2",), "D-2": ("D-1", "D-3"), "D-3": ("D-3",)}) == [
        ["D-1", "D-2", "D-1"], ["D-3", "D-3"]]


def test_show_prints_no_terminal_escape_an_agent_wrote(project):
    """Findings, notes and reasons are agents' words: `show` prints them without their escapes
    (an OSC 52 would write the operator's clipboard, a CSI would clear or overwrite lines)."""
    hostile = "x \x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b]0;title\x07 \x1b[2J\x1b[1A\r\x9b2J y"
    drover(project, "request-changes", "D-1", stdin=f"# finding {hostile}\n", check=True)
    drover(project, "audit", "D-1", "--level", "reviewed", "--note", hostile, check=True)
    drover(project, "park", "D-1", "--why", hostile, check=True)
    out = drover(project, "show", "D-1", check=True).stdout
    assert "finding x" in out and "title" in out
    assert not any(ord(char) < 32 and char not in "\n\t" or 0x7f <= ord(char) <= 0x9f for char in out), repr(out)
    # `list` too: the park reason is its note, and a title is the item file's (YAML's "\e" is ESC)
    path = project / "items" / "D-1.md"
    path.write_text(path.read_text().replace("title: ", 'title: "evil \\e]0;owned\\a" # ', 1))
    listed = drover(project, "list", check=True).stdout
    assert "evil ?]0;owned?  (x ?]52;c;" in listed, listed
    assert not any(ord(char) < 32 and char not in "\n\t" or 0x7f <= ord(char) <= 0x9f for char in listed)
    # `check` quotes the item's keys: one close enough to `title` to be warned of keeps its escape out
    path.write_text(path.read_text().replace("\n---", '\n"titl\\e": oops\n---', 1))
    checked = drover(project, "check").stdout
    assert "titl?: did you mean title?" in checked, checked
    path.write_text(path.read_text().replace('"titl\\e": oops', '"tit\\nle": split', 1))  # one finding, one line
    assert "items/D-1.md: tit\\nle: did you mean title?" in drover(project, "check").stdout
    assert not any(ord(char) < 32 and char not in "\n\t" or 0x7f <= ord(char) <= 0x9f for char in checked)
    # and an error that quotes the file (its id, here) says it on one line, its escapes shown as ?
    path.write_text(path.read_text().replace("id: D-1", 'id: "D-1\\e]0;owned\\a"', 1))
    refused = drover(project, "run", "D-1", "--dry-run")
    assert refused.returncode != 0 and "(id D-1?]0;owned? in a file named D-1.md)" in refused.stderr, refused.stderr
    assert not any(ord(char) < 32 and char not in "\n\t" or 0x7f <= ord(char) <= 0x9f for char in refused.stderr)


def test_an_argument_that_is_not_utf8_is_refused_in_one_line_of_visible_characters(project):
    """The refusal quoted the argument as it came but for its undecodable bytes: a line break in it
    wrote a line of its own, an escape and a right-to-left override acted on the terminal
    (hostile review 49)."""
    done = subprocess.run([str(BIN / "drover"), "show", b"D-1\ndrover: approved \x1b[31m\xe2\x80\xae \xff"],
                          cwd=project, capture_output=True)
    line = one_line(subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                                done.stderr.decode("utf-8", "surrogateescape")))
    assert "not UTF-8 text" in line and "\\n" in line and "\\xff" in line
    assert line.isprintable(), line
