"""What a look that runs none of an operator's command line tells of it: whether it can start here
(`cannot_start`), and whether its tests, run from an item's worktree, would import this checkout's
code instead of the branch's (`tests_this_checkout`). `drover init` says so of the verify command it
writes, `drover check` of every `[verify]` command: drover's check runs that command before each
review and merge, and fails on every item while it cannot start, or passes what a branch broke
while it tests the main checkout (docs/verify.md)."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from drover.errors import ProblemCode
from drover.git.files import read_regular_text


def verify_commands_problems(verify: Mapping[str, str], root: Path) -> list[tuple[list[str], ProblemCode, str]]:
    """verify_problems of each `[verify]` command, looked at once whatever keys name it: (the keys,
    in order, the code, the words). `drover check` says it of each key, a drive's header of the keys
    together."""
    keys: dict[str, list[str]] = {}
    for key, command in sorted(verify.items()):
        if command.strip():
            keys.setdefault(command, []).append(key)
    return [(named, code, said) for command, named in keys.items() for code, said in verify_problems(command, root)]


def verify_problems(command: str, root: Path) -> list[tuple[ProblemCode, str]]:
    """What `drover check` (and a drive's header) says of a verify command: cannot_start's answer,
    else tests_this_checkout's, each with its code; [] when the look finds nothing."""
    problem = cannot_start(command, root)
    if problem:
        return [(ProblemCode.VERIFY_CANNOT_RUN, f"cannot run here: {problem}; drover's check runs it before each "
                 "review and merge, and fails while it cannot (install what it needs, or change the command)")]
    wrong = tests_this_checkout(command, root)
    return [(ProblemCode.VERIFY_TESTS_CHECKOUT, f"tests the wrong code: {wrong}")] if wrong else []


def cannot_start(command: str, root: Path) -> str:
    """Why `command` cannot run in `root` ("" when it may): its program is not on PATH, or it is
    `python -m <module>` and that python finds no such module (a top-level one: finding a submodule
    would import, so run, its package). A shell builtin or a line the shell alone can read is left
    to the shell."""
    words, program = _program(command)
    if not words:
        return ""
    if program is None:
        return f"`{words[0]}` is not on PATH"
    if words[0] in ("make", "gmake") and not _makefile_here(words, root):
        return (f"`{words[0]}` finds no Makefile here (GNUmakefile, makefile, Makefile), nor a configure script, "
                "Makefile.in or CMakeLists.txt that would make one")
    if _python_module(words):
        found = _ask(program, root, _FINDS_MODULE, words[2])
        if found is not None and found.returncode == 1:
            return f"`{words[0]}` ({program}) has no module named {words[2]!r}"
    return ""


def tests_this_checkout(command: str, root: Path) -> str:
    """Why `command`, run from an item's worktree, would test this checkout's code ("" when, as far
    as a look tells, it would not). It runs pytest (`python -m pytest`, or the `pytest` script) and
    its python finds one of the project's packages without the worktree: one under src/ wherever
    an install put it (an editable `pip install -e .` into an environment outside the repository
    points here; a plain install is a copy), one at the top through an install pointing here.
    `python -m` puts the worktree's own folder first, so a package at its top is found there; the
    `pytest` script does not (unless a conftest.py beside it does). A pytest `pythonpath` naming
    `src` (or `.`) puts the worktree's copy first."""
    words, program = _program(command)
    python = _pytest_python(words, program) if program else None
    if python is None:
        return ""
    settings = _pythonpath(root)
    top_first = _python_module(words) or "." in settings or (root / "conftest.py").is_file()
    candidates = ([] if "src" in settings else [(name, False) for name in _packages(root / "src")]) + \
                 ([] if top_first else [(name, True) for name in _packages(root)])
    found = _ask(python, root, _ORIGINS, *[name for name, _ in candidates]) if candidates else None
    if found is None or found.returncode != 0:
        return ""
    here = Path(os.path.realpath(root))
    for (name, at_top), origin in zip(candidates, found.stdout.decode("utf-8", "replace").splitlines()):
        place = Path(os.path.realpath(origin)).parent if origin else None
        if place is None or (at_top and not place.is_relative_to(here)):
            continue  # not found, or a package of another's named like a folder here (tests/)
        where, whose = ((f"this checkout's {place.relative_to(here)}/ through an install of it", "this checkout's code")
                        if place.is_relative_to(here) else (f"{place}, where an install of it points", "that code"))
        return (f"`{words[0]}` ({python}) imports {name} from {where}: from an item's worktree the tests would "
                f"import {whose}, not the branch's, so drover's check would pass what a branch broke; give each "
                "worktree its own environment ([run] setup), or have pytest put the worktree's code first "
                f"(pythonpath = [\"{'.' if at_top else 'src'}\"])")
    return ""


# What make reads when no option names its file or folder, and what writes one (a `[run] setup` of
# `./configure` or `cmake -S . -B .`): a `make test` where none is, an older init's default, fails
# every check (a user upgrading from a week-old drover)
_MAKEFILES = ("GNUmakefile", "makefile", "Makefile")
_MAKEFILE_MAKERS = ("configure", "configure.ac", "Makefile.in", "Makefile.am", "CMakeLists.txt")
_ELSEWHERE = re.compile(r"-[fC].*|--(?:file|makefile|directory)(?:=.*)?")


def _makefile_here(words: Sequence[str], root: Path) -> bool:
    """make would find a Makefile in `root` (or its options name one elsewhere, or one is made)."""
    return any(_ELSEWHERE.fullmatch(word) for word in words[1:]) or any(
        (root / name).is_file() for name in _MAKEFILES + _MAKEFILE_MAKERS)


_OPERATORS = re.compile(r"[0-9&]?>>?.*|<|\|\|?|&&|;|&")  # `>out.json`, `2>&1`, `<`, `|`, `&&`...


def command_words(command: str) -> list[str]:
    """The words of an operator's command line as the shell splits them; none when it cannot."""
    try:
        return shlex.split(command)
    except ValueError:
        return []


def shell_only_words(command: str) -> list[str]:
    """The words of a command drover starts without a shell (`[agent] command`, `[notify] command`)
    that only a shell reads: a redirection, a pipe, `&&`, `;`. Without a shell they are the
    program's arguments (a new user's `cat > report.json` ran cat on a file named `>`)."""
    return list(dict.fromkeys(word for word in command_words(command)[1:] if _OPERATORS.fullmatch(word)))


def _program(command: str) -> tuple[list[str], str | None]:
    """The command's words from its program on (past `VAR=value`), and where PATH finds the program;
    ([], None) for a line the shell alone can read, a shell word, or a program named by a path."""
    words = command_words(command)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value before the program
        words.pop(0)
    if not words or "/" in words[0] or not re.fullmatch(r"[\w.+-]+", words[0]) or words[0] in _SHELL_WORDS:
        return [], None
    return words, shutil.which(words[0])


def _python_module(words: list[str]) -> bool:
    """`python -m <top-level module>`, of any python's name."""
    return len(words) > 2 and words[0].startswith("python") and words[1] == "-m" and words[2].isidentifier()


def _ask(program: str, root: Path, script: str, *names: str) -> subprocess.CompletedProcess[bytes] | None:
    """`program -c script names...` in `root`; None when it could not run or took over 30 s."""
    try:
        return subprocess.run([program, "-c", script, *names], cwd=root, capture_output=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None


def _pytest_python(words: list[str], program: str) -> str | None:
    """The python that runs pytest for this command line: `program` itself for `python -m pytest`,
    the `pytest` script's own interpreter (its `#!` line) for that script; None for anything else."""
    if _python_module(words) and words[2] == "pytest":
        return program
    if words[0] not in ("pytest", "py.test"):
        return None
    try:
        with open(program, "rb") as script:
            first = script.readline(400).decode("utf-8", "replace")
    except OSError:
        return None
    shebang = first[2:].split() if first.startswith("#!") else []
    if shebang[:1] == ["/usr/bin/env"]:
        shebang = [word for word in shebang[1:] if not word.startswith("-")]
        return shutil.which(shebang[0]) if shebang else None
    return shebang[0] if shebang and os.path.isabs(shebang[0]) else None


def _packages(folder: Path, most: int = 64) -> list[str]:
    """The names of the packages in `folder` (folders with an `__init__.py` and a name Python imports),
    the first `most` of them by name: a project has a few, and each is an argument of one process."""
    try:
        return sorted(entry.name for entry in folder.iterdir()
                      if entry.name.isidentifier() and (entry / "__init__.py").is_file())[:most]
    except OSError:
        return []


def _pythonpath(root: Path) -> set[str]:
    """The entries of a pytest `pythonpath` setting, in any file pytest reads its settings from."""
    entries: set[str] = set()
    for name in ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"):
        try:
            text = read_regular_text(root / name)  # a fifo in its place holds no drive's start
        except (OSError, UnicodeDecodeError):
            continue
        for value in re.findall(r"^\s*pythonpath\s*=(.*)$", text, re.M):
            entries.update(entry.rstrip("/") or "/" for entry in re.findall(r"[^\s\"',\[\]]+", value))
    return entries


# The shell's own words (POSIX's special and regular built-ins, bash's, the reserved words), and
# programs a line commonly starts with before its real one: none is looked for on PATH.
_SHELL_WORDS = frozenset(""". : alias bg break builtin caller case cd command compgen complete continue declare
dirs disown echo enable eval exec exit export false fc fg for function getopts hash help history if jobs kill let
local logout mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source suspend test
time times trap true type typeset ulimit umask unalias unset until wait while env nohup""".split())
# The repository's own folder leaves the path first: a file of it named like a module the lookup
# imports (importlib.py) would otherwise run. Finding a top-level name imports nothing of it.
_FINDS_MODULE = "import sys; del sys.path[0]; import importlib.util; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
_ORIGINS = ("import sys; del sys.path[0]; import importlib.util\n"
            "for name in sys.argv[1:]:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    print(spec.origin if spec and spec.origin else '')")


def missing_from_base(argv: Sequence[str], root: Path, base: str) -> list[str]:
    """The files an agent's command names (`sh agents/impl.sh`, the words the review's comparison
    reads as files: reviewers.py) that are in this checkout but not in `base`'s head: an item's
    worktree, made from base, lacks them, and every run there fails (`cannot open agents/impl.sh`).
    No git call unless a word names a file here."""
    from drover.loop.reviewers import command_words

    named = sorted(word for word in command_words(argv)
                   if not word.startswith(("/", "../")) and word not in (".", "..") and (root / word).is_file())
    if not named:
        return []
    from drover import git

    # base's head read as refs/heads/<base>: the bare name is what a tag, or a file (a fifo) in git's
    # folder, can shadow (docs/security.md, hostile reviews 13 and 14)
    head = git.head_of(root, base)
    if not head:
        return []  # no such branch: check says so of its own
    held = git.blobs_at(root, head, named)
    return [word for word in named if word not in held]
