"""The template data builder: every field, and every branch of its semantics, per slot."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from drover.prompts import data as template_data
from drover.items import file as itemfile
from drover.ledger import catalogue, writes
from drover import prompts as templates
from drover.prompts.data import FIELD_NAMES, SLOTS, TemplateData, build, field_schema
from drover.prompts.fields import field_explanations
from drover.errors import UsageError
from drover.ledger.db import Ledger
from drover.ledger.rows import NewRun, Run
from drover.ledger.project import open_project
from drover.trackers import Issue, TrackerUnavailable
from drover.trackers.none import NOT_CONFIGURED
from helpers import git

FIXTURE = Path(__file__).parent / "fixtures" / "every_field.tmpl"
BODY = "## Requirements\n\n1. Parse `src/app.py` input.\n"


class Env:
    """A project in the test's git repository, its ledger open; reopen() after config changes."""

    def __init__(self, root: Path):
        self.root = root
        self.configure()

    def configure(self, extra: str = "") -> None:
        (self.root / "drover.toml").write_text('[project]\nprefix = "D"\n' + extra)
        (self.root / "items").mkdir(exist_ok=True)
        self.project = open_project(self.root)
        if not hasattr(self, "ledger"):
            self.ledger = Ledger(self.project.ledger_path)

    def item(self, item_id: str, body: str = BODY, **meta) -> Path:
        front = {"id": item_id, "title": meta.pop("title", f"Title of {item_id}"), "kind": "feature", **meta}
        path = self.project.item_path(item_id)
        path.write_text("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n\n" + body)
        return path

    def run(self, item_id: str, slot: str = "implement", agent: str = "claude", finished: bool = True) -> Run:
        run_id = f"{item_id}-{slot}-{len(self.ledger.runs(item_id)) + 1}"
        log = self.project.runs_dir / run_id / "agent.log"
        self.ledger.start_run(NewRun(id=run_id, item=item_id, slot=slot, agent=agent, log_path=str(log)))
        if finished:
            self.ledger.finish_run(run_id, 0, "exited")
        return self.ledger.run(run_id)

    def build(self, item_id: str, slot: str = "implement", **kwargs) -> TemplateData:
        kwargs.setdefault("tracker", FakeTracker())
        return build(self.project, self.ledger, item_id, slot, **kwargs)


class FakeTracker:
    """Answers from canned rows; records every call; `fail` makes a method raise."""

    name = "fake"

    def __init__(self, follow_ups=(), owned=None, issues=None, fail=()):
        self._follow_ups = list(follow_ups)
        self._owned = owned or {}
        self._issues = issues or {}
        self.fail = dict(fail)
        self.calls: list[tuple] = []

    def _maybe_fail(self, method: str) -> None:
        if method in self.fail:
            reason, found = self.fail[method]
            raise TrackerUnavailable(reason, found=found)

    def follow_ups(self, owner_ids):
        self.calls.append(("follow_ups", tuple(owner_ids)))
        self._maybe_fail("follow_ups")
        return [row for row in self._follow_ups if set(row.owners) & set(owner_ids)]

    def owned(self, item_id, origin):
        self.calls.append(("owned", item_id, origin))
        self._maybe_fail(f"owned:{item_id}")
        return list(self._owned.get(item_id, []))

    def issue(self, number):
        self.calls.append(("issue", number))
        if number not in self._issues:
            raise TrackerUnavailable(f"issue #{number} is not served")
        return self._issues[number]

    def probe(self):
        return ""


class Untouchable(FakeTracker):
    def __getattribute__(self, name):
        if name in ("follow_ups", "owned", "issue", "probe"):
            raise AssertionError(f"the tracker was asked for {name}")
        return super().__getattribute__(name)


@pytest.fixture
def env(repo):
    made = Env(repo)
    yield made
    made.ledger.close()


# --- every slot: the item --------------------------------------------------------------------


def test_item_fields(env):
    body = "## Requirements\n\n1. One.\n\n## Guarantees\n\n- Never drop input.\n"
    env.item("D-1", body=body, title="Parse input", kind="bug", migration="yes", flag="no", count=3)
    data = env.build("D-1")
    assert (data.Id, data.Title, data.Kind, data.Path) == ("D-1", "Parse input", "bug", "items/D-1.md")
    assert data.Body == body.strip("\n")
    assert data.Meta["migration"] == "yes" and data.Meta["count"] == 3
    assert data.Guarantees == "- Never drop input."
    assert data.Changes == "" and not data.Cleared
    assert data.ChangesHeading == itemfile.CHANGES_HEADING
    assert data.Get("kind") == "bug" and data.Get("count") == 3 and data.Get("undeclared") == ""
    assert data.Is("migration") and not data.Is("flag") and not data.Is("undeclared")


