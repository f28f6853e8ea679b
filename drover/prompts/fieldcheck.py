"""The static field check: names and attributes a template uses that the data does not have.

Found from the parsed template, without rendering, so `check` and every render refuse
`{{ Titel }}` with a did-you-mean before any agent sees a hole.
"""
from __future__ import annotations

import dataclasses
import typing
from functools import cache, lru_cache
from typing import Any

from jinja2 import exceptions as jinja_errors
from jinja2 import meta, nodes

from drover.errors import FieldError, TemplateError
from drover.items.frontmatter_rules import OWN_KEYS
from drover.prompts.env import a_row
from drover.prompts.fields import FIELD_NAMES, TemplateData
from drover.prompts.env import FUNCTIONS, environment, nearest, no_text, parse, syntax_error

# Keys every item may carry (SPEC 4): a template asking Is("shelved") is never asking about nothing.
STANDARD_KEYS = frozenset(OWN_KEYS)

# What an unknown name may have meant: every field, and the functions the docs feature.
KNOWN_NAMES = (*FIELD_NAMES, *FUNCTIONS)

@cache
def _field_types() -> dict[str, Any]:
    return typing.get_type_hints(TemplateData)


def _struct(hint: Any) -> type | None:
    """The row type a hint names: a dataclass or a NamedTuple (prompts/fields.py's rows)."""
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or (issubclass(hint, tuple) and hasattr(hint, "_fields"))):
        return hint
    return None


def _element(hint: Any) -> type | None:
    if typing.get_origin(hint) in (tuple, list):
        args = typing.get_args(hint)
        return _struct(args[0]) if args else None
    return None


def _members(struct: type) -> list[str]:
    # a NamedTuple's tuple methods are not members a template means
    tuple_methods = ("count", "index") if issubclass(struct, tuple) else ()
    return [name for name in dir(struct) if not name.startswith("_") and name not in tuple_methods]


def _type_of(expr: nodes.Node, scope: dict[str, Any]) -> Any:
    if isinstance(expr, nodes.Name):
        return scope.get(expr.name)
    if isinstance(expr, nodes.Getattr):
        struct = _struct(_type_of(expr.node, scope))
        if struct is not None:
            return typing.get_type_hints(struct).get(expr.attr)
    return None


def _spelt(expr: nodes.Node) -> str:
    """How the template wrote a name or a chain of attributes (`Recent.Commits`)."""
    if isinstance(expr, nodes.Getattr):
        return f"{_spelt(expr.node)}.{expr.attr}"
    return expr.name if isinstance(expr, nodes.Name) else ""


def _printed_whole(expr: nodes.Node, scope: dict[str, Any]) -> str | None:
    """Why `{{ expr }}` is refused when it names a list, a map or a row of the data, else None."""
    hint = _type_of(expr, scope)
    row = _struct(hint)
    if row is not None:
        return no_text("row", _spelt(expr), row)
    kind = {tuple: "list", list: "list", dict: "map"}.get(typing.get_origin(hint) or hint)
    return no_text(kind, _spelt(expr), _element(hint)) if kind else None


def _walk_attributes(node: nodes.Node, scope: dict[str, Any], display: str, problems: list[TemplateError]) -> None:
    if isinstance(node, nodes.Assign) and isinstance(node.target, nodes.Name):
        _walk_attributes(node.node, scope, display, problems)
        scope.pop(node.target.name, None)  # `<% set Deps = ... %>`: the name no longer holds the field
        return
    if isinstance(node, nodes.Output):
        for expr in node.nodes:
            refused = _printed_whole(expr, scope)
            if refused:
                problems.append(TemplateError(refused, path=display, line=expr.lineno))
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
            problems.append(FieldError(
                f"unknown field {node.attr} on {owner}, {a_row(struct)} (did you mean "
                f"{nearest(node.attr, members)}?); its fields: {', '.join(members)}",
                path=display, line=node.lineno,
            ))
    for child in node.iter_child_nodes():
        _walk_attributes(child, scope, display, problems)


def unknown_field_error(name: str, display: str | None = None, line: int | None = None) -> FieldError:
    return FieldError(
        f"unknown field {name} (did you mean {nearest(name, KNOWN_NAMES)}?); fields: {', '.join(FIELD_NAMES)};"
        f" functions: {', '.join(FUNCTIONS)}",
        path=display, line=line,
    )


