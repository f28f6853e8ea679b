"""What a review's agent would run or read that the implementer could have written: a review is
refused rather than run on it (docs/security.md). The review runs in the item's worktree, the
branch's, on the files there."""
from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from drover import git
from drover.errors import GitError, Refused
from drover.errors import shown_paths

if TYPE_CHECKING:
    from drover.executors.base import Launch
    from drover.ledger.db import Ledger
    from drover.ledger.project import Project


# What the CLI presets read from the folder they run in that can start programs: their settings
# (hooks, servers, lint and test commands). A review runs in the item's worktree, which is the
# branch's. Instruction files (AGENTS.md, CLAUDE.md) are text the reviewer reads, as it reads the
# diff: a branch may change them and still be reviewed.
AGENT_CONFIG = (".claude", ".codex", ".gemini", ".aider.conf.yml", ".aider.model.settings.yml", ".opencode",
                "opencode.json", "opencode.jsonc", ".mcp.json",
                # read at start by aider (from the repository's top and the working folder) and by
                # gemini's CLI: variables that set the model's endpoint and the commands run (AIDER_TEST_CMD)
                ".env", ".gemini/.env")
# What the reviewer's git reads of the worktree beside the commit: `install.sh -diff` left there,
# uncommitted, showed the reviewer's `git diff` a binary file where the branch added a script. A
# branch may change it, but not so as to hide its change: `* -diff` marks the attributes file
# itself too, and the diff then shows nothing of either (hostile review 32: _refuse_hidden_as_binary).
# `.gitmodules` likewise: the reviewer's git reads each submodule's `ignore` there, and drover tells
# it `none` for the names the worktree's copy gives (agents/environment.agent_git), so that copy
# must be the commit's (one deleted, uncommitted, had git read the index's).
GIT_READS = (".gitattributes", ".gitmodules")


def _reviewer_files(argv: tuple[str, ...] | list[str]) -> tuple[set[str], set[str]]:
    """The words of a reviewer's command that may name a file in its folder, and the folder of each
    one below the top: a script sources or runs what lies beside it (`sh agents/review.sh` and
    its `agents/lib.sh`). A plain word (`claude`, `exec`) names no folder: a project's `exec/` is its own."""
    lists = _word_lists(list(argv))
    values = [value for each in lists for word in each for value in _naming(word)]
    words = {posixpath.normpath(value) for value in values if value and not value.startswith("-")}
    folders = {posixpath.dirname(word) for word in words if posixpath.dirname(word) and not word.startswith(("/", "../"))}
    # a folder the command goes into (`cd agents && sh review.sh`, `make -C agents`, `env -C agents`)
    # names what it runs there from that folder: the whole folder is the reviewer's (hostile review 14)
    folders |= {posixpath.normpath(folder) for each in lists for folder in _entered(each)
                if folder and not folder.startswith(("/", "../", "-")) and posixpath.normpath(folder) not in (".", "..")}
    return words, folders


def command_words(argv: Sequence[str]) -> set[str]:
    """The words of an agent's command that may name a file (_reviewer_files), for `drover check`."""
    return _reviewer_files(tuple(argv))[0]


# What splits a shell's words: a reviewer's command may hold a script for a shell to run
# (`sh -c 'sh agents/review.sh'`), whose words name files as the command's own do.
_SHELL_TEXT = re.compile(r"[\s;&|()<>`]")
_SEPARATORS = re.compile(r"[;&|()<>`]+")
# The words and options after which a command runs in another folder.
_INTO = frozenset({"cd", "pushd", "-C", "--chdir", "--directory", "--cwd", "--dir", "--cd", "--prefix", "--project"})


def _word_lists(words: list[str], depth: int = 3) -> list[list[str]]:
    """`words`, and the words of each shell script one of them holds (`sh -c 'cd agents && sh
    review.sh'`, split at its separators too), nested up to `depth` quotes deep."""
    lists = [words]
    for word in words:
        if depth and _SHELL_TEXT.search(word):
            import shlex

            try:
                split = shlex.split(word)
            except ValueError:  # an unclosed quote: the shell would refuse it; its words still count
                split = word.split()
            pieces = [piece for part in split for piece in _SEPARATORS.split(part) if piece]
            if pieces != [word]:
                lists += _word_lists(pieces, depth - 1)
    return lists


