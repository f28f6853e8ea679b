"""drover's own check: the item's verify command run on the head that would merge, with base merged in.

The check runs in a scratch worktree on a detached HEAD at the branch head (`git worktree add
--detach`), where base is merged in (`git merge --no-ff`): the merge is a commit no branch
points at, so the branch never moves, and the worktree goes when the check ends. A merge that
conflicts is a failed check that says so. The command is the operator's own line from
drover.toml (`make test && make migrate-check`), so it runs through `/bin/sh -c`, like
`[run] setup`; in its own process group, with `[run] check_timeout` (else the implementing agent's
timeout), ended on Ctrl-C. Each check is a `checks` row (rows.Check); its whole output stays in
`.drover/runs/<check-id>/check.log`. An item whose verify command is empty has nothing to run:
nothing runs before its merge (docs/verify.md).
"""
from __future__ import annotations

import errno
import json
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from drover.agents import launch as agents
from drover.agents.failures import tail
from drover.agents.procs import failpoint
from drover import git
from drover.git.files import open_regular, regular_fd
from drover.prompts.data import verify_command, verify_key
from drover.errors import DroverError, Refused, escaped
from drover.ledger.connection import now
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.rows import Check
from drover.loop.runnable import command_words
from drover.loop.worktree_setup import SHELL, changed_names
from drover.vocabulary import CHECKER

TAIL_LINES = 40
TAIL_BYTES = 4096
LOG_NAME = "check.log"
INTERRUPTED_BEFORE = "interrupted: the command did not run to its end"  # a check's tail, and its log's last line


def command_for(project: Project, item_id: str) -> str:
    """The item's verify command (SPEC 9.5), as the prompts name it; "" when it has none."""
    return verify_command(project.config.verify, project.require_item(item_id).meta).strip()


def passing_check(project: Project, ledger: Ledger, item_id: str, head: str, base: str, command: str) -> Check | None:
    """The newest passing check of exactly `head` with `base` merged in, if any: the commit a
    finish would merge, as it would land. A pass with an older base says nothing of what base
    has gained since (another item's merge), unless all it gained is item files: drover's own
    records (`commit_items`: a round, a park, a new item), which no verify command tests.
    `command`: the item's verify command now (command_for); a pass of another (the item's
    frontmatter now picks a stricter [verify] key) covers nothing."""
    passed = [check for check in ledger.checks(item_id, head) if check.passed and check.command == command] if head else []
    exact = [check for check in passed if check.base == base]
    if exact or not passed:
        return exact[-1] if exact else None
    return passed[-1] if _base_as_then(project, passed[-1], base) else None


def _base_as_then(project: Project, check: Check, base: str) -> bool:
    """`base` (base's head now) is, for what `check` found, the base it ran with: the same commit,
    or one that gained only item files since (drover's own records, which no verify command tests)."""
    return check.base == base or git.moved_only_under(project.root, check.base, base, project.config.items,
                                                      head=check.head)


# The shell's exit status for a command it could not start: not found, or found and not executable.
_CANNOT_START = {127: "not found", 126: "not executable"}


