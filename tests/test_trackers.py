"""The tracker backends: none, the file register, and github through a fake `gh` on PATH."""
from __future__ import annotations

from pathlib import Path

import pytest

from drover.config import TrackerConfig
from drover.errors import DroverError
from drover.trackers import Issue, TrackerUnavailable, open_tracker, owners_in
from drover.trackers import github
from drover.trackers.file import FileTracker
from drover.trackers.github import GitHubTracker
from drover.trackers.none import NoTracker
from helpers import gh_issue


def rest_issue(number, body="", state="open", labels=()):
    """One issue as the REST API (`gh api`) returns it."""
    return {
        "number": number,
        "title": f"sub-issue {number}",
        "body": body,
        "state": state,
        "html_url": f"https://github.com/acme/widgets/issues/{number}",
        "url": f"https://api.github.com/repos/acme/widgets/issues/{number}",
        "labels": [{"name": name} for name in labels],
    }


def flag(argv: list[str], name: str) -> str | None:
    """The value following `name` in argv, or None."""
    return argv[argv.index(name) + 1] if name in argv else None


def github_tracker(repo: Path, *, repo_name: str = "", timeout: float = 10) -> GitHubTracker:
    return GitHubTracker(repo_name, "follow-up", repo, timeout=timeout)


# --- open_tracker -------------------------------------------------------------------------


def test_open_tracker_builds_the_configured_backend(repo):
    assert isinstance(open_tracker(TrackerConfig(), repo), NoTracker)
    register = open_tracker(TrackerConfig(backend="file", register="docs/fu.md"), repo)
    assert isinstance(register, FileTracker) and register.path == repo / "docs" / "fu.md"
    hub = open_tracker(TrackerConfig(backend="github", repo="acme/widgets", follow_up_label="later"), repo)
    assert isinstance(hub, GitHubTracker)
    assert (hub.name, hub.repo, hub.label, hub.root) == ("github", "acme/widgets", "later", repo)


def test_tracker_unavailable_is_one_line_and_a_drover_error():
    exc = TrackerUnavailable("gh said\n  something\n")
    assert exc.reason == "gh said something" and str(exc) == "gh said something"
    assert isinstance(exc, DroverError) and exc.exit_code == 1 and exc.found == ()


# --- Owner lines --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body, owners",
    [
        ("Owner: D-3", ("D-3",)),
        ("Found while reviewing.\n\nOwner: D-3\n", ("D-3",)),
        ("owner: D-3, D-5.\n- Owner: `D-7`\nOwner: D-3", ("D-3", "D-5", "D-7")),
        ("**Owner:** D-3", ("D-3",)),
        ("**Owner**: D-3", ("D-3",)),
        ("Steps\r\n\r\nOwner: D-3\r\n", ("D-3",)),  # bodies written in a browser end lines in CRLF
        ("The Owner: D-3 said so", ()),  # mid-sentence, not a line of its own
        ("Owner: nobody yet", ()),
        ("Owner: D-31", ("D-31",)),
        ("", ()),
    ],
)
def test_owners_in_reads_owner_lines(body, owners):
    assert owners_in(body) == owners


# --- backend = "none" ---------------------------------------------------------------------


def test_none_backend_has_nothing_and_says_why_it_cannot_read(gh):
    tracker = NoTracker()
    assert tracker.follow_ups(["D-1"]) == []
    assert tracker.owned("D-1", 4) == []
    assert tracker.probe() == ""
    assert tracker.apply(4, "keep", "") == ""
    with pytest.raises(TrackerUnavailable) as read:
        tracker.issue(4)
    assert read.value.reason == 'issue #4 cannot be read: no tracker is configured ([tracker] backend = "none")'
    with pytest.raises(TrackerUnavailable, match='cannot close issue #4: no tracker is configured'):
        tracker.apply(4, "close", "fixed")
    assert gh.calls() == []


# --- backend = "file" ---------------------------------------------------------------------

