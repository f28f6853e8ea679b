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
    if match and (match.group("word") != "else" or not match.group("rest")):
        word = {"range": "for", "with": "if", "template": "include"}.get(match.group("word"), match.group("word"))
        rest = _DOT_FIELD.sub(r"\g<field>", match.group("rest")).strip()
        rest = _CALL.sub(r"\g<name>(\g<arg>)", rest)
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
