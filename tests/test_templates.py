"""The template engine: environment, overrides, resolution, provenance, strictness, check, diff, history."""
from __future__ import annotations

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jinja2.sandbox import ImmutableSandboxedEnvironment

from drover import prompts as templates
from drover.cli.views import colour_diff, use_color
from drover.config import Config, load_config
from drover.prompts.data import FIELD_NAMES, Dep, TemplateData
from drover.errors import DroverError, TemplateError

KICKOFF = "docs-internal/kickoff.tmpl"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def item(**changes) -> TemplateData:
    values = dict(Id="D-7", Title="Quote CSV fields", Path="items/D-7.md", Body="Do the thing.\n", VerifyCommand="make test")
    values.update(changes)
    return TemplateData(**values)


def write(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def scope_hash() -> str:
    return templates.default_hash("implement", "scope")


def scope_override(base: str | None, text: str = "- Touch only the export package.\n") -> str:
    head = f"<# drover-base: {base} #>\n" if base else ""
    return f"<# the project's scope rule #>\n\n<% block scope %>\n{head}{text}<% endblock %>\n"


def kickoff(repo: Path, text: str) -> Config:
    write(repo, KICKOFF, text)
    return Config(prompts={"implement": KICKOFF, "review": "", "draft": ""})


def render(repo: Path, config: Config, slot: str = "implement", data: TemplateData | None = None, **kw):
    return templates.render(slot, data or item(), root=repo, config=config, **kw)


# ---------------------------------------------------------------------------- the environment


def test_one_environment_with_the_house_syntax():
    env = templates.environment()
    assert env is templates.environment()
    assert (env.block_start_string, env.block_end_string) == ("<%", "%>")
    assert (env.comment_start_string, env.comment_end_string) == ("<#", "#>")
    assert (env.variable_start_string, env.variable_end_string) == ("{{", "}}")
    assert env.trim_blocks and env.lstrip_blocks and env.keep_trailing_newline
    assert env.autoescape is False
    assert isinstance(env, ImmutableSandboxedEnvironment)


def test_booleans_render_as_true_and_false(repo):
    text = render(repo, Config(), explicit="{{ Cleared }} {{ Is(\"migration\") }} {{ Repeated or Capped }}\n").text
    assert text == "False False False\n"
    assert render(repo, Config(), data=item(Cleared=True), explicit="{{ Cleared }}").text == "True"


def test_a_value_is_never_interpreted_as_a_template(repo):
    body = "Keep {{ x }} and <% if y %>z<% endif %> and <# c #> and {% raw %} as written.\n"
    text = render(repo, Config(), data=item(Body=body), explicit="{{ Body }}").text
    assert text == body
    assert body.strip() in render(repo, Config(), data=item(Body=body)).text


def test_statements_comments_and_whitespace_control(repo):
    source = "<# a comment #>\nA\n  <% if Is(\"migration\") %>\n  B\n  <% endif %>\nC\n"
    assert render(repo, Config(), data=item(Meta={"migration": "yes"}), explicit=source).text == "A\n  B\nC\n"
    assert render(repo, Config(), explicit=source).text == "A\nC\n"


def test_get_reads_frontmatter_and_is_empty_for_unknown_keys(repo):
    text = render(repo, Config(), data=item(Meta={"team": "data"}), explicit='[{{ Get("team") }}][{{ Get("nope") }}]').text
    assert text == "[data][]"


# ---------------------------------------------------------------------------- hashes and blocks


def test_base_hash_is_twelve_hex_of_the_stripped_normalised_source():
    source = "\r\n- one\r\n- two\r\n\r\n"
    assert templates.base_hash(source) == hashlib.sha256(b"- one\n- two").hexdigest()[:12]
    assert templates.base_hash(source) == templates.base_hash("- one\n- two")


def test_block_defaults_are_read_from_the_built_in():
    blocks = templates.builtin_blocks("implement")
    assert list(blocks)[:1] == ["scope"] and "done" in blocks and "checks" in blocks
    assert blocks["done"].strip() == "" and blocks["scope"].strip()
    source = templates.builtin_source("implement")
    assert f"<% block scope %>{blocks['scope']}<% endblock %>" in source


def test_schema_prompts_lists_every_block_with_hash_and_kind():
    entries = templates.schema_prompts()
    assert {(e["slot"], e["block"]) for e in entries} >= {
        ("implement", "scope"), ("implement", "done"), ("implement", "checks"),
        ("review", "verify"), ("review", "checks"), ("draft", "requirements"), ("draft", "checks"),
    }
    for entry in entries:
        assert set(entry) == {"slot", "block", "default", "hash", "addition"}
        assert entry["hash"] == templates.base_hash(entry["default"])
        assert entry["addition"] is (entry["default"] == "")
        assert entry["default"] == templates.builtin_blocks(entry["slot"])[entry["block"]].strip()
    json.dumps(entries)


# ---------------------------------------------------------------------------- overrides


def test_a_current_replacement_replaces_the_block_and_nothing_else(repo):
    config = kickoff(repo, scope_override(scope_hash()))
    rendered = render(repo, config)
    shipped = render(repo, Config()).text
    default = templates.builtin_blocks("implement")["scope"].strip() + "\n"
    assert rendered.text == shipped.replace(default, "- Touch only the export package.\n")
    assert rendered.warnings == ()
    assert templates.launch_warnings("implement", root=repo, config=config) == []


def test_a_stale_hash_warns_at_launch_and_fails_check(repo):
    config = kickoff(repo, scope_override("e1c001e5348d"))
    warning = f"STALE OVERRIDE implement/scope in {KICKOFF}"
    assert render(repo, config).warnings == (warning,)
    assert templates.launch_warnings("implement", root=repo, config=config) == [warning]
    assert templates.Finding(warning, True) in templates.check_templates(repo, config)


def test_a_replacement_without_a_hash_is_stale(repo):
    config = kickoff(repo, scope_override(None))
    warning = f"STALE OVERRIDE implement/scope in {KICKOFF}"
    assert templates.launch_warnings("implement", root=repo, config=config) == [warning]
    assert [f.message for f in templates.check_templates(repo, config)] == [warning]
    assert "- Touch only the export package." in render(repo, config).text


def test_an_addition_needs_no_hash(repo):
    config = kickoff(repo, "<% block done %>\n- Regenerate the schema.\n<% endblock %>\n")
    rendered = render(repo, config)
    assert rendered.warnings == ()
    assert "\n- Regenerate the schema.\n" in rendered.text
    assert templates.check_templates(repo, config) == []


def test_an_unknown_block_fails_with_the_nearest_real_one(repo):
    config = kickoff(repo, "\n<% block scpoe %>\nx\n<% endblock %>\n")
    with pytest.raises(TemplateError) as caught:
        render(repo, config)
    message = str(caught.value)
    assert message.startswith(f"{KICKOFF}:2: unknown block scpoe")
    assert "did you mean scope?" in message and "\n" not in message
    assert any("unknown block scpoe" in f.message and f.error for f in templates.check_templates(repo, config))


def test_a_duplicate_block_fails(repo):
    config = kickoff(repo, "<% block done %>\n- a\n<% endblock %>\n<% block done %>\n- b\n<% endblock %>\n")
    with pytest.raises(TemplateError, match=r"^docs-internal/kickoff.tmpl:4: duplicate block done"):
        render(repo, config)
    assert any("duplicate block done" in f.message for f in templates.check_templates(repo, config))


def test_text_outside_blocks_makes_a_whole_template(repo):
    config = kickoff(repo, "Fix {{ Id }} and nothing else.\n<% block scope %>\nmine\n<% endblock %>\n")
    rendered = render(repo, config)
    assert rendered.text == "Fix D-7 and nothing else.\nmine\n"
    warning = f"WHOLE TEMPLATE implement in {KICKOFF}"  # SPEC's words: the path as drover.toml writes it
    assert rendered.warnings == (warning,)
    assert templates.launch_warnings("implement", root=repo, config=config) == [warning]
    assert templates.Finding(warning, True) in templates.check_templates(repo, config)


def test_a_statement_outside_blocks_also_makes_a_whole_template(repo):
    config = kickoff(repo, '<% if Is("x") %>\n<% endif %>\n<% block scope %>\nmine\n<% endblock %>\n')
    assert render(repo, config).warnings == (f"WHOLE TEMPLATE implement in {KICKOFF}",)


def test_the_whole_template_finding_is_placed_at_the_line_of_the_first_stray_text(repo):
    def placed() -> list[tuple[str, str | None, int | None]]:
        return [(f.message, f.path, f.line) for f in templates.check_templates(repo, config)]

    blocks = "<# rules #>\n<% block done %>\n- a\n<% endblock %>\n\n"
    whole = f"WHOLE TEMPLATE implement in {KICKOFF}"
    config = kickoff(repo, blocks + "\n  Stray words.\n<% block checks %>\n- b\n<% endblock %>\n")
    assert render(repo, config).warnings == (whole,)
    assert placed() == [(whole, KICKOFF, 7)]
    config = kickoff(repo, blocks + '<% if Is("x") %>\n<% endif %>\n')
    assert placed() == [(whole, KICKOFF, 6)]
    config = kickoff(repo, blocks + "{{ Id }}\n")
    assert placed() == [(whole, KICKOFF, 6)]


def test_an_override_saved_with_a_byte_order_mark_is_still_block_overrides(repo):
    text = "<% block done %>\n- A rule.\n<% endblock %>\n"
    write(repo, KICKOFF, "")
    (repo / KICKOFF).write_bytes(b"\xef\xbb\xbf" + text.encode())
    config = Config(prompts={"implement": KICKOFF})
    rendered = render(repo, config)
    assert rendered.warnings == ()
    assert rendered.text.startswith("You are the implementing agent") and "\n- A rule.\n" in rendered.text
    assert [f for f in templates.check_templates(repo, config) if f.error] == []
    (repo / "alt.tmpl").write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert render(repo, Config(), explicit="@alt.tmpl").text == rendered.text


def test_comments_and_blank_lines_between_blocks_are_allowed(repo):
    text = "<# one #>\n\n<% block done %>\n- a\n<% endblock %>\n\n<# two #>\n<% block checks %>\n- b\n<% endblock %>\n"
    assert render(repo, kickoff(repo, text)).warnings == ()


def test_an_override_may_use_fields_and_a_crlf_file_still_matches_its_hash(repo):
    text = scope_override(scope_hash(), '- Touch only {{ Path }}.\n<% if Is("migration") %>\n- Number migrations.\n<% endif %>\n')
    write(repo, KICKOFF, "")
    (repo / KICKOFF).write_bytes(text.replace("\n", "\r\n").encode())
    config = Config(prompts={"implement": KICKOFF})
    rendered = render(repo, config, data=item(Meta={"migration": True}))
    assert rendered.warnings == ()
    assert "- Touch only items/D-7.md.\n- Number migrations.\n" in rendered.text


# ---------------------------------------------------------------------------- resolution and provenance


def test_resolution_order_explicit_then_prompts_file_then_built_in(repo):
    write(repo, "alt.tmpl", "from the explicit file {{ Id }}\n")
    config = kickoff(repo, "from the prompts file\n")
    assert render(repo, config, explicit="inline {{ Id }}").text == "inline D-7"
    assert render(repo, config, explicit="@alt.tmpl").text == "from the explicit file D-7\n"
    assert render(repo, config).text == "from the prompts file\n"
    assert render(repo, Config()).text == render(repo, Config(prompts={"implement": ""})).text
    assert render(repo, Config()).text.startswith("You are the implementing agent")


def test_explicit_paths_are_relative_to_the_repository_root(repo, monkeypatch):
    write(repo, "prompts/alt.tmpl", "root-relative\n")
    (repo / "sub").mkdir()
    monkeypatch.chdir(repo / "sub")
    assert render(repo, Config(), explicit="@prompts/alt.tmpl").text == "root-relative\n"


def test_provenance_records_sources_hashes_and_digests(repo):
    builtin = render(repo, Config())
    assert builtin.provenance.requested == builtin.provenance.resolved == "builtin:implement.tmpl"
    assert builtin.provenance.base_hashes == {}
    assert builtin.provenance.template_sha256 == hashlib.sha256(templates.builtin_source("implement").encode()).hexdigest()
    assert builtin.provenance.prompt_sha256 == hashlib.sha256(builtin.text.encode()).hexdigest()

    text = scope_override(scope_hash()) + "<% block done %>\n- more\n<% endblock %>\n"
    config = kickoff(repo, text)
    over = render(repo, config)
    assert over.provenance.requested == over.provenance.resolved == f"prompts:{KICKOFF}"
    assert over.provenance.base_hashes == {"scope": scope_hash(), "done": ""}
    assert over.provenance.prompt_sha256 == hashlib.sha256(over.text.encode()).hexdigest()
    assert over.provenance.template_sha256 not in (builtin.provenance.template_sha256, hashlib.sha256(text.encode()).hexdigest())

    stale = render(repo, kickoff(repo, scope_override("e1c001e5348d")))
    assert stale.provenance.base_hashes == {"scope": "e1c001e5348d"}

    inline = render(repo, config, explicit="just {{ Id }}")
    assert (inline.provenance.requested, inline.provenance.resolved) == ("inline", "inline")
    assert inline.provenance.template_sha256 == hashlib.sha256(b"just {{ Id }}").hexdigest()

    write(repo, "alt.tmpl", "alt\n")
    explicit = render(repo, config, explicit="@alt.tmpl")
    assert (explicit.provenance.requested, explicit.provenance.resolved) == ("@alt.tmpl", "@alt.tmpl")


def test_repo_templates_off_ignores_repository_files_and_says_so(repo, monkeypatch):
    write(repo, "alt.tmpl", "explicit file\n")
    config = kickoff(repo, "whole prompts file\n")
    monkeypatch.setenv("DROVER_REPO_TEMPLATES", "0")
    shipped = render(repo, Config()).text

    rendered = render(repo, config)
    assert rendered.text == shipped
    assert rendered.provenance.requested == f"prompts:{KICKOFF}"
    assert rendered.provenance.resolved == "builtin:implement.tmpl"
    assert len(rendered.warnings) == 1 and "DROVER_REPO_TEMPLATES=0" in rendered.warnings[0]
    assert KICKOFF in rendered.warnings[0]
    assert templates.launch_warnings("implement", root=repo, config=config) == list(rendered.warnings)

    explicit = render(repo, config, explicit="@alt.tmpl")
    assert explicit.text == shipped and explicit.provenance.requested == "@alt.tmpl"
    assert any("@alt.tmpl" in w for w in explicit.warnings)

    assert render(repo, config, explicit="inline still works").text == "inline still works"


@pytest.mark.parametrize("how", ["dotdot", "symlink", "symlinked folder"])
def test_paths_outside_the_repository_are_refused(repo, tmp_path, how):
    outside = tmp_path / "outside.tmpl"
    outside.write_text("<% block done %>\n- smuggled\n<% endblock %>\n")
    if how == "dotdot":
        written = "../outside.tmpl"
    elif how == "symlink":
        (repo / "link.tmpl").symlink_to(outside)
        written = "link.tmpl"
    else:
        (repo / "shared").symlink_to(tmp_path)
        written = "shared/outside.tmpl"
    config = Config(prompts={"implement": written})
    with pytest.raises(TemplateError, match="outside the repository") as caught:
        render(repo, config)
    assert str(caught.value).startswith(f"{written}: ")
    with pytest.raises(TemplateError, match="outside the repository"):
        render(repo, Config(), explicit=f"@{written}")
    assert [f.error for f in templates.check_templates(repo, config) if "outside the repository" in f.message] == [True]


def test_a_symlink_inside_the_repository_is_allowed(repo):
    write(repo, "real/kick.tmpl", "<% block done %>\n- linked\n<% endblock %>\n")
    (repo / "link.tmpl").symlink_to(repo / "real" / "kick.tmpl")
    assert "- linked\n" in render(repo, Config(prompts={"implement": "link.tmpl"})).text


def test_a_missing_override_file_is_a_clear_error(repo):
    with pytest.raises(TemplateError, match=r"^nope\.tmpl: cannot read the template"):
        render(repo, Config(prompts={"implement": "nope.tmpl"}))


def test_prompts_files_load_from_drover_toml(repo):
    write(repo, "drover.toml", f'[prompts]\nreview = "{KICKOFF}"\n')
    write(repo, KICKOFF, "<% block checks %>\n- Check the changelog.\n<% endblock %>\n")
    config = load_config(repo / "drover.toml")
    assert "\n- Check the changelog.\n" in render(repo, config, slot="review").text
    assert "Check the changelog" not in render(repo, config, slot="implement").text


# ---------------------------------------------------------------------------- strictness


def test_an_unknown_field_fails_with_did_you_mean_and_the_field_list(repo):
    with pytest.raises(TemplateError) as caught:
        render(repo, Config(), explicit="Hello\n{{ Tilte }}\n")
    message = str(caught.value)
    assert message.startswith("--template:2: unknown field Tilte (did you mean Title?)")
    assert "fields: " + ", ".join(FIELD_NAMES) in message


def test_an_unknown_field_fails_even_on_a_branch_not_taken(repo):
    config = kickoff(repo, "<% block done %>\n<% if Capped %>\n- {{ Posure }}\n<% endif %>\n<% endblock %>\n")
    with pytest.raises(TemplateError, match=r"^docs-internal/kickoff.tmpl:3: unknown field Posure \(did you mean Posture\?\)"):
        render(repo, config)
    assert any("unknown field Posure" in f.message and f.error for f in templates.check_templates(repo, config))


def test_a_mistyped_filter_or_test_names_the_nearest_real_one(repo):
    with pytest.raises(TemplateError) as caught:
        render(repo, Config(), explicit="Hello\n{{ Title | uper }}\n")
    assert str(caught.value) == "--template:2: No filter named 'uper' (did you mean upper?)"
    # a test in a condition is looked up only as it renders: the same hint, in a failed render's words
    with pytest.raises(TemplateError) as caught:
        render(repo, Config(), explicit="<% if Title is strng %>x<% endif %>\n")
    assert str(caught.value) == "--template:1: template failed: No test named 'strng' (did you mean string?)"
    config = kickoff(repo, "<% block done %>\n{{ super() }}{{ Title | trimm }}\n<% endblock %>\n")
    assert any("No filter named 'trimm' (did you mean trim?)" in f.message and f.error
               for f in templates.check_templates(repo, config))
    with pytest.raises(TemplateError) as caught:  # nothing near: Jinja's words as they are
        render(repo, Config(), explicit="{{ Title | zzqqxx }}\n")
    assert str(caught.value) == "--template:1: No filter named 'zzqqxx'."


@pytest.mark.parametrize("tag, word", [('<% include "implement.tmpl" %>', "include"),
                                       ('<% import "review.tmpl" as r %>', "import"),
                                       ('<% from "implement.tmpl" import y %>', "import")])
def test_an_override_that_reads_another_template_is_refused_at_its_own_line(repo, tag, word):
    """`from "implement.tmpl" import y` in a block failed as `builtin_templates/implement.tmpl:35: unknown
    field Guidance (did you mean Guidance?)`: the built-in blamed, an import reading it without fields."""
    config = kickoff(repo, f"<% block done %>\n{{{{ super() }}}}\n{tag}\n<% endblock %>\n")
    with pytest.raises(TemplateError) as caught:
        render(repo, config)
    assert str(caught.value).startswith(f"docs-internal/kickoff.tmpl:3: {word}: drover's templates read no other "
                                        "template; write the text in this one")
    assert [f.line for f in templates.check_templates(repo, config) if f.error and word in f.message] == [3]
    with pytest.raises(TemplateError, match=r"^--template:2: extends: "):
        render(repo, Config(), explicit='x\n<% extends "implement.tmpl" %>\n')


def test_an_unknown_attribute_on_a_loop_variable_fails(repo):
    source = "<% for d in Deps %>\n{{ d.Id }} {{ d.Levle }}\n<% endfor %>\nx\n"
    with pytest.raises(TemplateError) as caught:
        render(repo, Config(), explicit=source)
    assert str(caught.value).startswith("--template:2: unknown field Levle on d, a Dep (did you mean Level?)")
    with pytest.raises(TemplateError) as caught:  # the article agrees with the type's name
        render(repo, Config(), explicit="<% for o in Owned %>{{ o.Lables }}<% endfor %>x")
    assert str(caught.value).startswith("--template:1: unknown field Lables on o, an OwnedIssue (did you mean Labels?)")
    for good in (
        "<% for d in Deps|sort(attribute='Id') %>{{ d.Level }}<% endfor %>x",
        "<% for c in Recent.Commits %>{{ c.Sha }}<% endfor %>x",
        "<% for d in Destinations %>{{ d.Wrap(2) }}<% endfor %>x",
        "{{ Origin.Title }}x",
    ):
        render(repo, Config(), explicit=good)
    with pytest.raises(TemplateError, match="did you mean Subject"):
        render(repo, Config(), explicit="<% for c in Recent.Commits %>{{ c.Subjet }}<% endfor %>x")
    with pytest.raises(TemplateError, match="did you mean Title"):
        render(repo, Config(), explicit="{{ Origin.Titel }}")


@pytest.mark.parametrize("source, refused", [
    ("{{ FollowUps }}x", "--template:1: FollowUps is a list of FollowUp, which has no text of its own: loop over it "
                         "and print its members (<% for x in FollowUps %>{{ x.Number }}<% endfor %>)"),
    ("x\n{{ Recent }}", "--template:2: Recent is a Recent, which has no text of its own: print one of its members "
                        "(Commits, Unavailable, Omitted)"),
    ("{{ Recent.Commits }}x", "--template:1: Recent.Commits is a list of Commit"),
    ("<% for d in Deps %>{{ d }}<% endfor %>x", "--template:1: d is a Dep, which has no text of its own"),
    ("{{ Unnamed }}x", '--template:1: Unnamed is a list, which has no text of its own: join it '
                       '({{ Unnamed | join(", ") }}) or loop over it'),
    ("{{ Meta }}x", '--template:1: Meta is a map, which has no text of its own: print one key (Meta["key"])'),
])
def test_a_structured_value_printed_whole_is_refused_naming_it(repo, source, refused):
    with pytest.raises(TemplateError) as caught:
        render(repo, Config(), explicit=source)
    assert str(caught.value).startswith(refused)


def test_a_structured_value_printed_whole_is_refused_in_the_branch_template_and_by_check(repo):
    with pytest.raises(TemplateError, match=r"^--template:1: FollowUps is a list of FollowUp, which has no text"):
        templates.render("branch", item(), root=repo, config=Config(), explicit="x/{{ FollowUps }}")
    config = kickoff(repo, "<% block done %>\n- {{ Origin }}\n<% endblock %>\n")
    assert [(f.message.split(",")[0], f.error) for f in templates.check_templates(repo, config)] == [
        (f"{KICKOFF}:2: Origin is an Origin", True)]


def test_a_structured_value_reached_another_way_is_refused_when_it_prints(repo):
    data = item(Deps=(Dep(Id="D-1"),))
    with pytest.raises(TemplateError, match=r"^--template:2: a Dep has no text of its own: print one of its members "
                                            r"\(Id, Title, "):
        render(repo, Config(), data=data, explicit="x\n{{ Deps[0] }}\n")
    with pytest.raises(TemplateError, match=r"^--template:1: a list has no text of its own"):
        render(repo, Config(), data=data, explicit="{{ Unnamed if Capped else Conflicts }}x")
    with pytest.raises(TemplateError, match=r"^--template:1: a Recent has no text of its own"):
        render(repo, Config(), data=data, explicit="<% set r = Recent %>{{ r }}x")


def test_the_members_and_lists_of_structured_values_print(repo):
    data = item(Deps=(Dep(Id="D-1"), Dep(Id="D-2")), Unnamed=("a.py", "b.py"))
    source = ("{{ Unnamed | join(', ') }}|{{ Deps | length }}|{{ Deps | map(attribute='Id') | join(' ') }}|"
              "{{ Recent.Unavailable }}{{ Origin.Number }}|{{ range(3) | list }}|{{ Meta.kind }}\n")
    assert render(repo, Config(), data=data, explicit=source).text == "a.py, b.py|2|D-1 D-2|0|[0, 1, 2]|\n"


def test_an_error_at_render_time_names_the_file_and_line(repo):
    config = kickoff(repo, "<% block done %>\n\n- {{ Deps[0].Id }}\n<% endblock %>\n")
    with pytest.raises(TemplateError) as caught:
        render(repo, config)
    assert str(caught.value).startswith(f"{KICKOFF}:3: ")
    assert "no element 0" in str(caught.value)


def test_a_missing_map_key_renders_empty(repo):
    config = kickoff(repo, "<% block done %>\n- [{{ Meta.nokey }}][{{ VerifyCommands['nokey'] }}]\n<% endblock %>\n")
    assert "\n- [][]\n" in render(repo, config).text


def test_a_parse_error_names_the_file_and_line(repo):
    config = kickoff(repo, "<% block done %>\n- <% if %>\n<% endblock %>\n")
    with pytest.raises(TemplateError, match=r"^docs-internal/kickoff.tmpl:2: "):
        render(repo, config)
    findings = templates.check_templates(repo, config)
    assert len(findings) == 1 and findings[0].message.startswith(f"{KICKOFF}:2: ") and findings[0].error


def test_a_render_of_only_whitespace_fails(repo):
    with pytest.raises(TemplateError, match="rendered only whitespace"):
        render(repo, Config(), explicit="<% if Capped %>\nsomething\n<% endif %>\n  \n")


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ Get.__globals__ }}",
    "{{ Meta.update({'a': 1}) }}",
    "<% for d in Destinations %>{{ d.Wrap.__func__.__globals__ }}<% endfor %>x",
])
def test_sandbox_escapes_are_refused(repo, source):
    with pytest.raises(TemplateError, match="sandbox refused"):
        render(repo, Config(), data=item(Destinations=_one_destination()), explicit=source)


