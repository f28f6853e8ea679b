"""YAML frontmatter to data, safely: libyaml when present, nesting and alias expansion capped,
duplicate keys refused, and drover's own keys type-checked rather than coerced.

Errors are FrontmatterError (a detail and a line); items.py turns them into Unreadable.
yaml is imported only when a frontmatter needs the YAML loader (importing PyYAML costs a
single-item command about 17 ms): flat_load reads the common forms with copies of PyYAML's
resolver patterns, and LOADER and PURE_LOADER are made on first use.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Any

import re

YES_NO = ("yes", "true", "on", "y", "no", "false", "off", "n")


class FrontmatterError(Exception):
    def __init__(self, detail: str, line: int | None):
        super().__init__(detail)
        self.detail = detail
        self.line = line


# Frontmatter limits: flow brackets deeper than this, or more nodes than this once aliases are
# expanded, make the item unreadable instead of taking the process (or every later reader) down.
MAX_DEPTH = 100
MAX_NODES = 100_000


def _strict(base: type) -> type:
    import yaml

    class StrictLoader(base):  # type: ignore[misc,valid-type,unused-ignore]
        """A safe loader that refuses a key given twice instead of keeping the last."""

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if (key.tag, key.value) in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key.value!r}", key.start_mark)
                    seen.add((key.tag, key.value))
            return super().construct_mapping(node, deep)

    return StrictLoader


_LOADERS: dict[str, type] = {}


def __getattr__(name: str) -> type:
    """LOADER (libyaml's parser when PyYAML was built with it, several times faster) and
    PURE_LOADER (pure Python), both strict, made when first asked for."""
    if name not in ("LOADER", "PURE_LOADER"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name not in _LOADERS:
        import yaml

        base = yaml.SafeLoader if name == "PURE_LOADER" else getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
        _LOADERS[name] = _strict(base)
    return _LOADERS[name]


def load_frontmatter(source: str, loader: type | None = None) -> Any:
    """YAML to data, with nesting and alias expansion capped; raises FrontmatterError.

    Without an explicit loader, the common flat forms are read by flat_load, which returns
    exactly what the YAML loader would; anything else goes to the YAML loader.
    """
    if loader is None:
        flat = flat_load(source)
        if flat is not None:
            return flat
    if source.count("[") + source.count("{") > MAX_DEPTH and _flow_depth(source) > MAX_DEPTH:
        raise FrontmatterError(f"YAML: nested more than {MAX_DEPTH} levels deep", line=2)
    import yaml

    parser = (loader or __getattr__("LOADER"))(source)
    try:
        node = parser.get_single_node()
        if node is None:
            return None
        if "*" in source and _expanded_size(node, {}) > MAX_NODES:
            raise FrontmatterError(f"YAML: aliases expand to more than {MAX_NODES} values", line=2)
        return parser.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # libyaml marks the end of the stream for an unclosed bracket: name the last frontmatter line
        line = min(mark.line, source.rstrip("\n").count("\n")) + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontmatterError(f"YAML: {problem}", line=line) from None
    except RecursionError:
        raise FrontmatterError("YAML: nested too deeply", line=2) from None
    finally:
        parser.dispose()


def _flow_depth(source: str) -> int:
    """The deepest run of open brackets, counted roughly (quotes ignored): a guard, not a parser."""
    depth = deepest = 0
    for char in source:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(depth - 1, 0)
    return deepest


def _expanded_size(node: Any, sizes: dict[int, int]) -> int:
    """How many nodes the document holds once every alias is copied out (memoised per node)."""
    known = sizes.get(id(node))
    if known is not None:
        return known
    sizes[id(node)] = MAX_NODES + 1  # a node that contains itself expands without end
    total = 1
    kind = node.id  # a yaml.nodes class's own name for itself: scalar, sequence or mapping
    if kind == "sequence":
        for child in node.value:
            total += _expanded_size(child, sizes)
            if total > MAX_NODES:
                break
    elif kind == "mapping":
        for key, value in node.value:
            total += _expanded_size(key, sizes) + _expanded_size(value, sizes)
            if total > MAX_NODES:
                break
    sizes[id(node)] = total
    return total


_SCALAR = (str, int, float)


def check_types(meta: dict[Any, Any], source: str) -> None:
    """drover's own keys must hold what they mean; a wrong type is reported, never coerced."""

    def bad(key: str, what: str) -> FrontmatterError:
        return FrontmatterError(f"{key}: {what}", line=key_line(source, key))

    # (`type(...) is str` first: the common case, told without the isinstance calls)
    for key in ("id", "title", "kind"):
        value = meta.get(key)
        if value is not None and type(value) is not str and (isinstance(value, bool) or not isinstance(value, _SCALAR)):
            raise bad(key, f"must be text, not {_type_name(value)}")
    deps = meta.get("deps")
    if deps is not None and not isinstance(deps, list):
        raise bad("deps", f"must be a list of ids (deps: [{deps}]), not {_type_name(deps)}")
    for dep in deps or ():
        if type(dep) is not str and (isinstance(dep, bool) or not isinstance(dep, _SCALAR)):
            raise bad("deps", f"each dep must be an id, not {_type_name(dep)}")
    for key in ("closes", "origin"):
        value = meta.get(key)
        if value is None:
            continue
        for one in value if isinstance(value, list) and key == "closes" else (value,):
            if one is not None and not _issue_number(one):
                raise bad(key, f"{one!r} is not an issue number (12 or \"#12\")")
    shelved = meta.get("shelved")
    if shelved is not None and not isinstance(shelved, bool) and not (
        isinstance(shelved, str) and shelved.strip().lower() in YES_NO
    ):
        raise bad("shelved", f"{shelved!r} is not yes or no")


def _issue_number(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value > 0
    return isinstance(value, str) and value.lstrip("#").isdigit()


def _type_name(value: Any) -> str:
    return {list: "a list", dict: "a mapping", bool: "yes/no", type(None): "empty"}.get(type(value), "a value")


def key_line(source: str, key: str) -> int | None:
    for number, line in enumerate(source.split("\n"), start=2):
        if line.startswith(f"{key}:"):
            return number
    return None


# --- the flat fast path ---------------------------------------------------------------------
# Most frontmatter is `key: scalar`, `key: [a, b]` and `key:` over `- x` lines. flat_load reads
# exactly those and returns what YAML's safe loader returns for them; for anything it does not
# fully recognise (comments, tabs, anchors, tags, nesting, escapes, numbers other than plain
# decimals, dates, a key given twice...) it returns None and the YAML loader decides, errors
# included. tests/test_fast_paths.py checks the agreement on generated frontmatter.

_UNSURE = object()
_FLAT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)\Z")
# characters YAML refuses or reads as line breaks, a byte-order mark, a CR not before an LF:
# compiled on first use by _odd() (only non-ASCII frontmatter needs it; its Unicode ranges cost
# every command about 3 ms to compile at import)
_ODD: re.Pattern[str] | None = None
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
_BOOLS = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}
_FLOW_UNSURE = re.compile(r"[\[\]{}:#'\"]")  # inside [a, b]: nesting, mappings, comments, quotes