def cannot_run(project: Project, check: Check, on_base: Callable[[], Check | None] | None = None) -> str:
    """Why the verify command itself could not start, as the shell's exit status says, or because
    `[run] setup` failed before it ("" when it ran): no round of changes can fix that, only the
    operator's configuration or the machine (a package mirror down, a kept `.venv` half made by a
    set-up that was killed). Unless the branch changed a file a word of the command names (deleted
    `./tests.sh`, took its mode away), or for a set-up one of `[run] setup_inputs` or a file its
    command names: then the branch broke its own check, and that is a round's to mend like any
    failed check. A set-up reads more of the branch than its words name (`pip install -e .` reads
    `pyproject.toml`), so it is the operator's only when it fails on base's own commit too (`on_base`,
    basecheck.BaseChecks.of_base: hostile review 22); "interrupted" when that check was."""
    if check.outcome == "setup failed":
        setup = project.config.setup
        if names_changed(project, check, f"{setup} {' '.join(project.config.setup_inputs)}"):
            return ""
        found = on_base() if on_base is not None else None
        if found is not None and found.outcome != "setup failed":  # it sets up on base: the branch broke it
            return "interrupted" if found.outcome == "interrupted" else ""
        # the set-up's own last line, not drover's `# [run] setup ended: exit 1` below it
        said = [line for line in (check.tail or "").strip().splitlines() if not line.startswith("# ")][-1:] or \
            ["it printed nothing"]
        where = f", on {project.config.base} itself too ({found.base[:12]})" if found is not None else ""
        return (f"`[run] setup` failed before drover's check could run ({said[0]}){where}, and the branch changed "
                f"none of its inputs: fix the set-up or what it needs (`drover log {check.item} --run {check.id}`), "
                "then drive again")
    if check.outcome != "exited" or check.exit_status not in _CANNOT_START:
        return ""
    if names_changed(project, check, check.command):
        return ""
    said = (check.tail or "").strip().splitlines()[-1:] or [_CANNOT_START[check.exit_status]]
    key = _key_run(project, check)
    return (f"the verify command could not run (`{check.command}` exited {check.exit_status}: {said[0]}): "
            f"fix it ([verify]{f' {key}' if key else ''} in drover.toml), then drive again")


def _key_run(project: Project, check: Check) -> str:
    """The `[verify]` key whose command the check ran: the one the item picks (default, or the key
    its frontmatter sets to yes), as command_for picks it; "" when that key no longer holds the
    command, or the item cannot be read."""
    try:
        key = verify_key(project.config.verify, project.require_item(check.item).meta)
    except DroverError:
        return ""
    return key if project.config.verify.get(key, "").strip() == check.command else ""


def names_changed(project: Project, check: Check, command: str) -> bool:
    """A word of `command` names a file the branch `check` ran on changed against base."""
    return bool(changed_names(project, command_words(command), check.head, base_head=check.base))


def describe(check: Check) -> str:
    """`check passed (make test, 1.2s)`: what progress lines and `verify` say of a check."""
    if check.passed:
        return f"check passed ({check.command}, {check.duration:.1f}s)"
    if check.outcome == "interrupted":  # stopped, not failed: it sends nothing back
        return f"check interrupted ({check.command}, {check.duration:.1f}s)"
    return f"check failed ({check.command}, {_how(check)}, {check.duration:.1f}s)"


def _how(check: Check) -> str:
    return f"exit {check.exit_status}" if check.outcome == "exited" else check.outcome


