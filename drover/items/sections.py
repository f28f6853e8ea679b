"""An item's Markdown body: its sections, the headings that bound them, and the three drover owns.

drover owns three things in a body: the provenance line, the Guarantees section and the
Changes section. Every write changes one section and leaves every other byte as it was.
"""
from __future__ import annotations

import re
from collections.abc import Iterator

from drover.errors import shortened

# One constant for the heading both request-changes (the writer) and templates (the readers) use.
CHANGES_HEADING = "## Changes requested"
GUARANTEES_HEADING = "## Guarantees"
REQUIREMENTS_HEADING = "## Requirements"
CLEARED_MARKER = "<!-- drover: cleared -->"
PROVENANCE_PREFIX = "Finding:"
# The Requirements line `drover new` writes: while it is all the section holds, the item is in
# state `needs requirements` (docs/states.md), not ready.
REQUIREMENTS_PLACEHOLDER = "- To be written: run `drover draft {id}` or list the numbered requirements here."
_PLACEHOLDER_OPENING = REQUIREMENTS_PLACEHOLDER.split("{id}")[0]
_PLACEHOLDER = re.compile(re.escape(_PLACEHOLDER_OPENING) + r"[^`\n]*" + re.escape(REQUIREMENTS_PLACEHOLDER.split("{id}")[1]))

_HEADING = re.compile(r"^(#{1,6})[ \t]+\S|^(#{1,6})[ \t]*$")
_LINE_START_HASH = re.compile(r"^#", re.M)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")


def section_text(text: str, heading: str, body_offset: int) -> str | None:
    """The text under `heading`, heading excluded and blank edges trimmed; None when absent."""
    span = section_span(text, heading, body_offset)
    if span is None:
        return None
    start, end = span
    content = text[start:end].replace("\r\n", "\n").split("\n", 1)
    return content[1].strip("\n") if len(content) > 1 else ""


def changes_of(text: str, body_offset: int) -> str:
    """The Changes section's text ("" when there is none), as Item.changes has it."""
    return section_text(text, CHANGES_HEADING, body_offset) or ""


def needs_requirements(text: str, body_offset: int) -> bool:
    """The Requirements section asks nothing: empty, or `drover new`'s placeholder line (any id in it)."""
    return bool(requirements_lack(text, body_offset))


def requirements_lack(text: str, body_offset: int) -> str:
    """What the Requirements section lacks, in words ("" when it asks something): it holds only
    whitespace, or nothing but `drover new`'s placeholder line (docs/states.md). A body with no
    such section is free Markdown (SPEC 4), and asks what it says."""
    if REQUIREMENTS_HEADING not in text:  # most hand-written bodies: one search, no section scan
        return ""
    section = section_text(text, REQUIREMENTS_HEADING, body_offset)
    if section is None:
        return ""
    if not section.strip():
        return "has an empty `## Requirements` section"
    if _PLACEHOLDER_OPENING in section and _PLACEHOLDER.fullmatch(section.strip()) is not None:
        return "still holds the placeholder"
    return ""


def _headings(text: str, start: int, open_fence: list[str] | None = None) -> Iterator[tuple[int, int, str]]:
    """(offset, level, line) for every ATX heading at or after `start`, outside code fences
    (_unfenced_lines; `open_fence` as there)."""
    if _unfenced(text, start):
        # no fence can open: only lines that start with # can be headings (a list of 50,000
        # changed files asks this of each)
        for found in _LINE_START_HASH.finditer(text, start):
            offset = found.start()
            end = text.find("\n", offset)
            stripped = text[offset:end if end >= 0 else len(text)].rstrip("\r")
            heading = _HEADING.match(stripped)
            if heading:
                yield offset, len(heading.group(1) or heading.group(2)), stripped
        return
    for offset, stripped in _unfenced_lines(text, start, open_fence):
        heading = _HEADING.match(stripped)
        if heading:
            yield offset, len(heading.group(1) or heading.group(2)), stripped


