"""`drover check`, `check --diff`, `schema` and `prompt` through the command line."""
from __future__ import annotations

import json
import sqlite3
import re
from pathlib import Path

import pytest
from helpers import invoke, line_of_key, made_once

from drover import prompts as templates
from drover.prompts.data import FIELD_NAMES

OLD_SCOPE = "2c3ce7b7956f"  # the implement/scope default first shipped, kept in history.json


@pytest.fixture
def project(repo):
    """drover init and one item, D-1, uncommitted
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_check_cli",), _project)
    return repo


def _project() -> None:
    assert invoke("init").exit_code == 0
    assert invoke("new", "A thing").exit_code == 0


def use_override(root, text: str) -> None:
    (root / "docs-internal").mkdir(exist_ok=True)
    (root / "docs-internal" / "kickoff.tmpl").write_text(text)
    config = root / "drover.toml"
    config.write_text(config.read_text().replace('implement = ""', 'implement = "docs-internal/kickoff.tmpl"'))


def test_an_override_written_against_an_old_default_is_stale_and_diffs(project):
    assert OLD_SCOPE in templates.load_history()["implement/scope"]
    today = templates.default_hash("implement", "scope")
    assert today != OLD_SCOPE
    use_override(project, f"<% block scope %>\n<# drover-base: {OLD_SCOPE} #>\n- Own only this item's files.\n<% endblock %>\n")
    checked = invoke("check")
    assert checked.exit_code == 1
    assert "STALE OVERRIDE implement/scope in docs-internal/kickoff.tmpl" in checked.stdout.splitlines()
    assert "`drover check --diff`" in checked.stderr and "`drover override --update`" in checked.stderr  # what to do
    diffed = invoke("check", "--diff", "--color", "never")
    lines = diffed.output.splitlines()
    assert lines[:3] == [
        "==> implement/scope in docs-internal/kickoff.tmpl",
        f"--- {OLD_SCOPE} (the override's base)",
        f"+++ {today} (today's default)",
    ]
    old = templates.load_history()["implement/scope"][OLD_SCOPE].splitlines()
    assert [line[2:] for line in lines[3:] if line.startswith(("  ", "- "))] == old
    assert any(line.startswith("+ ") for line in lines[3:])
    assert "\x1b[" not in diffed.output
    coloured = invoke("check", "--diff", "--color", "always")
    assert "\x1b[32m+ " in coloured.output
    plain = invoke("check", "--diff", env={"NO_COLOR": "1"})
    assert "\x1b[" not in plain.output


@pytest.mark.parametrize("base", ["", "0123456789ab"])
def test_a_replacement_with_no_base_drover_knows_is_told_how_to_record_one_not_to_diff(project, base):
    head = f"<# drover-base: {base} #>\n" if base else ""
    use_override(project, f"<% block scope %>\n{head}- Own only this item's files.\n<% endblock %>\n")
    checked = invoke("check")
    assert checked.exit_code == 1
    assert "STALE OVERRIDE implement/scope in docs-internal/kickoff.tmpl" in checked.stdout.splitlines()
    assert "--diff" not in checked.stderr and "--update" not in checked.stderr
    assert "`drover schema --prompts`" in checked.stderr and "<# drover-base: HASH #>" in checked.stderr
    (project / "docs-internal" / "kickoff.tmpl").write_text(
        f"<% block scope %>\n<# drover-base: {OLD_SCOPE} #>\n- Mine.\n<% endblock %>\n")
    known = invoke("check").stderr
    assert "`drover check --diff`" in known and "`drover schema --prompts`" not in known
    (project / "prompts").mkdir()
    (project / "prompts" / "draft.tmpl").write_text(f"<% block requirements %>\n{head}- Mine.\n<% endblock %>\n")
    (project / "drover.toml").write_text((project / "drover.toml").read_text().replace(
        'draft = ""', 'draft = "prompts/draft.tmpl"'))
    both = invoke("check").stderr
    assert "`drover check --diff`" in both and "`drover schema --prompts`" in both  # a hint for each kind

def test_an_up_to_date_override_passes_and_the_prompt_carries_it(project):
    today = templates.default_hash("implement", "scope")
    use_override(project, f"<% block scope %>\n<# drover-base: {today} #>\n- Own only this item's files.\n<% endblock %>\n")
    checked = invoke("check")
    assert "STALE" not in checked.output
    assert checked.exit_code == 0, checked.output
    prompt = invoke("prompt", "D-1", "--slot", "implement")
    assert "- Own only this item's files." in prompt.output
    assert "smallest change" not in prompt.output


def test_schema_prompts_lists_every_block_of_every_slot(project):
    listed = json.loads(invoke("schema", "--prompts").output)
    pairs = {(row["slot"], row["block"]) for row in listed}
    for slot in ("implement", "review", "draft"):
        assert {(slot, block) for block in templates.builtin_blocks(slot)} <= pairs
    assert {("implement", "scope"), ("implement", "done"), ("implement", "checks"), ("review", "verify"),
            ("review", "checks"), ("draft", "requirements"), ("draft", "checks")} <= pairs
    for row in listed:
        assert set(row) == {"slot", "block", "default", "hash", "addition"}
        assert row["addition"] == (row["default"] == "")
        assert row["hash"] == templates.base_hash(row["default"])


def test_schema_fields_lists_every_field(project):
    shown = invoke("schema", "--fields")
    assert shown.exit_code == 0
    names = {line.split()[0] for line in shown.output.splitlines() if line.strip()}
    assert set(FIELD_NAMES) <= names
    as_json = json.loads(invoke("schema", "--fields", "--json").output)
    assert {row["name"] for row in as_json} >= set(FIELD_NAMES)


def test_a_typo_in_a_field_fails_with_did_you_mean(project):
    done = invoke("prompt", "D-1", "--slot", "implement", "--template", "{{ Titel }}")
    assert done.exit_code == 2
    assert "unknown field Titel (did you mean Title?)" in done.output


def test_check_reports_dependency_problems_and_cycles(project):
    assert invoke("new", "Second", "--dep", "D-1").exit_code == 0
    first = project / "items" / "D-1.md"
    first.write_text(first.read_text().replace("deps: []", "deps: [D-2, D-9, nonsense]"))
    done = invoke("check")
    assert done.exit_code == 1
    assert "items/D-1.md:5: D-1: dep nonsense does not resolve to an item id" in done.output
    assert "items/D-1.md:5: D-1: dep D-9 has no file (no items/D-9.md)" in done.output
    assert any(line.startswith("items/D-1.md: dependency cycle: D-1 -> D-2 -> D-1") for line in done.output.splitlines())


def test_check_reports_an_unparseable_item_and_a_narrow_verify_command(project):
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [unclosed\n---\nbody\n")
    config = project / "drover.toml"
    config.write_text(re.sub(r'^default = .*$', 'default = "make test"\nmigration = "make migrate-check"',
                             config.read_text(), count=1, flags=re.M))
    done = invoke("check")
    assert done.exit_code == 1
    assert any(line.startswith("items/D-2.md:3: D-2 will not parse") for line in done.output.splitlines())
    assert "warning: [verify] migration does not contain the default command" in done.output


def test_a_readme_beside_the_items_is_no_item_but_a_frontmatter_file_named_like_none_is_an_error(project):
    items = project / "items"
    (items / "README.md").write_text("# Our items\n\nOne file an item; see drover help.\n")
    (items / "D-7.md").write_text("no frontmatter, but named like an item\n")
    listed = invoke("list", "--json")
    assert [row["id"] for row in json.loads(listed.output)] == ["D-1", "D-7"]  # D-7 is still an item, unreadable
    (items / "D-7.md").unlink()
    checked = invoke("check", "--json")
    assert checked.exit_code == 0, checked.output
    (note,) = [problem for problem in json.loads(checked.output)["problems"] if problem["path"] == "items/README.md"]
    assert (note["code"], note["severity"]) == ("not-an-item", "warning")
    assert "drover leaves it alone" in note["message"]
    assert invoke("drive", "--dry-run").exit_code == 0  # a drive is not stopped by it
    (items / "D-8.md").write_text("---\nid: D-8\n---\n## Requirements\n\n1. Do it.\n")  # no title: a warning
    (untitled,) = [problem for problem in json.loads(invoke("check", "--json").output)["problems"]
                   if problem["path"] == "items/D-8.md"]
    assert (untitled["code"], untitled["severity"]) == ("no-title", "warning") and "D-8 has no title" in untitled["message"]
    (items / "D-8.md").unlink()
    (items / "notes.md").write_text("---\ntitle: A note\n---\nbody\n")  # frontmatter: meant as an item
    checked = invoke("check")
    assert checked.exit_code == 1 and "items/notes.md: notes has an id that disagrees" in checked.output


def test_a_broken_config_is_one_line_and_exit_2(project):
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("max_rounds = 3", "max_rounds = \"three\""))
    done = invoke("check")
    assert done.exit_code == 2
    line = line_of_key(project, "review", "max_rounds")
    assert done.output.strip() == f"drover: drover.toml: [review] max_rounds: expected an integer (line {line})"


def test_check_json_of_a_config_that_does_not_load_is_json_naming_each_problems_line(project):
    """A script that asks for JSON gets JSON, also when drover.toml is what is wrong: each problem
    with its code, path and line, exit 2 as for any configuration error."""
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("max_rounds = 3", "max_rounds = \"three\"")
                      .replace("[review]", "[review]\nmax_rouns = 2", 1))
    done = invoke("check", "--json")
    assert done.exit_code == 2
    report = json.loads(done.stdout)
    assert report["ok"] is False
    assert [(problem["code"], problem["severity"], problem["path"], problem["line"]) for problem in report["problems"]] == [
        ("config", "error", "drover.toml", line_of_key(project, "review", "max_rouns")),
        ("config", "error", "drover.toml", line_of_key(project, "review", "max_rounds"))]
    assert report["problems"][1]["message"] == (
        f"drover.toml: [review] max_rounds: expected an integer (line {line_of_key(project, 'review', 'max_rounds')})")
    config.write_text(config.read_text().replace("max_rouns = 2", "max_rouns = = 2"))  # no TOML at all
    (syntax,) = json.loads(invoke("check", "--json").stdout)["problems"]
    assert (syntax["code"], syntax["path"], syntax["line"]) == ("config", "drover.toml", line_of_key(project, "review", "max_rouns"))


def test_check_warns_when_require_independent_leaves_no_review_agent_of_another_identity(project):
    def warned() -> list[dict]:
        return [problem for problem in json.loads(invoke("check", "--json").output)["problems"]
                if "require_independent" in problem["message"]]

    assert warned() == []  # off by default: an author's approval opens the gate, Weak
    config = project / "drover.toml"
    config.write_text(config.read_text().replace("require_independent = false", "require_independent = true", 1))
    done = invoke("check")
    assert done.exit_code == 0, done.output  # a warning, not an error
    assert ("warning: drover.toml: [review] require_independent is true and the review agent's identity is the "
            "implementing agent's (claude): an approval by one of the item's authors (Weak) does not open the "
            "gate") in done.output
    (problem,) = warned()
    assert (problem["severity"], problem["path"]) == ("warning", "drover.toml")
    config.write_text(config.read_text() + '\n[agent.review]\nname = "reviewer"\n')
    assert warned() == []


@pytest.mark.parametrize(("command", "warned"), [("make -s review", True), ("env CI=1 npm run review", True),
                                                 ("sh agents/review.sh", False), ("", False)])
def test_check_warns_when_the_review_command_runs_a_recipe(project, command, warned):
    """Hostile review 14: `make review` runs what a Makefile says, and drover compares only the files
    a review command names with the commit under review: a branch that changes the recipe's script
    would be reviewed by it. check says to name the script itself."""
    config = project / "drover.toml"
    if command:
        config.write_text(config.read_text() + f'\n[agent.review]\nname = "reviewer"\ncommand = "{command}"\n')
    done = invoke("check")
    said = [line for line in done.output.splitlines() if "drover cannot see which files its recipe runs" in line]
    assert len(said) == (1 if warned else 0), done.output
    if warned:
        assert said[0].startswith("warning: drover.toml: [agent.review] command starts ")


@pytest.mark.parametrize("key", ["depends_on", "dep", "depends", "dependencies", "requires", "after", "blocked_by"])
def test_check_warns_of_a_misspelt_deps_key_with_its_file_and_line(project, key):
    (project / "items" / "D-2.md").write_text(f"---\nid: D-2\ntitle: builds on D-1\n{key}: [D-1]\n---\n\n"
                                              "## Requirements\n\n1. Needs D-1 first.\n")
    done = invoke("check")
    assert done.exit_code == 0, done.output  # a warning: the key may be the project's own
    assert (f"warning: items/D-2.md:4: {key}: did you mean deps? drover reads deps for an item's dependencies; "
            "this key is the project's own and drover ignores it") in done.output.splitlines()
    (problem,) = [problem for problem in json.loads(invoke("check", "--json").output)["problems"]
                  if problem["path"] == "items/D-2.md"]
    assert (problem["code"], problem["severity"], problem["line"]) == ("misspelt-key", "warning", 4)


def test_check_warns_of_shell_words_in_a_command_drover_runs_without_a_shell(project):
    """A new user (on markupsafe) wrote `[notify] command = "cat > /tmp/night.json"`: `check` said
    `no problems found`, and the drive's end ran cat on a file named `>` (`cat: '>': No such file or
    directory`). `check` names the words only a shell reads, with the line; `sh -c '...'` passes."""
    config = project / "drover.toml"
    text = config.read_text()
    config.write_text(text.replace('[notify]\ncommand = ""', '[notify]\ncommand = "cat > /tmp/night.json"', 1)
                      .replace('[agent]\npreset = "claude"', '[agent]\npreset = "script"', 1)
                      .replace('command = ""', 'command = "sh agents/a.sh 2>&1 | tee log.txt"', 1))
    done = invoke("check")
    assert done.exit_code == 0, done.output  # warnings: the words may be meant for the program
    said = done.output.splitlines()
    line = line_of_key(project, "notify", "command")
    assert (f"warning: drover.toml:{line}: [notify] command: `>` is a plain word to its program, as drover runs "
            "the command without a shell; for a shell to read them: sh -c '...'") in said, done.output
    agent_line = line_of_key(project, "agent", "command")  # the agent's too (it said no line, as docs promise)
    assert (f"warning: drover.toml:{agent_line}: agent for implement: [agent] command: `2>&1`, `|` are plain words "
            "to its program, as drover runs the command without a shell; for a shell to read them: sh -c '...'") in said
    config.write_text(config.read_text() + '\n[agent.review]\npreset = "script"\ncommand = "sh r.sh && true"\n')
    said = invoke("check").output.splitlines()
    review_line = line_of_key(project, "agent.review", "command")
    assert (f"warning: drover.toml:{review_line}: agent for review: [agent.review] command: `&&` is a plain word to "
            "its program, as drover runs the command without a shell; for a shell to read them: sh -c '...'") in said
    config.write_text(text.replace('[notify]\ncommand = ""', '''[notify]\ncommand = "sh -c 'cat > /tmp/night.json'"''', 1))
    assert "plain word" not in invoke("check").output


def test_check_warns_of_a_keep_entry_written_as_a_pattern(project):
    """A new user (on markupsafe) kept what `pip install -e .` builds with `keep = [".venv",
    "src/markupsafe/*.so"]`: `check` said `no problems found`, and the clean, which reads each entry
    as a path, spared no .so. `check` says an entry holding `*`, `?` or `[` is no pattern."""
    config = project / "drover.toml"
    text = config.read_text()
    config.write_text(text.replace("keep = []", 'keep = [".venv", "src/markupsafe/*.so"]', 1))
    done = invoke("check")
    assert done.exit_code == 0, done.output
    line = line_of_key(project, "run", "keep")
    assert (f"warning: drover.toml:{line}: [run] keep: 'src/markupsafe/*.so' is a path, not a pattern: the clean "
            "spares only a file or folder named 'src/markupsafe/*.so'; name each path in full") in \
        done.output.splitlines(), done.output
    assert "'.venv'" not in done.output


def test_the_misspelt_key_warning_passes_over_a_cache_row_that_is_not_json(project):
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: two\ndepends_on: [D-1]\n---\nbody\n")
    assert invoke("check").exit_code == 0  # the cache holds both items now
    with sqlite3.connect(project / ".drover" / "ledger.db") as conn:  # another hand's row
        conn.execute("UPDATE item_files SET meta = '{not json' WHERE id = 'D-1'")
    conn.close()
    done = invoke("check")
    assert done.exit_code == 0 and "Traceback" not in done.output, done.output
    assert any("D-2.md:4: depends_on: did you mean deps?" in line for line in done.output.splitlines()), done.output


def test_check_warns_of_an_own_key_misspelt_or_in_another_case_and_not_of_project_keys(project):
    first = project / "items" / "D-1.md"
    first.write_text(first.read_text().replace("title: A thing", "Titel: A thing\nmigration: yes\npriority: 2"))
    config = project / "drover.toml"
    config.write_text(re.sub(r"^default = (.*)$", "default = \\1\nkinds = \"make kinds\"", config.read_text(),
                             count=1, flags=re.M))
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: two\nkinds: yes\nshelve: no\n---\nbody\n")
    warned = [line for line in invoke("check").output.splitlines() if "did you mean" in line]
    assert warned == [
        "warning: items/D-1.md:3: Titel: did you mean title? drover reads title for an item's title; this key is the "
        "project's own and drover ignores it",
        "warning: items/D-2.md:5: shelve: did you mean shelved? drover reads shelved for an item set aside; this key "
        "is the project's own and drover ignores it",
    ]  # kinds is a [verify] key: the project's, read by drover


def test_check_gives_a_missing_dep_the_deps_line_and_a_cycle_the_file_of_its_first_item(project):
    first = project / "items" / "D-1.md"
    first.write_text(first.read_text().replace("deps: []", "deps: [D-99]"))
    done = invoke("check")
    assert "items/D-1.md:5: D-1: dep D-99 has no file (no items/D-99.md)" in done.output.splitlines()
    first.write_text(first.read_text().replace("deps: [D-99]", "deps: [D-1]"))
    done = invoke("check")
    assert done.exit_code == 1 and "items/D-1.md: dependency cycle: D-1 -> D-1" in done.output.splitlines()
    (problem,) = [problem for problem in json.loads(invoke("check", "--json").output)["problems"]
                  if "dependency cycle" in problem["message"]]
    assert (problem["code"], problem["path"], problem["line"]) == ("dep-cycle", "items/D-1.md", None)


def test_check_warns_when_the_github_tracker_names_no_repository(project):
    """Hostile review 15: with `repo = ""` gh would take the repository from .git/config, which
    agents can write; finish then writes to no issue, and check says why before it matters."""
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('backend = "none"', 'backend = "github"', 1))
    said = [line for line in invoke("check").output.splitlines() if "[tracker] repo is empty" in line]
    assert len(said) == 1 and said[0].startswith("warning: drover.toml: [tracker] repo is empty"), said
    config.write_text(config.read_text().replace('repo = ""', 'repo = "acme/widgets"', 1))
    assert "[tracker] repo is empty" not in invoke("check").output


def test_a_repo_templates_switch_drover_cannot_read_is_refused_by_every_command_that_renders(project):
    use_override(project, "<% block checks %>\n- A project rule.\n<% endblock %>\n")
    for value in ("maybe", "00", "n", "disable"):
        for command in (("check",), ("prompt", "D-1"), ("run", "D-1", "--dry-run"), ("drive", "--dry-run")):
            result = invoke(*command, env={"DROVER_REPO_TEMPLATES": value})
            assert result.exit_code == 2, (value, command, result.output)
            assert result.output.splitlines() == [
                f"drover: DROVER_REPO_TEMPLATES='{value}' is neither on nor off: set it to 0, false, no or off to "
                "ignore the repository's templates, or to 1, true, yes, on or nothing to use them"]


@pytest.mark.parametrize("value", ["0", "off", "FALSE", " No "])
def test_repo_templates_off_in_any_accepted_spelling_ignores_the_override_and_quotes_the_value(project, value):
    use_override(project, "<% block checks %>\n- A project rule.\n<% endblock %>\n")
    shown = invoke("prompt", "D-1", "--slot", "implement", env={"DROVER_REPO_TEMPLATES": value})
    assert shown.exit_code == 0 and "- A project rule." not in shown.stdout
    assert shown.stderr.startswith(f"drover: warning: DROVER_REPO_TEMPLATES={value.strip()}: ignoring [prompts] implement")
    checked = invoke("check", env={"DROVER_REPO_TEMPLATES": value})
    assert f"warning: DROVER_REPO_TEMPLATES={value.strip()}: launches ignore the [prompts] files checked above" \
        in checked.stdout.splitlines()
    problems = json.loads(invoke("check", "--json", env={"DROVER_REPO_TEMPLATES": value}).stdout)["problems"]
    assert [(problem["code"], problem["severity"]) for problem in problems
            if "DROVER_REPO_TEMPLATES" in problem["message"]] == [("repo-templates-off", "warning")]


@pytest.mark.parametrize("value", ["", "1", "on", "Yes", "TRUE"])
def test_repo_templates_unset_empty_or_on_uses_the_override(project, value):
    use_override(project, "<% block checks %>\n- A project rule.\n<% endblock %>\n")
    shown = invoke("prompt", "D-1", "--slot", "implement", env={"DROVER_REPO_TEMPLATES": value})
    assert shown.exit_code == 0 and "- A project rule." in shown.stdout and "DROVER_REPO_TEMPLATES" not in shown.stderr


def test_with_repo_templates_off_the_ignored_files_problems_are_warnings_and_drive_is_not_refused(project):
    use_override(project, f"<% block scope %>\n<# drover-base: {OLD_SCOPE} #>\n- Mine.\n<% endblock %>\n"
                          "<% block done %>\n- {{ Tilte }}\n<% endblock %>\n")
    trusted = invoke("check")
    assert trusted.exit_code == 1
    assert invoke("drive", "--dry-run").exit_code == 1
    off = {"DROVER_REPO_TEMPLATES": "0"}
    untrusted = invoke("check", env=off)
    assert untrusted.exit_code == 0, untrusted.output
    lines = untrusted.stdout.splitlines()
    assert "warning: STALE OVERRIDE implement/scope in docs-internal/kickoff.tmpl" in lines
    assert any(line.startswith("warning: docs-internal/kickoff.tmpl:6: unknown field Tilte") for line in lines)
    assert invoke("drive", "--dry-run", env=off).exit_code == 0
    (project / "drover.toml").write_text((project / "drover.toml").read_text().replace(
        'branch = "drover/', 'branch = "a..b/'))  # the branch template is used whatever the switch says
    assert invoke("check", env=off).exit_code == 1


# --- check --json: each finding's code, path and line, set where it is made --------------------

COMMANDS_DOC = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def json_problems(*args: str) -> list[dict]:
    return json.loads(invoke("check", "--json", *args).output)["problems"]


def test_a_stale_override_and_a_whole_template_name_the_file_and_line_in_check_json(project):
    use_override(project, f"\n\n<% block scope %>\n<# drover-base: {OLD_SCOPE} #>\n- Mine.\n<% endblock %>\n")
    assert "STALE OVERRIDE implement/scope in docs-internal/kickoff.tmpl" in invoke("check").stdout.splitlines()
    (stale,) = [problem for problem in json_problems() if problem["code"] == "stale-override"]
    assert stale == {"code": "stale-override", "severity": "error", "path": "docs-internal/kickoff.tmpl", "line": 3,
                     "message": "STALE OVERRIDE implement/scope in docs-internal/kickoff.tmpl"}
    (project / "docs-internal" / "kickoff.tmpl").write_text("<% block scope %>\n- Mine.\n<% endblock %>\n\nFix {{ Id }}.\n")
    (whole,) = [problem for problem in json_problems() if problem["code"] == "whole-template"]
    assert (whole["path"], whole["line"]) == ("docs-internal/kickoff.tmpl", 5)
    assert whole["message"] == "WHOLE TEMPLATE implement in docs-internal/kickoff.tmpl"
    # the text line is SPEC's; the hint after it (stderr) says where the text outside the blocks is
    done = invoke("check")
    assert "WHOLE TEMPLATE implement in docs-internal/kickoff.tmpl" in done.stdout.splitlines()
    assert "a whole template: docs-internal/kickoff.tmpl:5 is outside every block" in done.stderr


@pytest.mark.parametrize("text_option", [["--diff"], ["--diff", "--format", "unified"], ["--update"],
                                         ["--update", "--dry-run"]])
def test_check_json_with_a_text_view_is_a_usage_error_and_stdout_holds_no_text(project, text_option):
    use_override(project, f"<% block scope %>\n<# drover-base: {OLD_SCOPE} #>\n- Mine.\n<% endblock %>\n")
    before = (project / "docs-internal" / "kickoff.tmpl").read_text()
    done = invoke("check", "--json", *text_option)
    assert done.exit_code == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"drover: --json prints the problems as JSON; {text_option[0]} prints text: give one of them"]
    assert (project / "docs-internal" / "kickoff.tmpl").read_text() == before  # --update merged nothing


@pytest.mark.parametrize(("args", "said"), [
    (["prompt", "D-1", "--diff-guidance"], "--diff-guidance lists the lines lean drops as text; --json prints the "
                                            "prompt: give one of them"),
    (["review", "D-1", "--print"], "--json goes with --dry-run; --print writes the prompt as text (`drover prompt "
                                   "ID --slot review --json` gives it as JSON)"),
], ids=["prompt-diff-guidance", "review-print"])
def test_a_text_only_view_asked_for_as_json_is_a_usage_error_not_text_on_stdout(project, args, said):
    done = invoke(*args, "--json")
    assert (done.exit_code, done.stdout, done.stderr.splitlines()) == (2, "", [f"drover: {said}"])
    assert invoke(*args).exit_code == 0  # the text view alone still works


