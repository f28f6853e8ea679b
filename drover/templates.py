"""The prompt templates: one Jinja environment, slots, overrides, base hashes, history, check and diff.

A slot's template is the built-in file in builtin_templates/, optionally with some of its named
blocks replaced by a project's override file (rendered through Jinja inheritance, so everything
outside the blocks renders as shipped), or replaced whole. See docs/templates.md.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import os
import re
import sys
import typing
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import exceptions as jinja_errors
from jinja2 import meta, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from . import __version__ as _VERSION
from .config import Config
from .fields import FIELD_NAMES, Origin, TemplateData
from .errors import DroverError, Finding, TemplateError, UsageError, did_you_mean
from .resources import builtin_dir

from .vocabulary import BRANCH_SLOT, SLOTS  # noqa: F401 - read as templates.SLOTS too

HISTORY_FILE = "history.json"
REPO_TEMPLATES_ENV = "DROVER_REPO_TEMPLATES"
INLINE = "--template"
BUILTIN_FOLDER = "builtin_templates"

# Keys every item may carry (SPEC 4): a template asking Is("shelved") is never asking about nothing.
STANDARD_KEYS = frozenset({"id", "title", "kind", "deps", "origin", "closes", "shelved"})

# Fields read from the tracker: the branch template sees them empty, so a branch name never
# depends on whether gh answered.
_TRACKER_EMPTY = {
    "FollowUps": (),
    "RegisterUnreadable": "",
    "Owned": (),
    "OwnedUnreadable": "",
    "Origin": Origin(),
    "Closes": (),
    "UndisposedCloses": (),
}

_BLOCK_TAG = re.compile(
    r"<%[-+]?\s*(?:block\s+(?P<name>\w+)(?:\s+(?:scoped|required))*|endblock(?:\s+\w+)?)\s*[-+]?%>"
)
_BASE_COMMENT = re.compile(r"\s*<#-?\s*drover-base:\s*(?P<hash>[0-9A-Za-z]*)\s*-?#>")
_WORD = re.compile(r"\w+|\s+|[^\w\s]+")

RED, GREEN, BOLD, FAINT, NORMAL, RESET = "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[2m", "\x1b[22m", "\x1b[0m"


@dataclass(frozen=True)
class Provenance:
    """Where a prompt came from: what was asked for, what was used, and digests of both texts."""

    requested: str
    resolved: str
    base_hashes: dict[str, str]
    template_sha256: str
    prompt_sha256: str


@dataclass(frozen=True)
class Rendered:
    """A rendered prompt, its provenance, and the warnings a launch prints."""

    text: str
    provenance: Provenance
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Block:
    """A named block in a template's source: its name, the line its tag is on, its inner text."""

    name: str
    line: int
    source: str
    start: int
    end: int


@dataclass(frozen=True)
class OverrideBlock:
    """A block an override file defines, and the base hash it recorded (None: none recorded)."""

    name: str
    line: int
    source: str
    base: str | None


@dataclass(frozen=True)
class Override:
    """A parsed override file: either named blocks for the built-in, or a whole template."""

    slot: str
    display: str
    text: str
    whole: bool
    blocks: tuple[OverrideBlock, ...] = ()

    def replacements(self) -> list[OverrideBlock]:
        """The blocks that replace a default (the others are additions)."""
        defaults = builtin_blocks(self.slot)
        return [block for block in self.blocks if defaults.get(block.name, "").strip()]


