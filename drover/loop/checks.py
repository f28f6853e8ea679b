"""`drover check`: items, deps, config and templates, one line per finding."""
from __future__ import annotations

import json
import posixpath
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Container

from drover.agents import presets
from drover import git, prompts as templates
from drover.items import file as itemfile
from drover.config import AgentConfig, Config
from drover.errors import Finding, GitError, ProblemCode, did_you_mean
from drover.executors import unavailable
from drover.ledger.db import Ledger
from drover.ledger.project import Project
from drover.ledger.catalogue import Entry, catalogue, collector_paused, notes_for_people, without_file
from drover.ledger.listing import states_of
from drover.ledger.state import Activity, State, verdict_of
from drover.trackers import open_tracker
from drover.vocabulary import CONFIG_FILE, SLOTS, counted

if TYPE_CHECKING:
    from collections.abc import Iterable


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

    findings.extend(Finding.at(code, path, said) for code, path, said in disagreeing(project, ledger, entries))
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
            where = f"is at {now[:7]}" if now else "is gone"
            findings.append(Finding(f"{item_id}: {verdict.moved} ({branch} {where}): finish refuses it until a "
                                    "review approves the new head", error=False, code=ProblemCode.APPROVAL_MOVED))
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


def check_warnings(project: Project) -> list[Finding]:
    """Things worth knowing that do not fail the check."""
    config = project.config
    findings = []
    default = config.verify.get("default", "")
    for key, command in sorted(config.verify.items()):
        if key != "default" and did_you_mean(key, ["default"], cutoff=0.8, fold_case=True):
            # a new user's `defualt = "..."` left default at `make test`, in a repository with no Makefile
            findings.append(Finding.at(
                ProblemCode.MISSPELT_KEY, CONFIG_FILE, f"[verify] {key}: did you mean default? [verify] {key} runs "
                f"only for items that set {key}: yes; every other item's check runs [verify] default ({default!r})",
                line=config_line(project, "verify", key), error=False))
        elif key != "default" and default and default not in command:
            findings.append(Finding(
                f"[verify] {key} does not contain the default command ({default!r}): "
                f"items with {key}: yes would silently run less", error=False, code=ProblemCode.CONFIG, path=CONFIG_FILE))
    findings += empty_verify(config.verify, lambda key: config_line(project, "verify", key))
    findings += verify_warnings(project)
    findings += independent_review(config)
    findings += review_through_a_runner(config)
    findings += [Finding.at(ProblemCode.NOT_AN_ITEM, rel, "not an item (its name is no id and it has no frontmatter): "
                            "drover leaves it alone", error=False) for rel in notes_for_people(project)]
    agents_seen: dict[tuple[str, str], tuple[str, AgentConfig]] = {}
    for slot in SLOTS:
        agent = config.agent_for(slot)
        agents_seen.setdefault((agent.preset, agent.command), (slot, agent))
    for slot, agent in agents_seen.values():
        missing = presets.binary_missing(agent)
        if missing:
            findings.append(Finding(f"agent for {slot}: {missing}", error=False, code=ProblemCode.AGENT_MISSING))
        refusal = presets.root_refusal(agent)
        if refusal:
            findings.append(Finding(f"agent for {slot}: {refusal}", error=False, code=ProblemCode.AGENT_AS_ROOT))
        findings += uncommitted_agent_files(project, slot, agent)
    findings += unshelled(project, agents_seen.values())
    findings += [Finding.at(ProblemCode.CONFIG, CONFIG_FILE, f"[run] keep: {entry!r} is a path, not a pattern: the "
                            f"clean spares only a file or folder named {entry!r}; name each path in full", error=False,
                            line=config_line(project, "run", "keep")) for entry in config.keep if set("*?[") & set(entry)]
    missing = unavailable(config)
    if missing:
        findings.append(Finding.at(ProblemCode.CONFIG, CONFIG_FILE, f"[run] executor = \"{config.executor}\": {missing}; "
                                   "run and drive refuse until it is installed", error=False))
    if config.tracker.backend == "github" and not config.tracker.repo:
        findings.append(Finding.at(ProblemCode.CONFIG, CONFIG_FILE, "[tracker] repo is empty: finish closes and comments on "
                                   "no issue until it names the repository (gh would take it from .git/config, which "
                                   "agents can write)", error=False))
    reason = open_tracker(config.tracker, project.root).probe()
    if reason:
        findings.append(Finding(f"tracker {config.tracker.backend}: {reason}", error=False,
                                code=ProblemCode.TRACKER_UNREACHABLE))
    return findings


