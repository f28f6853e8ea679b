"""`[run] pool`: worktrees kept and reused between holders (docs/worktrees.md).

A holder is an item (from its first run until it is finished) or one item's check (verify.py,
for the length of the check). A new holder gets a free pooled worktree, cleaned of everything
but `[run] keep` and switched to its branch or commit, or a new one when none is free; the
ledger's `worktree_pool` table says who holds which, under the writers' lock. A worktree is
marked `cleaning` before drover touches it, so one a killed drover left half-cleaned is removed
by the next drover, never handed out. `[run] setup` runs again in a pooled worktree only when
the digest of `[run] setup_inputs` (and the command, and `[run] keep`) differs from the one it last ran with there.
"""
from __future__ import annotations

import json
import os
import threading
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from drover import git
from drover.agents.locks import claimed_by, run_live
from drover.agents.procs import pid_alive, process_start
from drover.git.cleaning import (IN_PROGRESS, Unfit, clean_worktree, clean_would_remove, clear_kept, clear_leftovers,
                                 detach_worktree, discard_worktree, empty_submodules, keep_index, kept_index_of, private_git_dir,
                                 switch_worktree)
from drover.errors import GitError
from drover.ledger.connection import now, seconds_since
from drover.agents.procs import failpoint
from drover.errors import shown_paths  # the one list of at most N "and K more"
from drover.ledger.pooltable import CHECK_SUFFIX, CLEANING, FREE, HELD, PoolRow
from drover.ledger.project import Project
from drover.loop.worktree_setup import changed_parts, end_setup_orphans, input_parts, inputs_digest, part_digests, to_stderr

if TYPE_CHECKING:
    from drover.executors.base import Launch
    from drover.ledger.db import Ledger

# One at a time with every other worktree add and prune of this process: a prune during another
# thread's `worktree add` removes that worktree's half-written admin folder (drive --jobs N).
WORKTREE_LOCK = threading.Lock()
POOL_DIR = "pool"  # under .drover/: .drover/pool/w1, w2, ...
ATTEMPTS = 5  # worktrees found unfit in a row before giving up on reuse and saying why


def pooling(project: Project) -> bool:
    return project.config.worktree and project.config.pool > 0


def item_worktree(project: Project, ledger: "Ledger", item_id: str, branch: str, made: list[str] | None = None) -> Path:
    """The item's worktree on its branch: the pooled one it works in, else its own folder (made
    when missing).

    An item that holds a pooled worktree keeps working in it after `[run] pool` is set to 0: its
    branch is checked out there, and git would refuse it anywhere else. The finish removes it. An
    item's own folder is registered one at a time: ensure_worktree prunes, and a prune during another
    thread's `worktree add` removes that worktree's half-written admin folder (drive --jobs N).
    `made`: the commit the branch was created at, when it was created here (git.ensure_worktree)."""
    if project.config.worktree and not (project.worktrees_dir / item_id).is_dir() and (
            project.config.pool > 0 or held_path(project, ledger, item_id) is not None):
        return acquire(project, ledger, item_id, branch=branch, made=made)
    return git.ensure_worktree(project.root, project.worktrees_dir / item_id, branch, project.config.base,
                               lock=WORKTREE_LOCK, made=made, common=project.git_common_dir)


USED_STEP = 60.0  # seconds: a held worktree's `used` is written again when older than this


def _older_than(stamp: str, seconds: float) -> bool:
    """A ledger stamp more than `seconds` ago, or none."""
    return not stamp or seconds_since(stamp) > seconds


def check_holder(item_id: str) -> str:
    return item_id + CHECK_SUFFIX


def _me() -> tuple[int, str]:
    pid = os.getpid()
    return pid, process_start(pid)


def holder_alive(row: PoolRow) -> bool:
    """The drover process that marked the row is still that same process."""
    return pid_alive(row.pid) and process_start(row.pid or 0) in ("", row.pid_start)


def _stale(row: PoolRow) -> bool:
    return row.state == CLEANING and not holder_alive(row)


def _left_by_a_dead_drover(holder: str) -> Callable[[PoolRow], bool]:
    """Whether `holder` still holds the row, for a drover that is gone (claim_stale's test)."""
    return lambda row: row.holder == holder and not holder_alive(row)