@dataclass(frozen=True)
class _Source:
    requested: str
    resolved: str
    display: str
    text: str | None  # None: the built-in alone
    warnings: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- the environment


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled built-ins kept in the user's cache folder, so a prompt skips Jinja's compiler.

    Entries are keyed by the template's source checksum, so an edited template recompiles; the
    pattern names this drover's version and the sandbox, whose generated code differs.
    """
    if os.environ.get("DROVER_NO_CACHE"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(base) / "drover" / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    return jinja2.FileSystemBytecodeCache(str(folder), pattern=f"sandbox-{_VERSION}-%s.cache")


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    """The one Jinja environment every template renders in."""
    return ImmutableSandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(builtin_dir())),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        block_start_string="<%",
        block_end_string="%>",
        comment_start_string="<#",
        comment_end_string="#>",
        variable_start_string="{{",
        variable_end_string="}}",
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )


def builtin_name(slot: str) -> str:
    _check_slot(slot)
    return f"{slot}.tmpl"


def builtin_display(slot: str) -> str:
    """How messages name a built-in template."""
    return f"{BUILTIN_FOLDER}/{builtin_name(slot)}"


def builtin_source(slot: str) -> str:
    """The shipped text of a slot's built-in template, read through the environment's loader."""
    env = environment()
    source, _, _ = env.loader.get_source(env, builtin_name(slot))
    return source


def _check_slot(slot: str) -> None:
    if slot not in SLOTS:
        raise UsageError(f"unknown template slot {slot!r}; slots: {', '.join(SLOTS + (BRANCH_SLOT,))}")


# ---------------------------------------------------------------------------- blocks and hashes


def _normalise(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def base_hash(source: str) -> str:
    """First 12 hex digits of sha256 of a block's source, `\\r\\n` normalised, stripped."""
    return hashlib.sha256(_normalise(source).encode("utf-8")).hexdigest()[:12]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def find_blocks(source: str) -> list[Block]:
    """Every `<% block NAME %>...<% endblock %>` in source order of their opening tags."""
    found: list[Block] = []
    stack: list[tuple[str, int, int]] = []
    for match in _BLOCK_TAG.finditer(source):
        line = source.count("\n", 0, match.start()) + 1
        if match.group("name"):
            stack.append((match.group("name"), line, match.end()))
        elif stack:
            name, opened, start = stack.pop()
            found.append(Block(name, opened, source[start:match.start()], start, match.start()))
    return sorted(found, key=lambda block: block.start)


@lru_cache(maxsize=None)
def builtin_blocks(slot: str) -> dict[str, str]:
    """Block name -> default source as shipped, in the order the built-in defines them."""
    return {block.name: block.source for block in find_blocks(builtin_source(slot))}


def default_hash(slot: str, block: str) -> str:
    return base_hash(builtin_blocks(slot)[block])


def _compose(slot: str, override: Override) -> str:
    """The built-in text with the override's blocks written in: the template a render used."""
    source = builtin_source(slot)
    replaced = {block.name: block.source for block in override.blocks}
    spans = [block for block in find_blocks(source) if block.name in replaced]
    for block in sorted(spans, key=lambda b: b.start, reverse=True):
        source = source[: block.start] + replaced[block.name] + source[block.end :]
    return source


# ---------------------------------------------------------------------------- override files


def _nearest(word: str, choices: typing.Iterable[str]) -> str:
    choices = list(choices)
    return did_you_mean(word, choices, cutoff=0.0, fold_case=True) or (choices[0] if choices else "")


def _syntax_error(exc: jinja_errors.TemplateSyntaxError, display: str) -> TemplateError:
    return TemplateError(exc.message or str(exc), path=display, line=exc.lineno)


def _parse(text: str, display: str) -> nodes.Template:
    try:
        return environment().parse(text, name=display, filename=display)
    except jinja_errors.TemplateSyntaxError as exc:
        raise _syntax_error(exc, display) from None


def _only_blocks(tree: nodes.Template) -> bool:
    """True when the file holds nothing but blocks, comments and blank lines."""
    for node in tree.body:
        if isinstance(node, nodes.Block):
            continue
        if isinstance(node, nodes.Output) and all(
            isinstance(part, nodes.TemplateData) and not part.data.strip() for part in node.nodes
        ):
            continue
        return False
    return True