# Programs that run a recipe the repository holds: what they start is written in a file drover
# does not read as a script's name (a Makefile's recipe, package.json's scripts, tox.ini).
RECIPE_RUNNERS = frozenset({"make", "gmake", "just", "task", "npm", "npx", "yarn", "pnpm", "bun", "tox", "nox",
                            "rake", "invoke", "poe", "hatch", "pdm", "uv", "poetry", "cargo", "go"})


def uncommitted_agent_files(project: Project, slot: str, agent: AgentConfig) -> list[Finding]:
    """A warning for each file an agent's command names that base does not hold: the agent runs in
    the item's worktree, made from base, where the file is not (with `[run] worktree = false` it runs
    here, where it is, and so does a draft)."""
    from drover.loop.runnable import missing_from_base

    if not project.config.worktree or not agent.command or slot == "draft":
        return []
    try:
        missing = missing_from_base(presets.resolve_agent(agent).argv, project.root, project.config.base)
    except GitError:  # a base that does not exist: check says so of its own
        return []
    config, base = project.config, project.config.base
    own = slot in config.slot_agents and agent.command != config.agent.command  # [agent.<slot>]'s, not [agent]'s
    line = config_line(project, f"agent.{slot}" if own else "agent", "command")
    return [Finding.at(ProblemCode.AGENT_MISSING, CONFIG_FILE, f"agent for {slot}: {path} is not committed on {base}: "
                       f"the item's worktree, made from {base}, will not have it and the run fails (commit it)",
                       line=line, error=False) for path in missing]


def review_through_a_runner(config: Config) -> list[Finding]:
    """A warning when the review command starts a recipe runner (`make review`): drover compares
    the files the command names with the commit under review, and a recipe names its own, which a
    branch may change (hostile review 14; docs/security.md)."""
    words = list(presets.resolve_agent(config.agent_for("review")).argv)
    while words and (words[0] == "env" or "=" in words[0] or words[0].startswith("-")):
        words = words[1:]  # `env NAME=value make ...`
    if not words or posixpath.basename(words[0]) not in RECIPE_RUNNERS:
        return []
    return [Finding.at(ProblemCode.CONFIG, CONFIG_FILE, f"[agent.review] command starts {words[0]}: drover cannot see which "
                       "files its recipe runs, so a branch that changes them would be reviewed by them; name the "
                       "reviewer's script in the command itself (`sh agents/review.sh`)", error=False)]


def independent_review(config: Config) -> list[Finding]:
    """A warning when `[review] require_independent` is on and the review agent is the implementing
    agent by identity: every approval by the review slot is then one by an author, and opens nothing."""
    reviewer = config.agent_for("review").identity
    if not config.require_independent or reviewer != config.agent_for("implement").identity:
        return []
    return [Finding.at(ProblemCode.CONFIG, CONFIG_FILE, "[review] require_independent is true and the review agent's "
                       f"identity is the implementing agent's ({reviewer}): an approval by one of the item's authors "
                       "(Weak) does not open the gate, so no review run approves and drive parks every item (give "
                       "[agent.review] another `name`, or audit by hand)", error=False)]


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


def empty_verify(verify: dict[str, str], line_of: Callable[[str], int | None] = lambda key: None) -> list[Finding]:
    """An empty verify command: drover then checks nothing before it merges (docs/verify.md);
    `line_of` finds where drover.toml writes a `[verify]` key."""
    return [Finding.at(ProblemCode.VERIFY_EMPTY, CONFIG_FILE, f"[verify] {key} is empty: nothing runs before merge for "
                       f"{'items' if key == 'default' else f'items with {key}: yes'} (drover runs no check "
                       "of its own, and finish needs none)", line=line_of(key), error=False)
            for key, command in sorted(verify.items()) if not command.strip()]


