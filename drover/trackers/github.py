"""backend = "github": issues read and written through the `gh` CLI, never through a shell."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from drover.errors import headline, whole_text
from drover.trackers.base import Issue, TrackerUnavailable, cannot_apply, check_disposition, owners_in, TrackerSettings

if TYPE_CHECKING:
    import subprocess

GH_TIMEOUT = 30.0  # seconds per gh call; a hung network must not hang a prompt
LIST_LIMIT = 1000  # gh issue list pages up to this many; reaching it means the list may be cut
SUB_ISSUES_PAGE = 100  # GitHub allows at most 100 sub-issues per parent: one page holds them all
SEARCH_PAGE = 100  # the most one page of GitHub's search holds; more issues naming one id means the list is cut
# GitHub's issue search, with what _issue reads and each author's association to the repository
SEARCH_QUERY = (
    "query($q: String!) { search(query: $q, type: ISSUE, first: %d) { issueCount nodes { ... on Issue {"
    " number title body state url authorAssociation labels(first: 100) { nodes { name } } } } } }" % SEARCH_PAGE
)
# The author associations of people the repository's owner let in: the owner, a member of its
# organisation, an invited collaborator. CONTRIBUTOR (a merged pull request), FIRST_TIME_CONTRIBUTOR,
# FIRST_TIMER, MANNEQUIN and NONE are anyone on GitHub (docs/trackers.md, "Whose words").
MEMBERS = frozenset({"OWNER", "MEMBER", "COLLABORATOR"})
ISSUE_FIELDS = "number,title,body,state,url,labels"
# gh must never stop to ask a question: drover runs it without a terminal.
GH_ENV = {"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"}


class GitHubTracker:
    name = "github"
    writes_back = True
    reads_issues = True

    @classmethod
    def from_config(cls, config: TrackerSettings, root: Path) -> GitHubTracker:
        return cls(config.repo, config.follow_up_label, root, authors=config.authors)

    def __init__(self, repo: str, follow_up_label: str, root: Path, timeout: float = GH_TIMEOUT, *,
                 authors: str = "members"):
        self.repo = repo
        self.label = follow_up_label
        self.root = root  # gh infers the repository from this checkout's remote when repo is ""
        self.timeout = timeout
        self.authors = authors  # [tracker] authors: "members", or "anyone"

    def follow_ups(self, owner_ids: Sequence[str]) -> list[Issue]:
        """Open issues with the follow-up label (filtered by GitHub) and an Owner line naming an id."""
        wanted = set(owner_ids)
        if not wanted:
            return []
        issues = self._list("--label", self.label)
        mine = [issue for issue in issues if wanted.intersection(issue.owners)]
        if len(issues) >= LIST_LIMIT:
            raise TrackerUnavailable(
                f"gh issue list returned {LIST_LIMIT} open issues labelled {self.label}, "
                "its limit: the list may be incomplete",
                found=mine,
            )
        return mine

    def owned(self, item_id: str, origin: int | None) -> list[Issue]:
        """Open sub-issues of `origin` and open issues whose body says `Owner: <item_id>`, minus follow-ups.

        `owners` holds only what Owner lines say, so a sub-issue may name none: the caller
        knows it asked on `item_id`'s behalf. An issue only the search found, opened by someone
        the repository has not let in (MEMBERS), comes with its number, address and why, and no
        word of its author's (`[tracker] authors = "members"`, the default): anyone can open an
        issue saying `Owner: D-1`, while a sub-issue link or a label takes triage access.
        """
        found: dict[int, Issue] = {}
        reasons: list[str] = []  # each read that failed; the other's rows still come back, in `found`
        if origin:
            where = self.repo or "{owner}/{repo}"  # gh fills the placeholders from the checkout
            path = f"repos/{where}/issues/{origin}/sub_issues?per_page={SUB_ISSUES_PAGE}"
            try:
                subs = self._issues(self._json(["api", path], "gh api"), "gh api")
            except TrackerUnavailable as exc:  # a host with no sub-issues (404) still has the search
                subs, reasons = [], [exc.reason]
            for issue in subs:
                if issue.state == "open":
                    found.setdefault(issue.number, issue)
        # GitHub's search matches words, not lines: D-3 can match D-31; the Owner lines decide.
        try:
            searched, cut = self._search(item_id)
        except TrackerUnavailable as exc:
            searched, cut = [], exc.reason
        reasons += [cut] if cut and cut not in reasons else []  # gh missing says so once
        for issue, association in searched:
            if item_id in issue.owners and issue.number not in found:
                trusted = self.authors == "anyone" or association in MEMBERS
                found[issue.number] = issue if trusted else _left_out(issue, association)
        label = self.label.casefold()  # GitHub label names compare without case
        owned = [
            issue
            for number, issue in sorted(found.items())
            if label not in (name.casefold() for name in issue.labels)
        ]
        if reasons:
            raise TrackerUnavailable("; ".join(reasons), found=owned)
        return owned

    def _search(self, item_id: str) -> tuple[list[tuple[Issue, str]], str]:
        """The open issues GitHub's search finds `"Owner: <item_id>"` in, each with its author's
        association to the repository (`gh issue list --json` has no such field), in one GraphQL
        call, the API and budget `gh issue list --search` spends; and why the list may be cut
        ("" when it is whole)."""
        where = self.repo or "{owner}/{repo}"  # gh fills the placeholders of a -F value from the checkout
        query = f'"Owner: {item_id}" in:body repo:{where} is:issue is:open'
        what = "gh api graphql"
        data = self._json(["api", "graphql", "-f", f"query={SEARCH_QUERY}", "-F", f"q={query}"], what)
        try:
            result = data["data"]["search"]
            page = list(result["nodes"])
            # a node that is no Issue (a pull request) has no fields: `... on Issue` asks for none of it
            nodes = [{**node, "labels": node.get("labels", {}).get("nodes")} for node in page if node]
        except (TypeError, KeyError, AttributeError):
            raise TrackerUnavailable(f"{what} returned JSON that is not a search's result") from None
        searched = [(_issue(node, what), str(node.get("authorAssociation") or "")) for node in nodes]
        total = result.get("issueCount")
        if isinstance(total, int) and total > len(page):
            return searched, (f"GitHub's search found {total} issues naming Owner: {item_id}, more than the "
                              f"{SEARCH_PAGE} one page holds: the list may be incomplete")
        return searched, ""

    def issue(self, number: int) -> Issue:
        """Issue `number` read fresh with `gh issue view`."""
        data = self._json(["issue", "view", str(number), "--json", ISSUE_FIELDS, *self._repo()], "gh issue view")
        found = _issue(data, "gh issue view")
        if found.number != number:  # another issue's words would go out under this one's number
            raise TrackerUnavailable(f"gh issue view returned issue #{found.number}, not #{number}")
        return found

    def intake(self, number: int) -> tuple[Issue, str]:
        """Issue `number`, read fresh, named by its number and address."""
        found = self.issue(number)
        return found, f"issue #{found.number}" + (f" ({found.url})" if found.url else "")

    def apply(self, number: int, disposition: str, note: str) -> str:
        """close (the note as its comment) or comment on issue `number`; keep writes nothing."""
        check_disposition(disposition)
        if disposition == "keep":
            return ""
        if not self.repo:
            # gh would take the repository from .git/config (a remote marked `gh-resolved`, then
            # upstream, github, origin), which every agent can write: a close or a comment with the
            # operator's token goes only where drover.toml says (hostile review 15)
            raise cannot_apply(number, disposition, "set [tracker] repo = \"owner/name\" in drover.toml (gh would "
                               "take the repository from .git/config, which agents can write)")
        # a write that did not answer may have been made: finish again would make a comment twice
        late = f", and GitHub may have taken it all the same: look at issue #{number} before finish writes it again"
        if disposition == "close":
            comment = ["--comment", note] if note else []
            said = self._call(["issue", "close", str(number), *comment, *self._repo()], "gh issue close", late=late).stderr
            if said.rstrip().endswith("is already closed"):  # gh then closes nothing, comments nothing, exits 0
                return "already closed, its comment not written" if note else "already closed"
            return "closed with comment" if note else "closed"
        if not note:
            raise TrackerUnavailable(f"cannot comment on issue #{number}: the disposition carries no note")
        self._call(["issue", "comment", str(number), "--body", note, *self._repo()], "gh issue comment", late=late)
        return "commented"

    def probe(self) -> str:
        """Empty when gh is installed, logged in and can see the repository; else why not."""
        try:
            self._run(["auth", "status"], "gh auth status")
            self._run(["repo", "view", *([self.repo] if self.repo else []), "--json", "nameWithOwner"], "gh repo view")
        except TrackerUnavailable as exc:
            return exc.reason
        return ""

    def _repo(self) -> list[str]:
        return ["--repo", self.repo] if self.repo else []

    def _list(self, *query: str) -> list[Issue]:
        argv = ["issue", "list", *query, "--state", "open", "--json", ISSUE_FIELDS, "--limit", str(LIST_LIMIT)]
        return self._issues(self._json([*argv, *self._repo()], "gh issue list"), "gh issue list")

    def _issues(self, data: Any, what: str) -> list[Issue]:
        if not isinstance(data, list):
            raise TrackerUnavailable(f"{what} returned JSON that is not a list of issues")
        return [_issue(entry, what) for entry in data]

    def _json(self, args: list[str], what: str) -> Any:
        output = self._run(args, what)
        try:
            return json.loads(output)
        except (ValueError, RecursionError):  # past JSONDecodeError: a number of too many digits, nesting too deep
            raise TrackerUnavailable(f"{what} returned output that is not JSON") from None

    def _run(self, args: list[str], what: str) -> str:
        """gh's stdout; every way gh can fail becomes TrackerUnavailable naming the call."""
        return self._call(args, what).stdout

    def _call(self, args: list[str], what: str, *, late: str = "") -> subprocess.CompletedProcess[str]:
        """gh's run, ended well; every way gh can fail becomes TrackerUnavailable naming the call (`late`
        added when it did not answer in time)."""
        import subprocess  # here: a project whose tracker is not gh never loads it

        try:
            done = subprocess.run(
                ["gh", *args],
                cwd=self.root,
                env={**os.environ, **GH_ENV},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=self.timeout,
            )
        except FileNotFoundError:
            raise TrackerUnavailable("gh is not installed") from None
        except subprocess.TimeoutExpired:
            raise TrackerUnavailable(f"{what} did not answer within {self.timeout:g}s{late}") from None
        except OSError as exc:
            raise TrackerUnavailable(f"gh could not be run: {exc.strerror}") from None
        if done.returncode != 0:
            raise TrackerUnavailable(f"{what} failed: {_first_sentence(done.stderr or done.stdout, done.returncode)}")
        return done