def test_a_frontmatter_value_that_is_yaml_null_prints_empty(env):
    """`x:` and `x: ~` are YAML's null: `{{ Meta["x"] }}` printed `None`, where `Get("x")` and a key
    the item does not set print nothing. Jinja's finalize prints None as nothing; a test for it
    (`is none`) still sees None, and a list holding one prints as Jinja prints lists."""
    path = env.item("D-1")
    path.write_text(path.read_text().replace("kind: feature\n", "kind: feature\nowner:\nteam: ~\nlevels: [1, null]\n", 1))
    data = env.build("D-1")
    assert data.Meta["owner"] is None and data.Meta["team"] is None
    source = ('[{{ Meta["owner"] }}][{{ Meta.team }}][{{ Get("owner") }}][{{ Meta["unset"] }}]'
              '<% if Meta.owner is none %>null<% endif %>[{{ Meta.levels }}][{{ Meta.owner | default("x") }}]')
    text = templates.render("implement", data, root=env.root, config=env.project.config, explicit=source).text
    assert text == "[][][][]null[[1, None]][]"


@pytest.mark.parametrize("value, expected", [("yes", True), ("true", True), (True, True), ("on", True),
                                             ("no", False), ("false", False), (False, False), ("", False)])
def test_is_reads_yes_words_as_booleans(env, value, expected):
    env.item("D-1", migration=value)
    assert env.build("D-1").Is("migration") is expected


def test_path_is_relative_to_the_root_from_a_subfolder(env, monkeypatch):
    env.item("D-1")
    (env.root / "src").mkdir()
    monkeypatch.chdir(env.root / "src")
    assert env.build("D-1").Path == "items/D-1.md"


def test_guidance_from_the_slot_agent_and_overridden(env):
    env.configure('[agent]\nguidance = "lean"\n[agent.review]\nguidance = "detailed"\n')
    env.item("D-1")
    assert env.build("D-1", "implement").Guidance == "lean"
    assert env.build("D-1", "review").Guidance == "detailed"
    assert env.build("D-1", "review", guidance="lean").Guidance == "lean"
    assert env.build("D-1", "branch").Guidance == "lean"


def test_unknown_slot_guidance_and_unreadable_item_are_errors(env):
    env.item("D-1")
    with pytest.raises(UsageError, match="unknown slot"):
        env.build("D-1", "deploy")
    with pytest.raises(UsageError, match="--guidance"):
        env.build("D-1", guidance="verbose")
    env.item("D-2", body="   \n")
    with pytest.raises(Exception, match=itemfile.NO_BODY):
        env.build("D-2")


# --- rounds ------------------------------------------------------------------------------------


def test_trail_and_earlier_until_cleared(env):
    env.item("D-1")
    data = env.build("D-1")
    assert data.Trail == () and data.Earlier == () and data.Rounds == 0 and not data.Repeated
    writes.request_changes(env.project, env.ledger, "D-1", "# First finding\n\ndetail one\n")
    data = env.build("D-1")
    assert [r.N for r in data.Trail] == [1] and data.Earlier == ()
    assert data.Trail[0].Headline == "First finding" and data.Trail[0].By == "Test Operator"
    assert data.Trail[0].At and data.Trail[0].Path == ""
    assert "detail one" in data.Changes and not data.Cleared
    writes.request_changes(env.project, env.ledger, "D-1", "Second finding\n")
    data = env.build("D-1")
    assert [r.N for r in data.Trail] == [1, 2]
    assert [r.Headline for r in data.Earlier] == ["First finding"]
    assert data.Changes == "Second finding" and data.Repeated and data.Rounds == 2
    writes.close_changes(env.project, env.ledger, "D-1", note="fixed")
    data = env.build("D-1")
    assert data.Cleared and [r.N for r in data.Earlier] == [1, 2] and data.Trail == data.Earlier


def test_round_path_is_the_review_runs_log_relative(env, monkeypatch):
    env.item("D-1")
    run = env.run("D-1", slot="review", finished=False)
    monkeypatch.setenv("DROVER_RUN", run.id)
    writes.request_changes(env.project, env.ledger, "D-1", "Finding\n")
    assert env.build("D-1").Trail[0].Path == f".drover/runs/{run.id}/agent.log"


