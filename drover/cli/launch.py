"""The `drover` executable's entry point: answers `drover --help` from the cache (helpcache.py)
and plain single-item command lines through fastpath.py, both before importing click and the
command tree; anything else goes to cli.main."""
from __future__ import annotations

import os
import sys

# The commands fastpath.py can run without click (their plain forms only).
FAST = ("show", "prompt", "request-changes", "audit", "new", "list", "check")

# Whether main paused the cyclic garbage collector (until collect_again).
paused = False


def main() -> None:
    argv = sys.argv[1:]
    refusal = not_utf8(argv)
    if refusal:
        sys.stderr.write(f"drover: {refusal}\n")
        sys.exit(2)
    if argv in (["--help"], ["-h"]):
        from drover.cli.helpcache import cached

        text = cached(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli.py"))
        if text is not None:
            sys.stdout.write(text)
            return
    elif argv and argv[0] in FAST:
        import gc

        # The imports and the reading make no cyclic garbage worth a pass, and the collector's
        # passes over every module's objects were a tenth of a prompt; a render turns it back on
        # (collect_again), so what a template makes is collected as always.
        global paused
        paused = gc.isenabled()
        gc.disable()
        from drover.cli.fastpath import run

        try:
            if run(argv):
                return
        finally:
            gc.freeze()  # what the command made lives until the exit, whose last pass then skips it
        collect_again()
    from drover.cli.main import main as cli_main

    cli_main()


def not_utf8(argv: list[str]) -> str:
    """Why the command line cannot be taken ("" when it can): an argument whose bytes are not UTF-8
    (Python keeps them as lone surrogates) would make an item file or a ledger row nothing can
    read back, so every command refuses it before it starts, click's and the fast path's alike."""
    for number, arg in enumerate(argv, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            return f"argument {number} '{shown[:60]}' is not UTF-8 text; drover takes UTF-8 only"
    return ""


def collect_again() -> None:
    """Turn the collector main paused back on, the objects made so far set aside for good
    (gc.freeze: they live as long as the process), so its passes skip them."""
    global paused
    if paused:
        import gc

        paused = False
        gc.freeze()
        gc.enable()
