"""The prompt templates, split by concept (docs/architecture.md); this package re-exports the API.

- env.py: the one Jinja environment, slots, block parsing and base hashes
- limits.py: render time, size and output limits
- gosyntax.py: Go template syntax, and Jinja's default delimiters, recognised and translated
- overrides.py: override files, staleness, resolution of a slot's source
- quoting.py: the filters that quote text others wrote (`oneline`, `fenced`)
- fieldcheck.py: the static field check
- rendering.py: rendering a slot, the branch template, guidance diff
- check.py: `drover check` for templates, the `--diff` views, `schema --prompts`
- history.py: the shipped history of every default (`python -m drover.prompts.history --record`)
- update.py: `drover override` and `--update`, through merge.py's line-wise three-way merge
- resources.py: where the shipped templates and help pages are
- fields.py, data.py: the template data (`TemplateData`, its rows, the field schema) and its builder
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from drover.errors import Finding
from drover.vocabulary import BRANCH_SLOT, SLOTS

if TYPE_CHECKING:
    from drover.prompts.check import check_templates, diff_stale, diff_unified, sample_data, schema_prompts, stale_overrides
    from drover.prompts.env import (BUILTIN_FOLDER, base_hash, builtin_blocks, builtin_display, builtin_name,
                                    builtin_source, default_hash, environment, find_blocks)
    from drover.prompts.fieldcheck import STANDARD_KEYS, field_problems, key_problems, unknown_field_error
    from drover.prompts.history import HISTORY_FILE, current_defaults, history_path, load_history, missing_history
    from drover.prompts.history import record_history
    from drover.prompts.overrides import (INLINE, REPO_TEMPLATES_ENV, Override, OverrideBlock, parse_override, repo_path,
                                          untrusted_setting)
    from drover.prompts.rendering import (Provenance, Rendered, branch_source, guidance_diff, launch_warnings,
                                       names_follow_ups, render, render_branch)

# Each name is loaded from its module on first use: the package's row types and data (fields.py,
# data.py) are read by commands that never render, and must not pay for jinja2; `python -m
# drover.prompts.history` runs that module fresh.
_MODULES = {
    "check": ("check_templates", "diff_stale", "diff_unified", "sample_data", "schema_prompts", "stale_overrides"),
    "env": ("BUILTIN_FOLDER", "base_hash", "builtin_blocks", "builtin_display", "builtin_name", "builtin_source",
            "default_hash", "environment", "find_blocks"),
    "fieldcheck": ("STANDARD_KEYS", "field_problems", "key_problems", "unknown_field_error"),
    "history": ("HISTORY_FILE", "current_defaults", "history_path", "load_history", "missing_history", "record_history"),
    "overrides": ("INLINE", "REPO_TEMPLATES_ENV", "Override", "OverrideBlock", "parse_override", "repo_path",
                  "untrusted_setting"),
    "rendering": ("Provenance", "Rendered", "branch_source", "guidance_diff", "launch_warnings", "names_follow_ups",
                  "render", "render_branch"),
}
_HOME = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    import importlib

    if name == "history":
        return importlib.import_module(".history", __name__)
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def described_source(requested: str | None, resolved: str | None, base_hashes: dict[str, str]) -> str:
    """A prompt's template as `show` and `run --dry-run` say it: what was used (and what was asked
    for, when that differs), then the default each replaced block was written against. Here, not in
    rendering.py, so `show` says it without loading jinja2."""
    source = resolved or "builtin"
    if requested and requested != source:
        source += f" (requested {requested})"
    hashes = ", ".join(f"{block}@{value}" if value else block for block, value in base_hashes.items())
    return source + (f" ({hashes})" if hashes else "")


__all__ = [
    "BRANCH_SLOT", "BUILTIN_FOLDER", "HISTORY_FILE", "INLINE", "REPO_TEMPLATES_ENV", "SLOTS", "STANDARD_KEYS",
    "Finding", "Override", "OverrideBlock", "Provenance", "Rendered",
    "base_hash", "branch_source", "builtin_blocks", "builtin_display", "builtin_name", "builtin_source", "check_templates",
    "current_defaults", "default_hash", "described_source", "diff_stale", "diff_unified", "environment", "field_problems", "find_blocks",
    "guidance_diff", "history_path", "key_problems", "launch_warnings", "load_history", "missing_history", "names_follow_ups",
    "parse_override", "record_history", "render", "render_branch", "repo_path",
    "sample_data", "schema_prompts", "stale_overrides", "unknown_field_error", "untrusted_setting",
]
