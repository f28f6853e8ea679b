"""Acceptance: flows that cross modules, through the real CLI, as a new user meets them.

Each test drives `drover` as a subprocess on a real git repository: the github tracker end to
end with the fake gh, the file register in a prompt, the repository-templates switch, the
template provenance a run records, and every line format `drover check` prints (SPEC 8.4).
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

from helpers import git
from drover.prompts import load_history
from helpers import BIN, configure, drover, gh_issue, ledger_rows, new_item

KICKOFF = "docs-internal/kickoff.tmpl"
REVIEW = "docs-internal/review.tmpl"
DRAFT = "docs-internal/draft.tmpl"


def edit_config(root: Path, old: str, new: str) -> None:
    """Replace the first `old` in drover.toml (it must be there) and commit the change."""
    path = root / "drover.toml"
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
    commit(root, "configure")


def commit(root: Path, message: str) -> None:
    git(root, "add", "-A")
    if git(root, "status", "--porcelain").strip():
        git(root, "commit", "-q", "-m", message)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def use_kickoff(root: Path, text: str) -> None:
    """`text` as the implement slot's override file, KICKOFF, named in drover.toml (committed)."""
    write(root, KICKOFF, text)
    edit_config(root, 'implement = ""', f'implement = "{KICKOFF}"')


def set_frontmatter(root: Path, item: str, lines: str) -> None:
    """Add frontmatter lines after `deps:` of an item written by `drover new`, and commit."""
    path = root / "items" / f"{item}.md"
    text = path.read_text()
    deps = re.search(r"^deps: .*$", text, re.MULTILINE)
    assert deps, text
    path.write_text(text[: deps.end()] + "\n" + lines.rstrip("\n") + text[deps.end():])
    commit(root, f"frontmatter of {item}")


def shown(root: Path, item: str) -> dict:
    return json.loads(drover(root, "show", item, "--json", check=True).stdout)


def prompt(root: Path, item: str, slot: str, *extra: str, env: dict | None = None) -> str:
    return drover(root, "prompt", item, "--slot", slot, *extra, env=env, check=True).stdout


def blocks() -> dict[str, dict]:
    """`drover schema --prompts`, keyed by "slot/block"."""
    listed = json.loads(drover(Path.cwd(), "schema", "--prompts", check=True).stdout)
    return {f"{entry['slot']}/{entry['block']}": entry for entry in listed}


def dry_prompt(stdout: str) -> str:
    """The prompt part of `--dry-run` output (everything before drover's own trailer)."""
    marker = "--- drover: dry run"
    assert marker in stdout, stdout
    return stdout[: stdout.index(marker)]


@pytest.fixture
def project(repo):
    configure(repo)
    return repo


# --- the github tracker, end to end ---------------------------------------------------------------


ISSUE_12_BODY = "Steps: submit an empty name.\nThe page shows {{ x }} and <% if y %> verbatim."
ISSUE_7_BODY = "Reported by a user.\n\nWidgets should refuse {{ nothing }}."
NOTE = "Fixed: an empty name is refused"


@pytest.fixture
def hub(project, gh):  # noqa: F811 - the fake-gh fixture
    """A github-tracked project with D-1 (origin 7, closes 12) and canned gh answers."""
    edit_config(project, 'backend = "none"', 'backend = "github"')
    gh.answer("issue-view-12", gh_issue(12, "Empty names crash the widget", ISSUE_12_BODY))
    gh.answer("issue-view-7", gh_issue(7, "Widgets need input checks", ISSUE_7_BODY))
    gh.answer("issue-list", [])
    gh.answer("api", [])
    gh.answer("api-graphql", {"data": {"search": {"issueCount": 0, "nodes": []}}})
    gh.answer("issue-close", "")
    item = new_item(project, "Refuse empty names", "--kind", "bug")
    set_frontmatter(project, item, "origin: 7\ncloses: [12]")
    return project, item, gh


def close_calls(fake) -> list[list[str]]:
    return [call for call in fake.calls() if call[:2] == ["issue", "close"]]


