"""drover's strict YAML handler for python-frontmatter, through which every item file is read
and written.

Strict: libyaml's parser when PyYAML was built with it (CSafeLoader, several times faster than
SafeLoader), a key given twice refused (YAML would keep the last silently), nesting and alias
expansion capped (else a small file could take the process, or every later reader, down), and
drover's own keys type-checked. Errors are FrontmatterError naming the file's line; file.py
turns them into Unreadable. Importing this module imports yaml (10 to 16 ms with
python-frontmatter): file.py imports it only where a file is parsed or written.
"""
from __future__ import annotations

import sys
from typing import Any

import frontmatter
import yaml
from frontmatter.default_handlers import YAMLHandler

from drover.items.frontmatter_rules import FrontmatterError, check_types, split_frontmatter

# Collections nested deeper than this (flow or block, through aliases too), or more nodes than this
# once aliases are expanded, make the item unreadable. libyaml reads block nesting to 1,000 levels,
# and what reads the data after it (the catalogue's JSON, show, the type checks) recursed through
# it: from 500 levels on, a traceback of every list, show, check and report (hostile review 49).
MAX_DEPTH = 100
MAX_NODES = 100_000


# what a constructor raises of a value it cannot make: ValueError (`due: 2024-02-30`, a number past
# int()'s digits), and, of a tag whose text it reads unchecked, KeyError (`!!bool maybe`) and
# AttributeError (`!!timestamp nope`), and OverflowError (a base-60 float, `1:1:...:1.5`, of more
# than 173 parts: YAML adds it up in an integer it turns into a float each part)
_UNMADE = (ValueError, LookupError, AttributeError, OverflowError)
# what a key may be: what JSON writes as a key (the catalogue's cache and `show --json` write the
# frontmatter so); a date or bytes (`2024-01-01: x`, `? !!binary aGk=`) was a traceback of every list
_KEYS = (str, int, float, bool, type(None))
MAP_TAG = "tag:yaml.org,2002:map"


class _UniqueKeys:
    """Refuses a key given twice in one mapping, where YAML would keep the last silently, and a
    mapping's key that JSON has no key for (a date, bytes)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen = set()
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                if (key.tag, key.value) in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key.value!r}", key.start_mark)
                seen.add((key.tag, key.value))
        mapping = super().construct_mapping(node, deep)  # type: ignore[misc]
        if node.tag == MAP_TAG:  # a !!set's members may be anything hashable: JSON writes it as text
            for key_node, _ in node.value:
                key = self.construct_object(key_node)  # type: ignore[attr-defined]  # made already: a lookup
                if not isinstance(key, _KEYS):
                    raise yaml.constructor.ConstructorError(
                        None, None, f"a key must be text, a number, true, false or null, not {type(key).__name__}",
                        key_node.start_mark)
        return mapping


class StrictLoader(_UniqueKeys, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The strict loader: libyaml's parser when PyYAML was built with it."""


class PureStrictLoader(_UniqueKeys, yaml.SafeLoader):  # type: ignore[misc]
    """The strict loader in pure Python: the tests hold both to the same rules."""


# the digits int() reads and str() writes (Python's own limit; 0 would mean none)
INT_DIGITS = sys.get_int_max_str_digits() or 4300
# a base-60 integer of more parts has more digits than that (60 ** 2400 has 4,268)
SEXAGESIMAL_PARTS = 2400


_TOO_MANY_DIGITS = 10 ** INT_DIGITS
_OVER_THE_LIMIT = f"Exceeds the limit ({INT_DIGITS} digits) for integer string conversion"  # int()'s words


