"""Rendering a slot's prompt: resolve the source, compile it over the built-in, render in limits."""
from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any, NamedTuple

import jinja2
from jinja2 import exceptions as jinja_errors

from drover.config import Config
from drover.errors import ItemError, TemplateError
from drover.prompts.fields import NO_FOLLOW_UPS, Origin, TemplateData
from drover.prompts.resources import builtin_dir
from drover.vocabulary import BRANCH_SLOT
from drover.prompts import limits
from drover.prompts.env import (MapField, PrintedWhole, builtin_display, builtin_name, builtin_source, builtin_template,
                               compile_template, sha256, with_hint)
from drover.prompts.merge import conflict_errors
from drover.prompts.overrides import (INLINE, Source, compose, override_warnings, parse_override, read_at_path, resolve,
                                      untrusted_setting, whole_lines)

BRANCH_DISPLAY = "drover.toml: [run] branch"

# Fields read from the tracker: the branch template sees them empty, so a branch name never
# depends on whether gh answered.
_TRACKER_EMPTY: dict[str, Any] = {
    **NO_FOLLOW_UPS,
    "Origin": Origin(),
    "Closes": (),
    "UndisposedCloses": (),
}


class Provenance(NamedTuple):
    """Where a prompt came from: what was asked for, what was used, and digests of both texts."""

    requested: str
    resolved: str
    base_hashes: dict[str, str]
    template_sha256: str
    prompt_sha256: str


def estimated_tokens(text: str) -> int:
    """A text's size in tokens as drover estimates it: 4 characters a token, rounded up."""
    return (len(text) + 3) // 4


class Rendered(NamedTuple):
    """A rendered prompt, its provenance, and the warnings a launch prints."""

    text: str
    provenance: Provenance
    warnings: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return estimated_tokens(self.text)


class Prepared(NamedTuple):
    """A slot's template, compiled, with the base hashes and warnings its run records."""

    template: jinja2.Template
    template_text: str
    base_hashes: dict[str, str]
    warnings: tuple[str, ...]
    displays: dict[str, str]  # code filename -> name in messages


def _raise_first(problems: list[TemplateError]) -> None:
    if problems:
        raise problems[0]


def prepare(slot: str, source: Source) -> Prepared:
    builtin_file = str(Path(builtin_dir()) / builtin_name(slot))
    displays = {builtin_file: builtin_display(slot), builtin_display(slot): builtin_display(slot)}
    if source.text is None:
        # The shipped templates are checked by the test suite (test_builtin_fields_are_known);
        # skipping the static walk here keeps it off every prompt's path.
        text = builtin_source(slot)
        return Prepared(builtin_template(slot), text, {}, source.warnings, displays)
    from drover.prompts.fieldcheck import field_problems  # here: a prompt on the shipped templates walks no fields

    override = parse_override(source.text, slot, source.display)
    _raise_first(field_problems(source.text, source.display))
    _raise_first(conflict_errors(source.text, source.display))  # the markers never reach an agent
    displays[source.display] = source.display
    warnings = (*source.warnings, *override_warnings(override))
    if override.whole:
        return Prepared(compile_template(source.text, source.display), source.text, {}, warnings, displays)
    # Inheritance keeps every line outside the blocks as shipped; the extends tag adds no line,
    # so errors in the override keep the file's own line numbers.
    child = f'<% extends "{builtin_name(slot)}" %>' + whole_lines(source.text)
    # An addition has no base to record; it is listed so the record names every overridden block.
    replacing = {block.name for block in override.replacements()}
    hashes = {block.name: (block.base or "") if block.name in replacing else "" for block in override.blocks}
    return Prepared(compile_template(child, source.display), compose(slot, override), hashes, warnings, displays)


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


def _generate(template: jinja2.Template, context: dict[str, Any]) -> str:
    """Render within the time and output limits (limits.py)."""
    limits.start()
    try:
        parts: list[str] = []
        size = 0
        for part in template.generate(context):
            size += len(part)
            limits.check_size(size, "the output")
            parts.append(part)
        return "".join(parts)
    finally:
        limits.stop()