def held_path(project: Project, ledger: "Ledger", item_id: str) -> Path | None:
    """The pooled worktree the item holds, if any."""
    row = ledger.held_worktree(item_id)
    return project.root / row.path if row is not None and row.state == HELD else None


def foreseen(project: Project, ledger: "Ledger") -> Path:
    """Where a launch that holds no pooled worktree would work, for a dry run: the first free one,
    else the next new one (another drover may take it first). Reads only."""
    rows = ledger.pool_rows()
    free = next((row.path for row in rows if row.state == FREE), None)
    return project.root / (free or _fresh_path(project)({row.path for row in rows}))


def reap(project: Project, ledger: "Ledger") -> list[str]:
    """Remove every pooled worktree whose cleaning a drover began and did not live to end; their paths."""
    pid, start = _me()
    gone = []
    for row in ledger.pool_rows():
        if _stale(row) and ledger.claim_stale(row.path, pid, start, _stale):
            ended = _discard(project, ledger, row.path)
            if ended:
                to_stderr(f"{row.path}: {ended}")
            gone.append(row.path)
    return gone


def _discard(project: Project, ledger: "Ledger", rel: str) -> str:
    """Remove the pooled worktree `rel` and its row; what was ended of a set-up left running there, or ""."""
    ended = end_setup_orphans(project.root / rel)
    with WORKTREE_LOCK:
        discard_worktree(project.root, project.root / rel)
    ledger.drop_pooled(rel)
    ledger.log_event("pool-discard", None, path=rel)
    return ended


def _fresh_path(project: Project) -> Callable[[set[str]], str]:
    def fresh(used: set[str]) -> str:
        number = 1
        while True:
            rel = project.relpath(project.state_dir / POOL_DIR / f"w{number}")
            if rel not in used and not (project.root / rel).exists():
                return rel
            number += 1
    return fresh


def acquire(project: Project, ledger: "Ledger", holder: str, *, branch: str = "", commit: str = "",
            made: list[str] | None = None) -> Path:
    """The pooled worktree `holder` works in, on `branch` (an item's) or detached at `commit` (a check's);
    `made` as item_worktree's.

    An item that holds one already gets it back as it left it (its work in progress); otherwise a
    free one is cleaned and switched, or a new one is added.
    """
    root = project.root
    held = ledger.held_worktree(holder)
    if held is not None and held.state == HELD and not holder.endswith(CHECK_SUFFIX):
        path = root / held.path
        private = _still_registered(project, path) if path.is_dir() else None
        if private is not None:
            _require_on(private, path, branch)
            if (held.pid, held.pid_start) != _me() or _older_than(held.used, USED_STEP):
                # this drover uses it now: no other may take it (_spare); and `drover worktrees` says
                # when it was last used (within a minute: a drive's review right after its run is one use)
                pid, start = _me()
                ledger.set_pooled(held.path, pid=pid, pid_start=start, used=now())
            return path
        _discard(project, ledger, held.path)
    elif held is not None and ledger.claim_stale(held.path, *_me(), _left_by_a_dead_drover(holder)):
        # claimed first, as reap does: another job's check takes a row whose holder is dead, and
        # the discard would remove the worktree from under it
        _discard(project, ledger, held.path)
    reap(project, ledger)
    pid, start = _me()
    problems = []
    for _ in range(ATTEMPTS):
        spared: list[PoolRow] = []
        row, new = ledger.claim_pooled(holder, pid, start, reusable=lambda found: not holder_alive(found),
                                       fresh_path=_fresh_path(project), spare=_spare(project, ledger, spared),
                                       limit=project.config.pool)
        if spared:  # a parked item's clean worktree: its branch has all its work (docs/worktrees.md)
            ledger.log_event("pool-reclaim", spared[0].holder, path=row.path, to=holder)
        path = root / row.path
        try:
            created: list[str] = []  # not `made` until the worktree is handed out: another may be tried
            if new:
                _add(project, path, branch, commit, created)
            elif _make_ready(project, path, branch, commit, created):
                ledger.set_pooled(row.path, setup_digest="")  # set-up again: its submodules are gone
            # the folder `.git` names checked again (the worktree is anyone's to write) before the index is copied
            _keep_index(project, path)
        except Unfit as exc:  # this worktree's fault: another may be fit
            problems.append(str(exc))
            _discard(project, ledger, row.path)
            continue
        except GitError:
            # the repository's, not the worktree's (a missing base, a branch git will not check
            # out): every other worktree would meet it too, so it is said once, as without a pool
            _discard(project, ledger, row.path)
            raise
        ledger.set_pooled(row.path, state=HELD)
        if made is not None:
            made += created
        return path
    raise GitError(f"no pooled worktree could be made ready for {holder}: {'; '.join(problems)}")