def _unfenced_lines(text: str, start: int, open_fence: list[str] | None = None) -> Iterator[tuple[int, str]]:
    """(offset, line without its CR) for every line at or after `start` that is neither inside a code
    fence nor a fence's own: the one reading of fences, for headings and for counting findings.

    A fence closes only on a bare run of its own character at least as long as the opening (as
    Markdown has it), so a ``` line inside a ```` block stays text. `open_fence`, when given,
    receives the fence still open at the end of the text.
    """
    fence = None
    offset = start
    for line in text[start:].split("\n"):
        stripped = line.rstrip("\r")
        marker = _FENCE.match(stripped)
        if marker and fence is None:
            fence = marker.group(1)
        elif marker and fence is not None:
            run = marker.group(1)
            if run[0] == fence[0] and len(run) >= len(fence) and not stripped[marker.end():].strip():
                fence = None
        elif fence is None:
            yield offset, stripped
        offset += len(line) + 1
    if open_fence is not None and fence is not None:
        open_fence.append(fence)


def section_span(text: str, heading: str, body_offset: int) -> tuple[int, int] | None:
    """[start, end) of the section opened by `heading`: to the next level-1/2 heading or the end."""
    if text.find(heading, body_offset) < 0:
        return None  # no line can be the heading (a changed file without a Changes section)
    if _unfenced(text, body_offset) and _is_heading(heading):
        return _unfenced_span(text, heading, body_offset)
    start = None
    for offset, level, line in _headings(text, body_offset):
        if start is None:
            if line.strip() == heading:
                start = offset
        elif level <= 2:
            return start, offset
    return (start, len(text)) if start is not None else None


_HEADINGS_SEEN: dict[str, bool] = {}


def _is_heading(line: str) -> bool:
    """_HEADING matches `line`, a section's heading: remembered (every changed file asks)."""
    known = _HEADINGS_SEEN.get(line)
    if known is None:
        known = _HEADING.match(line) is not None
        if len(_HEADINGS_SEEN) < 64:
            _HEADINGS_SEEN[line] = known
    return known


def _unfenced(text: str, start: int) -> bool:
    """No code fence can open in the text, and `start` begins a line: headings are plain lines."""
    return "```" not in text and "~~~" not in text and (start == 0 or text[start - 1] == "\n")


def _unfenced_span(text: str, heading: str, body_offset: int) -> tuple[int, int] | None:
    """section_span for an _unfenced text: string searches instead of a look at every line."""
    at = body_offset
    while True:
        at = text.find(heading, at)
        if at < 0:
            return None
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        line = text[at:end]
        if (at == body_offset or text[at - 1] == "\n") and (
            line == heading or line.strip() == heading and _HEADING.match(line.rstrip("\r"))
        ):
            break  # (a line that is the heading itself: _is_heading(heading) said it is one)
        at += 1
    while (end := text.find("\n#", end)) >= 0:
        end += 1  # a line that starts with #: the section ends at a level-1 or level-2 heading
        if not text.startswith("###", end):
            line_end = text.find("\n", end)
            if _HEADING.match(text[end:len(text) if line_end < 0 else line_end].rstrip("\r")):
                return at, end
    return at, len(text)


def demote_headings(findings: str) -> str:
    """Level-1 and level-2 headings in findings become level 3, so they cannot end the section.

    A code fence the findings leave open is closed: open, it would run to the end of the
    file and swallow every section after Changes.
    """
    still_open: list[str] = []
    demote = {offset for offset, level, _ in _headings(findings, 0, still_open) if level <= 2}
    out, offset = [], 0
    for line in findings.split("\n"):
        out.append("###" + line.lstrip("#") if offset in demote else line)
        offset += len(line) + 1
    text = "\n".join(out)
    if still_open:
        text += ("" if text.endswith("\n") else "\n") + still_open[0] + "\n"
    return text


_MARKER_PREFIX = "<!-- drover:"


