"""The item file: parsing, the unreadable states, sections, ids, atomic writes."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import HOSTILE_FRONTMATTER, chunk, findings_text

from drover.items import file as itemfile
from drover.items.file import CHANGES_HEADING, CLEARED_MARKER, ID_MISMATCH, MISSING, NO_BODY, NO_PARSE, NOT_AN_ID, SHELVED, Unreadable, cleared_block, demote_headings, headline, new_item_text, parse_item, read_item, replace_section, section_span, write_atomic

GOOD = """---
id: D-4
title: Make the parser strict
kind: bug
deps: [D-1, D-2]
origin: 12
closes: [12, "#13"]
migration: yes
---

Finding: D-2 raised while reviewing the lexer

## Requirements

1. Reject trailing commas.

## Guarantees

- The parser never allocates per token.

## Notes

Free text.
"""


def parse(text: str, name: str = "D-4") -> itemfile.Item:
    return parse_item(text, Path(f"items/{name}.md"), "D")


def unreadable(text: str, name: str = "D-4") -> Unreadable:
    with pytest.raises(Unreadable) as caught:
        parse(text, name)
    return caught.value


# --- parsing --------------------------------------------------------------------------------


def test_a_good_item_parses():
    item = parse(GOOD)
    assert item.id == "D-4"
    assert item.title == "Make the parser strict"
    assert item.kind == "bug"
    assert item.deps == ("D-1", "D-2")
    assert item.origin == 12
    assert item.closes == (12, 13)
    assert itemfile.truthy(item.meta["migration"])
    assert item.bad_deps == ()
    assert item.finding == "Finding: D-2 raised while reviewing the lexer"
    assert item.finding_source == "D-2"
    assert item.guarantees == "- The parser never allocates per token."
    assert item.changes == ""
    assert not item.outstanding and not item.cleared
    assert item.section("## Notes") == "Free text."
    assert item.section("## Absent") is None


@pytest.mark.parametrize("word, value", [("yes", True), ("no", False), ("true", True), ("false", False),
                                         ("Yes", True), ("'yes'", True), ("'no'", False), ("", False)])
def test_yes_no_true_false_read_as_booleans(word, value):
    item = parse(GOOD.replace("migration: yes", f"migration: {word}"))
    assert itemfile.truthy(item.meta.get("migration")) is value


def test_no_provenance_line_when_the_body_does_not_open_with_one():
    item = parse(GOOD.replace("Finding: D-2 raised while reviewing the lexer\n\n", ""))
    assert item.finding == "" and item.finding_source == ""


def test_ids_match_the_prefix_pattern():
    pattern = itemfile.id_pattern("D")
    assert pattern.match("D-1") and pattern.match("D-120")
    for bad in ("D-0", "D-01", "d-1", "D1", "D-1a", "X-1", "D-", "D--1"):
        assert not pattern.match(bad), bad
    assert itemfile.id_number("D-17", "D") == 17
    assert itemfile.id_number("WI-3", "WI") == 3
    assert itemfile.id_number("D-3", "WI") is None


# --- every unreadable state has its own wording ----------------------------------------------


def test_the_wordings_are_distinct():
    wordings = [MISSING, NO_BODY, NO_PARSE, SHELVED, ID_MISMATCH, NOT_AN_ID]
    assert len(set(wordings)) == len(wordings)
    assert NOT_AN_ID == "does not resolve to an item id"


def test_missing_file(tmp_path):
    with pytest.raises(Unreadable) as caught:
        read_item(tmp_path / "D-9.md", "D")
    assert caught.value.wording == MISSING


@pytest.mark.parametrize("body", ["", "\n", "   \n\t\n\n"])
def test_whitespace_only_body(body):
    problem = unreadable(f"---\nid: D-4\ntitle: x\n---\n{body}")
    assert problem.wording == NO_BODY
    assert problem.line == 5


def test_yaml_that_will_not_parse_reports_its_line():
    problem = unreadable("---\nid: D-4\ntitle: x\ndeps: [D-1\nkind: bug\n---\nbody\n")
    assert problem.wording == NO_PARSE
    assert problem.line in (5, 6)
    assert problem.detail.startswith("YAML: ")


def test_yaml_error_on_a_later_line():
    problem = unreadable("---\nid: D-4\ntitle: x\nkind: bug\nnote: : :\n  - x\n---\nbody\n")
    assert problem.wording == NO_PARSE
    assert problem.line == 5


@pytest.mark.parametrize("text", ["no frontmatter at all\n", "---\nid: D-4\nnever closed\n",
                                  "---\n- a list\n- not a mapping\n---\nbody\n"])
def test_no_usable_frontmatter_will_not_parse(text):
    assert unreadable(text).wording == NO_PARSE


@pytest.mark.parametrize("frontmatter, reason", HOSTILE_FRONTMATTER)
def test_hostile_frontmatter_is_refused_by_both_yaml_parsers(frontmatter, reason):
    """libyaml's parser and the pure-Python one refuse each hostile case with the same reason."""
    from drover.items.frontmatter_rules import FrontmatterError
    from drover.items.strict_yaml import StrictLoader, PureStrictLoader, StrictYAMLHandler

    source = "id: D-2\n" + frontmatter
    for loader in (StrictLoader, PureStrictLoader):
        with pytest.raises(FrontmatterError) as caught:
            StrictYAMLHandler(loader).load(source)
        assert reason in caught.value.detail