def test_repeated_and_capped_at_their_thresholds(env):
    env.configure("[review]\nmax_rounds = 2\n")
    env.item("D-1")
    writes.request_changes(env.project, env.ledger, "D-1", "one\n")
    data = env.build("D-1", "review")
    assert (data.Rounds, data.MaxReviewRounds, data.Repeated, data.Capped) == (1, 2, False, False)
    writes.request_changes(env.project, env.ledger, "D-1", "two\n")
    data = env.build("D-1", "review")
    assert (data.Rounds, data.Repeated, data.Capped) == (2, True, True)
    assert env.build("D-1", "implement").MaxReviewRounds == 2


def test_runs_reviews_and_audits_are_counted_apart(env):
    env.item("D-1")
    env.run("D-1")
    env.run("D-1")
    env.run("D-1", slot="review")
    env.run("D-1", slot="draft")
    writes.audit(env.project, env.ledger, "D-1", "claimed", by="claude")
    data = env.build("D-1")
    assert (data.Runs, data.Reviews, data.Audits) == (2, 1, 1)


# --- deps --------------------------------------------------------------------------------------


def test_deps_partition_and_unreadable_wins(env):
    env.item("D-1", title="Merged one")
    env.item("D-2", title="Pending one")
    env.item("D-3", title="Done but broken")
    writes.audit(env.project, env.ledger, "D-3", "reviewed", by="codex")
    env.ledger.mark_done("D-1")
    env.ledger.mark_done("D-3")
    env.item("D-3", body="  \n", title="Done but broken")  # done in the ledger, no body in the tree
    env.item("D-9", deps=["D-1", "D-2", "D-3", "D-4", "nonsense"])
    data = env.build("D-9")
    by_id = {dep.Id: dep for dep in data.Deps}
    assert [dep.Id for dep in data.Deps] == ["D-1", "D-2", "D-3", "D-4", "nonsense"]
    assert [dep.Id for dep in data.MergedDeps] == ["D-1"]
    assert [dep.Id for dep in data.UnmergedDeps] == ["D-2"]
    assert [dep.Id for dep in data.UnreadableDeps] == ["D-3", "D-4", "nonsense"]
    assert by_id["D-1"].Title == "Merged one" and by_id["D-1"].Path == "items/D-1.md" and by_id["D-1"].Done
    assert by_id["D-3"].Done and by_id["D-3"].Unreadable == itemfile.NO_BODY
    assert by_id["D-3"].Level == "reviewed" and by_id["D-3"].By == "codex"
    assert by_id["D-4"].Unreadable == itemfile.MISSING and not by_id["D-4"].Done
    assert by_id["nonsense"].Unreadable == "does not resolve to an item id" and by_id["nonsense"].Path == ""
    for unreadable in (itemfile.SHELVED,):
        env.item("D-2", shelved="yes")
        assert {dep.Id: dep.Unreadable for dep in env.build("D-9").Deps}["D-2"] == unreadable


def _dep_weakness(env, setup) -> template_data.Dep:
    env.item("D-1")
    env.item("D-2", deps=["D-1"])
    setup()
    (dep,) = env.build("D-2").Deps
    return dep


def test_weak_when_unaudited(env):
    dep = _dep_weakness(env, lambda: None)
    assert (dep.Level, dep.By, dep.Weak) == ("", "", True)


def test_weak_when_only_claimed(env):
    def setup():
        env.run("D-1", agent="claude")
        writes.audit(env.project, env.ledger, "D-1", "claimed", by="claude")

    dep = _dep_weakness(env, setup)
    assert (dep.Level, dep.By, dep.Weak) == ("claimed", "claude", True)


def test_weak_when_audited_by_its_own_author(env):
    def setup():
        env.run("D-1", agent="claude")
        writes.audit(env.project, env.ledger, "D-1", "verified", by="claude")

    dep = _dep_weakness(env, setup)
    assert (dep.Level, dep.By, dep.Weak) == ("verified", "claude", True)


def test_an_audit_given_before_any_author_was_recorded_is_independent(env):
    def setup():
        writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex")
        env.run("D-1", agent="claude")  # authorship recorded only after the audit, and not codex

    dep = _dep_weakness(env, setup)
    assert (dep.Level, dep.By, dep.Weak) == ("reviewed", "codex", False)


