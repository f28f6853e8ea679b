"""`drover finish`: the refusals, the local merge into base, the dispositions, done."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from drover import git
from drover.errors import Refused
from drover.ledger.db import Ledger
from drover.errors import shown_paths
from drover.items.file import Item
from drover.ledger.ownfiles import item_paths, state_paths, steering_paths
from drover.ledger.project import STATE_DIR, Project
from drover.ledger.acting import actor
from drover.ledger.itemstate import item_state
from drover.ledger.state import State, approval_current
from drover.trackers import open_tracker
from drover.trackers.base import TrackerUnavailable
from drover.vocabulary import counted


@dataclass(frozen=True)
class Finished:
    lines: tuple[str, ...]
    problems: tuple[str, ...] = ()


def finish(project: Project, ledger: Ledger, item_id: str, *, allow_drover_files: bool = False,
           by: str | None = None, heads: dict[str, str] | None = None) -> Finished:
    """Refuse while anything is outstanding; merge the approved commit locally (never a push); mark done.

    `allow_drover_files`: the operator accepts a branch that changes drover.toml, a prompt
    override file or item files (never one that writes under .drover/). `by`: who finishes, when
    the caller knows it (a drive: its operator, acting.actor asked once a drive); else asked here.
    `heads`: the branch's and base's heads, when the caller read them a moment before with no code
    of an agent's or of the branch's run since (a drive, under its merge lock); else read here.
    """
    item = project.require_item(item_id)
    row = ledger.item_row(item_id)
    judged = ledger.newest_dispositions(item_id)  # the judgment in force per issue
    if item.outstanding:
        raise Refused(f"{item_id} has outstanding changes in {project.relpath(item.path)}: "
                      "clear them (a review audit or `drover close-changes`) before finishing")
    if not row.get("done"):
        _require_approval(ledger, item_id)
    undisposed = [number for number in item.closes if number not in judged]
    if undisposed:
        listed = ", ".join(f"#{n}" for n in undisposed)
        raise Refused(f"{item_id} closes {listed} with no disposition: "
                      f"`drover dispose {item_id} ISSUE --as close|comment|keep` first")
    lines = []
    if not row.get("done"):
        # who finishes, asked before anything is merged: a refusal here (acting.actor) after the merge
        # left base merged and the item not done; and not under the writers' lock, which its reads of
        # /proc (8-12 ms, the kernel's /proc/locks among them) held from every other writer
        by = by if by is not None else actor(project, ledger)
        branch = ledger.item_branch(item_id)
        base = project.config.base
        # both heads read once for the refusals below (the merge reads them again when it merges)
        if heads is None:
            heads = git.heads_of(project.root, branch, base) if branch else {}
        if branch not in heads:
            raise Refused(f"{item_id} has no branch to merge (no implementing run made one)")
        if base not in heads:
            git.require_base(project.root, base)
        # where the branch left base, in one git call: what _merge_approved's refusals ask of history
        bases = git.merge_bases(project.root, heads[base], heads[branch])
        # a branch with nothing beyond base (its head is the merge base) may be one base merged already
        found = _record_merged_already(project, ledger, item_id, branch, heads, by) if bases == [heads[branch]] else ""
        lines += [found] if found else _merge_approved(project, ledger, item, branch, heads, bases, by,
                                                       allow_drover_files)
    applied: list[int] = []
    problems = _apply_dispositions(project, ledger, item_id, judged, lines, applied)
    if applied and row.get("done"):  # a finish again that told the tracker: it changed the ledger, so its event
        ledger.log_event("finish", item_id, by if by is not None else actor(project, ledger), applied=applied)
    if not lines and not problems:
        lines.append(f"{item_id} is already done; every disposition is applied: nothing to do")
    return Finished(tuple(lines), tuple(problems))


def _merge_approved(project: Project, ledger: Ledger, item: Item, branch: str, heads: dict[str, str],
                    bases: list[str], by: str, allow_drover_files: bool) -> list[str]:
    """Every refusal of a finish that merges, then the merge of the approved commit into base and
    the item marked done; what it says. `heads`, `bases`: both heads and their merge bases."""
    item_id, base = item.id, project.config.base
    approved = _require_covered(project, ledger, item_id, branch, heads, bases)
    changed = _require_own_files_kept(project, item_id, branch, approved, allow_drover_files, heads[base], bases)
    _require_check(project, ledger, item_id, approved, heads[base])
    ignored: list[str] = []
    refuse_dirty(project, "before finishing", ignored=ignored)
    _require_nothing_ignored_written_over(project, item_id, branch, changed, ignored)
    _require_merge_as_committed(project, item_id, changed, (heads[base], approved))
    _remove_worktrees(project, ledger, item_id)  # after every refusal: a refused finish leaves the worktree
    # the commit the approval covers, by its id: no ref named like the branch can stand in
    left: list[str] = []  # the branch the checkout was on, when the merge moved it to base
    sha = git.merge(project.root, branch, base, f"drover: merge {item_id}: {item.title}", commit=approved,
                    carried=lambda path: _tolerated(project, path), switched=left.append)
    with ledger.write():
        ledger.mark_done(item_id)
        ledger.log_event("finish", item_id, by, branch=branch, merge=sha, merged=approved)
    lines = [f"{item_id}: merged {branch} into {base} ({sha[:12]}); done. Nothing was pushed."]
    for was in left:
        lines.append(f"{item_id}: the checkout was on {was or 'a detached HEAD'} and is now on {base}, where the merge is")
    moved = git.gitlinks_at(project.root, sha, changed) if os.path.lexists(project.root / ".gitmodules") else []
    if moved:  # drover's git goes into no submodule (git/run.py): the folder keeps the commit it had
        lines.append(f"{item_id}: the merge moved the submodule {shown_paths(moved)}; this checkout's folder still "
                     "holds the commit before: `git submodule update` checks out the new one")
    return lines


def _record_merged_already(project: Project, ledger: Ledger, item_id: str, branch: str, heads: dict[str, str],
                           by: str) -> str:
    """Record as done an item whose approved commit base merged already, and say so; "" otherwise.
    A finish killed after its merge and before its ledger write (or a merge by hand, with a merge
    commit) left the item approved with nothing beyond base, which every later finish refused. Only
    a merge commit on base's first-parent line whose later parent is the commit the approval covers
    counts: a branch that never had anything beyond base is refused as before."""
    base = project.config.base
    covered = heads[branch]
    merge = _merge_of_approved(project, ledger, item_id, covered, heads[base])
    if not merge:
        return ""
    _remove_worktrees(project, ledger, item_id)
    with ledger.write():
        ledger.mark_done(item_id)
        ledger.log_event("finish", item_id, by, branch=branch, merge=merge, merged=covered, found=True)
    return (f"{item_id}: {base} holds the approved {covered[:12]} already, merged by {merge[:12]} (a finish stopped "
            "before it recorded it, or a merge by hand); recorded as done. Nothing was merged now.")


def _merge_of_approved(project: Project, ledger: Ledger, item_id: str, head: str, base_head: str) -> str:
    """The merge on base's first-parent line of the item's approved commit, when the approval is
    current and covers the branch `head`; "" otherwise."""
    activity = ledger.activity_for(item_id)
    if activity.get("approval_head") != head or not approval_current(activity):
        return ""
    return git.merged_by(project.root, base_head, head)


def merged_already(project: Project, ledger: Ledger, item_id: str) -> str:
    """The merge commit by which base holds the item's approved commit already, with nothing of
    its branch beyond base ("" when not): finish then records the item done and merges nothing
    (_record_merged_already), what a drive's dry run says it will do."""
    branch, base = ledger.item_branch(item_id), project.config.base
    heads = git.heads_of(project.root, branch, base) if branch else {}
    if branch not in heads or base not in heads or git.merge_bases(project.root, heads[base], heads[branch]) != [heads[branch]]:
        return ""
    return _merge_of_approved(project, ledger, item_id, heads[branch], heads[base])


