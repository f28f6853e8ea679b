"""Compiled templates come from the user's cache folder when it holds the very same text: the
cached and the compiled render agree, an edited text is compiled again, and a damaged or
unwritable cache only costs the compile."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from jinja2.bccache import bc_magic

from drover import prompts as templates
from drover.config import Config
from drover.prompts.data import TemplateData
from drover.errors import TemplateError
from drover.prompts import env as template_env
from drover.prompts.rendering import render_template

OVERRIDE = "<% block scope %>Scope of {{ Id }}: {{ Title | upper }}\n<% endblock %>\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache folder and environment; compile_template's memory cleared on both sides."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    monkeypatch.delenv("DROVER_NO_CACHE", raising=False)
    template_env.environment.cache_clear()
    template_env.compile_template.cache_clear()
    yield folder / "drover" / "jinja"
    template_env.environment.cache_clear()
    template_env.compile_template.cache_clear()


def render(text: str, display: str = "inline") -> str:
    data = TemplateData(Id="D-7", Title="Quote CSV fields")
    template = template_env.compile_template(text, display)
    template_env.compile_template.cache_clear()  # the next call reads the cache folder again
    return render_template(template, data, {display: display})


def entries(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.glob("sandbox-*.cache")}


def test_a_cached_compile_renders_as_a_fresh_one(cache, monkeypatch):
    text = "<% for n in [1, 2] %>{{ Id }}-{{ n }} {{ lower(Title) }}\n<% endfor %>"
    first = render(text)
    kept = entries(cache)
    assert len(kept) == 1
    compiles = []
    real = template_env.environment().compile
    monkeypatch.setattr(template_env.environment(), "compile", lambda *a, **k: compiles.append(a) or real(*a, **k))
    assert render(text) == first == "D-7-1 quote csv fields\nD-7-2 quote csv fields\n"
    assert compiles == []  # the second render came from the cache
    monkeypatch.setenv("DROVER_NO_CACHE", "1")
    template_env.environment.cache_clear()
    assert render(text) == first  # and without any cache, the same text


def test_an_edited_text_is_compiled_again_not_taken_from_the_cache(cache):
    assert render("{{ Id }} one") == "D-7 one"
    assert render("{{ Id }} two") == "D-7 two"  # same name, new text: the stale entry is not used
    assert render("{{ Id }} one") == "D-7 one"


@pytest.mark.parametrize("damage", [
    lambda kept: b"",
    lambda kept: b"\x00" * 40,
    lambda kept: kept[:-7],  # truncated
    lambda kept: bc_magic + b"\x80\x05garbage",  # the right header, then what pickle cannot read
])
def test_a_damaged_cache_entry_is_compiled_again(cache, damage):
    assert render("{{ Title }}!") == "Quote CSV fields!"
    for path in cache.glob("sandbox-*.cache"):
        path.write_bytes(damage(path.read_bytes()))
    assert render("{{ Title }}!") == "Quote CSV fields!"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only folders")
def test_an_unwritable_cache_folder_is_ignored(cache):
    cache.mkdir(parents=True)
    cache.chmod(0o500)
    try:
        assert render("{{ Id }}") == "D-7"
        assert not entries(cache)
    finally:
        cache.chmod(0o700)


def test_a_cache_entry_that_cannot_be_replaced_is_ignored(cache):
    assert render("{{ Id }}") == "D-7"
    for path in cache.glob("sandbox-*.cache"):
        path.unlink()
        path.mkdir()  # a folder where the entry should be: neither read nor replaced
    assert render("{{ Id }}") == "D-7"


def test_the_shipped_branch_template_has_no_unknown_fields():
    """render_branch skips the static field walk and the Go syntax check for the default [run]
    branch; this is where they run."""
    from drover.prompts.gosyntax import go_syntax_error

    assert templates.field_problems(Config().branch, "drover.toml: [run] branch") == []
    assert go_syntax_error(Config().branch, "drover.toml: [run] branch") is None
    assert templates.render_branch(TemplateData(Id="D-7"), Config().branch) == "drover/d-7"


def test_a_branch_template_other_than_the_default_is_still_checked():
    with pytest.raises(TemplateError, match="unknown field Idd"):
        templates.render_branch(TemplateData(Id="D-7"), "drover/{{ Idd }}")


def test_an_override_renders_the_same_from_the_cache(cache, tmp_path):
    root = tmp_path / "repo"
    (root / "tmpl").mkdir(parents=True)
    (root / "tmpl" / "implement.tmpl").write_text(OVERRIDE)
    data = TemplateData(Id="D-7", Title="Quote CSV fields")
    first = templates.render("implement", data, root=root, config=Config(), explicit="@tmpl/implement.tmpl")
    assert "Scope of D-7: QUOTE CSV FIELDS" in first.text
    assert len(entries(cache)) == 2  # the built-in the override extends, and the override
    template_env.compile_template.cache_clear()
    again = templates.render("implement", data, root=root, config=Config(), explicit="@tmpl/implement.tmpl")
    assert again == first