REGISTER = """\
# Follow-ups

Rows are ours to discharge; tick one when it is done.

- D-3: the parser drops a trailing newline
- [ ] D-4, D-7: retry the flaky upload test
  - an indented note under a row is for people
- [x] D-3: a ticked row is done
* D-9: star bullets count too

```
- not a row: an example in a fence
```
<!--
- also not a row
-->
"""


def write_register(repo: Path, text: str, name: str = "follow-ups.md") -> FileTracker:
    (repo / name).write_text(text)
    return FileTracker(name, repo)


def test_file_register_rows_are_numbered_by_line_and_have_no_body(repo):
    tracker = write_register(repo, REGISTER)
    rows = tracker.follow_ups(["D-3", "D-7", "D-9"])
    assert [(row.number, row.owners, row.title, row.state) for row in rows] == [
        (5, ("D-3",), "the parser drops a trailing newline", "open"),
        (6, ("D-4", "D-7"), "retry the flaky upload test", "open"),
        (9, ("D-9",), "star bullets count too", "open"),
    ]
    assert rows[0].url == "follow-ups.md:5"
    assert all(row.body == "" for row in rows)
    assert all(row.body_unavailable == "the register follow-ups.md has no body column: a row is its headline only" for row in rows)
    assert tracker.probe() == ""


def test_file_register_keeps_only_rows_owned_by_the_ids_asked(repo):
    tracker = write_register(repo, REGISTER)
    assert [row.number for row in tracker.follow_ups(["D-4"])] == [6]
    assert tracker.follow_ups(["D-1", "D-30"]) == []
    assert tracker.follow_ups([]) == []


def test_file_register_missing_is_unavailable(repo):
    tracker = FileTracker("follow-ups.md", repo)
    with pytest.raises(TrackerUnavailable) as missing:
        tracker.follow_ups(["D-1"])
    assert missing.value.reason == "register follow-ups.md does not exist"
    assert tracker.probe() == "register follow-ups.md does not exist"


def test_file_register_that_is_a_directory_is_unavailable(repo):
    (repo / "follow-ups.md").mkdir()
    with pytest.raises(TrackerUnavailable, match=r"^register follow-ups.md cannot be read: "):
        FileTracker("follow-ups.md", repo).follow_ups(["D-1"])


def test_file_register_bad_row_names_file_and_line_and_keeps_the_rows_it_read(repo):
    tracker = write_register(
        repo,
        "# Follow-ups\n\n- D-3: fine\n- fix the login page\n- D-3 D-4: two ids without a comma\n- D-3:   \n",
    )
    with pytest.raises(TrackerUnavailable) as bad:
        tracker.follow_ups(["D-3"])
    assert bad.value.reason == (
        'follow-ups.md:4: expected "- <owner id>[, <owner id>...]: <headline>", '
        "found no colon after the owner ids (and 2 more bad rows)"
    )
    # the rows that did parse come back as a floor of the list, not the list
    assert [(row.number, row.title) for row in bad.value.found] == [(3, "fine")]
    assert tracker.probe().startswith("follow-ups.md:4: ")


@pytest.mark.parametrize(
    "line, problem",
    [
        ("- D-3 D-4: x", '"D-3 D-4" is not an item id'),
        ("- : x", "an owner id is missing"),
        ("- D-3, : x", "an owner id is missing"),
        ("- D-3:", "no headline after the colon"),
        ("- [x] later: x", '"later" is not an item id'),
    ],
)
def test_file_register_says_what_is_wrong_with_a_row(repo, line, problem):
    tracker = write_register(repo, f"{line}\n", name="fu.md")
    with pytest.raises(TrackerUnavailable) as bad:
        tracker.follow_ups(["D-3"])
    assert bad.value.reason.startswith("fu.md:1: ") and bad.value.reason.endswith(problem)


def test_file_register_owns_no_issues_and_writes_none(repo):
    tracker = write_register(repo, REGISTER)
    assert tracker.owned("D-3", 12) == []
    with pytest.raises(TrackerUnavailable, match=r"^follow-ups.md has no row on line 12$"):
        tracker.issue(12)  # line 12 is a fence; issue #n is the row on line n
    with pytest.raises(TrackerUnavailable, match=r"cannot comment on issue #12: the register follow-ups.md"):
        tracker.apply(12, "comment", "see D-3")
    assert tracker.apply(12, "keep", "") == ""