def _entered(words: list[str]) -> list[str]:
    """The folders `words` go into: the word after `cd` or `-C` (and the others of _INTO), or such
    an option's value (`--directory=agents`)."""
    found = [word for before, word in zip(words, words[1:]) if before in _INTO]
    return found + [value for name, equals, value in (word.partition("=") for word in words) if equals and name in _INTO]


def _naming(word: str) -> list[str]:
    """What a word of the command may name a file by: the word itself, an option's value
    (`--settings=agents/hooks.json`) or a variable's (`env R=agents/review.sh`). With the words of
    the shell scripts the command holds (_word_lists), it errs towards naming too much: a review
    refused is the operator's to look at, a reviewer the implementer wrote is not."""
    named = [] if word.startswith("-") else [word]
    if "=" in word:
        named.append(word.partition("=")[2])
    return named


def _run_or_read(paths: list[str], files: tuple[set[str], set[str]], settings: tuple[str, ...] = AGENT_CONFIG) -> list[str]:
    """Of `paths`, those the reviewer would run (a word of its command, or under the folder of one)
    or would read at start (`settings`: its CLI's, AGENT_CONFIG)."""
    words, folders = files
    tops = (*folders, *settings)
    return [path for path in paths if path in words or any(path == top or path.startswith(top + "/") for top in tops)]


def refuse_from_the_branch(project: "Project", item_id: str, branch: str, argv: list[str],
                           heads: dict[str, str] | None = None) -> None:
    """Refuse a review whose agent would run what the branch under review changed: a word of its
    command that names a file the branch changes (`sh agents/agent.sh`, found from the worktree),
    or the settings and instructions the CLI reads there (AGENT_CONFIG): the implementer would
    write its own reviewer (docs/security.md). `heads`: the branch's and base's heads the
    review's prompt was built on, when both exist (read here otherwise, and given back in it: the
    launch must start on the head judged here)."""
    heads = {} if heads is None else heads
    if not heads:
        heads.update(git.heads_of(project.root, branch, project.config.base))
    if branch not in heads or project.config.base not in heads:
        return
    base = project.config.base
    if git.cut_merge_bases(project.root, heads[base], heads[branch]):
        # the reviewer's `git diff <base>...HEAD` would start from the cut's merge base (hostile review 50)
        raise Refused(f"{item_id}: {project.relpath(project.git_common_dir / 'shallow')} cuts the history where {branch} "
                      f"left {base}: the reviewer's diff would start from another merge base than a merge does; "
                      "remove the lines it lists that a shallow clone did not write, then review")
    changed = git.changed_paths(project.root, base, heads[branch], base_head=heads[base])
    named = _run_or_read(changed, _reviewer_files(argv))
    if named:
        raise Refused(f"{item_id}: {branch} changes what its reviewer would run or read ({shown_paths(named)}): the review "
                      "would run the branch's own; take those changes off the branch, or review by hand")


def seen_refs(project: "Project", branch: str) -> git.Refs:
    """The heads of the review's branch and base, and the refs that shadow either, in one git call:
    what the checks below judge, read at the moment they are made."""
    return git.branch_refs(project.root, branch, project.config.base)


def _shadowing(project: "Project", branch: str, seen: git.Refs) -> list[str]:
    """The refs git reads the short name of base or of `branch` as, before the branch itself (a
    tag `main`, hostile review 13): the implementer can make one, and the reviewer's `git diff
    main...HEAD` then shows a diff from the implementer's chosen commit, not what merges. `seen`:
    seen_refs of the moment."""
    names = [name for name in (project.config.base, branch) if name]
    # git reads `$GIT_DIR/<name>` before either: the common folder's, from a linked worktree too
    common = project.git_common_dir
    files = [f"{common.name}/{name}" for name in names if git.reads_as_ref(common / name)]
    return files + list(seen.shadows)


def _held_as_files(project: "Project", commit: str, paths: list[str]) -> set[str]:
    """Those of `paths` that `commit` holds as a file or a link, not as a folder."""
    listed = git.git(["--literal-pathspecs", "ls-tree", "-z", "--full-tree", "--end-of-options", commit, "--", *paths],
                     project.root)
    return {path for meta, _, path in (entry.partition("\t") for entry in listed.split("\0"))
            if path and not meta.startswith("040000")}