def _construct_int(loader: Any, node: Any) -> int:
    """YAML's integer, held to the digits int() reads in decimal: a hex, octal or binary one
    (`0xfff...`) or a base-60 one (`1:1:1:...`) is not read through int()'s decimal limit, and of
    more digits made every list, show and drive a traceback where JSON or `show` wrote it, a base-60
    one of a million parts hours of work first (each part a multiplication of the whole) (hostile
    review 48)."""
    if str(node.value).count(":") >= SEXAGESIMAL_PARTS:
        raise ValueError(_OVER_THE_LIMIT)
    value = yaml.SafeLoader.construct_yaml_int(loader, node)
    if abs(value) >= _TOO_MANY_DIGITS:
        raise ValueError(_OVER_THE_LIMIT)
    return int(value)


for _loader in (StrictLoader, PureStrictLoader):
    _loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


class StrictYAMLHandler(YAMLHandler):
    """python-frontmatter's YAML handler with drover's rules: the frontmatter found as drover finds
    it (split_frontmatter), loaded strictly, drover's keys checked; written as yaml.safe_dump
    writes it (keys in their order, lists of scalars in flow style), as `drover new` always has."""

    def __init__(self, loader: type = StrictLoader) -> None:
        super().__init__()
        self.loader = loader

    def detect(self, text: str) -> bool:
        return split_frontmatter(text) is not None

    def split(self, text: str) -> tuple[str, str]:
        """(frontmatter, body), the body byte for byte; FrontmatterError when there is no frontmatter
        (python-frontmatter would read a ValueError as "no metadata" and keep the file whole)."""
        found = split_frontmatter(text)
        if found is None:
            raise FrontmatterError("no YAML frontmatter between --- lines", line=1)
        source, offset = found
        return source, text[offset:]

    def load(self, fm: str, **kwargs: object) -> dict[Any, Any]:
        """The frontmatter's mapping ({} for an empty one); raises FrontmatterError."""
        if not fm.strip():
            return {}
        meta = _load(fm, self.loader)
        if not isinstance(meta, dict):
            raise FrontmatterError("the frontmatter is not a mapping of keys to values", line=2)
        check_types(meta, fm)
        return meta

    def export(self, metadata: dict[str, object], **kwargs: object) -> str:
        kwargs.setdefault("Dumper", yaml.SafeDumper)
        kwargs.setdefault("default_flow_style", None)
        kwargs.setdefault("sort_keys", False)
        return super().export(metadata, **kwargs)


HANDLER = StrictYAMLHandler()


def read_post(text: str, split: tuple[str, int] | None = None) -> tuple[frontmatter.Post, int]:
    """The item file `text` as a Post whose content is its body byte for byte, and the offset where
    the body starts (`split`: the text's split_frontmatter, when known); raises FrontmatterError.

    The handler's own steps, not frontmatter.loads: loads strips the text (a section's rewrite
    must keep every other byte), and its Post(**metadata) refuses keys that YAML reads as
    numbers, booleans or null, which drover accepts (only its own keys are checked).
    """
    if split is None:
        source, body = HANDLER.split(text)
        offset = len(text) - len(body)
    else:
        source, offset = split
        body = text[offset:]
    post = frontmatter.Post(body, HANDLER)
    post.metadata = HANDLER.load(source)
    return post, offset


def item_text(meta: dict[str, Any], body: str) -> str:
    """An item file's text: `meta` as yaml.safe_dump writes it, a blank line, then `body` (which
    ends with one newline: frontmatter.dumps strips the text's end)."""
    return frontmatter.dumps(frontmatter.Post(body, HANDLER, **meta)) + "\n"