def _remove_worktrees(project: Project, ledger: Ledger, item_id: str) -> None:
    """The item's worktree removed, or its pooled one back to the pool (pool.py), before its branch
    merges. Removed one at a time with every other worktree add and remove of this drover: git
    deletes `.git/worktrees` with the last worktree in it, under another job's `worktree add` or
    `worktree list` (`fatal: Invalid path '.git/worktrees'`, drive --jobs N)."""
    from drover.loop import pool

    worktree = project.worktrees_dir / item_id
    if worktree.exists():
        with pool.WORKTREE_LOCK:
            git.remove_worktree(project.root, worktree, common=project.git_common_dir)
    pool.release(project, ledger, item_id)


def _require_approval(ledger: Ledger, item_id: str) -> None:
    """Refuse unless an approving audit is newer than the newest round."""
    activity = ledger.activity_for(item_id)
    if not approval_current(activity):
        raise Refused(f"{item_id}: no review approved it")


def _require_covered(project: Project, ledger: Ledger, item_id: str, branch: str, heads: dict[str, str],
                     bases: list[str]) -> str:
    """The commit the approval covers; Refused unless the branch has something to merge and is at
    that commit, in the state list and show report as approved (no live or unfinished implementing
    run after it). `heads`: the branch's and base's heads; `bases`: their merge bases."""
    base = project.config.base
    head = heads[branch]
    if bases == [head]:  # the branch's head is base's or one of its ancestors: no commits beyond base
        raise Refused(f"{item_id}: nothing to merge: {branch} has no commits beyond {base}")
    activity = ledger.activity_for(item_id)
    covered = activity.get("approval_head") or ""
    if not covered:
        raise Refused(f"{item_id}: the approval records no commit it covers (review again)")
    if covered != head:
        since = git.count_commits(project.root, covered, head)
        if since is None:
            raise Refused(f"{item_id}: {branch} was rewritten since the approval at {covered[:7]} (review again)")
        raise Refused(f"{item_id}: {counted(since, 'commit')} since the approval at "
                      f"{covered[:7]} (review again)")
    shown = item_state(project, ledger, item_id, heads=heads)
    if shown.state != State.APPROVED:
        why = f" ({shown.reason})" if shown.reason else ""
        raise Refused(f"{item_id} is {shown.state}{why}, not approved")
    return covered