def test_not_weak_when_an_independent_pass_reviewed_it(env):
    def setup():
        env.run("D-1", agent="claude")
        writes.audit(env.project, env.ledger, "D-1", "claimed", by="claude")
        writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex")

    dep = _dep_weakness(env, setup)
    assert (dep.Level, dep.By, dep.Weak) == ("reviewed", "codex", False)


def test_best_audit_is_the_highest_level_then_the_newest(env):
    def setup():
        env.run("D-1", agent="claude")
        writes.audit(env.project, env.ledger, "D-1", "verified", by="codex")
        writes.audit(env.project, env.ledger, "D-1", "reviewed", by="gemini")
        writes.audit(env.project, env.ledger, "D-1", "verified", by="claude")

    # the author's own verified audit is not the best: the best independent one is
    dep = _dep_weakness(env, setup)
    assert (dep.Level, dep.By, dep.Weak) == ("verified", "codex", False)


# --- implement: posture --------------------------------------------------------------------------


def test_posture_each_value(env):
    env.item("D-1")
    assert env.build("D-1").Posture == "build"
    env.run("D-1")
    assert env.build("D-1").Posture == "continue"
    writes.request_changes(env.project, env.ledger, "D-1", "fix it\n")
    assert env.build("D-1").Posture == "revise"
    env.run("D-1", finished=False)
    assert env.build("D-1").Posture == "resume"


# --- review --------------------------------------------------------------------------------------


def test_unfinished_logpath_and_note(env):
    env.item("D-1")
    data = env.build("D-1", "review")
    assert (data.Unfinished, data.LogPath, data.Note) == (False, "", "")
    first = env.run("D-1")
    writes.audit(env.project, env.ledger, "D-1", "claimed", by="claude", note="first note")
    data = env.build("D-1", "review")
    assert not data.Unfinished and data.LogPath == f".drover/runs/{first.id}/agent.log"
    second = env.run("D-1", finished=False)
    note = "  Line one\n\n  {{ not a template }}\n"
    writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex", note=note)
    writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex", note="")
    data = env.build("D-1", "review")
    assert data.Unfinished and data.LogPath == f".drover/runs/{second.id}/agent.log"
    assert data.Note == note


def test_recent_and_unnamed_on_the_items_branch(env):
    src = env.root / "src"
    src.mkdir()
    (src / "app.py").write_text("one\n")
    (src / "other.py").write_text("one\n")
    git(env.root, "add", "-A")
    git(env.root, "commit", "-q", "-m", "code")
    env.item("D-1")  # its body names src/app.py
    data = env.build("D-1", "review")
    assert data.Branch == "drover/d-1"
    assert data.Recent.Commits == () and "drover/d-1" in data.Recent.Unavailable
    assert data.Unnamed == () and data.ScopeUnavailable
    git(env.root, "switch", "-q", "-c", "drover/d-1")
    (src / "app.py").write_text("two\n")
    (src / "other.py").write_text("two\nthree\n")
    (src / "added.py").write_text("new\n")
    git(env.root, "add", "src")
    git(env.root, "commit", "-q", "-m", "the work")
    git(env.root, "switch", "-q", "main")
    data = env.build("D-1", "review")
    assert data.Recent.Unavailable == ""
    (commit,) = data.Recent.Commits
    assert (commit.Subject, commit.Files, commit.Insertions, commit.Deletions) == ("the work", 3, 4, 2)
    assert data.Unnamed == ("src/other.py",)  # app.py is named in the body; added.py is new
    assert data.ScopeUnavailable == ""


def test_closes_resolutions_and_the_undisposed_worklist(env):
    env.item("D-1", closes=[5, 6, 7])
    tracker = FakeTracker(issues={
        5: Issue(5, "Crash on empty input", "It crashes.", "open", "https://x/5"),
        6: Issue(6, "Closed by hand", "", "closed", "https://x/6"),
    })
    writes.dispose(env.project, env.ledger, "D-1", 5, "comment", note="first thought")
    writes.dispose(env.project, env.ledger, "D-1", 5, "close", note="fixed by D-1")
    (disposition,) = [row for row in env.ledger.dispositions("D-1") if row["disposition"] == "close"]
    env.ledger.set_applied(disposition["id"], "closed with comment")
    data = env.build("D-1", "review", tracker=tracker)
    five, six, seven = data.Closes
    assert (five.Number, five.Title, five.Body, five.State) == (5, "Crash on empty input", "It crashes.", "open")
    assert (five.Disposition, five.By, five.Note, five.Applied) == ("close", "Test Operator", "fixed by D-1",
                                                                     "closed with comment")
    assert not five.Undisposed and five.Unavailable == ""
    assert six.State == "closed" and six.Undisposed and six.Disposition == ""
    assert seven.Unavailable == "issue #7 is not served" and seven.Undisposed and seven.Title == ""
    assert [r.Number for r in data.UndisposedCloses] == [6, 7]