def as_findings(findings: str) -> str:
    """Findings as request-changes writes them: data that cannot pose as drover's own marks.

    Headings are demoted and open fences closed (demote_headings), and a line that opens like a
    drover marker (the cleared block's) is escaped with a backslash, so findings that begin with
    it still read as findings, not as a discharged round. A lone carriage return is a line break
    first: the file is read back with universal newlines, where a line after one was a heading
    nothing demoted (hostile review 40).
    """
    lines = demote_headings(findings.replace("\r\n", "\n").replace("\r", "\n")).split("\n")
    return "\n".join("\\" + line if line.lstrip().startswith(_MARKER_PREFIX) else line for line in lines)


def replace_section(text: str, heading: str, content: str, body_offset: int) -> str:
    """The file text with `heading`'s section holding `content`; created at the end when absent.

    The new text takes the file's own line endings (CRLF stays CRLF), judged by its first line.
    """
    nl = line_ending(text)
    content = content.replace("\r\n", "\n").strip("\n").replace("\n", nl)
    block = f"{heading}{nl}{nl}{content}{nl}" if content else f"{heading}{nl}"
    span = section_span(text, heading, body_offset)
    if span is None:
        prefix = text if text.endswith("\n") or not text else text + nl
        still_open: list[str] = []
        for _ in _headings(prefix, body_offset, still_open):
            pass
        if still_open:
            # the body ends inside a code fence: close it, or the heading would be fenced text
            prefix += still_open[0] + nl
        if prefix[body_offset:].strip() and not prefix.endswith(nl + nl):
            prefix += nl
        return prefix + block
    start, end = span
    if end < len(text):
        block += nl
    return text[:start] + block + text[end:]


def line_ending(text: str) -> str:
    """The line ending a file's new lines take: CRLF when its first line ends so, else LF."""
    first_end = text.find("\n")
    return "\r\n" if first_end > 0 and text[first_end - 1] == "\r" else "\n"


def cleared_block(round_number: int, when: str, by: str, note: str = "") -> str:
    """What close-changes (or an approving audit) leaves in the Changes section."""
    lines = [
        CLEARED_MARKER,
        f"Nothing is outstanding: round {round_number} was discharged on {when} by {by}.",
    ]
    if note.strip():
        # one line: a note's own line breaks could start a heading that ends the section
        lines.append(f"Note: {' '.join(note.split())}")
    return "\n".join(lines)


HEADLINE_CHARS = 200  # of a round's headline: its findings' first line


def is_cleared(changes: str) -> bool:
    return changes.strip().startswith(CLEARED_MARKER)


def is_outstanding(changes: str) -> bool:
    """The Changes section `changes` holds findings nobody has discharged."""
    return bool(changes.strip()) and not is_cleared(changes)


def headline(findings: str) -> str:
    """The first non-empty line, its heading hashes and list marker (`- `, `* `, `1. `) removed, cut
    at HEADLINE_CHARS: a round's name in `show`, the ledger and the prompts, where the findings
    (up to 1 MB, one line if their writer likes) are the text."""
    for line in findings.splitlines():
        if line.strip():
            text = line.strip().lstrip("#").strip()
            return cut_headline(re.sub(r"^(?:[-*+]|[0-9]+[.)])[ \t]+", "", text).strip() or text)
    return ""


def cut_headline(text: str) -> str:
    """`text` at most HEADLINE_CHARS long, a cut one ending in `…`."""
    return shortened(text, HEADLINE_CHARS)


def count_findings(findings: str) -> int:
    """How many findings a Changes section holds: its top-level list entries outside code fences,
    else its headings, else 1 for any text at all (0 for none). Fences as the section's own
    headings read them (_unfenced_lines)."""
    entries = headings = 0
    for _, line in _unfenced_lines(findings, 0):
        if re.match(r"(?:[-*+]|[0-9]+[.)])[ \t]+\S", line):
            entries += 1
        elif re.match(r"#{1,6}[ \t]+\S", line):
            headings += 1
    return entries or headings or (1 if findings.strip() else 0)
