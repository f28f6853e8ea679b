"""`drover check` for templates, the `--diff` views of stale overrides, and `schema --prompts`."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Container

from dataclasses import dataclass, replace
from drover import git
from drover.config import Config
from drover.errors import BlockError, DroverError, Finding, ProblemCode, TemplateError
from drover.prompts.fields import TemplateData
from drover.vocabulary import CONFIG_FILE, SLOTS
from drover.prompts.env import base_hash, builtin_blocks, compile_template, normalise
from drover.prompts.fieldcheck import field_problems, key_problems
from drover.prompts.gosyntax import jinja_delimiter_warnings
from drover.prompts.merge import conflict_errors
from drover.prompts.overrides import BASE_MUST_OPEN, Override, OverrideBlock, Source, override_findings, override_problems, parse_override, read_repo_file, stale_blocks, unended_blocks, untrusted_setting
from drover.prompts.rendering import BRANCH_DISPLAY, prepare, render_branch, render_template


def sample_data(config: Config) -> TemplateData:
    """An item with every field at its empty value: what a render must survive for any item."""
    item_id = f"{config.prefix}-1"
    return TemplateData(
        Id=item_id, Title="Sample item", Kind="feature", Path=f"{config.items}/{item_id}.md",
        Body="Sample body.\n", Meta={"id": item_id, "title": "Sample item"},
        VerifyCommand=config.verify.get("default", ""), VerifyCommands=dict(config.verify),
    )


def _sample_problems(slot: str, text: str, written: str, config: Config) -> list[TemplateError]:
    """Runtime failures (limits, sandbox, missing values) of an override on the sample item."""
    data = sample_data(config)
    try:
        prepared = prepare(slot, Source(f"prompts:{written}", f"prompts:{written}", written, text))
        for guidance in ("detailed", "lean"):
            render_template(prepared.template, data._replace(Guidance=guidance), prepared.displays)
    except TemplateError as exc:
        return [exc]
    return []


def _branch_problems(config: Config) -> list[TemplateError]:
    try:
        for exc in field_problems(config.branch, BRANCH_DISPLAY):
            return [exc]
        compile_template(config.branch, BRANCH_DISPLAY)
        branch = render_branch(sample_data(config), config.branch)
    except TemplateError as exc:
        return [exc]
    if not git.valid_branch_name(branch):
        return [TemplateError(f"renders {branch!r} for a sample item, which is not a valid git branch name",
                              path=BRANCH_DISPLAY)]
    return []


def check_templates(root: Path, config: Config, used_keys: Container[str] | None = None) -> list[Finding]:
    """Problems in the project's templates, one line each, paths as written in drover.toml."""
    findings: list[Finding] = []
    untrusted = untrusted_setting()  # first: a value it cannot read stops the check (exit 2)

    def report(exc: DroverError, error: bool = True) -> None:
        findings.append(Finding.of(exc, error))

    for slot in SLOTS:
        written = config.prompts.get(slot, "")
        if not written:
            continue
        try:
            text = read_repo_file(Path(root), written)
        except TemplateError as exc:
            report(exc)
            continue
        override, problems = override_problems(text, slot, written)
        for problem in problems:
            report(problem)
        if override is None:
            continue
        findings.extend(override_findings(override))
        for block in override.replacements():
            if block.misplaced_base:
                report(BlockError(f"block {block.name}: {BASE_MUST_OPEN}", path=written, line=block.misplaced_base))
        try:
            fields = field_problems(text, written)
            for problem in fields:
                report(problem)
            if used_keys is not None:
                for problem in key_problems(text, written, used_keys, config.verify):
                    report(problem, error=False)
        except TemplateError as exc:
            if not problems:  # otherwise the compiler only restates a block problem reported above
                report(exc)
            continue
        conflicts = conflict_errors(text, written)
        for problem in conflicts:
            report(problem)
        for problem in jinja_delimiter_warnings(text, written):
            report(problem, error=False)
        if not override.whole:
            for block in unended_blocks(text):
                report(BlockError(
                    f"block {block.name}: its last line has no newline; drover renders the block as whole "
                    "lines, so end it on a line of its own to write what renders", path=written, line=block.line,
                ), error=False)
        if not problems and not fields and not conflicts:
            for problem in _sample_problems(slot, text, written, config):
                report(problem)
    if untrusted:
        # launches render the built-ins: what is wrong with the ignored files is no reason to stop one
        findings[:] = [replace(found, error=False) for found in findings]
    for problem in _branch_problems(config):
        # [run] branch is a setting: its problem is drover.toml's (the line of a one-line template is none of the file's)
        findings.append(Finding(str(problem), code=ProblemCode.CONFIG, path=CONFIG_FILE))
    if untrusted and any(config.prompts.get(slot) for slot in SLOTS):
        findings.append(Finding(f"{untrusted}: launches ignore the [prompts] files checked above", False,
                                code=ProblemCode.REPO_TEMPLATES_OFF))
    return findings