# PyYAML's implicit resolvers (yaml.resolver.Resolver.yaml_implicit_resolvers), copied so that
# the flat path needs no yaml import: (tag, pattern, flags, the first characters it applies to),
# in the order PyYAML adds them. tests/test_fast_paths.py checks the copy against PyYAML's.
_RESOLVER_SOURCES: tuple[tuple[str, str, int, str], ...] = (
    ("tag:yaml.org,2002:bool", r'''^(?:yes|Yes|YES|no|No|NO
                    |true|True|TRUE|false|False|FALSE
                    |on|On|ON|off|Off|OFF)$''', re.X, "yYnNtTfFoO"),
    ("tag:yaml.org,2002:float", r'''^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$''', re.X, "-+0123456789."),
    ("tag:yaml.org,2002:int", r'''^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$''', re.X, "-+0123456789"),
    ("tag:yaml.org,2002:merge", r'^(?:<<)$', 0, "<"),
    ("tag:yaml.org,2002:null", r'''^(?: ~
                    |null|Null|NULL
                    | )$''', re.X, "~nN"),  # and the empty scalar, which flat_load never resolves
    ("tag:yaml.org,2002:timestamp", r'''^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
                    |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
                     (?:[Tt]|[ \t]+)[0-9][0-9]?
                     :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
                     (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$''', re.X, "0123456789"),
    ("tag:yaml.org,2002:value", r'^(?:=)$', 0, "="),
    ("tag:yaml.org,2002:yaml", r'^(?:!|&|\*)$', 0, "!&*"),
)