def _load(source: str, loader: type) -> Any:
    """YAML to data with `loader`, nesting and alias expansion capped; raises FrontmatterError."""
    if source.count("[") + source.count("{") > MAX_DEPTH and _flow_depth(source) > MAX_DEPTH:
        raise FrontmatterError(f"YAML: nested more than {MAX_DEPTH} levels deep", line=2)
    parser = loader(source)
    try:
        # composed once: the alias check reads the node tree before anything is built from it
        node = parser.get_single_node()
        if node is None:
            return None
        if "*" in source or sum(map(source.count, _OPENERS)) > MAX_DEPTH:
            measures: dict[int, tuple[int, int]] = {}
            size, depth = _measured(node, measures)
            if "*" in source and size > MAX_NODES:  # a long list of its own is no bomb
                raise FrontmatterError(f"YAML: aliases expand to more than {MAX_NODES} values", line=2)
            if depth > MAX_DEPTH + 1:  # the frontmatter's own mapping is a level of its own
                raise FrontmatterError(f"YAML: nested more than {MAX_DEPTH} levels deep",
                                       line=_deep_line(node, measures))
        return parser.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # libyaml marks the end of the stream for an unclosed bracket: name the last frontmatter line
        line = min(mark.line, source.rstrip("\n").count("\n")) + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FrontmatterError(f"YAML: {problem}", line=line) from None
    except RecursionError:
        raise FrontmatterError("YAML: nested too deeply", line=2) from None
    except _UNMADE as exc:
        # a value YAML's own types cannot hold: `due: 2024-02-30` (no such day), a number of more than
        # 4300 digits; each was a traceback of every list, show and drive (hostile review 46); a tag
        # its constructor reads without a check (`!!bool maybe`: KeyError, `!!timestamp nope`:
        # AttributeError) the same (hostile review 47), a base-60 float no float holds (hostile review 49)
        why = str(exc).split(";")[0] if isinstance(exc, (ValueError, OverflowError)) else "not a value of its tag"
        raise FrontmatterError(f"YAML: no value can be made of it ({why})", line=_unmade_line(loader, node)) from None
    finally:
        parser.dispose()


def _unmade_line(loader: type, node: Any) -> int:
    """The frontmatter line of the first scalar under `node` that `loader` makes no value of."""
    maker = loader("")
    nodes = [node]  # a stack, the first of the file on top
    while nodes:
        found = nodes.pop()
        if isinstance(found, yaml.ScalarNode):
            try:
                maker.construct_object(found)
            except _UNMADE:
                return int(found.start_mark.line) + 2
        elif isinstance(found, yaml.MappingNode):
            nodes += reversed([part for pair in found.value for part in pair])
        elif isinstance(found, yaml.SequenceNode):
            nodes += reversed(found.value)
    return 2


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


# what begins a collection, one of them each level: a block sequence's `-`, a mapping's `:` or `?`, a
# flow bracket; only a source with more of them (or an alias) can nest past MAX_DEPTH
_OPENERS = ("-", ":", "?", "[", "{")


def _measured(node: Any, known: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """(how many nodes the document under `node` holds once every alias is copied out, counted to
    MAX_NODES + 1, how many collections deep it nests), memoised per node, so each node is read once
    however many aliases name it; the walk of a collection stops once it is too deep."""
    if isinstance(node, yaml.ScalarNode):
        return 1, 0
    found = known.get(id(node))
    if found is not None:
        return found
    known[id(node)] = (MAX_NODES + 1, MAX_DEPTH + 2)  # a node that contains itself is endless both ways
    children = node.value if isinstance(node, yaml.SequenceNode) else [part for pair in node.value for part in pair]
    # the scalars counted in one step, the collections walked: a long list of scalars is the common case
    size, depth = 1 + sum(isinstance(child, yaml.ScalarNode) for child in children), 0
    for child in children:
        if not isinstance(child, yaml.ScalarNode):
            child_size, child_depth = _measured(child, known)
            size, depth = min(size + child_size, MAX_NODES + 1), max(depth, child_depth)
            if depth > MAX_DEPTH:
                break
    known[id(node)] = (min(size, MAX_NODES + 1), depth + 1)
    return known[id(node)]


def _deep_line(node: Any, known: dict[int, tuple[int, int]]) -> int:
    """The frontmatter line of the first key whose key or value nests past MAX_DEPTH (2 for none)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if max(_measured(key, known)[1], _measured(value, known)[1]) > MAX_DEPTH:
                return int(key.start_mark.line) + 2
    return 2
