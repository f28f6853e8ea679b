"""The single-item commands, list and check without click: show, prompt, request-changes, audit, new,
list and a plain check.

Their bodies live here, and cli.py's click commands call them. launch.py first offers the
command line to `run`: when it takes a plain form (the command's own options, each once, valid
choices, no `--`, no `--help`, no completion), the body runs with the click group's error
handling and click is never imported. Any other command line, every mistake included, goes to
click, which parses and answers it as it always did. docs/decisions.md.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

from drover.vocabulary import GUIDANCE_LEVELS, LEVELS, LIST_STATES, TEMPLATE_SLOTS

if TYPE_CHECKING:
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project

# The fast path's `ctx.color`; None while click is in charge of the output (the click commands).
_color: bool | None = None

# Findings larger than this are refused: no review writes 10 MB, and --file /dev/zero or an
# endless pipe must end with a message rather than fill the memory.
MAX_INPUT_BYTES = 10 * 1024 * 1024


def echo(message: str = "", *, err: bool = False, nl: bool = True) -> None:
    """click.echo for text: click's own under click, else its steps for a text stream (append the
    newline, drop ANSI codes unless colour is on, write, flush)."""
    if _color is None:
        import click

        click.echo(message, err=err, nl=nl)
        return
    stream = sys.stderr if err else sys.stdout
    out = message + "\n" if nl else message
    if out:
        if not _color and "\x1b" in out:
            import re

            out = re.sub(r"\033\[[0-?]*[ -/]*[@-~]", "", out)  # click's _ansi_re
        stream.write(out)
    stream.flush()


def echo_json(value: Any) -> None:
    import json

    echo(json.dumps(value, indent=2, default=str))


def echo_outcome(outcome: Any) -> None:
    for line in outcome.lines:
        echo(line)


@contextmanager
def opened(project: "Project | None" = None) -> Iterator[tuple["Project", "Ledger"]]:
    """The project (opened now unless given) and its ledger, closed when the command ends."""
    from drover.ledger.db import Ledger

    if project is None:
        project = _opened_by_ids() or _open()
    ledger = Ledger(project.ledger_path)
    try:
        yield project, ledger
    finally:
        ledger.close()


def _open() -> "Project":
    from drover.ledger.project import open_project

    return open_project()


def _opened_by_ids() -> "Project | None":
    """The project the item-id parameter opened while click parsed this command line, if any."""
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    return ctx.meta.get("drover.ledger.project") if ctx is not None else None


def read_text_arg(file: str | None) -> str:
    """Text from --file F, or standard input when F is absent or '-' (at most MAX_INPUT_BYTES)."""
    from drover.errors import UsageError

    cap = f"{MAX_INPUT_BYTES // (1024 * 1024)} MB"
    if file and file != "-":
        try:
            with open(file, "rb") as handle:
                data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise UsageError(f"cannot read: {exc.strerror}", path=file) from None
        where, path = "", file
    else:
        if sys.stdin is None or (sys.stdin.isatty() and not file):
            raise UsageError("no findings given: pass --file F or pipe them on standard input")
        stream = getattr(sys.stdin, "buffer", None)
        data = stream.read(MAX_INPUT_BYTES + 1) if stream is not None else sys.stdin.read().encode("utf-8")
        where, path = "standard input: ", None
    if len(data) > MAX_INPUT_BYTES:
        raise UsageError(f"{where}findings larger than {cap} refused", path=path)
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        said = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise UsageError(f"cannot read {where}{said}" if not path else f"cannot read: {said}", path=path) from None


# --- the bodies: the click commands and the fast path both call these ---------------------------


def new(title: str | None, kind: str | None, deps: tuple[str, ...], finding: str, issue: int | None,
        as_json: bool, project: "Project | None" = None) -> None:
    from drover.errors import UsageError
    from drover.executors.outbox import perform

    if issue is not None and (title or finding):
        raise UsageError("new --issue takes its title from the issue: give no TITLE and no --finding")
    if issue is None and title is None:
        raise UsageError("Missing argument 'TITLE': drover new \"What the item should do\" (or --issue N)")
    with opened(project) as (project, ledger):
        if issue is not None:
            from drover.ledger.intake import new_from_issue

            item_id = new_from_issue(project, ledger, issue, kind, list(deps))
        else:
            item_id = perform(project, ledger, "new", title=title or "", kind=kind or "feature", deps=list(deps),
                              finding_source=finding)
        path = project.relpath(project.item_path(item_id))
        if as_json:
            from drover.cli.reports import new_report

            echo_json(new_report(project, item_id, finding))
        else:
            echo(f"{item_id} {path}")


def list_items(ready: bool, states: tuple[str, ...], as_json: bool, project: "Project | None" = None) -> None:
    import gc

    from drover.ledger.listing import is_ready, list_items as listed_items

    gc.disable()  # a short process of tuples without cycles: collections found nothing and took a tenth
    with opened(project) as (project, ledger):
        listed = [row for row in listed_items(project, ledger)
                  if (not ready or is_ready(row)) and (not states or row.state in states)]
    if as_json:
        from drover.cli.reports import list_report

        echo_json(list_report(listed))
    elif listed:
        from drover.cli.views import list_lines

        # one write: a write per line cost more than the listing at 50,000 items
        echo("\n".join(list_lines(listed, colour=colour())))


def check(as_json: bool, project: "Project | None" = None) -> None:
    from drover.loop.checks import run_check

    with opened(project) as (project, ledger):
        findings = run_check(project, ledger)
    say_check(findings, as_json)


def say_check(findings: list[Any], as_json: bool, *, diff: bool = False, out_err: bool = False) -> None:
    """check's findings, one line each (a warning says so) or as JSON; exit 1 when one is an error.
    With --diff the STALE OVERRIDE lines were the diff's headers; out_err: they go to stderr."""
    failed = any(found.error for found in findings)
    if as_json:
        from drover.cli.reports import check_report

        echo_json(check_report(findings))
        sys.exit(1 if failed else 0)
    for found in findings:
        if not (diff and found.message.startswith("STALE OVERRIDE ")):
            echo(found.message if found.error else f"warning: {found.message}", err=out_err)
    if not findings and not diff:
        echo("no problems found")
    sys.exit(1 if failed else 0)


