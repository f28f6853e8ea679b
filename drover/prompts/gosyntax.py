"""Recognise the syntax of other template languages and say how drover writes the same thing.

Many users arrive from Go-templated tools (and older drover manuals); a Jinja parse error about
`define` would not tell them what to write instead. Others arrive from Jinja itself, whose
default `{% %}` and `{# #}` drover leaves as text, so it would reach the agent as written. Raw
blocks and comments are skipped: what they hold is never read as a template.
"""
from __future__ import annotations

import re

from drover.errors import TemplateError
from drover.prompts.env import blank_unparsed

_ACTION = re.compile(r"\{\{-?\s*(?P<body>.*?)\s*-?\}\}", re.DOTALL)
_DEFINE = re.compile(r'(?:define|block)\s+"(?P<name>[^"]*)"')
# A Go action's keyword is followed by a space or ends the action; `range(3)` is a Jinja call, and
# so is `range (3)` (Go ranges over a field or a variable, not a parenthesised pipeline, in practice).
_STATEMENT = re.compile(r"(?P<word>if|range|with|else|template)(?:\s+|\Z)(?P<rest>.*)", re.DOTALL)
_JINJA_RANGE = re.compile(r"range\s*\(")
_JINJA_TAG = re.compile(r"\{(?P<kind>[%#]).*?(?P=kind)\}", re.DOTALL)
_CALL = re.compile(r'(?P<name>Is|Get)\s+(?P<arg>"[^"]*")')
_DOT_FIELD = re.compile(r"(?<![\w\])])\.(?P<field>[A-Z]\w*)")
# Go's comparison and logic functions take their operands as arguments; Jinja writes operators
_OPERATORS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and": "and", "or": "or"}
_ARGUMENT = re.compile(r'\s*(\((?:[^()]|\([^()]*\))*\)|"(?:[^"\\]|\\.)*"|[^\s()"]+)')


def _arguments(text: str) -> list[str] | None:
    """A Go function's arguments (a parenthesised pipeline, a string, a word), or None when the
    text is not only such arguments."""
    found, at = [], 0
    while at < len(text):
        match = _ARGUMENT.match(text, at)
        if not match:
            return None
        found.append(match.group(1))
        at = match.end()
        while at < len(text) and text[at].isspace():
            at += 1
    return found


_SIMPLE = re.compile(r'(?:\w+(?:\([^()]*\))?|"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?)')


def _operand(argument: str) -> str:
    """An argument as a Jinja operand: a parenthesised call or value loses its parentheses, a nested
    Go condition, `len X` or `index X KEY` is written the Jinja way (`X | length`, `X[KEY]`)."""
    if not (argument.startswith("(") and argument.endswith(")")):
        return argument
    inner = argument[1:-1].strip()
    if _SIMPLE.fullmatch(inner):
        return inner
    word, _, tail = inner.partition(" ")
    if word == "len" and _SIMPLE.fullmatch(tail.strip()):
        return f"{tail.strip()} | length"
    keyed = _arguments(tail.strip()) if word == "index" else None
    if keyed and len(keyed) == 2 and all(_SIMPLE.fullmatch(part) for part in keyed):
        return f"{keyed[0]}[{keyed[1]}]"
    translated = _condition(inner)
    return f"({translated})" if translated != inner else argument


def _condition(rest: str) -> str:
    """A Go condition written with Jinja operators: `eq (Get("kind")) "bug"` -> `Get("kind") == "bug"`."""
    word, _, tail = rest.partition(" ")
    arguments = _arguments(tail.strip())
    if not arguments:
        return rest
    operands = [_operand(argument) for argument in arguments]
    if word == "not" and len(operands) == 1:
        return f"not {operands[0]}"
    if word in ("and", "or") and len(operands) >= 2:
        return f" {word} ".join(operands)
    if word in _OPERATORS and len(operands) == 2:
        return f"{operands[0]} {_OPERATORS[word]} {operands[1]}"
    if word == "eq" and len(operands) > 2:  # Go's eq a b c: a equals any of the others
        return " or ".join(f"{operands[0]} == {other}" for other in operands[1:])
    return rest


def _drover_form(body: str) -> str | None:
    """The drover form of one Go action, or None when the action is not Go syntax."""
    if body.startswith("/*"):
        inner = body.strip("/* ").strip()
        return f"drover comments are written <# {inner} #>"
    match = _DEFINE.match(body)
    if match:
        name = match.group("name") or "NAME"
        return f"drover blocks are written <% block {name} %> ... <% endblock %>"
    if body == "end":
        return "drover closes a statement with <% endif %>, <% endfor %> or <% endblock %>"
    match = None if _JINJA_RANGE.match(body) else _STATEMENT.match(body)
    chained = match is not None and match.group("word") == "else" and re.match(r"if\s", match.group("rest") or "")
    if match and (match.group("word") != "else" or not match.group("rest") or chained):
        word = {"range": "for", "with": "if", "template": "include"}.get(match.group("word"), match.group("word"))
        rest = _DOT_FIELD.sub(r"\g<field>", match.group("rest")).strip()
        rest = _CALL.sub(r"\g<name>(\g<arg>)", rest)
        if chained:  # Go's `else if X`: Jinja's elif
            return f"drover statements are written <% elif {_condition(rest[2:].strip())} %>"
        if word == "if":
            rest = _condition(rest)
        if word == "else":
            return "drover statements are written <% else %>"
        if word == "for":
            rest = f"x in {rest}"
        end = {"if": "<% endif %>", "for": "<% endfor %>"}.get(word, "")
        return f"drover statements are written <% {word} {rest} %>" + (f" ... {end}" if end else "")
    match = _DOT_FIELD.search(body)
    if match and body.lstrip().startswith("."):
        written = _DOT_FIELD.sub(r"\g<field>", body)
        return f"drover fields are written {{{{ {written} }}}} (no leading dot)"
    return None


def go_syntax_error(text: str, display: str) -> TemplateError | None:
    """One line for the first action written in Go template syntax, or None."""
    read = blank_unparsed(text)
    for match in _ACTION.finditer(read):
        form = _drover_form(match.group("body"))
        if form:
            line = read.count("\n", 0, match.start()) + 1
            return TemplateError(f"{form} (this looks like Go template syntax)", path=display, line=line)
    return None


def jinja_delimiter_warnings(text: str, display: str) -> list[TemplateError]:
    """One line for each statement or comment written with Jinja's default delimiters; what an
    expression holds (`{{ "{% x %}" }}`, a string) is no tag."""
    read = _ACTION.sub(lambda action: re.sub(r"[^\n]", " ", action.group()), blank_unparsed(text))
    found = []
    for match in _JINJA_TAG.finditer(read):
        written = " ".join(match.group().split())
        written = written if len(written) <= 60 else written[:57] + "..."
        if match.group("kind") == "%":
            said = "drover's statement syntax is <% ... %>"
        else:
            said = "drover's comment syntax is <# ... #>"
        found.append(TemplateError(
            f"{written} is Jinja's default syntax, which drover does not read: it reaches the agent as text; "
            f"{said} ({{{{ ... }}}} stays the expression syntax)",
            path=display, line=read.count("\n", 0, match.start()) + 1,
        ))
    return found
