"""The override lifecycle through the command line: write, upgrade by merge, diff, syntax help."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from drover import prompts as templates
from drover.cli.main import cli
from helpers import initialized, invoke, made_once
from drover.prompts.resources import builtin_dir

OLD_SCOPE = "2c3ce7b7956f"  # the first shipped implement/scope default, kept in history.json
KICKOFF = "docs-internal/kickoff.tmpl"


@pytest.fixture
def project(repo):
    """drover init and one item, D-1, uncommitted
    (made once per test process, then copied: helpers.made_once)."""
    made_once(repo, ("test_override_cli",), lambda: _project(repo))
    return repo


def _project(repo: Path) -> None:
    initialized(repo)
    assert invoke("new", "A thing").exit_code == 0


def use_override(root: Path, text: str, slot: str = "implement") -> Path:
    path = root / KICKOFF
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    config = root / "drover.toml"
    config.write_text(config.read_text().replace(f'{slot} = ""', f'{slot} = "{KICKOFF}"', 1))
    return path


def old_scope_lines() -> list[str]:
    return templates.load_history()["implement/scope"][OLD_SCOPE].splitlines()


def scope_block(base: str, lines: list[str]) -> str:
    return "<% block scope %>\n<# drover-base: " + base + " #>\n" + "\n".join(lines) + "\n<% endblock %>\n"


def errors_of(result) -> list[str]:
    return [line for line in result.output.splitlines() if not line.startswith("warning:")]


# ---------------------------------------------------------------------------- drover override SLOT BLOCK


def test_override_writes_the_default_with_its_hash_and_the_prompts_key(project):
    before = invoke("prompt", "D-1", "--slot", "implement").output
    result = invoke("override", "implement", "scope")
    assert result.exit_code == 0, result.output
    today = templates.default_hash("implement", "scope")
    assert result.output.splitlines() == [
        f"wrote today's default (base {today}) of implement/scope to prompts/implement.tmpl",
        'added [prompts] implement = "prompts/implement.tmpl" to drover.toml',
    ]
    written = (project / "prompts" / "implement.tmpl").read_text()
    assert f"<# drover-base: {today} #>" in written
    assert templates.builtin_blocks("implement")["scope"].strip() in written
    assert 'implement = "prompts/implement.tmpl"' in (project / "drover.toml").read_text()
    assert invoke("check").exit_code == 0
    assert invoke("prompt", "D-1", "--slot", "implement").output == before


def test_override_keeps_other_blocks_and_writes_additions(project):
    before = invoke("prompt", "D-1", "--slot", "implement").output
    assert invoke("override", "implement", "scope").exit_code == 0
    added = invoke("override", "implement", "done")
    assert added.output.splitlines() == ["wrote an addition for implement/done to prompts/implement.tmpl"]
    extra = invoke("override", "implement", "scope", "--file", "other.tmpl")
    assert extra.exit_code == 1 and "already prompts/implement.tmpl" in extra.output
    again = invoke("override", "implement", "scope")
    assert again.exit_code == 1 and "already overrides implement/scope" in again.output
    text = (project / "prompts" / "implement.tmpl").read_text()
    assert [b.name for b in templates.find_blocks(text)] == ["scope", "done"]
    assert invoke("check").exit_code == 0
    assert invoke("prompt", "D-1", "--slot", "implement").output == before


def test_override_addition_keeps_the_default_lines_and_is_never_stale(project):
    before = invoke("prompt", "D-1", "--slot", "review").output
    result = invoke("override", "review", "verify", "--addition", "--file", "review.tmpl")
    assert result.exit_code == 0, result.output
    path = project / "review.tmpl"
    assert "{{ super() -}}" in path.read_text() and "drover-base" not in path.read_text()
    assert invoke("prompt", "D-1", "--slot", "review").output == before
    path.write_text(path.read_text().replace("<% endblock %>", "- Run the linter too.\n<% endblock %>"))
    after = invoke("prompt", "D-1", "--slot", "review").output
    default_last = templates.builtin_blocks("review")["verify"].strip().splitlines()[-1]
    assert f"{default_last}\n- Run the linter too.\n" in after
    assert invoke("check").exit_code == 0


def test_override_names_an_unknown_block(project):
    result = invoke("override", "implement", "scop")
    assert result.exit_code == 2
    assert "no block scop in the implement template (did you mean scope?)" in result.output


def test_override_refuses_a_whole_template_file(project):
    use_override(project, "My own prompt for {{ Id }}.\n")
    result = invoke("override", "implement", "done")
    assert result.exit_code == 1 and "replaces the whole implement template" in result.output


# ---------------------------------------------------------------------------- --update


def test_update_merges_cleanly_and_records_todays_hash(project):
    lines = old_scope_lines()
    ours = [lines[0].replace("requirements.", "requirements, and nothing else."), *lines[1:]]
    assert ours != lines
    path = use_override(project, "<# the project's rule #>\n" + scope_block(OLD_SCOPE, ours))
    dry = invoke("check", "--update", "--dry-run")
    assert dry.exit_code == 0 and "==> implement/scope in " + KICKOFF in dry.output
    assert dry.output.startswith(f"would merge implement/scope in {KICKOFF}")
    assert OLD_SCOPE in path.read_text()
    result = invoke("override", "--update")
    today = templates.default_hash("implement", "scope")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [f"merged implement/scope in {KICKOFF} (base {OLD_SCOPE} -> {today})"]
    text = path.read_text()
    assert text.startswith("<# the project's rule #>\n")
    body = templates.find_blocks(text)[0].source
    assert f"<# drover-base: {today} #>" in body
    assert ours[0] in body
    for line in templates.builtin_blocks("implement")["scope"].strip().splitlines()[1:]:
        assert line in body
    assert invoke("check").exit_code == 0


def test_update_conflict_writes_markers_keeps_the_hash_and_exits_1(project):
    lines = old_scope_lines()
    ours = [*lines[:-1], lines[-1] + " Name the test that covers it."]
    path = use_override(project, scope_block(OLD_SCOPE, ours))
    result = invoke("check", "--update")
    today = templates.default_hash("implement", "scope")
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        f"CONFLICT implement/scope in {KICKOFF}: resolve the marked lines, then set drover-base: {today}"]
    text = path.read_text()
    assert f"drover-base: {OLD_SCOPE}" in text
    assert "\n<<<<<<< your implement/scope" in text and "\n=======\n" in text and "\n>>>>>>> drover's default" in text
    checked = invoke("check")
    assert checked.exit_code == 1
    assert any("unresolved merge conflict marker" in line for line in checked.output.splitlines())
    again = invoke("override", "--update")  # never merges a merge: the markers stay as they are
    assert again.exit_code == 1 and "still holds the markers of an earlier merge" in again.output
    assert path.read_text() == text
    # Resolving: keep both, record today's hash; check is clean.
    start, end = text.index("<<<<<<<"), text.index(">>>>>>>")
    end = text.index("\n", end) + 1
    resolved = ours[-1] + "\n" + "\n".join(templates.builtin_blocks("implement")["scope"].strip().splitlines()[3:]) + "\n"
    path.write_text(text[:start] + resolved + text[end:])
    path.write_text(path.read_text().replace(OLD_SCOPE, today))
    assert invoke("check").exit_code == 0


def test_update_reports_an_unknown_base_and_changes_nothing(project):
    text = scope_block("0123456789ab", ["- Our own rule."])
    path = use_override(project, text)
    result = invoke("override", "--update")
    assert result.exit_code == 1
    assert result.output.startswith("UNKNOWN BASE implement/scope in docs-internal/kickoff.tmpl: its base 0123456789ab")
    assert path.read_text() == text


@pytest.mark.parametrize("how", ["not first", "more words"])
def test_a_drover_base_comment_that_does_not_open_the_block_is_named_with_its_line(project, how):
    today = templates.default_hash("implement", "scope")
    if how == "not first":
        text = f"<% block scope %>\n- Our own rule.\n<# drover-base: {today} #>\n<% endblock %>\n"
    else:
        text = f"<% block scope %>\n\n<# drover-base: {today} (scope, as of v2) #>\n- Our own rule.\n<% endblock %>\n"
    path = use_override(project, text)
    must_open = "the drover-base comment must open the block, alone: <# drover-base: HASH #> on its first line"
    checked = invoke("check")
    assert checked.exit_code == 1
    assert f"{KICKOFF}:3: block scope: {must_open}" in checked.stdout.splitlines()
    assert "no drover-base hash recorded" not in invoke("check", "--diff").output
    assert f"line 3: {must_open}, so none is recorded" in invoke("check", "--diff").output
    updated = invoke("override", "--update")
    assert updated.exit_code == 1
    assert updated.output == f"UNKNOWN BASE implement/scope in {KICKOFF}:3: {must_open}, so none is recorded (not updated)\n"
    assert path.read_text() == text


def test_update_refuses_a_whole_template_with_the_reason(project):
    use_override(project, "My own prompt for {{ Id }}.\n")
    result = invoke("override", "--update")
    assert result.exit_code == 1
    assert "WHOLE TEMPLATE implement in docs-internal/kickoff.tmpl:1: refused, a whole-template override has no blocks" \
        in result.output


def test_an_override_edited_after_the_merge_keeps_its_edit(project):
    lines = old_scope_lines()
    ours = [lines[0].replace("requirements.", "requirements, and nothing else."), *lines[1:]]
    path = use_override(project, scope_block(OLD_SCOPE, ours))
    assert invoke("override", "--update").exit_code == 0
    edited = path.read_text().replace("<% endblock %>", "- Our later rule.\n<% endblock %>")
    path.write_text(edited)
    assert invoke("check").exit_code == 0
    again = invoke("override", "--update")
    assert again.exit_code == 0 and again.output == "every override is up to date\n"
    assert path.read_text() == edited
    assert "- Our later rule.\n" in invoke("prompt", "D-1", "--slot", "implement").output


# ---------------------------------------------------------------------------- check --diff


def test_unified_diff_applies_with_git(project, tmp_path):
    use_override(project, scope_block(OLD_SCOPE, ["- Our own rule."]))
    result = CliRunner().invoke(cli, ["check", "--diff", "--format", "unified"], catch_exceptions=False)
    assert result.exit_code == 1
    patch = result.stdout
    assert patch.startswith("--- a/implement.tmpl#scope\t") and "\n+++ b/implement.tmpl#scope\t" in patch
    assert "\n@@ -1," in patch
    assert "STALE OVERRIDE" not in patch
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=scratch, check=True)
    (scratch / "implement.tmpl#scope").write_text(templates.load_history()["implement/scope"][OLD_SCOPE] + "\n")
    (scratch / "change.patch").write_text(patch)
    subprocess.run(["git", "apply", "--check", "change.patch"], cwd=scratch, check=True)
    subprocess.run(["git", "apply", "change.patch"], cwd=scratch, check=True)
    assert (scratch / "implement.tmpl#scope").read_text() == templates.builtin_blocks("implement")["scope"].strip() + "\n"


def test_the_unified_diff_is_for_reading_not_for_git_apply_and_says_so(project):
    use_override(project, scope_block(OLD_SCOPE, ["- Our own rule."]))
    (project / "change.patch").write_text(invoke("check", "--diff", "--format", "unified").stdout)
    stat = subprocess.run(["git", "apply", "--stat", "change.patch"], cwd=project, capture_output=True, text=True)
    assert stat.returncode == 0 and "implement.tmpl#scope" in stat.stdout
    applied = subprocess.run(["git", "apply", "--check", "change.patch"], cwd=project, capture_output=True, text=True)
    assert applied.returncode != 0 and "implement.tmpl#scope: No such file or directory" in applied.stderr
    assert "git apply," not in " ".join(invoke("check", "--help").output.split())


def test_diff_prints_the_other_problems_too(project):
    use_override(project, "My own prompt for {{ Id }}.\n")
    result = invoke("check", "--diff")
    assert result.exit_code == 1
    assert "WHOLE TEMPLATE implement in docs-internal/kickoff.tmpl" in result.output.splitlines()
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [unclosed\n---\n")
    result = invoke("check", "--diff")
    assert any(line.startswith("items/D-2.md") for line in result.output.splitlines())


# ---------------------------------------------------------------------------- the shipped history


def test_history_holds_the_text_of_every_shipped_default():
    root = Path(builtin_dir())
    history = templates.load_history()
    assert templates.missing_history() == []
    for key, texts in history.items():
        for digest, text in texts.items():
            assert text.strip() and templates.base_hash(text) == digest, key
    repo = root.parent
    if not (repo / ".git").exists():
        pytest.skip("not a source checkout: no git history to compare with")
    commits = subprocess.run(["git", "log", "--format=%H", "--", "builtin_templates/"], cwd=repo,
                             capture_output=True, text=True, check=True).stdout.split()
    for commit in commits:
        for slot in templates.SLOTS:
            shown = subprocess.run(["git", "show", f"{commit}:builtin_templates/{slot}.tmpl"], cwd=repo,
                                   capture_output=True, text=True, check=False)
            if shown.returncode:
                continue
            for block in templates.find_blocks(shown.stdout):
                if block.source.strip():
                    assert templates.base_hash(block.source) in history[f"{slot}/{block.name}"], (commit, block.name)


def test_schema_prompts_and_the_history_agree(project):
    schema = json.loads(invoke("schema", "--prompts").output)
    history = templates.load_history()
    for entry in schema:
        if entry["addition"]:
            continue
        assert history[f"{entry['slot']}/{entry['block']}"][entry["hash"]] == entry["default"]


# ---------------------------------------------------------------------------- the syntax forgives


def test_go_template_syntax_is_refused_with_the_drover_form(project):
    use_override(project, '{{define "done"}}\n- A rule.\n{{end}}\n')
    result = invoke("check")
    assert result.exit_code == 1
    assert (f"{KICKOFF}:1: drover blocks are written <% block done %> ... <% endblock %> "
            "(this looks like Go template syntax)") in result.output.splitlines()
    prompt = invoke("prompt", "D-1", "--slot", "implement")
    assert prompt.exit_code == 2 and "(this looks like Go template syntax)" in prompt.output
    use_override(project, "<% block done %>\n- {{ .Title }}\n<% endblock %>\n")
    assert "drover fields are written {{ Title }} (no leading dot)" in invoke("check").output


def test_a_go_condition_is_answered_with_a_drover_form_that_renders(project):
    """The seed's "vary by kind" condition, and Go's other comparison and logic functions: the
    line check prints names a Jinja condition, and that condition renders."""
    cases = {
        '{{- if eq (.Get "kind") "bug" }}': 'Get("kind") == "bug"',
        '{{ if not (.Is "migration") }}': 'not Is("migration")',
        '{{ if and (.Is "migration") (ne .Kind "bug") }}': 'Is("migration") and (Kind != "bug")',
        '{{ if gt (len .Deps) 2 }}': "Deps | length > 2",
        '{{ if eq (index .Meta "team") "core" }}': 'Meta["team"] == "core"',
        '{{ if eq .Kind "bug" "chore" }}': 'Kind == "bug" or Kind == "chore"',
    }
    for go, jinja in cases.items():
        use_override(project, f"<% block done %>\n{go}\n- Reproduce first.\n{{{{ end }}}}\n<% endblock %>\n")
        assert (f"{KICKOFF}:2: drover statements are written <% if {jinja} %> ... <% endif %> "
                "(this looks like Go template syntax)") in invoke("check").output.splitlines(), go
        use_override(project, f"<% block done %>\n<% if {jinja} %>\n- Reproduce first.\n<% endif %>\n<% endblock %>\n")
        assert invoke("prompt", "D-1", "--slot", "implement").exit_code == 0, jinja
    # Go's `else if`, the first Go action of its block: Jinja's elif, and the condition as above
    use_override(project, '<% block done %>\n<% if Is("migration") %>\n- Back it up.\n'
                          '{{ else if eq (.Get "kind") "bug" }}\n- Reproduce first.\n<% endif %>\n<% endblock %>\n')
    assert (f"{KICKOFF}:4: drover statements are written <% elif Get(\"kind\") == \"bug\" %> "
            "(this looks like Go template syntax)") in invoke("check").output.splitlines()
    use_override(project, '<% block done %>\n<% if Is("migration") %>\n- Back it up.\n'
                          '<% elif Get("kind") == "bug" %>\n- Reproduce first.\n<% endif %>\n<% endblock %>\n')
    assert invoke("prompt", "D-1", "--slot", "implement").exit_code == 0


def test_jinja_calls_and_go_text_kept_in_raw_blocks_or_comments_are_not_taken_for_go_syntax(project):
    use_override(project, "<% block done %>\n- Items: {{ range(3) | list | join(',') }}.\n"
                          "<% raw %>\n- Go code writes {{ .Name }} and {{ if .Ok }}.\n<% endraw %>\n"
                          "<# {{ range .Deps }} is Go #>\n<% endblock %>\n")
    result = invoke("check")
    assert result.exit_code == 0, result.output
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- Items: 0,1,2.\n" in out and "\n- Go code writes {{ .Name }} and {{ if .Ok }}.\n" in out
    use_override(project, "<% block done %>\n- {{ range .Deps }}\n<% endblock %>\n")
    assert "drover statements are written <% for x in Deps %> ... <% endfor %>" in invoke("check").output
    use_override(project, "<% block done %>\n- {{ if}}\n<% endblock %>\n")
    assert "(this looks like Go template syntax)" in invoke("check").output
    # Jinja's call with a space before its parenthesis, and Jinja's tags quoted in an expression's string
    use_override(project, '<% block done %>\n- {{ range (3) | list | join(",") }} and {{ "{% x %}" }}.\n<% endblock %>\n')
    result = invoke("check")
    assert result.exit_code == 0 and "Go template" not in result.output and "default syntax" not in result.output, \
        result.output
    assert "\n- 0,1,2 and {% x %}.\n" in invoke("prompt", "D-1", "--slot", "implement").output


def test_jinja_default_delimiters_are_a_warning_naming_drover_syntax(project):
    use_override(project, "<% block checks %>\n<% for d in Deps %>\n{% if d.Weak %}\n- Recheck {{ d.Id }}.\n"
                          "{% endif %}\n<% endfor %>\n{# a note #}\n"
                          "<% raw %>\n- Jinja writes {% if x %}.\n<% endraw %>\n<# {% not this %} #>\n<% endblock %>\n")
    result = invoke("check")
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if KICKOFF in line]
    assert warnings == [
        f"warning: {KICKOFF}:3: {{% if d.Weak %}} is Jinja's default syntax, which drover does not read: it reaches "
        "the agent as text; drover's statement syntax is <% ... %> ({{ ... }} stays the expression syntax)",
        f"warning: {KICKOFF}:5: {{% endif %}} is Jinja's default syntax, which drover does not read: it reaches "
        "the agent as text; drover's statement syntax is <% ... %> ({{ ... }} stays the expression syntax)",
        f"warning: {KICKOFF}:7: {{# a note #}} is Jinja's default syntax, which drover does not read: it reaches "
        "the agent as text; drover's comment syntax is <# ... #> ({{ ... }} stays the expression syntax)",
    ]

def test_a_block_is_whole_lines_even_written_inline(project):
    use_override(project, "<% block done %>- Regenerate the client.<% endblock %>\n")
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- Regenerate the client.\n- `" in out or "\n- Regenerate the client.\n" in out
    assert "client.- " not in out and "client.\n\n" not in out
    result = invoke("check")
    assert result.exit_code == 0
    assert any(line.startswith(f"warning: {KICKOFF}:1: block done: its last line has no newline")
               for line in result.output.splitlines())


def test_a_closing_tag_that_trims_does_not_glue_the_block_onto_the_next_line(project):
    """`<%- endblock %>` strips the block's last newline as Jinja reads it: the block still lands as
    whole lines (SPEC 8.2), and check warns as for a last line written without a newline."""
    use_override(project, "<% block done %>\n- Regenerate the client.\n<%- endblock %>\n")
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- Regenerate the client.\n- " in out
    assert "client.- " not in out and "client.\n\n" not in out
    result = invoke("check")
    assert result.exit_code == 0
    assert any(line.startswith(f"warning: {KICKOFF}:1: block done: its last line has no newline")
               for line in result.output.splitlines())
    use_override(project, "<% block done %>\n- Regenerate.\n<% if true %>\n- Commit it.\n<% endif %>\n<%- endblock %>\n")
    assert "\n- Regenerate.\n- Commit it.\n- " in invoke("prompt", "D-1", "--slot", "implement").output
    assert not any("has no newline" in line for line in invoke("check").output.splitlines())


def test_functions_work_like_filters_and_are_suggested(project):
    use_override(project, "<% block done %>\n- {{ lower(Title) }} {{ upper(Id) }} {{ join(['a', 'b'], '+') }} [{{ trim('  x ') }}]\n<% endblock %>\n")
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- a thing D-1 a+b [x]\n" in out
    use_override(project, "<% block done %>\n- {{ lowr(Title) }}\n<% endblock %>\n")
    result = invoke("check")
    assert "unknown field lowr (did you mean lower?)" in result.output
    assert "functions: lower, upper, join, trim" in result.output


def test_a_missing_map_key_renders_empty_and_check_warns(project):
    use_override(project, '<% block done %>\n- [{{ Meta["team"] }}] [{{ VerifyCommands["migration"] }}]\n<% endblock %>\n')
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- [] []\n" in out
    result = invoke("check")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert f'warning: {KICKOFF}:2: Meta["team"] names a frontmatter key no item uses (it renders empty)' in lines
    assert f'warning: {KICKOFF}:2: VerifyCommands["migration"] names no [verify] entry (it renders empty)' in lines


def test_check_knows_a_key_an_item_sets_at_the_top_level_only(project):
    # check looks a named key up in the items' cached frontmatter text; a nested key is not one
    use_override(project, '<% block done %>\n- [{{ Meta["team"] }}] [{{ Get("owner") }}]\n<% endblock %>\n')
    item = project / "items" / "D-1.md"
    item.write_text(item.read_text().replace("kind:", 'extra: {team: x, "owner": y}\nnote: \'"team": z\'\nkind:', 1))
    lines = invoke("check").output.splitlines()
    assert f'warning: {KICKOFF}:2: Meta["team"] names a frontmatter key no item uses (it renders empty)' in lines
    assert f'warning: {KICKOFF}:2: Get("owner") names a frontmatter key no item uses' in lines
    assert invoke("new", "Another").exit_code == 0
    other = project / "items" / "D-2.md"
    other.write_text(other.read_text().replace("kind:", "team: core\nowner: ann\nkind:", 1))
    assert "no item uses" not in invoke("check").output


def test_prompt_branch_ignores_a_repository_file_when_repository_templates_are_off(project, monkeypatch):
    # docs/templates.md's trust boundary: DROVER_REPO_TEMPLATES=0 ignores `--template @path`, every slot
    (project / "branch.tmpl").write_text("theirs/{{ Id }}\n")
    monkeypatch.setenv("DROVER_REPO_TEMPLATES", "0")
    result = invoke("prompt", "D-1", "--slot", "branch", "--template", "@branch.tmpl")
    assert result.exit_code == 0 and result.stdout == "drover/d-1\n", result.output
    assert result.stderr == ("drover: warning: DROVER_REPO_TEMPLATES=0: ignoring --template @branch.tmpl "
                             "(a repository file); using [run] branch\n")
    inline = invoke("prompt", "D-1", "--slot", "branch", "--template", "mine/{{ Id }}")
    assert inline.exit_code == 0 and inline.output == "mine/D-1\n"  # inline text is the operator's own


def test_prompt_branch_renders_the_template_given(project):
    result = invoke("prompt", "D-1", "--slot", "branch", "--template", "work/{{ lower(Id) }}")
    assert result.exit_code == 0 and result.output == "work/d-1\n"
    bad = invoke("prompt", "D-1", "--slot", "branch", "--template", "a..b/{{ Id }}")
    assert bad.exit_code == 2 and "not a valid git branch name" in bad.output
    # the name it renders is the given template's fault, not drover.toml's
    assert bad.output == ("drover: --template: the branch template renders 'a..b/D-1' for D-1, "
                          "which is not a valid git branch name\n"), bad.output
    (project / "bad-branch.tmpl").write_text("a b/{{ Id }}\n")
    bad = invoke("prompt", "D-1", "--slot", "branch", "--template", "@bad-branch.tmpl")
    assert bad.exit_code == 2 and bad.output.startswith("drover: bad-branch.tmpl: the branch template renders "), bad.output
    # an error names the template as every slot's does: --template, or the file of @path
    wrong = invoke("prompt", "D-1", "--slot", "branch", "--template", "x/{{ FollowUps }}")
    assert wrong.exit_code == 2 and wrong.output.startswith("drover: --template:1: FollowUps is a list of FollowUp")
    (project / "branch.tmpl").write_text("x/\n{{ Idd }}\n")
    wrong = invoke("prompt", "D-1", "--slot", "branch", "--template", "@branch.tmpl")
    assert wrong.exit_code == 2 and wrong.output.startswith("drover: branch.tmpl:2: unknown field Idd")


@pytest.mark.parametrize("command", [("prompt", "D-1"), ("prompt", "D-1", "--slot", "branch"), ("run", "D-1")])
@pytest.mark.parametrize("given", ["", "  ", "@"])
def test_an_empty_template_given_is_refused_not_taken_for_the_built_in(project, command, given):
    """`--template "$VAR"` with the variable unset rendered the built-in prompt, and a run recorded
    its source as an inline template (a new user): an empty SRC is a usage error, nothing launched."""
    result = invoke(*command, "--template", given)
    assert result.exit_code == 2 and "Invalid value for '--template': it is empty" in result.output, result.output
    assert not (project / ".drover" / "runs").exists() or not any((project / ".drover" / "runs").iterdir())


def test_check_finds_a_branch_template_that_renders_an_invalid_name(project):
    config = project / "drover.toml"
    text = config.read_text()
    assert "\nbranch = " in text
    lines = [('branch = "a..b/{{ Id }}"' if line.startswith("branch = ") else line) for line in text.splitlines()]
    config.write_text("\n".join(lines) + "\n")
    result = invoke("check")
    assert result.exit_code == 1
    assert "drover.toml: [run] branch: renders 'a..b/D-1' for a sample item, which is not a valid git branch name" \
        in result.output


# ---------------------------------------------------------------------------- render limits


@pytest.mark.parametrize("expression", [
    "{{ 'x' * 10**10 }}",
    "{{ '%*d' % (10**9, 1) }}",
    "{{ '%0999999999d' % 1 }}",
    "{{ 'x' | indent(10**10) }}",
    "{{ 'x' | center(10**10) }}",
    "{{ 'x'.ljust(10**10) }}",
    "{{ '{:>99999999999}'.format(1) }}",
    "{{ 2 ** (10 ** 10) }}",
    "<% set ns = namespace(s='x' * 1000) %><% for i in range(40) %><% set ns.s = ns.s ~ ns.s %><% endfor %>",
    "<% macro f(n) %>{{ f(n + 1) }}<% endmacro %>{{ f(0) }}",
    "<% for i in range(100000) %><% for j in range(100000) %>{{ '' }}<% endfor %><% endfor %>",
])
def test_a_template_cannot_exhaust_the_machine(project, expression, monkeypatch):
    if "range(100000)" in expression:  # only the render deadline stops it: a shorter one, the same refusal
        monkeypatch.setattr("drover.prompts.limits.RENDER_SECONDS", 1.0)
    use_override(project, f"<% block done %>\n- {expression}\n<% endblock %>\n")
    result = invoke("prompt", "D-1", "--slot", "implement")
    assert result.exit_code == 2
    lines = result.output.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"drover: {KICKOFF}") and "template failed" in lines[0], lines
    checked = invoke("check")
    assert checked.exit_code == 1 and any("template failed" in line for line in checked.output.splitlines())


def test_big_numbers_that_build_nothing_big_still_render(project):
    use_override(project, "<% block done %>\n- {{ '%d' % 10**12 }} {{ 10**20 }} {{ '%5d' % 7 }}\n<% endblock %>\n")
    out = invoke("prompt", "D-1", "--slot", "implement").output
    assert "\n- 1000000000000 100000000000000000000     7\n" in out


def test_check_finds_sandbox_violations_and_runtime_errors(project):
    use_override(project, "<% block done %>\n- {{ Title.__class__ }} {{ Deps[0].Id }}\n<% endblock %>\n")
    result = invoke("check")
    assert result.exit_code == 1
    assert any(line.startswith(f"{KICKOFF}:2: ") for line in result.output.splitlines())


# ---------------------------------------------------------------------------- destination words


@pytest.mark.parametrize("tracker, expected, absent", [
    ('backend = "none"', "write it under a heading `Follow-ups` in your final report", "file an issue"),
    ('backend = "file"\nregister = "notes/follow-ups.md"', "add a row `- D-1: HEADLINE` to notes/follow-ups.md",
     "file an issue"),
    ('backend = "github"\nrepo = "acme/widgets"\nfollow_up_label = "later"',
     "file an issue on acme/widgets labelled `later`", "final report (this project"),
])
def test_follow_up_destination_speaks_the_configured_tracker(project, tracker, expected, absent):
    config = project / "drover.toml"
    text = config.read_text()
    start = text.index("[tracker]")
    end = text.find("\n[", start + 1)
    config.write_text(text[:start] + "[tracker]\n" + tracker + "\n" + (text[end:] if end != -1 else ""))
    out = " ".join(invoke("prompt", "D-1", "--slot", "implement").output.split())
    assert expected in out
    assert absent not in out


# ---------------------------------------------------------------------------- vanished deps


def test_check_reports_a_vanished_dep_in_the_prompts_words(project):
    assert invoke("new", "Second", "--dep", "D-1").exit_code == 0
    (project / "items" / "D-1.md").unlink()
    result = invoke("check")
    assert result.exit_code == 1
    assert any(line.startswith("items/D-2.md:5: D-2: dep D-1 has no file (no items/D-1.md")
               for line in result.output.splitlines()), result.output
    prompt = invoke("prompt", "D-2", "--slot", "implement").output
    assert "- D-1 (items/D-1.md): has no file" in prompt
    second = project / "items" / "D-2.md"
    second.write_text(second.read_text().replace("deps: [D-1]", "deps: [D-1, D-5]"))
    result = invoke("check")
    assert "items/D-2.md:5: D-2: dep D-5 has no file (no items/D-5.md)" in result.output.splitlines()


@pytest.mark.parametrize("args, message", [
    (["override"], "say which block: drover override SLOT BLOCK"),
    (["override", "implement", "scope", "--update"], "--update takes no SLOT"),
    (["override", "implement", "scope", "--dry-run"], "--dry-run goes with --update"),
    (["check", "--dry-run"], "--dry-run goes with --update"),
])
def test_override_usage_errors_are_one_line_exit_2(project, args, message):
    result = invoke(*args)
    assert result.exit_code == 2 and message in result.output and len(result.output.splitlines()) == 1


@pytest.mark.parametrize("args, near", [
    (["override", "implment", "scope"], "implement"), (["override", "Review", "checks"], "review"),
    (["prompt", "D-1", "--slot", "brnch"], "branch"),
])
def test_a_misspelt_slot_is_refused_in_one_line_with_the_nearest_slot(project, args, near):
    result = invoke(*args)
    assert result.exit_code == 2 and len(result.output.splitlines()) == 1
    assert "is not one of 'implement', 'review', 'draft'" in result.output
    assert f". Did you mean '{near}'? (see `cli {args[0]} --help`)" in result.output  # the runner names it cli
    assert "Did you mean" not in invoke("override", "nothing", "scope").output  # nothing near: click's words alone


def test_override_adds_the_prompts_table_when_drover_toml_has_none(project):
    config = project / "drover.toml"
    text = config.read_text()
    start = text.index("[prompts]")
    end = text.find("\n[", start + 1)
    config.write_text(text[:start] + (text[end + 1:] if end != -1 else ""))
    assert "[prompts]" not in config.read_text()
    result = invoke("override", "draft", "requirements", "--file", "docs/draft.tmpl")
    assert result.exit_code == 0, result.output
    assert config.read_text().endswith('\n[prompts]\ndraft = "docs/draft.tmpl"\n')
    assert invoke("check").exit_code == 0


@pytest.mark.parametrize("header", ["[prompts]                 # override files", "[prompts]"], ids=["commented", "bare"])
def test_override_keeps_a_crlf_drover_toml_crlf_and_finds_its_prompts_table(project, header):
    config = project / "drover.toml"
    lines = config.read_text().splitlines()
    lines[next(at for at, line in enumerate(lines) if line.startswith("[prompts]"))] = header
    config.write_bytes("".join(line + "\r\n" for line in lines).encode())
    result = invoke("override", "implement", "scope")
    assert result.exit_code == 0, result.output
    written = config.read_bytes().decode()
    assert written.count("[prompts]") == 1
    assert written.replace("\r\n", "").count("\n") == 0  # every line, the new one too, ends as the file's did
    assert 'implement = "prompts/implement.tmpl"' in written
    assert invoke("check").exit_code == 0


def test_override_finds_the_prompts_table_on_the_first_line_after_a_byte_order_mark(project):
    """Hostile review 50: the [prompts] header was looked for at a line's start, and a drover.toml
    saved with a byte-order mark (which drover reads) whose first line is `[prompts]` has the mark
    before it: override added a second [prompts] table, and every command then refused the file."""
    config = project / "drover.toml"
    lines = config.read_text().splitlines()
    at = next(at for at, line in enumerate(lines) if line.startswith("[prompts]"))
    table = [lines[at]] + [line for line in lines[at + 1:] if line.split(" ", 1)[0] in ("implement", "review", "draft")]
    rest = [line for line in lines if line not in table]
    config.write_bytes(("\ufeff" + "".join(line + "\n" for line in table + [""] + rest)).encode())
    assert invoke("check").exit_code == 0
    result = invoke("override", "implement", "scope")
    assert result.exit_code == 0, result.output
    written = config.read_bytes().decode()
    assert written.startswith("\ufeff[prompts]") and written.count("[prompts]") == 1
    assert 'implement = "prompts/implement.tmpl"' in written
    assert invoke("check").exit_code == 0


def test_override_and_update_write_a_crlf_override_file_in_crlf(project):
    path = use_override(project, "")
    path.write_bytes(("\ufeff" + scope_block(OLD_SCOPE, old_scope_lines()).replace("\n", "\r\n")).encode())
    assert invoke("override", "implement", "done").exit_code == 0  # a block added to the file
    assert invoke("override", "--update").exit_code == 0  # a stale one merged in it
    written = path.read_bytes().decode()
    assert written.startswith("\ufeff<% block scope %>\r\n")  # its byte-order mark kept
    assert "<% block done %>" in written and f"drover-base: {templates.default_hash('implement', 'scope')}" in written
    assert written.replace("\r\n", "").count("\n") == 0  # every line ends as the file's did
    assert invoke("check").exit_code == 0