def unshelled(project: Project, agents: "Iterable[tuple[str, AgentConfig]]") -> list[Finding]:
    """A command drover starts without a shell that holds words only a shell reads (runnable.py)."""
    from drover.loop.runnable import shell_only_words

    named: list[tuple[str, str, int | None]] = [(f"agent for {slot}: [agent] command", agent.command, None)
                                                for slot, agent in agents]
    named.append(("[notify] command", project.config.notify.command, config_line(project, "notify", "command")))
    return [Finding.at(ProblemCode.CONFIG, CONFIG_FILE, f"{what}: {', '.join(f'`{word}`' for word in words)} "
                       f"{'is a plain word' if len(words) == 1 else 'are plain words'} to its program, as drover "
                       "runs the command without a shell; for a shell to read them: sh -c '...'", line=line,
                       error=False)
            for what, command, line in named for words in [shell_only_words(command)] if words]


def config_line(project: Project, table: str, key: str) -> int | None:
    """The line where drover.toml writes `key` of `table`, for a finding about it (None when the
    key is not written, or the file cannot be read again)."""
    from drover.config.toml import locate
    from drover.git.files import read_regular_text

    try:
        text = read_regular_text(project.root / CONFIG_FILE)
    except (OSError, UnicodeDecodeError):
        return None
    return locate(text)(table, key)


def verify_warnings(project: Project) -> list[Finding]:
    """A warning for each `[verify]` key whose command cannot start here, or whose tests would import
    this checkout's code from an item's worktree: drover's check would fail on every item, or pass
    what a branch broke (runnable.verify_commands_problems)."""
    from drover.loop.runnable import verify_commands_problems

    return [Finding.at(code, CONFIG_FILE, f"[verify] {key} {said}", error=False)
            for keys, code, said in verify_commands_problems(project.config.verify, project.root) for key in keys]


def run_check(project: Project, ledger: Ledger, *, warnings: bool = True) -> list[Finding]:
    """Every finding of `drover check`; warnings=False: leave out check_warnings (whose probes
    of agents and the tracker only ever warn), for a caller that wants the errors alone."""
    item_findings, keys = check_items(project, ledger)
    template_findings = templates.check_templates(project.root, project.config, used_keys=keys)
    refs = git.all_refs(project.root)  # the one git call: config and refs read it
    return (item_findings + check_config(project, refs) + check_refs(project, ledger, refs) + template_findings
            + check_ledger_rows(project, ledger)
            + (misspelt_keys(project, ledger) + check_warnings(project) + hidden_steering(project) if warnings else []))


def hidden_steering(project: Project) -> list[Finding]:
    """A warning for each of drover's steering files (drover.toml, the prompt overrides inside the
    repository, the item files) that the main checkout's index marks assume-unchanged or
    skip-worktree: git's status passes over an edit of it, and so does the dirty check of `finish`
    and `drive --finish`. The index is in the shared git folder, an agent's to write from any
    worktree (hostile review 34). One `git ls-files`, only when check itself runs."""
    specs = [CONFIG_FILE, project.config.items]
    for written in project.config.prompts.values():
        normal = posixpath.normpath(written) if written else ""
        if normal and not posixpath.isabs(normal) and normal != ".." and not normal.startswith("../"):
            specs.append(normal)
    try:
        marked = git.hidden_from_status(project.root, specs)
    except GitError as exc:
        return [Finding(f"cannot read the index's marks of drover's files: {exc}", error=False,
                        code=ProblemCode.HIDDEN_FROM_STATUS)]
    return [Finding.at(ProblemCode.HIDDEN_FROM_STATUS, path, f"the index marks it {how}: git status shows no "
                       f"edit of it, nor does finish's dirty check; if you did not mark it, an agent did "
                       f"(`git update-index --no-{how} -- {path}`, then look at `git diff -- {path}`)",
                       error=False)
            for path, how in sorted(marked.items())]


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