def test_file_register_reads_issue_n_as_the_row_intake_takes(repo):
    """One definition: `issue(n)` (the draft's Origin, Closes) is the row `intake(n)` made the item from."""
    tracker = write_register(repo, REGISTER)
    row = tracker.issue(6)
    assert (row.number, row.owners, row.title, row.state, row.url) == (
        6, ("D-4", "D-7"), "retry the flaky upload test", "open", "follow-ups.md:6")
    assert row.body_unavailable == "the register follow-ups.md has no body column: a row is its headline only"
    assert tracker.intake(6) == (row, "the register row follow-ups.md:6")
    assert tracker.issue(8).state == "closed"  # a ticked row still reads
    for number in (3, 11, 99):  # prose, a fenced example, past the end: no row
        with pytest.raises(TrackerUnavailable) as missing:
            tracker.issue(number)
        assert missing.value.reason == f"follow-ups.md has no row on line {number}"
        with pytest.raises(TrackerUnavailable) as same:
            tracker.intake(number)
        assert same.value.reason == missing.value.reason


# --- backend = "github": follow-ups -------------------------------------------------------

FOLLOW_UPS = [
    gh_issue(21, "retry uploads", "Found in review of D-2.\n\nOwner: D-3\n", labels=("follow-up",)),
    gh_issue(22, "rename flag", "Owner: D-5", labels=("follow-up", "cli")),
    gh_issue(23, "not mine", "Owner: D-31", labels=("follow-up",)),
    gh_issue(24, "nobody's", "", labels=("follow-up",)),
]


def test_github_follow_ups_filter_by_label_server_side_and_owner_lines(gh, repo):
    gh.answer("issue-list", FOLLOW_UPS)
    rows = github_tracker(repo).follow_ups(["D-3", "D-5"])
    assert [row.number for row in rows] == [21, 22]
    first = rows[0]
    assert first == Issue(
        number=21,
        title="retry uploads",
        body="Found in review of D-2.\n\nOwner: D-3\n",
        state="open",
        url="https://github.com/acme/widgets/issues/21",
        labels=("follow-up",),
        owners=("D-3",),
    )
    [argv] = gh.calls()
    assert argv[:2] == ["issue", "list"]
    assert flag(argv, "--label") == "follow-up"
    assert flag(argv, "--state") == "open"
    assert flag(argv, "--json") == "number,title,body,state,url,labels"
    assert flag(argv, "--limit") == str(github.LIST_LIMIT)
    assert "--repo" not in argv


def test_github_passes_the_configured_repo(gh, repo):
    gh.answer("issue-list", [])
    github_tracker(repo, repo_name="acme/widgets").follow_ups(["D-3"])
    assert flag(gh.calls()[0], "--repo") == "acme/widgets"


def test_github_follow_ups_for_no_ids_ask_nothing(gh, repo):
    assert github_tracker(repo).follow_ups([]) == []
    assert gh.calls() == []


def test_github_follow_ups_at_the_list_limit_report_an_incomplete_list(gh, repo, monkeypatch):
    monkeypatch.setattr(github, "LIST_LIMIT", 2)
    gh.answer("issue-list", FOLLOW_UPS[:2])
    with pytest.raises(TrackerUnavailable, match="the list may be incomplete") as cut:
        github_tracker(repo).follow_ups(["D-3"])
    assert [row.number for row in cut.value.found] == [21]
    assert flag(gh.calls()[0], "--limit") == "2"


# --- backend = "github": owned ------------------------------------------------------------


def search_result(*issues):
    """GitHub's GraphQL search (`gh api graphql`) finding `issues` (as `gh issue` prints them), each
    opened by a member."""
    nodes = [{**issue, "labels": {"nodes": issue["labels"]}, "authorAssociation": "MEMBER"} for issue in issues]
    return {"data": {"search": {"issueCount": len(nodes), "nodes": nodes}}}