def test_github_review_lists_the_undisposed_close_then_finish_closes_it(hub):
    root, item, fake = hub
    review = prompt(root, item, "review")
    assert ["issue", "view", "12", "--json", "number,title,body,state,url,labels"] in fake.calls()
    assert ISSUE_12_BODY.splitlines()[1] in review  # a value reaches the agent byte for byte
    assert "\n- #12 Empty names crash the widget\n" in review  # the UndisposedCloses worklist
    data = prompt(root, item, "review", "--template",
                  "<% for c in UndisposedCloses %>{{ c.Number }}|{{ c.Title }}|{{ c.State }}|{{ c.Undisposed }}\n"
                  "<% endfor %>")
    assert data == "12|Empty names crash the widget|open|True\n"

    done = drover(root, "dispose", item, "12", "--as", "close", "--note", NOTE, check=True)
    assert "#12" in done.stdout
    review = prompt(root, item, "review")
    assert "\n- #12 Empty names crash the widget\n" not in review
    judged = ("undisposed={{ UndisposedCloses | length }}"
              "<% for c in Closes %>;{{ c.Disposition }}|{{ c.Note }}|{{ c.Applied }}<% endfor %>.\n")
    assert prompt(root, item, "review", "--template", judged) == f"undisposed=0;close|{NOTE}|.\n"

    drover(root, "run", item, check=True)  # a real implementing run makes the branch
    drover(root, "audit", item, "--level", "reviewed", "--by", "Ann", check=True)
    assert close_calls(fake) == []
    name_the_repository(root)
    done = drover(root, "finish", item)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "#12: closed with comment" in done.stdout
    assert close_calls(fake) == [["issue", "close", "12", "--comment", NOTE, "--repo", "acme/widgets"]]
    after = shown(root, item)
    assert after["state"] == "done" and after["done"]
    (disposition,) = after["dispositions"]
    assert (disposition["issue"], disposition["disposition"], disposition["applied"]) == (12, "close", "closed with comment")
    assert prompt(root, item, "review", "--template", judged) == f"undisposed=0;close|{NOTE}|closed with comment.\n"
    assert f"drover: merge {item}" in git(root, "log", "-1", "--format=%s", "main")


def name_the_repository(root: Path) -> None:
    """`[tracker] repo` set: a close or a comment goes only where drover.toml says (gh would read
    .git/config, which agents can write), and every gh call then names it."""
    edit_config(root, 'repo = ""', 'repo = "acme/widgets"')


def test_a_tracker_write_that_fails_in_a_drives_finish_fails_the_drive_and_stays_in_the_report(hub):
    """A close that gh refused during `drive --finish` was one progress line: the drive exited 0,
    `show` read `#12 close by Ann` as done, and the morning report said nothing (a new user,
    overnight on tabulate). The drive exits 1, `show` and the report say the tracker was not told
    until a finish tells it."""
    root, item, fake = hub
    name_the_repository(root)
    drover(root, "dispose", item, "12", "--as", "close", "--note", NOTE, check=True)
    fake.fail("issue-close", "HTTP 502: Bad Gateway\n")
    done = drover(root, "drive", "--finish", item)
    assert done.returncode == 1, done.stdout
    assert "1 of 1 approved, 1 finished" in done.stdout and "#12: not applied (" in done.stdout
    said = f"the tracker was not told: #12 close (`drover finish {item}` tries again)"
    assert said in drover(root, "report", check=True).stdout
    (line,) = [row for row in json.loads(drover(root, "report", "--json", check=True).stdout)["items"]
               if row["id"] == item]
    assert line["status"] == "merged" and line["reason"] == said
    assert f"#12 close by Test Operator (not applied: `drover finish {item}` tries again)" in \
        drover(root, "show", item, check=True).stdout
    (fake.data / "issue-close.fail").unlink()
    assert drover(root, "finish", item).returncode == 0
    (line,) = [row for row in json.loads(drover(root, "report", "--json", check=True).stdout)["items"]
               if row["id"] == item]
    assert line["reason"] == ""


