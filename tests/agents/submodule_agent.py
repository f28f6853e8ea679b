#!/usr/bin/env python3
"""A scripted agent for tests/test_submodules.py: a project vendoring `lib` as a submodule.

Implementing, it notes what it finds in `lib/` (one JSON line to $SUBMODULE_SEEN: the commit
checked out there, its files and `lib.h`), then commits its own `<item>.txt` and leaves behind, in
the submodule, an edit of `lib.h`, an untracked `planted.txt`, and a commit of its own there (the
submodule's HEAD moved, the recorded commit not). Reviewing, it writes what its own git shows of
the branch (`git diff --stat` and `git log -p` from base) to $SUBMODULE_REVIEWED, and approves.
"""
import json
import os
import subprocess
from pathlib import Path

item, slot = os.environ["DROVER_ITEM"], os.environ["DROVER_SLOT"]
here = Path.cwd()
lib = here / "lib"


def git(*args: str, cwd: Path = here) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True).stdout.strip()


if slot == "review":
    # what the reviewer's own git shows of the branch ($SUBMODULE_REVIEWED names where it goes)
    shown = git("diff", "--stat", f"{os.environ['DROVER_BASE']}...HEAD") + "\n---\n" + git("log", "-p", "--format=%s",
                                                                                        f"{os.environ['DROVER_BASE']}..HEAD")
    Path(os.environ.get("SUBMODULE_REVIEWED", os.devnull)).write_text(shown)
    subprocess.run(["drover", "audit", item, "--level", "reviewed", "--note", "looked"], check=True)
    raise SystemExit(0)
files = sorted(path.name for path in lib.iterdir()) if lib.is_dir() else []
seen = {"item": item, "files": [name for name in files if name != ".git"],
        "head": git("rev-parse", "HEAD", cwd=lib) if (lib / ".git").exists() else "",
        "lib.h": (lib / "lib.h").read_text() if (lib / "lib.h").is_file() else ""}
with open(os.environ["SUBMODULE_SEEN"], "a") as out:
    out.write(json.dumps(seen) + "\n")
if not git("log", "--format=%s", f"{os.environ['DROVER_BASE']}..HEAD"):
    (here / f"{item}.txt").write_text(f"{item}\n")
    git("add", f"{item}.txt")
    git("commit", "-q", "-m", f"{item}: its file")
if (lib / ".git").exists():
    (lib / "lib.h").write_text(f"// {item} was here\n")
    git("-c", "user.name=agent", "-c", "user.email=agent@example.invalid", "commit", "-q", "-am", "planted", cwd=lib)
    (lib / "lib.h").write_text(f"// {item} edited this too\n")
    (lib / "planted.txt").write_text(f"{item}\n")
