"""What a look that runs none of an operator's command line tells of it: whether it can start here
(`cannot_start`), and whether its tests, run from an item's worktree, would import this checkout's
code instead of the branch's (`tests_this_checkout`). `drover init` says so of the verify command it
writes, `drover check` of every `[verify]` command: drover's check runs that command before each
review and merge, and fails on every item while it cannot start, or passes what a branch broke
while it tests the main checkout (docs/verify.md)."""
from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path


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
    if _python_module(words):
        found = _ask(program, root, _FINDS_MODULE, words[2])
        if found is not None and found.returncode == 1:
            return f"`{words[0]}` ({program}) has no module named {words[2]!r}"
    return ""


def tests_this_checkout(command: str, root: Path) -> str:
    """Why `command`, run from an item's worktree, would test this checkout's code ("" when, as far
    as a look tells, it would not): it is `python -m ...`, the project keeps its packages under
    src/, that python finds one of them without the worktree (an editable `pip install -e .` into
    an environment outside the repository points here; a plain install is a copy), and no pytest
    `pythonpath` puts src/ first. A worktree's own folder comes first on the path only for a
    package at its top; one under src/ is found where the install put it."""
    words, program = _program(command)
    if not words or program is None or not _python_module(words) or _pythonpath_names_src(root):
        return ""
    try:
        packages = sorted(entry.name for entry in (root / "src").iterdir()
                          if entry.name.isidentifier() and (entry / "__init__.py").is_file())
    except OSError:
        return ""
    found = _ask(program, root, _ORIGINS, *packages) if packages else None
    if found is None or found.returncode != 0:
        return ""
    here = root.resolve()
    for name, origin in zip(packages, found.stdout.decode("utf-8", "replace").splitlines()):
        if not origin:
            continue
        place = Path(origin).resolve().parent
        where, whose = ((f"this checkout's {place.relative_to(here)}/ through an install of it", "this checkout's code")
                        if place.is_relative_to(here) else (f"{place}, where an install of it points", "that code"))
        return (f"`{words[0]}` ({program}) imports {name} from {where}: from an item's worktree the tests would "
                f"import {whose}, not the branch's, so drover's check would pass what a branch broke; give each "
                "worktree its own environment ([run] setup) or put src/ first for pytest (pythonpath = [\"src\"])")
    return ""


def _program(command: str) -> tuple[list[str], str | None]:
    """The command's words from its program on (past `VAR=value`), and where PATH finds the program;
    ([], None) for a line the shell alone can read, a shell word, or a program named by a path."""
    try:
        words = shlex.split(command)
    except ValueError:
        return [], None
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


def _pythonpath_names_src(root: Path) -> bool:
    """A pytest `pythonpath` setting naming src, in any file pytest reads its settings from."""
    for name in ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini"):
        try:
            text = (root / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if re.search(r"^\s*pythonpath\s*=.*\bsrc\b", text, re.M):
            return True
    return False


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