def test_github_owned_reads_sub_issues_and_owner_search_minus_follow_ups(gh, repo):
    gh.answer(
        "api",
        [
            rest_issue(31, "a bug on the branch", labels=("bug",)),
            rest_issue(32, "Owner: D-3", labels=("follow-up",)),
            rest_issue(33, "", state="closed"),
        ],
    )
    gh.answer(
        "api-graphql",
        search_result(
            gh_issue(41, "crash", "Owner: D-3\n", labels=("bug",)),
            gh_issue(42, "other", "Owner: D-31"),  # search matched a word, the Owner line did not
            gh_issue(43, "later", "Owner: D-3", labels=("Follow-Up",)),
            gh_issue(31, "a bug on the branch", "Owner: D-3", labels=("bug",)),
        ),
    )
    owned = github_tracker(repo).owned("D-3", 7)
    assert [issue.number for issue in owned] == [31, 41]
    assert owned[0].url == "https://github.com/acme/widgets/issues/31" and owned[0].labels == ("bug",)
    assert owned[0].owners == () and owned[1].owners == ("D-3",) and owned[1].title == "crash"
    api, search = gh.calls()
    assert api == ["api", "repos/{owner}/{repo}/issues/7/sub_issues?per_page=100"]
    assert search[:3] == ["api", "graphql", "-f"] and search[3].startswith("query=query($q: String!)")
    assert search[4:] == ["-F", 'q="Owner: D-3" in:body repo:{owner}/{repo} is:issue is:open']


def test_github_owned_without_origin_only_searches(gh, repo):
    gh.answer("api-graphql", search_result(gh_issue(41, "crash", "Owner: D-3")))
    assert [issue.number for issue in github_tracker(repo, repo_name="acme/widgets").owned("D-3", None)] == [41]
    [search] = gh.calls()
    assert search[:2] == ["api", "graphql"] and search[-1] == 'q="Owner: D-3" in:body repo:acme/widgets is:issue is:open'


def test_github_owned_names_the_configured_repo_in_the_api_path(gh, repo):
    gh.answer("api", [])
    gh.answer("api-graphql", search_result())
    github_tracker(repo, repo_name="acme/widgets").owned("D-3", 7)
    assert gh.calls()[0] == ["api", "repos/acme/widgets/issues/7/sub_issues?per_page=100"]


def test_github_owned_fails_when_the_sub_issues_cannot_be_read_and_keeps_what_the_search_found(gh, repo):
    gh.fail("api", "gh: Not Found (HTTP 404)\n")  # a GitHub with no sub-issues: the Owner lines still count
    gh.answer("api-graphql", search_result(gh_issue(41, "crash", "Owner: D-3")))
    with pytest.raises(TrackerUnavailable) as failed:
        github_tracker(repo).owned("D-3", 7)
    assert failed.value.reason == "gh api failed: gh: Not Found (HTTP 404)"
    assert [issue.number for issue in failed.value.found] == [41]
    assert [call[:2] for call in gh.calls()] == [["api", "repos/{owner}/{repo}/issues/7/sub_issues?per_page=100"],
                                                 ["api", "graphql"]]


def test_github_owned_keeps_the_sub_issues_when_the_search_fails(gh, repo):
    gh.answer("api", [rest_issue(31, "a sub-issue")])
    gh.fail("api-graphql", "HTTP 502: Bad Gateway (https://api.github.com/graphql)\n")
    with pytest.raises(TrackerUnavailable) as failed:
        github_tracker(repo).owned("D-3", 7)
    assert failed.value.reason == "gh api graphql failed: HTTP 502: Bad Gateway (https://api.github.com/graphql)"
    assert [issue.number for issue in failed.value.found] == [31]


def test_github_owned_names_both_reads_when_both_fail(gh, repo):
    gh.fail("api", "HTTP 502: Bad Gateway\n")
    with pytest.raises(TrackerUnavailable) as failed:
        github_tracker(repo).owned("D-3", 7)
    assert failed.value.reason == "gh api failed: HTTP 502: Bad Gateway; gh api graphql failed: HTTP 502: Bad Gateway"
    assert failed.value.found == ()