def colour() -> bool:
    """Whether the output is coloured: `--color` (or its auto) under click, the fast path's auto else."""
    if _color is None:
        import click

        return bool(click.get_current_context().color)
    return _color


def show(item_id: str, as_json: bool, project: "Project | None" = None) -> None:
    from drover.ledger.itemstate import show_item
    from drover.cli.views import render_show

    with opened(project) as (project, ledger):
        shown = show_item(project, ledger, item_id)
    if as_json:
        echo_json(shown)
    else:
        echo(render_show(shown))


def request_changes(item_id: str, file: str | None, project: "Project | None" = None) -> None:
    from drover.executors.outbox import perform

    with opened(project) as (project, ledger):
        project.require_item(item_id)  # a missing item is said before anything about the findings
        findings = read_text_arg(file)
        echo_outcome(perform(project, ledger, "request-changes", item_id=item_id, findings=findings))


def audit(item_id: str, level: str, by: str, note: str, project: "Project | None" = None) -> None:
    from drover.executors.outbox import perform

    with opened(project) as (project, ledger):
        echo_outcome(perform(project, ledger, "audit", item_id=item_id, level=level, by=by, note=note))


def show_prompt(item_id: str, slot: str | None, *, guidance: str | None = None, explicit: str | None = None,
                diff_guidance: bool = False, as_json: bool = False, project: "Project | None" = None) -> None:
    """Render one item's prompt and print it (or, with diff_guidance, what lean drops); slot None:
    the slot the item is at (state.slot_at)."""
    from drover.prompts import data
    from drover import prompts as templates

    with opened(project) as (project, ledger):
        if slot is None:
            from drover.ledger.itemstate import item_state
            from drover.ledger.state import slot_at

            slot = slot_at(item_state(project, ledger, item_id).state)
        built = data.build(project, ledger, item_id, slot, guidance=guidance)
        if slot == "branch":
            from drover.loop.runs import require_valid_branch

            branch = (templates.render_branch(built, templates.branch_source(project.root, explicit), display=explicit)
                      if explicit is not None else templates.render_branch(built, project.config.branch))
            branch = require_valid_branch(built.Id, branch)
            if as_json:
                echo_json({"id": built.Id, "slot": slot, "text": branch})
            else:
                echo(branch)
            return
        if diff_guidance:
            dropped = templates.guidance_diff(slot, built, root=project.root, config=project.config)
            for line, tokens in dropped:
                echo(f"- [~{tokens} tokens] {line}")
            total = sum(tokens for _, tokens in dropped)
            echo(f"lean drops {len(dropped)} lines, about {total} tokens (4 characters a token)")
            return
        rendered = templates.render(slot, built, root=project.root, config=project.config, explicit=explicit)
    if as_json:
        from drover.cli.reports import prompt_report

        echo_json(prompt_report(built.Id, slot, rendered))
        return
    for warning in rendered.warnings:
        echo(f"drover: warning: {warning}", err=True)
    echo(rendered.text, nl=False)


