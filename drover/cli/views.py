"""Plain-text views of what the core returns: `show`, the drive summary, the coloured diff."""
from __future__ import annotations

import json
import os
import re
from typing import IO, TYPE_CHECKING, Any

from drover.errors import UsageError, printable
from drover.items.sections import cut_headline

RED, GREEN, BOLD, FAINT, NORMAL, RESET = "\x1b[31m", "\x1b[32m", "\x1b[1m", "\x1b[2m", "\x1b[22m", "\x1b[0m"
_WORD = re.compile(r"\w+|\s+|[^\w\s]+")
# show's own labels at the item's head, beside which the project's frontmatter keys are listed: a
# key of one of these names (any case), or one that is no plain ASCII word (`state: approved` in a
# key, a space at its end), is quoted, as the frontmatter would write it; bare, `state: approved`
# in an item file stood as a line of show's own under the item's real state (hostile review 47)
SHOW_LABELS = frozenset({"state", "file", "worktree", "why", "approved", "unreadable", "kind", "from", "parked",
                         "done", "authors"})
_BARE_KEY = re.compile(r"[A-Za-z0-9_.-]+")  # ASCII: no letter of another script in a label's likeness

if TYPE_CHECKING:
    from drover.loop.driver import Driven


def render_show(shown: dict[str, Any]) -> str:
    """`drover show ID`: the item, then the ledger's story of it in time order per kind."""
    from drover.agents.usage import describe as usage_text  # here: every command imports this module for --color

    lines = [f"{shown['id']}  {shown['title']}".rstrip(), f"  state: {shown['state']}", f"  file:  {shown['path']}"]
    if shown.get("worktree"):
        lines.append(f"  worktree: {shown['worktree']}")
    if shown.get("reason"):
        lines.append(f"  why:   {shown['reason']}")
    if shown.get("approved_head"):
        what = "merged" if shown["done"] else f"the head of {shown['branch']}"
        lines.append(f"  approved: {shown['approved_head'][:12]} ({what})")
    if shown["unreadable"]:
        lines.append(f"  unreadable: {shown['unreadable']}")
    if shown["kind"]:
        lines.append(f"  kind:  {shown['kind']}")
    if shown.get("finding"):
        lines.append(f"  from:  {shown['finding']}")
    if shown["parked"]:
        lines.append(f"  parked: {shown['parked_reason']}")
    if shown["done"]:
        lines.append(f"  done:  {shown['done_at']}")
    if shown["authors"]:
        lines.append(f"  authors: {', '.join(shown['authors'])}")
    extra = {k: v for k, v in shown["meta"].items() if k not in ("id", "title", "kind", "deps")}
    for key, value in extra.items():
        # as the frontmatter would say it (`true`, `[1, 2]`), not as Python does (`True`); a key or a
        # text with a line break quoted, its escapes written out: at the margin, a key an agent wrote
        # in its item file put `state: approved` there (hostile review 44)
        shown_value = value if isinstance(value, str) and value.isprintable() else \
            json.dumps(value, default=str, ensure_ascii=False)
        name = str(key)
        bare = _BARE_KEY.fullmatch(name) and name.casefold() not in SHOW_LABELS
        lines.append(f"  {name if bare else json.dumps(name, ensure_ascii=False)}: {shown_value}")
    if shown["deps"]:
        lines.append("deps:")
        for dep in shown["deps"]:
            status = "done" if dep["done"] else "not done"
            audit = f"{dep['level']} by {dep['by']}" if dep["level"] else "no audit"
            weak = ", unconfirmed" if dep["weak"] else ""
            unreadable = f", {dep['unreadable']}" if dep["unreadable"] else ""
            lines.append(f"  {dep['id']}  {dep['title']}  ({status}; {audit}{weak}{unreadable})")
    if shown["runs"]:
        lines.append("runs:")
        for run in shown["runs"]:
            if run["finished"]:
                end = f"exit {run['exit_status']}" if run["outcome"] == "exited" else run["outcome"]
            else:
                end = "running" if run["live"] else "unfinished"
            lines.append(f"  {run['id']}  {run['slot']:<9}  {run['agent']}  {run['started']}  {end}")
            from drover.prompts import described_source

            source = described_source(run.get("requested_source"), run.get("resolved_source"), run["base_hashes"])
            lines.append(f"    template: {source}"
                         + (f"  prompt sha256 {run['prompt_sha256'][:12]}" if run.get("prompt_sha256") else ""))
            if run.get("failure"):
                resets = f", resets {run['reset_at']}" if run.get("reset_at") else ""
                # a stall's words begin with its class ("stalled: no output for 3s"): said once
                why = (run.get("reason") or "").removeprefix(f"{run['failure']}: ")
                lines.append(f"    failure: {run['failure']}{resets}: {why}".rstrip(": "))
            elif run.get("reason"):  # a run that failed to start, or one stopped: no class, its words
                lines.append(f"    why: {run['reason']}")
            cost = usage_text(run)
            if cost:
                lines.append(f"    usage: {run['model'] + ': ' if run.get('model') else ''}{cost}")
        total = usage_text(shown.get("usage") or {})
        if total:
            lines.append(f"  total: {total}")
    if shown["rounds"]:
        lines.append("rounds:")
        for round_ in shown["rounds"]:
            cleared = f", cleared {round_['cleared_at']}" if round_["cleared_at"] else ""
            # cut again: a ledger written before headlines were cut, or imported, may hold one whole
            lines.append(f"  {round_['number']}. {cut_headline(round_['headline'] or '')}  ({round_['by']}, "
                         f"{round_['at']}{cleared})")
    if shown["audits"]:
        lines.append("audits:")
        for row in shown["audits"]:
            # a note's lines after its first are indented under it: at the margin, an agent's own audit
            # wrote sections of show's (`state: approved`, `checks:` passed) (hostile review 24)
            note = ": " + "\n    ".join(row["note"].splitlines()) if row["note"] else ""
            lines.append(f"  {row['level']} by {row['by']} at {row['at']}{note}")
    if shown.get("checks"):
        lines.append("checks:")
        for check in shown["checks"]:
            if check["passed"]:
                end = "passed"
            else:
                end = f"failed, exit {check['exit_status']}" if check["outcome"] == "exited" else f"failed, {check['outcome']}"
            # a check of base itself (a drive asks when an item's check fails): its head is base's
            what = f"base itself at {check['base'][:12]}" if check["head"] == check["base"] else \
                f"{check['head'][:12]} with base {check['base'][:12]}"
            lines.append(f"  {end}  {check['command']}  on {what}  {check['duration']:.1f}s  {check['at']}")
            if not check["passed"]:
                lines.append(f"    log: {check['log_path']}")
    if shown["dispositions"]:
        lines.append("dispositions:")
        for row in shown["dispositions"]:
            applied = f" (applied: {row['applied']})" if row["applied"] else ""
            if not row["applied"] and shown.get("done") and row["disposition"] != "keep":
                applied = f" (not applied: `drover finish {row['item']}` tries again)"  # the tracker refused it
            # the note is what finish writes on the issue: shown, indented as an audit's (hostile review 24)
            note = ": " + "\n    ".join(row["note"].splitlines()) if row["note"] else ""
            lines.append(f"  #{row['issue']} {row['disposition']} by {row['by']}{applied}{note}")
    changes = "cleared" if shown["cleared"] else ("outstanding" if shown["outstanding"] else "none")
    lines.append(f"changes: {changes}")
    # agents write much of this (findings, notes, titles, reasons): no escape of theirs reaches the
    # terminal (a title, the clipboard through OSC 52, a cleared screen, a line written over)
    return printable("\n".join(lines))


