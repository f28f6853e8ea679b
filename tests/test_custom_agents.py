"""The context a script agent gets in its environment, on each executor, and the worked custom
agents of docs/agents.md run exactly as the page shows them."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from drover.loop import runs
from drover.ledger.db import Ledger
from drover.ledger.project import open_project
from helpers import InlineExecutor, configure, drover, git, new_item

DOC = Path(__file__).resolve().parent.parent / "docs" / "agents.md"
CONTEXT = ("DROVER_BASE", "DROVER_BRANCH", "DROVER_WORKTREE", "DROVER_ROUND", "DROVER_POSTURE", "DROVER_VERIFY")


@pytest.fixture
def project(repo):
    configure(repo)
    config = (repo / "drover.toml").read_text()
    (repo / "drover.toml").write_text(config.replace('\ndefault = ""', '\ndefault = "make test"', 1))
    git(repo, "commit", "-qam", "a verify command")
    return repo


def _seen(marker: Path) -> dict[str, str]:
    return json.loads(marker.read_text())


def test_the_agent_gets_base_branch_worktree_round_posture_and_verify(project, tmp_path):
    item = new_item(project, "Add a thing")
    marker = tmp_path / "env.json"
    drover(project, "run", item, env={"AGENT_MARKER": str(marker)}, check=True)
    worktree = str(project / ".drover" / "worktrees" / item)
    assert {key: _seen(marker)[key] for key in CONTEXT} == {
        "DROVER_BASE": "main", "DROVER_BRANCH": "drover/d-1", "DROVER_WORKTREE": worktree,
        "DROVER_ROUND": "0", "DROVER_POSTURE": "build", "DROVER_VERIFY": "make test"}
    drover(project, "review", item, env={"AGENT_MARKER": str(marker)}, check=True)  # requests changes
    seen = _seen(marker)
    assert (seen["DROVER_SLOT"], seen["DROVER_ROUND"], seen["DROVER_POSTURE"]) == ("review", "0", "")
    drover(project, "run", item, env={"AGENT_MARKER": str(marker)}, check=True)
    seen = _seen(marker)
    assert (seen["DROVER_ROUND"], seen["DROVER_POSTURE"], seen["DROVER_WORKTREE"]) == ("1", "revise", worktree)


def test_dry_run_shows_the_context_variables(project):
    item = new_item(project, "Add a thing")
    shown = drover(project, "run", item, "--dry-run", check=True).stdout
    for line in ("env: DROVER_BASE=main", "env: DROVER_BRANCH=drover/d-1", "env: DROVER_ROUND=0",
                 "env: DROVER_POSTURE=build", "env: DROVER_VERIFY=make test",
                 f"env: DROVER_WORKTREE={project / '.drover' / 'worktrees' / item}"):
        assert line in shown.splitlines(), shown
    env = json.loads(drover(project, "review", item, "--dry-run", "--json", check=True).stdout)["env"]
    assert env["DROVER_POSTURE"] == "" and env["DROVER_BRANCH"] == "drover/d-1"


def test_a_worker_gets_the_context_the_coordinator_prepared_with_its_own_paths(project, tmp_path, monkeypatch):
    item = new_item(project, "Add a thing")
    marker = tmp_path / "env.json"
    monkeypatch.setenv("AGENT_MARKER", str(marker))
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('sandboxed = false', 'sandboxed = true', 1))
    found = open_project(project)
    with Ledger(found.ledger_path) as ledger:
        launch = runs.prepare(found, ledger, item, "implement")
        runs.execute(found, ledger, launch, echo=False, executor=InlineExecutor())
    seen = _seen(marker)
    assert {key: seen[key] for key in CONTEXT if key != "DROVER_WORKTREE"} == {
        "DROVER_BASE": "main", "DROVER_BRANCH": "drover/d-1", "DROVER_ROUND": "0", "DROVER_POSTURE": "build",
        "DROVER_VERIFY": "make test"}
    # the paths are the worker's scratch clone, not the coordinator's checkout
    assert seen["DROVER_WORKTREE"].endswith(f"/repo/.drover/worktrees/{item}")
    assert not seen["DROVER_WORKTREE"].startswith(str(project))
    assert seen["DROVER_REPO"] == seen["DROVER_WORKTREE"].removesuffix(f"/.drover/worktrees/{item}")
    assert seen["DROVER_PROMPT_FILE"].startswith(seen["DROVER_REPO"])
    assert seen["DROVER_RUN"] == launch.run_id


# --- the worked examples of docs/agents.md ---------------------------------------------------

def doc_examples() -> dict[str, str]:
    """Each fenced example of the page whose second line names its file: {path: text}."""
    blocks = re.findall(r"^```(?:sh|python)\n(#![^\n]*\n# (agents/agent\.\w+):[^\n]*\n.*?)^```$",
                        DOC.read_text(), re.S | re.M)
    return {path: text for text, path in blocks}


def test_the_page_shows_both_examples_and_how_to_point_agent_at_them():
    assert set(doc_examples()) == {"agents/agent.sh", "agents/agent.py"}
    text = DOC.read_text()
    assert 'command = "sh agents/agent.sh"' in text and 'command = "python3 agents/agent.py"' in text


def _with_the_worked_example(repo: Path, path: str, command: str, *, named: bool = False) -> None:
    """docs/agents.md's example at `path`, `command` in every slot, a verify command, committed;
    `named`: the implementer and the reviewer with names of their own."""
    script = repo / path
    script.parent.mkdir()
    script.write_text(doc_examples()[path])
    drover(repo, "init", check=True)
    config = (repo / "drover.toml").read_text()
    config = config.replace('preset = "claude" ', 'preset = "script" ', 1)
    config = config.replace('command = ""  ', f'command = "{command}"', 1)
    if named:
        config = config.replace('name = ""     ', 'name = "script-agent"', 1) + '\n[agent.review]\nname = "script-reviewer"\n'
    # the verify command drover checks each head with (init found none here: it wrote an empty one)
    config = re.sub(r'^default = ".*?"', 'default = "test -d notes"', config, count=1, flags=re.M)
    (repo / "drover.toml").write_text(config)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "drover init, with a custom agent")


@pytest.mark.parametrize(("path", "command"), [("agents/agent.sh", "sh agents/agent.sh"),
                                               ("agents/agent.py", "python3 agents/agent.py")])
def test_each_worked_example_drives_an_item_to_done_as_written_and_is_idempotent_on_a_resume(repo, path, command):
    _with_the_worked_example(repo, path, command, named=True)
    item = new_item(repo, "Keep notes")
    # run twice on the same round, as a resume does: the second run finds its commit and does nothing
    drover(repo, "run", item, check=True)
    again = drover(repo, "run", item, check=True)
    assert f"{item}: round 0 is already committed; nothing to do" in again.stdout
    assert git(repo, "log", "--format=%s", "main..drover/d-1").splitlines() == [f"{item}: round 0"]
    done = drover(repo, "drive", "--finish")
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(drover(repo, "show", item, "--json", check=True).stdout)["state"] == "done"
    notes = (repo / "notes" / f"{item}.md").read_text()
    assert notes.startswith("round 0 (build)\n")
    audits = json.loads(drover(repo, "show", item, "--json", check=True).stdout)["audits"]
    assert audits[-1]["level"] == "verified" and audits[-1]["by"] == "script-reviewer"
    if path.endswith(".py"):  # its review sends the first attempt back once
        assert notes == "round 0 (build)\nround 1 (revise)\n"
        assert f"{item}: changes requested (1 finding)" in done.stdout


@pytest.mark.parametrize(("path", "command"), [("agents/agent.sh", "sh agents/agent.sh"),
                                               ("agents/agent.py", "python3 agents/agent.py")])
def test_each_worked_example_fails_rather_than_leave_a_conflicted_merge_of_base(repo, path, command):
    """Posture `conflict`: the merge `drive --finish` started is in the worktree. The examples resolve
    none, so they exit non-zero naming the files, never 0 with the merge unconcluded (their "already
    committed" test would have said nothing to do)."""
    _with_the_worked_example(repo, path, command)
    item = new_item(repo, "Keep notes")
    drover(repo, "run", item, check=True)
    # base writes the same file another way: the merge of base into the branch conflicts there
    (repo / "notes").mkdir()
    (repo / "notes" / f"{item}.md").write_text("written on base\n")
    git(repo, "add", "notes")
    git(repo, "commit", "-q", "-m", "notes on base")
    done = drover(repo, "drive", "--finish")
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert json.loads(drover(repo, "show", item, "--json", check=True).stdout)["state"] != "done"
    runs_seen = json.loads(drover(repo, "show", item, "--json", check=True).stdout)["runs"]
    log = (repo / runs_seen[-1]["log_path"]).read_text()
    assert f"the merge of main conflicts in: notes/{item}.md" in log, said
    # each implementing run since the merge (the retry's fresh one, posture `resume`, too) failed on it
    assert "unconcluded" not in said and "nothing to do" not in log, said
