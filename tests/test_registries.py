"""Adding a preset, a tracker backend or a template field touches only the files
docs/architecture.md names ("Adding a preset, a tracker, a field"). Each test adds one the way a
change would, and checks that everything downstream sees it: config, the command line,
completion, launching, finish, the field check and the generated docs.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drover.agents import presets
from drover import trackers
from drover.cli.config_text import default_config_text
from drover.config import parse_config
from drover.errors import ConfigError
from drover.ledger.db import Ledger
from drover.agents.presets import PROMPT_FILE, Preset
from drover.trackers.base import Issue, check_disposition
from helpers import invoke

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def docgen(monkeypatch):
    """tools/docgen.py, what `make docs` writes the reference tables with."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    import docgen

    return docgen


def _set(root: Path, table_key: str, value: str) -> None:
    """Set `key = "value"` in the drover.toml `init` wrote (the first line that assigns it)."""
    path = root / "drover.toml"
    text, count = re.subn(rf'^{table_key} = "[^"]*"', f'{table_key} = "{value}"', path.read_text(), count=1, flags=re.M)
    assert count == 1, table_key
    path.write_text(text)


# --- a preset: its entry in presets.PRESETS ------------------------------------------------------

NEWONE = Preset("newone", ("newone-cli", "--task-file", PROMPT_FILE, "--yes"), "file", "pipx install newone",
                "newone-cli", checked="newone 1.0")


@pytest.fixture
def newone(monkeypatch):
    monkeypatch.setitem(presets.PRESETS, "newone", NEWONE)


def test_a_registered_preset_is_accepted_launched_completed_and_documented(newone, docgen, tmp_path, monkeypatch):
    config = parse_config({"agent": {"preset": "newone", "review": {"preset": "newone"}}})
    assert config.agent.preset == "newone" and config.agent_for("review").preset == "newone"
    assert presets.agent_argv(config.agent, Path("/runs/1/prompt.md")) == (
        ["newone-cli", "--task-file", "/runs/1/prompt.md", "--yes"], "file")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert presets.binary_missing(config.agent) == "newone is not installed: pipx install newone"
    with pytest.raises(ConfigError, match=r"expected one of claude, .*, newone, not 'newon'$"):
        parse_config({"agent": {"preset": "newon"}})

    from drover.cli.parts import complete_presets

    assert [item.value for item in complete_presets(None, None, "new")] == ["newone"]
    assert "| `newone` | `newone-cli --task-file {prompt_file} --yes` | file | pipx install newone | newone 1.0 |" in (
        docgen.preset_table())
    assert "`newone`" in docgen.config_key_table("agent")
    assert re.search(r"^preset = .*# .*\| newone\b", default_config_text(), re.M)  # the file `init` writes