def table(rows: list[tuple[str, ...]], *, widths: tuple[int, ...] = (), header: tuple[str, ...] = (),
          right: tuple[int, ...] = ()) -> list[str]:
    """Rows as aligned text columns, two spaces apart; the last column is never padded.

    `widths` gives a minimum width per column (0: as wide as its widest cell); the columns
    numbered in `right` (counts, say) are aligned to the right.
    """
    every = [header, *rows] if header else list(rows)
    if not every:
        return []
    columns = len(every[0])
    width = [max([len(row[n]) for row in every] + [widths[n] if n < len(widths) else 0]) for n in range(columns)]

    def fit(n: int, cell: str) -> str:
        if n in right:
            return cell.rjust(width[n])
        return cell.ljust(width[n]) if n < columns - 1 else cell

    return ["  ".join(fit(n, cell) for n, cell in enumerate(row)).rstrip() for row in every]


def list_lines(listed: list[Any], *, colour: bool) -> list[str]:
    """`drover list`'s lines: id, state (at least 17 wide), title and note; as `table` lays them out.

    Built directly rather than through table(): at 50,000 items the per-cell work showed.
    """
    id_width = max([len(row.entry.id) for row in listed])
    states = {row.state for row in listed}
    state_width = max(17, *map(len, states))
    padded = {state: state.ljust(state_width) for state in states}
    lines: list[str] = []
    append = lines.append
    for row in listed:
        found = row.entry
        text = found.title if not found.unreadable else ""
        if row.note:  # in the title's column when there is no title (an unreadable item's file)
            text += f"  ({row.note})" if text else f"({row.note})"
        if not text.isprintable():  # a title or a park reason an agent wrote may carry escapes
            text = printable(text)
        append(f"{found.id.ljust(id_width)}  {padded[row.state]}  {text}".rstrip())
    return [paint_state(line) for line in lines] if colour else lines


