"""The item file: Markdown with YAML frontmatter. Parse, sections, ids, atomic writes.

drover owns three things in a body: the provenance line, the Guarantees section and the
Changes section. Every write changes one section and leaves every other byte as it was.
"""
from __future__ import annotations

import os
import re
from dataclasses import field
from functools import cached_property
from pathlib import Path
from collections.abc import Iterator
from typing import Any

from dataclasses import dataclass
from drover.items.frontmatter import FrontmatterError, key_line, load_frontmatter  # noqa: F401
from drover.items.frontmatter import check_types
from drover.items import newfront

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

# The wording of each unreadable state: what `list`, `show`, `check` and `Unreadable` say.
MISSING = "has no file"
NO_BODY = "has no body"
NO_PARSE = "will not parse"
SHELVED = "is shelved"
ID_MISMATCH = "has an id that disagrees with its file name"
NOT_AN_ID = "does not resolve to an item id"

_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)
_HEADING = re.compile(r"^(#{1,6})[ \t]+\S|^(#{1,6})[ \t]*$")
_LINE_START_HASH = re.compile(r"^#", re.M)
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
TRUE_WORDS = ("yes", "true", "on", "y")
class Unreadable(Exception):
    """An item that cannot be used; `.wording` is its state, `.detail` what went wrong."""

    def __init__(self, wording: str, detail: str = "", line: int | None = None):
        super().__init__(wording)
        self.wording = wording
        self.detail = detail
        self.line = line


def origin_of(meta: dict[str, Any]) -> int | None:
    """The `origin` issue number a frontmatter names (`41` or `#41`); None when absent or not a number."""
    value = meta.get("origin")
    try:
        return int(str(value).lstrip("#")) if value not in (None, "") else None
    except ValueError:
        return None


def id_pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(prefix)}-([1-9][0-9]*)$")


def id_number(item_id: str, prefix: str) -> int | None:
    match = id_pattern(prefix).match(item_id)
    return int(match.group(1)) if match else None


def truthy(value: Any) -> bool:
    """yes/no/true/false all read as booleans."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() in TRUE_WORDS
    return False


@dataclass(frozen=True)
class Item:
    """A readable item: its frontmatter, its body, and the whole file text as read."""

    id: str
    path: Path
    meta: dict[str, Any]
    body: str
    text: str
    body_offset: int
    bad_deps: tuple[str, ...] = field(default=())

    @property
    def title(self) -> str:
        return _text(self.meta.get("title"))

    @property
    def kind(self) -> str:
        return _text(self.meta.get("kind"))

    @property
    def deps(self) -> tuple[str, ...]:
        return tuple(_text(dep) for dep in _as_list(self.meta.get("deps")))

    @property
    def closes(self) -> tuple[int, ...]:
        numbers = []
        for value in _as_list(self.meta.get("closes")):
            try:
                numbers.append(int(str(value).lstrip("#")))
            except ValueError:
                continue
        return tuple(numbers)

    @property
    def origin(self) -> int | None:
        return origin_of(self.meta)

    def section(self, heading: str) -> str | None:
        """The text under `heading`, heading excluded and blank edges trimmed; None when absent."""
        return _section(self.text, heading, self.body_offset)

    @property
    def guarantees(self) -> str:
        return self.section(GUARANTEES_HEADING) or ""

    @cached_property
    def changes(self) -> str:
        # cached: outstanding and cleared both ask, and list asks them of every changed file
        return self.section(CHANGES_HEADING) or ""

    @property
    def cleared(self) -> bool:
        return is_cleared(self.changes)

    @property
    def outstanding(self) -> bool:
        """The Changes section holds findings nobody has discharged."""
        return bool(self.changes.strip()) and not self.cleared

    @property
    def needs_requirements(self) -> bool:
        """The Requirements section is still `drover new`'s placeholder."""
        return needs_requirements(self.text, self.body_offset)

    @property
    def finding(self) -> str:
        """The provenance line, "" when the body does not open with one."""
        first = self.body.lstrip("\n").split("\n", 1)[0]
        return first.strip() if first.startswith(PROVENANCE_PREFIX) else ""

    @property
    def finding_source(self) -> str:
        """The item the provenance line names."""
        words = self.finding[len(PROVENANCE_PREFIX):].split()
        return words[0].rstrip(".,;:") if words else ""


def _section(text: str, heading: str, body_offset: int) -> str | None:
    span = section_span(text, heading, body_offset)
    if span is None:
        return None
    start, end = span
    content = text[start:end].replace("\r\n", "\n").split("\n", 1)
    return content[1].strip("\n") if len(content) > 1 else ""


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _as_list(value: Any) -> list[Any]:
    if value in (None, ""):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def split_frontmatter(text: str) -> tuple[str, int] | None:
    """(frontmatter source, offset where the body starts), or None when there is no frontmatter."""
    if text.startswith("---\n"):
        # the common form, found with string searches: the first line that opens with --- closes
        # the frontmatter when it is --- alone (else, and for CRLF, the expression decides)
        close = text.find("\n---", 3) + 1
        if close and text[close + 3:close + 4] == "\n" and text[close - 2:close] != "\r\n":
            return text[4:max(close - 1, 4)], close + 4
    match = _FRONTMATTER.match(text)
    if not match:
        return None
    return match.group(1), match.end()


