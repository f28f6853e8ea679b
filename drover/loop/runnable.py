"""Whether an operator's command line can start here, as far as a look that runs none of it tells:
`drover init` says so of the verify command it chose, `drover check` of every `[verify]` command.
drover's check runs that command before each review and merge and fails while it cannot start,
so a command that cannot is found before a drive spends a round on it (docs/verify.md)."""
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
    try:
        words = shlex.split(command)
    except ValueError:
        return ""
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):  # VAR=value before the program
        words.pop(0)
    if not words or "/" in words[0] or not re.fullmatch(r"[\w.+-]+", words[0]) or words[0] in _SHELL_WORDS:
        return ""
    program = shutil.which(words[0])
    if program is None:
        return f"`{words[0]}` is not on PATH"
    if len(words) > 2 and words[1] == "-m" and words[0].startswith("python") and words[2].isidentifier():
        try:
            done = subprocess.run([program, "-c", _FINDS_MODULE, words[2]], cwd=root, capture_output=True,
                                  timeout=30, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return ""
        if done.returncode == 1:
            return f"`{words[0]}` ({program}) has no module named {words[2]!r}"
    return ""


# The shell's own words (POSIX's special and regular built-ins, bash's, the reserved words), and
# programs a line commonly starts with before its real one: none is looked for on PATH.
_SHELL_WORDS = frozenset(""". : alias bg break builtin caller case cd command compgen complete continue declare
dirs disown echo enable eval exec exit export false fc fg for function getopts hash help history if jobs kill let
local logout mapfile popd printf pushd pwd read readarray readonly return select set shift shopt source suspend test
time times trap true type typeset ulimit umask unalias unset until wait while env nohup""".split())
# The repository's own folder leaves the path first: a file of it named like a module the lookup
# imports (importlib.py) would otherwise run.
_FINDS_MODULE = "import sys; del sys.path[0]; import importlib.util; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)"