def _require_own_files_kept(project: Project, item_id: str, branch: str, commit: str, allowed: bool,
                            base_head: str, bases: list[str]) -> list[str]:
    """Refuse a branch that would bring drover's state, or (unless `allowed`) what steers it.

    A path counts where the merge would change it: the diff from where the branch left base to
    `commit`. An item file whose text at `commit` is the text in this checkout already (drover's own
    item edits, committed on the branch with `worktree = false`) brings nothing. No other steering
    file is let through that way: with `worktree = false` the checkout is the branch, so its
    drover.toml and overrides are the branch's own text (hostile review 16).
    `bases`: the merge bases of `base_head` and `commit`.
    """
    changed = git.changed_paths(project.root, project.config.base, commit, base_head=base_head, bases=bases)
    state = state_paths(changed)
    if state:
        raise Refused(f"{item_id}: {branch} changes drover's own state ({shown_paths(state)}): nothing "
                      f"under {STATE_DIR}/ is merged from a branch, --allow-drover-files or not; "
                      f"take those commits off {branch} and review again")
    steering = steering_paths(project, changed)
    if steering and not allowed:
        items = item_paths(project, steering)
        brought = [path for path in steering if path not in items] + _differing(project, commit, items)
        if brought:
            raise Refused(f"{item_id}: {branch} changes drover's own files ({shown_paths(brought)}): "
                          f"read those changes, then `drover finish {item_id} --allow-drover-files` to merge them")
    return changed