def _override_problems(text: str, slot: str, display: str) -> tuple[Override | None, list[TemplateError]]:
    """Parse an override file; return it with every problem found (unknown, duplicate blocks)."""
    try:
        tree = _parse(text, display)
    except TemplateError as exc:
        return None, [exc]
    if not _only_blocks(tree):
        return Override(slot, display, text, whole=True), []
    known = builtin_blocks(slot)
    problems: list[TemplateError] = []
    seen: dict[str, int] = {}
    blocks = []
    for block in find_blocks(text):
        if block.name in seen:
            problems.append(TemplateError(
                f"duplicate block {block.name} in the {slot} override (first defined on line {seen[block.name]})",
                path=display, line=block.line,
            ))
            continue
        seen[block.name] = block.line
        if block.name not in known:
            problems.append(TemplateError(
                f"unknown block {block.name} in the {slot} override (did you mean "
                f"{_nearest(block.name, known)}?); {slot} blocks: {', '.join(known)}",
                path=display, line=block.line,
            ))
            continue
        match = _BASE_COMMENT.match(block.source)
        base = match.group("hash").lower() if match else None
        blocks.append(OverrideBlock(block.name, block.line, block.source, base))
    return Override(slot, display, text, whole=False, blocks=tuple(blocks)), problems


def parse_override(text: str, slot: str, display: str) -> Override:
    """Parse an override file, raising the first problem as a TemplateError."""
    override, problems = _override_problems(text, slot, display)
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


def _override_warnings(override: Override) -> list[str]:
    if override.whole:
        return [f"WHOLE TEMPLATE {override.slot} in {override.display}"]
    return [f"STALE OVERRIDE {override.slot}/{block.name} in {override.display}" for block, _ in stale_blocks(override)]


# ---------------------------------------------------------------------------- static checks


@lru_cache(maxsize=None)
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TemplateData)


def _struct(hint: Any) -> type | None:
    return hint if isinstance(hint, type) and dataclasses.is_dataclass(hint) else None


def _element(hint: Any) -> type | None:
    if typing.get_origin(hint) in (tuple, list):
        args = typing.get_args(hint)
        return _struct(args[0]) if args else None
    return None


def _members(struct: type) -> list[str]:
    return [name for name in dir(struct) if not name.startswith("_")]


def _type_of(expr: nodes.Node, scope: dict[str, Any]) -> Any:
    if isinstance(expr, nodes.Name):
        return scope.get(expr.name)
    if isinstance(expr, nodes.Getattr):
        struct = _struct(_type_of(expr.node, scope))
        if struct is not None:
            return typing.get_type_hints(struct).get(expr.attr)
    return None


def _walk_attributes(node: nodes.Node, scope: dict[str, Any], display: str, problems: list[TemplateError]) -> None:
    if isinstance(node, nodes.For):
        _walk_attributes(node.iter, scope, display, problems)
        source = node.iter
        while isinstance(source, nodes.Filter) and source.node is not None:
            source = source.node
        inner = dict(scope)
        if isinstance(node.target, nodes.Name):
            element = _element(_type_of(source, scope))
            if element is not None:
                inner[node.target.name] = element
            else:
                inner.pop(node.target.name, None)
        for child in [*node.body, *([node.test] if node.test else [])]:
            _walk_attributes(child, inner, display, problems)
        for child in node.else_:
            _walk_attributes(child, scope, display, problems)
        return
    if isinstance(node, nodes.Getattr):
        struct = _struct(_type_of(node.node, scope))
        if struct is not None and node.attr not in _members(struct):
            members = _members(struct)
            owner = node.node.name if isinstance(node.node, nodes.Name) else struct.__name__
            problems.append(TemplateError(
                f"unknown field {node.attr} on {owner}, a {struct.__name__} (did you mean "
                f"{_nearest(node.attr, members)}?); its fields: {', '.join(members)}",
                path=display, line=node.lineno,
            ))
    for child in node.iter_child_nodes():
        _walk_attributes(child, scope, display, problems)


def unknown_field_error(name: str, display: str | None = None, line: int | None = None) -> TemplateError:
    return TemplateError(
        f"unknown field {name} (did you mean {_nearest(name, FIELD_NAMES)}?); fields: {', '.join(FIELD_NAMES)}",
        path=display, line=line,
    )