def run_check(project: Project, ledger: Ledger, item_id: str, *, echo: bool = False,
              cancel: threading.Event | None = None, progress: Callable[[str], None] | None = None,
              of_base: str = "") -> Check | None:
    """Run the item's verify command on its branch head with base merged in, record the check and
    return it; None when the verify command is empty (nothing to run). `of_base`: a commit of base's
    to check as it is instead (basecheck.BaseChecks), recorded as the item's check of that head and base."""
    from drover.loop.runs import new_run_id

    command = command_for(project, item_id)
    if not command:
        return None
    branch, base = ledger.item_branch(item_id), project.config.base
    head = of_base or git.head_of(project.root, branch)
    if not head:
        raise Refused(f"{item_id} has no branch to check (no implementing run made one)")
    base_head = of_base or git.head_of(project.root, base)
    if not base_head:
        raise git.no_base(project.root, base)
    if not of_base and git.cut_merge_bases(project.root, base_head, head):
        # the check's merge would be the cut's, a finish's (once the file is gone) another (hostile review 50)
        raise Refused(f"{item_id}: {project.relpath(project.git_common_dir / 'shallow')} cuts the history where {branch} "
                      f"left {base}: a merge would bring other changes than the whole history does; remove the "
                      "lines it lists that a shallow clone did not write, then check again")
    check_id = new_run_id(item_id, "check")
    log_path = project.runs_dir / check_id / LOG_NAME
    log_path.parent.mkdir(parents=True, exist_ok=True)
    scratch = project.state_dir / "checks" / check_id
    started, clock = now(), time.monotonic()
    from drover.agents.locks import attached
    from drover.loop import pool

    sweep_checks(project)  # the scratch worktrees of checks whose drover was killed
    pooled = pool.pooling(project)
    # held from before the scratch worktree is added until it is removed: a check worktree whose
    # lock is free is a killed drover's (sweep_checks)
    with attached(log_path.parent):
        if pooled:  # a pooled worktree, detached at the head, held for the check (docs/worktrees.md)
            scratch = pool.acquire(project, ledger, pool.check_holder(item_id), commit=head)
        else:
            # one at a time with the agents' worktrees: a prune during another `worktree add` breaks it
            with pool.WORKTREE_LOCK:
                git.add_detached_worktree(project.root, scratch, head)
        with open_regular(log_path, "ab") as log:  # where it runs: a scratch worktree, or the pooled one it holds
            what = f"{base} itself at {head[:12]}" if of_base else \
                f"{branch} at {head[:12]} with {base} ({base_head[:12]}) merged in"
            log.write(f"$ {command}    # drover's check of {what}, in {scratch}\n".encode())
        left = ""
        try:
            try:
                exit_status, outcome, tail, ran_for = _run_in(project, item_id, command, scratch, "" if of_base else base_head,
                                                              log_path, echo=echo, cancel=cancel, progress=progress,
                                                              ledger=ledger)
            except KeyboardInterrupt:  # before its command or set-up started (merging base): its log says it began
                exit_status, outcome, tail, ran_for = None, "interrupted", INTERRUPTED_BEFORE, None
                with open_regular(log_path, "ab") as log:
                    log.write(f"# {INTERRUPTED_BEFORE}\n".encode())
            # a failure in a pooled worktree whose set-up, done before, left files a clean removed since
            left = pool.setup_left_outside(ledger, project.relpath(scratch), started) \
                if pooled and outcome == "exited" and exit_status != 0 else ""
            if left:
                with open_regular(log_path, "ab") as log:
                    log.write(f"# [run] setup ran here before, not for this check: {left}\n".encode())
        finally:
            if pooled:
                pool.release(project, ledger, pool.check_holder(item_id))
            else:
                with pool.WORKTREE_LOCK:
                    git.remove_worktree(project.root, scratch, force=True, common=project.git_common_dir)
    check = Check(id=check_id, item=item_id, head=head, base=base_head, command=command, exit_status=exit_status,
                  outcome=outcome, started=started,
                  # the command's own time, what `check passed (npm test, 2.1s)` labels it with: a set-up
                  # before it has its own line (an `npm ci` of 18 s read as a slow suite); `started` to
                  # `at` spans the whole check, and one whose command never ran is timed whole
                  duration=round(time.monotonic() - clock if ran_for is None else ran_for, 3),
                  tail=tail, log_path=project.relpath(log_path), at=now())
    with ledger.write():  # the row and its event, one transaction: a command that changed anything has its event
        ledger.add_check(check)
        ledger.log_event("verify", item_id, CHECKER, check=check_id, head=head, verify_command=command,
                         passed=check.passed, **({"setup_left": left} if left else {}))
    return check


def setup_left(ledger: Ledger, check: Check) -> str:
    """The outside-keep warning of the set-up the failed `check` ran after (run_check: done before
    in its pooled worktree, what it left there removed by a clean since), or ""."""
    for event in ledger.events(check.item):
        detail = json.loads(event["detail"]) if event["command"] == "verify" else {}
        if detail.get("check") == check.id:
            return str(detail.get("setup_left") or "")
    return ""


