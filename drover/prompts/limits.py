"""Render limits: a template cannot exhaust the machine (time, memory, output, recursion).

The sandbox already refuses unsafe attributes and caps `range`. What it leaves open is size and
time: `'x' * 10**10`, `'%*d' % (10**9, 1)`, `center(10**10)`, nested loops. This environment
checks sizes before building a big value, checks a per-render deadline in every call, operator
and loop step, and the renderer caps the output. Each limit ends the render with one
`template failed` line (docs/templates.md, "Limits").

Nesting is limited before anything renders: a template whose brackets, blocks or operators nest
deeper than Jinja's parser, its compiler or Python's can follow is a syntax error naming its line
(`MAX_DEPTH`), so no walk over a parsed template (field checks, the compiler) meets a deep tree.
"""
from __future__ import annotations

import functools
import re
import threading
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Sized

from jinja2 import nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.visitor import NodeTransformer

RENDER_SECONDS = 5.0
OUTPUT_LIMIT = 4 * 1024 * 1024  # characters; a prompt is a few tens of kilobytes
_CHECK_EVERY = 1024  # loop steps between clock reads

# Nodes within nodes: a prompt template nests a few tens deep at most; Jinja's compiler walks the
# tree by recursion, and Python's compiler refuses code nested a few hundred levels deep.
MAX_DEPTH = 100
NESTED = "the template nests too deeply: brackets, blocks or operators within one another past what can compile"

_state = threading.local()
_WIDE_FORMAT = re.compile(r"\{[^{}]*\d{7,}[^{}]*\}")
_WIDE_PERCENT = re.compile(r"%[-#0 +]*\d{7,}|%[-#0 +*\d]*\.\d{7,}")


class LimitExceeded(Exception):
    """A render went over a limit; the renderer turns it into a TemplateError."""


def start() -> None:
    """Open the deadline for a render on this thread."""
    _state.deadline = time.monotonic() + RENDER_SECONDS
    _state.steps = 0


def stop() -> None:
    _state.deadline = None


def check_time() -> None:
    deadline = getattr(_state, "deadline", None)
    if deadline is not None and time.monotonic() > deadline:
        raise LimitExceeded(f"the render took longer than {RENDER_SECONDS:g} seconds")


def check_size(size: int, what: str = "a value") -> None:
    if size > OUTPUT_LIMIT:
        raise LimitExceeded(f"{what} would be {size:,} characters, over the {OUTPUT_LIMIT:,} limit")


def _length(value: typing.Any) -> int:
    return len(value) if isinstance(value, (str, list, tuple, bytes)) else 0


def _check_numbers(args: Iterable[typing.Any]) -> None:
    """A width, count or padding bigger than the output limit can only build an oversized value."""
    for arg in args:
        if isinstance(arg, int) and not isinstance(arg, bool) and abs(arg) > OUTPUT_LIMIT:
            raise LimitExceeded(f"the number {arg:,} is over the {OUTPUT_LIMIT:,} limit for a width or count")
        if isinstance(arg, (tuple, list)):
            _check_numbers(arg)


def _guard_result(value: typing.Any) -> typing.Any:
    if isinstance(value, Sized) and isinstance(value, (str, list, tuple)):
        check_size(len(value))
    return value


def _guard_filter(func: Callable[..., typing.Any]) -> Callable[..., typing.Any]:
    @functools.wraps(func)
    def guarded(*args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        check_time()
        _check_numbers([*args[1:], *kwargs.values()])
        return _guard_result(func(*args, **kwargs))

    return guarded


class _Guard(NodeTransformer):
    """Route every loop's iterable and every `~` concatenation through the environment's guards."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = nodes.Call(nodes.EnvironmentAttribute("guard_iter"), [node.iter], [], None, None,
                               lineno=node.iter.lineno)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return nodes.Call(nodes.EnvironmentAttribute("guard_value"), [node], [], None, None, lineno=node.lineno)


class LimitedEnvironment(ImmutableSandboxedEnvironment):
    """The sandbox with size checks before big values are built and a deadline in every step."""

    intercepted_binops = frozenset({"*", "%", "**", "+", "//"})

    def __init__(self, **options: typing.Any) -> None:
        super().__init__(**options)
        self.filters = {name: _guard_filter(func) for name, func in self.filters.items()}

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        parser = Parser(self, source, name, filename)
        try:
            tree = parser.parse()
        except RecursionError:  # the parser recurses once per bracket, unary operator and block
            raise TemplateSyntaxError(NESTED, parser.stream.current.lineno, name, filename) from None
        deepest = _deeper_than(tree, MAX_DEPTH)
        if deepest is not None:
            raise TemplateSyntaxError(NESTED, deepest.lineno, name, filename)
        return tree

    def _compile(self, source: str, filename: str) -> typing.Any:
        try:
            return super()._compile(source, filename)
        except (RecursionError, SyntaxError, MemoryError):  # e.g. Python's 20 loops within one another
            raise TemplateSyntaxError(NESTED, 0, None, filename) from None

    def _generate(self, source: nodes.Template, name: str | None, filename: str | None,
                  defer_init: bool = False) -> str:
        return super()._generate(_Guard().visit(source), name, filename, defer_init)

    def guard_iter(self, iterable: typing.Any) -> Iterator[typing.Any]:
        check_time()
        return _stepped(iterable)

    def guard_value(self, value: typing.Any) -> typing.Any:
        check_time()
        return _guard_result(value)

    def call_binop(self, context: typing.Any, operator: str, left: typing.Any, right: typing.Any) -> typing.Any:
        check_time()
        if operator == "*":
            count = right if _length(left) else left
            size = max(_length(left), _length(right))
            if size and isinstance(count, int):
                check_size(size * max(count, 0))
        elif operator == "%" and isinstance(left, str):
            if _WIDE_PERCENT.search(left):
                raise LimitExceeded("a format width is over the limit")
            if "*" in left:  # `%*d` takes its width from the arguments
                _check_numbers(right if isinstance(right, (tuple, list)) else [right])
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            check_size(max(abs(left), 2).bit_length() * right // 3, "a number")
        elif operator == "+":
            check_size(_length(left) + _length(right))
        return _guard_result(super().call_binop(context, operator, left, right))

    def call(self, context: typing.Any, obj: typing.Any, /, *args: typing.Any, **kwargs: typing.Any) -> typing.Any:
        check_time()
        _check_numbers([*args, *kwargs.values()])
        return _guard_result(super().call(context, obj, *args, **kwargs))

    def wrap_str_format(self, value: typing.Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None and _WIDE_FORMAT.search(value.__self__):
            raise LimitExceeded("a format width is over the limit")
        return wrapped


def _deeper_than(tree: nodes.Node, limit: int) -> nodes.Node | None:
    """The first node found more than `limit` levels down (None when none is), without recursion."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return node
        stack.extend((child, depth + 1) for child in node.iter_child_nodes())
    return None


def _stepped(iterable: typing.Any) -> Iterator[typing.Any]:
    for steps, item in enumerate(iterable, 1):
        if steps % _CHECK_EVERY == 0:
            check_time()
        yield item