def test_closes_with_no_tracker_say_why(env):
    env.configure('[tracker]\nbackend = "none"\n')
    env.item("D-1", closes=[3])
    writes.dispose(env.project, env.ledger, "D-1", 3, "keep")
    (resolution,) = build(env.project, env.ledger, "D-1", "review").Closes
    assert NOT_CONFIGURED in resolution.Unavailable
    assert resolution.Disposition == "keep" and not resolution.Undisposed


# --- tracker fields --------------------------------------------------------------------------


def test_follow_ups_mine_and_one_hop(env):
    env.item("D-1")
    env.item("D-3")
    env.item("D-2", deps=["D-1"])
    tracker = FakeTracker(follow_ups=[
        Issue(11, "Mine", "the report", "open", "u11", owners=("D-2",)),
        Issue(12, "From the dep", "", "open", "u12", owners=("D-1",)),
        Issue(13, "Not ours", "", "open", "u13", owners=("D-3",)),
        Issue(14, "Shared", "", "open", "u14", owners=("D-1", "D-2"), body_unavailable="no body column"),
    ])
    data = env.build("D-2", tracker=tracker)
    assert ("follow_ups", ("D-2", "D-1")) in tracker.calls
    rows = {row.Number: row for row in data.FollowUps}
    assert sorted(rows) == [11, 12, 14]
    assert (rows[11].Title, rows[11].Body, rows[11].Url, rows[11].Mine) == ("Mine", "the report", "u11", True)
    assert not rows[12].Mine and rows[12].Body == "" and rows[12].Unavailable == ""
    assert rows[14].Mine and rows[14].Unavailable == "no body column"
    assert data.RegisterUnreadable == ""


def test_follow_ups_unreadable_keep_the_floor(env):
    env.item("D-1")
    floor = [Issue(11, "Read before the failure", owners=("D-1",))]
    tracker = FakeTracker(fail={"follow_ups": ("register follow-ups.md:4: bad row", floor)})
    data = env.build("D-1", tracker=tracker)
    assert data.RegisterUnreadable == "register follow-ups.md:4: bad row"
    assert [row.Number for row in data.FollowUps] == [11]


def test_file_register_rows_say_they_have_no_body(env):
    env.configure('[tracker]\nbackend = "file"\n')
    (env.root / "follow-ups.md").write_text("# Follow-ups\n\n- D-1: tidy the parser\n- D-5: unrelated\n")
    env.item("D-1")
    data = build(env.project, env.ledger, "D-1", "implement")
    (row,) = data.FollowUps
    assert (row.Number, row.Title, row.Mine, row.Body) == (3, "tidy the parser", True, "")
    assert "no body column" in row.Unavailable and data.RegisterUnreadable == ""
    (env.root / "follow-ups.md").unlink()
    assert "does not exist" in build(env.project, env.ledger, "D-1", "implement").RegisterUnreadable


def test_no_tracker_leaves_follow_ups_empty_without_a_fault(env):
    env.item("D-1", origin=4)
    data = build(env.project, env.ledger, "D-1", "draft")
    assert data.FollowUps == () and data.RegisterUnreadable == ""
    assert data.Owned == () and data.OwnedUnreadable == ""
    assert data.Origin.Number == 4 and NOT_CONFIGURED in data.Origin.Unavailable


