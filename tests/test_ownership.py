"""Foreign configuration is not trusted: like git's safe.directory, drover refuses a drover.toml,
items folder or ledger another user owns, refuses outside a git repository, and finds the
repository git finds."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from drover.ledger.project import find_root
from helpers import drover, git, ledger_tables

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs uid 0")

OTHER = 65534  # nobody

# Each command a planted drover.toml could turn against the operator: one launches the agent,
# the others read or write the project; plain forms (run without click) and forms click parses.
COMMANDS = (("draft", "D-1"), ("list",), ("list", "--json"), ("new", "Planted"), ("new", "Planted", "--kind", "bug"),
            ("show", "D-1"), ("show", "D-1", "--json"))


def refused(done: subprocess.CompletedProcess) -> str:
    """The one-line, exit-2 refusal; returns the line."""
    assert done.returncode == 2, (done.args, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drover: "), done.stderr
    return lines[0]


def project_at(root: Path, marker: Path) -> None:
    """A drover project in `root` (a git repository) whose agent, if ever launched, writes `marker`;
    one item, D-1."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "commit", "-q", "--allow-empty", "-m", "initial")
    drover(root, "init", check=True)
    config = root / "drover.toml"
    text = config.read_text().replace('preset = "claude" ', 'preset = "script" ', 1)
    config.write_text(text.replace('command = ""  ', f'command = "touch {marker}"', 1))
    drover(root, "new", "First", check=True)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "drover init")


def give(path: Path, uid: int = OTHER) -> None:
    """`path` and everything under it to user `uid`."""
    os.chown(path, uid, uid)
    for folder, subfolders, files in os.walk(path):
        for name in subfolders + files:
            os.lchown(os.path.join(folder, name), uid, uid)


def snapshot(root: Path) -> dict[str, object]:
    """Every file under `root` but git's own, with its bytes, and the ledger's rows."""
    files = {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*"))
             if path.is_file() and ".git" not in path.parts and path.suffix not in (".db", ".db-wal", ".db-shm")}
    ledger = root / ".drover" / "ledger.db"
    return {"files": files, "ledger": ledger_tables(ledger) if ledger.exists() else None}


def trust(*values: str) -> None:
    """safe.directory entries in the global git config (the test's own, under its HOME)."""
    for value in values:
        subprocess.run(["git", "config", "--global", "--add", "safe.directory", value], check=True)


# --- the attack: another user's drover.toml above the operator's folder -----------------------


@pytest.mark.parametrize("with_git", [False, True], ids=["no repository", "their repository"])
def test_a_drover_toml_another_user_put_above_my_folder_is_never_used(tmp_path, with_git):
    theirs = tmp_path / "shared"
    marker = tmp_path / "marker"
    project_at(theirs, marker)
    if not with_git:
        shutil.rmtree(theirs / ".git")
    mine = theirs / "mine"
    mine.mkdir()
    give(theirs)
    os.chown(mine, 0, 0)
    before = snapshot(theirs)
    for args in COMMANDS:
        said = refused(drover(mine, *args))
        assert ("owned by another user" if with_git else "not inside a git repository") in said, args
    assert not marker.exists()
    assert snapshot(theirs) == before
    assert list(mine.iterdir()) == []


def test_safe_directory_lets_another_users_repository_through(tmp_path):
    theirs = tmp_path / "shared"
    project_at(theirs, tmp_path / "marker")
    give(theirs)
    assert "safe.directory" in refused(drover(theirs, "list"))
    trust(str(theirs))  # one setting for git and drover both
    listed = drover(theirs, "list")
    assert listed.returncode == 0 and "D-1" in listed.stdout, listed.stderr


# --- foreign files inside the operator's own repository ---------------------------------------


@pytest.fixture
def mine(tmp_path) -> Path:
    root = tmp_path / "mine"
    project_at(root, tmp_path / "marker")
    drover(root, "list", check=True)  # the ledger exists
    return root


