"""YAML frontmatter to data, safely: libyaml when present, nesting and alias expansion capped,
duplicate keys refused, and drover's own keys type-checked rather than coerced.

Errors are FrontmatterError (a detail and a line); items.py turns them into Unreadable.
"""
from __future__ import annotations

from typing import Any

import yaml

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


def _loader_base() -> type:
    """libyaml's parser when PyYAML was built with it (several times faster), else pure Python."""
    base: type = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    return base


def _strict(base: type) -> type:
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


LOADER = _strict(_loader_base())
PURE_LOADER = _strict(yaml.SafeLoader)


def load_frontmatter(source: str, loader: type | None = None) -> Any:
    """YAML to data, with nesting and alias expansion capped; raises FrontmatterError."""
    if source.count("[") + source.count("{") > MAX_DEPTH and _flow_depth(source) > MAX_DEPTH:
        raise FrontmatterError(f"YAML: nested more than {MAX_DEPTH} levels deep", line=2)
    parser = (loader or LOADER)(source)
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
    if isinstance(node, yaml.SequenceNode):
        for child in node.value:
            total += _expanded_size(child, sizes)
            if total > MAX_NODES:
                break
    elif isinstance(node, yaml.MappingNode):
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

    for key in ("id", "title", "kind"):
        value = meta.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, _SCALAR)):
            raise bad(key, f"must be text, not {_type_name(value)}")
    deps = meta.get("deps")
    if deps is not None and not isinstance(deps, list):
        raise bad("deps", f"must be a list of ids (deps: [{deps}]), not {_type_name(deps)}")
    for dep in deps or ():
        if isinstance(dep, bool) or not isinstance(dep, _SCALAR):
            raise bad("deps", f"each dep must be an id, not {_type_name(dep)}")
    for key in ("closes", "origin"):
        value = meta.get(key)
        values = value if isinstance(value, list) and key == "closes" else [value]
        for one in values:
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
