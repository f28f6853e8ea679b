"""backend = "github": issues read and written through the `gh` CLI, never through a shell."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from drover.trackers.base import Issue, TrackerUnavailable, check_disposition, owners_in, TrackerSettings

GH_TIMEOUT = 30.0  # seconds per gh call; a hung network must not hang a prompt
LIST_LIMIT = 1000  # gh issue list pages up to this many; reaching it means the list may be cut
SUB_ISSUES_PAGE = 100  # GitHub allows at most 100 sub-issues per parent: one page holds them all
ISSUE_FIELDS = "number,title,body,state,url,labels"
# gh must never stop to ask a question: drover runs it without a terminal.
GH_ENV = {"GH_PROMPT_DISABLED": "1", "GH_NO_UPDATE_NOTIFIER": "1"}


class GitHubTracker:
    name = "github"
    writes_back = True
    reads_issues = True

    @classmethod
    def from_config(cls, config: TrackerSettings, root: Path) -> GitHubTracker:
        return cls(config.repo, config.follow_up_label, root)

    def __init__(self, repo: str, follow_up_label: str, root: Path, timeout: float = GH_TIMEOUT):
        self.repo = repo
        self.label = follow_up_label
        self.root = root  # gh infers the repository from this checkout's remote when repo is ""
        self.timeout = timeout

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
        knows it asked on `item_id`'s behalf.
        """
        found: dict[int, Issue] = {}
        if origin:
            where = self.repo or "{owner}/{repo}"  # gh fills the placeholders from the checkout
            path = f"repos/{where}/issues/{origin}/sub_issues?per_page={SUB_ISSUES_PAGE}"
            for issue in self._issues(self._json(["api", path], "gh api"), "gh api"):
                if issue.state == "open":
                    found.setdefault(issue.number, issue)
        # GitHub's search matches words, not lines: D-3 can match D-31; the Owner lines decide.
        searched = self._list("--search", f'"Owner: {item_id}" in:body')
        for issue in searched:
            if item_id in issue.owners:
                found.setdefault(issue.number, issue)
        label = self.label.casefold()  # GitHub label names compare without case
        owned = [
            issue
            for number, issue in sorted(found.items())
            if label not in (name.casefold() for name in issue.labels)
        ]
        if len(searched) >= LIST_LIMIT:
            raise TrackerUnavailable(
                f"gh issue list found {LIST_LIMIT} issues naming Owner: {item_id}, its limit: "
                "the list may be incomplete",
                found=owned,
            )
        return owned

    def issue(self, number: int) -> Issue:
        """Issue `number` read fresh with `gh issue view`."""
        data = self._json(["issue", "view", str(number), "--json", ISSUE_FIELDS, *self._repo()], "gh issue view")
        return _issue(data, "gh issue view")

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
            raise TrackerUnavailable(f"cannot {disposition} issue #{number}: set [tracker] repo = \"owner/name\" in "
                                     "drover.toml (gh would take the repository from .git/config, which agents can write)")
        if disposition == "close":
            comment = ["--comment", note] if note else []
            self._run(["issue", "close", str(number), *comment, *self._repo()], "gh issue close")
            return "closed with comment" if note else "closed"
        if not note:
            raise TrackerUnavailable(f"cannot comment on issue #{number}: the disposition carries no note")
        self._run(["issue", "comment", str(number), "--body", note, *self._repo()], "gh issue comment")
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
        except json.JSONDecodeError:
            raise TrackerUnavailable(f"{what} returned output that is not JSON") from None

    def _run(self, args: list[str], what: str) -> str:
        """gh's stdout; every way gh can fail becomes TrackerUnavailable naming the call."""
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
            raise TrackerUnavailable(f"{what} did not answer within {self.timeout:g}s") from None
        except OSError as exc:
            raise TrackerUnavailable(f"gh could not be run: {exc.strerror}") from None
        if done.returncode != 0:
            raise TrackerUnavailable(f"{what} failed: {_first_sentence(done.stderr or done.stdout, done.returncode)}")
        return done.stdout


def _first_sentence(output: str, status: int) -> str:
    """The line of gh's error output worth showing: the first with words in it, not a bare host name."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if " " in line:
            return line
    return lines[0] if lines else f"exit status {status}"


def _issue(data: Any, what: str) -> Issue:
    """An Issue from gh's JSON (`gh issue` fields) or the REST API's (`gh api`)."""
    if not isinstance(data, dict) or not isinstance(data.get("number"), int):
        raise TrackerUnavailable(f"{what} returned JSON that is not an issue")
    body = data.get("body") or ""
    if not isinstance(body, str):
        raise TrackerUnavailable(f"{what} returned JSON that is not an issue")
    labels = tuple(
        label.get("name", "") if isinstance(label, dict) else str(label) for label in data.get("labels") or ()
    )
    return Issue(
        number=data["number"],
        title=data.get("title") or "",
        body=body,
        state=(data.get("state") or "").lower(),
        # the REST API's `url` is the API's own address; `gh issue` fields have only `url`
        url=data.get("html_url") or data.get("url") or "",
        labels=labels,
        owners=owners_in(body),
    )