@pytest.mark.parametrize("planted", ["drover.toml", "items", ".drover", ".drover/ledger.db"])
def test_a_file_or_folder_another_user_owns_in_my_project_is_refused(mine, tmp_path, planted):
    git(mine, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    give(mine / planted)
    before = snapshot(mine)
    for start in (mine, mine / "items", tmp_path / "wt"):
        for args in COMMANDS:
            said = refused(drover(start, *args))
            assert f"{mine / planted}: owned by another user (uid {OTHER})" in said, (start, args)
            assert f"safe.directory {mine}`" in said
    assert not (tmp_path / "marker").exists()
    assert snapshot(mine) == before


def test_the_trusted_list_is_read_as_git_reads_it(mine, monkeypatch):
    give(mine / "drover.toml")

    def lets_through(**env: str) -> bool:
        done = drover(mine, "list", env=env)
        assert done.returncode in (0, 2), done.stderr
        return done.returncode == 0

    assert not lets_through()
    # the repository cannot vouch for itself
    git(mine, "config", "--local", "safe.directory", "*")
    assert not lets_through()
    # the command line's scope counts, as git's own -c does
    assert lets_through(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0=str(mine))
    trust("*")
    assert lets_through()
    trust("")  # an empty value drops what came before
    assert not lets_through()
    trust(str(mine.parent / "elsewhere"))
    assert not lets_through()
    trust(f"{mine.parent}/*")
    assert lets_through()
    trust("", str(mine))
    assert lets_through()


def test_under_sudo_the_invoking_users_files_are_trusted_as_git_trusts_them(mine):
    give(mine / "drover.toml", 4242)
    assert drover(mine, "list", env={"SUDO_UID": "4242"}).returncode == 0
    assert "uid 4242" in refused(drover(mine, "list", env={"SUDO_UID": "4243"}))


def test_init_refuses_another_users_drover_toml_and_writes_nothing(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "drover.toml").write_text('[agent]\npreset = "script"\ncommand = "true"\n')
    give(root / "drover.toml")
    said = refused(drover(root, "init"))
    assert "drover.toml: owned by another user" in said
    assert sorted(path.name for path in root.iterdir()) == [".git", "drover.toml"]


# --- discovery: git's repository or none --------------------------------------------------------


def test_outside_a_repository_drover_refuses_rather_than_walk_up_to_a_drover_toml(mine, tmp_path):
    plain = tmp_path / "plain"
    (plain / "deep").mkdir(parents=True)
    shutil.copy(mine / "drover.toml", plain / "drover.toml")
    shutil.copytree(mine / "items", plain / "items")
    before = snapshot(plain)
    for start in (plain, plain / "deep"):
        for args in COMMANDS:
            assert "not inside a git repository" in refused(drover(start, *args)), args
    assert snapshot(plain) == before and not (plain / ".drover").exists()
    assert not (tmp_path / "marker").exists()


def test_git_ceiling_directories_and_git_dir_are_honoured(mine):
    deep = mine / "src"
    deep.mkdir()
    before = snapshot(mine)
    ceiling = refused(drover(deep, "new", "Planted", env={"GIT_CEILING_DIRECTORIES": str(mine)}))
    assert "not inside a git repository" in ceiling
    nowhere = refused(drover(deep, "list", env={"GIT_DIR": str(mine / "no-such")}))
    assert "not inside a git repository" in nowhere
    assert snapshot(mine) == before


def test_drover_repo_is_held_to_the_same_rules(mine, tmp_path):
    plain = tmp_path / "plain"
    shutil.copytree(mine, plain, ignore=shutil.ignore_patterns(".git"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert "not inside a git repository" in refused(drover(elsewhere, "list", env={"DROVER_REPO": str(plain)}))
    give(mine)
    said = refused(drover(elsewhere, "new", "Planted", env={"DROVER_REPO": str(mine)}))
    assert "owned by another user" in said and "safe.directory" in said
    assert len(list((mine / "items").iterdir())) == 1


HEADS: dict[str, bytes | str] = {  # bytes: HEAD's text; str: HEAD is a link to it
    "garbage": b"garbage\n",
    "no refs/": b"ref: heads/main\n",
    "a short id": b"0123abc\n",
    "a link outside refs/": "elsewhere",
    "a symbolic ref": b"ref: refs/heads/main\n",
    "a symbolic ref, no space": b"ref:refs/heads/main",
    "a commit id": b"0" * 40 + b"\n",
    "a SHA-256 id": b"a" * 64,
    "41 hex digits and more": b"B" * 41 + b"!",
    "a link into refs/": "refs/heads/main",
}


def test_a_nested_git_folder_is_a_repository_exactly_when_git_says_so(mine):
    for number, (said, head) in enumerate(HEADS.items()):
        sub = mine / f"vendor{number}"
        for folder in ("objects", "refs"):
            (sub / ".git" / folder).mkdir(parents=True)
        if isinstance(head, str):
            (sub / ".git" / "HEAD").symlink_to(head)
        else:
            (sub / ".git" / "HEAD").write_bytes(head)
        toplevel = Path(git(sub, "rev-parse", "--show-toplevel").strip())
        assert find_root(sub) == toplevel, said
        if toplevel == mine:  # git passes the broken .git by: so does drover, and works in `mine`
            made = drover(sub, "new", f"From {said}", check=True)
            assert (mine / "items" / f"{made.stdout.split()[0]}.md").is_file()
        else:
            assert toplevel == sub, said
            assert "no drover.toml in" in refused(drover(sub, "list")), said
