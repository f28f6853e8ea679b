"""An agent's environment: what drover adds to its own for the agent (the DROVER_* variables, a PATH
that reaches this drover, git's automatic maintenance off), and which of it names places on the
machine the agent runs on."""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

from drover.errors import Refused


def drover_bin_dir() -> Path | None:
    """The folder holding the `drover` program that is running now, if one can be found."""
    candidates = []
    argv0 = sys.argv[0] if sys.argv else ""
    if os.path.basename(argv0) == "drover":
        candidates.append(os.path.dirname(os.path.abspath(argv0)))
    # Not resolved: a venv's python is a symlink, and its bin folder is the one that matters.
    candidates.append(os.path.dirname(os.path.abspath(sys.executable)))
    for folder in candidates:
        if os.access(os.path.join(folder, "drover"), os.X_OK):
            return Path(folder)
    return None


def _agent_path() -> str:
    # each entry absolute, as drover's own folder resolves it: the agent runs in its worktree, where a
    # relative entry (node_modules/.bin, ".", an empty one) names the implementer's files (the `node`
    # that `#!/usr/bin/env node` finds for a CLI)
    path = os.pathsep.join(os.path.abspath(entry) for entry in os.environ.get("PATH", os.defpath).split(os.pathsep))
    folder = drover_bin_dir()
    if folder is None:
        return path
    ours = folder / "drover"
    first = shutil.which("drover", path=path)
    if first and os.path.samefile(first, ours):
        return path  # already the first drover found; leave the agent's PATH alone
    return os.pathsep.join([_drover_alone(ours), *[entry for entry in path.split(os.pathsep) if entry]])


_MAKING = threading.Lock()  # the jobs of one drive launch at once: one of them makes the folder


def _ours(name: str) -> bool:
    return name == "drover" or name.startswith("drover.")


def _drover_alone(program: Path) -> str:
    """A folder holding `program` (a link named drover) and nothing else, for the front of an agent's
    PATH: drover's own folder is often a virtual environment's, whose python, pip and pytest
    would shadow the project's for the agent, while `[run] setup` and the check run the project's
    (a new user found an agent's tests and drover's check on two interpreters). In drover's cache;
    drover's own folder where it cannot be made."""
    import zlib

    from drover.vocabulary import cache_dir

    folder = os.path.join(cache_dir(), "bin", f"{zlib.crc32(str(program).encode('utf-8', 'surrogateescape')):08x}")
    link = os.path.join(folder, "drover")
    with _MAKING:
        try:
            # the link alone: a program an agent put beside it would come first on every later agent's PATH
            # (a `drover.*` name is another drover's link in the making, and shadows no program)
            if os.readlink(link) == str(program) and all(_ours(name) for name in os.listdir(folder)):
                return folder
        except OSError:
            pass
        try:
            os.makedirs(folder, exist_ok=True)
            for name in os.listdir(folder):
                if not _ours(name):
                    path = os.path.join(folder, name)
                    with contextlib.suppress(FileNotFoundError):
                        shutil.rmtree(path) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)
            scratch = f"{link}.{os.getpid()}"
            with contextlib.suppress(FileNotFoundError):
                os.unlink(scratch)
            os.symlink(program, scratch)
            os.replace(scratch, link)
        except OSError:
            return str(program.parent)
    return folder


def agent_env(*, item_id: str, slot: str, run_id: str, prompt_file: Path, repo: Path, workdir: Path | None = None,
              base: str = "", branch: str = "", round_number: int = 0, posture: str = "",
              verify: str = "") -> dict[str, str]:
    """What an agent's environment adds: the DROVER_* variables, and PATH reaching this drover.

    The context a script agent would otherwise parse from its prompt (docs/agents.md): base and
    branch, the directory it works in, the rounds of changes so far, the implementing posture
    and the verify command.
    """
    return {
        "DROVER_ITEM": item_id,
        "DROVER_SLOT": slot,
        "DROVER_RUN": str(run_id),
        "DROVER_BASE": base,
        "DROVER_BRANCH": branch,
        "DROVER_ROUND": str(round_number),
        "DROVER_POSTURE": posture,
        "DROVER_VERIFY": verify,
        # a review runs in the branch's worktree: a Python reviewer started as `python -m MODULE`
        # (or -c) would put that folder first on its module path and import the branch's json.py,
        # subprocess.py, ... inside the review run (docs/security.md); 3.11+ leaves it off
        **({"PYTHONSAFEPATH": "1"} if slot == "review" else {}),
        **on_this_machine({"DROVER_SLOT": slot}, prompt_file=prompt_file, repo=repo, workdir=workdir or repo),
    }