class _Resolvers:
    """The (tag, pattern) pairs a plain scalar with one first character meets, compiled when
    first iterated (all of them at import cost a command about as much as half of yaml's import);
    then the table holds the compiled tuple itself."""

    __slots__ = ("first", "indexes")

    def __init__(self, first: str) -> None:
        self.first = first
        self.indexes: list[int] = []

    def __iter__(self) -> Iterator[tuple[str, re.Pattern[str]]]:
        compiled = tuple((_RESOLVER_SOURCES[index][0], _compiled(index)) for index in self.indexes)
        _RESOLVERS[self.first] = compiled
        return iter(compiled)


@lru_cache(maxsize=None)
def _compiled(index: int) -> re.Pattern[str]:
    _, pattern, flags, _ = _RESOLVER_SOURCES[index]
    return re.compile(pattern, flags)


def _resolver_table() -> dict[str, Iterable[tuple[str, re.Pattern[str]]]]:
    table: dict[str, _Resolvers] = {}
    for index, (_, _, _, firsts) in enumerate(_RESOLVER_SOURCES):
        for first in firsts:
            table.setdefault(first, _Resolvers(first)).indexes.append(index)
    return dict(table)


_RESOLVERS = _resolver_table()  # first character -> its resolvers, as PyYAML's table is keyed
# PyYAML's Reader.NON_PRINTABLE, copied as the resolvers are
_NON_PRINTABLE = "[^\x09\x0A\x0D\x20-\x7E\x85\xA0-\uD7FF\uE000-\uFFFD\U00010000-\U0010ffff]"


def _odd() -> re.Pattern[str]:
    global _ODD
    if _ODD is None:
        _ODD = re.compile(_NON_PRINTABLE + "|[\ufeff\x85\u2028\u2029\t]|\r(?!\n)")
    return _ODD


_VALUES: dict[str, Any] = {}  # the text after a key's colon -> what it reads as (a list as a tuple)
_VALUES_MAX = 4096  # texts remembered at most: ids and titles are new in every file


def flat_load(source: str) -> dict[str, Any] | None:
    """The frontmatter as YAML reads it when it is all flat keys; None when unsure."""
    if source.isascii() and "\r" not in source and source.replace("\n", "").isprintable():
        return _keys_load(source)
    return _lines_load(source)


def _keys_load(source: str) -> dict[str, Any] | None:
    """flat_load of printable ASCII where every line is `key: value` or `key:`, each value read
    once per distinct text (kinds, deps, `closes` repeat across items); any other line (a `- x`
    item, a blank line, a comment...) and the line loop reads it all."""
    meta: dict[str, Any] = {}
    values = _VALUES
    for line in source.split("\n"):
        if not line:
            continue  # a blank line (the last, after a closing newline)
        key, colon, text = line.partition(":")
        if not colon or key in meta or (key not in _KEYS_SEEN and not _plain_key(key)):
            return _lines_load(source)
        value = values.get(text, _UNSURE)
        if value is _UNSURE:
            value = _value(text)
            if value is _UNSURE:
                return None  # what the line loop says of this line
            if len(values) < _VALUES_MAX:
                values[text] = value
        meta[key] = list(value) if type(value) is tuple else value
    return meta or None


