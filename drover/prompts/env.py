"""The one Jinja environment, the slots, and how a template's named blocks are found and hashed."""
from __future__ import annotations

import hashlib
import os
import re
import typing
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple

import jinja2
from jinja2 import exceptions as jinja_errors
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from drover import __version__ as _VERSION
from drover.errors import TemplateError, UsageError, did_you_mean
from drover.prompts.quoting import fenced, oneline
from drover.prompts.resources import builtin_dir
from drover.vocabulary import BRANCH_SLOT, SLOTS
from drover.prompts.limits import LimitedEnvironment

BUILTIN_FOLDER = "builtin_templates"

_BLOCK_TAG = re.compile(
    r"<%[-+]?\s*(?:block\s+(?P<name>\w+)(?:\s+(?:scoped|required))*|endblock(?:\s+\w+)?)\s*[-+]?%>"
)

# What a template never parses: a raw block's text (rendered as written) and a comment's.
_UNPARSED = re.compile(r"<%[-+]?\s*raw\s*[-+]?%>.*?<%[-+]?\s*endraw\s*[-+]?%>|<#.*?#>", re.DOTALL)


def blank_unparsed(text: str) -> str:
    """`text` with its raw blocks and comments blanked, newlines and offsets kept so line numbers
    hold: what a check of the template's syntax reads, since drover never parses them."""
    return _UNPARSED.sub(lambda match: re.sub(r"[^\n]", " ", match.group()), text)


class Block(NamedTuple):
    """A named block in a template's source: its name, the line its tag is on, its inner text."""

    name: str
    line: int
    source: str
    start: int
    end: int


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's file cache, but a cache it cannot read or write is only a slower start: a corrupt,
    truncated or unwritable entry means compiling, never an error."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - whatever a damaged file makes pickle or marshal raise
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Compiled templates kept in the user's cache folder, so a prompt skips Jinja's compiler.

    Entries are keyed by the template's name and checked against its source's checksum, so an
    edited template recompiles; the pattern names this drover's version, the limited sandbox and
    the finalize that refuses a structure printed whole, each of which changes the generated code.
    """
    if os.environ.get("DROVER_NO_CACHE"):
        return None
    from drover.vocabulary import cache_dir

    folder = Path(cache_dir()) / "jinja"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK):
        return None
    return _QuietBytecodeCache(str(folder), pattern=f"sandbox-limits-whole-{_VERSION}-%s.cache")


def _join(value: typing.Any, separator: str = "") -> str:
    return separator.join(str(part) for part in value)


class MapField(dict[str, typing.Any]):
    """A map field (Meta, VerifyCommands): a missing key renders empty, as a field a slot does not fill does."""

    def __missing__(self, key: typing.Any) -> str:
        return ""


class PrintedWhole(jinja_errors.TemplateRuntimeError):
    """`{{ }}` was given one of drover's lists, maps or rows, which have no text of their own."""


def a_row(row: type) -> str:
    """A row type named with its article, as the field errors say it: `a Commit`, `an Origin`."""
    return f"{'an' if row.__name__[0] in 'AEIOU' else 'a'} {row.__name__}"


def no_text(kind: str, name: str | None = None, row: type | None = None) -> str:
    """Why a `kind` ("row", "list" or "map") printed whole is refused, and what to print instead.

    `name` is the expression when it is known; `row` is the row type (a list's elements' type).
    """
    if kind == "row":
        assert row is not None
        noun = a_row(row)
    else:
        noun = f"a {kind}" + (f" of {row.__name__}" if row is not None else "")
    called = name or kind.upper()
    if kind == "row":
        instead = f"print one of its members ({', '.join(getattr(row, '_fields', ()))})"
    elif kind == "map":
        instead = f'print one key ({called}["key"])'
    elif row is not None:
        first = getattr(row, "_fields", ("NAME",))[0]
        instead = f"loop over it and print its members (<% for x in {called} %>{{{{ x.{first} }}}}<% endfor %>)"
    else:
        instead = f'join it ({{{{ {called} | join(", ") }}}}) or loop over it'
    subject = f"{name} is {noun}, which has" if name else f"{noun} has"
    return f"{subject} no text of its own: {instead}"


def _printable(value: typing.Any) -> typing.Any:
    """What `{{ }}` prints: a list, map or row of drover's data is refused rather than printed as a
    Python repr (`()`, `Recent(Commits=(), ...)`); the static check (fieldcheck.py) names the field
    where it can, this catches what it cannot see (`Deps[0]`, a `set` name). Jinja's own values, a
    frontmatter list included, print as Jinja prints them; a frontmatter value that is YAML's null
    (`x:`, `x: ~`) prints nothing, as `Get("x")` gives it and an unset key prints (docs/templates.md)."""
    if value is None:
        return ""
    if isinstance(value, MapField):
        raise PrintedWhole(no_text("map"))
    if isinstance(value, tuple):
        if hasattr(value, "_fields"):
            raise PrintedWhole(no_text("row", row=type(value)))
        element = type(value[0]) if value and hasattr(value[0], "_fields") else None
        raise PrintedWhole(no_text("list", row=element))
    return value