def sweep_checks(project: Project) -> list[str]:
    """Remove each scratch check worktree (`.drover/checks/<check-id>`) whose drover is gone: the
    lock that drover holds for the check in `.drover/runs/<check-id>/` is free (killed, even by
    SIGKILL) or was never taken. One whose command still runs (an orphan of the killed drover,
    found by its DROVER_WORKTREE) is kept until it ends. A line for each, said by `drover
    worktrees prune`; without any, only a listing of `.drover/checks`."""
    import fcntl

    from drover.agents.locks import ATTACHED
    from drover.agents.procs import marked_processes
    from drover.git.cleaning import discard_worktree
    from drover.loop import pool

    folder = project.state_dir / "checks"
    try:
        names = sorted(entry.name for entry in folder.iterdir())
    except OSError:
        return []
    said = []
    for name in names:
        scratch, shown = folder / name, project.relpath(folder / name)
        try:
            fd = regular_fd(project.runs_dir / name / ATTACHED)
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.EINVAL):
                continue
            # none (a drover from before the lock, or one killed before it took it), or no lock a
            # drover made (a fifo, a folder in its place): nothing holds it
            fd = -1
        try:
            if fd >= 0:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held until the worktree is gone
                except OSError:
                    continue  # its drover is alive and checking
            running = marked_processes("DROVER_WORKTREE", str(scratch))
            if running:
                said.append(f"kept {shown}: its check's command still runs (pid {running[0]}), its drover is gone")
                continue
            with pool.WORKTREE_LOCK:
                discard_worktree(project.root, scratch)
            said.append(f"removed {shown}: its check's drover is gone")
        finally:
            if fd >= 0:
                os.close(fd)
    return said


def _run_in(project: Project, item_id: str, command: str, scratch: Path, base_head: str, log_path: Path, *,
            echo: bool, cancel: threading.Event | None,
            progress: Callable[[str], None] | None, ledger: Ledger) -> tuple[int | None, str, str, float | None]:
    """(exit status, outcome, tail, the command's seconds) of the merge of `base_head` (none when "")
    and the command in the scratch worktree; the seconds are None when the command never ran."""
    failpoint("check-merging", signal.SIGINT)  # tests: a Ctrl-C before the command
    conflicts = git.merge_base_into(scratch, project.config.base, commit=base_head) if base_head else []
    if conflicts:
        said = (f"merging {project.config.base} ({base_head[:12]}) into the branch conflicts in "
                f"{', '.join(map(escaped, conflicts))}")
        with open_regular(log_path, "ab") as log:
            log.write(f"# {said}\n".encode())
        return None, "conflict", said, None
    start = log_path.stat().st_size  # the tail is the output's, not drover's header line
    if project.config.setup:
        from drover.loop.pool import setup_worktree
        from drover.loop.worktree_setup import SetupFailed, SetupInterrupted

        try:
            setup_worktree(project, ledger, scratch, log_path, item_id=item_id, shown_log=project.relpath(log_path),
                           timeout=_timeout(project), cancel=cancel, progress=progress,
                           label=f"{item_id}: [run] setup for drover's check")  # not the item's own worktree
        except SetupInterrupted:
            return None, "interrupted", tail_of(log_path, start), None
        except SetupFailed:
            return None, "setup failed", tail_of(log_path, start), None
    clock = time.monotonic()
    ended = agents.launch(
        [SHELL, "-c", command], cwd=scratch, env_add={"DROVER_ITEM": item_id, "DROVER_WORKTREE": str(scratch)},
        prompt="", prompt_via="file", log_path=log_path, timeout=_timeout(project),
        label=f"{item_id} check", echo=echo, cancel=cancel, progress=progress,
        progress_label=f"{item_id}: check ({command})",
    )
    ran_for = time.monotonic() - clock
    return ended.exit_code if ended.outcome == "exited" else None, ended.outcome, tail_of(log_path, start), ran_for


def _timeout(project: Project) -> float | None:
    """Config.check_timeout_seconds, None for no limit."""
    return project.config.check_timeout_seconds or None


def tail_of(log_path: Path, start: int = 0, lines: int = TAIL_LINES, size: int = TAIL_BYTES) -> str:
    """The last `lines` lines of the log after byte `start`, at most `size` bytes of them."""
    # read as a run's log is read (never through a fifo the branch's tests put there), four times the bytes kept
    text = tail(log_path, size * 4, start=start).rstrip("\n")
    kept = text.split("\n")[-lines:]
    while len("\n".join(kept).encode()) > size and len(kept) > 1:
        kept.pop(0)
    return "\n".join(kept)[-size:]