def use_color(option: str, stream: IO[str] | Any) -> bool:
    """Whether to colour output: never/always as asked; auto honours NO_COLOR, else a terminal."""
    if option == "never":
        return False
    if option == "always":
        return True
    if option != "auto":
        raise UsageError(f"--color: expected auto, always or never, not {option!r}")
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def _words(old: str, new: str) -> tuple[str, str]:
    """Both sides of a rewritten line: changed words bold, the rest faint."""
    import difflib

    a, b = _WORD.findall(old), _WORD.findall(new)
    left, right = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        style = FAINT if op == "equal" else BOLD
        if i2 > i1:
            left.append(f"{style}{''.join(a[i1:i2])}{NORMAL}")
        if j2 > j1:
            right.append(f"{style}{''.join(b[j1:j2])}{NORMAL}")
    return "".join(left), "".join(right)


def _rewritten(old: str, new: str) -> bool:
    """A line edited in place rather than replaced: most of its characters survive."""
    import difflib

    return difflib.SequenceMatcher(None, old, new, autojunk=False).ratio() >= 0.5


def colour_diff(lines: list[str]) -> list[str]:
    """Colour '  '/'- '/'+ ' diff lines: removed red, added green, rewritten words bold."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.startswith("- ") and nxt.startswith("+ ") and _rewritten(line[2:], nxt[2:]):
            left, right = _words(line[2:], nxt[2:])
            out.append(f"{RED}- {left}{RESET}")
            out.append(f"{GREEN}+ {right}{RESET}")
            i += 2
            continue
        if line.startswith("- "):
            out.append(f"{RED}{line}{RESET}")
        elif line.startswith("+ "):
            out.append(f"{GREEN}{line}{RESET}")
        else:
            out.append(line)
        i += 1
    return out


# A state's colour in `list`; click drops the codes when the output is not wanted in colour.
STATE_COLORS = {"ready": "cyan", "approved": "green", "done": "green", "blocked": "yellow", "needs requirements": "yellow",
                "changes requested": "yellow", "parked": "magenta", "unreadable": "red", "running": "blue",
                "in review": "blue"}


def paint_state(line: str) -> str:
    """A `list` line with its state word styled (the state follows the id and two spaces)."""
    import click

    for state, colour in STATE_COLORS.items():
        marker = f"  {state}  "
        if marker in line or line.endswith(f"  {state}"):
            at = line.index(f"  {state}") + 2
            return line[:at] + click.style(state, fg=colour) + line[at + len(state):]
    return line


def drive_summary(results: list[Driven], finish: bool = False) -> list[str]:
    """The table drive ends with; with `finish`, its count says how many of the approved merged."""
    from drover.agents.usage import describe as usage_text, total as usage_total

    if not results:
        return ["nothing to drive"]
    lines = table([(row.item_id, row.result, str(row.rounds), str(row.runs), row.note) for row in results],
                  header=("item", "result", "rounds", "runs", "note"), widths=(0, 10), right=(2, 3))
    for row in results:
        if row.log:
            lines.append(f"{row.item_id}: log {row.log}")
        for number, failure in enumerate(row.failures, 1):  # each failed run's class and what the [retry] policy did
            said = f"{failure['class']}: {failure['action']}"
            if number == len(row.failures) and row.note.endswith(said):
                continue  # the row's note says it already (a Ctrl-C's `not tried again` was said twice)
            lines.append(f"{row.item_id}: {said} (run {failure['run']})")
    spent = [(row.item_id, usage_text(row.usage or {})) for row in results]
    if any(text for _, text in spent):
        # the table's rounds and runs are each item's whole life; these, the runs this drive started
        # (a new user read an item's 6 runs beside the tokens of its 2)
        lines.append("spent by the runs this drive started (`drover show ID` has an item's whole life):")
        lines += [f"{item_id}: {text}" for item_id, text in spent if text]
        # the items with runs in this drive: one without (merged only, or never started) has no
        # cost source, and counted it made the total the CLIs' figure whatever the rate card said
        ran = [row.usage for row in results if row.usage and "usd_source" in row.usage]
        lines.append(f"total: {usage_text(usage_total(ran))}")
    approved = sum(row.approved for row in results)
    driven = sum(row.counted for row in results)
    if driven:
        finished = sum(row.result == "finished" for row in results)
        lines.append(f"{approved} of {driven} approved" + (f", {finished} finished" if finish else ""))
        unmerged = [row.item_id for row in results if row.result == "approved"]
        if unmerged and not finish:
            from drover.loop.preview import unmerged_hint

            lines.append(unmerged_hint(unmerged))
        parked = [row.item_id for row in results if row.result == "parked"]
        if parked:  # the rows say why; this says what a person does about it (a round cap's unpark alone parks again)
            from drover.errors import shown_paths  # the one list of at most N "and K more"

            lines.append(f"parked: {shown_paths(parked)} wait{'s' if len(parked) == 1 else ''} for a person: "
                         "`drover show ID` says why; `drover unpark ID` once it is mended, and the next drive takes it")
    elif all(row.done_before for row in results):  # every id given was done already
        done = [row.item_id for row in results]
        lines.append(f"nothing to drive: {', '.join(done)} {'is' if len(done) == 1 else 'are'} done")
    else:  # only orphans (and done items): what stands in the way is theirs to end
        lines.append("nothing driven: an orphaned run holds " + ("its item" if len(results) == 1 else "each item")
                     + "; `drover stop <id>` ends it")
    return lines


def resume_line(results: list[Driven], left: list[str], item_ids: tuple[str, ...], finish: bool) -> str:
    """The line an interrupted drive ends with: the command that takes up what it left, and which items."""
    from drover.ledger.state import ORPHANED

    ids = [row.item_id for row in results if row.result not in ("approved", "finished", "parked", ORPHANED)
           and (row.result != "skipped" or row.note.startswith("not started"))]
    ids += [item_id for item_id in left if item_id not in ids]
    command = "drover drive" + (" --finish" if finish else "") + "".join(f" {item_id}" for item_id in item_ids if item_id in ids)
    if not ids:
        return f"interrupted: nothing it took is left to resume; `{command}` again drives what is ready"
    from drover.errors import shown_paths  # the one list of at most N "and K more"

    named = shown_paths(ids)
    return f"interrupted: `{command}` again resumes {named}"