# The filters the docs feature, callable as functions too: `{{ lower(Title) }}` reads as naturally
# as `{{ Title | lower }}`, and the Go templates drover's users come from write them that way.
FUNCTIONS: dict[str, typing.Callable[..., str]] = {
    "lower": lambda value: str(value).lower(),
    "upper": lambda value: str(value).upper(),
    "join": _join,
    "trim": lambda value: str(value).strip(),
}


@lru_cache(maxsize=1)
def environment() -> ImmutableSandboxedEnvironment:
    """The one Jinja environment every template renders in."""
    env = LimitedEnvironment(
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
        finalize=_printable,
    )
    env.globals.update(FUNCTIONS)
    # how a template quotes text others wrote (quoting.py): the built-ins print every such field
    # through one of them
    env.filters.update(fenced=fenced, oneline=oneline)
    return env


def builtin_name(slot: str) -> str:
    check_slot(slot)
    return f"{slot}.tmpl"


def builtin_display(slot: str) -> str:
    """How messages name a built-in template."""
    return f"{BUILTIN_FOLDER}/{builtin_name(slot)}"


def builtin_source(slot: str) -> str:
    """The shipped text of a slot's built-in template, read through the environment's loader."""
    env = environment()
    assert env.loader is not None
    source, _, _ = env.loader.get_source(env, builtin_name(slot))
    return source


def check_slot(slot: str) -> None:
    if slot not in SLOTS:
        raise UsageError(f"unknown template slot {slot!r}; slots: {', '.join(SLOTS + (BRANCH_SLOT,))}")


def normalise(text: str) -> str:
    return text.replace("\r\n", "\n").strip()


def base_hash(source: str) -> str:
    """First 12 hex digits of sha256 of a block's source, `\\r\\n` normalised, stripped."""
    return hashlib.sha256(normalise(source).encode("utf-8")).hexdigest()[:12]


def sha256(text: str) -> str:
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


@cache
def builtin_blocks(slot: str) -> dict[str, str]:
    """Block name -> default source as shipped, in the order the built-in defines them."""
    return {block.name: block.source for block in find_blocks(builtin_source(slot))}


def default_hash(slot: str, block: str) -> str:
    return base_hash(builtin_blocks(slot)[block])


def nearest(word: str, choices: typing.Iterable[str]) -> str:
    """The choice closest to a mistyped word (case first, then spelling)."""
    options = list(choices)
    return did_you_mean(word, options, cutoff=0.0, fold_case=True) or (options[0] if options else "")


_UNKNOWN_NAMED = re.compile(r"^No (filter|test) named '([^']+)'")


def with_hint(message: str) -> str:
    """Jinja's words for a mistyped filter or test, with the nearest of those the sandbox has."""
    if unknown := _UNKNOWN_NAMED.match(message):
        known = environment().filters if unknown[1] == "filter" else environment().tests
        if close := did_you_mean(unknown[2], known):
            return f"No {unknown[1]} named {unknown[2]!r} (did you mean {close}?)"
    return message


def syntax_error(exc: jinja_errors.TemplateSyntaxError, display: str) -> TemplateError:
    return TemplateError(with_hint(exc.message or str(exc)), path=display, line=exc.lineno)


def parse(text: str, display: str) -> nodes.Template:
    try:
        return environment().parse(text, name=display, filename=display)
    except jinja_errors.TemplateSyntaxError as exc:
        raise syntax_error(exc, display) from None


@lru_cache(maxsize=64)
def compile_template(text: str, display: str) -> jinja2.Template:
    """A template from its text: from the bytecode cache when it holds this very text, else compiled
    (and kept there), as the environment's loader does for the built-ins."""
    env = environment()
    cache = env.bytecode_cache
    bucket = cache.get_bucket(env, display, display, text) if cache is not None else None
    code = bucket.code if bucket is not None else None
    if code is None:
        try:
            code = env.compile(text, name=display, filename=display)
        except jinja_errors.TemplateSyntaxError as exc:
            raise syntax_error(exc, display) from None
        if bucket is not None and cache is not None:
            bucket.code = code
            cache.set_bucket(bucket)
    return env.template_class.from_code(env, code, env.make_globals(None))


def builtin_template(slot: str) -> jinja2.Template:
    try:
        return environment().get_template(builtin_name(slot))
    except jinja_errors.TemplateSyntaxError as exc:
        raise syntax_error(exc, builtin_display(slot)) from None