def parse_item(text: str, path: Path, prefix: str, *, expected_id: str | None = None) -> Item:
    """Parse an item file's text; raises Unreadable with the state's wording."""
    meta, body, offset, item_id = _parse(text, path.name, prefix, expected_id)
    pattern = id_pattern(prefix)
    bad = tuple(_text(dep) for dep in _as_list(meta.get("deps")) if not pattern.match(_text(dep)))
    return Item(id=item_id, path=path, meta=meta, body=body, text=text, body_offset=offset, bad_deps=bad)


def read_summary(path: str, name: str, prefix: str, data: bytes | None = None,
                 known: tuple[str, tuple[str, int]] | None = None
                 ) -> tuple[str, str, str, tuple[str, ...], dict[str, Any], str, bool]:
    """What the catalogue keeps of an item file: id, title, kind, deps, frontmatter, Changes section,
    whether its requirements are still the placeholder.

    read_item's reading and checks without an Item or a Path (the catalogue parses every file
    of a changed project in one loop); raises Unreadable as read_item does. `data`: the file's
    bytes when the caller has read them already; `known`: their text and its split_frontmatter,
    when the caller has those too.
    """
    if known is not None:
        text, split = known
    else:
        try:
            text = (_read_bytes(path) if data is None else data).decode("utf-8")
        except FileNotFoundError:
            raise Unreadable(MISSING) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise Unreadable(NO_PARSE, f"cannot read: {exc}") from None
        split = None
    meta, _, offset, item_id = _parse(text, name, prefix, None, split)
    deps = tuple(_text(dep) for dep in _as_list(meta.get("deps")))
    return (item_id, _text(meta.get("title")), _text(meta.get("kind")), deps, meta, changes_of(text, offset),
            needs_requirements(text, offset))


def changes_of(text: str, body_offset: int) -> str:
    """The Changes section's text ("" when there is none), as Item.changes has it."""
    return _section(text, CHANGES_HEADING, body_offset) or ""


def needs_requirements(text: str, body_offset: int) -> bool:
    """The Requirements section holds nothing but `drover new`'s placeholder line (any id in it)."""
    if _PLACEHOLDER_OPENING not in text:  # most items: one search, no section scan
        return False
    section = _section(text, REQUIREMENTS_HEADING, body_offset)
    return section is not None and _PLACEHOLDER.fullmatch(section.strip()) is not None


def _read_bytes(path: str, at: int | None = None, size: int = -1) -> bytes:
    """The file's bytes with plain os calls: a third of open().read()'s cost per small file.
    `at`: an open folder that `path` names a file in (the name alone is looked up, not every folder
    above it); `size`: what a stat gave, when known: a first read of one byte more that gives
    `size` bytes has reached the file's end, so a file whose size held is read in one read."""
    fd = os.open(path, os.O_RDONLY, dir_fd=at)
    try:
        chunks = [os.read(fd, size + 1 if size >= 0 else 1 << 16)]
        if chunks[0] and len(chunks[0]) != size:
            while chunk := os.read(fd, 1 << 16):
                chunks.append(chunk)
    except OSError as exc:
        # named as open() names it ("Is a directory: 'items/D-1.md'")
        raise OSError(exc.errno, exc.strerror, path) from None
    finally:
        os.close(fd)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_ID_PATTERNS: dict[str, re.Pattern[str]] = {}


def _parse(text: str, name: str, prefix: str, expected_id: str | None,
           split: tuple[str, int] | None = None) -> tuple[dict[str, Any], str, int, str]:
    """(frontmatter, body, body offset, id) of a readable item's text (`split`: its
    split_frontmatter, when known); raises Unreadable."""
    if split is None:
        split = split_frontmatter(text)
    if split is None:
        raise Unreadable(NO_PARSE, "no YAML frontmatter between --- lines", line=1)
    source, offset = split
    try:
        meta = load_frontmatter(source) if source.strip() else {}
        if isinstance(meta, dict):
            check_types(meta, source)
    except FrontmatterError as exc:
        raise Unreadable(NO_PARSE, exc.detail, line=exc.line) from None
    if not isinstance(meta, dict):
        raise Unreadable(NO_PARSE, "the frontmatter is not a mapping of keys to values", line=2)
    body = text[offset:]
    item_id = _text(meta.get("id"))
    expected = expected_id if expected_id is not None else name.rpartition(".")[0] or name
    if item_id != expected:
        raise Unreadable(ID_MISMATCH, f"id {item_id or '(none)'} in a file named {name}", line=key_line(source, "id"))
    pattern = _ID_PATTERNS.get(prefix)
    if pattern is None:
        pattern = _ID_PATTERNS[prefix] = id_pattern(prefix)
    if not pattern.match(item_id):
        raise Unreadable(NOT_AN_ID, f"id {item_id} is not {prefix}-<number>", line=key_line(source, "id"))
    if truthy(meta.get("shelved")):
        raise Unreadable(SHELVED, "shelved: yes", line=key_line(source, "shelved"))
    if not body or body.isspace():  # body.strip() without the copy
        raise Unreadable(NO_BODY, "nothing below the frontmatter", line=text[:offset].count("\n") + 1)
    return meta, body, offset, item_id