@lru_cache(maxsize=64)
def _field_problems_cached(text: str, display: str) -> tuple[TemplateError, ...]:
    tree = _parse(text, display)
    known = set(FIELD_NAMES) | set(environment().globals)
    try:
        unknown = meta.find_undeclared_variables(tree) - known
    except jinja_errors.TemplateSyntaxError as exc:  # the compiler's own checks, e.g. a block defined twice
        raise _syntax_error(exc, display) from None
    problems: list[TemplateError] = []
    reported: set[str] = set()
    for name in tree.find_all(nodes.Name):
        if name.name in unknown and name.ctx == "load" and name.name not in reported:
            reported.add(name.name)
            problems.append(unknown_field_error(name.name, display, name.lineno))
    _walk_attributes(tree, dict(_field_types()), display, problems)
    return tuple(sorted(problems, key=lambda exc: exc.line or 0))


def field_problems(text: str, display: str) -> list[TemplateError]:
    """Names and attributes the template data does not have, found without rendering."""
    return list(_field_problems_cached(text, display))


def key_problems(text: str, display: str, used_keys: set[str]) -> list[TemplateError]:
    """`Is("k")` / `Get("k")` calls naming a frontmatter key no item of the project uses."""
    tree = _parse(text, display)
    known = set(used_keys) | STANDARD_KEYS
    problems = []
    for call in tree.find_all(nodes.Call):
        if (
            isinstance(call.node, nodes.Name)
            and call.node.name in ("Is", "Get")
            and call.args
            and isinstance(call.args[0], nodes.Const)
            and isinstance(call.args[0].value, str)
            and call.args[0].value not in known
        ):
            key = call.args[0].value
            problems.append(TemplateError(
                f'{call.node.name}("{key}") names a frontmatter key no item uses', path=display, line=call.lineno
            ))
    return problems


# ---------------------------------------------------------------------------- resolution


def repo_templates_enabled() -> bool:
    """False when DROVER_REPO_TEMPLATES=0: the repository is not trusted to supply templates."""
    return os.environ.get(REPO_TEMPLATES_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def repo_path(root: Path, written: str) -> Path:
    """A template path relative to the repository root, refused when it resolves outside it."""
    candidate = Path(written)
    full = candidate if candidate.is_absolute() else root / candidate
    real = full.resolve()
    if not real.is_relative_to(Path(root).resolve()):
        raise TemplateError("refused: the template path resolves outside the repository", path=written)
    return real


def _read_repo_file(root: Path, written: str) -> str:
    path = repo_path(root, written)
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"cannot read the template: {exc.strerror}", path=written) from None
    except UnicodeDecodeError:
        raise TemplateError("cannot read the template: not UTF-8 text", path=written) from None


def _resolve(slot: str, root: Path, config: Config, explicit: str | None) -> _Source:
    """The template source for a slot: explicit, then the [prompts] file, then the built-in."""
    _check_slot(slot)
    trusted = repo_templates_enabled()
    warnings: list[str] = []
    requested: str | None = None
    if explicit is not None:
        if not explicit.startswith("@"):
            return _Source("inline", "inline", INLINE, explicit)
        requested = explicit
        if trusted:
            written = explicit[1:]
            return _Source(requested, explicit, written, _read_repo_file(root, written))
        warnings.append(
            f"{REPO_TEMPLATES_ENV}=0: ignoring --template {explicit} (a repository file); using the built-in {slot} template"
        )
    written = config.prompts.get(slot, "")
    if written:
        requested = requested or f"prompts:{written}"
        if trusted:
            return _Source(requested, f"prompts:{written}", written, _read_repo_file(root, written))
        warnings.append(
            f"{REPO_TEMPLATES_ENV}=0: ignoring [prompts] {slot} = {written}; using the built-in {slot} template"
        )
    builtin = f"builtin:{builtin_name(slot)}"
    return _Source(requested or builtin, builtin, builtin_display(slot), None, tuple(warnings))


@dataclass(frozen=True)
class _Prepared:
    template: jinja2.Template
    template_text: str
    base_hashes: dict[str, str]
    warnings: tuple[str, ...]
    displays: dict[str, str]  # code filename -> name in messages


@lru_cache(maxsize=64)
def _compile(text: str, display: str) -> jinja2.Template:
    env = environment()
    try:
        code = env.compile(text, name=display, filename=display)
    except jinja_errors.TemplateSyntaxError as exc:
        raise _syntax_error(exc, display) from None
    return env.template_class.from_code(env, code, env.make_globals(None))