# --- backend = "github": issue and apply --------------------------------------------------


def test_github_issue_view_is_parsed(gh, repo):
    gh.answer("issue-view-12", gh_issue(12, "Crash on empty input", "Steps:\n1. {{ x }}\n", state="CLOSED", labels=("bug",)))
    issue = github_tracker(repo, repo_name="acme/widgets").issue(12)
    assert issue == Issue(
        number=12,
        title="Crash on empty input",
        body="Steps:\n1. {{ x }}\n",
        state="closed",
        url="https://github.com/acme/widgets/issues/12",
        labels=("bug",),
    )
    assert gh.calls() == [["issue", "view", "12", "--json", "number,title,body,state,url,labels", "--repo", "acme/widgets"]]


def test_github_issue_with_null_body_reads_as_empty(gh, repo):
    gh.answer("issue-view", {**gh_issue(12), "body": None})
    assert github_tracker(repo).issue(12).body == ""


WHERE = ["--repo", "acme/widgets"]


@pytest.mark.parametrize(
    "disposition, note, argv, applied",
    [
        ("close", "Fixed in D-3; see the test.", ["issue", "close", "12", "--comment", "Fixed in D-3; see the test.", *WHERE], "closed with comment"),
        ("close", "", ["issue", "close", "12", *WHERE], "closed"),
        ("comment", "Partly done: D-3 covers the parser.", ["issue", "comment", "12", "--body", "Partly done: D-3 covers the parser.", *WHERE], "commented"),
    ],
)
def test_github_apply_runs_the_matching_gh_command(gh, repo, disposition, note, argv, applied):
    gh.answer("issue-close", "")
    gh.answer("issue-comment", "https://github.com/acme/widgets/issues/12#issuecomment-1\n")
    assert github_tracker(repo, repo_name="acme/widgets").apply(12, disposition, note) == applied
    assert gh.calls() == [argv]


@pytest.mark.parametrize(("disposition", "verb"), [("close", "close"), ("comment", "comment on")])
def test_github_apply_writes_nothing_without_the_repository_named_in_drover_toml(gh, repo, disposition, verb):
    """Hostile review 15: with `repo = ""` gh takes the repository from `.git/config`, which an agent
    can write (a remote marked `gh-resolved`): finish closed another repository's issue with the
    operator's token. A write names its repository from drover.toml, or does not happen; the
    refusal reads as every backend's (`cannot comment on`, where it said `cannot comment issue`)."""
    with pytest.raises(TrackerUnavailable, match=rf"^cannot {verb} issue #12: set \[tracker\] repo"):
        github_tracker(repo).apply(12, disposition, "Fixed in D-3")
    assert gh.calls() == []


@pytest.mark.parametrize("note, applied", [("Fixed in D-3", "already closed, its comment not written"),
                                           ("", "already closed")])
def test_github_close_of_an_issue_closed_already_says_so(gh, repo, note, applied):
    """gh closes nothing and writes no comment on an issue closed already (someone closed it by hand),
    and exits 0 saying so on stderr: finish recorded 'closed with comment', a comment GitHub never had."""
    gh.answer("issue-close", "", stderr="! Issue acme/widgets#12 (Widgets forget) is already closed\n")
    assert github_tracker(repo, repo_name="acme/widgets").apply(12, "close", note) == applied


@pytest.mark.parametrize("disposition, key", [("close", "issue-close"), ("comment", "issue-comment")])
def test_github_apply_that_does_not_answer_says_it_may_have_written(gh, repo, disposition, key):
    """gh killed at its timeout may have closed or commented already: finish again would write the
    comment a second time, so the reason says to look first."""
    gh.slow(key, 5)
    gh.answer(key, "")
    with pytest.raises(TrackerUnavailable) as slow:
        github_tracker(repo, repo_name="acme/widgets", timeout=0.5).apply(12, disposition, "Fixed in D-3")
    assert slow.value.reason == (f"gh {key.replace('-', ' ')} did not answer within 0.5s, and GitHub may have taken "
                                 "it all the same: look at issue #12 before finish writes it again")