def read_item(path: Path, prefix: str) -> Item:
    """Read and parse an item file; raises Unreadable (MISSING when there is no file)."""
    try:
        # bytes, then decode: read_text would turn CRLF into LF and a rewrite would change every line
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise Unreadable(MISSING) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(NO_PARSE, f"cannot read: {exc}") from None
    return parse_item(text, path, prefix)


def _headings(text: str, start: int, open_fence: list[str] | None = None) -> Iterator[tuple[int, int, str]]:
    """(offset, level, line) for every ATX heading at or after `start`, outside code fences.

    A fence closes only on a bare run of its own character at least as long as the opening
    (as Markdown has it), so a ``` line inside a ```` block stays text. `open_fence`, when
    given, receives the fence still open at the end of the text.
    """
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
            heading = _HEADING.match(stripped)
            if heading:
                yield offset, len(heading.group(1) or heading.group(2)), stripped
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
    it still read as findings, not as a discharged round.
    """
    lines = demote_headings(findings).split("\n")
    return "\n".join("\\" + line if line.lstrip().startswith(_MARKER_PREFIX) else line for line in lines)


def replace_section(text: str, heading: str, content: str, body_offset: int) -> str:
    """The file text with `heading`'s section holding `content`; created at the end when absent.

    The new text takes the file's own line endings (CRLF stays CRLF), judged by its first line.
    """
    first_end = text.find("\n")
    nl = "\r\n" if first_end > 0 and text[first_end - 1] == "\r" else "\n"
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


def is_cleared(changes: str) -> bool:
    return changes.strip().startswith(CLEARED_MARKER)


def headline(findings: str) -> str:
    """The first non-empty line, its heading hashes and list marker (`- `, `* `, `1. `) removed."""
    for line in findings.splitlines():
        if line.strip():
            text = line.strip().lstrip("#").strip()
            return re.sub(r"^(?:[-*+]|[0-9]+[.)])[ \t]+", "", text).strip() or text
    return ""


def count_findings(findings: str) -> int:
    """How many findings a Changes section holds: its top-level list entries outside code fences,
    else its headings, else 1 for any text at all (0 for none)."""
    entries = headings = 0
    fence = ""
    for line in findings.splitlines():
        stripped = line.strip()
        if fence:
            fence = "" if stripped.startswith(fence) else fence
            continue
        if stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
        elif re.match(r"(?:[-*+]|[0-9]+[.)])[ \t]+\S", line):
            entries += 1
        elif re.match(r"#{1,6}[ \t]+\S", line):
            headings += 1
    return entries or headings or (1 if findings.strip() else 0)


def write_atomic(path: Path, text: str, *, tmp: Path | None = None) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a file.

    `tmp` names the temporary file (journaled writes keep theirs in the state folder, where the
    next writer removes any a kill left); without it a unique name beside the file is used.
    """
    staged = stage(path, text, tmp)
    try:
        os.replace(staged, path)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise


def stage(path: Path, text: str, tmp: Path | None = None) -> Path:
    """Write `text` to a temporary file with `path`'s mode, synced to disk; returns its name."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if tmp is not None:
        tmp.parent.mkdir(parents=True, exist_ok=True)
        name = str(tmp)
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    else:
        import tempfile

        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o644
        os.chmod(name, mode)
    except BaseException:
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
        raise
    return Path(name)


def new_item_text(item_id: str, title: str, kind: str, deps: list[str], finding_source: str = "", *,
                  origin: int | None = None, scaffold: str = "") -> str:
    """The file `drover new` writes: frontmatter, an optional provenance line, an optional
    scaffold (an issue's text, from intake), Requirements."""
    meta: dict[str, Any] = {"id": item_id, "title": title, "kind": kind, "deps": list(deps)}
    if origin is not None:
        meta["origin"] = origin
    front = newfront.front(meta)  # safe_dump's text for the common values, without importing yaml
    if front is None:
        import yaml

        front = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, default_flow_style=None)
    body = ""
    if finding_source:
        body += f"{PROVENANCE_PREFIX} {finding_source} (raised while reviewing {finding_source})\n\n"
    if scaffold:
        body += scaffold.rstrip("\n") + "\n\n"
    body += f"{REQUIREMENTS_HEADING}\n\n{REQUIREMENTS_PLACEHOLDER.format(id=item_id)}\n"
    return f"---\n{front}---\n\n{body}"