@pytest.mark.parametrize("frontmatter, line", [("title: t\ntitle: u\n", 4), ("title: t\ndeps: D-1\n", 4),
                                               ("title: t\nkind: [a]\n", 4), ("title: [x\n", 3),
                                               ("title: t\ncloses: [1, 2]\ndue: 2024-02-30\n", 5),
                                               ("title: t\na: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a"
                                                + "]" * 60 + "\n", 5),
                                               ("title: t\nx:\n" + "".join("  " * n + "- \n" for n in range(1, 400)), 4)])
def test_a_refused_frontmatter_names_its_line_in_the_file(frontmatter, line):
    problem = unreadable(f"---\nid: D-4\n{frontmatter}---\nbody\n")
    assert (problem.wording, problem.line) == (NO_PARSE, line)


def test_python_frontmatter_reads_an_item_with_drovers_handler():
    """The handler is python-frontmatter's: loads with it gives what parse_item gives, and a text
    without frontmatter is refused rather than read as all body."""
    import frontmatter

    from drover.items.frontmatter_rules import FrontmatterError
    from drover.items.strict_yaml import HANDLER

    post = frontmatter.loads(GOOD, handler=HANDLER)
    assert post.metadata == parse(GOOD).meta
    assert post.content == parse(GOOD).body.strip()
    assert frontmatter.checks(GOOD) and HANDLER.detect(GOOD) and not HANDLER.detect("\n" + GOOD)
    with pytest.raises(FrontmatterError):
        frontmatter.loads("no frontmatter\n---\nid: D-4\n---\n", handler=HANDLER)


def test_keys_yaml_reads_as_other_than_text_are_kept():
    item = parse("---\nid: D-4\nyes: 1\n7: seven\nnull: x\n---\nbody\n")
    assert item.meta == {"id": "D-4", True: 1, 7: "seven", None: "x"}


def test_an_empty_frontmatter_is_an_empty_mapping():
    assert unreadable("---\n---\nbody\n").wording == ID_MISMATCH
    assert unreadable("---\n# a comment\n---\nbody\n").detail == "the frontmatter is not a mapping of keys to values"


def test_shelved():
    problem = unreadable(GOOD.replace("migration: yes", "shelved: yes"))
    assert problem.wording == SHELVED
    assert problem.line == 8
    assert parse(GOOD.replace("migration: yes", "shelved: no")).id == "D-4"


def test_frontmatter_id_must_match_the_file_name():
    problem = unreadable(GOOD, name="D-5")
    assert problem.wording == ID_MISMATCH
    assert problem.line == 2
    assert "D-4" in problem.detail and "D-5.md" in problem.detail


def test_a_file_whose_name_is_not_an_id():
    problem = unreadable(GOOD.replace("id: D-4", "id: notes"), name="notes")
    assert problem.wording == NOT_AN_ID


def test_an_id_that_ends_in_a_line_break_is_not_an_id():
    # a file named `D-5\n.md` whose id is "D-5\n" read as the item D-5\n, which wrote a line of its own into `list`
    problem = unreadable(GOOD.replace("id: D-4", 'id: "D-5\\n"'), name="D-5\n")
    assert problem.wording == NOT_AN_ID
    assert itemfile.id_number("D-5\n", "D") is None