@dataclass(frozen=True)
class Gate:
    """What the check before a review or a finish found: `check` is None when the item has no
    verify command; `ran` when it ran now, or failed before on this very commit (`again`), else a
    passing check of the head was there."""

    check: Check | None
    ran: bool
    again: bool = False

    @property
    def passed(self) -> bool:
        return self.check is None or self.check.passed


def check_head(project: Project, ledger: Ledger, item_id: str, *, echo: bool = False,
               cancel: threading.Event | None = None, progress: Callable[[str], None] | None = None,
               unmoved: bool = False) -> Gate:
    """A passing check of the branch's head with base as it is now, run now unless one is recorded.
    `unmoved`: the implementing run just before committed nothing. A check of this very head, base
    and command that failed is then not run again (a whole suite, for the same failure): its
    result stands, and goes back as a round like a new one would."""
    command, head, base, found = _head_check(project, ledger, item_id)
    if not command:
        return Gate(None, False)
    if found is not None:
        return Gate(found, False)
    if unmoved and head:
        # base as passing_check allows it: the round that failure sent back committed the item file
        failed = [check for check in ledger.checks(item_id, head) if check.command == command]
        if failed and failed[-1].outcome == "exited" and not failed[-1].passed and _base_as_then(project, failed[-1], base):
            return Gate(failed[-1], True, again=True)
    return Gate(run_check(project, ledger, item_id, echo=echo, cancel=cancel, progress=progress), True)


def _head_check(project: Project, ledger: Ledger, item_id: str) -> tuple[str, str, str, Check | None]:
    """The item's verify command ("" when nothing runs before merge), its branch head ("" when it
    has none), base's head, and the passing check that covers that head with base as it is now, if any."""
    command = command_for(project, item_id)
    if not command:
        return "", "", "", None
    branch, base = ledger.item_branch(item_id), project.config.base
    heads = git.heads_of(project.root, branch, base)  # both in one git call
    head, base_head = heads.get(branch, ""), heads.get(base, "")
    return command, head, base_head, passing_check(project, ledger, item_id, head, base_head, command)


def unchecked(project: Project, ledger: Ledger, item_id: str) -> str:
    """For a review started by hand (`drive` checks the head before each review): why no check of
    drover's covers the head its reviewer is about to read; "" when one does, or nothing runs
    before merge."""
    command, head, _, found = _head_check(project, ledger, item_id)
    if not command or not head or found is not None:
        return ""
    return (f"{item_id}: no passing check of `{command}` covers {head[:7]}, the head under review: its reviewer "
            f"sees none, and finish needs one (`drover verify {item_id}` runs it; `drover drive` runs it before "
            "each review)")


def require_check(project: Project, ledger: Ledger, item_id: str, head: str, base: str) -> None:
    """Refuse unless a passing check covers `head`, the commit that merges, with `base` (base's
    head now) merged in; none is needed when the item's verify command is empty: nothing runs
    before its merge."""
    command = command_for(project, item_id)
    if not command or passing_check(project, ledger, item_id, head, base, command) is not None:
        return
    checks = ledger.checks(item_id, head)
    if checks and checks[-1].passed:
        said = (f"it passed with {project.config.base} at {checks[-1].base[:7]}, and {project.config.base} "
                f"is at {base[:7]} now")
    elif checks:
        said = f"its last check failed: {checks[-1].command}, {_how(checks[-1])}"
    else:
        said = "it was never checked"
    if checks and checks[-1].outcome == "conflict":  # checking again conflicts again: the branch must take base
        raise Refused(f"{item_id}: no passing check covers {head[:7]}, the commit that would merge ({said}: "
                      f"{project.config.base} does not merge into it cleanly): `drover drive {item_id} --finish` has its "
                      f"implementer merge {project.config.base} in, then it is reviewed and checked again")
    raise Refused(f"{item_id}: no passing check covers {head[:7]}, the commit that would merge ({said}): "
                  f"`drover verify {item_id}` runs `{command}` on it")
