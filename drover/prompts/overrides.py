"""Override files: parsing them into blocks, base hashes they record, staleness, and resolution.

An override file holds `<% block NAME %>...<% endblock %>` definitions that replace the same-named
blocks of a slot's built-in; text outside every block makes it a whole-template replacement.
"""
from __future__ import annotations

from typing import NamedTuple

import os
import re
from pathlib import Path

from jinja2 import nodes

from drover.config import Config
from drover.errors import BlockError, Finding, ProblemCode, TemplateError, UsageError
from drover.git.files import read_regular_text
from drover.prompts.env import Block, builtin_blocks, builtin_display, builtin_name, builtin_source, check_slot, default_hash, find_blocks, nearest, parse

REPO_TEMPLATES_ENV = "DROVER_REPO_TEMPLATES"
INLINE = "--template"

# A block that renders `{{ super() }}` keeps the default's lines as shipped: an addition, never stale.
_SUPER = re.compile(r"\{\{-?\s*super\(\)\s*-?\}\}")
_BASE_COMMENT = re.compile(r"\s*<#-?\s*drover-base:\s*(?P<hash>[0-9A-Za-z]*)\s*-?#>")
_ANY_COMMENT = re.compile(r"<#.*?#>", re.DOTALL)
# what a block whose drover-base comment is elsewhere, or has more words, is told (check, --diff, --update)
BASE_MUST_OPEN = "the drover-base comment must open the block, alone: <# drover-base: HASH #> on its first line"

class OverrideBlock(NamedTuple):
    """A block an override file defines, and the base hash it recorded (None: none recorded)."""

    name: str
    line: int
    source: str
    base: str | None
    misplaced_base: int = 0  # the line of a drover-base comment that records nothing (not first, or more words)


class Override(NamedTuple):
    """A parsed override file: either named blocks for the built-in, or a whole template."""

    slot: str
    display: str
    text: str
    whole: bool
    blocks: tuple[OverrideBlock, ...] = ()
    stray_line: int = 0  # of a whole template: the line of its first text or statement outside every block

    def replacements(self) -> list[OverrideBlock]:
        """The blocks that replace a default (the others are additions)."""
        defaults = builtin_blocks(self.slot)
        return [block for block in self.blocks
                if defaults.get(block.name, "").strip() and not _SUPER.search(block.source)]


class Source(NamedTuple):
    """Where a slot's template text comes from."""

    requested: str
    resolved: str
    display: str
    text: str | None  # None: the built-in alone
    warnings: tuple[str, ...] = ()



def compose(slot: str, override: Override) -> str:
    """The built-in text with the override's blocks written in: the template a render used."""
    source = builtin_source(slot)
    replaced = {block.name: block.source for block in override.blocks}
    spans = [block for block in find_blocks(source) if block.name in replaced]
    for block in sorted(spans, key=lambda b: b.start, reverse=True):
        source = source[: block.start] + replaced[block.name] + source[block.end :]
    return source


def _stray_line(tree: nodes.Template) -> int:
    """The line of the first text or statement outside every block; 0 when the file holds nothing
    but blocks, comments and blank lines."""
    for node in tree.body:
        if isinstance(node, nodes.Block):
            continue
        if not isinstance(node, nodes.Output):
            return node.lineno
        for part in node.nodes:
            if not isinstance(part, nodes.TemplateData):
                return part.lineno
            if part.data.strip():
                # a data node starts on its line, blank lines and all: count them to reach the text
                return part.lineno + part.data[: len(part.data) - len(part.data.lstrip())].count("\n")
    return 0




