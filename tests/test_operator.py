"""The operator's day through the installed CLI on real repositories: init, help, forgiving ids,
worktree setup, intake, JSON output, completion, the demo."""
from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import tomllib
from pathlib import Path

import pytest

from helpers import BIN, configure, drover, gh_issue, git, ledger_rows, new_item


def ok(root: Path, *args: str, stdin: str | None = None) -> str:
    return drover(root, *args, stdin=stdin, check=True).stdout


def one_line_error(done: subprocess.CompletedProcess, code: int) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("drover: "), done.stderr
    return lines[0]


def set_key(root: Path, key: str, value: str) -> None:
    """Replace one `key = ...` line of the drover.toml init wrote."""
    path = root / "drover.toml"
    text, count = re.subn(rf"^{key} = .*$", lambda _: f"{key} = {value}", path.read_text(), count=1, flags=re.M)
    assert count == 1, key
    path.write_text(text)


# --- init ----------------------------------------------------------------------------------------


def test_init_outside_a_repository_refuses_and_writes_nothing(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    said = one_line_error(drover(folder, "init"), 2)
    assert "not inside a git repository" in said
    assert list(folder.iterdir()) == []


def test_init_agent_names_the_preset_and_says_what_to_install(repo):
    """`init --agent codex` writes the preset into the file init makes, and init says which agent
    it set and what to install when its program is not on PATH (the first run said it before)."""
    git_dir = Path(shutil.which("git") or "/usr/bin/git").parent
    if (git_dir / "codex").exists():
        pytest.skip(f"codex is installed beside git in {git_dir}")
    said = drover(repo, "init", "--agent", "codex", env={"PATH": str(git_dir)}, check=True).stdout
    assert tomllib.loads((repo / "drover.toml").read_text())["agent"]["preset"] == "codex"
    assert "agent: codex (codex is not installed: npm install -g @openai/codex)" in said.splitlines()
    written = (repo / "drover.toml").read_text()
    assert one_line_error(drover(repo, "init", "--agent", "aider"), 2) == (
        "drover: --agent aider: drover.toml exists already, and init leaves it as it is: set [agent] preset there")
    assert (repo / "drover.toml").read_text() == written


def test_init_agent_refuses_a_preset_it_does_not_know_writing_nothing(repo):
    before = sorted(path.name for path in repo.iterdir())
    said = one_line_error(drover(repo, "init", "--agent", "cladue"), 2)
    assert said.startswith("drover: --agent: no preset 'cladue': expected one of claude, codex,")
    assert sorted(path.name for path in repo.iterdir()) == before


def test_a_drover_repo_outside_any_repository_is_named_as_the_cause(repo, tmp_path):
    configure(repo)
    plain = tmp_path / "plain"
    plain.mkdir()
    said = one_line_error(drover(repo, "list", env={"DROVER_REPO": str(plain)}), 2)
    assert said == (f"drover: $DROVER_REPO is {plain}, which is not inside a git repository: unset it to use the "
                    "repository you are in, or point it at a repository's checkout")


def test_a_drover_repo_naming_a_worktree_or_a_subfolder_acts_on_the_main_checkout(repo, tmp_path):
    configure(repo)
    new_item(repo, "First")
    worktree = repo / ".drover" / "worktrees" / "D-1"
    git(repo, "worktree", "add", "-q", "-b", "drover/d-1", str(worktree))
    (repo / "src" / "deep").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for named in (worktree, repo / "src" / "deep"):
        listed = json.loads(drover(elsewhere, "list", "--json", env={"DROVER_REPO": str(named)}, check=True).stdout)
        assert [row["id"] for row in listed] == ["D-1"]
    made = drover(elsewhere, "new", "Second", env={"DROVER_REPO": str(worktree)}, check=True).stdout
    assert made.split()[:2] == ["D-2", "items/D-2.md"]
    assert (repo / "items" / "D-2.md").is_file()
    # no second ledger, no item written in the worktree's copy of the items folder
    assert not (worktree / ".drover").exists() and not (worktree / "items" / "D-2.md").exists()
    said = one_line_error(drover(elsewhere, "list", env={"DROVER_REPO": str(tmp_path / "gone")}), 2)
    assert said.startswith(f"drover: $DROVER_REPO is {tmp_path / 'gone'}, which is not a folder")


def test_init_takes_the_base_from_the_current_branch(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    git(root, "init", "-q", "-b", "master")
    git(root, "commit", "-q", "--allow-empty", "-m", "first")
    out = ok(root, "init")
    assert 'base = "master"' in (root / "drover.toml").read_text()
    assert "base branch: master" in out
    steps = out[out.index("next steps:"):]
    assert "git add drover.toml .gitignore" in steps
    assert "drover new" in steps and "drover run --dry-run D-1" in steps
    assert "git add items/ && git commit" in steps  # the items are the operator's to commit: one clean would lose them
    assert "drover help configuration" in steps
    assert "docs/configuration.md" not in (root / "drover.toml").read_text()
    assert "drover help configuration" in (root / "drover.toml").read_text()


def test_init_prefers_origin_head(tmp_path):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "trunk")
    git(upstream, "commit", "-q", "--allow-empty", "-m", "first")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    git(clone, "switch", "-q", "-c", "topic")
    ok(clone, "init")
    assert 'base = "trunk"' in (clone / "drover.toml").read_text()


def test_init_passes_over_an_origin_head_the_clone_has_no_branch_of(tmp_path):
    """`git clone -b develop` of a project published from master (git-flow's layout): origin/HEAD
    names master, which the clone has no branch of. init wrote `base = "master"`, and `drover
    check` then refused it (`no branch 'master' in this repository`); the branch checked out is
    the one the clone works from."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    git(upstream, "commit", "-q", "--allow-empty", "-m", "first")
    git(upstream, "branch", "develop")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "-b", "develop", str(upstream), str(clone))
    assert git(clone, "symbolic-ref", "refs/remotes/origin/HEAD").strip() == "refs/remotes/origin/master"
    out = ok(clone, "init")
    assert 'base = "develop"' in (clone / "drover.toml").read_text()
    assert "base branch: develop" in out


def test_init_on_a_detached_head_falls_back_to_an_existing_master(tmp_path):
    root = tmp_path / "lib"
    root.mkdir()
    git(root, "init", "-q", "-b", "master")
    git(root, "commit", "-q", "--allow-empty", "-m", "first")
    git(root, "checkout", "-q", "--detach")
    ok(root, "init")
    assert 'base = "master"' in (root / "drover.toml").read_text()


# --- help ----------------------------------------------------------------------------------------

TOPICS = ("configuration", "templates", "fields", "agents", "trackers", "items")


@pytest.mark.parametrize("topic", TOPICS)
def test_help_prints_each_reference_page(repo, topic):
    """The docs page as shipped, but for the cog machinery of its generated tables (a new user's
    `drover help configuration` showed `<!-- [[[cog`, `import cog, docgen` and `<!-- [[[end]]] -->`
    around each table): the tables themselves stay."""
    out = ok(repo, "help", topic)
    shipped = (Path(__file__).resolve().parents[1] / "docs" / f"{topic}.md").read_text(encoding="utf-8")
    kept, in_cog = [], False
    for line in shipped.splitlines(keepends=True):
        if line == "<!-- [[[cog\n":
            in_cog = True
        elif not in_cog and line != "<!-- [[[end]]] -->\n":
            kept.append(line)
        in_cog = in_cog and line != "]]] -->\n"
    assert out == "".join(kept)
    assert "[[[" not in out and "]]]" not in out


def test_help_keeps_the_generated_tables_of_a_page(repo):
    out = ok(repo, "help", "configuration")
    assert "| key | default | meaning |" in out and "drover: drover.toml: [review] max_rouns: unknown key" in out


def test_help_lists_topics_names_commands_and_suggests(repo):
    listing = ok(repo, "help")
    for topic in TOPICS:
        assert f"  {topic}\n" in listing
    assert "Usage: drover new" in ok(repo, "help", "new")
    said = one_line_error(drover(repo, "help", "configuraton"), 2)
    assert "did you mean configuration?" in said


def test_top_level_help_is_grouped_and_each_command_has_an_example(repo):
    out = ok(repo, "--help")
    order = [out.index(title + ":") for title in ("Set up", "Items", "The loop", "Review verbs", "Inspection")]
    assert order == sorted(order)
    assert out.index("  init") < out.index("Items:") < out.index("  new ") < out.index("The loop:")
    import click

    from drover.cli.main import cli

    for name in cli.list_commands(click.Context(cli)):
        assert "Example: " in ok(repo, name, "--help"), name


# --- ids ------------------------------------------------------------------------------------------


@pytest.fixture
def project(repo):
    configure(repo)
    return repo


@pytest.mark.parametrize("spelling", ["D-2", "d-2", "D2", "2", "#2", "d2"])
def test_every_command_accepts_the_forgiving_spellings(project, spelling):
    for title in ("one", "two"):
        new_item(project, title)
    assert json.loads(ok(project, "show", spelling, "--json"))["id"] == "D-2"
    ok(project, "park", spelling, "--why", "a question")
    ok(project, "unpark", spelling)
    assert ok(project, "prompt", spelling, "--slot", "branch") == "drover/d-2\n"


def test_a_missing_item_suggests_the_nearest(project):
    for title in ("one", "two"):
        new_item(project, title)
    assert one_line_error(drover(project, "show", "D-13"), 2) == "drover: no item D-13 (did you mean D-2?)"
    assert one_line_error(drover(project, "run", "3"), 2) == "drover: no item D-3 (did you mean D-2?)"
    said = one_line_error(drover(project, "request-changes", "D-9"), 2)
    assert said == "drover: no item D-9 (did you mean D-2?)"  # before any word about missing findings


def test_new_refuses_unknown_deps_and_findings_writing_nothing(project):
    new_item(project, "one")
    before = sorted(path.name for path in (project / "items").iterdir())
    assert "no item D-99" in one_line_error(drover(project, "new", "x", "--dep", "D-99"), 2)
    assert "no item D-9" in one_line_error(drover(project, "new", "x", "--finding", "D-9"), 2)
    assert sorted(path.name for path in (project / "items").iterdir()) == before
    assert ok(project, "new", "y", "--dep", "1", "-f", "#1").split()[0] == "D-2"


def test_round_headlines_drop_list_markers_and_hashes(project):
    item = new_item(project, "one")
    ok(project, "request-changes", item, stdin="- Requirement 2 is not met\n- and more\n")
    ok(project, "request-changes", item, stdin="## 3. Parser drops keys\n")
    rounds = json.loads(ok(project, "show", item, "--json"))["rounds"]
    assert [row["headline"] for row in rounds] == ["Requirement 2 is not met", "Parser drops keys"]


def test_a_round_headline_of_a_findings_line_of_megabytes_is_cut_where_it_is_stored_and_shown(project):
    """Findings may be 1 MB on one line: the round's headline, its first line, was stored and
    printed whole by request-changes and by every `show`, a megabyte of a terminal per round. It is
    cut at 200 characters; the item's Changes section keeps the findings whole."""
    item = new_item(project, "one")
    long_line = "## " + "x" * 900_000 + "\n"
    said = ok(project, "request-changes", item, stdin=long_line)
    assert f"headline: {'x' * 199}…\n" in said and len(said) < 1_000, len(said)
    assert [row["headline"] for row in ledger_rows(project, "rounds", "number")] == ["x" * 199 + "…"]
    shown = ok(project, "show", item)
    assert f"  1. {'x' * 199}…  (" in shown and len(shown) < 2_000, len(shown)
    assert "x" * 900_000 in (project / "items" / f"{item}.md").read_text()


# --- [run] setup ----------------------------------------------------------------------------------


def test_setup_runs_once_per_new_worktree_into_the_runs_log(project):
    set_key(project, "setup", '"echo setting-up; echo built > built.txt"')
    item = new_item(project, "one")
    assert "setup: echo setting-up" in ok(project, "run", item, "--dry-run")
    ok(project, "run", item)
    worktree = project / ".drover" / "worktrees" / item
    assert (worktree / "built.txt").read_text() == "built\n"
    assert f"  worktree: .drover/worktrees/{item}" in ok(project, "show", item).splitlines()
    logs = sorted((project / ".drover" / "runs").glob("*/agent.log"))
    assert len(logs) == 1 and "setting-up" in logs[0].read_text()
    (worktree / "built.txt").unlink()
    drover(project, "run", item)  # the second launch in the same worktree: no setup
    assert not (worktree / "built.txt").exists()
    logs = sorted((project / ".drover" / "runs").glob("*/agent.log"))
    assert len(logs) == 2 and sum("setting-up" in log.read_text() for log in logs) == 1


NPM_10 = """npm error code EUSAGE
npm error
npm error `npm ci` can only install packages when your package.json and package-lock.json are in sync.
npm error
"""
NPM_9 = """npm ERR! code ENOENT
npm ERR! syscall open
npm ERR! enoent ENOENT: no such file or directory, open '/w/package.json'
npm ERR! enoent This is related to npm not being able to find a file.
npm ERR! enoent
npm ERR! A complete log of this run can be found in:
npm ERR!     /root/.npm/_logs/2026-12-07T13_30_00_000Z-debug-0.log
"""


@pytest.mark.parametrize("output, quoted", [
    (NPM_10, "npm error code EUSAGE / npm error `npm ci` can only install packages when your package.json and "
             "package-lock.json are in sync."),
    (NPM_9, "npm ERR! enoent This is related to npm not being able to find a file. / npm ERR! A complete log of "
            "this run can be found in: / npm ERR! /root/.npm/_logs/2026-12-07T13_30_00_000Z-debug-0.log"),
], ids=["npm-10", "npm-9"])
def test_a_failing_npm_setup_is_quoted_by_what_it_said_not_its_bare_prefix(project, output, quoted):
    """The failure quoted the set-up's last line, and npm ends with a bare `npm error` (npm 10) or the
    path of its own log (npm 9): the line said `exit 1: npm error`. It now quotes the last lines that
    say more than the words the others begin with, up to three within 200 characters."""
    (project / "fake-npm.sh").write_text(f"cat <<'EOF'\n{output}EOF\nexit 1\n")
    git(project, "add", "fake-npm.sh")
    git(project, "commit", "-q", "-m", "a set-up that fails as npm does")
    set_key(project, "setup", '"sh fake-npm.sh"')
    item = new_item(project, "one")
    said = one_line_error(drover(project, "run", item), 1)
    assert said.startswith(f"drover: {item}: [run] setup failed (exit 1: {quoted}); log: "), said


def test_the_setup_quote_keeps_its_last_line_whole_before_the_lines_above_it(tmp_path):
    from drover.loop.worktree_setup import SAID_CHARS, last_said

    log = tmp_path / "agent.log"
    log.write_text("$ setup\n" + "".join(f"line {number} {'x' * 50}\n" for number in range(5)))
    said = last_said(log, len("$ setup\n"))
    assert said == " / ".join(f"line {number} {'x' * 50}" for number in (2, 3, 4))  # three at most
    log.write_text("$ setup\n" + "a" * 150 + "\n" + "b" * 60 + "\n")
    assert last_said(log, 8) == "b" * 60  # the two would pass SAID_CHARS: the last alone
    log.write_text("$ setup\nfirst\n" + "c" * 300 + "\n")
    assert last_said(log, 8) == "c" * (SAID_CHARS - 1) + "…"
    log.write_text("$ setup\n\n  \n")
    assert last_said(log, 8) == ""


def test_a_failing_setup_stops_before_the_agent(project):
    set_key(project, "setup", '"echo no-network; exit 3"')
    item = new_item(project, "one")
    said = one_line_error(drover(project, "run", item), 1)
    match = re.fullmatch(rf"drover: {item}: \[run\] setup failed \(exit 3: no-network\); log: (\S+)", said)
    assert match, said
    assert "no-network" in (project / match.group(1)).read_text()
    # the agent never started (no pid), and the run that could not start is on record, with the
    # setup's log, so list, show and the report say what happened (not a ready item and no run)
    conn = sqlite3.connect(project / ".drover" / "ledger.db")
    (row,) = conn.execute("SELECT pid, outcome, reason, log_path FROM runs").fetchall()
    conn.close()
    assert row == (None, "failed to start", f"[run] setup failed (exit 3: no-network); log: {match.group(1)}",
                   match.group(1))
    shown = json.loads(drover(project, "show", item, "--json").stdout)
    assert shown["state"] == "failed" and "failed to start" in shown["reason"]
    # show's run line says why the run never started: the setup's line, its log named
    shown_text = drover(project, "show", item).stdout
    assert f"    why: [run] setup failed (exit 3: no-network); log: {match.group(1)}\n" in shown_text


def test_the_setup_done_marker_is_never_written_through_a_link(project, tmp_path):
    """The worktree's private git folder is the agent's to write: a link left there as the set-up's
    done marker, naming a file that does not exist, had the next set-up's success create that file
    (drover's write followed the link) wherever the operator's user can write (hostile review 49)."""
    allowed = tmp_path / "setup-may-pass"
    set_key(project, "setup", json.dumps(f"[ -e {allowed} ] || exit 3"))
    item = new_item(project, "one")
    one_line_error(drover(project, "run", item), 1)  # the set-up failed: no marker yet
    worktree = project / ".drover" / "worktrees" / item
    private = Path(git(worktree, "rev-parse", "--absolute-git-dir").strip())
    planted = tmp_path / "elsewhere" / "planted"
    planted.parent.mkdir()
    (private / "drover-setup-done").symlink_to(planted)
    allowed.touch()
    assert drover(project, "run", item).returncode == 0
    assert not planted.exists()
    assert not (private / "drover-setup-done").is_symlink()
    assert drover(project, "run", item).returncode == 0  # set up once: the marker counts


def test_a_failed_setup_quotes_its_last_line_printable_and_short(project):
    # npm's reason comes last but one, then blank lines; an escape in it shows as `?`, a tab folds;
    # a long line is cut; a set-up that said nothing says so
    script = project / "setup.sh"
    script.write_text("printf 'added 3 packages\\n'\n"
                      "printf 'npm ci can only install \\033[31mpackages\\tin sync %s\\n\\n  \\n' "
                      "$(printf 'x%.0s' $(seq 1 300))\n"
                      "exit 1\n")
    set_key(project, "setup", '"sh setup.sh"')
    git(project, "add", "setup.sh")
    git(project, "commit", "-qm", "setup script")
    item = new_item(project, "one")
    said = one_line_error(drover(project, "run", item), 1)
    match = re.fullmatch(rf"drover: {item}: \[run\] setup failed \(exit 1: (.*)\); log: (\S+)", said)
    assert match, said
    quoted = match.group(1)
    assert quoted.startswith("npm ci can only install ?[31mpackages in sync xxx") and quoted.endswith("x…"), quoted
    assert len(quoted) == 200, len(quoted)
    # drive says the same, in its progress and its summary
    set_key(project, "setup", '"exit 4"')
    other = new_item(project, "two")
    done = drover(project, "drive", other)
    assert f"{other}: stopped: [run] setup failed (exit 4: it printed nothing); log: " in done.stdout + done.stderr, \
        (done.stdout, done.stderr)


def test_bidi_controls_an_agent_wrote_show_as_question_marks(project):
    # hostile review 38: a set-up's last line (the branch's package.json or Makefile prints it) with
    # U+202E, and a title and a park reason with U+2066 and U+200F: on a terminal that orders text both
    # ways each reordered the rest of its line, drover's own words after it ("; log: ...", the note)
    script = project / "setup.sh"
    script.write_text("printf 'npm ERR! \\342\\200\\256deliaf\\n'\nexit 1\n")
    set_key(project, "setup", '"sh setup.sh"')
    git(project, "add", "setup.sh")
    git(project, "commit", "-qm", "setup script")
    item = new_item(project, "one \u2066two\u200f")
    said = one_line_error(drover(project, "run", item), 1)
    assert re.fullmatch(rf"drover: {item}: \[run\] setup failed \(exit 1: npm ERR! \?deliaf\); log: \S+", said), said
    ok(project, "park", item, "--why", "ask \u202eme")
    listed = ok(project, "list")
    assert f"{item}  parked             one ?two?  (ask ?me)" in listed, listed
    shown = ok(project, "show", item)
    assert "\u202e" not in shown and "\u2066" not in shown and "one ?two?" in shown, shown


# --- intake: new --issue ------------------------------------------------------------------------

def use_tracker(root: Path, backend: str, extra: str = "") -> None:
    set_key(root, "backend", f'"{backend}"')
    if extra:
        path = root / "drover.toml"
        text = path.read_text()
        header = text.index("\n", text.index("[tracker.kinds]")) + 1
        path.write_text(text[:header] + extra + text[header:])


def test_new_from_a_github_issue(project, gh):
    use_tracker(project, "github", '"needs-triage" = "triage"\n')  # added to [tracker.kinds]
    gh.answer("issue-view-42", gh_issue(42, "Parser drops unknown keys", "Steps:\n- load a file\n\nIt crashes.",
                                       labels=("needs-triage", "bug")))
    made = json.loads(ok(project, "new", "--issue", "42", "--json"))
    assert made == {"id": "D-1", "path": "items/D-1.md", "title": "Parser drops unknown keys", "kind": "triage",
                    "deps": [], "finding": None, "origin": 42}
    text = (project / "items" / "D-1.md").read_text()
    assert "origin: 42\n" in text
    assert "> Steps:\n> - load a file\n>\n> It crashes.\n" in text
    assert "https://github.com/acme/widgets/issues/42" in text
    assert ["issue", "view", "42"] == gh.calls()[0][:3]
    # the same issue again names the item that has it instead of making a second
    said = one_line_error(drover(project, "new", "--issue", "#42"[1:]), 1)
    assert said == "drover: issue #42 already has an item: D-1 (items/D-1.md)"
    assert sorted(path.name for path in (project / "items").iterdir()) == ["D-1.md"]


def test_new_from_an_issue_takes_the_kind_from_default_labels(project, gh):
    use_tracker(project, "github")
    gh.answer("issue-view-7", gh_issue(7, "Crash on empty file", "", labels=("bug",)))
    assert json.loads(ok(project, "new", "--issue", "7", "--json"))["kind"] == "bug"
    gh.answer("issue-view-8", gh_issue(8, "Speak French", "", labels=("wontfix",)))
    assert json.loads(ok(project, "new", "--issue", "8", "--json"))["kind"] == "feature"
    gh.fail("issue-view-9", "GraphQL: Could not resolve to an issue with the number of 9.")
    said = one_line_error(drover(project, "new", "--issue", "9"), 2)
    assert said.startswith("drover: issue #9: ") and "Could not resolve" in said


def test_new_from_a_closed_issue_says_it_is_closed(project, gh):
    """An item made from an issue someone closed already, a typo for the open one as likely as not:
    made as asked, and the issue said to be closed, on stderr after the id."""
    use_tracker(project, "github")
    gh.answer("issue-view-45", gh_issue(45, "Fixed long ago", "", state="CLOSED"))
    gh.answer("issue-view-46", gh_issue(46, "Still open", ""))
    done = drover(project, "new", "--issue", "45")
    assert done.returncode == 0 and done.stdout == "D-1 items/D-1.md\n", done.stdout + done.stderr
    assert done.stderr == ("drover: warning: issue #45 (https://github.com/acme/widgets/issues/45) is closed: "
                           "D-1 is made from it all the same\n")
    done = drover(project, "new", "--issue", "46")
    assert done.returncode == 0 and done.stdout == "D-2 items/D-2.md\n" and done.stderr == ""


def test_new_from_a_register_row(project):
    use_tracker(project, "file")
    (project / "follow-ups.md").write_text("# Follow-ups\n\n- [ ] D-9: Cache the parsed config\n")
    made = json.loads(ok(project, "new", "--issue", "3", "--json"))
    assert made["title"] == "Cache the parsed config" and made["origin"] == 3
    assert "From the register row follow-ups.md:3, as it read at intake:\n\n> Cache the parsed config\n" in (project / "items" / "D-1.md").read_text()


def test_new_from_an_issue_without_a_tracker_is_one_line(project):
    said = one_line_error(drover(project, "new", "--issue", "42"), 2)
    assert "[tracker] backend" in said
    assert not any((project / "items").iterdir())


# --- --json on every reporting command -------------------------------------------------------------


def test_list_state_filters_repeatably(project):
    for title in ("one", "two", "three"):
        new_item(project, title)
    ok(project, "park", "D-2", "--why", "a question")
    ok(project, "request-changes", "D-3", stdin="fix it\n")
    rows = json.loads(ok(project, "list", "--state", "parked", "--state", "changes requested", "--json"))
    assert [(row["id"], row["state"]) for row in rows] == [("D-2", "parked"), ("D-3", "changes requested")]
    assert ok(project, "list", "--state", "ready").split() == ["D-1", "ready", "one"]
    assert "Invalid value for '--state'" in one_line_error(drover(project, "list", "--state", "sleeping"), 2)


def test_check_json_gives_code_path_line_and_message(project):
    new_item(project, "one")
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [unclosed\n---\nbody\n")
    (project / "items" / "D-3.md").write_text("---\nid: D-3\ntitle: three\ndeps: [D-9, D-2, x]\n---\nbody\n")
    done = drover(project, "check", "--json")
    assert done.returncode == 1
    report = json.loads(done.stdout)
    assert report["ok"] is False
    by_code = {problem["code"]: problem for problem in report["problems"]}
    assert by_code["item-unreadable"]["path"] == "items/D-2.md" and by_code["item-unreadable"]["line"]
    assert by_code["dep-missing"]["path"] == "items/D-3.md"
    assert by_code["dep-unreadable"]["path"] == by_code["dep-not-an-id"]["path"] == "items/D-3.md"
    assert by_code["item-unreadable"]["message"].startswith("items/D-2.md:")
    assert all(set(problem) == {"code", "severity", "path", "line", "message"} for problem in report["problems"])
    assert all(problem["severity"] in ("error", "warning") for problem in report["problems"])
    (project / "items" / "D-2.md").unlink()
    (project / "items" / "D-3.md").unlink()
    clean = json.loads(ok(project, "check", "--json"))
    assert clean["ok"] is True and all(problem["severity"] == "warning" for problem in clean["problems"])


def test_prompt_json_carries_text_provenance_hashes_and_tokens(project):
    item = new_item(project, "one")
    report = json.loads(ok(project, "prompt", item, "--slot", "implement", "--json"))
    assert report["text"] == ok(project, "prompt", item, "--slot", "implement")
    assert report["id"] == item and report["slot"] == "implement"
    assert report["template"]["resolved"].startswith("builtin")
    import hashlib

    assert report["template"]["prompt_sha256"] == hashlib.sha256(report["text"].encode()).hexdigest()
    assert report["tokens"] == (len(report["text"]) + 3) // 4
    assert json.loads(ok(project, "prompt", item, "--slot", "branch", "--json"))["text"] == "drover/d-1"


@pytest.mark.parametrize("command, slot", [("run", "implement"), ("review", "review"), ("draft", "draft")])
def test_dry_run_json_describes_the_launch_and_writes_nothing(project, command, slot):
    item = new_item(project, "one")
    refs = git(project, "for-each-ref")
    report = json.loads(ok(project, command, item, "--dry-run", "--json"))
    assert report["slot"] == slot and report["id"] == item
    assert report["argv"][-1].endswith("loop_agent.py")
    assert report["env"]["DROVER_ITEM"] == item and report["env"]["DROVER_SLOT"] == slot
    assert report["prompt"] == ok(project, "prompt", item, "--slot", slot)
    if slot == "draft":
        assert (report["branch"], report["cwd"], report["worktree"]) == (None, ".", False)
    else:
        assert (report["branch"], report["cwd"], report["worktree"]) == ("drover/d-1", ".drover/worktrees/D-1", True)
    assert git(project, "for-each-ref") == refs
    assert not (project / ".drover" / "runs").exists() or not any((project / ".drover" / "runs").iterdir())
    assert "--json goes with --dry-run" in one_line_error(drover(project, command, item, "--json"), 2)


def test_drive_and_finish_json(project):
    item = new_item(project, "one")
    done = drover(project, "drive", item, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"items": [{"id": item, "result": "approved", "approved": True, "rounds": 1, "runs": 4,
                                 "note": report["items"][0]["note"], "failures": []}], "approved": 1, "finished": 0,
                      "total": 1, "ok": True, "problems": []}
    assert f"{item}: implement" in done.stderr  # progress goes to stderr, leaving stdout to the JSON
    finished = json.loads(ok(project, "finish", item, "--json"))
    assert finished["id"] == item and finished["ok"] is True and finished["problems"] == []
    assert any("merged" in line for line in finished["lines"])
    assert json.loads(ok(project, "show", item, "--json"))["done"] is True


# --- completion and the demo ---------------------------------------------------------------------


@pytest.mark.parametrize("shell, marker", [("bash", "complete -o nosort -F"), ("zsh", "#compdef drover"),
                                           ("fish", "complete --no-files --command drover")])
def test_completion_prints_each_shells_script(repo, shell, marker):
    assert marker in ok(repo, "completion", shell)
    assert "Invalid value" in one_line_error(drover(repo, "completion", "tcsh"), 2)


def test_completion_offers_item_ids_commands_and_slots(project):
    for title in ("one", "two"):
        new_item(project, title)

    def complete(words: str) -> list[str]:
        env = {"_DROVER_COMPLETE": "bash_complete", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1
                                                                                        + words.endswith(" "))}
        out = drover(project, env=env).stdout
        return [line.split(",", 1)[1] for line in out.splitlines()]

    assert complete("drover show ") == ["D-1", "D-2"]
    assert complete("drover show d") == ["D-1", "D-2"]
    assert "request-changes" in complete("drover req")
    assert complete("drover prompt D-1 --slot ") == ["implement", "review", "draft", "branch"]
    assert "scope" in complete("drover override implement sc")


def test_python_m_drover_demo_help_prints_help_and_builds_nothing(tmp_path):
    done = subprocess.run([str(BIN / "python"), "-m", "drover.cli.demo", "--help"], cwd=tmp_path, text=True,
                          capture_output=True)
    assert done.returncode == 0 and done.stdout.startswith("usage: python -m drover.cli.demo")
    assert list(tmp_path.iterdir()) == []


def test_the_demo_builds_its_own_project_whatever_drover_repo_names(project, tmp_path, monkeypatch):
    """An agent's environment names its project in $DROVER_REPO: `drover demo` called there (or by an
    operator who exported it) ran its init against that project, then failed on the drover.toml it
    never wrote in the demo's folder (hostile review 42)."""
    from drover.cli.demo import build_project

    monkeypatch.setenv("DROVER_REPO", str(project))
    before = {path: path.read_bytes() for path in project.rglob("*") if path.is_file() and ".git" not in path.parts}
    folder = tmp_path / "demo"
    build_project(folder)
    assert (folder / "drover.toml").is_file()
    assert sorted(path.name for path in (folder / "items").iterdir()) == ["D-1.md", "D-2.md", "D-3.md"]
    after = {path: path.read_bytes() for path in project.rglob("*") if path.is_file() and ".git" not in path.parts}
    assert after == before


def test_drover_demo_drives_three_items_with_fitting_findings(demo_run, tmp_path):
    ran, done = demo_run  # `drover demo`, run once for the whole test run
    folder = tmp_path / "demo"
    shutil.copytree(ran, folder, symlinks=True)
    assert done.returncode == 0, done.stdout + done.stderr
    rounds, notes = {}, {}
    for item in ("D-1", "D-2", "D-3"):
        shown = json.loads(ok(folder, "show", item, "--json"))
        assert shown["done"] is True, item
        rounds[item] = [row["headline"] for row in shown["rounds"]]
        notes[item] = [row["note"] for row in shown["audits"]]
    assert rounds == {"D-1": ["Empty names slip through"], "D-2": ["The loud greeting is not loud"],
                      "D-3": ["Goodbye ignores surrounding whitespace"]}
    assert "Blank names" in notes["D-1"][0] and "HELLO, ADA!!" in notes["D-2"][0] and "stripped" in notes["D-3"][0]
    assert "upper()" in (folder / "greet" / "d_2.py").read_text()


def test_colour_follows_color_and_no_color(project):
    new_item(project, "one")
    assert "\x1b[36mready\x1b[0m" in ok(project, "--color", "always", "list")
    assert "\x1b[" not in ok(project, "--color", "never", "list")
    assert "\x1b[" not in ok(project, "list")  # a pipe, not a terminal
    assert "\x1b[" not in drover(project, "list", env={"NO_COLOR": "1", "FORCE_COLOR": "1"}).stdout
    assert "\x1b[36m" in drover(project, "list", env={"FORCE_COLOR": "1"}).stdout


def test_block_and_preset_completers_offer_known_names():
    from drover.cli.parts import complete_blocks, complete_presets

    blocks = [item.value for item in complete_blocks(None, None, "implement:")]
    assert "implement:scope" in blocks and all(name.startswith("implement:") for name in blocks)
    assert "implement:scope" in [item.value for item in complete_blocks(None, None, "sco")]
    offered = [item.value for item in complete_presets(None, None, "c")]
    assert {"claude", "codex"} <= set(offered) and all(name.startswith("c") for name in offered)
    assert "aider" not in offered


def test_a_refused_drive_json_prints_ok_false_with_the_refusal_as_finish_does(project):
    new_item(project, "one")
    (project / "items" / "D-2.md").write_text("---\nid: D-2\ntitle: [unclosed\n---\n")
    for args, shape in (((), {"items": [], "approved": 0, "finished": 0, "total": 0}),
                        (("--dry-run",), {"dry_run": True, "items": []})):
        done = drover(project, "drive", "--json", *args)
        assert done.returncode == 1, done.stderr
        report = json.loads(done.stdout)  # stdout under --json is one JSON document, a refusal's too
        problem = report.pop("problems")
        assert report == {**shape, "ok": False}
        assert len(problem) == 1 and problem[0].startswith("drive: `drover check` reports 1 error")
        assert problem[0].splitlines()[1].strip().startswith("items/D-2.md:3: D-2 will not parse")
    assert not (project / ".drover" / "runs").exists() or not any((project / ".drover" / "runs").iterdir())


def test_driving_an_item_done_already_is_nothing_to_do_not_a_failure(project):
    item = new_item(project, "one")
    assert drover(project, "drive", item, "--finish").returncode == 0
    done = drover(project, "drive", item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"nothing to drive: {item} is done"
    assert re.search(rf"^{item}\s+skipped\s+1\s+4\s+done$", done.stdout, re.M)
    report = json.loads(drover(project, "drive", item, "--json", check=True).stdout)
    assert (report["ok"], report["items"][0]["result"], report["items"][0]["note"]) == (True, "skipped", "done")
    # beside an item that still fails, the count weighs only the driven one, and the exit is 1
    other = new_item(project, "two")
    drover(project, "park", other, "--why", "by hand", check=True)
    mixed = drover(project, "drive", item, other)
    assert mixed.returncode == 1 and "0 of 1 approved" in mixed.stdout


def test_a_dry_run_of_an_item_done_or_parked_says_it_would_be_skipped_as_the_drive_does(project):
    """drive --dry-run ID said `implement and review would run` of a done or parked item, which the
    drive itself lists as skipped without a run."""
    item = new_item(project, "one")
    assert drover(project, "drive", item, "--finish").returncode == 0
    other = new_item(project, "two")
    drover(project, "park", other, "--why", "by hand", check=True)
    plan = drover(project, "drive", item, other, "--dry-run", check=True).stdout
    assert f"  {item}: would be skipped: done\n" in plan
    assert f"  {other}: would be skipped: parked (by hand)\n" in plan and "would run" not in plan
    steps = json.loads(drover(project, "drive", item, other, "--dry-run", "--json", check=True).stdout)["items"]
    assert [(step["id"], step["next"]) for step in steps] == [(item, "skip"), (other, "skip")]


def test_a_template_path_from_a_subfolder_that_does_not_read_says_the_path_is_the_roots(project):
    item = new_item(project, "one")
    here = project / "sub" / "deep"
    here.mkdir(parents=True)
    (here / "x.tmpl").write_text("<% block done %>\n- mine\n<% endblock %>\n")
    for command in (("prompt", item), ("run", item, "--dry-run"), ("prompt", item, "--slot", "branch")):
        done = drover(here, *command, "--template", "@x.tmpl")
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == ("drover: x.tmpl: cannot read the template: No such file or directory (an @path is "
                               "relative to the repository root, not to sub/deep/; the file here is @sub/deep/x.tmpl)\n")
    outside = drover(here, "prompt", item, "--template", "@../x.tmpl")
    assert outside.returncode == 2
    assert outside.stderr == ("drover: ../x.tmpl: refused: the template path resolves outside the repository (an @path "
                              "is relative to the repository root, not to sub/deep/)\n")
    assert "- mine" in drover(here, "prompt", item, "--template", "@sub/deep/x.tmpl", check=True).stdout
    # from the root the path is the one given, and the message as it was
    assert drover(project, "prompt", item, "--template", "@x.tmpl").stderr == \
        "drover: x.tmpl: cannot read the template: No such file or directory\n"
