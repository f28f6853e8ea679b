"""Attributes an agent can set where no commit shows them: the shared `info/attributes` (and the
attributes file the repository's own config names) that git reads for every checkout, drover's
merges and a reviewer's diff included; read alone, and through a macro it defines for a name a
commit's `.gitattributes` sets (hostile reviews 32 to 36).
"""
from __future__ import annotations

import os
from pathlib import Path

from drover.git.run import failure, git, run


def shared_attributes(root: Path, paths: list[str], *names: str, named: str = "") -> dict[str, list[str]]:
    """path -> `name=value` for each of the attributes `names` that the repository's shared
    `info/attributes` gives it (`unset` for `-name`, `set` for `name`), for those of `paths` it gives
    any: what no `.gitattributes` of a commit or a checkout says, and every worktree's agent can write
    (git reads it for every checkout, drover's own merges and a reviewer's diff included). `named`:
    an attributes file read besides (the one the repository's config names: configured_attributes)."""
    import tempfile

    if not paths or not names:
        return {}
    with tempfile.TemporaryDirectory(prefix="drover-attributes-") as empty:
        # an empty work tree and no index: git reads no `.gitattributes` at all, only `info/attributes`
        # (and the system's file, which is no agent's to write); the user's file is off, `named` read instead
        read = _check_attr(root, ["-c", "core.attributesFile=" + (named or os.devnull), f"--work-tree={empty}"],
                           paths, names, {"GIT_INDEX_FILE": os.path.join(empty, "index")})
    found: dict[str, list[str]] = {}
    for path, name, value in read:
        if value != "unspecified":
            found.setdefault(path, []).append(f"{name}={value}")
    return found


def _check_attr(root: Path, options: list[str], paths: list[str], names: tuple[str, ...] | list[str],
                env_add: dict[str, str], cached: bool = False) -> list[tuple[str, str, str]]:
    """`git check-attr` of `names` for `paths` in `root` after git's `options`: (path, name, value)
    each. The paths on standard input: a branch adding 80,000 files passed the system's limit of a
    command line, and finish failed `git: Argument list too long` (hostile review 35)."""
    done = run([*options, "check-attr", *(["--cached"] if cached else []), "-z", "--stdin", *names], root,
               env_add=env_add, stdin="".join(path + "\0" for path in paths))
    if done.returncode != 0:
        raise failure(["check-attr"], done)  # git's words on one line, as every git failure
    fields = done.stdout.split("\0")
    return list(zip(fields[0::3], fields[1::3], fields[2::3]))


def changed_by_shared(root: Path, common: Path, commit: str, paths: list[str], name: str, *, named: str = "") -> list[str]:
    """Those of `paths` whose attribute `name` the repository's shared `info/attributes` changes, read
    with the `.gitattributes` files `commit` holds: once as git reads them beside the shared file,
    once in a scratch git folder without it (the same objects). A macro defined there (`[attr]text
    -diff`) acts through a name those files set (`*.txt text`), where the shared file read alone
    (shared_attributes) gives nothing (hostile review 36). `named`: an attributes file read besides
    (configured_attributes), in the first reading alone."""
    import tempfile

    if not paths:
        return []
    with tempfile.TemporaryDirectory(prefix="drover-attributes-") as scratch:
        index, bare = os.path.join(scratch, "index"), os.path.join(scratch, "bare")
        done = run(["read-tree", "--end-of-options", commit], root, env_add={"GIT_INDEX_FILE": index})
        if done.returncode != 0:
            raise failure(["read-tree"], done)
        git(["init", "-q", "--bare", "--template=", bare], Path(scratch))
        values = []
        for user, env in ((named or os.devnull, {"GIT_INDEX_FILE": index}),
                          (os.devnull, {"GIT_INDEX_FILE": index, "GIT_DIR": bare,
                                        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(common / "objects")})):
            read = _check_attr(root, ["-c", "core.attributesFile=" + user], paths, [name], env, cached=True)
            values.append({path: value for path, _, value in read})
    return [path for path in paths if values[0].get(path) != values[1].get(path)]


def configured_attributes(root: Path, git_dir: Path) -> str:
    """The attributes file (`core.attributesFile`) the repository's own config names, as git reads it
    (`~` expanded, a relative path from `root`), or "" when the name in force comes from elsewhere (the
    operator's global or system config, `-c`) or none is named. `.git/config` is the common folder's,
    which every worktree's agent can write, and the file it names is read by drover's merges as much
    as `info/attributes` (hostile review 34). No git is asked unless the config of `git_dir` (the
    main checkout's: `config`, `config.worktree`) could name one, directly or by an include."""
    text = b""
    for name in ("config", "config.worktree"):
        try:
            text += (git_dir / name).read_bytes().lower()
        except OSError:
            pass
    if b"attributesfile" not in text and b"include" not in text:
        return ""  # the usual case: no git asked
    done = run(["config", "--show-scope", "--type=path", "--get", "core.attributesFile"], root)
    scope, _, named = done.stdout.rstrip("\n").partition("\t")
    if done.returncode != 0 or scope not in ("local", "worktree") or not named:
        return ""
    return os.path.join(root, named)