def override_problems(text: str, slot: str, display: str) -> tuple[Override | None, list[TemplateError]]:
    """Parse an override file; return it with every problem found (unknown, duplicate blocks)."""
    from drover.prompts.gosyntax import go_syntax_error  # here: only an override's text is checked for Go syntax

    go = go_syntax_error(text, display)
    if go is not None:
        return None, [go]
    try:
        tree = parse(text, display)
    except TemplateError as exc:
        return None, [exc]
    stray = _stray_line(tree)
    if stray:
        return Override(slot, display, text, whole=True, stray_line=stray), []
    known = builtin_blocks(slot)
    problems: list[TemplateError] = []
    seen: dict[str, int] = {}
    blocks = []
    for block in find_blocks(text):
        if block.name in seen:
            problems.append(BlockError(
                f"duplicate block {block.name} in the {slot} override (first defined on line {seen[block.name]})",
                path=display, line=block.line,
            ))
            continue
        seen[block.name] = block.line
        if block.name not in known:
            problems.append(BlockError(
                f"unknown block {block.name} in the {slot} override (did you mean "
                f"{nearest(block.name, known)}?); {slot} blocks: {', '.join(known)}",
                path=display, line=block.line,
            ))
            continue
        match = _BASE_COMMENT.match(block.source)
        base = match.group("hash").lower() if match else None
        misplaced = 0 if match else _misplaced_base(block.source, block.line)
        blocks.append(OverrideBlock(block.name, block.line, block.source, base, misplaced))
    return Override(slot, display, text, whole=False, blocks=tuple(blocks)), problems


def _misplaced_base(source: str, line: int) -> int:
    """The line of the first drover-base comment in a block's source, given the line its tag is on."""
    for comment in _ANY_COMMENT.finditer(source):
        if "drover-base" in comment.group():
            return line + source.count("\n", 0, comment.start())
    return 0


_TRAILING_TAG = re.compile(r"(?:<%(?P<trim>-?)[^%]*?%>|<#-?[^#]*?#>)[ \t]*$", re.DOTALL)
_NEWLINE_EXPR = '{{ "\\n" }}'  # adds a newline without adding a source line, so line numbers hold


def _trims_its_end(text: str, block: Block) -> bool:
    """Whether the block's closing tag is written `<%- endblock %>`, which strips the newline before it."""
    return text.startswith("<%-", block.end)


def _ends_a_line(source: str, trimmed: bool = False) -> bool:
    """Whether a block's content, as rendered, ends with a newline (trailing tags render nothing;
    `trimmed`: the closing tag strips the whitespace before it, its newline too)."""
    text = source.rstrip() if trimmed else source
    while True:
        match = _TRAILING_TAG.search(text)
        if not match:
            break
        text = text[: match.start()]
        if match.group("trim"):
            text = text.rstrip()
    text = text.rstrip(" \t")
    return not text.strip() or text.endswith("\n")


def unended_blocks(text: str) -> list[OverrideBlock]:
    """Blocks whose last line has no newline: written inline, they would glue onto the next line."""
    return [OverrideBlock(block.name, block.line, block.source, None)
            for block in find_blocks(text) if not _ends_a_line(block.source, _trims_its_end(text, block))]


def whole_lines(text: str) -> str:
    """The override with every block ending its last line, as the built-in's own lines do: a closing
    `<%- endblock %>` loses its `-` (it would strip the last newline and glue the block onto the
    built-in's next line), and a last line with no newline is given one."""
    for block in sorted(find_blocks(text), key=lambda b: b.end, reverse=True):
        if _trims_its_end(text, block):
            text = text[: block.end + 2] + text[block.end + 3 :]
        if not _ends_a_line(block.source):
            text = text[: block.end] + _NEWLINE_EXPR + text[block.end :]
    return text


def parse_override(text: str, slot: str, display: str) -> Override:
    """Parse an override file, raising the first problem as a TemplateError."""
    override, problems = override_problems(text, slot, display)
    if problems:
        raise problems[0]
    assert override is not None
    return override


def stale_blocks(override: Override) -> list[tuple[OverrideBlock, str]]:
    """(block, today's hash) for each replacement whose recorded base is not today's default."""
    stale = []
    for block in override.replacements():
        today = default_hash(override.slot, block.name)
        if block.base != today:
            stale.append((block, today))
    return stale


def override_findings(override: Override) -> list[Finding]:
    """What check says of a whole template (placed at its first line outside the blocks) or of each
    stale block (at the line it opens on), in SPEC's words, the path as drover.toml writes it and no
    line in the text (`check --json` has it); a launch prints the same lines as warnings."""
    if override.whole:
        return [Finding(f"WHOLE TEMPLATE {override.slot} in {override.display}",
                        code=ProblemCode.WHOLE_TEMPLATE, path=override.display, line=override.stray_line)]
    return [Finding(f"STALE OVERRIDE {override.slot}/{block.name} in {override.display}",
                    code=ProblemCode.STALE_OVERRIDE, path=override.display, line=block.line)
            for block, _ in stale_blocks(override)]