def refuse_from_the_worktree(project: "Project", launch: "Launch", head: str, seen: git.Refs) -> None:
    """Refuse a review whose worktree holds, beside the commit under review (`head`), what the
    reviewer would run or read: the review runs on the files there, not on the commit, so a
    reviewer script the implementer edited and left uncommitted (whatever the index it can write
    says of it), an untracked or ignored `.claude/`, would be the implementer's reviewer. Only
    those paths are compared with the commit, by their bytes: not a pass over every file. The
    worktree's git must be this repository's too: its `.git` file and private folder are the
    implementer's to rewrite, and another repository there shows the reviewer other commits.

    With `worktree = false` the review runs in the operator's checkout, switched to the branch:
    there only the files its command names and the attributes files count (the CLIs' settings
    there are the operator's).
    `seen`: seen_refs, read after the last code of an agent's or of the branch's ran."""
    in_a_worktree = launch.workdir != project.root
    # the attributes files the reviewer's git reads count in the operator's checkout too: the
    # implementer worked there, and one it left there uncommitted hid its change (hostile review 36)
    settings: tuple[str, ...] = (*AGENT_CONFIG, *GIT_READS) if in_a_worktree else GIT_READS
    if not in_a_worktree:
        index = (git.own_git_dir(project.root) or project.git_common_dir) / "index"
    else:
        from drover.git.cleaning import Unfit, private_git_dir

        try:
            index = private_git_dir(launch.workdir, project.git_common_dir) / "index"
        except Unfit as exc:
            raise Refused(f"{launch.item_id}: its worktree's git is not this repository's ({exc}): "
                          "no review runs there") from None
    settings += _attributes_above(project, launch, head, seen)
    shadows = _shadowing(project, launch.branch, seen)
    if shadows:
        raise Refused(f"{launch.item_id}: {', '.join(shadows)} shares the name of a branch its reviewer reads: the "
                      "reviewer's git would read that ref for the branch (`git diff main...HEAD` showing less than "
                      "merges); delete it (`drover check` names such refs), then review")
    files = _reviewer_files(launch.argv)
    words, folders = files
    # a word names a file the command runs, a folder a script's neighbours: a folder a plain word
    # happens to name (a project's own `exec/`) is not walked, unless the commit holds a file there
    # (python runs a folder's `__main__.py`, node its `index.js`: a folder the implementer put in
    # place of the committed `review.py` would be the reviewer)
    below = [word for word in words if word not in (".", "..") and not word.startswith(("/", "../"))]
    in_folders = [word for word in below if (launch.workdir / word).is_dir()]
    try:
        held = _held_as_files(project, head, in_folders) if in_folders else set()
        within = sorted({word for word in below if word not in in_folders or word in held} | folders)
        looked_at = (*within, *settings)
        differing = git.differing_on_disk(project.root, launch.workdir, head, looked_at) if looked_at else []
        # an attributes file (or a `.gitmodules`) the index alone holds: git reads it where the disk has
        # none (hostile reviews 36, 43: one staged where the commit has none hid a gitlink the branch added)
        attributes = tuple(path for path in settings if posixpath.basename(path) in GIT_READS)
        differing += git.differing_in_index(project.root, launch.workdir, index, head, attributes)
    except GitError as exc:
        raise Refused(f"{launch.item_id}: cannot compare its worktree with {head[:12]} ({exc}): "
                      "no review runs there") from None
    changed = _run_or_read(differing, files, settings)
    if changed:
        raise Refused(f"{launch.item_id}: its worktree holds, uncommitted, what its reviewer would run or read "
                      f"({shown_paths(sorted(set(changed)))}): the review would run the implementer's own; remove them from "
                      f"{launch.workdir}, or review by hand")
    if in_a_worktree:
        _refuse_hidden_as_binary(project, launch, head, seen)


def _attributes_above(project: "Project", launch: "Launch", head: str, seen: git.Refs) -> tuple[str, ...]:
    """The `.gitattributes` below the top that the reviewer's `git diff` reads for a path the branch
    changes: one in each folder above it. Left uncommitted there (`sub/.gitattributes` saying
    `* -diff`), it would show the branch's change as binary to the reviewer alone; compared with the
    commit beside the top one (GIT_READS), in the same git calls. The changed paths are the binary
    check's own question, asked once a process (git.changed_paths)."""
    base_head = seen.heads.get(project.config.base, "")
    if not base_head:
        return ()
    try:
        changed = git.changed_paths(project.root, project.config.base, head, base_head=base_head)
    except GitError as exc:
        raise Refused(f"{launch.item_id}: cannot read what its branch changes ({exc}): no review runs there") from None
    folders = {posixpath.dirname(path) for path in changed}
    for folder in list(folders):
        while folder:
            folders.add(folder)
            folder = posixpath.dirname(folder)
    return tuple(sorted(f"{folder}/.gitattributes" for folder in folders if folder))