def _value(text: str) -> Any:
    """What the text after a key's colon reads as: None for none, a list as a tuple (a
    remembered value must not change with a caller's list), _UNSURE when unsure."""
    if text and text[0] != " ":
        return _UNSURE
    rest = text.strip(" ")
    if not rest:
        return None
    if rest[0] == "[" and rest[-1] == "]":
        found = _flow(rest[1:-1])
        return found if found is _UNSURE else tuple(found)
    return _scalar(rest, False)


def _lines_load(source: str) -> dict[str, Any] | None:
    """flat_load line by line: `- x` items below a key, blank lines, CRLF, non-ASCII text."""
    if source.isascii():
        # printable once line ends are gone: no control character, tab or lone CR (as _ODD, faster)
        if not source.replace("\r\n", "").replace("\n", "").isprintable():
            return None
    elif _odd().search(source):
        return None
    meta: dict[str, Any] = {}
    open_key = None  # a key whose value is empty, which `- x` lines below may make a list
    items: list[Any] | None = None
    indent = -1
    for line in source.split("\n"):
        if line[-1:] == "\r":
            line = line[:-1]
        first = line[:1]
        if first == " " or first == "-":
            depth = len(line) - len(line.lstrip(" "))
            if depth == len(line):
                continue  # a blank line
            if open_key is None or line[depth:depth + 2] != "- " or (items is not None and depth != indent):
                return None
            value = _scalar(line[depth + 2:].rstrip(" "), False)
            if value is _UNSURE:
                return None
            if items is None:
                items, indent = [], depth
                meta[open_key] = items
            items.append(value)
            continue
        if not first:
            continue
        open_key, items = None, None
        key, colon, rest = line.partition(":")
        if not colon or key in meta or (rest and rest[0] != " ") or not _plain_key(key):
            return None
        rest = rest.strip(" ")
        if not rest:
            meta[key] = None
            open_key = key
            continue
        value = _flow(rest[1:-1]) if rest[0] == "[" and rest[-1] == "]" else _scalar(rest, False)
        if value is _UNSURE:
            return None
        meta[key] = value
    return meta or None


_KEYS_SEEN: set[str] = set()


def _plain_key(key: str) -> bool:
    """A key YAML reads as this very string (not `yes`, `null`, `1`...); remembered once seen."""
    if key in _KEYS_SEEN:
        return True
    if not _FLAT_KEY.match(key) or _plain(key) is not key:
        return False
    if len(_KEYS_SEEN) < 1000:
        _KEYS_SEEN.add(key)
    return True


def _flow(inner: str) -> Any:
    """`[a, b]` of plain scalars; _UNSURE for anything more (quotes, nesting, comments)."""
    if not inner.strip(" "):
        return []
    if _FLOW_UNSURE.search(inner):
        return _UNSURE
    values = []
    for part in inner.split(","):
        value = _scalar(part.strip(" "), True)
        if value is _UNSURE:
            return _UNSURE
        values.append(value)
    return values


def _scalar(text: str, flow: bool) -> Any:
    """One single-line scalar as YAML reads it, or _UNSURE (flow: an item of a [a, b] list)."""
    if not text:
        return _UNSURE
    first = text[0]
    if not flow and first == "'":
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != "'" or "'" in inner.replace("''", ""):
            return _UNSURE
        return inner.replace("''", "'")
    if not flow and first == '"':
        inner = text[1:-1]
        if len(text) < 2 or text[-1] != '"' or '"' in inner or "\\" in inner:
            return _UNSURE
        return inner
    if first in _INDICATORS or first == " " or ": " in text or " #" in text or text[-1] == ":":
        return _UNSURE
    if first not in _RESOLVERS:
        return text
    return int(text) if _DECIMAL.match(text) else _plain(text)


def _plain(text: str) -> Any:
    """What a plain scalar means: the text itself, a bool, None, a decimal int, or _UNSURE."""
    for tag, pattern in _RESOLVERS.get(text[0], ()):
        if pattern.match(text):
            kind = tag.rpartition(":")[2]
            if kind == "bool":
                return _BOOLS[text.lower()]
            if kind == "null":
                return None
            if kind == "int" and _DECIMAL.match(text):
                return int(text)
            return _UNSURE
    return text
