"""`drover override`: start a block override from today's default, and upgrade stale ones by merge.

The merge is a line-wise three-way merge: base = the default the override recorded (its text is in
the shipped history), theirs = today's default, ours = the override's block. A clean merge rewrites
the block and records today's hash; a conflict writes standard markers and keeps the old hash.
"""
from __future__ import annotations

import re
from pathlib import Path

from dataclasses import dataclass
from drover.errors import Refused, TemplateError, UsageError
from drover.git.files import read_regular
from drover.items.file import line_ending, write_atomic
from drover.ledger.project import Project
from drover.vocabulary import CONFIG_FILE, SLOTS
from drover.prompts.check import StaleBlock, stale_overrides
from drover.prompts.env import base_hash, builtin_blocks, check_slot, find_blocks, nearest, normalise
from drover.prompts.merge import conflict_lines, merge3
from drover.prompts.overrides import BASE_MUST_OPEN, parse_override, read_repo_file, repo_path

DEFAULT_FOLDER = "prompts"
ADDITION_PLACEHOLDER = "<# Lines written here render after drover's own lines of this block. #>"
_BASE_HEAD = re.compile(r"\A\s*<#-?\s*drover-base:[^#]*#>[ \t]*\n?")


def block_text(name: str, body: str, base: str | None) -> str:
    """An override block as drover writes it: tags on their own lines, the base comment first."""
    head = f"<# drover-base: {base} #>\n" if base else ""
    return f"<% block {name} %>\n{head}{body.rstrip()}\n<% endblock %>\n"


def _write_override(path: Path, text: str) -> None:
    """Write an override file's `text`, read with universal newlines and no byte-order mark
    (read_repo_file), in the line ending the file has and with its mark: a CRLF file written back in
    LF had every line changed."""
    try:
        was = read_regular(path).decode("utf-8", "replace")
    except FileNotFoundError:
        was = ""
    mark = "\ufeff" if was.startswith("\ufeff") else ""
    write_atomic(path, mark + text.replace("\n", line_ending(was)))


# ---------------------------------------------------------------------------- drover override SLOT BLOCK


def _add_prompts_key(config_path: Path, slot: str, written: str) -> None:
    """Set `<slot> = "<path>"` under [prompts], creating the table; other lines stay as they are, byte
    for byte, and the new ones take the file's line ending."""
    # bytes, then decode: read_text turned a CRLF file's every line into LF (the header's pattern
    # takes CRLF: unfound, a second [prompts] table would make drover.toml unreadable)
    text = read_regular(config_path).decode("utf-8")
    # a byte-order mark (read as drover.toml is, config.load) stood before a `[prompts]` on the first line:
    # unfound, a second table was added (hostile review 50)
    mark = "\ufeff" if text.startswith("\ufeff") else ""
    text = text[len(mark):]
    nl = line_ending(text)
    value = '"' + written.replace("\\", "\\\\").replace('"', '\\"') + '"'
    header = re.search(r"(?m)^\[prompts\][ \t]*(#[^\r\n]*)?(\r?\n|\Z)", text)
    if header is None:
        text = text.rstrip("\r\n") + f"{nl}{nl}[prompts]{nl}{slot} = {value}{nl}"
    else:
        following = re.search(r"(?m)^\[", text[header.end():])
        end = header.end() + following.start() if following else len(text)
        table = text[header.end():end]
        key = re.compile(rf"(?m)^([ \t]*{slot}[ \t]*=[ \t]*)(\"\"|'')")
        if key.search(table):
            table = key.sub(lambda m: m.group(1) + value, table, count=1)
        else:
            table = f"{slot} = {value}{nl}" + table
        text = text[: header.end()] + table + text[end:]
    write_atomic(config_path, mark + text)


def start_override(project: Project, slot: str, block: str, *, file: str | None = None,
                   addition: bool = False) -> list[str]:
    """Write a block's default (or an addition) into the slot's override file; say what was done."""
    check_slot(slot)
    defaults = builtin_blocks(slot)
    if block not in defaults:
        raise UsageError(f"no block {block} in the {slot} template (did you mean {nearest(block, defaults)}?); "
                         f"{slot} blocks: {', '.join(defaults)}")
    configured = project.config.prompts.get(slot, "")
    if file and configured and Path(file) != Path(configured):
        raise Refused(f"[prompts] {slot} is already {configured}; drop --file to add the block there")
    written = configured or file or f"{DEFAULT_FOLDER}/{slot}.tmpl"
    path = repo_path(project.root, written)
    said: list[str] = []
    existing = read_repo_file(project.root, written) if path.exists() else ""
    if existing.strip():
        override = parse_override(existing, slot, written)
        if override.whole:
            raise Refused(f"{written} replaces the whole {slot} template (text outside any block); "
                          "blocks cannot be added to it")
        if any(found.name == block for found in override.blocks):
            raise Refused(f"{written} already overrides {slot}/{block}; edit it there, or run `drover override --update`")
    default = normalise(defaults[block])
    if addition or not default:
        body = ("{{ super() -}}\n" if default else "") + ADDITION_PLACEHOLDER
        text = block_text(block, body, None)
        kind = "an addition to" if default else "an addition for"
    else:
        text = block_text(block, default, base_hash(default))
        kind = f"today's default (base {base_hash(default)}) of"
    separator = "\n" if existing.strip() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_override(path, existing.rstrip("\n") + ("\n" if existing.strip() else "") + separator + text)
    said.append(f"wrote {kind} {slot}/{block} to {written}")
    if not configured:
        _add_prompts_key(project.root / CONFIG_FILE, slot, written)
        said.append(f'added [prompts] {slot} = "{written}" to {CONFIG_FILE}')
    return said