def _one_destination():
    from drover.prompts.data import Destination

    return (Destination(Token="t", Where="w", Found="f", Do="d"),)


def test_a_sandbox_escape_in_an_override_is_refused_too(repo):
    config = kickoff(repo, "<% block done %>\n- {{ ''.__class__.__mro__ }}\n<% endblock %>\n")
    with pytest.raises(TemplateError, match=r"^docs-internal/kickoff.tmpl:2: the template sandbox refused"):
        render(repo, config)


def test_is_and_get_keys_no_item_uses_are_warnings(repo):
    config = kickoff(repo, '<% block done %>\n<% if Is("migraton") %>\n- m\n<% endif %>\n{{ Get("kind") }}\n<% endblock %>\n')
    findings = templates.check_templates(repo, config, used_keys={"migration"})
    assert findings == [templates.Finding(f'{KICKOFF}:2: Is("migraton") names a frontmatter key no item uses', False)]
    assert templates.check_templates(repo, config, used_keys={"migraton"}) == []
    assert templates.check_templates(repo, config) == []


def test_check_reports_a_broken_branch_template(repo):
    findings = templates.check_templates(repo, Config(branch="drover/{{ Idd | lower }}"))
    assert len(findings) == 1 and "unknown field Idd (did you mean Id?)" in findings[0].message