def _builtin_template(slot: str) -> jinja2.Template:
    try:
        return environment().get_template(builtin_name(slot))
    except jinja_errors.TemplateSyntaxError as exc:
        raise _syntax_error(exc, builtin_display(slot)) from None


def _raise_first(problems: list[TemplateError]) -> None:
    if problems:
        raise problems[0]


def _prepare(slot: str, source: _Source) -> _Prepared:
    builtin_file = str(Path(builtin_dir()) / builtin_name(slot))
    displays = {builtin_file: builtin_display(slot), builtin_display(slot): builtin_display(slot)}
    if source.text is None:
        # The shipped templates are checked by the test suite (test_builtin_fields_are_known);
        # skipping the static walk here keeps it off every prompt's path.
        text = builtin_source(slot)
        return _Prepared(_builtin_template(slot), text, {}, source.warnings, displays)
    override = parse_override(source.text, slot, source.display)
    _raise_first(field_problems(source.text, source.display))
    displays[source.display] = source.display
    warnings = (*source.warnings, *_override_warnings(override))
    if override.whole:
        return _Prepared(_compile(source.text, source.display), source.text, {}, warnings, displays)
    # Inheritance keeps every line outside the blocks as shipped; the extends tag adds no line,
    # so errors in the override keep the file's own line numbers.
    child = f'<% extends "{builtin_name(slot)}" %>' + source.text
    # An addition has no base to record; it is listed so the record names every overridden block.
    replacing = {block.name for block in override.replacements()}
    hashes = {block.name: (block.base or "") if block.name in replacing else "" for block in override.blocks}
    return _Prepared(_compile(child, source.display), _compose(slot, override), hashes, warnings, displays)


# ---------------------------------------------------------------------------- rendering


def _location(exc: BaseException, displays: dict[str, str]) -> tuple[str | None, int | None]:
    """The innermost template file and line in an exception's traceback."""
    where: tuple[str | None, int | None] = (None, None)
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in displays:
            where = (displays[name], tb.tb_lineno)
        tb = tb.tb_next
    return where


def _render_template(template: jinja2.Template, data: TemplateData, displays: dict[str, str]) -> str:
    try:
        return template.render(data.context())
    except jinja_errors.SecurityError as exc:
        path, line = _location(exc, displays)
        raise TemplateError(f"the template sandbox refused: {exc}", path=path, line=line) from None
    except jinja_errors.UndefinedError as exc:
        path, line = _location(exc, displays)
        match = re.fullmatch(r"'(\w+)' is undefined", str(exc))
        if match:
            raise unknown_field_error(match.group(1), path, line) from None
        raise TemplateError(str(exc), path=path, line=line) from None
    except jinja_errors.TemplateSyntaxError as exc:
        raise TemplateError(exc.message or str(exc), path=displays.get(exc.filename or "", exc.filename), line=exc.lineno) from None
    except (jinja_errors.TemplateError, TypeError, ValueError, ArithmeticError, LookupError) as exc:
        path, line = _location(exc, displays)
        raise TemplateError(f"template failed: {exc}", path=path, line=line) from None


def render(slot: str, data: TemplateData, *, root: Path, config: Config, explicit: str | None = None) -> Rendered:
    """Render a slot's prompt for one item, with its provenance and launch warnings."""
    if slot == BRANCH_SLOT:
        template = explicit if explicit is not None else config.branch
        text = render_branch(data, template)
        source = "inline" if explicit is not None else "[run] branch"
        return Rendered(text, Provenance(source, source, {}, _sha256(template), _sha256(text)))
    source = _resolve(slot, Path(root), config, explicit)
    prepared = _prepare(slot, source)
    text = _render_template(prepared.template, data, prepared.displays)
    if not text.strip():
        raise TemplateError(f"the {slot} template rendered only whitespace", path=source.display)
    provenance = Provenance(
        requested=source.requested,
        resolved=source.resolved,
        base_hashes=dict(prepared.base_hashes),
        template_sha256=_sha256(prepared.template_text),
        prompt_sha256=_sha256(text),
    )
    return Rendered(text, provenance, prepared.warnings)