@pytest.mark.parametrize(("text", "code", "line"), [
    ("<% block scpoe %>\n- x\n<% endblock %>\n", "template-block", 1),
    ("<% block done %>\n- x\n\n- {{ Titel }}\n<% endblock %>\n", "template-field", 4),
    ("<% block done %>\n<<<<<<< ours\n- a\n=======\n- b\n>>>>>>> theirs\n<% endblock %>\n", "template", 2),
    ("<% block done %>\n<% if %>\n<% endblock %>\n", "template", 2),  # a syntax error whose words say "block"
], ids=["unknown-block", "unknown-field", "conflict-marker", "syntax"])
def test_a_template_problem_has_its_code_and_place_whatever_the_file_is_named(project, text, code, line):
    (project / "docs-internal").mkdir()
    (project / "docs-internal" / "kickoff.jinja").write_text(text)
    config = project / "drover.toml"
    config.write_text(config.read_text().replace('implement = ""', 'implement = "docs-internal/kickoff.jinja"'))
    (problem,) = [problem for problem in json_problems() if problem["path"] == "docs-internal/kickoff.jinja"]
    assert (problem["code"], problem["line"], problem["severity"]) == (code, line, "error")
    assert problem["message"].startswith(f"docs-internal/kickoff.jinja:{line}: ")