def test_owned_per_id_mine_labels_and_unreadable(env):
    env.item("D-1", origin=40)
    env.item("D-2", deps=["D-1"], origin=20)
    tracker = FakeTracker(
        owned={
            "D-2": [Issue(21, "Bug on the branch", "steps", "open", "u21", labels=("bug", "p1"))],
            "D-1": [Issue(41, "Dep's sub-issue", "", "open", "u41"),
                    Issue(21, "Bug on the branch", "steps", "open", "u21", labels=("bug", "p1"))],
        },
    )
    data = env.build("D-2", tracker=tracker)
    assert ("owned", "D-2", 20) in tracker.calls and ("owned", "D-1", 40) in tracker.calls
    rows = {row.Number: row for row in data.Owned}
    assert sorted(rows) == [21, 41]
    assert rows[21].Mine and rows[21].Labels == ("bug", "p1") and rows[21].Body == "steps"
    assert not rows[41].Mine and data.OwnedUnreadable == ""
    tracker.fail["owned:D-1"] = ("gh is not installed", [])
    data = env.build("D-2", tracker=tracker)
    assert data.OwnedUnreadable == "gh is not installed" and [row.Number for row in data.Owned] == [21]


# --- destinations and verify ------------------------------------------------------------------


def test_destinations_name_the_item_and_wrap(env):
    env.item("D-7")
    data = env.build("D-7")
    tokens = [d.Token for d in data.Destinations]
    assert {"changes", "new-item", "follow-up", "operator"} <= set(tokens)
    by_token = {d.Token: d for d in data.Destinations}
    assert "drover request-changes D-7" in by_token["changes"].Do
    assert "-f D-7" in by_token["new-item"].Do and "drover park D-7" in by_token["operator"].Do
    assert all("{id}" not in d.Do and d.Where and d.Found for d in data.Destinations)
    wrapped = by_token["operator"].Wrap(4).split("\n")
    assert wrapped[0].startswith("    operator: ") and all(line.startswith("    ") for line in wrapped)
    assert all(line.startswith("      ") for line in wrapped[1:]) and len(wrapped) > 1
    assert re.sub(r"\s+", "", "".join(wrapped)).endswith(re.sub(r"\s+", "", by_token["operator"].Do))


def test_github_destination_without_a_repository_name_still_names_a_place(env):
    # [tracker] repo = "" (the default) lets gh use this checkout's remote: no empty "on  labelled"
    for repo, place in (("", "file an issue on this repository labelled `fu`"),
                        ("acme/widgets", "file an issue on acme/widgets labelled `fu`")):
        env.configure(f'[tracker]\nbackend = "github"\nrepo = "{repo}"\nfollow_up_label = "fu"\n')
        (follow_up,) = [d for d in template_data.destinations("D-7", env.project.config.tracker)
                        if d.Token == "follow-up"]
        assert follow_up.Do.startswith(place) and "  " not in follow_up.Do, follow_up.Do


def test_verify_command_takes_the_first_yes_key_in_sorted_order(env):
    env.configure('[verify]\ndefault = "make test"\nzeta = "make test zeta"\nalpha = "make test alpha"\n')
    env.item("D-1", zeta="yes", alpha="yes")
    env.item("D-2", zeta="yes", alpha="no")
    env.item("D-3", alpha=False)
    env.item("D-4", default="yes")
    assert env.build("D-1").VerifyCommand == "make test alpha"
    assert env.build("D-2").VerifyCommand == "make test zeta"
    assert env.build("D-3").VerifyCommand == "make test"
    assert env.build("D-4").VerifyCommand == "make test"
    assert env.build("D-1").VerifyCommands == {"default": "make test", "zeta": "make test zeta",
                                               "alpha": "make test alpha"}


# --- draft -------------------------------------------------------------------------------------


def test_finding_from_notes_and_siblings(env):
    env.item("D-1", title="Reviewed work")
    env.run("D-1")
    writes.audit(env.project, env.ledger, "D-1", "claimed", by="claude")
    writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex", note="the cache is never invalidated")
    writes.audit(env.project, env.ledger, "D-1", "verified", by="gemini", note="also: no test for eviction")
    env.ledger.mark_done("D-1")
    finding = writes.new_item(env.project, env.ledger, "Invalidate the cache", "bug", [], finding_source="D-1")
    env.item("D-5", body="   \n")
    data = env.build(finding, "draft")
    assert data.Finding.startswith("Finding: D-1") and data.From == "D-1"
    assert [(n.Level, n.By, n.Note) for n in data.Notes] == [
        ("reviewed", "codex", "the cache is never invalidated"), ("verified", "gemini", "also: no test for eviction")]
    assert all(n.At for n in data.Notes)
    assert [(s.Id, s.Title, s.Kind, s.Done) for s in data.Siblings] == [
        ("D-1", "Reviewed work", "feature", True), ("D-5", "", "", False)]
    plain = env.build("D-1", "draft")
    assert (plain.Finding, plain.From, plain.Notes) == ("", "", ())
    assert [s.Id for s in plain.Siblings] == [finding, "D-5"]