def _location_or_file(exc: BaseException, displays: dict[str, str]) -> tuple[str | None, int | None]:
    """Where a limit tripped; the template's own file when no template line is on the stack."""
    path, line = _location(exc, displays)
    return (path, line) if path else (list(displays.values())[-1], None)


def render_template(template: jinja2.Template, data: TemplateData, displays: dict[str, str]) -> str:
    context = data.context()
    context["Meta"] = MapField(data.Meta)
    context["VerifyCommands"] = MapField(data.VerifyCommands)
    try:
        return _generate(template, context)
    except jinja_errors.SecurityError as exc:
        path, line = _location(exc, displays)
        raise TemplateError(f"the template sandbox refused: {exc}", path=path, line=line) from None
    except jinja_errors.UndefinedError as exc:
        path, line = _location(exc, displays)
        match = re.fullmatch(r"'(\w+)' is undefined", str(exc))
        if match:
            from drover.prompts.fieldcheck import unknown_field_error

            raise unknown_field_error(match.group(1), path, line) from None
        raise TemplateError(str(exc), path=path, line=line) from None
    except PrintedWhole as exc:
        path, line = _location(exc, displays)
        raise TemplateError(str(exc), path=path, line=line) from None
    except jinja_errors.TemplateSyntaxError as exc:
        raise TemplateError(with_hint(exc.message or str(exc)), path=displays.get(exc.filename or "", exc.filename),
                            line=exc.lineno) from None
    except RecursionError as exc:
        path, line = _location_or_file(exc, displays)
        raise TemplateError("template failed: it recursed too deeply", path=path, line=line) from None
    except (limits.LimitExceeded, MemoryError, OverflowError) as exc:
        _refuse_an_item_past_the_cap(data)
        path, line = _location_or_file(exc, displays)
        raise TemplateError(f"template failed: {exc or 'out of memory'}", path=path, line=line) from None
    except (jinja_errors.TemplateError, TypeError, ValueError, ArithmeticError, LookupError, AttributeError) as exc:
        path, line = _location(exc, displays)
        raise TemplateError(f"template failed: {with_hint(str(exc))}", path=path, line=line) from None


def _refuse_an_item_past_the_cap(data: TemplateData) -> None:
    """An item whose own text is past the render's output cap is the item's fault, not the
    template's: say so, naming its file (an item file may be up to 16 MB, a prompt 4 MB)."""
    size = max(len(data.Body), len(data.Changes))
    if size > limits.OUTPUT_LIMIT:
        raise ItemError(f"{data.Id}'s text is {size:,} characters, more than a prompt carries "
                        f"({limits.OUTPUT_LIMIT:,}): shorten the item, or keep the long part in a file it names",
                        path=data.Path or None)


def render(slot: str, data: TemplateData, *, root: Path, config: Config, explicit: str | None = None) -> Rendered:
    """Render a slot's prompt for one item, with its provenance and launch warnings."""
    if slot == BRANCH_SLOT:
        template = explicit if explicit is not None else config.branch
        text = render_branch(data, template, display="--template" if explicit is not None else BRANCH_DISPLAY)
        origin = "inline" if explicit is not None else "[run] branch"
        return Rendered(text, Provenance(origin, origin, {}, sha256(template), sha256(text)))
    source = resolve(slot, Path(root), config, explicit)
    prepared = prepare(slot, source)
    text = render_template(prepared.template, data, prepared.displays)
    if not text.strip():
        raise TemplateError(f"the {slot} template rendered only whitespace", path=source.display)
    provenance = Provenance(
        requested=source.requested,
        resolved=source.resolved,
        base_hashes=dict(prepared.base_hashes),
        template_sha256=sha256(prepared.template_text),
        prompt_sha256=sha256(text),
    )
    return Rendered(text, provenance, prepared.warnings)