def documented_codes() -> list[str]:
    """The codes the `--json` row of check's table lists in docs/commands.md, in its order."""
    (row,) = [line for line in COMMANDS_DOC.read_text().splitlines()
              if line.startswith('| `--json` | print `{"ok", "problems": [{"code"')]
    listed = row.split("`code` is one of ", 1)[1].split(". ", 1)[0]
    return re.findall(r"`([a-z-]+)`", listed)


@pytest.mark.parametrize("code", documented_codes())
def test_every_code_the_docs_list_is_one_a_finding_is_made_with(code):
    from drover.errors import ProblemCode

    member = ProblemCode(code)  # ValueError: the docs list a code drover does not define
    sources = (Path(templates.__file__).resolve().parent.parent).rglob("*.py")
    made = re.compile(rf"\bProblemCode\.{member.name}\b")
    assert any(made.search(path.read_text()) for path in sources), f"nothing makes {code}"


def test_the_docs_list_every_code_once():
    from drover.errors import ProblemCode

    listed = documented_codes()
    assert len(listed) == len(set(listed)) and set(listed) == {code.value for code in ProblemCode}


def test_check_warns_of_a_file_an_agent_command_names_that_base_does_not_hold(project):
    """`command = "sh agents/impl.sh"` with agents/impl.sh on disk, never committed: the item's
    worktree, made from base, has no such file and every run there fails. check names it, at the
    command's line; a draft (run in this checkout) and a committed file are no warning."""
    from helpers import git

    config = project / "drover.toml"
    text = config.read_text().replace('command = ""  ', 'command = "sh agents/impl.sh --notes=agents/notes.md"', 1)
    config.write_text(text + '\n[agent.draft]\ncommand = "sh agents/draft.sh"\n')
    (project / "agents").mkdir()
    for name in ("impl.sh", "notes.md", "draft.sh"):
        (project / "agents" / name).write_text("echo hi\n")
    git(project, "add", "drover.toml", "items")
    git(project, "commit", "-qm", "drover")
    checked = invoke("check")
    line = line_of_key(project, "agent", "command")
    said = [text for text in checked.stdout.splitlines() + checked.stderr.splitlines() if "not committed" in text]
    assert said == [f"warning: drover.toml:{line}: agent for implement: agents/{name} is not committed on main: the "
                    "item's worktree, made from main, will not have it and the run fails (commit it)"
                    for name in ("impl.sh", "notes.md")]
    assert checked.exit_code == 0  # a warning
    problems = json.loads(invoke("check", "--json").stdout)["problems"]
    assert [(p["code"], p["path"], p["line"]) for p in problems if "not committed" in p["message"]] == \
        [("agent-missing", "drover.toml", line)] * 2
    git(project, "add", "agents")
    git(project, "commit", "-qm", "the agents")
    assert "not committed" not in invoke("check").output


def test_diff_guidance_diffs_the_template_given_with_template_not_the_built_in(project):
    fenced = '{{ Id }}\n<% if Guidance == "detailed" %>\nA coaching line of this template alone.\n<% endif %>\n'
    done = invoke("prompt", "D-1", "--slot", "implement", "--diff-guidance", "--template", fenced)
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines() == ["- [~10 tokens] A coaching line of this template alone.",
                                        "lean drops 1 lines, about 10 tokens (4 characters a token)"]
    assert done.stderr.splitlines() == ["drover: warning: WHOLE TEMPLATE implement in --template"]  # as the prompt says


def test_check_format_without_diff_is_a_usage_error_not_ignored(project):
    done = invoke("check", "--format", "unified")
    assert (done.exit_code, done.stdout, done.stderr.splitlines()) == (
        2, "", ["drover: --format goes with --diff: it chooses the diff's view"])
    assert invoke("check", "--diff", "--format", "unified").exit_code == 0