def test_from_without_notes(env):
    env.item("D-1")
    finding = writes.new_item(env.project, env.ledger, "Follow on", "chore", [], finding_source="D-1")
    data = env.build(finding, "draft")
    assert data.From == "D-1" and data.Notes == ()


def test_origin_read_fresh_or_why_not(env):
    env.item("D-1", origin=12)
    env.item("D-2")
    tracker = FakeTracker(issues={12: Issue(12, "Users want CSV", "Export as CSV please.", "open", "https://x/12")})
    origin = env.build("D-1", "draft", tracker=tracker).Origin
    assert (origin.Number, origin.Title, origin.Body, origin.Url, origin.Unavailable) == (
        12, "Users want CSV", "Export as CSV please.", "https://x/12", "")
    origin = env.build("D-1", "draft", tracker=FakeTracker()).Origin
    assert (origin.Number, origin.Title, origin.Unavailable) == (12, "", "issue #12 is not served")
    assert env.build("D-2", "draft", tracker=tracker).Origin == template_data.Origin()


# --- slots: what each fills, and the branch slot ------------------------------------------------


def _rich(env) -> tuple[str, FakeTracker]:
    """An item for which nearly every field a slot fills has something to say."""
    env.configure("[review]\nmax_rounds = 2\n")
    env.item("D-1", origin=3)
    env.run("D-1", agent="claude")
    writes.audit(env.project, env.ledger, "D-1", "reviewed", by="codex", note="dep note")
    env.ledger.mark_done("D-1")
    finding = writes.new_item(env.project, env.ledger, "Rich", "bug", ["D-1"], finding_source="D-1")
    path = env.project.item_path(finding)
    text = path.read_text().replace("kind: bug\n", "kind: bug\norigin: 3\ncloses: [3]\n")
    path.write_text(text + "\n## Guarantees\n\n- holds\n")
    env.run(finding, agent="claude", finished=False)
    writes.request_changes(env.project, env.ledger, finding, "fix\n")
    writes.request_changes(env.project, env.ledger, finding, "fix again\n")
    writes.audit(env.project, env.ledger, finding, "claimed", by="claude", note="claimed it")
    from drover.ledger.rows import Check

    env.ledger.add_check(Check(id="c1", item=finding, head="a" * 40, base="b" * 40, command="make test", exit_status=2,
                               outcome="exited", started="2026-01-01T00:00:00.000Z", duration=1.5, tail="FAIL",
                               log_path=".drover/runs/c1/check.log", at="2026-01-01T00:00:01.500Z"))
    tracker = FakeTracker(
        follow_ups=[Issue(8, "f", "b", "open", "u", owners=(finding,))],
        owned={finding: [Issue(9, "o", "b", "open", "u")]},
        issues={3: Issue(3, "origin", "body", "open", "u")},
    )
    return finding, tracker


# Fields _rich leaves empty even where filled (no failures, no branch, nothing unmerged).
QUIET_IN_RICH = {"Get", "Is", "ChangesHeading", "Guidance", "Cleared", "Reviews", "UnmergedDeps",
                 "UnreadableDeps", "RegisterUnreadable", "OwnedUnreadable", "Unnamed", "UnnamedOmitted", "Conflicts"}


def test_a_field_a_slot_does_not_fill_stays_present_and_empty(env):
    item_id, tracker = _rich(env)
    empty = TemplateData()
    schema = {row["name"]: row for row in field_schema()}
    for slot in SLOTS:
        data = env.build(item_id, slot, tracker=tracker)
        for name in set(FIELD_NAMES) - QUIET_IN_RICH:
            value = getattr(data, name)
            if slot in schema[name]["slots"]:
                assert value != getattr(empty, name), f"{slot} should fill {name}"
            else:
                assert value == getattr(empty, name), f"{slot} should leave {name} empty"


def test_branch_slot_reads_no_tracker_and_has_no_branch(env):
    item_id, _ = _rich(env)
    data = env.build(item_id, "branch", tracker=Untouchable())
    assert data.Branch == "" and data.FollowUps == () and data.Owned == () and data.Closes == ()
    assert data.Origin == template_data.Origin() and data.RegisterUnreadable == "" and data.OwnedUnreadable == ""
    assert data.Rounds == 2 and data.Deps and data.Title == "Rich"
    assert template_data.item_branch(env.project, env.ledger, item_id) == f"drover/{item_id.lower()}"