def test_the_command_line_takes_a_preset_once_it_is_registered(repo, monkeypatch):
    invoke("init")
    _set(repo, "preset", "newone")
    refused = invoke("list")
    assert refused.exit_code == 2 and "[agent] preset: expected one of" in refused.stderr
    monkeypatch.setitem(presets.PRESETS, "newone", NEWONE)
    assert invoke("list").exit_code == 0
    assert invoke("new", "Try the new agent").exit_code == 0
    planned = invoke("run", "D-1", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.output
    argv = json.loads(planned.stdout)["argv"]
    assert argv[0] == "newone-cli" and argv[1] == "--task-file" and argv[2].endswith("prompt.md")


# --- a tracker: its module and its entry in trackers.BACKENDS -----------------------------------

class Ledgerbook:
    """A backend that exists only here: issues come from a book, and finish writes into it."""

    name = "ledgerbook"
    writes_back = True
    reads_issues = True
    written: list[tuple[int, str, str]] = []

    @classmethod
    def from_config(cls, config, root):
        return cls()

    def follow_ups(self, owner_ids):
        return []

    def owned(self, item_id, origin):
        return []

    def issue(self, number):
        return Issue(number, title=f"Entry {number} of the book", body="The widget squeaks.", state="open",
                     url=f"book:{number}")

    def intake(self, number):
        return self.issue(number), f"entry {number} of the book"

    def apply(self, number, disposition, note):
        check_disposition(disposition)
        self.written.append((number, disposition, note))
        return f"{disposition} written in the book"

    def probe(self):
        return ""


class Notebook(Ledgerbook):
    """The same backend under another name, which cannot write back: finish must ask, not guess."""

    name = "notebook"
    writes_back = False


@pytest.fixture
def books(monkeypatch):
    monkeypatch.setattr(Ledgerbook, "written", [])
    monkeypatch.setitem(trackers.BACKENDS, "ledgerbook", Ledgerbook)
    monkeypatch.setitem(trackers.BACKENDS, "notebook", Notebook)


def test_a_registered_backend_is_accepted_opened_and_documented(books, docgen, tmp_path):
    config = parse_config({"tracker": {"backend": "ledgerbook"}})
    assert type(trackers.open_tracker(config.tracker, tmp_path)) is Ledgerbook
    assert "`ledgerbook`" in docgen.config_key_table("tracker")
    assert re.search(r"^backend = .*# .*\| ledgerbook\b", default_config_text(), re.M)


@pytest.mark.parametrize(("backend", "finish_says", "written"), [
    ("ledgerbook", "#7: close written in the book", [(7, "close", "the squeak is gone")]),
    ("notebook", "#7: close recorded; no tracker to write it to", []),
])
def test_intake_and_finish_ask_the_backend_not_its_name(books, repo, backend, finish_says, written):
    invoke("init")
    _set(repo, "backend", backend)
    made = invoke("new", "--issue", "7")
    assert made.exit_code == 0, made.output
    item = repo / "items" / "D-1.md"
    text = item.read_text()
    assert "title: Entry 7 of the book" in text and "From entry 7 of the book, as it read at intake:" in text
    item.write_text(text.replace("deps: []", "deps: []\ncloses: [7]"))
    assert invoke("dispose", "D-1", "7", "--as", "close", "--note", "the squeak is gone").exit_code == 0
    with Ledger(repo / ".drover" / "ledger.db") as ledger, ledger.write():
        ledger.mark_done("D-1")  # merged already: finish has only the dispositions left to apply
    finished = invoke("finish", "D-1")
    assert finished.exit_code == 0, finished.output
    assert finish_says in finished.stdout
    assert Ledgerbook.written == written


# --- a template field: its line in fields.py (and its filling in data.py) ----------------------

def _with_field(tmp_path: Path) -> Path:
    """A copy of drover with one more template field, `Answer`, added to fields.py as a change would."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "drover", copy / "drover", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "builtin_templates", copy / "builtin_templates")
    shutil.copy(ROOT / "tools" / "docgen.py", copy / "docgen.py")
    fields = copy / "drover" / "prompts" / "fields.py"
    text = fields.read_text(encoding="utf-8")
    declared = '    # every slot\n    Id: str = ""\n'
    schema = '    ("Id", "str", _ALL,'
    assert text.count(declared) == 1 and text.count(schema) == 1
    text = text.replace(declared, declared + "    Answer: int = 42\n")
    text = text.replace(schema, '    ("Answer", "int", _ALL, "the answer", "The answer, for every slot."),\n' + schema)
    fields.write_text(text, encoding="utf-8")
    return copy


def test_a_field_declared_in_fields_py_reaches_schema_check_render_and_docs(tmp_path):
    copy = _with_field(tmp_path)
    probe = """
import json, sys
import docgen
from drover.cli.main import cli
from drover.prompts.fields import TemplateData
from drover.prompts import field_problems, render_branch
from click.testing import CliRunner

schema = json.loads(CliRunner().invoke(cli, ["schema", "--fields", "--json"]).stdout)
print(json.dumps({
    "module": __import__("drover").__file__,
    "schema": [row for row in schema if row["name"] == "Answer"],
    "problems": [str(problem) for problem in field_problems("{{ Answer }} {{ Answr }}", "t.tmpl")],
    "rendered": render_branch(TemplateData(Id="D-1"), "d1-{{ Answer }}"),
    "reference": "| `Answer` | int |" in docgen.field_table(),
    "explained": "| `Answer` | int | implement, review, draft, branch | The answer, for every slot. |"
                 in docgen.field_explained_table(),
}))
"""
    done = subprocess.run([sys.executable, "-c", probe], cwd=copy, capture_output=True, text=True,
                          env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["module"] == str(copy / "drover" / "__init__.py")
    assert seen["schema"] == [{"name": "Answer", "type": "int", "slots": ["implement", "review", "draft", "branch"],
                               "meaning": "the answer", "members": []}]
    assert len(seen["problems"]) == 1 and "unknown field Answr (did you mean Answer?)" in seen["problems"][0]
    assert seen["rendered"] == "d1-42"
    assert seen["reference"] and seen["explained"]