def _refuse_hidden_as_binary(project: "Project", launch: "Launch", head: str, seen: git.Refs) -> None:
    """Refuse a review whose reviewer's `git diff` would show as binary a file of the branch's change
    that drover's own checkout shows as text (hostile review 32): a `.gitattributes` the branch
    changes, at any depth, saying `* -diff` or `binary`. The reviewer would read `Binary files
    ... differ` where the branch changed a script, the attributes file itself included (it marks
    itself), or the shared `info/attributes`, which every worktree's agent can write. What base's own
    `.gitattributes` says counts the same in both places (a project's `*.lock -diff`): it stops nothing."""
    base_head = seen.heads.get(project.config.base, "")
    if not base_head:
        return
    shared = (project.git_common_dir / "info" / "attributes").exists()
    try:
        # only where an attributes file can differ from drover's checkout: a `.gitattributes` the
        # branch changes (the branch check's own question, answered once a process) or the shared
        # `info/attributes`; one left uncommitted was refused before, wherever it is (_attributes_above)
        changed = git.changed_paths(project.root, project.config.base, head, base_head=base_head)
        if not shared and not any(posixpath.basename(path) == ".gitattributes" for path in changed):
            return
        binary = git.shown_as_binary(launch.workdir, base_head, head)
        hidden = binary - git.shown_as_binary(project.root, base_head, head)
        # the shared `info/attributes` is read in both places: one it marks so is the implementer's doing
        if binary - hidden and shared:
            hidden |= set(git.shared_attributes(project.root, sorted(binary - hidden), "diff"))
            # and a macro it defines for a name the commit's own `.gitattributes` set (hostile review 36)
            hidden |= set(git.changed_by_shared(project.root, project.git_common_dir, head, sorted(binary - hidden), "diff"))
    except GitError as exc:
        raise Refused(f"{launch.item_id}: cannot read what its reviewer's diff would show ({exc}): "
                      "no review runs there") from None
    if hidden:
        raise Refused(f"{launch.item_id}: the attributes in its worktree show {shown_paths(sorted(hidden))} as binary to its reviewer's "
                      f"`git diff`, where drover's checkout shows text: the review would not see those changes; "
                      f"take the `-diff` or `binary` attribute off {launch.branch} (or out of "
                      f"{project.git_common_dir.name}/info/attributes), or review by hand")


def park_if_changed_under(project: "Project", ledger: "Ledger", launch: "Launch", head: str) -> git.Refs:
    """The same comparison once the review ended: a process the implementer left running may have
    written what the reviewer reads between the check before the launch and the moment its CLI
    read it. An item whose worktree changed under its review goes to the operator, whatever the
    review recorded (its approval stays on record; `drover unpark` after a look). The refs it read
    once the review ended (seen_refs): where the review left its branch."""
    seen = seen_refs(project, launch.branch)
    try:
        refuse_from_the_worktree(project, launch, head, seen)
    except Refused as exc:
        from drover.ledger.writes import park_by_drover

        park_by_drover(ledger, launch.item_id, f"its worktree changed under its review: {exc}")
    return seen


NOTHING = "nothing to review: {branch} has no commits beyond {base} (the implementing runs committed nothing)"


def nothing_to_review(project: Project, ledger: Ledger, item_id: str, heads: dict[str, str] | None = None,
                      *, moved: bool = True, base_head: str = "") -> str:
    """Why the item's branch holds nothing to check or review (its head is base's, or behind it), in
    the words a review's refusal uses; "" when it holds commits of its own, or has no head yet.
    `heads`: where an implementing run just left the branch (RunResult.heads), `moved` whether it
    moved the branch. A run that moved it: only a branch now at base counts here, one git call (one
    it moved behind base is refused at its review). A run that committed nothing on a branch behind
    base (base moved since) is asked in full: checked, it was the check of base's own code.
    `base_head`: base's head, read with `heads` (RunResult.base_head)."""
    from drover.ledger.itemstate import item_state

    known = item_state(project, ledger, item_id, heads=heads)
    if not known.head:
        return ""
    base_head = base_head or git.head_of(project.root, project.config.base)
    if not base_head or (known.head != base_head if heads and moved else
                         git.merge_bases(project.root, base_head, known.head) != [known.head]):
        return ""
    return NOTHING.format(branch=known.branch, base=project.config.base)
