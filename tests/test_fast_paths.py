"""The flat frontmatter fast path reads exactly what YAML reads, and leaves the rest to YAML.

flat_load either returns None (unsure: the YAML loader decides) or the very data both YAML
loaders (libyaml's and the pure-Python one) return, types included; it never accepts what YAML
refuses. Generated frontmatter mixes the flat forms with the characters and shapes that make
YAML read something else (numbers, dates, booleans, comments, quotes, colons, indentation).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drover.items.file import section_span
from drover.items.frontmatter import LOADER, PURE_LOADER, FrontmatterError, check_types, flat_load, load_frontmatter

from helpers import HOSTILE_FRONTMATTER


def typed(value):
    """A comparable form that tells True from 1 and 1 from 1.0 (== does not)."""
    return json.dumps(value, default=repr, sort_keys=False)


def yaml_reads(source: str, loader: type):
    try:
        return ("ok", typed(yaml.load(source, Loader=loader)))  # noqa: S506 - a safe loader
    except yaml.constructor.ConstructorError as exc:
        return ("error", "duplicate" if "duplicate key" in str(exc) else "construct")
    except yaml.YAMLError:
        return ("error", "")


def agrees(source: str) -> bool:
    """flat_load is unsure, or says what both YAML loaders say; True when it was sure."""
    flat = flat_load(source)
    if flat is None:
        return False
    assert yaml_reads(source, PURE_LOADER) == ("ok", typed(flat)), source
    assert yaml_reads(source, LOADER) == ("ok", typed(flat)), source
    return True


WORDS = ["D-1", "D-12", "a", "Fix the parser", "yes", "No", "on", "OFF", "y", "n", "true", "null", "Null", "~",
         "0", "7", "012", "0x1f", "1_000", "1:30", "-3", "+4", "3.5", ".5", "1e3", ".inf", ".NaN", "2026-11-30",
         "2026-11-30 10:00:00", "<<", "=", "a: b", "a:b", "http://x.y/z", "a #b", "a#b", "#c", "x:", "'q'",
         "'it''s'", "'open", '"dq"', '"a\\nb"', '"say "hi""', "[a, b]", "{a: 1}", "&anchor x", "*alias", "!tag x",
         "|", ">", "%x", "@x", "`x`", "- item", "?x", ",x", "Émile", "日本", "a  b", " lead", "trail ", "a\tb",
         "\ufeffbom", "a\x85b", "a\u2028b", "---", "...", "", "-", "x,y", "[]", "[ ]", "[a,]", "[, a]"]
KEYS = ["id", "title", "kind", "deps", "closes", "origin", "shelved", "migration", "a-b", "_x", "Key", "yes",
        "null", "on", "N", "1", "a b", "<<", "x:y", " id", "-", "#k", "title"]

scalar = st.one_of(st.sampled_from(WORDS), st.text(alphabet="ab:#'\" -[],{}!&*01.\t\r\\yn", max_size=8))


@st.composite
def entry(draw) -> str:
    key = draw(st.sampled_from(KEYS))
    shape = draw(st.sampled_from(["scalar", "flow", "block", "empty", "comment", "raw"]))
    sep = draw(st.sampled_from([": ", ":", ":  ", " : "]))
    if shape == "scalar":
        return f"{key}{sep}{draw(scalar)}"
    if shape == "flow":
        return f"{key}{sep}[{', '.join(draw(st.lists(scalar, max_size=3)))}]"
    if shape == "block":
        indent = draw(st.sampled_from(["", "  ", " "]))
        items = draw(st.lists(st.tuples(st.sampled_from([indent, indent, "    "]), scalar), min_size=1, max_size=3))
        return f"{key}:" + "".join(f"\n{pad}- {value}" for pad, value in items)
    if shape == "empty":
        return f"{key}:"
    if shape == "comment":
        return f"# {draw(scalar)}"
    return draw(scalar)


FLAT_KEYS = ["id", "title", "kind", "deps", "closes", "origin", "shelved", "migration", "a-b", "_x", "Key", "yes",
             "null", "N", "y"]
flat_scalar = st.one_of(st.sampled_from(WORDS), st.text(alphabet="abyn01: #.-'\"", min_size=1, max_size=6))


@st.composite
def flat_entry(draw) -> str:
    """Mostly the forms flat_load reads, so that its answers (not only its refusals) are compared."""
    key = draw(st.sampled_from(FLAT_KEYS))
    shape = draw(st.sampled_from(["scalar", "scalar", "flow", "block", "empty"]))
    if shape == "scalar":
        return f"{key}: {draw(flat_scalar)}"
    if shape == "flow":
        return f"{key}: [{', '.join(draw(st.lists(flat_scalar, max_size=3)))}]"
    if shape == "block":
        indent = draw(st.sampled_from(["", "  "]))
        return f"{key}:" + "".join(f"\n{indent}- {value}" for value in draw(st.lists(flat_scalar, min_size=1, max_size=3)))
    return f"{key}:"


@st.composite
def frontmatter(draw) -> str:
    line = st.one_of(entry(), flat_entry(), flat_entry(), flat_entry(), st.sampled_from(["", "  ", "  more text"]))
    lines = draw(st.lists(line, min_size=1, max_size=5))
    newline = draw(st.sampled_from(["\n", "\r\n"]))
    return newline.join(lines) + draw(st.sampled_from(["", newline]))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter())
def test_flat_load_is_unsure_or_agrees_with_yaml(source):
    agrees(source)


def test_the_common_forms_take_the_fast_path():
    from drover.items.file import new_item_text

    written = new_item_text("D-7", "Fix: the parser's 'quotes' #1", "bug", ["D-1", "D-2"], origin=4)
    sources = [
        written.split("---\n")[1],
        "id: D-4\ntitle: Synthetic item 4\nkind: feature\ndeps: [D-3, D-2]\ncloses: [4]\nmigration: yes\n",
        "id: D-5\r\ntitle: 'Quoted: yes'\r\ndeps:\r\n  - D-1\r\n  - D-2\r\nshelved: no\r\norigin: \"#12\"\r\n",
        "id: D-6\ntitle: Émile's item\ndeps:\n- D-1\nclosed:\nnote: http://example.com/a#b\n",
        "id: D-8\ntitle: a title\ndeps: []\n",
    ]
    for source in sources:
        assert agrees(source), source


@pytest.mark.parametrize("frontmatter, reason", HOSTILE_FRONTMATTER)
def test_hostile_frontmatter_is_refused_as_before(frontmatter, reason):
    """Each hostile case of test_hostile.py, through the fast path and through the pure-Python loader."""
    source = "id: D-2\n" + frontmatter
    for loader in (None, PURE_LOADER):
        with pytest.raises(FrontmatterError) as caught:
            check_types(load_frontmatter(source, loader), source)
        assert reason in caught.value.detail


def test_a_bom_tab_or_lone_cr_is_left_to_yaml():
    for source in ("\ufeffid: D-1\n", "id:\tD-1\n", "id: D-1\rtitle: t\n", "id: D-1\n\x85title: t\n"):
        assert flat_load(source) is None



def test_the_copied_resolvers_are_pyyaml_s():
    """flat_load resolves plain scalars with copies of PyYAML's tables (so it needs no yaml import):
    the same tags and patterns, in the same order, under the same first characters."""
    from drover.items import frontmatter

    theirs = {first: [(tag, pattern.pattern, pattern.flags) for tag, pattern in pairs]
              for first, pairs in yaml.resolver.Resolver.yaml_implicit_resolvers.items() if first != ""}
    mine = {first: [(tag, pattern.pattern, pattern.flags) for tag, pattern in pairs]
            for first, pairs in frontmatter._RESOLVERS.items()}
    assert mine == theirs
    # the empty scalar's one resolver, which flat_load never meets (an empty value is unsure)
    assert [tag for tag, _ in yaml.resolver.Resolver.yaml_implicit_resolvers[""]] == ["tag:yaml.org,2002:null"]
    assert frontmatter._NON_PRINTABLE == yaml.reader.Reader.NON_PRINTABLE.pattern


def test_flat_frontmatter_does_not_import_yaml():
    code = ("import sys; from drover.items.frontmatter import load_frontmatter;"
            "meta = load_frontmatter('id: D-4\\ntitle: Émile on 2026-11-30\\ndeps: [D-3]\\nmigration: yes\\n');"
            "before = 'yaml' in sys.modules;"
            "load_frontmatter('id: D-4 # a comment\\n');"
            "print(meta, before, 'yaml' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("} ")[1].split() == ["False", "True"]
    assert done.stdout.startswith("{'id': 'D-4', 'title': 'Émile on 2026-11-30', 'deps': ['D-3'], 'migration': True}")

# --- section spans without a code fence ------------------------------------------------------

HEADING_LINE = re.compile(r"^(#{1,6})[ \t]+\S|^(#{1,6})[ \t]*$")


def reference_span(text: str, heading: str, start: int):
    """section_span as the line-by-line walk has it, for text without code fences."""
    found, offset = None, start
    for line in text[start:].split("\n"):
        stripped = line.rstrip("\r")
        match = HEADING_LINE.match(stripped)
        if match:
            level = len(match.group(1) or match.group(2))
            if found is None and stripped.strip() == heading:
                found = offset
            elif found is not None and level <= 2:
                return found, offset
        offset += len(line) + 1
    return (found, len(text)) if found is not None else None


piece = st.sampled_from(["## Changes requested", "## Changes requested  ", "## Changes requested\r", "##Changes requested",
                         " ## Changes requested", "## Changes requested more", "# Title", "## Notes", "### Deeper",
                         "#", "##", "####### seven", "text", "", "#\tTab", "## ", "\u00a0", "x ## Changes requested"])


@settings(max_examples=800, deadline=None)
@given(st.lists(piece, max_size=8), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_section_spans_without_fences_match_the_line_walk(lines, newline, final):
    body = newline.join(lines) + (newline if final else "")
    text = "---\nid: D-1\n---\n" + body
    offset = len("---\nid: D-1\n---\n")
    for heading in ("## Changes requested", "## Notes", "# Title"):
        assert section_span(text, heading, offset) == reference_span(text, heading, offset)


fence_piece = st.sampled_from(["---", "--- ", "----", "---x", "-- -", "id: D-1", "", "x", "\r", "\ufeff---", "a: ---"])


@settings(max_examples=1500, deadline=None)
@given(st.lists(fence_piece, max_size=7), st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_split_frontmatter_agrees_with_its_expression(lines, newline, final):
    """The string-search form of split_frontmatter gives what the regular expression gives."""
    from drover.items.file import _FRONTMATTER, split_frontmatter

    for text in ("---\n" + newline.join(lines) + (newline if final else ""), newline.join(lines) + newline):
        match = _FRONTMATTER.match(text)
        assert split_frontmatter(text) == ((match.group(1), match.end()) if match else None)


# --- the catalogue's reader agrees with read_item -------------------------------------------

def test_read_summary_says_what_read_item_says(tmp_path):
    """The catalogue's reader (os calls, no Item, no Path) gives read_item's fields and refusals."""
    from pathlib import Path

    from drover.items.file import CHANGES_HEADING, Unreadable, read_item, read_summary

    big = "---\nid: D-1\ntitle: big\n---\n\n## Requirements\n\n" + "- line\n" * 40_000 + f"{CHANGES_HEADING}\n\nfix it\n"
    files = {
        "D-1.md": big.encode(),
        "D-2.md": "\ufeff---\r\nid: D-2\r\ntitle: 'crlf: yes'\r\ndeps: [D-1]\r\n---\r\n\r\nbody\r\n".encode(),
        "D-3.md": b"---\nid: D-3\ntitle: \xff\n---\nbody\n",
        "D-4.md": b"---\nid: D-5\n---\nbody\n",
        "D-6.md": b"---\nid: D-6\ntitle: [a\n---\nbody\n",
        "D-7.md": b"no frontmatter\n",
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "D-8.md").mkdir()
    for name in [*files, "D-8.md", "D-9.md"]:
        path = tmp_path / name
        try:
            item = read_item(path, "D")
            expected: tuple = (item.id, item.title, item.kind, item.deps, item.meta, item.changes,
                               item.needs_requirements)
        except Unreadable as exc:
            expected = ("unreadable", exc.wording, exc.detail, exc.line)
        try:
            got: tuple = read_summary(str(path), name, "D")
        except Unreadable as exc:
            got = ("unreadable", exc.wording, exc.detail, exc.line)
        assert got == expected, name
    assert read_summary(str(tmp_path / "D-1.md"), "D-1.md", "D")[5] == "fix it"
    assert Path(tmp_path / "D-1.md").stat().st_size > 1 << 16


def test_a_value_read_once_is_not_shared_between_items():
    """flat_load reads each distinct value text once (kinds, deps repeat across items); the lists
    it gives are each item's own, so one changed by a caller leaves the next item's as written."""
    for end in ("", "\n"):
        first = flat_load(f"id: D-1\ndeps: [D-7, D-8]\nkind: bug{end}")
        first["deps"].append("D-9")
        second = flat_load(f"id: D-2\ndeps: [D-7, D-8]\nkind: bug{end}")
        assert second == {"id": "D-2", "deps": ["D-7", "D-8"], "kind": "bug"}
        assert agrees(f"id: D-3\ndeps: [D-7, D-8]\nkind: bug{end}")
