"""The item file: Markdown with YAML frontmatter, read and written through python-frontmatter
with drover's strict YAML handler (strict_yaml.py). Parse, read, ids, atomic writes; the body's
sections are sections.py's.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from drover.errors import one_line
from drover.git.files import read_regular
from drover.items.frontmatter_rules import TRUE_WORDS, FrontmatterError, issue_number, key_line
from drover.items.sections import GUARANTEES_HEADING, PROVENANCE_PREFIX, section_text

# Named as items.file's by their callers: the frontmatter's split, ids and the body's section API.
from drover.items.frontmatter_rules import split_frontmatter as split_frontmatter
from drover.items.ids import id_number as id_number, id_pattern as id_pattern
from drover.items.sections import (
    CHANGES_HEADING as CHANGES_HEADING, CLEARED_MARKER as CLEARED_MARKER, REQUIREMENTS_HEADING as REQUIREMENTS_HEADING,
    REQUIREMENTS_PLACEHOLDER as REQUIREMENTS_PLACEHOLDER, as_findings as as_findings, changes_of as changes_of,
    cleared_block as cleared_block, count_findings as count_findings, demote_headings as demote_headings,
    headline as headline, is_cleared as is_cleared, is_outstanding as is_outstanding, line_ending as line_ending,
    needs_requirements as needs_requirements,
    requirements_lack as requirements_lack,
    replace_section as replace_section, section_span as section_span,
)

# The wording of each unreadable state: what `list`, `show`, `check` and `Unreadable` say.
MISSING = "has no file"
NO_BODY = "has no body"
NO_PARSE = "will not parse"
SHELVED = "is shelved"
ID_MISMATCH = "has an id that disagrees with its file name"
NOT_AN_ID = "does not resolve to an item id"


class Unreadable(Exception):
    """An item that cannot be used; `.wording` is its state, `.detail` what went wrong."""

    def __init__(self, wording: str, detail: str = "", line: int | None = None):
        super().__init__(wording)
        self.wording = wording
        # one line (errors.one_line; an escape stays, for printable() to show as `?`): a detail quotes
        # the file's text (an id, a `deps:` that is no list), and `list`, `show`, `check` and an error
        # print it inside a line of their own, where a line break wrote one of the agent's (hostile
        # reviews 44 and 45)
        self.detail = one_line(detail)
        self.line = line


def origin_of(meta: dict[str, Any]) -> int | None:
    """The `origin` issue number a frontmatter names (`41` or `#41`); None when absent or not a number."""
    return issue_number(meta.get("origin"))


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
        return _line(self.meta.get("title"))

    @property
    def kind(self) -> str:
        return _line(self.meta.get("kind"))

    @property
    def deps(self) -> tuple[str, ...]:
        return tuple(_line(dep) for dep in _as_list(self.meta.get("deps")))

    @property
    def closes(self) -> tuple[int, ...]:
        numbers = (issue_number(value) for value in _as_list(self.meta.get("closes")))
        return tuple(number for number in numbers if number is not None)

    @property
    def origin(self) -> int | None:
        return origin_of(self.meta)

    def section(self, heading: str) -> str | None:
        """The text under `heading`, heading excluded and blank edges trimmed; None when absent."""
        return section_text(self.text, heading, self.body_offset)

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
        return is_outstanding(self.changes)

    @property
    def needs_requirements(self) -> bool:
        """The Requirements section asks nothing: empty, or still `drover new`'s placeholder (a body with no
        such section is free Markdown, and asks what it says)."""
        return needs_requirements(self.text, self.body_offset)

    @property
    def requirements_lack(self) -> str:
        """What the Requirements section lacks, in words ("" when it asks something)."""
        return requirements_lack(self.text, self.body_offset)

    @property
    def finding(self) -> str:
        """The provenance line, "" when the body does not open with one."""
        return finding_of(self.body)

    @property
    def finding_source(self) -> str:
        """The item the provenance line names."""
        words = self.finding[len(PROVENANCE_PREFIX):].split()
        return words[0].rstrip(".,;:") if words else ""


def finding_of(body: str) -> str:
    """An item body's provenance line, "" when it does not open with one."""
    first = body.lstrip("\n").split("\n", 1)[0]
    return first.strip() if first.startswith(PROVENANCE_PREFIX) else ""


def body_finding(path: Path) -> str:
    """The provenance line of the item file at `path`, read without parsing its frontmatter (no
    YAML): for an item the catalogue already knows readable. "" when there is none to read."""
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    split = split_frontmatter(text)
    return finding_of(text[split[1]:]) if split else ""


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _line(value: Any) -> str:
    """A title, a kind or a dep as one line (errors.one_line), however the file wrote it: YAML's
    `"a\\nb"` put a line of the agent's own at the margin of `list`, `show` and `check`, and in the
    finish's merge commit message (hostile review 44). `drover new` writes them so (writes.new_item)."""
    return one_line(_text(value))


def _as_list(value: Any) -> list[Any]:
    if value in (None, ""):
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_item(text: str, path: Path, prefix: str, *, expected_id: str | None = None) -> Item:
    """Parse an item file's text; raises Unreadable with the state's wording."""
    return _item(text, path, prefix, _parse(text, path.name, prefix, expected_id))