def _require_nothing_ignored_written_over(project: Project, item_id: str, branch: str, changed: list[str],
                                          ignored: list[str]) -> None:
    """Refuse while the checkout holds an ignored file where the merge writes one (at its path, in
    place of a folder on the way, or in a folder the path replaces): git's merge takes an ignored
    file for expendable and writes over it. An agent can make any file of the operator's ignored
    (`.git/info/exclude`, a `core.excludesFile` in the shared config), past the refusal of untracked
    files (hostile review 33). `changed`: what the merge brings; `ignored`: git status's ignored
    paths, a folder once with its slash."""
    marked = {path.rstrip("/") for path in ignored}
    holding = {path.rsplit("/", depth)[0] for path in marked for depth in range(1, path.count("/") + 1)}
    found = []
    for path in changed:
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if prefix in marked and (depth == len(parts) or not os.path.isdir(project.root / prefix)
                                     or os.path.lexists(project.root / path)):
                found.append(path)
                break
        else:
            if path in holding:  # a folder of ignored files where the merge puts a file
                found.append(path)
    if found:
        raise Refused(f"{item_id}: merging {branch} would write over {shown_paths(found)} in {project.root}, which git ignores "
                      "there and would take for expendable: nothing was merged; move it away, then finish again")


def _require_merge_as_committed(project: Project, item_id: str, changed: list[str], commits: tuple[str, ...]) -> None:
    """Refuse while the shared `info/attributes`, or an attributes file the repository's own config
    names (`core.attributesFile` in `.git/config`), gives a merge driver to a path the merge brings
    (hostile reviews 32 and 34): every worktree's agent can write both, and `* merge=union` (git's
    built-in driver, no config needed) merged both sides' lines where base and the branch wrote the
    same line two ways, landing a conflict nobody saw. `.gitattributes` files are the commits' and
    the checkout's, which reviews and `refuse_dirty` see; the operator's global attributes file is
    the operator's, and honoured (docs/security.md). A macro either defines (`[attr]text merge=union`)
    counts where the `.gitattributes` of `commits` (base's head, the approved one) set its name
    (`*.txt text`): hostile review 36."""
    shared = project.git_common_dir / "info" / "attributes"
    named = git.configured_attributes(project.root, project.git_common_dir)
    if not named and not shared.exists():
        return  # the usual case, no git asked
    given = git.shared_attributes(project.root, changed, "merge", named=named)
    for commit in commits:
        for path in git.changed_by_shared(project.root, project.git_common_dir, commit,
                                          [path for path in changed if path not in given], "merge", named=named):
            given[path] = ["merge (through a macro)"]
    if given:
        shown = shown_paths([f"{path} {' '.join(given[path])}" for path in sorted(given)], most=3)
        sources = [f"{project.git_common_dir.name}/info/attributes"] if shared.exists() else []
        if named:  # a path the agent chose: on one line whatever its characters
            sources.append(f"{shown_paths([named])} (core.attributesFile in {project.git_common_dir.name}/config)")
        raise Refused(f"{item_id}: {' or '.join(sources)} gives a merge driver to what the merge brings ({shown}): "
                      "the merge would not be git's own; remove those lines, then finish again")


def _differing(project: Project, commit: str, paths: list[str]) -> list[str]:
    """Those of `paths` whose content at `commit` is not the content in the checkout (either may lack it)."""
    committed = git.blobs_at(project.root, commit, paths)
    here = git.blobs_on_disk(project.root, paths)
    return [path for path in paths if committed.get(path) != here.get(path)]


def _require_check(project: Project, ledger: Ledger, item_id: str, commit: str, base: str) -> None:
    """Refuse unless a passing check of the verify command covers `commit`, the approved head that
    merges, with base at `base` (none is needed when the item's verify command is empty; verify.py)."""
    from drover.loop.verify import require_check

    require_check(project, ledger, item_id, commit, base)