def test_branch_follows_the_branch_template_whatever_the_tracker_says(env):
    env.configure('[run]\nbranch = "work/{{ Kind }}/{{ Id | lower }}{{ FollowUps | length }}"\n')
    env.item("D-1", kind="bug")
    loud = FakeTracker(follow_ups=[Issue(1, "x", owners=("D-1",))])
    assert env.build("D-1", "implement", tracker=loud).Branch == "work/bug/d-10"
    assert env.build("D-1", "review", tracker=FakeTracker()).Branch == "work/bug/d-10"


def test_building_one_prompt_reads_only_its_own_file(env, monkeypatch):
    for number in range(1, 40):
        env.item(f"D-{number}")
    env.item("D-40", deps=["D-1", "D-2"])
    catalogue.catalogue(env.project, env.ledger)  # a warm metadata cache, as any earlier command leaves
    read = []
    original = itemfile.read_item
    monkeypatch.setattr(itemfile, "read_item", lambda path, prefix: read.append(path.stem) or original(path, prefix))
    from_meta = itemfile.item_from_meta  # the frontmatter from the cache, the body from the file
    monkeypatch.setattr(itemfile, "item_from_meta",
                        lambda text, path, *args: read.append(path.stem) or from_meta(text, path, *args))

    def no_catalogue(*args):
        raise AssertionError("the catalogue was walked")

    monkeypatch.setattr(catalogue, "catalogue", no_catalogue)
    for slot in ("implement", "review", "branch"):
        read.clear()
        data = env.build("D-40", slot)
        assert read == ["D-40"] and [dep.Title for dep in data.Deps] == ["Title of D-1", "Title of D-2"]


# --- the schema, the docs and the fixture template ---------------------------------------------


def test_field_schema_covers_every_field():
    schema = field_schema()
    names = [row["name"] for row in schema]
    assert sorted(names) == sorted(FIELD_NAMES) and len(names) == len(set(names))
    for row in schema:
        assert row["type"] and row["meaning"] and "\n" not in row["meaning"]
        assert row["slots"] and set(row["slots"]) <= set(SLOTS)
    explained = field_explanations()  # docs/fields.md's table is generated from these
    assert sorted(explained) == sorted(FIELD_NAMES) and all(explained.values())


def test_row_members_in_the_schema_match_the_row_types():
    rows = {"Trail": template_data.Round, "Deps": template_data.Dep, "FollowUps": template_data.FollowUp,
            "Owned": template_data.OwnedIssue, "Destinations": template_data.Destination,
            "Closes": template_data.Resolution, "Notes": template_data.AuditNote,
            "Siblings": template_data.Sibling, "Recent": template_data.Recent, "Origin": template_data.Origin,
            "Checks": template_data.Check}
    schema = {row["name"]: row for row in field_schema()}
    for name, row_type in rows.items():
        documented = {m["name"].split("(")[0] for m in schema[name]["members"]}
        expected = set(row_type._fields) | ({"Wrap"} if name == "Destinations" else set())
        assert documented == expected, name


def test_the_fixture_names_every_field():
    text = FIXTURE.read_text()
    for name in FIELD_NAMES:
        assert re.search(rf"\b{name}\b", text), name


def test_every_field_fixture_renders_on_every_slot(env):
    item_id, tracker = _rich(env)
    text = FIXTURE.read_text()
    for slot in SLOTS:
        data = env.build(item_id, slot, tracker=tracker)
        if slot == "branch":
            rendered = templates.render_branch(data, text)
        else:
            rendered = templates.render(slot, data, root=env.root, config=env.project.config, explicit=text).text
        assert f"Id={item_id} " in rendered and rendered.rstrip().endswith("end")
        assert ("Posture=resume" in rendered) == (slot == "implement")
        assert ("Close 3 origin" in rendered) == (slot == "review")
        assert (f"Check make test {'a' * 40} False 2 FAIL" in rendered) == (slot == "review")
        assert ("Sibling D-1" in rendered) == (slot == "draft")
        assert ("FollowUp 8" in rendered) == (slot != "branch")


def test_the_data_module_imports_neither_jinja2_nor_click():
    code = "import sys, drover.prompts.data; print(sorted(m for m in ('jinja2', 'click') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