def test_github_apply_keep_writes_nothing(gh, repo):
    assert github_tracker(repo).apply(12, "keep", "still relevant") == ""
    assert gh.calls() == []


def test_github_apply_passes_text_verbatim_without_a_shell(gh, repo):
    gh.answer("issue-comment", "")
    note = "it's \"done\" $(touch pwned) `id` ; rm -rf ~\nsecond line"
    github_tracker(repo, repo_name="acme/widgets").apply(12, "comment", note)
    assert gh.calls() == [["issue", "comment", "12", "--body", note, *WHERE]]
    assert not (repo / "pwned").exists()


def test_github_apply_comment_without_a_note_asks_nothing(gh, repo):
    with pytest.raises(TrackerUnavailable, match="the disposition carries no note"):
        github_tracker(repo, repo_name="acme/widgets").apply(12, "comment", "")
    assert gh.calls() == []


def test_github_apply_unknown_disposition_is_a_bug(gh, repo):
    with pytest.raises(ValueError, match="unknown disposition"):
        github_tracker(repo).apply(12, "reopen", "")
    assert gh.calls() == []


def test_github_apply_failure_is_unavailable(gh, repo):
    gh.fail("issue-close", "GraphQL: Could not resolve to an issue or pull request with the number of 12. (repository.issue)\n")
    with pytest.raises(TrackerUnavailable) as failed:
        github_tracker(repo, repo_name="acme/widgets").apply(12, "close", "done")
    assert failed.value.reason == (
        "gh issue close failed: GraphQL: Could not resolve to an issue or pull request with the number of 12. "
        "(repository.issue)"
    )


# --- backend = "github": every failure is a reason, never a crash -------------------------


def calls_on(tracker: GitHubTracker):
    """Every read and write the tracker offers, as thunks."""
    return [
        lambda: tracker.follow_ups(["D-3"]),
        lambda: tracker.owned("D-3", 7),
        lambda: tracker.owned("D-3", None),
        lambda: tracker.issue(12),
        lambda: tracker.apply(12, "close", "done"),
        lambda: tracker.apply(12, "comment", "done"),
    ]