# ---------------------------------------------------------------------------- --update


@dataclass(frozen=True)
class UpdateResult:
    """What updating an override's stale blocks printed, and whether any failed to merge."""

    lines: tuple[str, ...]
    failed: bool


def _override_body(source: str) -> str:
    return normalise(_BASE_HEAD.sub("", source, count=1))


def _replace_block(text: str, name: str, new_source: str) -> str:
    for block in find_blocks(text):
        if block.name == name:
            return text[: block.start] + new_source + text[block.end:]
    raise TemplateError(f"block {name} vanished while merging")


def _merge_one(text: str, stale: StaleBlock) -> tuple[str, str, bool]:
    """The file text with one stale block merged; the merged body; whether it merged cleanly."""
    assert stale.base_text is not None
    ours = _override_body(stale.block.source)
    merged, clean = merge3(stale.base_text, ours, stale.today_text, (
        f"your {stale.key} ({stale.written})", f"drover's default {stale.block.base} (your base)",
        f"drover's default {stale.today_hash} (today's)",
    ))
    base = stale.today_hash if clean else stale.block.base
    new_source = f"\n<# drover-base: {base} #>\n{merged.rstrip()}\n"
    return _replace_block(text, stale.block.name, new_source), merged, clean


def update_overrides(project: Project, *, dry_run: bool = False) -> UpdateResult:
    """Merge every stale replacement whose base is known; report the rest. Writes unless dry_run."""
    lines: list[str] = []
    failed = False
    for slot in SLOTS:
        written = project.config.prompts.get(slot, "")
        if not written:
            continue
        try:
            override = parse_override(read_repo_file(project.root, written), slot, written)
        except TemplateError as exc:
            lines.append(f"{exc} (not updated)")
            failed = True
            continue
        if override.whole:
            lines.append(f"WHOLE TEMPLATE {slot} in {written}:{override.stray_line}: refused, a whole-template override has no blocks "
                         "to merge; move your changes into blocks (drover override SLOT BLOCK) to receive upgrades")
            failed = True
    for override, stale_list in stale_overrides(project.root, project.config):
        text = override.text
        changed = False
        for stale in stale_list:
            if stale.base_text is None:
                if stale.block.misplaced_base:
                    lines.append(f"UNKNOWN BASE {stale.key} in {stale.written}:{stale.block.misplaced_base}: "
                                 f"{BASE_MUST_OPEN}, so none is recorded (not updated)")
                    failed = True
                    continue
                why = (f"its base {stale.block.base} is not a default this drover has shipped" if stale.block.base
                       else "it records no drover-base hash")
                lines.append(f"UNKNOWN BASE {stale.key} in {stale.written}: {why}; merge by hand against today's "
                             f"default (drover schema --prompts) and record drover-base: {stale.today_hash}")
                failed = True
                continue
            if conflict_lines(stale.block.source):
                lines.append(f"CONFLICT {stale.key} in {stale.written}: still holds the markers of an earlier "
                             f"merge; resolve them, then set drover-base: {stale.today_hash}")
                failed = True
                continue
            text, merged, clean = _merge_one(text, stale)
            changed = True
            if clean:
                lines.append(f"{'would merge' if dry_run else 'merged'} {stale.key} in {stale.written} (base {stale.block.base} -> {stale.today_hash})")
            else:
                failed = True
                lines.append(f"CONFLICT {stale.key} in {stale.written}: resolve the marked lines, then set "
                             f"drover-base: {stale.today_hash}")
            if dry_run:
                lines.extend([f"==> {stale.key} in {stale.written}", merged])
        if changed and not dry_run:
            _write_override(repo_path(project.root, override.display), text)
    if not lines:
        lines.append("every override is up to date")
    return UpdateResult(tuple(lines), failed)


def override_command(project: Project, slot: str | None, block: str | None, *, file: str | None = None,
                     addition: bool = False, update: bool = False, dry_run: bool = False) -> tuple[list[str], int]:
    """`drover override` (and `check --update`): the lines to print and the exit code."""
    if update:
        if slot or block or file or addition:
            raise UsageError("--update takes no SLOT, BLOCK, --file or --addition: it updates every override")
        result = update_overrides(project, dry_run=dry_run)
        return list(result.lines), 1 if result.failed else 0
    if dry_run:
        raise UsageError("--dry-run goes with --update")
    if not slot or not block:
        raise UsageError("say which block: drover override SLOT BLOCK (or drover override --update)")
    return start_override(project, slot, block, file=file, addition=addition), 0