@lru_cache(maxsize=64)
def _field_problems_cached(text: str, display: str) -> tuple[TemplateError, ...]:
    tree = parse(text, display)
    known = set(FIELD_NAMES) | set(environment().globals)
    try:
        unknown = meta.find_undeclared_variables(tree) - known
    except jinja_errors.TemplateSyntaxError as exc:  # the compiler's own checks, e.g. a block defined twice
        raise syntax_error(exc, display) from None
    problems: list[TemplateError] = []
    reported: set[str] = set()
    for name in tree.find_all(nodes.Name):
        if name.name in unknown and name.ctx == "load" and name.name not in reported:
            reported.add(name.name)
            problems.append(unknown_field_error(name.name, display, name.lineno))
    _walk_attributes(tree, dict(_field_types()), display, problems)
    problems += _other_templates(tree, display)
    return tuple(sorted(problems, key=lambda exc: exc.line or 0))


# The tags that read another template. The sandbox's loader holds only the built-ins, which read
# without the item's fields (an import) or as a second copy of the whole prompt (an include), and
# an error inside one blamed the built-in's own line.
_READS_ANOTHER = {nodes.Include: "include", nodes.Import: "import", nodes.FromImport: "import", nodes.Extends: "extends"}


def _other_templates(tree: nodes.Template, display: str) -> list[TemplateError]:
    return [TemplateError(
        f"{_READS_ANOTHER[type(node)]}: drover's templates read no other template; write the text in this "
        "one (to change part of a built-in prompt, override its blocks: drover help templates)",
        path=display, line=node.lineno) for node in tree.find_all(tuple(_READS_ANOTHER))]


def field_problems(text: str, display: str) -> list[TemplateError]:
    """Names and attributes the template data does not have, found without rendering."""
    return list(_field_problems_cached(text, display))


def _map_key(node: nodes.Node) -> tuple[str, str] | None:
    """("Meta", "k") for `Meta["k"]` or `Meta.k`; None for anything else."""
    if isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
        target, key = node.node, node.arg.value
    elif isinstance(node, nodes.Getattr):
        target, key = node.node, node.attr
    else:
        return None
    if isinstance(target, nodes.Name) and target.name in ("Meta", "VerifyCommands"):
        return target.name, key
    return None


def key_problems(text: str, display: str, used_keys: typing.Container[str],
                 verify_keys: typing.Iterable[str] = ()) -> list[TemplateError]:
    """Frontmatter or verify keys a template asks for that nothing in the project has.

    `Is("k")`, `Get("k")` and `Meta["k"]` name a frontmatter key; `VerifyCommands["k"]` a
    [verify] entry. Each renders empty when absent, so a typo would otherwise pass silently.
    """
    tree = parse(text, display)
    verify = set(verify_keys) | {"default"}
    # A [verify] entry is named for a frontmatter key, so the project expects items to set it.
    # used_keys is asked key by key: check's UsedKeys looks a key up in the items only when asked
    known = STANDARD_KEYS | (verify - {"default"})
    problems = []
    for node in tree.find_all((nodes.Call, nodes.Getitem, nodes.Getattr)):
        if (
            isinstance(node, nodes.Call)
            and isinstance(node.node, nodes.Name)
            and node.node.name in ("Is", "Get")
            and node.args
            and isinstance(node.args[0], nodes.Const)
            and isinstance(node.args[0].value, str)
            and node.args[0].value not in known
            and node.args[0].value not in used_keys
        ):
            key = node.args[0].value
            problems.append(TemplateError(
                f'{node.node.name}("{key}") names a frontmatter key no item uses', path=display, line=node.lineno
            ))
            continue
        found = _map_key(node)
        if found is None:
            continue
        field, key = found
        if field == "Meta" and key not in known and key not in used_keys:
            problems.append(TemplateError(
                f'Meta["{key}"] names a frontmatter key no item uses (it renders empty)', path=display, line=node.lineno
            ))
        elif field == "VerifyCommands" and key not in verify:
            problems.append(TemplateError(
                f'VerifyCommands["{key}"] names no [verify] entry (it renders empty)', path=display, line=node.lineno
            ))
    return problems