def _spare(project: Project, ledger: "Ledger", spared: list[PoolRow]) -> Callable[[PoolRow], bool]:
    """Whether a full pool's new holder may take `row` (under the writers' lock): a parked item's
    worktree that holds nothing but its branch, so the item loses nothing and takes a worktree
    again at its next run after `drover unpark` (docs/worktrees.md, "A parked item's worktree").
    Taken rows are noted in `spared`."""
    def spare(row: PoolRow) -> bool:
        item = row.holder
        if row.state != HELD or not item or item.endswith(CHECK_SUFFIX) or not ledger.item_row(item).get("parked"):
            return False
        # the drover that last used it for the item is gone, or is this one: another live drover
        # may be between two steps of the item, about to use it again
        if row.pid != os.getpid() and holder_alive(row):
            return False
        if any(run_live(run, project.runs_dir) for run in ledger.runs(item)):
            return False  # a run of it still works there (an agent that parked its own item)
        if not _only_the_branch(project, project.root / row.path, ledger.item_branch(item)):
            return False
        spared.append(row)
        return True
    return spare


def _only_the_branch(project: Project, path: Path, branch: str) -> bool:
    """The worktree is this repository's, on `branch`, with no operation in progress and nothing
    uncommitted (tracked or untracked, outside `[run] keep`; ignored files are no one's work)."""
    try:
        private = private_git_dir(path, project.git_common_dir)
        if _head_of(private) != f"ref: refs/heads/{branch}" or any((private / name).exists() for name in IN_PROGRESS):
            return False
        entries = git.dirty_entries(path)
    except (Unfit, GitError, OSError):
        return False
    kept = [entry.strip("/") for entry in project.config.keep if entry.strip("/")]
    return not [name for name, _ in entries
                if not any(name == top or name.startswith(top + "/") for top in kept)]


def _add(project: Project, path: Path, branch: str, commit: str, made: list[str]) -> None:
    if branch:
        git.ensure_worktree(project.root, path, branch, project.config.base, lock=WORKTREE_LOCK, made=made)
        return
    with WORKTREE_LOCK:
        git.add_detached_worktree(project.root, path, commit)


def _make_ready(project: Project, path: Path, branch: str, commit: str, made: list[str]) -> bool:
    """Clean a free pooled worktree (marked `cleaning` already) and switch it; True when a submodule
    was emptied (cleaning.empty_submodules), which `[run] setup` must check out again. Unfit when it cannot be."""
    if not path.is_dir():
        raise Unfit(f"{path} is gone")
    private = private_git_dir(path, project.git_common_dir)
    failpoint("pool-cleaning")  # tests: a drover killed here leaves the row `cleaning` and the tree dirty
    clear_leftovers(path, private, project.config.keep, kept_index_of(path))
    if branch:
        switch_worktree(path, project.root, branch, project.config.base, made)
    else:
        detach_worktree(path, commit)
    clean_worktree(path, project.config.keep)
    return empty_submodules(path, private)


def _keep_index(project: Project, path: Path) -> None:
    """The index the checkout just wrote, kept for the next holder's (cleaning.restore_index)."""
    try:
        keep_index(private_git_dir(path, project.git_common_dir), kept_index_of(path))
    except OSError as exc:
        raise Unfit(f"{path}: the index could not be kept: {exc.strerror}") from None


def _still_registered(project: Project, path: Path) -> Path | None:
    """The worktree's private git folder (cleaning.private_git_dir), None when it is not this
    repository's worktree any more."""
    try:
        return private_git_dir(path, project.git_common_dir)
    except Unfit:
        return None


def _require_on(private: Path, path: Path, branch: str) -> None:
    """An item's own worktree is on its branch: the agent may not have moved it elsewhere. `private`:
    its private git folder as _still_registered just checked it (its `.git` file is not read again)."""
    head = _head_of(private)
    if branch and head != f"ref: refs/heads/{branch}":
        on = head.removeprefix("ref: refs/heads/") if head.startswith("ref: ") else "a detached HEAD"
        raise GitError(f"worktree {path} is on {on}, not {branch}: `drover worktrees prune --held` frees it")