def _prompt(item_id: str, slot: str | None, guidance: str | None, diff_guidance: bool, explicit: str | None,
            as_json: bool, project: "Project | None" = None) -> None:
    show_prompt(item_id, slot, guidance=guidance, explicit=explicit, diff_guidance=diff_guidance,
                as_json=as_json, project=project)


# --- the fast path: plain command lines only, everything else is click's ---------------------


class Option:
    """One option that takes a value, as its click declaration reads."""

    __slots__ = ("param", "choices", "item_id", "multiple")

    def __init__(self, param: str, choices: tuple[str, ...] | None = None, *, item_id: bool = False,
                 multiple: bool = False) -> None:
        self.param = param
        self.choices = choices  # None: any text
        self.item_id = item_id  # converted as the ITEM_ID parameter type converts
        self.multiple = multiple


class Spec:
    """A command as its click declaration reads, less what the fast path leaves to click.
    (Plain classes: a NamedTuple costs this module's import a millisecond.)"""

    __slots__ = ("body", "positionals", "required", "options", "flags", "must", "defaults")

    def __init__(self, body: Any, positionals: tuple[str, ...], required: int, options: dict[str, Option],
                 flags: dict[str, str], *, must: tuple[str, ...] = (),
                 defaults: tuple[tuple[str, Any], ...] = ()) -> None:
        self.body = body
        self.positionals = positionals  # their params, in order; the first `required` must be given
        self.required = required
        self.options = options
        self.flags = flags  # --flag -> param
        self.must = must  # required options' params
        self.defaults = defaults


SPECS: dict[str, Spec] = {
    # --diff, --update and the rest are left to click
    "check": Spec(check, (), 0, {}, {"--json": "as_json"}),
    "list": Spec(list_items, (), 0, {"--state": Option("states", LIST_STATES, multiple=True)},
                 {"--ready": "ready", "--json": "as_json"}),
    "show": Spec(show, ("item_id",), 1, {}, {"--json": "as_json"}),
    "audit": Spec(audit, ("item_id",), 1,
                  {"--level": Option("level", LEVELS), "--by": Option("by"), "--note": Option("note")}, {},
                  must=("level",), defaults=(("by", ""), ("note", ""))),
    "request-changes": Spec(request_changes, ("item_id",), 1, {"--file": Option("file")}, {},
                            defaults=(("file", None),)),
    # --issue (an int, and the tracker) is left to click
    "new": Spec(new, ("title",), 0,
                {"--kind": Option("kind"), "--dep": Option("deps", item_id=True, multiple=True),
                 "-f": Option("finding", item_id=True), "--finding": Option("finding", item_id=True)},
                {"--json": "as_json"}, defaults=(("title", None), ("kind", None), ("finding", ""), ("issue", None))),
    "prompt": Spec(_prompt, ("item_id",), 1,
                   {"--slot": Option("slot", TEMPLATE_SLOTS), "--guidance": Option("guidance", GUIDANCE_LEVELS),
                    "--template": Option("explicit")},
                   {"--diff-guidance": "diff_guidance", "--json": "as_json"},
                   defaults=(("slot", None), ("guidance", None), ("explicit", None))),
}
ID_PARAMS = ("item_id",)  # positionals of the ITEM_ID type


def parse(argv: list[str]) -> tuple[Spec, dict[str, Any], list[str]] | None:
    """(spec, params, the params to convert as item ids) for a plain command line, else None."""
    spec = SPECS.get(argv[0]) if argv else None
    if spec is None:
        return None
    params: dict[str, Any] = {**dict(spec.defaults), **{flag: False for flag in spec.flags.values()}}
    given: set[str] = set()
    positionals: list[str] = []
    ids: list[str] = []
    words = argv[1:]
    at = 0
    while at < len(words):
        word = words[at]
        at += 1
        if not word.startswith("-"):
            positionals.append(word)
            continue
        name, equals, value = word.partition("=")
        if name in spec.flags and not equals:
            if name in given:
                return None
            given.add(name)
            params[spec.flags[name]] = True
            continue
        option = spec.options.get(name)
        if option is None or (equals and not name.startswith("--")):
            return None  # not this command's, or not a form the fast path reads: click says
        if not equals:
            if at >= len(words) or (words[at].startswith("-") and words[at] != "-"):
                return None
            value = words[at]
            at += 1
        if option.choices is not None and value not in option.choices:
            return None
        if option.multiple:
            params[option.param] = (*params.get(option.param, ()), value)
        elif option.param in given:
            return None
        else:
            params[option.param] = value
        given.add(option.param)
        if option.item_id:
            ids.append(option.param)
    if len(positionals) > len(spec.positionals) or len(positionals) < spec.required:
        return None
    if any(param not in given for param in spec.must):
        return None
    params.update(zip(spec.positionals, positionals))
    for option in spec.options.values():
        if option.multiple:
            params.setdefault(option.param, ())
    ids += [name for name in spec.positionals[:len(positionals)] if name in ID_PARAMS]
    if "finding" in dict(spec.defaults):
        ids.append("finding")  # click converts the default too
    return spec, params, list(dict.fromkeys(ids))