def test_check_is_quiet_for_a_clean_project(repo):
    assert templates.check_templates(repo, Config()) == []


# ---------------------------------------------------------------------------- the branch slot


def test_render_branch_uses_the_item_and_hides_tracker_fields():
    data = item(Id="D-12", RegisterUnreadable="gh down", Kind="bug")
    assert templates.render_branch(data, "drover/{{ Id | lower }}") == "drover/d-12"
    assert templates.render_branch(data, "{{ Kind }}/{{ Id }}{{ RegisterUnreadable }}{{ FollowUps | length }}") == "bug/D-120"
    with pytest.raises(TemplateError, match="did you mean Id"):
        templates.render_branch(data, "{{ Idd }}")
    with pytest.raises(TemplateError, match="only whitespace"):
        templates.render_branch(data, "{{ Branch }}")


def test_render_accepts_the_branch_slot(repo):
    rendered = templates.render("branch", item(), root=repo, config=Config(branch="work/{{ Id }}"))
    assert rendered.text == "work/D-7"


# ---------------------------------------------------------------------------- check --diff


def _old_default(monkeypatch, tmp_path) -> tuple[str, str, list[str]]:
    """Put an older scope default into a private history; return its hash, today's, and today's lines."""
    today_lines = templates.builtin_blocks("implement")["scope"].strip().splitlines()
    old = "\n".join([today_lines[0] + " OLD TAIL", *today_lines[1:], "- A removed bullet."])
    history = tmp_path / "history.json"
    history.write_text(json.dumps({"implement/scope": {templates.base_hash(old): old}}))
    monkeypatch.setattr(templates.history, "history_path", lambda: history)
    return templates.base_hash(old), scope_hash(), today_lines