def _item(text: str, path: Path, prefix: str, parsed: tuple[dict[str, Any], str, int, str]) -> Item:
    meta, body, offset, item_id = parsed
    match = id_pattern(prefix).match
    bad = tuple(dep for dep in map(_line, _as_list(meta.get("deps"))) if not match(dep))
    return Item(id=item_id, path=path, meta=meta, body=body, text=text, body_offset=offset, bad_deps=bad)


def read_summary(path: str, name: str, prefix: str, data: bytes | None = None,
                 known: tuple[str, tuple[str, int]] | None = None
                 ) -> tuple[str, str, str, tuple[str, ...], dict[str, Any], str, bool]:
    """What the catalogue keeps of an item file: id, title, kind, deps, frontmatter, Changes section,
    whether its Requirements section asks nothing (empty, or the placeholder).

    read_item's reading and checks without an Item or a Path (the catalogue parses every file
    of a changed project in one loop); raises Unreadable as read_item does. `data`: the file's
    bytes when the caller has read them already; `known`: their text and its split_frontmatter,
    when the caller has those too.
    """
    if known is not None:
        text, split = known
    else:
        try:
            text = (read_regular(path) if data is None else data).decode("utf-8")
        except FileNotFoundError:
            raise Unreadable(MISSING) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise Unreadable(NO_PARSE, f"cannot read: {_why(exc)}") from None
        split = None
    meta, _, offset, item_id = _parse(text, name, prefix, None, split)
    deps = tuple(_line(dep) for dep in _as_list(meta.get("deps")))
    return (item_id, _line(meta.get("title")), _line(meta.get("kind")), deps, meta, changes_of(text, offset),
            needs_requirements(text, offset))


def _parse(text: str, name: str, prefix: str, expected_id: str | None,
           split: tuple[str, int] | None = None) -> tuple[dict[str, Any], str, int, str]:
    """(frontmatter, body, body offset, id) of a readable item's text (`split`: its
    split_frontmatter, when known); raises Unreadable."""
    from drover.items.strict_yaml import read_post  # yaml, imported where a file is parsed

    try:
        post, offset = read_post(text, split)
    except FrontmatterError as exc:
        raise Unreadable(NO_PARSE, exc.detail, line=exc.line) from None
    return _checked(text, post.metadata, post.content, offset, name, prefix, expected_id)


def _checked(text: str, meta: dict[str, Any], body: str, offset: int, name: str, prefix: str,
             expected_id: str | None) -> tuple[dict[str, Any], str, int, str]:
    """_parse's checks of what the frontmatter and body say; raises Unreadable."""
    item_id = _text(meta.get("id"))
    expected = expected_id if expected_id is not None else name.rpartition(".")[0] or name
    if item_id != expected:
        # the id as written, on one line: a line break in it wrote a row of `list`'s own
        raise Unreadable(ID_MISMATCH, f"id {one_line(item_id) or '(none)'} in a file named {name}", line=_key_line(text, "id"))
    if not id_pattern(prefix).match(item_id):
        raise Unreadable(NOT_AN_ID, f"id {one_line(item_id)} is not {prefix}-<number>", line=_key_line(text, "id"))
    if truthy(meta.get("shelved")):
        raise Unreadable(SHELVED, "shelved: yes", line=_key_line(text, "shelved"))
    if not body or body.isspace():  # body.strip() without the copy
        raise Unreadable(NO_BODY, "nothing below the frontmatter", line=text[:offset].count("\n") + 1)
    return meta, body, offset, item_id


def _key_line(text: str, key: str) -> int | None:
    """The file line that sets `key` in the frontmatter of `text`: where an Unreadable points."""
    split = split_frontmatter(text)
    return key_line(split[0], key) if split else None


def key_line_of(path: Path, key: str) -> int | None:
    """The file line that sets `key` in the frontmatter of the file at `path`, read again (for a
    finding's line: the catalogue keeps what a file says, not where); None when it cannot tell."""
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return _key_line(text, key)


def item_from_meta(text: str, path: Path, prefix: str, meta: dict[str, Any]) -> Item:
    """The item of `text` whose frontmatter is `meta`, known already (the metadata cache's exact
    copy of what YAML gave for this very file): parse_item without the YAML parser, the same checks."""
    split = split_frontmatter(text)
    if split is None:
        raise Unreadable(NO_PARSE, "no frontmatter")
    offset = split[1]
    return _item(text, path, prefix, _checked(text, meta, text[offset:], offset, path.name, prefix, None))


def _why(exc: OSError | UnicodeDecodeError) -> str:
    """Why a file could not be read, without the path the message is about already."""
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def read_item(path: Path, prefix: str) -> Item:
    """Read and parse an item file; raises Unreadable (MISSING when there is no file)."""
    try:
        # bytes, then decode: read_text would turn CRLF into LF and a rewrite would change every line
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise Unreadable(MISSING) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise Unreadable(NO_PARSE, f"cannot read: {_why(exc)}") from None
    return parse_item(text, path, prefix)


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
    body = ""
    if finding_source:
        body += f"{PROVENANCE_PREFIX} {finding_source} (raised while reviewing {finding_source})\n\n"
    if scaffold:
        body += scaffold.rstrip("\n") + "\n\n"
    body += f"{REQUIREMENTS_HEADING}\n\n{REQUIREMENTS_PLACEHOLDER.format(id=item_id)}\n"
    from drover.items.strict_yaml import item_text  # yaml, imported where a file is written

    return item_text(meta, body)