def run(argv: list[str]) -> bool:
    """Run a plain single-item command line without click; False: not one, click must parse it."""
    global _color
    import os

    if os.name != "posix" or "_DROVER_COMPLETE" in os.environ or not _plain_streams():
        return False
    parsed = parse(argv)
    if parsed is None:
        return False
    spec, params, ids = parsed
    from drover.cli.views import use_color

    catch_signals()
    _color = use_color("auto", sys.stdout)
    with _answered():
        project = _project_or_none()
        if project is not None:
            from drover.items.ids import resolve

            for name in ids:
                value = params[name]
                params[name] = (tuple(resolve(one, project.config.prefix) for one in value)
                                if isinstance(value, tuple) else resolve(value, project.config.prefix))
        spec.body(**params, project=project)
    return True


@contextmanager
def _answered() -> Iterator[None]:
    """What DroverGroup.invoke and click's standalone mode make of a command's end: exit 0, or
    one line on stderr and the exit code, never a traceback for a failure the user can act on."""
    import sqlite3

    from drover.errors import DroverError

    try:
        yield
    except (DroverError, KeyboardInterrupt, OSError, sqlite3.Error) as exc:
        sys.exit(answer(exc))


def answer(exc: BaseException) -> int:
    """Say what ended the command (one line on stderr, or nothing for a closed pipe) and return
    its exit code; for the fast path and for the click group alike (DroverGroup.invoke)."""
    from drover.errors import DroverError

    if isinstance(exc, DroverError):
        for line in exc.lines:
            echo(f"drover: {line}", err=True)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        echo("drover: terminated" if signalled == SIGTERM else "drover: interrupted", err=True)
        return 128 + (signalled or SIGINT)
    if isinstance(exc, BrokenPipeError):
        # the reader stopped early (`drover schema --fields | head`): what it wanted arrived
        drop_stdout()
        return 0
    if isinstance(exc, OSError):
        # the machine said no (permissions, a full disk): its words, on one line
        where = f"{exc.filename}: " if exc.filename else ""
        echo(f"drover: {where}{exc.strerror or exc}", err=True)
        return 2
    echo(f"drover: .drover/ledger.db: {exc}", err=True)  # sqlite3.Error
    return 2


def drop_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's final flush into a closed pipe says nothing."""
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _project_or_none() -> "Project | None":
    from drover.errors import DroverError

    try:
        return _open()
    except DroverError:
        return None  # the body opens it again and says why it cannot


def _plain_streams() -> bool:
    """stdout and stderr as click would use them unwrapped: present, text, not ASCII-only."""
    import codecs

    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if stream is None or not encoding or getattr(stream, "errors", None) is None:
            return False
        try:
            if codecs.lookup(encoding).name == "ascii":
                return False
        except LookupError:
            return False
    return True


# The signal that ended the command (0: none): the exit code is 128 + its number, 130 for Ctrl-C
# (SIGINT) and 143 for SIGTERM, however far the command got (a launch records the run first).
signalled = 0
SIGINT, SIGTERM = 2, 15  # the POSIX numbers, without importing signal for the answer
# The exit codes a signal gives (docs/commands.md lists them with the errors' codes).
SIGNAL_EXIT_CODES = {128 + SIGINT: "SIGINT", 128 + SIGTERM: "SIGTERM"}


def _signalled(signum: int, frame: Any) -> None:
    # SIGTERM ends a launch the way Ctrl-C does: the agent's process group goes, the run is recorded.
    global signalled
    signalled = signalled or signum
    raise KeyboardInterrupt


def catch_signals() -> None:
    """SIGINT and SIGTERM raise KeyboardInterrupt, and the exit code remembers which came."""
    import signal

    signal.signal(signal.SIGTERM, _signalled)
    signal.signal(signal.SIGINT, _signalled)


def exit_for_signal(code: int | str | None) -> None:
    """A command a signal stopped that then failed (a launch records the run, then exits 1):
    exit 128 + the signal instead. One that ends well on it (`log --follow`) keeps its 0."""
    if signalled and code not in (0, None):
        sys.exit(128 + signalled)
