"""The fast forms agree with the plain ones: section spans found by string search with the
line-by-line walk, split_frontmatter's string search with its expression, and the catalogue's
reader with read_item."""
from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from drover.items.file import section_span


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
    from drover.items.frontmatter_rules import _FRONTMATTER, split_frontmatter

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

