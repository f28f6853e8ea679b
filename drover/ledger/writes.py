"""The writing commands of the review loop: new, request-changes, close-changes, audit, dispose, park,
unpark. Each changes an item file and the ledger together, under the journal.

Each action that changes an item file holds the ledger's write lock from reading the file to
writing it, so every precondition is read under the lock. The new text is staged first (a full
disk fails here, with nothing changed), then the ledger rows and an intent naming the file and
its new text commit together, then the staged file is renamed into place and the intent is
deleted. A kill at any point leaves either nothing done or an intent the next command finishes.
With [project] commit_items the same transaction records the commit the write owes, and the commit
is made before the lock is let go (journal.py, Journal.settle_commits).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, TypeVar

from drover.items import file as itemfile
from drover.errors import ItemError, Refused, UsageError, one_line
from drover.git import head_of
from drover.agents.procs import failpoint as _failpoint
from drover.items.ids import highest_number
from drover.ledger.acting import acting_run, actor, require_operator, verdict_run
from drover.ledger.activity import gate_shut
from drover.ledger.connection import now
from drover.ledger.db import Ledger
from drover.ledger.journal import sha256
from drover.ledger.project import Project, missing_item, not_an_id
from drover.vocabulary import APPROVING_LEVELS, CHECKER, DISPOSITIONS, DROVER, LEVELS, counted

if TYPE_CHECKING:
    from drover.ledger.rows import Run


@dataclass(frozen=True)
class Outcome:
    """What an action did, in the words the CLI prints."""

    lines: tuple[str, ...]


@dataclass(frozen=True)
class Commit:
    """The commit a write owes: its repository and message."""

    root: Path
    message: str


def _commit_items(project: Project, message: str) -> Commit | None:
    """With [project] commit_items, the commit a write of an item file owes (None without).

    _journaled records it with the write's rows and makes it before the lock is let go, so a
    commit holds its own write's text and nothing else, and a git failure after the rows are
    written is a warning, not a failure: a retry would record the write twice.
    """
    return Commit(project.root, message) if project.config.commit_items else None


T = TypeVar("T")


def _journaled(ledger: Ledger, command: str, item_id: str,
               writes: list[tuple[Path, str, str | None]], record: Callable[[], T],
               renamed: Callable[[], None] | None = None, commit: Commit | None = None) -> T:
    """Stage each file, commit `record`'s rows with an intent per file, rename, drop the intents
    (and write `renamed`'s rows with that, when given: what the renames made true); given
    `commit`, owe it with the rows and make it after the renames.

    The caller holds the ledger's lock (ledger.locked()) around this and its own reads.
    """
    staged = [itemfile.stage(path, text, ledger.staging(path)) for path, text, _ in writes]
    _failpoint("staged")
    try:
        with ledger.write():
            result = record()
            ids = [ledger.add_intent(command, item_id, path, text, old) for path, text, old in writes]
            if commit is not None:
                for path, text, _ in writes:
                    ledger.owe_commit(item_id, commit.root, path, text, commit.message)
    except BaseException:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    _failpoint("committed")
    for tmp, (path, _, _) in zip(staged, writes):
        os.replace(tmp, path)
    _failpoint("renamed")
    with ledger.write():
        ledger.finish_intents(ids)
        if renamed is not None:
            renamed()
    if commit is not None:
        for warning in ledger.settle_commits(retry_failed=True):
            print(f"drover: warning: {warning}", file=sys.stderr, flush=True)
    return result


def _yaml_before_the_lock() -> None:
    """Import the YAML library before the writers' lock, not under it: no other writer waits through
    the import, 10-15 ms (Journal.locked does the same for sqlite-utils)."""
    from drover.items import strict_yaml  # noqa: F401


def _writable(project: Project, path: Path) -> None:
    """Writes replace a file by rename: a symbolic link would silently become a regular file."""
    if path.is_symlink():
        raise ItemError("is a symbolic link; drover writes only regular item files", path=project.item_rel(path.name))


def new_item(project: Project, ledger: Ledger, title: str, kind: str, deps: list[str],
             finding_source: str = "", *, origin: int | None = None, scaffold: str = "") -> str:
    """Create the next item file; returns its id. Ids are never reused."""
    title = one_line(title)  # one line: a title is a headline, and YAML-safe that way
    if not title:
        raise UsageError("an item needs a title")
    # a kind is a word, an agent's too (`new --kind`, a worker's outbox): its line breaks wrote
    # lines of show's own (hostile review 25)
    kind = one_line(kind) or "feature"
    prefix = project.config.prefix
    pattern = itemfile.id_pattern(prefix)
    for dep in [*deps, *([finding_source] if finding_source else [])]:
        if not pattern.match(dep):
            raise not_an_id(project, dep)
        if not project.item_path(dep).exists() and not ledger.has_item(dep):
            # a dep on nothing would block the new item forever; say so before writing anything
            raise missing_item(project, ledger, dep)
    by = actor(project, ledger)

    def taken(number: int) -> bool:
        return os.path.lexists(project.item_path(f"{prefix}-{number}"))

    _yaml_before_the_lock()  # the new file's frontmatter is written under it
    with ledger.locked():
        # under the lock the id peeked here is the one allocated below, with its file's intent
        floor = _floor(project, ledger)
        item_id = ledger.next_item_id(prefix, floor, taken)
        path = project.item_path(item_id)
        text = itemfile.new_item_text(item_id, title, kind, deps, finding_source,
                                      origin=origin, scaffold=scaffold)

        def record() -> None:
            ledger.allocate_item(prefix, floor, taken, peeked=item_id)  # at 50,000 items, not asking twice is 90 ms
            ledger.log_event("new", item_id, by, title=title, finding=finding_source)

        def renamed() -> None:
            # the folder as this write left it: no name in it above the new id or the floor
            state = folder_state(project.items_dir)
            if state is not None:
                ledger.raise_met(prefix, max(floor, int(item_id.rsplit("-", 1)[1])), state)

        _journaled(ledger, "new", item_id, [(path, text, None)], record, renamed,
                   _commit_items(project, f"drover: new item {item_id}: {title}"))
    return item_id


def _floor(project: Project, ledger: Ledger) -> int:
    """A number at or above every item number among the folder's names that the ledger's own
    numbers do not already cover (0: none above them). The folder is listed unless it is in the
    state the last `new` left it in (Ledger.met: its device, inode and mtime), whose names were
    then no higher than the highest met: a listing is most of a `new` at 50,000 items."""
    met, folder = ledger.met(project.config.prefix)
    if folder is not None and folder == folder_state(project.items_dir):
        return 0
    return _highest_on_disk(project, max(ledger.highest_number(), met))


def folder_state(folder: Path) -> str | None:
    """The folder's device, inode and mtime as one text (None when it cannot be statted): a name
    added or removed gives it a new mtime."""
    try:
        found = os.stat(folder)
    except OSError:
        return None
    return f"{found.st_dev}:{found.st_ino}:{found.st_mtime_ns}"


def _highest_on_disk(project: Project, above: int = 0) -> int:
    """The highest item number among the folder's file names when it is above `above` (else a
    number no higher than `above`): names only, nothing opened or parsed."""
    try:
        names = os.listdir(project.items_dir)
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return highest_number(names, project.config.prefix, above, ".md")


def _review_log(ledger: Ledger) -> str:
    """The log of the review run that is acting, when one is."""
    run_id = acting_run(ledger)
    run = ledger.run(run_id) if run_id else None
    return (run.log_path if run else None) or ""


def request_changes(project: Project, ledger: Ledger, item_id: str, findings: str, *, by: str = "",
                    log: str = "") -> Outcome:
    """Replace the Changes section with the findings and record a round; refuse past the cap.

    `by` and `log` name who sent the work back and the log the round points at, when that is not
    the acting run (drover's own failed check, sendback.py)."""
    from drover.ledger.catalogue import read_item  # the frontmatter from the cache, as audit's

    _reviewer_only(verdict_run(ledger, item_id, "request-changes"), item_id, "request-changes",
                   "the Changes section is the reviewer's to write or clear")
    item = read_item(project, ledger, item_id)  # a missing item is the first thing to hear about
    if not findings.strip():
        raise UsageError("no findings given: pass --file F or write them on standard input")
    _writable(project, project.item_path(item_id))
    by = by or actor(project, ledger)
    written = itemfile.as_findings(findings.strip("\n") + "\n")
    digest = sha256(written)
    cap = project.config.max_rounds
    log = log or _review_log(ledger)
    with ledger.locked():
        item = read_item(project, ledger, item_id)  # read under the lock: nobody writes it meanwhile
        if ledger.item_row(item_id).get("done"):  # merged: no drive takes it up again, and the findings would wait forever
            raise Refused(f"{item_id} is done (merged): nothing takes up changes to it; record what is left "
                          f"as a new item: drover new TITLE -f {item_id}")
        rounds = len(ledger.rounds(item_id))
        if rounds >= cap:
            kept = project.parked_dir / f"{item_id}-{rounds + 1}.md"
            extra = rounds + 1
            while kept.exists():  # an earlier refusal kept its findings here: never overwrite them
                extra += 1
                kept = project.parked_dir / f"{item_id}-{extra}.md"
            what = "drover's check kept failing" if by == CHECKER else "review did not converge"
            reason = (f"{what}: {rounds_of_changes(rounds)}, the cap is {cap}; "
                      f"the findings refused are kept in {project.relpath(kept)}")

            def park_it() -> None:
                ledger.park(item_id, reason)
                ledger.log_event("request-changes", item_id, by, refused=True, kept=project.relpath(kept))

            _journaled(ledger, "request-changes", item_id, [(kept, written, None)], park_it)
            raise Refused(
                f"{item_id} already has {counted(rounds, 'round')} of changes ([review] max_rounds = {cap}): "
                f"refused; the findings are kept in {project.relpath(kept)}; "
                f"{item_id} is parked for the operator"
            )
        new_text = itemfile.replace_section(item.text, itemfile.CHANGES_HEADING, written, item.body_offset)

        def record() -> None:
            ledger.add_round(item_id, digest, itemfile.headline(written), log, by)
            ledger.log_event("request-changes", item_id, by, round=rounds + 1, digest=digest)

        _journaled(ledger, "request-changes", item_id, [(item.path, new_text, item.text)], record,
                   commit=_commit_items(project, f"drover: changes requested on {item_id} (round {rounds + 1})"))
    return Outcome((
        f"{item_id}: round {rounds + 1} of {cap} recorded; {itemfile.CHANGES_HEADING.lstrip('# ')} "
        f"in {project.relpath(item.path)} now holds the findings",
        f"headline: {itemfile.headline(written)}",
    ))


def _reviewer_only(run: Run | None, item_id: str, command: str, what: str) -> None:
    """Inside a run only a review run of the item gives `command` (`what` says whose it is); the
    operator, outside any run, may. The Changes section and the judgment of the issues an item
    closes are the reviewer's: an implementer that cleared or replaced the findings would have the
    next review told the round is settled, and one that disposed would empty the review's
    worklist and have finish close the issue in its words (docs/security.md)."""
    if run is not None and run.slot != "review":
        raise Refused(f"{command} {item_id} refused: run {run.id[:64]!r} ({run.slot} of {item_id}) is no review; "
                      f"{what} (a review run of {item_id}, or the operator outside any run)")


def _clear(project: Project, ledger: Ledger, item: itemfile.Item, by: str, note: str,
           then: Callable[[int], None], how: str = "") -> int:
    """Write the cleared block and mark the newest round cleared; `then(number)` adds its rows;
    `how` ends the commit's message ([project] commit_items).

    The caller holds the lock and read `item` under it.
    """
    rounds = ledger.rounds(item.id)
    number = rounds[-1].number if rounds else 0
    block = itemfile.cleared_block(number, now(), by, note)
    new_text = itemfile.replace_section(item.text, itemfile.CHANGES_HEADING, block, item.body_offset)

    def record() -> None:
        ledger.clear_round(item.id, by)
        then(number)

    _journaled(ledger, "clear", item.id, [(item.path, new_text, item.text)], record,
               commit=_commit_items(project, f"drover: changes on {item.id} cleared (round {number}){how}"))
    return number


def close_changes(project: Project, ledger: Ledger, item_id: str, note: str = "") -> Outcome:
    """Discharge the outstanding changes: a cleared block in the file, the round marked cleared."""
    _reviewer_only(verdict_run(ledger, item_id, "close-changes"), item_id, "close-changes",
                   "the Changes section is the reviewer's to write or clear")
    _writable(project, project.item_path(item_id))
    by = actor(project, ledger)
    _yaml_before_the_lock()  # the item is parsed whole under it
    with ledger.locked():
        # "outstanding" is read under the lock: two racing close-changes cannot both clear
        item = project.require_item(item_id)
        if item.cleared:  # a cleared Changes section is never outstanding (sections.is_outstanding)
            repaired = _clear_ledger_only(ledger, item_id, by)
            if repaired:
                return Outcome((f"{item_id}: round {repaired} cleared in the ledger, as the file already says",))
        if not item.outstanding:
            what = "were already cleared" if item.cleared else "have not been requested"
            raise Refused(f"{item_id}: no outstanding changes to close (changes {what})")
        number = _clear(project, ledger, item, by, note,
                        lambda n: ledger.log_event("close-changes", item_id, by, round=n, note=note))
    return Outcome((f"{item_id}: round {number} cleared; nothing is outstanding",))


def audit_head(project: Project, ledger: Ledger, item_id: str, run: Run | None) -> str:
    """The commit an audit given in `run` covers: the head a review run of this item started from
    (on every executor: a replayed outbox acts as its run), else the branch's head now ("" when
    the item has no branch)."""
    if run and run.item == item_id and run.slot == "review":
        return run.head or ""
    return head_of(project.root, ledger.item_branch(item_id))


def _clear_ledger_only(ledger: Ledger, item_id: str, by: str) -> int | None:
    """The file is cleared but a round is not (a hand edit, a restored backup): clear the round."""
    with ledger.write():
        number = ledger.clear_round(item_id, by)
        if number is not None:
            ledger.log_event("close-changes", item_id, by, round=number, repaired=True)
    return number


def audit(project: Project, ledger: Ledger, item_id: str, level: str, by: str = "", note: str = "") -> Outcome:
    """Record an audit, bound to the commit it covers; one at reviewed or above that opens the gate
    (activity.gate_shut says none shuts it) also clears outstanding changes."""
    from drover.ledger.catalogue import read_item

    if level not in LEVELS:
        raise UsageError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
    run = verdict_run(ledger, item_id, "audit")
    _writable(project, project.item_path(item_id))
    # one line: a `--by` with line breaks wrote lines of drover's own into `show` (hostile review 24)
    by = one_line(by)
    if run is not None and by and by != run.agent:
        # as a worker's outbox may not (outbox._problem): a review run whose agent wrote the work named
        # someone else, and its approval passed [review] require_independent (hostile review 24)
        raise Refused(f"{item_id}: audit --by {by[:40]!r}: an audit from run {run.id} can only name its agent "
                      f"{run.agent!r} (leave --by out)")
    by = by or actor(project, ledger)
    head = audit_head(project, ledger, item_id, run)
    independent = project.config.require_independent
    lines = []

    def record(_: int = 0) -> None:
        given = ledger.add_audit(item_id, level, by, note, head, run=run.id if run else "",
                                 require_independent=independent)
        ledger.log_event("audit", item_id, by, level=level, note=note, head=head, run=given.run,
                         opens=bool(given.opens))

    with ledger.locked():
        # "outstanding" read under the lock, from the file's text; its frontmatter from the
        # metadata cache when the file is as the cache knew it (no YAML import for a review's verdict)
        item = read_item(project, ledger, item_id)
        approving = level in APPROVING_LEVELS
        # only an audit that opens the gate discharges the changes (Ledger.add_audit decides the
        # same under this lock)
        shut = gate_shut(item_id, level, run.id if run else "", run, by, ledger.authors(item_id), independent)
        if approving and not shut and item.outstanding:
            number = _clear(project, ledger, item, by, note or f"approved at {level}", record, f" by a {level} audit")
            lines.append(f"{item_id}: round {number} cleared by the approval")
        else:
            with ledger.write():
                record()
    covers = f" (covers {head[:7]})" if head else " (the item has no branch: it covers no commit)"
    if approving and shut:
        lines.insert(0, f"{item_id}: recorded, but it does not open the gate: {shut}")
    return Outcome((f"{item_id}: audited {level} by {by}{covers}", *lines))


def dispose(project: Project, ledger: Ledger, item_id: str, issue: int, disposition: str, note: str = "") -> Outcome:
    """Record the reviewer's judgment of one issue the item closes."""
    if disposition not in DISPOSITIONS:
        raise UsageError(f"--as must be one of {', '.join(DISPOSITIONS)}, not {disposition!r}")
    if disposition == "comment" and not note.strip():
        raise UsageError("--as comment needs --note: the note is the comment finish writes")
    _reviewer_only(verdict_run(ledger, item_id, "dispose"), item_id, "dispose",
                   f"judging the issues {item_id} closes is the reviewer's")
    item = project.require_item(item_id)
    if issue not in item.closes:
        closes = ", ".join(f"#{n}" for n in item.closes) or "none"
        raise UsageError(f"{item_id} does not close #{issue} (its closes: {closes})")
    by = actor(project, ledger)
    with ledger.write():
        ledger.add_disposition(item_id, issue, disposition, by, note)
        ledger.log_event("dispose", item_id, by, issue=issue, disposition=disposition, note=note)
    return Outcome((f"{item_id}: #{issue} disposed as {disposition}",))


def park(project: Project, ledger: Ledger, item_id: str, why: str) -> Outcome:
    """Hand an item to the operator."""
    why = one_line(why)  # one line, as the ledger keeps it (ItemTable.park)
    if not why:
        raise UsageError("--why needs a reason the operator can act on")
    verdict_run(ledger, item_id, "park")
    _require_known(project, ledger, item_id)
    by = actor(project, ledger)
    with ledger.write():
        row = ledger.item_row(item_id)
        if row.get("done"):  # merged: nothing shows a park of it, and there is nothing left to decide
            raise Refused(f"{item_id} is done; nothing to park")
        ledger.park(item_id, why)
        ledger.log_event("park", item_id, by, why=why)
    # parking again replaces the reason (a refinement); the one it replaces is named, not lost silently
    was = f" (was parked: {row.get('parked_reason') or 'no reason given'})" if row.get("parked") else ""
    return Outcome((f"{item_id}: parked for the operator: {why}{was}",))


def park_by_drover(ledger: Ledger, item_id: str, why: str) -> None:
    """drover's own park of an item (a token budget, a retry policy, a worktree changed under its
    review), recorded as drover's event."""
    with ledger.write():
        ledger.park(item_id, why)
        ledger.log_event("park", item_id, DROVER, why=why)


def rounds_of_changes(count: int) -> str:
    return f"{counted(count, 'round')} of changes"


def unpark(project: Project, ledger: Ledger, item_id: str) -> Outcome:
    """Take an item back from the operator: the operator's own word, never a run's (a worker's
    outbox included), which would undo a park for its cap or its budget."""
    require_operator(ledger, "unpark")
    _require_known(project, ledger, item_id)
    if not ledger.item_row(item_id).get("parked"):
        raise Refused(f"{item_id} is not parked")
    by = actor(project, ledger)
    with ledger.write():
        ledger.unpark(item_id)
        ledger.log_event("unpark", item_id, by)
    said = [f"{item_id}: unparked"]
    rounds, cap = len(ledger.rounds(item_id)), project.config.max_rounds
    if rounds >= cap:  # the next send-back is refused and parks it again
        said.append(f"warning: {item_id} has {rounds_of_changes(rounds)}, the cap "
                    f"([review] max_rounds = {cap}): its next request for changes parks it again; raise the cap "
                    "to give it more rounds")
    return Outcome(tuple(said))


def _require_known(project: Project, ledger: Ledger, item_id: str) -> None:
    """An item with a file, or one whose file is gone with history (catalogue.with_history: what
    list and show name `has no file`); else the usage error."""
    from drover.ledger.catalogue import with_history

    if itemfile.id_number(item_id, project.config.prefix) is None:
        raise not_an_id(project, item_id)
    if not project.item_path(item_id).exists() and not with_history(ledger, [item_id]):
        raise missing_item(project, ledger, item_id)
