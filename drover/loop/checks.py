"""`drover check`: items, deps, config and templates, one line per finding."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Container

from drover import git, prompts as templates
from drover.items import file as itemfile
from drover.errors import Finding, ProblemCode
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.catalogue import Entry, catalogue, collector_paused, without_file
from drover.ledger.listing import states_of
from drover.ledger.state import Activity, State, verdict_of
from drover.loop.configchecks import check_warnings, config_line, hidden_steering
from drover.vocabulary import CONFIG_FILE, counted


class UsedKeys:
    """The frontmatter keys some item uses, found when a template asks (`key in used`).

    Decoding every item's frontmatter to gather its keys took a quarter of `check` at 50,000
    items, and only a template override ever asks. The cache keeps each frontmatter as
    json.dumps wrote it, where a key reads `"key": `; the rows whose text holds that are decoded
    to make sure the key is a top-level one (the text could be a nested dict's key).
    """

    def __init__(self, ledger: Ledger):
        self._ledger = ledger  # its cache rows are the catalogue's, just refreshed
        self._known: dict[str, bool] = {}

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        known = self._known.get(key)
        if known is None:
            texts = self._ledger.cached_metas(json.dumps(key) + ": ")
            known = self._known[key] = any(key in json.loads(text) for text in texts)
        return known


def check_items(project: Project, ledger: Ledger) -> tuple[list[Finding], Container[str]]:
    """Unreadable files, deps that do not resolve, dependency cycles; and the frontmatter keys used."""
    with collector_paused():
        return _check_items(project, ledger)


def _check_items(project: Project, ledger: Ledger) -> tuple[list[Finding], Container[str]]:
    entries = catalogue(project, ledger)
    findings: list[Finding] = []
    known: set[str] | None = None  # ids with a file or a ledger row, gathered at the first missing dep
    match = itemfile.id_pattern(project.config.prefix).match
    seen: set[str] = set()  # the items before this one in the catalogue's order whose ids are ids
    forward = False  # whether some dep is this item or a later one in that order: else no cycle can close
    for item_id, found in entries.items():
        if found.unreadable and found.unreadable != itemfile.SHELVED:
            findings.append(_unreadable(found, found.problem, item=item_id))
        elif not found.unreadable and not found.title.strip():
            findings.append(Finding.at(ProblemCode.NO_TITLE, found.rel, f"{item_id} has no title: list, the branch and its "
                                       "prompts name it by id alone (add `title:` to its frontmatter)", error=False))
        wrong: list[tuple[str, str, ProblemCode]] = []  # (dep, what is wrong with it, its code), said at the `deps:` line below
        for dep in found.deps:
            if dep not in seen:  # else an earlier item's id with a file: only that file can be wrong
                # The words are the ones the prompt's Unreadable carries for the same dep (items.py).
                if not match(dep):
                    wrong.append((dep, itemfile.NOT_AN_ID, ProblemCode.DEP_NOT_AN_ID))
                    forward = forward or dep in entries  # the cycle search follows any dep with a file
                    continue
                if dep not in entries:
                    # A dep the ledger knows (done, then its file deleted) reads as absent to an agent too.
                    if known is None:
                        known = set(entries) | set(ledger.item_rows())
                    where = "; the ledger knows it" if dep in known else ""
                    wrong.append((dep, f"{itemfile.MISSING} (no {project.config.items}/{dep}.md{where})",
                                  ProblemCode.DEP_MISSING))
                    continue
                forward = True  # this item or a later one: a cycle may close through it
            if entries[dep].unreadable:
                wrong.append((dep, entries[dep].unreadable, ProblemCode.DEP_UNREADABLE))
        if wrong:
            # the file read again once, for the line of its `deps:` key (the catalogue keeps the deps, not their line)
            line = itemfile.key_line_of(project.item_path(item_id), "deps")
            findings.extend(Finding.at(code, found.rel, f"{item_id}: dep {dep} {words}", line=line,
                                       error=words != itemfile.SHELVED, item=item_id) for dep, words, code in wrong)
        if match(item_id):
            seen.add(item_id)
    findings.extend(_without_file(project, ledger, entries))
    from drover.ledger.agreement import disagreeing

    findings.extend(Finding.at(code, path, said) for code, path, said in disagreeing(ledger, entries))
    findings.extend(_needs_requirements(project, ledger, entries))
    # Every dep earlier in one order (numbered items on lower numbers, the common case): no cycle.
    if forward:
        for cycle in dependency_cycles({item_id: found.deps for item_id, found in entries.items()}):
            findings.append(Finding.at(ProblemCode.DEP_CYCLE, entries[cycle[0]].rel, f"dependency cycle: {' -> '.join(cycle)}"))
    return findings, UsedKeys(ledger)


def _unreadable(found: Entry, message: str, *, error: bool = True, item: str = "") -> Finding:
    """An unreadable item's finding; `message` is its problem, said as the case needs."""
    return Finding(message, error, item, code=ProblemCode.ITEM_UNREADABLE, path=found.rel, line=found.line)


def misspelt_keys(project: Project, ledger: Ledger) -> list[Finding]:
    """A warning for each frontmatter key that looks like a misspelling of one of drover's own
    (`depends_on:` for deps): drover ignores it as the project's own, so the item silently waits
    on nothing, or has no title. A key [verify] names is the project's, read by drover: never one.

    The keys come from the metadata cache (the catalogue's rows, just refreshed), read by SQLite;
    the rows holding a key meant otherwise are asked for only then, and the item files read only
    for the line of such a key.
    """
    from drover.items.frontmatter_rules import OWN_KEYS, meant_key

    keys = ledger.cached_keys()
    meant = {key: own for key in keys.difference(OWN_KEYS, project.config.verify) if (own := meant_key(key))}
    if not meant:
        return []
    from drover.ledger.catalogue import sorted_names

    found: dict[str, list[str]] = {}
    for item_id, key in ledger.cached_ids_with_keys(sorted(meant)):
        found.setdefault(item_id, []).append(key)
    findings = []
    for name in sorted_names([item_id + ".md" for item_id in found], project.config.prefix):
        item_id = name[:-3]
        lines = {key: itemfile.key_line_of(project.item_path(item_id), key) for key in found[item_id]}
        for key, line in sorted(lines.items(), key=lambda pair: pair[1] or 0):
            own = meant[key]
            shown = key.replace("\r", "\\r").replace("\n", "\\n")  # a finding is one line
            findings.append(Finding.at(
                ProblemCode.MISSPELT_KEY, project.item_rel(name), f"{shown}: did you mean {own}? drover reads "
                f"{own} for {OWN_KEYS[own]}; this key is the project's own and drover ignores it", line=line, error=False))
    return findings


def _without_file(project: Project, ledger: Ledger, entries: dict[str, Entry]) -> list[Finding]:
    """The items the ledger has history of whose file is gone (catalogue.without_file): an error, as
    any unreadable item is, but for a done item, whose file deleted after its merge only warns."""
    missing = without_file(project, ledger, entries)
    done = ledger.flags()[0] if missing else set()
    return [_unreadable(found, f"{found.problem} (it is done; the ledger keeps its history)", error=False)
            if item_id in done
            else _unreadable(found, f"{found.problem} (the ledger has its runs or rounds: restore the file from git)",
                             item=item_id)
            for item_id, found in missing.items()]


def _needs_requirements(project: Project, ledger: Ledger, entries: dict[str, Entry]) -> list[Finding]:
    """A warning for each item in state `needs requirements` (its Requirements section empty or the placeholder)."""
    placeholders = {item_id: found for item_id, found in entries.items() if found.placeholder and not found.unreadable}
    if not placeholders:
        return []  # the ledger is read only when some item may need requirements
    return [Finding.at(ProblemCode.NEEDS_REQUIREMENTS, row.entry.rel, f"{project.needs_requirements_words(row.entry.id, 'the file')}, "
                       f"so drive skips it (write them, or run `drover draft {row.entry.id}`)", error=False)
            for row in states_of(project, ledger, placeholders) if row.state == State.NEEDS_REQUIREMENTS]


def dependency_cycles(graph: dict[str, tuple[str, ...]]) -> list[list[str]]:
    """Every cycle once, each as the path that closes it (D-1 -> D-2 -> D-1)."""
    cycles, seen_cycles = [], set()
    state: dict[str, int] = {}  # 1: on the current path, 2: finished

    def visit(start: str) -> None:
        # an explicit stack, not recursion: a chain of thousands of deps is an ordinary catalogue
        path: list[str] = [start]
        state[start] = 1
        stack = [iter(graph.get(start, ()))]
        while stack:
            dep = next(stack[-1], None)
            if dep is None:
                stack.pop()
                state[path.pop()] = 2
            elif state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    cycles.append(cycle)
            elif dep in graph and state.get(dep) is None:
                state[dep] = 1
                path.append(dep)
                stack.append(iter(graph.get(dep, ())))

    for node in sorted(graph):
        if state.get(node) is None:
            visit(node)
    return cycles


def check_config(project: Project, refs: dict[str, str]) -> list[Finding]:
    """What drover.toml names that this repository lacks (a file that loads can still be wrong);
    `refs` is every ref of the repository (git.all_refs)."""
    base = project.config.base
    findings = []
    if git.local_ref(base) not in refs:
        findings.append(Finding.at(ProblemCode.BASE_MISSING, CONFIG_FILE, f"[run] base: no branch {base!r} in this "
                                   "repository (items start from it and merge into it)",
                                   line=config_line(project, "run", "base")))
    items = project.items_dir
    if items.exists() and not items.is_dir():
        findings.append(Finding.at(ProblemCode.ITEMS_FOLDER, project.config.items, "not a folder ([project] items names the "
                                   "folder of item files): move it aside and run `drover init`"))
    elif not items.exists():  # `drover init` makes it: a name that is not there is a typo, and no item is read
        findings.append(Finding.at(ProblemCode.ITEMS_FOLDER, CONFIG_FILE, f"[project] items: no folder "
                                   f"{project.config.items!r}: drover reads no items, so list shows none and drive "
                                   "has nothing to drive (correct the name, or create the folder with `drover init`)"))
    return findings


def check_refs(project: Project, ledger: Ledger, refs: dict[str, str]) -> list[Finding]:
    """Refs named like an item's branch (or base), which git would read before the branch, and
    approvals whose branch has moved since; `refs` is every ref (git.all_refs)."""
    heads = {name[len("refs/heads/"):]: sha for name, sha in refs.items() if name.startswith("refs/heads/")}
    git_dir = git.own_git_dir(project.root)
    findings = [Finding(line, code=ProblemCode.REF_SHADOW) for line in _shadows(project, ledger, refs, heads, git_dir)]
    findings += [Finding(line, error=False, code=ProblemCode.GIT_REWRITE) for line in _rewrites(refs, git_dir)]
    for item_id, row in sorted(ledger.list_activity(approved=True).items()):
        activity = Activity._make(row)
        branch = activity.branch or ""
        verdict = verdict_of(activity, heads.get(branch, ""))
        if verdict.moved and not verdict.approved:
            now = heads.get(branch, "")
            # verdict.moved names a branch that is gone itself (state._moved)
            said = (f"{verdict.moved} ({branch} is at {now[:7]}): finish refuses it until a review approves the new head"
                    if now else f"{verdict.moved}: finish has nothing to merge")
            findings.append(Finding(f"{item_id}: {said}", error=False, code=ProblemCode.APPROVAL_MOVED))
    return findings


def _shadows(project: Project, ledger: Ledger, refs: dict[str, str], heads: dict[str, str],
             git_dir: Path | None) -> list[str]:
    """One line per ref git would read before an item's branch or base: `refs/<name>`,
    `refs/tags/<name>` (found among `refs`, however many items there are) or a file
    `<git dir>/<name>` that reads as a ref."""
    shadowed: dict[str, list[str]] = {}
    for ref in refs:
        for prefix in ("refs/tags/", "refs/"):
            name = ref[len(prefix):]
            if ref.startswith(prefix) and name in heads and ref in git.shadowing_refs(name):
                shadowed.setdefault(name, []).append(ref)
                break
    if git_dir is not None:
        # a branch's first folder (`drover` of drover/d-1) is rarely in git's folder: look deeper only then
        for top in {name.split("/", 1)[0] for name in heads}:
            if (git_dir / top).exists():
                for name in heads:
                    if (name == top or name.startswith(top + "/")) and git.reads_as_ref(git_dir / name):
                        shadowed.setdefault(name, []).insert(0, f"{git_dir.name}/{name} (a file in git's folder)")
    if not shadowed:
        return []
    owners = {project.config.base: "the base branch"}
    for item_id, row in ledger.list_activity().items():
        branch = Activity._make(row).branch or ""
        if branch in shadowed:
            owners[branch] = f"{item_id}'s branch"
    return [f"{shadow} shadows {owners[name]} {name}: git reads {name} as it; drover uses "
            f"refs/heads/{name} and ignores it, but nobody meant it: if you did not make it, an agent did "
            "(remove it)"
            for name in sorted(shadowed) if name in owners for shadow in shadowed[name]]


def _rewrites(refs: dict[str, str], git_dir: Path | None) -> list[str]:
    """One line per replacement ref, and one for a grafts file: git shows other content or other
    parents under a commit's id for them, where drover's git reads neither (git/run.py)."""
    said = "drover's git reads past it, but git log, diff and checkout by anyone else do not"
    lines = []
    for ref, sha in sorted(refs.items()):
        replaced = ref.removeprefix("refs/replace/")
        if replaced != ref:
            lines.append(f"{ref} makes git read commit {replaced[:12]} as {sha[:12]}: {said}; if you did not "
                         f"make it, an agent did (`git replace -d {replaced}`)")
    if git_dir is not None and (git_dir / "info" / "grafts").is_file():
        lines.append(f"{git_dir.name}/info/grafts gives commits other parents: {said}; if you did not write it, "
                     "an agent did (remove it)")
    return lines


def check_ledger_rows(project: Project, ledger: Ledger) -> list[Finding]:
    """Ledger rows holding what no drover writes (a text pid, argv that is not JSON, a negative
    token count, an id mark beyond any id): something else wrote them, and reading them fails."""
    from drover.ledger.column_rules import impossible_rows

    where = project.relpath(project.ledger_path)
    return [Finding.at(ProblemCode.LEDGER_ROW, where, f"impossible row: {said}") for said in impossible_rows(ledger)]


def _with_deps(entries: dict[str, Entry], ids: tuple[str, ...]) -> set[str]:
    """`ids` and every item they depend on, however deep."""
    concerned: set[str] = set()
    ahead = list(ids)
    while ahead:
        item_id = ahead.pop()
        if item_id not in concerned:
            concerned.add(item_id)
            ahead.extend(entries[item_id].deps if item_id in entries else ())
    return concerned


def run_check(project: Project, ledger: Ledger, *, warnings: bool = True) -> list[Finding]:
    """Every finding of `drover check`; warnings=False: leave out check_warnings (whose probes
    of agents and the tracker only ever warn), for a caller that wants the errors alone."""
    item_findings, keys = check_items(project, ledger)
    template_findings = templates.check_templates(project.root, project.config, used_keys=keys)
    refs = git.all_refs(project.root)  # the one git call: config and refs read it
    return (item_findings + check_config(project, refs) + check_refs(project, ledger, refs) + template_findings
            + check_ledger_rows(project, ledger)
            + (misspelt_keys(project, ledger) + check_warnings(project) + hidden_steering(project) if warnings else []))


def require_no_errors(project: Project, ledger: Ledger, command: str, ids: tuple[str, ...] = ()) -> None:
    """Refuse `command` (exit 1) while `drover check` reports an error, naming each. With `ids` (the
    items a drive was given), an error about another item's file alone does not count unless that
    item is one of their deps, however deep: one bad item stops no command about another."""
    from drover.errors import Refused

    found = [finding for finding in run_check(project, ledger, warnings=False) if finding.error]
    if ids and any(finding.item for finding in found):
        concerned = _with_deps(catalogue(project, ledger), ids)
        found = [finding for finding in found if not finding.item or finding.item in concerned]
    errors = [finding.message for finding in found]
    if errors:
        raise Refused.listing(f"{command}: `drover check` reports {counted(len(errors), 'error')}; fix "
                              f"{'it' if len(errors) == 1 else 'them'} first, nothing was launched:", errors)