def launch_warnings(slot: str, *, root: Path, config: Config, explicit: str | None = None) -> list[str]:
    """The template warnings a launch prints: repository templates off, stale or whole overrides."""
    source = _resolve(slot, Path(root), config, explicit)
    warnings = list(source.warnings)
    if source.text is not None:
        warnings.extend(_override_warnings(parse_override(source.text, slot, source.display)))
    return warnings


def render_branch(data: TemplateData, template: str) -> str:
    """The item's branch name from the one-line branch template (tracker fields empty)."""
    display = "drover.toml: [run] branch"
    _raise_first(field_problems(template, display))
    compiled = _compile(template, display)
    branch_data = dataclasses.replace(data, Branch="", **_TRACKER_EMPTY)
    text = _render_template(compiled, branch_data, {display: display}).strip()
    if not text:
        raise TemplateError("the branch template rendered only whitespace", path=display)
    return text


# ---------------------------------------------------------------------------- drover check


def check_templates(root: Path, config: Config, used_keys: set[str] | None = None) -> list[Finding]:
    """Problems in the project's templates, one line each, paths as written in drover.toml."""
    findings: list[Finding] = []

    def report(exc: DroverError, error: bool = True) -> None:
        findings.append(Finding(str(exc), error))

    for slot in SLOTS:
        written = config.prompts.get(slot, "")
        if not written:
            continue
        try:
            text = _read_repo_file(Path(root), written)
        except TemplateError as exc:
            report(exc)
            continue
        override, problems = _override_problems(text, slot, written)
        for exc in problems:
            report(exc)
        if override is None:
            continue
        for line in _override_warnings(override):
            findings.append(Finding(line, True))
        try:
            for exc in field_problems(text, written):
                report(exc)
            if used_keys is not None:
                for exc in key_problems(text, written, used_keys):
                    report(exc, error=False)
        except TemplateError as exc:
            if not problems:  # otherwise the compiler only restates a block problem reported above
                report(exc)
    branch_display = "drover.toml: [run] branch"
    try:
        for exc in field_problems(config.branch, branch_display):
            report(exc)
        _compile(config.branch, branch_display)
    except TemplateError as exc:
        report(exc)
    if not repo_templates_enabled() and any(config.prompts.get(slot) for slot in SLOTS):
        findings.append(Finding(f"{REPO_TEMPLATES_ENV}=0: launches ignore the [prompts] files checked above", False))
    return findings


def _diff_lines(old: str, new: str) -> list[str]:
    """A line diff with two-character prefixes: '  ' unchanged, '- ' removed, '+ ' added."""
    return [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if not line.startswith("? ")]


def _words(old: str, new: str) -> tuple[str, str]:
    """Both sides of a rewritten line: changed words bold, the rest faint."""
    a, b = _WORD.findall(old), _WORD.findall(new)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        style = FAINT if op == "equal" else BOLD
        if i2 > i1:
            left.append(f"{style}{''.join(a[i1:i2])}{NORMAL}")
        if j2 > j1:
            right.append(f"{style}{''.join(b[j1:j2])}{NORMAL}")
    return "".join(left), "".join(right)


def _colour(lines: list[str]) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("- ") and nxt.startswith("+ ") and _rewritten(line[2:], nxt[2:]):
            left, right = _words(line[2:], nxt[2:])
            out.append(f"{RED}- {left}{RESET}")
            out.append(f"{GREEN}+ {right}{RESET}")
            i += 2
            continue
        if line.startswith("- "):
            out.append(f"{RED}{line}{RESET}")
        elif line.startswith("+ "):
            out.append(f"{GREEN}{line}{RESET}")
        else:
            out.append(line)
        i += 1
    return out


def _rewritten(old: str, new: str) -> bool:
    """A line edited in place rather than replaced: most of its characters survive."""
    return difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() >= 0.5