def test_a_dep_that_is_not_an_id_leaves_the_item_readable_but_names_the_dep():
    item = parse(GOOD.replace("deps: [D-1, D-2]", "deps: [D-1, the-lexer, 7]"))
    assert item.bad_deps == ("the-lexer", "7")


def test_crlf_files_parse():
    item = parse(GOOD.replace("\n", "\r\n"))
    assert item.title == "Make the parser strict"
    assert item.guarantees.strip() == "- The parser never allocates per token."


# --- sections ---------------------------------------------------------------------------------


def test_request_changes_creates_the_section_at_the_end():
    item = parse(GOOD)
    text = replace_section(item.text, CHANGES_HEADING, "- fix it\n", item.body_offset)
    assert text.startswith(GOOD)
    assert text[len(GOOD):] == f"\n{CHANGES_HEADING}\n\n- fix it\n"
    assert parse(text).changes == "- fix it"
    assert parse(text).outstanding


def test_a_section_ends_at_the_next_level_one_or_two_heading():
    body = f"{CHANGES_HEADING}\n\nold\n### still inside\n#### and here\n# Next\nafter\n"
    text = "---\nid: D-4\n---\n" + body
    item = parse(text)
    assert item.changes == "old\n### still inside\n#### and here"
    replaced = replace_section(text, CHANGES_HEADING, "new", item.body_offset)
    assert replaced == f"---\nid: D-4\n---\n{CHANGES_HEADING}\n\nnew\n\n# Next\nafter\n"


def test_headings_inside_code_fences_do_not_end_a_section():
    text = f"---\nid: D-4\n---\n{CHANGES_HEADING}\n\n```\n## not a heading\n```\n~~~~\n# nor this\n~~~\n## neither\n~~~~\n## Next\n"
    item = parse(text)
    assert "## not a heading" in item.changes and "## neither" in item.changes
    assert item.section("## Next") == ""


def test_findings_headings_are_demoted_so_they_cannot_end_the_section():
    findings = "# Big\ntext\n## Medium\n### Small\n```\n## fenced stays\n```\n#hashtag stays\n"
    assert demote_headings(findings) == "### Big\ntext\n### Medium\n### Small\n```\n## fenced stays\n```\n#hashtag stays\n"


def test_an_unclosed_fence_in_findings_is_closed_so_it_cannot_swallow_later_sections():
    findings = "look:\n```python\n## x = 1\n"
    written = demote_headings(findings)
    text = GOOD.replace("## Guarantees", f"{CHANGES_HEADING}\n\nold\n\n## Guarantees")
    item = parse(text)
    new = replace_section(text, CHANGES_HEADING, written, item.body_offset)
    again = parse(new)
    assert again.guarantees == "- The parser never allocates per token."
    assert again.changes.startswith("look:\n```python\n## x = 1\n")
    # the following sections are where they were, byte for byte
    tail = text[text.index("## Guarantees"):]
    assert new.endswith(tail)


def test_the_cleared_block():
    block = cleared_block(2, "2026-01-02T03:04:05Z", "reviewer", "fixed in abc123")
    assert block.splitlines()[0] == CLEARED_MARKER
    assert "Nothing is outstanding" in block and "round 2" in block and "reviewer" in block
    assert "2026-01-02T03:04:05Z" in block and "fixed in abc123" in block
    item = parse(replace_section(GOOD, CHANGES_HEADING, block, parse(GOOD).body_offset))
    assert item.cleared and not item.outstanding


def test_headline_is_the_first_non_empty_line_without_heading_marks():
    assert headline("\n\n### The cache is stale\nmore\n") == "The cache is stale"
    assert headline("plain first\nsecond") == "plain first"


# --- byte-identical round trip (property) ---------------------------------------------------

def _split(text: str, item: itemfile.Item):
    span = section_span(text, CHANGES_HEADING, item.body_offset)
    assert span is not None
    return text[:span[0]], text[span[1]:]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(before=st.lists(chunk, max_size=4).map("".join), after=st.lists(chunk, max_size=3).map("".join),
       findings=findings_text, second=findings_text, with_section=st.booleans(), crlf=st.booleans(),
       final_newline=st.booleans())
