"""What `drover check` warns of in drover.toml's settings and the programs and files they name:
a misspelt `[verify]` key, an empty or unstartable verify command, an agent command that names a file
base lacks or words only a shell reads, a recipe runner as the reviewer, a `[run] keep` pattern, a
tracker with no repository, steering files the index hides from status. None fails the check."""
from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING, Callable

from drover import git
from drover.agents import presets
from drover.config import AgentConfig, Config
from drover.errors import Finding, GitError, ProblemCode, did_you_mean
from drover.executors import unavailable
from drover.ledger.catalogue import notes_for_people
from drover.ledger.project import Project
from drover.trackers import open_tracker
from drover.vocabulary import CONFIG_FILE, SLOTS

if TYPE_CHECKING:
    from collections.abc import Iterable


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
    base = project.config.base
    _, line = command_key(project, slot, agent)
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

    named: list[tuple[str, str, int | None]] = [(f"agent for {slot}: {key}", agent.command, line)
                                                for slot, agent in agents for key, line in [command_key(project, slot, agent)]]
    named.append(("[notify] command", project.config.notify.command, config_line(project, "notify", "command")))
    return [Finding.at(ProblemCode.CONFIG, CONFIG_FILE, f"{what}: {', '.join(f'`{word}`' for word in words)} "
                       f"{'is a plain word' if len(words) == 1 else 'are plain words'} to its program, as drover "
                       "runs the command without a shell; for a shell to read them: sh -c '...'", line=line,
                       error=False)
            for what, command, line in named for words in [shell_only_words(command)] if words]


def command_key(project: Project, slot: str, agent: AgentConfig) -> tuple[str, int | None]:
    """Where drover.toml writes a slot's agent command: `[agent.<slot>] command` when the slot's own
    table sets one, else `[agent] command`, and its line."""
    config = project.config
    table = f"agent.{slot}" if slot in config.slot_agents and agent.command != config.agent.command else "agent"
    return f"[{table}] command", config_line(project, table, "command")


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
