"""What drover asks of an item's frontmatter beyond YAML: where it starts and ends, and what
drover's own keys hold (a wrong type is reported with its line, never coerced).

Nothing here imports yaml: the catalogue finds a frontmatter's text (to compare its digest
with the cache's) without parsing it, and strict_yaml.py, which parses, imports these rules.
"""
from __future__ import annotations

import re
from typing import Any

from drover.vocabulary import MAX_ITEM_NUMBER

TRUE_WORDS = ("yes", "true", "on", "y")

# drover's own frontmatter keys, each with what drover reads it for (docs/items.md's table); any
# other key is the project's own
OWN_KEYS = {
    "id": "an item's id",
    "title": "an item's title",
    "kind": "an item's kind",
    "deps": "an item's dependencies",
    "origin": "the issue an item came from",
    "closes": "the issues an item closes",
    "shelved": "an item set aside",
}
# What other tools and people call an item's dependencies: each one reads as a project key, and
# the item as one that waits on nothing
DEPS_SPELLINGS = frozenset({
    "dep", "depend", "depends", "depends_on", "depends-on", "dependson", "dependency", "dependencies",
    "deps_on", "requires", "required", "after", "blocked_by", "blocked-by", "blockedby", "blockers",
})
YES_NO = (*TRUE_WORDS, "no", "false", "off", "n")

# `---` alone on the first line (after a byte-order mark) and on a later one, CRLF or LF
_FRONTMATTER = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)(?:\r?\n)?^---[ \t]*(?:\r?\n|\Z)", re.S | re.M)


class FrontmatterError(Exception):
    """A frontmatter drover will not read: `detail` says why, `line` where (in the file)."""

    def __init__(self, detail: str, line: int | None):
        super().__init__(detail)
        self.detail = detail
        self.line = line


def split_frontmatter(text: str) -> tuple[str, int] | None:
    """(frontmatter source, offset where the body starts), or None when there is no frontmatter."""
    if text.startswith("---\n"):
        # the common form, found with string searches: the first line that opens with --- closes
        # the frontmatter when it is --- alone (else, and for CRLF, the expression decides)
        close = text.find("\n---", 3) + 1
        if close and text[close + 3:close + 4] == "\n" and text[close - 2:close] != "\r\n":
            return text[4:max(close - 1, 4)], close + 4
    match = _FRONTMATTER.match(text)
    if not match:
        return None
    return match.group(1), match.end()


_SCALAR = (str, int, float)


def check_types(meta: dict[Any, Any], source: str) -> None:
    """drover's own keys must hold what they mean; raises FrontmatterError naming the key's line."""

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
    return issue_number(value) is not None


# The highest issue number drover takes, the highest item number's bound: past it a number is no
# longer exact as JSON's, nor, past SQLite's integers, stored (a disposition's row); and its digits
# are counted before int() reads them, which refuses more than 4300 (hostile review 46)
MAX_ISSUE_NUMBER = MAX_ITEM_NUMBER


def issue_number(value: Any) -> int | None:
    """The issue number a frontmatter writes (`12`, `"12"`, `"#12"`); None for anything else. ASCII
    digits only, above 0 and at most MAX_ISSUE_NUMBER: `"²"` passed str.isdigit, then int() refused it
    and the issue fell out of `closes` without a word; `"٣"` read as issue 3, and `"0"` reached the tracker."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value <= MAX_ISSUE_NUMBER else None
    if not isinstance(value, str):
        return None
    digits = value.removeprefix("#")  # one, as GitHub writes it: "##12" is no number
    if not (digits.isascii() and digits.isdigit()) or len(digits) > len(str(MAX_ISSUE_NUMBER)):
        return None
    return issue_number(int(digits))


def _type_name(value: Any) -> str:
    return {list: "a list", dict: "a mapping", bool: "yes/no", type(None): "empty"}.get(type(value), "a value")


def key_line(source: str, key: str) -> int | None:
    """The file line of `key:` in the frontmatter `source` (the file's line 1 is the opening ---)."""
    for number, line in enumerate(source.split("\n"), start=2):
        if line.startswith(f"{key}:"):
            return number
    return None


def meant_key(key: str) -> str:
    """The own key (OWN_KEYS) that the project key `key` looks like a misspelling of; "" when none:
    a common spelling of deps, the own key in another case, or one difflib finds close (`titel`).
    `id` is matched only by case: at two letters, difflib finds it in any short key (`uid`, `ids`)."""
    folded = key.lower()
    if folded in OWN_KEYS:
        return folded if folded != key else ""
    if folded in DEPS_SPELLINGS:
        return "deps"
    import difflib

    close = difflib.get_close_matches(folded, [own for own in OWN_KEYS if len(own) > 2], n=1, cutoff=0.8)
    return close[0] if close else ""