def dirty_blockers(project: Project, *, ignored: list[str] | None = None) -> list[tuple[str, bool]]:
    """Uncommitted paths that would stop a finish (drover's own item edits do not, nor a submodule's
    own checkout: a finish that merged a new submodule commit leaves the folder at the old one, and
    every later finish of the drive was refused on it), each with whether it is untracked;
    `ignored`, when given, gets the ignored paths (git.dirty_entries)."""
    return [(path, untracked) for path, untracked in git.dirty_entries(project.root, ignored=ignored, submodules=False)
            if not _tolerated(project, path)]


def refuse_dirty(project: Project, when: str, after: str = "", command: str = "", *,
                 ignored: list[str] | None = None) -> None:
    """Refuse (exit 1) while the checkout has changes a merge would trip on: the changed files
    named (commit or stash them), the untracked ones summed up by top folder (ignore them);
    `command` opens the message (`drive --finish: ...`); `ignored` as dirty_blockers fills it."""
    dirty = dirty_blockers(project, ignored=ignored)
    if not dirty:
        return
    changed = [path for path, untracked in dirty if not untracked]
    loose: dict[str, int] = {}  # untracked: a top folder (with its count of files) or a file at the top
    for path, untracked in dirty:
        if untracked:
            top = path.split("/", 1)[0] + "/" if "/" in path else path
            loose[top] = loose.get(top, 0) + 1
    details = [f"{path} (changed)" for path in changed[:MAX_NAMED]]
    if len(changed) > MAX_NAMED:
        details.append(f"... and {len(changed) - MAX_NAMED} more changed")
    details += [f"{top} (untracked, {counted(count, 'file')})" if top.endswith("/")
                else f"{top} (untracked)" for top, count in list(loose.items())[:MAX_NAMED]]
    if len(loose) > MAX_NAMED:
        details.append(f"... and {len(loose) - MAX_NAMED} more untracked")
    fixes = []
    if changed:
        fixes.append("commit or stash the changes")
    if loose:
        fixes.append("add the untracked paths to .gitignore (or commit them)")
    what = " and ".join(word for word, there in (("uncommitted changes", changed), ("untracked files", loose)) if there)
    said = f"the checkout at {project.root} has {what}: {' and '.join(fixes)} {when}{after}:"
    raise Refused.listing(f"{command}: {said}" if command else said, details)


MAX_NAMED = 10  # paths (or untracked top folders) a dirty-checkout refusal names


def _tolerated(project: Project, path: str) -> bool:
    """drover's own uncommitted edits (item files, its state under .drover/) do not block a finish."""
    items = project.config.items.rstrip("/") + "/"
    return path.startswith(items) or path.startswith(STATE_DIR + "/")


def _apply_dispositions(project: Project, ledger: Ledger, item_id: str, judged: dict[int, dict[str, Any]],
                        lines: list[str], applied_issues: list[int]) -> list[str]:
    """Write each judgment to the tracker once; a failure is reported and retried by the next finish.
    `applied_issues` gets each issue whose judgment was marked applied."""
    pending = [row for row in judged.values() if not row["applied"] and row["disposition"] != "keep"]
    if not pending:
        return []
    tracker = open_tracker(project.config.tracker, project.root)
    if not tracker.writes_back:
        # no tracker to write to: the judgment stays in the ledger, and saying so once is enough
        for row in pending:
            ledger.set_applied(row["id"], f"recorded only ([tracker] backend = \"{project.config.tracker.backend}\")")
            applied_issues.append(row["issue"])
            lines.append(f"#{row['issue']}: {row['disposition']} recorded; no tracker to write it to")
        return []
    problems = []
    for row in pending:
        try:
            applied = tracker.apply(row["issue"], row["disposition"], row["note"] or "")
        except TrackerUnavailable as exc:
            problems.append(f"#{row['issue']}: not applied ({exc.reason}); run `drover finish {item_id}` again to retry")
            continue
        ledger.set_applied(row["id"], applied or row["disposition"])
        applied_issues.append(row["issue"])
        lines.append(f"#{row['issue']}: {applied or row['disposition']}")
    return problems