@example(before="```\n", after="", findings="fix it", second="again", with_section=True, crlf=False,
         final_newline=True)  # an unclosed fence hides the heading
def test_changes_round_trip_leaves_every_other_byte(before, after, findings, second, with_section, crlf,
                                                     final_newline):
    nl = "\r\n" if crlf else "\n"
    body = "\nIntro.\n" + before
    if with_section:
        body += f"{CHANGES_HEADING}\nstale text\n" + after
    if not final_newline:
        body = body.rstrip("\n")
    text = ("---\nid: D-4\ntitle: t\n---\n" + body).replace("\n", nl)
    item = parse(text)
    if not with_section and item.section(CHANGES_HEADING) is not None:
        return  # the generated text already holds the heading inside "later" text; covered elsewhere
    if with_section and item.section(CHANGES_HEADING) is None:
        return  # a generated line opened a code fence that hides the heading: no section to keep around
    first = replace_section(text, CHANGES_HEADING, demote_headings(findings), item.body_offset)
    once = parse(first)
    head, tail = _split(first, once)
    if with_section:
        original_head, original_tail = _split(text, item)
        assert head == original_head
        assert tail == original_tail
    else:
        assert head.startswith(text)
        assert tail == ""
    # the findings are what is in the section, headings demoted, nothing else
    assert once.changes.replace("\r\n", "\n").strip("\n") == demote_headings(findings).replace("\r\n", "\n").strip("\n")
    assert once.outstanding or not findings.strip()
    # a second request replaces, never appends
    twice_text = replace_section(first, CHANGES_HEADING, demote_headings(second), once.body_offset)
    twice = parse(twice_text)
    assert _split(twice_text, twice) == (head, tail)
    assert twice.changes.replace("\r\n", "\n").strip("\n") == demote_headings(second).strip("\n")
    # close-changes: only the section changed
    cleared_text = replace_section(twice_text, CHANGES_HEADING, cleared_block(2, "now", "me"), twice.body_offset)
    cleared = parse(cleared_text)
    assert cleared.cleared and not cleared.outstanding
    assert _split(cleared_text, cleared) == (head, tail)
    assert cleared.guarantees == item.guarantees
    assert cleared.section("## Notes") == item.section("## Notes")


def test_the_new_section_keeps_the_files_line_endings():
    text = GOOD.replace("\n", "\r\n")
    item = parse(text)
    new = replace_section(text, CHANGES_HEADING, "- one\n- two\n", item.body_offset)
    assert "\n" not in new.replace("\r\n", "")


# --- new items and atomic writes ----------------------------------------------------------------


def test_a_new_item_is_readable_at_once():
    text = new_item_text("D-7", "Title: with colon", "chore", ["D-1"], finding_source="D-3")
    item = parse(text, "D-7")
    assert (item.title, item.kind, item.deps) == ("Title: with colon", "chore", ("D-1",))
    assert item.finding.startswith("Finding: D-3")
    assert item.finding_source == "D-3"
    assert item.section(itemfile.REQUIREMENTS_HEADING)
    plain = parse(new_item_text("D-8", "x", "bug", []), "D-8")
    assert plain.finding == "" and plain.body.lstrip().startswith(itemfile.REQUIREMENTS_HEADING)


@given(title=st.text(min_size=1).map(lambda t: " ".join(t.split())).filter(lambda t: t and "\x00" not in t))
@settings(max_examples=200)
def test_any_one_line_title_round_trips(title):
    item = parse(new_item_text("D-1", title, "bug", []), "D-1")
    assert item.title == title


def test_write_atomic_replaces_in_one_step_and_keeps_the_mode(tmp_path):
    path = tmp_path / "items" / "D-1.md"
    write_atomic(path, "one\r\nline\n")
    assert path.read_bytes() == b"one\r\nline\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    os.chmod(path, 0o600)
    inode = path.stat().st_ino
    write_atomic(path, "two\n")
    assert path.read_text() == "two\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.stat().st_ino != inode  # a rename, not a rewrite in place
    assert sorted(p.name for p in path.parent.iterdir()) == ["D-1.md"]  # no temporary left


def test_write_atomic_leaves_the_old_file_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "D-1.md"
    path.write_text("old\n")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(itemfile.os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_atomic(path, "new\n")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D-1.md"]