def _head_of(private: Path) -> str:
    """What a worktree's private git folder says its HEAD is ("" when unreadable)."""
    from drover.git.files import read_small_file

    try:
        return read_small_file(private / "HEAD").strip()
    except OSError:
        return ""


def release(project: Project, ledger: "Ledger", holder: str) -> str:
    """The holder is done: its worktree goes back to the pool as it is, or is removed when the pool
    holds `[run] pool` others already. "" when it held none, else what became of it. Nothing is
    asked of what its holder left uncommitted: the next holder's reset and clean discard it
    (docs/worktrees.md, "Who holds a pooled worktree")."""
    row = ledger.held_worktree(holder)
    if row is None:
        return ""
    if ledger.release_pooled(row.path, project.config.pool):
        return f"{row.path} back to the pool"
    with WORKTREE_LOCK:
        discard_worktree(project.root, project.root / row.path)
    return f"{row.path} removed (the pool holds {project.config.pool})"


def rebind(launch: "Launch", path: Path) -> "Launch":
    """The launch, working in the worktree `path`: a pooled one, or its own folder as git made it
    (prepare named where it would be)."""
    env_add = dict(launch.env_add)
    if "DROVER_WORKTREE" in env_add:
        env_add["DROVER_WORKTREE"] = str(path)
    return replace(launch, worktree=path, workdir=path, env_add=env_add)


def setup_worktree(project: Project, ledger: "Ledger", worktree: Path, log_path: Path, *, item_id: str,
                   shown_log: str, timeout: float | None, cancel: threading.Event | None = None,
                   progress: Callable[[str], None] | None = None, label: str = "") -> bool:
    """`[run] setup` in `worktree`, True when it ran now: in a pooled worktree when its inputs
    changed since it last ran there, in any other once (worktree_setup.run_setup's marker);
    `label`: run_setup's."""
    from drover.loop.worktree_setup import run_setup

    rel = project.relpath(worktree)
    row = ledger.pool_row(rel) if pooling(project) else None
    if row is None:
        return run_setup(project.config.setup, worktree, log_path, item_id=item_id, shown_log=shown_log,
                         timeout=timeout, cancel=cancel, progress=progress, label=label)
    parts = input_parts(project.config, worktree)
    digest = inputs_digest(parts)
    if row.setup_at and row.setup_digest == digest:
        return False
    if not row.setup_at:
        # no set-up ended well here since the last that started (a new worktree: nothing is kept yet)
        clear_kept(worktree, project.config.keep)
    # said when it ran here before: a set-up again, minutes of an install, for no visible reason
    # puzzled a new user (tkem/cachetools: the branch had changed pyproject.toml)
    why = _changed_since(ledger, rel, parts) if row.setup_at else ""
    # forgotten first: a setup that fails or is killed half-way runs again next time
    ledger.set_pooled(rel, setup_digest="", setup_at="")
    run_setup(project.config.setup, worktree, log_path, item_id=item_id, shown_log=shown_log, timeout=timeout,
              once=False, cancel=cancel, progress=progress, label=label, why=why)
    ledger.set_pooled(rel, setup_digest=digest, setup_at=now())
    warning = _outside_keep(project, worktree, rel)
    # the warning kept with the event: a later check there that fails reads it (setup_left_outside)
    ledger.log_event("pool-setup", item_id, path=rel, inputs=part_digests(parts),
                     **({"outside_keep": warning} if warning else {}))
    if warning:
        from drover.git.files import open_regular

        with open_regular(log_path, "ab") as log:
            log.write(f"# {warning}\n".encode())
        (progress or to_stderr)(f"{item_id}: warning: {warning}")
    return True


def _changed_since(ledger: "Ledger", rel: str, parts: dict[str, bytes]) -> str:
    """Why set-up runs again in the pooled worktree `rel`: what changed since it last ran there, by
    the part digests that set-up's event kept (changed_parts), or in general words where none was kept."""
    _, detail = _last_setup(ledger, rel)
    changed = changed_parts(detail.get("inputs"), parts)
    if changed:
        return f"{changed} changed since it ran in this worktree"
    return "the set-up command, keep or a setup_inputs file changed since it ran in this worktree"