def test_diff_shows_the_change_since_the_recorded_base(repo, monkeypatch, tmp_path):
    old, today, lines = _old_default(monkeypatch, tmp_path)
    config = kickoff(repo, scope_override(old))
    expected = [
        f"==> implement/scope in {KICKOFF}",
        f"--- {old} (the override's base)",
        f"+++ {today} (today's default)",
        f"- {lines[0]} OLD TAIL",
        f"+ {lines[0]}",
        *[f"  {line}" for line in lines[1:]],
        "- - A removed bullet.",
    ]
    assert templates.diff_stale(repo, config, ) == "\n".join(expected) + "\n"


def test_diff_in_colour_marks_removed_added_and_rewritten_words(repo, monkeypatch, tmp_path):
    old, _, lines = _old_default(monkeypatch, tmp_path)
    config = kickoff(repo, scope_override(old))
    coloured = templates.diff_stale(repo, config, paint=colour_diff)
    assert ANSI.sub("", coloured) == templates.diff_stale(repo, config, )
    out = coloured.splitlines()
    rewritten_old, rewritten_new = out[3], out[4]
    assert rewritten_old.startswith("\x1b[31m- ") and rewritten_new.startswith("\x1b[32m+ ")
    assert "\x1b[1m OLD TAIL\x1b[22m" in rewritten_old
    assert rewritten_old.count("\x1b[2m") >= 1 and "\x1b[2m" in rewritten_new
    assert out[-1] == "\x1b[31m- - A removed bullet.\x1b[0m"
    assert out[5] == f"  {lines[1]}"