def test_github_without_gh_installed_is_unavailable(repo, tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    tracker = github_tracker(repo, repo_name="acme/widgets")
    for call in calls_on(tracker):
        with pytest.raises(TrackerUnavailable) as missing:
            call()
        assert missing.value.reason == "gh is not installed"
    assert tracker.probe() == "gh is not installed"


def test_github_failing_gh_is_unavailable_with_its_words(gh, repo):
    for key in ("api", "issue-list", "issue-view", "issue-close", "issue-comment"):
        gh.fail(key, "HTTP 502: Bad Gateway (https://api.github.com/graphql)\n")
    for call in calls_on(github_tracker(repo, repo_name="acme/widgets")):
        with pytest.raises(TrackerUnavailable) as failed:
            call()
        assert failed.value.reason.endswith(" failed: HTTP 502: Bad Gateway (https://api.github.com/graphql)")


def test_github_failure_without_words_reports_the_exit_status(gh, repo):
    gh.fail("issue-view", "")
    with pytest.raises(TrackerUnavailable) as failed:
        github_tracker(repo).issue(12)
    assert failed.value.reason == "gh issue view failed: exit status 1"


@pytest.mark.parametrize(
    "key, output, reason",
    [
        ("issue-list", "<html>rate limited</html>", "gh issue list returned output that is not JSON"),
        ("issue-list", '{"number": 1}', "gh issue list returned JSON that is not a list of issues"),
        ("issue-list", '[{"title": "no number"}]', "gh issue list returned JSON that is not an issue"),
        ("issue-view", "", "gh issue view returned output that is not JSON"),
        ("issue-view", "[]", "gh issue view returned JSON that is not an issue"),
        ("issue-view", '{"number": 12, "body": 5}', "gh issue view returned JSON that is not an issue"),
        ("issue-view", '{"number": 99, "title": "another", "body": "", "state": "OPEN", "url": "", "labels": []}',
         "gh issue view returned issue #99, not #12"),
        ("api", '{"message": "Not Found"}', "gh api returned JSON that is not a list of issues; "
                                           "gh api graphql returned JSON that is not a search's result"),
        # what Python's json raises past JSONDecodeError: nesting past its depth, a number past its digits
        ("issue-list", "[" * 100_000, "gh issue list returned output that is not JSON"),
        ("issue-view", '{"number": ' + "9" * 5000 + "}", "gh issue view returned output that is not JSON"),
    ],
)
def test_github_bad_json_is_unavailable(gh, repo, key, output, reason):
    gh.answer(key, output)
    tracker = github_tracker(repo)
    call = {
        "issue-list": lambda: tracker.follow_ups(["D-3"]),
        "issue-view": lambda: tracker.issue(12),
        "api": lambda: tracker.owned("D-3", 7),
    }[key]
    with pytest.raises(TrackerUnavailable) as bad:
        call()
    assert bad.value.reason == reason


def test_github_slow_gh_times_out(gh, repo):
    gh.slow("issue-view", 5)
    gh.answer("issue-view", gh_issue(12))
    with pytest.raises(TrackerUnavailable) as slow:
        github_tracker(repo, timeout=0.5).issue(12)
    assert slow.value.reason == "gh issue view did not answer within 0.5s"


# --- backend = "github": probe ------------------------------------------------------------


def test_github_probe_checks_login_and_repository(gh, repo):
    gh.answer("auth-status", "github.com\n  ✓ Logged in to github.com account operator\n")
    gh.answer("repo-view", {"nameWithOwner": "acme/widgets"})
    assert github_tracker(repo, repo_name="acme/widgets").probe() == ""
    assert gh.calls() == [["auth", "status"], ["repo", "view", "acme/widgets", "--json", "nameWithOwner"]]


def test_github_probe_reports_a_bad_login_in_one_line(gh, repo):
    gh.fail(
        "auth-status",
        "github.com\n  X Failed to log in to github.com using token (GH_TOKEN)\n  - Active account: true\n",
    )
    assert github_tracker(repo).probe() == (
        "gh auth status failed: X Failed to log in to github.com using token (GH_TOKEN)"
    )


def test_github_probe_reports_a_checkout_gh_cannot_map_to_a_repository(gh, repo):
    gh.answer("auth-status", "")
    gh.fail("repo-view", "none of the git remotes configured for this repository point to a known GitHub host.\n")
    assert github_tracker(repo).probe() == (
        "gh repo view failed: none of the git remotes configured for this repository point to a known GitHub host."
    )
    assert gh.calls()[-1] == ["repo", "view", "--json", "nameWithOwner"]


# --- the registry ---------------------------------------------------------------------------

def test_config_accepts_exactly_the_registered_backends(tmp_path):
    from drover.config import parse_config
    from drover.errors import ConfigError
    from drover.trackers import BACKENDS

    assert list(BACKENDS)[:3] == ["none", "file", "github"]  # the shipped three, in the order docs list them
    for name, backend in BACKENDS.items():
        config = parse_config({"tracker": {"backend": name}})
        opened = open_tracker(config.tracker, tmp_path)
        assert type(opened) is backend and opened.name == name
    with pytest.raises(ConfigError) as raised:
        parse_config({"tracker": {"backend": "jira"}})
    assert str(raised.value) == f"drover.toml: [tracker] backend: expected one of {', '.join(BACKENDS)}, not 'jira'"


def test_only_a_tracker_that_writes_back_is_asked_to_apply(tmp_path):
    from drover.trackers import BACKENDS

    shipped = ("none", "file", "github")
    assert {name: BACKENDS[name].writes_back for name in shipped} == {"none": False, "file": False, "github": True}
    assert {name: BACKENDS[name].reads_issues for name in shipped} == {"none": False, "file": True, "github": True}
