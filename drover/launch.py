"""The `drover` executable's entry point: answers `drover --help` from the cache (helpcache.py)
before importing click and the command tree, else hands over to cli.main."""
from __future__ import annotations

import os
import sys


def main() -> None:
    if sys.argv[1:] in (["--help"], ["-h"]):
        from .helpcache import cached

        text = cached(os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli.py"))
        if text is not None:
            sys.stdout.write(text)
            return
    from .cli import main as cli_main

    cli_main()