def override_warnings(override: Override) -> list[str]:
    return [found.message for found in override_findings(override)]




_TRUSTED = ("", "1", "true", "yes", "on")  # unset or empty: the default, repository templates used
_UNTRUSTED = ("0", "false", "no", "off")


def untrusted_setting() -> str:
    """`DROVER_REPO_TEMPLATES=<value as set>` when it says the repository is not trusted to supply
    templates, "" when it is. Any other value is refused: a typo must not leave an untrusted
    repository's templates in use."""
    value = os.environ.get(REPO_TEMPLATES_ENV, "").strip()
    if value.lower() in _TRUSTED:
        return ""
    if value.lower() in _UNTRUSTED:
        return f"{REPO_TEMPLATES_ENV}={value}"
    raise UsageError(f"{REPO_TEMPLATES_ENV}={value!r} is neither on nor off: set it to 0, false, no or off to ignore "
                     "the repository's templates, or to 1, true, yes, on or nothing to use them")


def repo_path(root: Path, written: str) -> Path:
    """A template path relative to the repository root, refused when it resolves outside it."""
    candidate = Path(written)
    full = candidate if candidate.is_absolute() else root / candidate
    real = Path(os.path.realpath(full))
    if not real.is_relative_to(os.path.realpath(root)):
        raise TemplateError("refused: the template path resolves outside the repository", path=written)
    return real


def read_repo_file(root: Path, written: str) -> str:
    """A template file's text; a UTF-8 byte-order mark is no text of it, as for item files and drover.toml."""
    path = repo_path(root, written)
    try:
        return read_regular_text(path).removeprefix("\ufeff")  # never waiting on a fifo, reading a device
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror}", path=written) from None
    except UnicodeDecodeError:
        raise TemplateError("cannot read the template: not UTF-8 text", path=written) from None


def read_at_path(root: Path, written: str) -> str:
    """`--template @path`'s text. The path is the repository root's, whatever folder drover runs in
    (docs/templates.md); from a subfolder, a path that does not read says so, and names the file
    this folder holds under it, when there is one, as the root's path (`@sub/x.tmpl`)."""
    try:
        return read_repo_file(root, written)
    except TemplateError as exc:
        here, top = Path(os.path.realpath(Path.cwd())), Path(os.path.realpath(root))
        if Path(written).is_absolute() or here == top or not here.is_relative_to(top):
            raise
        below = here.relative_to(top).as_posix()
        hint = f"an @path is relative to the repository root, not to {below}/"
        nearby = Path(os.path.normpath(here / written))
        if nearby.is_file() and nearby.is_relative_to(top):
            hint += f"; the file here is @{nearby.relative_to(top).as_posix()}"
        raise TemplateError(f"{exc.message} ({hint})", path=exc.path) from None


def resolve(slot: str, root: Path, config: Config, explicit: str | None) -> Source:
    """The template source for a slot: explicit, then the [prompts] file, then the built-in."""
    check_slot(slot)
    untrusted = untrusted_setting()
    warnings: list[str] = []
    requested: str | None = None
    if explicit is not None:
        if not explicit.startswith("@"):
            return Source("inline", "inline", INLINE, explicit)
        requested = explicit
        if not untrusted:
            written = explicit[1:]
            return Source(requested, explicit, written, read_at_path(root, written))
        warnings.append(
            f"{untrusted}: ignoring --template {explicit} (a repository file); using the built-in {slot} template"
        )
    written = config.prompts.get(slot, "")
    if written:
        requested = requested or f"prompts:{written}"
        if not untrusted:
            return Source(requested, f"prompts:{written}", written, read_repo_file(root, written))
        warnings.append(
            f"{untrusted}: ignoring [prompts] {slot} = {written}; using the built-in {slot} template"
        )
    builtin = f"builtin:{builtin_name(slot)}"
    return Source(requested or builtin, builtin, builtin_display(slot), None, tuple(warnings))