def _approved_with_a_close_gh_refuses(hub):
    """The hub's item disposed of as `close` #12, run and approved, with gh failing to close."""
    root, item, fake = hub
    name_the_repository(root)
    drover(root, "dispose", item, "12", "--as", "close", "--note", NOTE, check=True)
    drover(root, "run", item, check=True)
    drover(root, "audit", item, "--level", "reviewed", "--by", "Ann", check=True)
    fake.fail("issue-close", "HTTP 502: Bad Gateway\n")
    return root, item, fake


def test_github_failure_during_finish_is_reported_and_the_next_finish_retries(hub):
    root, item, fake = _approved_with_a_close_gh_refuses(hub)
    done = drover(root, "finish", item)
    assert done.returncode == 1
    assert "#12" in done.stderr and "HTTP 502: Bad Gateway" in done.stderr
    assert "Traceback" not in done.stderr
    after = shown(root, item)
    assert after["state"] == "done"  # the merge stands
    assert after["dispositions"][0]["applied"] == ""  # nothing was written to the tracker
    assert len(close_calls(fake)) == 1

    (fake.data / "issue-close.fail").unlink()
    done = drover(root, "finish", item)
    assert done.returncode == 0, done.stderr
    assert "#12: closed with comment" in done.stdout
    assert close_calls(fake) == [["issue", "close", "12", "--comment", NOTE, "--repo", "acme/widgets"]] * 2
    assert shown(root, item)["dispositions"][0]["applied"] == "closed with comment"

    done = drover(root, "finish", item)  # applied once: nothing is written again
    assert done.returncode == 0 and "already done" in done.stdout
    assert len(close_calls(fake)) == 2


def test_a_finish_again_that_tells_the_tracker_records_its_event(hub):
    root, item, fake = _approved_with_a_close_gh_refuses(hub)
    assert drover(root, "finish", item).returncode == 1  # merged and done; the tracker was not told
    finishes = [row for row in ledger_rows(root, "events", order="id") if row["command"] == "finish"]
    assert [json.loads(row["detail"]).get("applied") for row in finishes] == [None]
    (fake.data / "issue-close.fail").unlink()
    assert drover(root, "finish", item).returncode == 0  # it changed the ledger (applied), so it has its event
    assert drover(root, "finish", item).returncode == 0  # nothing left to do: no event
    finishes = [row for row in ledger_rows(root, "events", order="id") if row["command"] == "finish"]
    assert [json.loads(row["detail"]).get("applied") for row in finishes] == [None, [12]]
    assert finishes[-1]["item"] == item and finishes[-1]["by"]


def test_github_draft_renders_origin_read_fresh_from_gh(hub):
    root, item, fake = hub
    draft = prompt(root, item, "draft")
    assert ["issue", "view", "7", "--json", "number,title,body,state,url,labels"] in fake.calls()
    assert "#7 Widgets need input checks <https://github.com/acme/widgets/issues/7>" in draft
    assert "Widgets should refuse {{ nothing }}." in draft
    fields = "{{ Origin.Number }}|{{ Origin.Title }}|{{ Origin.Url }}|{{ Origin.Unavailable }}\n"
    assert prompt(root, item, "draft", "--template", fields) == \
        "7|Widgets need input checks|https://github.com/acme/widgets/issues/7|\n"

    fake.answer("issue-view-7", gh_issue(7, "Widgets need input checks, and a limit", ISSUE_7_BODY))
    assert "Widgets need input checks, and a limit" in prompt(root, item, "draft")  # read fresh, no copy

    fake.fail("issue-view-7", "HTTP 404: Not Found (https://api.github.com/graphql)\n")
    assert prompt(root, item, "draft", "--template", fields) == \
        "7|||gh issue view failed: HTTP 404: Not Found (https://api.github.com/graphql)\n"
    draft = prompt(root, item, "draft")
    assert "HTTP 404: Not Found" in draft and "Widgets should refuse" not in draft


