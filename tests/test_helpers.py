"""The tests' own helpers (tests/helpers.py), where a fault would pass a test that should fail."""
from __future__ import annotations

import shutil
from pathlib import Path

import helpers
from helpers import made_once


def _fresh_copy(repo_template: Path, root: Path) -> Path:
    """Another repository as the `repo` fixture hands one out, in the same test."""
    shutil.copytree(repo_template, root, symlinks=True)
    helpers.FRESH[root] = (helpers.files_state(root), ())
    return root


def test_made_once_hands_each_copy_its_own_value(repo, repo_template, tmp_path):
    """A set-up's value (test_failures' project returns its item ids as a list) is kept with its
    copy: a test that changed the list it was given changed what every later test of the process
    was given from that copy."""
    def make() -> list[str]:
        (Path.cwd() / "made.txt").write_text("made\n")
        return ["D-1"]

    first = made_once(repo, ("test_helpers", "value"), make)
    first.append("D-2")
    second = made_once(_fresh_copy(repo_template, tmp_path / "second"), ("test_helpers", "value"), make)
    assert second == ["D-1"] and (tmp_path / "second" / "made.txt").read_text() == "made\n"
    second.append("D-3")
    third = made_once(_fresh_copy(repo_template, tmp_path / "third"), ("test_helpers", "value"), make)
    assert third == ["D-1"]