# ---------------------------------------------------------------------------- --diff


@dataclass(frozen=True)
class StaleBlock:
    """A stale replacement with what a diff or merge needs: its base text (None: unknown) and today's."""

    slot: str
    written: str
    block: OverrideBlock
    today_hash: str
    base_text: str | None
    today_text: str

    @property
    def key(self) -> str:
        return f"{self.slot}/{self.block.name}"


def stale_overrides(root: Path, config: Config) -> list[tuple[Override, list[StaleBlock]]]:
    """Each readable block override file with its stale replacements (check reports the rest)."""
    from drover.prompts.history import load_history

    history = load_history()
    found = []
    for slot in SLOTS:
        written = config.prompts.get(slot, "")
        if not written:
            continue
        try:
            override = parse_override(read_repo_file(Path(root), written), slot, written)
        except TemplateError:
            continue
        if override.whole:
            continue
        stale = [
            StaleBlock(slot, written, block, today, history.get(f"{slot}/{block.name}", {}).get(block.base or ""),
                       normalise(builtin_blocks(slot)[block.name]))
            for block, today in stale_blocks(override)
        ]
        found.append((override, stale))
    return found


def _unknown_base(stale: StaleBlock) -> str:
    if stale.block.base:
        return f"base {stale.block.base} is not a default this drover has shipped; today's default is {stale.today_hash}"
    if stale.block.misplaced_base:
        return (f"line {stale.block.misplaced_base}: {BASE_MUST_OPEN}, so none is recorded; "
                f"today's default is {stale.today_hash}")
    return f"no drover-base hash recorded; today's default is {stale.today_hash}"


def diff_lines(old: str, new: str) -> list[str]:
    """A line diff with two-character prefixes: '  ' unchanged, '- ' removed, '+ ' added."""
    import difflib  # here: a prompt, which imports this module, never diffs
    return [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if not line.startswith("? ")]


def diff_stale(root: Path, config: Config, paint: Callable[[list[str]], list[str]] | None = None) -> str:
    """For each stale replacement, the change from the default it recorded to today's; `paint`
    colours a diff's lines for a terminal (the CLI's)."""
    out: list[str] = []
    for _, stale_list in stale_overrides(root, config):
        for stale in stale_list:
            out.append(f"==> {stale.key} in {stale.written}")
            if stale.base_text is None:
                out.append(_unknown_base(stale))
                continue
            out.append(f"--- {stale.block.base} (the override's base)")
            out.append(f"+++ {stale.today_hash} (today's default)")
            lines = diff_lines(stale.base_text, stale.today_text)
            out.extend(paint(lines) if paint else lines)
    return "".join(line + "\n" for line in out)


def diff_unified(root: Path, config: Config) -> tuple[str, list[str]]:
    """Standard unified diffs, one file per block (`implement.tmpl#scope`), and notes for the rest.

    The notes (blocks whose base is unknown) go apart, so the diff stays a clean patch for delta
    or diff-so-fancy (it changes drover's default, no file of the repository: nothing to apply).
    """
    import difflib  # here, as in diff_lines

    out: list[str] = []
    notes: list[str] = []
    for _, stale_list in stale_overrides(root, config):
        for stale in stale_list:
            name = f"{stale.slot}.tmpl#{stale.block.name}"
            if stale.base_text is None:
                notes.append(f"{name} in {stale.written}: {_unknown_base(stale)}")
                continue
            out.extend(difflib.unified_diff(
                (stale.base_text + "\n").splitlines(keepends=True), (stale.today_text + "\n").splitlines(keepends=True),
                fromfile=f"a/{name}", tofile=f"b/{name}",
                fromfiledate=f"{stale.block.base} (the override's base)",
                tofiledate=f"{stale.today_hash} (today's default)",
            ))
    return "".join(out), notes


# ---------------------------------------------------------------------------- schema


def schema_prompts() -> list[dict[str, Any]]:
    """One entry per block of every slot: its default as shipped, its hash, whether it is an addition."""
    entries = []
    for slot in SLOTS:
        for name, source in builtin_blocks(slot).items():
            default = normalise(source)
            entries.append({
                "slot": slot,
                "block": name,
                "default": default,
                "hash": base_hash(source),
                "addition": not default,
            })
    return entries
