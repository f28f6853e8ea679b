"""The `drover` executable's entry point: answers `drover --help` from the cache (helpcache.py)
and plain single-item command lines through fastpath.py, both before importing click and the
command tree; anything else goes to cli.main."""
from __future__ import annotations

import os
import sys

# The commands fastpath.py can run without click (their plain forms only).
FAST = ("show", "prompt", "request-changes", "audit", "new", "list", "check")


def main() -> None:
    argv = sys.argv[1:]
    if argv in (["--help"], ["-h"]):
        from .helpcache import cached

        text = cached(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli.py"))
        if text is not None:
            sys.stdout.write(text)
            return
    elif argv and argv[0] in FAST:
        from .fastpath import run

        if run(argv):
            return
    from .cli import main as cli_main

    cli_main()