# --- the file tracker in a prompt ---------------------------------------------------------------


REGISTER = """# Follow-ups

- D-2: the retry loop needs a cap
- D-1: the parser drops a trailing newline
- [x] D-2: a ticked row is done
- D-3: somebody else's
"""
FOLLOW_UP_FIELDS = ("<% for f in FollowUps %>{{ f.Number }}|{{ f.Title }}|{{ f.Mine }}|{{ f.Body }}|"
                    "{{ f.Unavailable != '' }}\n<% endfor %>RU={{ RegisterUnreadable }}\n")


@pytest.fixture
def register_project(project):
    edit_config(project, 'backend = "none"', 'backend = "file"')
    new_item(project, "Parse the input")
    new_item(project, "Retry uploads", "--dep", "D-1")
    new_item(project, "Something unrelated")
    write(project, "follow-ups.md", REGISTER)
    commit(project, "register")
    return project


def test_file_register_follow_ups_render_mine_apart_from_a_deps(register_project):
    root = register_project
    assert prompt(root, "D-2", "implement", "--template", FOLLOW_UP_FIELDS) == (
        "3|the retry loop needs a cap|True||True\n"
        "4|the parser drops a trailing newline|False||True\n"
        "RU=\n"
    )
    text = prompt(root, "D-2", "implement")
    section = text[text.index("## Follow-ups"):]
    mine = section.index("- #3 the retry loop needs a cap")
    theirs = section.index("- #4 the parser drops a trailing newline")
    assert mine < theirs
    # the dep's row sits under its own heading, which names the dependency
    between = section[mine:theirs].splitlines()
    assert any("dependency" in line for line in between[2:]), section
    # each row says why its text is unavailable: the register has no body column
    reason = "the register follow-ups.md has no body column"
    assert section.count(reason) == 2
    assert "ticked row" not in text and "somebody else's" not in text
    assert "incomplete" not in section


def test_a_bad_register_line_says_the_follow_up_list_is_incomplete(register_project):
    root = register_project
    write(root, "follow-ups.md", REGISTER + "- no owner here, so no colon\n")
    data = prompt(root, "D-2", "implement", "--template", FOLLOW_UP_FIELDS)
    rows, unreadable = data.split("RU=")
    assert rows == "3|the retry loop needs a cap|True||True\n4|the parser drops a trailing newline|False||True\n"
    assert unreadable.startswith("follow-ups.md:7: ")  # the first bad line
    text = prompt(root, "D-2", "implement")
    section = text[text.index("## Follow-ups"):]
    assert "follow-ups.md:7:" in section and "incomplete" in section
    assert "- #3 the retry loop needs a cap" in section  # what was read is still shown, as a floor
    done = drover(root, "check")
    assert "warning: tracker file: follow-ups.md:7:" in done.stdout

    # an empty register is a clean answer, never rendered like an unreadable one
    write(root, "follow-ups.md", "# Follow-ups\n")
    assert prompt(root, "D-2", "implement", "--template", FOLLOW_UP_FIELDS) == "RU=\n"
    assert "## Follow-ups" not in prompt(root, "D-2", "implement")


# --- DROVER_REPO_TEMPLATES=0 ----------------------------------------------------------------------


def test_repo_templates_off_ignores_the_prompts_file_in_a_dry_run(project):
    today = blocks()["implement/scope"]["hash"]
    use_kickoff(project, f"<% block scope %>\n<# drover-base: {today} #>\n- OVERRIDE-MARKER: only this package.\n"
                         "<% endblock %>\n")
    item = new_item(project, "Add a thing")

    done = drover(project, "run", item, "--dry-run", check=True)
    assert "OVERRIDE-MARKER" in dry_prompt(done.stdout) and done.stderr == ""

    done = drover(project, "run", item, "--dry-run", env={"DROVER_REPO_TEMPLATES": "0"}, check=True)
    warnings = done.stderr.splitlines()
    assert len(warnings) == 1
    assert warnings[0].startswith("drover: warning: DROVER_REPO_TEMPLATES=0") and KICKOFF in warnings[0]
    ignored = dry_prompt(done.stdout)
    assert "OVERRIDE-MARKER" not in ignored
    assert not (project / ".drover" / "runs").exists() or not any((project / ".drover" / "runs").iterdir())
    assert "drover/d-1" not in git(project, "branch", "--list")

    edit_config(project, f'implement = "{KICKOFF}"', 'implement = ""')
    assert ignored == prompt(project, item, "implement")  # exactly the built-in


