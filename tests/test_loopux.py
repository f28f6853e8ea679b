"""Issue 24's loop fit to leave alone: drive refuses what check calls an error, placeholder items
need requirements, init finds the verify command, and the small points of 8, 10 and 11."""
from __future__ import annotations

import json

import pytest

from helpers import configure, drover, git, new_item, write_requirements


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
        assert lines[0] == "drover: drive: `drover check` reports 1 error; fix them first, nothing was launched:"
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
    assert f"items: {written}" in dry and placeholder not in dry
    named = drover(project, "drive", placeholder)
    assert f"{placeholder}: skipped: needs requirements: items/{placeholder}.md still holds the placeholder" \
        in named.stdout, named.stdout
    assert json.loads(drover(project, "show", placeholder, "--json").stdout)["runs"] == []

    write_requirements(project, placeholder)
    assert json.loads(drover(project, "show", placeholder, "--json").stdout)["state"] == "ready"
    assert "needs requirements" not in drover(project, "list").stdout