def _last_setup(ledger: "Ledger", rel: str) -> tuple[str, dict[str, Any]]:
    """When the newest set-up in the pooled worktree `rel` ran, and its event's detail ("", {}: none)."""
    for event in reversed(ledger.events_of("pool-setup")):
        detail = json.loads(event["detail"])
        if detail.get("path") == rel:
            return event["at"], detail
    return "", {}


def setup_left_outside(ledger: "Ledger", rel: str, since: str) -> str:
    """The outside-keep warning of the set-up in force in the pooled worktree `rel` when it ran
    before `since` (a check that found it done, so ran without what it left there: a clean removed
    it), or "": none warned, or set-up ran again since (what it made is there)."""
    at, detail = _last_setup(ledger, rel)
    return str(detail.get("outside_keep") or "") if at and at < since else ""


SHOWN_LEFT = 3  # paths a warning names of what set-up left outside keep
SHOWN_LENGTH = 80  # characters of each


def _outside_keep(project: Project, worktree: Path, rel: str) -> str:
    """What set-up just left that the next clean removes (untracked or ignored, outside `[run] keep`),
    in words; "" when nothing is. One `git clean -n`, only after a set-up that ran: the next holder
    would find it gone and set-up not run again, since the digest says it ran (docs/worktrees.md)."""
    try:
        left = clean_would_remove(worktree, project.config.keep)
    except Unfit:
        return ""  # only a warning: the clean itself says what is wrong, at the next taking
    if not left:
        return ""
    # set-up runs what the branch holds (package scripts, a build), so a name may be an agent's: each
    # cut short, and shown on one line whatever its characters (shown_paths)
    names = [name if len(name) <= SHOWN_LENGTH else name[:SHOWN_LENGTH] + "..." for name in left]
    return (f"after [run] setup, {rel} holds {shown_paths(names, most=SHOWN_LEFT)} outside [run] keep: the next clean removes "
            f"{'it' if len(left) == 1 else 'them'}, and set-up does not run there again until "
            "[run] setup_inputs or keep change (add what set-up makes to keep)")


def prune(project: Project, ledger: "Ledger", *, held: bool = False) -> list[str]:
    """`drover worktrees prune`: remove every pooled worktree no live drover is using (a free one, a
    check's or a cleaning whose drover is gone); an unfinished item's too when `held` (its commits
    are on its branch; what it left uncommitted goes), unless a run of it is live or another live
    drover last used it for the item. What was done, a line each."""
    lines = []
    pid, start = _me()
    for row in ledger.pool_rows():
        why = _in_use(project, ledger, row, held)
        if why:
            lines.append(f"kept {row.path}: {why}")
            continue
        # asked again under the writers' lock, which a run's claim takes too (runs._claim): a run
        # claimed after this is refused nothing, but finds the worktree taken and gets another
        if not ledger.claim_stale(row.path, pid, start, lambda found: found.holder == row.holder
                                  and found.state == row.state and not _in_use(project, ledger, found, held)):
            continue
        ended = _discard(project, ledger, row.path)
        lines.append(f"removed {row.path}{f' ({ended})' if ended else ''}")
    return lines


def _in_use(project: Project, ledger: "Ledger", row: PoolRow, held: bool) -> str:
    """Why prune keeps `row`, or "": a live drover cleans it or runs a check there; a run of its item
    is live (its agent works there, or a drover is setting it up: locks.run_live); another live
    drover last used it for the item (a drive between two steps of it, as _spare asks); or it is
    an unfinished item's and `held` is not given."""
    check = row.holder.endswith(CHECK_SUFFIX)
    if row.state == CLEANING or check:
        return f"held by {row.holder}" if holder_alive(row) else ""
    if row.state != HELD:
        return ""
    live = next((run for run in ledger.runs(row.holder) if run_live(run, project.runs_dir)), None)
    if live is not None:
        return f"{row.holder} has a live run {live.id} ({claimed_by(live, project.runs_dir)})"
    if row.pid != os.getpid() and holder_alive(row):
        return f"drover pid {row.pid} is using it for {row.holder}"
    return "" if held else f"held by {row.holder}, not finished (--held removes it too; {row.holder} goes on in another)"