def test_a_dry_run_names_the_template_a_launch_would_record(project):
    today = blocks()["implement/scope"]["hash"]
    use_kickoff(project, f"<% block scope %>\n<# drover-base: {today} #>\n- OVERRIDE-MARKER\n<% endblock %>\n"
                         "<% block done %>\n- ADDED-MARKER\n<% endblock %>\n")
    item = new_item(project, "Add a thing")

    trailer = drover(project, "run", item, "--dry-run", check=True).stdout.split("--- drover: dry run", 1)[1]
    assert f"\ntemplate: prompts:{KICKOFF} (scope@{today}, done)\n" in trailer  # an addition has no base
    trailer = drover(project, "run", item, "--dry-run", "--template", "{{ Title }}\n", check=True).stdout
    assert "\ntemplate: inline\n" in trailer
    trailer = drover(project, "run", item, "--dry-run", env={"DROVER_REPO_TEMPLATES": "0"}, check=True).stdout
    assert f"\ntemplate: builtin:implement.tmpl (requested prompts:{KICKOFF})\n" in trailer


# --- template provenance of a run -------------------------------------------------------------------


def test_run_template_at_path_records_requested_and_resolved_sources(project):
    today = blocks()["implement/scope"]["hash"]
    write(project, "docs-internal/extra.tmpl",
          f"<% block scope %>\n<# drover-base: {today} #>\n- SCOPE-MARKER\n<% endblock %>\n"
          "<% block done %>\n- DONE-MARKER: regenerate the docs.\n<% endblock %>\n")
    use_kickoff(project, "<% block done %>\n- PROMPTS-MARKER\n<% endblock %>\n")
    item = new_item(project, "Add a thing")

    drover(project, "run", item, check=True)
    drover(project, "run", item, "--template", "@docs-internal/extra.tmpl", check=True)
    untrusted = drover(project, "run", item, "--template", "@docs-internal/extra.tmpl",
                       env={"DROVER_REPO_TEMPLATES": "0"}, check=True)
    assert "drover: warning: DROVER_REPO_TEMPLATES=0" in untrusted.stderr
    drover(project, "run", item, "--template", "<% block done %>\n- INLINE-MARKER\n<% endblock %>\n", check=True)
    runs = shown(project, item)["runs"]
    assert [(run["requested_source"], run["resolved_source"]) for run in runs] == [
        (f"prompts:{KICKOFF}", f"prompts:{KICKOFF}"),
        ("@docs-internal/extra.tmpl", "@docs-internal/extra.tmpl"),
        ("@docs-internal/extra.tmpl", "builtin:implement.tmpl"),
        ("inline", "inline"),
    ]
    assert [run["base_hashes"] for run in runs] == [{"done": ""}, {"scope": today, "done": ""}, {}, {"done": ""}]
    markers = ("PROMPTS-MARKER", "SCOPE-MARKER", "DONE-MARKER", "INLINE-MARKER")
    expected = [{"PROMPTS-MARKER"}, {"SCOPE-MARKER", "DONE-MARKER"}, set(), {"INLINE-MARKER"}]
    for run, wanted in zip(runs, expected):
        text = (project / run["prompt_path"]).read_text()
        assert run["prompt_sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert {marker for marker in markers if marker in text} == wanted
        assert len(run["template_sha256"]) == 64
    assert len({run["template_sha256"] for run in runs}) == 4  # four different templates rendered
    text = drover(project, "show", item, check=True).stdout
    assert "template: @docs-internal/extra.tmpl" in text
    assert "template: builtin:implement.tmpl (requested @docs-internal/extra.tmpl)" in text


# --- SPEC 8.4: every line drover check prints -----------------------------------------------------


def old_default(key: str) -> tuple[str, str]:
    """A hash and text this drover once shipped for `key` that is not today's default."""
    today = blocks()[key]["hash"]
    older = [(digest, text) for digest, text in load_history().get(key, {}).items() if digest != today]
    assert older, f"the history holds no earlier default of {key}"
    return older[0]


def on_terminal(root: Path, *args: str, env: dict | None = None) -> str:
    """What `drover ARGS` prints when its standard output is a terminal."""
    import os
    import pty

    master, slave = pty.openpty()
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **(env or {})}
    proc = subprocess.Popen([str(BIN / "drover"), *args], cwd=root, stdout=slave, stderr=subprocess.DEVNULL,
                            env=full_env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: drover has exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def check_lines(root: Path, *args: str, cwd: Path | None = None, env: dict | None = None):
    done = drover(cwd or root, "check", *args, env=env)
    assert "Traceback" not in done.stderr
    return done, done.stdout.splitlines()


def test_check_reports_stale_and_whole_template_lines_as_written_in_drover_toml(project):
    old_hash, _ = old_default("implement/scope")
    write(project, KICKOFF, f"<# ours #>\n<% block scope %>\n<# drover-base: {old_hash} #>\n- Only this package.\n"
                            "<% endblock %>\n")
    write(project, REVIEW, "Review {{ Id }} your own way.\n")
    write(project, DRAFT, "<% block requirements %>\n- Number them.\n<% endblock %>\n")  # records no hash
    edit_config(project, 'implement = ""', f'implement = "{KICKOFF}"')
    edit_config(project, 'review = ""', f'review = "{REVIEW}"')
    edit_config(project, 'draft = ""', f'draft = "{DRAFT}"')
    item = new_item(project, "Add a thing")

    expected = [f"STALE OVERRIDE implement/scope in {KICKOFF}", f"WHOLE TEMPLATE review in {REVIEW}",
                f"STALE OVERRIDE draft/requirements in {DRAFT}"]
    done, lines = check_lines(project)
    assert done.returncode == 1
    assert [line for line in lines if not line.startswith("warning:")] == expected
    _, from_below = check_lines(project, cwd=project / "items")  # paths stay as written, whatever the cwd
    assert from_below == lines

    # run, review, draft and the drive header print the same lines as warnings
    for command, line in (("run", expected[0]), ("review", expected[1]), ("draft", expected[2])):
        done = drover(project, command, item, "--dry-run", check=True)
        assert done.stderr.splitlines() == [f"drover: warning: {line}"]
    # drive will not start while check reports them as errors, and names each (SPEC 18)
    done = drover(project, "drive", item, env={"AGENT_MODE": "fail"})
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines()[1:] == [f"drover:   {line}" for line in expected]


def test_check_reports_block_field_and_parse_problems_with_file_and_line(project):
    edit_config(project, 'draft = ""', f'draft = "{DRAFT}"')
    write(project, DRAFT, "<% block requirments %>\n- x\n<% endblock %>\n")
    _, lines = check_lines(project)
    (line,) = [line for line in lines if line.startswith(DRAFT)]
    assert re.fullmatch(rf"{DRAFT}:1: unknown block requirments .*\(did you mean requirements\?\).*", line), line

    write(project, DRAFT, "<% block checks %>\n- a\n<% endblock %>\n<% block checks %>\n- b\n<% endblock %>\n")
    _, lines = check_lines(project)
    (line,) = [line for line in lines if line.startswith(DRAFT)]
    assert re.fullmatch(rf"{DRAFT}:4: duplicate block checks.*", line), line

    write(project, DRAFT, "<% block checks %>\n- {{ Tilte }}\n<% endblock %>\n")
    done, lines = check_lines(project)
    (line,) = [line for line in lines if line.startswith(DRAFT)]
    assert line.startswith(f"{DRAFT}:2: unknown field Tilte (did you mean Title?); fields: Id, Title, ")
    assert "Siblings" in line and done.returncode == 1

    write(project, DRAFT, "<% block checks %>\n- {{ Title \n<% endblock %>\n")
    done, lines = check_lines(project)
    (line,) = [line for line in lines if line.startswith(DRAFT)]
    assert re.fullmatch(rf"{DRAFT}:\d+: .+", line) and done.returncode == 1


def test_check_reports_item_problems_and_warns_without_failing(project):
    for title in ("One", "Two", "Three", "Four", "Five"):
        new_item(project, title)
    write(project, "items/D-2.md", "---\nid: D-2\ntitle: [unclosed\n---\nbody\n")
    write(project, "items/D-3.md", "---\nid: D-30\ntitle: Three\n---\nbody\n")
    (project / "items" / "D-1.md").write_text((project / "items" / "D-1.md").read_text()
                                              .replace("deps: []", "deps: [D-9, the-lexer]"))
    (project / "items" / "D-4.md").write_text((project / "items" / "D-4.md").read_text()
                                              .replace("deps: []", "deps: [D-5]"))
    (project / "items" / "D-5.md").write_text((project / "items" / "D-5.md").read_text()
                                              .replace("deps: []", "deps: [D-4]"))
    done, lines = check_lines(project)
    assert done.returncode == 1
    assert any(line.startswith("items/D-2.md:3: D-2 will not parse") for line in lines)
    assert any(line.startswith("items/D-3.md:2: D-3 has an id that disagrees with its file name") for line in lines)
    assert any(line.startswith("items/D-1.md:5: D-1: dep D-9 has no file") for line in lines)
    assert "items/D-1.md:5: D-1: dep the-lexer does not resolve to an item id" in lines
    assert "items/D-4.md: dependency cycle: D-4 -> D-5 -> D-4" in lines

    for name in ("D-1", "D-2", "D-3", "D-4", "D-5"):
        (project / "items" / f"{name}.md").unlink()
    new_item(project, "Clean")
    # the scripted project has no verify command (helpers.configure), which check would warn about;
    # nor a Makefile, which check warns a `make` verify command of
    (project / "Makefile").write_text("test:\n\ttrue\n")
    git(project, "add", "Makefile")
    git(project, "commit", "-qm", "a Makefile")
    edit_config(project, 'default = ""', 'default = "make test"')
    done, lines = check_lines(project)
    assert (done.returncode, lines) == (0, ["no problems found"])

    # warnings: a narrower per-key verify command, a missing agent binary, an unreachable tracker
    edit_config(project, 'default = "make test"', 'default = "make test"\nmigration = "make migrate-check"')
    edit_config(project, 'backend = "none"', 'backend = "file"')
    (project / "drover.toml").write_text((project / "drover.toml").read_text()
                                         + '\n[agent.draft]\ncommand = "drover-no-such-agent --go"\n')
    done, lines = check_lines(project)
    assert done.returncode == 0, lines
    assert all(line.startswith("warning: ") for line in lines), lines
    assert any(line.startswith("warning: [verify] migration does not contain the default command") for line in lines)
    assert any(line.startswith("warning: agent for draft:") and "drover-no-such-agent" in line for line in lines)
    assert "warning: tracker file: register follow-ups.md does not exist" in lines


def test_check_diff_shows_the_change_since_the_recorded_default(project):
    old_hash, old_text = old_default("implement/scope")
    today = blocks()["implement/scope"]
    use_kickoff(project, f"<% block scope %>\n<# drover-base: {old_hash} #>\n- Only this package.\n<% endblock %>\n")
    edit_config(project, 'default = ""', 'default = "true"')  # no warning of an empty verify command, nor of a make with no Makefile

    done = drover(project, "check", "--diff", "--color", "never")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[:3] == [f"==> implement/scope in {KICKOFF}", f"--- {old_hash} (the override's base)",
                         f"+++ {today['hash']} (today's default)"]
    body = lines[3:]
    assert body and all(line[:2] in ("  ", "- ", "+ ") for line in body)
    assert [line[2:] for line in body if line[:2] in ("  ", "- ")] == old_text.splitlines()
    assert [line[2:] for line in body if line[:2] in ("  ", "+ ")] == today["default"].splitlines()
    changed = list(difflib.ndiff(old_text.splitlines(), today["default"].splitlines()))
    assert any(line.startswith(("- ", "+ ")) for line in changed)

    coloured = drover(project, "check", "--diff", "--color", "always").stdout
    assert "\x1b[32m+ " in coloured and re.sub(r"\x1b\[[0-9;]*m", "", coloured) == done.stdout
    assert "\x1b[" not in drover(project, "check", "--diff").stdout  # auto, and a pipe is not a terminal
    assert "\x1b[32m+ " in on_terminal(project, "check", "--diff")
    assert "\x1b[" not in on_terminal(project, "check", "--diff", env={"NO_COLOR": "1"})
    assert "\x1b[" not in on_terminal(project, "check", "--diff", "--color", "never")

    for recorded in ("<# drover-base: 000000000000 #>\n", ""):  # a hash never shipped, and none at all
        write(project, KICKOFF, f"<% block scope %>\n{recorded}- Only this package.\n<% endblock %>\n")
        lines = drover(project, "check", "--diff", "--color", "never").stdout.splitlines()
        assert lines[0] == f"==> implement/scope in {KICKOFF}"
        assert len(lines) == 2 and today["hash"] in lines[1] and not lines[1].startswith(("---", "+++"))


# --- small things a new user trips over ---------------------------------------------------------


def test_prompt_branch_refuses_a_name_git_would_refuse(project):
    item = new_item(project, "Has spaces in its title")
    assert prompt(project, item, "branch") == "drover/d-1\n"
    edit_config(project, 'branch = "drover/{{ Id | lower }}"', 'branch = "drover/{{ Title }}"')
    for args in (("prompt", item, "--slot", "branch"), ("run", item, "--dry-run")):
        done = drover(project, *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.splitlines() == [
            "drover: drover.toml: [run] branch renders 'drover/Has spaces in its title' for D-1, "
            "which is not a valid git branch name"]


def test_output_into_a_closed_pipe_ends_quietly(project):
    proc = subprocess.Popen([str(BIN / "drover"), "schema", "--fields"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader is gone before drover writes
    stderr = proc.stderr.read()
    proc.wait(timeout=60)
    assert (proc.returncode, stderr) == (0, "")


def test_drive_refuses_an_id_that_names_no_item_before_starting(project):
    item = new_item(project, "Add a thing")
    for bad, message in (("D-7", "drover: no item D-7 (did you mean D-1?)"),
                         ("nonsense", "drover: nonsense does not resolve to an item id (ids look like D-1)")):
        done = drover(project, "drive", item, bad)
        assert (done.returncode, done.stdout, done.stderr.splitlines()) == (2, "", [message])
    assert shown(project, item)["runs"] == []


def test_check_reports_a_base_branch_the_repository_lacks(project):
    new_item(project, "Add a thing")
    assert check_lines(project)[0].returncode == 0
    edit_config(project, 'default = ""', 'default = "true"')  # no warning of an empty verify command, nor of a make with no Makefile
    edit_config(project, 'base = "main"', 'base = "trunk"')
    done, lines = check_lines(project)
    assert done.returncode == 1
    line = (project / "drover.toml").read_text().splitlines().index(next(
        text for text in (project / "drover.toml").read_text().splitlines() if text.startswith('base = "trunk"'))) + 1
    assert lines == [f"drover.toml:{line}: [run] base: no branch 'trunk' in this repository (items start from it and merge into it)"]