def _first_sentence(output: str, status: int) -> str:
    """The line of gh's error output worth showing: the first with words in it, not a bare host name."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if " " in line:
            return line
    return lines[0] if lines else f"exit status {status}"


def _issue(data: Any, what: str) -> Issue:
    """An Issue from gh's JSON (`gh issue` fields, the GraphQL search's) or the REST API's; the title, labels and
    address one line each (headline()), the body whole text: they are a stranger's words, bound for a prompt."""
    if not isinstance(data, dict) or type(data.get("number")) is not int:
        raise TrackerUnavailable(f"{what} returned JSON that is not an issue")
    # the REST API's `url` is the API's own address; `gh issue` fields have only `url`
    texts = [data.get(key) or "" for key in ("title", "body", "state")] + [data.get("html_url") or data.get("url") or ""]
    labels = data.get("labels") or []
    names = [label.get("name") or "" if isinstance(label, dict) else label for label in labels] if isinstance(labels, list) else None
    if names is None or not all(isinstance(text, str) for text in [*texts, *names]):
        raise TrackerUnavailable(f"{what} returned JSON that is not an issue")
    title, body, state, url = texts
    body = whole_text(body)
    return Issue(
        number=data["number"],
        title=headline(title),
        body=body,
        state=headline(state).lower(),
        url=headline(url),
        labels=tuple(headline(name) for name in names),
        owners=owners_in(body),
    )


def _left_out(issue: Issue, association: str) -> Issue:
    """`issue` with no word its author wrote (title, text): its number, address, state, labels (a
    triager's words) and Owner ids, and why."""
    said = headline(association) or "no association"  # gh's text: one line, escapes shown
    why = (f"left out: its author is not the repository's owner, a member or a collaborator (GitHub says {said}), "
           'so drover shows no word of it ([tracker] authors = "members")')
    return Issue(number=issue.number, state=issue.state, url=issue.url, labels=issue.labels, owners=issue.owners,
                 body_unavailable=why)