def diff_stale(root: Path, config: Config, color: bool) -> str:
    """For each stale replacement, the change from the default it recorded to today's."""
    history = load_history()
    out: list[str] = []
    for slot in SLOTS:
        written = config.prompts.get(slot, "")
        if not written:
            continue
        try:
            override = parse_override(_read_repo_file(Path(root), written), slot, written)
        except TemplateError:
            continue  # check reports it; there is nothing to diff
        if override.whole:
            continue
        for block, today in stale_blocks(override):
            key = f"{slot}/{block.name}"
            out.append(f"==> {key} in {written}")
            old = history.get(key, {}).get(block.base or "")
            if old is None:
                if block.base:
                    out.append(f"base {block.base} is not a default this drover has shipped; today's default is {today}")
                else:
                    out.append(f"no drover-base hash recorded; today's default is {today}")
                continue
            out.append(f"--- {block.base} (the override's base)")
            out.append(f"+++ {today} (today's default)")
            lines = _diff_lines(old, _normalise(builtin_blocks(slot)[block.name]))
            out.extend(_colour(lines) if color else lines)
    return "".join(line + "\n" for line in out)


def use_color(option: str, stream) -> bool:
    """Whether to colour output: never/always as asked; auto honours NO_COLOR, else a terminal."""
    if option == "never":
        return False
    if option == "always":
        return True
    if option != "auto":
        raise UsageError(f"--color: expected auto, always or never, not {option!r}")
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


# ---------------------------------------------------------------------------- history


def history_path() -> Path:
    return Path(builtin_dir()) / HISTORY_FILE


def load_history() -> dict[str, dict[str, str]]:
    """"slot/block" -> {hash: default source} for every default each block has had."""
    path = history_path()
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def current_defaults() -> dict[str, tuple[str, str]]:
    """"slot/block" -> (hash, normalised source) for today's non-empty defaults."""
    defaults = {}
    for slot in SLOTS:
        for name, source in builtin_blocks(slot).items():
            if _normalise(source):
                defaults[f"{slot}/{name}"] = (base_hash(source), _normalise(source))
    return defaults


def missing_history() -> list[str]:
    """Today's defaults the history file does not hold, as 'slot/block hash'."""
    history = load_history()
    return [f"{key} {digest}" for key, (digest, _) in current_defaults().items() if digest not in history.get(key, {})]


def record_history(path: Path | None = None) -> list[str]:
    """Add today's defaults to the history file; return what was added."""
    path = path or history_path()
    history = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    added = []
    for key, (digest, source) in current_defaults().items():
        if digest not in history.setdefault(key, {}):
            history[key][digest] = source
            added.append(f"{key} {digest}")
    path.write_text(json.dumps(history, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return added


# ---------------------------------------------------------------------------- schema and guidance


def schema_prompts() -> list[dict]:
    """One entry per block of every slot: its default as shipped, its hash, whether it is an addition."""
    entries = []
    for slot in SLOTS:
        for name, source in builtin_blocks(slot).items():
            default = _normalise(source)
            entries.append({
                "slot": slot,
                "block": name,
                "default": default,
                "hash": base_hash(source),
                "addition": not default,
            })
    return entries


def guidance_diff(slot: str, data: TemplateData, *, root: Path, config: Config) -> list[tuple[str, int]]:
    """The lines the lean prompt drops, each with an approximate token count (characters / 4)."""
    lean = render(slot, dataclasses.replace(data, Guidance="lean"), root=root, config=config).text.splitlines()
    detailed = render(slot, dataclasses.replace(data, Guidance="detailed"), root=root, config=config).text.splitlines()
    dropped = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(None, lean, detailed, autojunk=False).get_opcodes():
        if op in ("insert", "replace"):
            dropped.extend(line for line in detailed[j1:j2] if line.strip())
    return [(line, (len(line) + 3) // 4) for line in dropped]


def main(argv: list[str] | None = None) -> int:
    """`python -m drover.templates --record-history`: add today's block defaults to the history."""
    args = sys.argv[1:] if argv is None else argv
    if args != ["--record-history"]:
        print("usage: python -m drover.templates --record-history", file=sys.stderr)
        return 2
    added = record_history()
    for line in added:
        print(f"recorded {line}")
    if not added:
        print("history already holds every current default")
    return 0


if __name__ == "__main__":
    sys.exit(main())