# A `gc --auto` an agent's commit started would outlive the run and be ended with its other
# processes, half-way through a repack: drover runs git's maintenance itself when the command ends
# (git.housekeeping).
AGENT_GIT = (("maintenance.auto", "false"),)
# What a reviewer's git reads of the repository as drover's own git does (git/run.py): the commits
# themselves (run.AS_COMMITTED: `git replace` showed the reviewer another commit under the
# reviewed id), no monitor, hook or pager the implementer named in the shared config runs inside
# the review run, and no attributes file of the user's hides a change from its diffs (the
# worktree's `.gitattributes`: reviewers.GIT_READS). Nor does a signing program: with
# `log.showSignature` (or a `format.pretty` asking `%G?`) the reviewer's `git log` verifies each
# signed commit with the program the shared config names (hostile review 13), so each format's
# program is git's own default. An external diff, a textconv or a filter cannot be turned off by
# config (an empty `diff.external` is a program git cannot start): docs/security.md says what that leaves.
REVIEW_GIT = (("core.fsmonitor", "false"), ("core.hooksPath", os.devnull), ("core.pager", "cat"),
              ("core.attributesFile", os.devnull), ("advice.graftFileDeprecated", "false"),
              ("log.showSignature", "false"), ("gpg.program", "gpg"), ("gpg.openpgp.program", "gpg"),
              ("gpg.x509.program", "gpgsm"), ("gpg.ssh.program", "ssh-keygen"),
              # git's default: a threshold of 1 byte showed every file of the diff as binary (review 14)
              ("core.bigFileThreshold", "512m"),
              # git's default: `all` hid from the reviewer's diff a gitlink the branch adds (review 31)
              ("diff.ignoreSubmodules", "none"),
              # what git's log says in UTF-8: in UTF-16 a subject spelled lines of the reviewer's log (review 31)
              ("i18n.logOutputEncoding", "UTF-8"),
              # GIT_NO_REPLACE_OBJECTS is not enough: the shared config's `core.useReplaceRefs = true`
              # turns replacements back on over it (hostile review 50)
              ("core.useReplaceRefs", "false"))
# A reviewer's git fetches nothing: no transport at all, so a promisor remote the shared config names
# (`extensions.partialClone`, `remote.<name>.uploadpack`) never runs its program when the reviewer's
# `git log` misses an object, such as a note's blob (hostile review 14); `protocol.<name>.allow` in
# that config cannot widen an empty GIT_ALLOW_PROTOCOL. GIT_NO_LAZY_FETCH says the same to git 2.44+.
REVIEW_GIT_ENV = {"GIT_ALLOW_PROTOCOL": "", "GIT_NO_LAZY_FETCH": "1"}


def agent_git(environ: Mapping[str, str], slot: str, workdir: Path | None = None) -> dict[str, str]:
    """The variables of an agent's git: AGENT_GIT, and for a review REVIEW_GIT, REVIEW_GIT_ENV, the
    commits as committed and `submodule.<name>.ignore = none` for each submodule the `.gitmodules`
    of `workdir` names (history.submodule_names), each after the config `environ` passes already
    (GIT_CONFIG_COUNT)."""
    from drover.git.history import submodule_names
    from drover.git.run import AS_COMMITTED

    pins = (*AGENT_GIT, *REVIEW_GIT) if slot == "review" else AGENT_GIT
    if slot == "review" and workdir is not None:
        names = submodule_names(workdir)
        if sum(len(name.encode()) + PIN_BYTES for name in names) > SUBMODULE_PINS_BYTES:
            raise Refused(f"{workdir / '.gitmodules'} names {len(names):,} submodules, more than a reviewer's git "
                          "can be told to show: no review runs there")
        pins = (*pins, *((f"submodule.{name}.ignore", "none") for name in names))
    try:
        count = max(0, int(environ.get("GIT_CONFIG_COUNT", "0")))
    except ValueError:
        count = 0  # git itself refuses a malformed count; the agent's git says so
    variables = {**({**AS_COMMITTED, **REVIEW_GIT_ENV} if slot == "review" else {}),
                 "GIT_CONFIG_COUNT": str(count + len(pins))}
    for number, (key, value) in enumerate(pins, count):
        variables[f"GIT_CONFIG_KEY_{number}"], variables[f"GIT_CONFIG_VALUE_{number}"] = key, value
    return variables


# The bytes of the variables that tell a reviewer's git to show each submodule's changes, one pair
# each (agent_git): a quarter of what Linux gives a process's arguments and environment together
# (2 MiB). Past it the agent could not start (9,000 names of 300 bytes: `Argument list too long`,
# hostile review 43); PIN_BYTES is a pair's own words beside the name.
SUBMODULE_PINS_BYTES = 512 * 1024
PIN_BYTES = len("GIT_CONFIG_KEY_99999=submodule..ignore") + len("GIT_CONFIG_VALUE_99999=none") + 2


# The variables that name places on the machine the agent runs on: a worker fills them in afresh.
MACHINE_VARIABLES = ("DROVER_PROMPT_FILE", "DROVER_REPO", "DROVER_WORKTREE", "PATH")


def on_this_machine(env_add: Mapping[str, str], *, prompt_file: Path, repo: Path, workdir: Path) -> dict[str, str]:
    """`env_add` (prepared elsewhere) with the paths of this machine: its prompt file, checkout,
    working directory, the PATH reaching this drover, and its git's config after this machine's
    (agent_git, for the run's slot)."""
    return {**env_add, "DROVER_PROMPT_FILE": str(prompt_file), "DROVER_REPO": str(repo),
            "DROVER_WORKTREE": str(workdir), "PATH": _agent_path(),
            **agent_git(os.environ, env_add.get("DROVER_SLOT", ""), workdir)}