def test_diff_names_the_block_and_todays_hash_for_an_unknown_or_missing_base(repo):
    config = kickoff(repo, scope_override("abcdefabcdef"))
    assert templates.diff_stale(repo, config, ) == (
        f"==> implement/scope in {KICKOFF}\n"
        f"base abcdefabcdef is not a default this drover has shipped; today's default is {scope_hash()}\n"
    )
    config = kickoff(repo, scope_override(None))
    out = templates.diff_stale(repo, config, )
    assert out.startswith(f"==> implement/scope in {KICKOFF}\n") and scope_hash() in out and "---" not in out


def test_diff_is_empty_when_nothing_is_stale(repo):
    assert templates.diff_stale(repo, kickoff(repo, scope_override(scope_hash())), paint=colour_diff) == ""
    assert templates.diff_stale(repo, Config(), ) == ""


class _Stream(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_colour_decision(monkeypatch):
    assert use_color("always", _Stream(False)) is True
    assert use_color("never", _Stream(True)) is False
    assert use_color("auto", _Stream(True)) is True
    assert use_color("auto", _Stream(False)) is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color("auto", _Stream(True)) is False
    with pytest.raises(DroverError):
        use_color("sometimes", _Stream(True))


# ---------------------------------------------------------------------------- history


def test_history_holds_every_current_default():
    history = templates.load_history()
    assert templates.missing_history() == [], "run `make history` and commit builtin_templates/history.json"
    for entry in templates.schema_prompts():
        if not entry["addition"]:
            key = f"{entry['slot']}/{entry['block']}"
            assert history[key][entry["hash"]] == entry["default"]
    for key, versions in history.items():
        for digest, source in versions.items():
            assert templates.base_hash(source) == digest, key


def test_record_history_adds_todays_defaults_and_keeps_old_ones(tmp_path):
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"implement/scope": {"0123456789ab": "an old default"}}))
    added = templates.record_history(path)
    history = json.loads(path.read_text())
    assert history["implement/scope"]["0123456789ab"] == "an old default"
    assert history["implement/scope"][scope_hash()] == templates.builtin_blocks("implement")["scope"].strip()
    assert f"implement/scope {scope_hash()}" in added
    assert templates.record_history(path) == []