def launch_warnings(slot: str, *, root: Path, config: Config, explicit: str | None = None) -> list[str]:
    """The template warnings a launch prints: repository templates off, stale or whole overrides."""
    source = resolve(slot, Path(root), config, explicit)
    warnings = list(source.warnings)
    if source.text is not None:
        warnings.extend(override_warnings(parse_override(source.text, slot, source.display)))
    return warnings


def names_follow_ups(slot: str, *, root: Path, config: Config, explicit: str | None = None) -> bool:
    """Whether the slot's template may read a follow-up field (fields.NO_FOLLOW_UPS). A template in
    the sandbox reaches a field only by writing its name, so a name in neither the built-in nor the
    override's text is never read, and its tracker calls (one for the register, one for each of the
    item and its deps) are not made: the built-in draft names none."""
    if slot == BRANCH_SLOT:
        return False
    # the built-in's answer first, once a process: the implement and review templates name them, so
    # their prompts (a drive's every launch) resolve no override here that the render resolves again
    return _builtin_names_follow_ups(slot) or _names_follow_ups(resolve(slot, Path(root), config, explicit).text or "")


@functools.cache
def _builtin_names_follow_ups(slot: str) -> bool:
    return _names_follow_ups(builtin_source(slot))


def _names_follow_ups(text: str) -> bool:
    return any(name in text for name in ("FollowUps", "RegisterUnreadable", "Owned"))  # "Owned" in "OwnedUnreadable" too


def render_branch(data: TemplateData, template: str, display: str = BRANCH_DISPLAY) -> str:
    """The item's branch name from the one-line branch template (tracker fields empty)."""
    if template != Config().branch:  # the shipped default is checked by the test suite, as the built-ins are
        from drover.prompts.fieldcheck import field_problems
        from drover.prompts.gosyntax import go_syntax_error

        go = go_syntax_error(template, display)
        if go is not None:
            raise go
        _raise_first(field_problems(template, display))
    compiled = compile_template(template, display)
    branch_data = data._replace(Branch="", **_TRACKER_EMPTY)
    text = render_template(compiled, branch_data, {display: display}).strip()
    if not text:
        raise TemplateError("the branch template rendered only whitespace", path=display)
    return text


def branch_source(root: Path, explicit: str, configured: str) -> tuple[str, str, str]:
    """The text of `--template SRC` for the branch slot, inline or `@path` in the repository, its
    name in messages (`--template`, or the path), as every other slot names it, and a warning.
    With repository templates off (resolve's rule) an `@path` is ignored for `configured`, the
    `[run] branch` template: "" as its name, and the warning saying so."""
    if explicit.startswith("@"):
        untrusted = untrusted_setting()
        if untrusted:
            return configured, "", f"{untrusted}: ignoring --template {explicit} (a repository file); using [run] branch"
        return read_at_path(Path(root), explicit[1:]), explicit[1:], ""
    return explicit, INLINE, ""


def guidance_diff(slot: str, data: TemplateData, *, root: Path, config: Config,
                  explicit: str | None = None) -> list[tuple[str, int]]:
    """The lines the lean prompt drops, each with its estimated tokens (of `explicit`, `--template SRC`,
    when given: the template render would use)."""
    import difflib  # here: a prompt never diffs
    lean = render(slot, data._replace(Guidance="lean"), root=root, config=config, explicit=explicit).text.splitlines()
    detailed = render(slot, data._replace(Guidance="detailed"), root=root, config=config,
                      explicit=explicit).text.splitlines()
    dropped: list[str] = []
    for op, _, _, j1, j2 in difflib.SequenceMatcher(None, lean, detailed, autojunk=False).get_opcodes():
        if op in ("insert", "replace"):
            dropped.extend(line for line in detailed[j1:j2] if line.strip())
    return [(line, estimated_tokens(line)) for line in dropped]