def test_record_history_is_a_module_command():
    result = subprocess.run([sys.executable, "-m", "drover.prompts.history"], capture_output=True, text=True)
    assert result.returncode == 2 and "--record" in result.stderr
    checked = subprocess.run([sys.executable, "-m", "drover.prompts.history", "--check"], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout


# ---------------------------------------------------------------------------- guidance diff


def test_guidance_diff_lists_what_lean_drops_with_token_counts(repo):
    dropped = templates.guidance_diff("implement", item(), root=repo, config=Config())
    lean = render(repo, Config(), data=item(Guidance="lean")).text.splitlines()
    assert dropped and all(line.strip() for line, _ in dropped)
    assert any(line not in lean for line, _ in dropped)
    for line, tokens in dropped:
        assert tokens == (len(line) + 3) // 4


def test_launch_warnings_for_an_unknown_slot_is_a_usage_error(repo):
    with pytest.raises(DroverError, match="unknown template slot"):
        templates.launch_warnings("deploy", root=repo, config=Config())


def test_dep_fields_reach_templates(repo):
    data = item(Deps=(Dep(Id="D-1", Level="reviewed"),))
    assert render(repo, Config(), data=data, explicit="<% for d in Deps %>{{ d.Id }}={{ d.Level }}<% endfor %>").text == "D-1=reviewed"


@pytest.mark.parametrize("slot", ["implement", "review", "draft"])
def test_builtin_fields_are_known(slot):
    """render() skips the static field walk for the shipped templates; this is where it runs."""
    assert templates.field_problems(templates.builtin_source(slot), templates.builtin_display(slot)) == []


def test_compiled_builtins_are_cached_outside_the_repository(repo, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    templates.environment.cache_clear()
    try:
        env = templates.environment()
        env.get_template(templates.builtin_name("implement"))
        assert list((cache / "drover" / "jinja").glob("sandbox-*.cache"))
    finally:
        templates.environment.cache_clear()
