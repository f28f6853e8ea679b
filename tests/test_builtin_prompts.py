"""The built-in prompts: what SPEC 8.6 and 8.7 require them to say, rendered for representative items."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from drover import prompts as templates
from drover.config import Config
from drover.prompts.data import AuditNote, Commit, Dep, Destination, FollowUp, Origin, OwnedIssue, Recent, Resolution, Round, Sibling, TemplateData
from drover.items.file import CHANGES_HEADING, NO_BODY, NOT_AN_ID, cleared_block
from drover.prompts.resources import builtin_dir

GUIDANCE = ("lean", "detailed")
VERIFY = "just verify-everything"
FENCE = 'Guidance == "detailed"'


def destinations(item_id: str) -> tuple[Destination, ...]:
    raw = tomllib.loads((builtin_dir() / "destinations.toml").read_text())
    return tuple(
        Destination(Token=d["token"], Where=d["where"], Found=d["found"], Do=d["do"].format(id=item_id))
        for d in raw["destination"]
    )


BODY = """Quote fields that contain commas. Literal braces stay: {{ x }} and <% if y %>.

## Requirements

1. A field holding a comma is quoted.
2. A field holding a quote doubles it.

## Guarantees

- The header row is always written.
"""
FINDINGS = "### Quotes are not doubled\n\n`write_row` in export/csv.py leaves a bare quote inside a quoted field."
MERGED = Dep(Id="D-2", Title="CSV writer", Path="items/D-2.md", Done=True, Level="verified", By="codex")
WEAK_MERGED = Dep(Id="D-3", Title="Record model", Path="items/D-3.md", Done=True, Level="claimed", By="claude", Weak=True)
WEAK_UNMERGED = Dep(Id="D-5", Title="Column types", Path="items/D-5.md", Weak=True)
NO_BODY_DEP = Dep(Id="D-6", Title="", Path="items/D-6.md", Done=True, Unreadable=NO_BODY, Level="reviewed", By="x")
BAD_ID_DEP = Dep(Id="widget", Unreadable=NOT_AN_ID, Weak=True)


def base(item_id: str = "D-7", **changes) -> TemplateData:
    data = TemplateData(
        Id=item_id,
        Title="Quote CSV fields",
        Kind="bug",
        Path=f"items/{item_id}.md",
        Body=BODY,
        Meta={"id": item_id, "title": "Quote CSV fields", "kind": "bug"},
        Guarantees="- The header row is always written.",
        VerifyCommand=VERIFY,
        VerifyCommands={"default": VERIFY},
        MaxReviewRounds=3,
        Destinations=destinations(item_id),
        Branch=f"drover/{item_id.lower()}",
        Posture="build",
        Recent=Recent(Commits=(Commit(Sha="0123456789abcdef", Subject="Quote commas", Files=2, Insertions=30, Deletions=4),)),
        LogPath=".drover/runs/r1/agent.log",
        Origin=Origin(Number=41, Title="CSV export breaks on commas", Body="Rows split in two.", Url="https://example.invalid/41"),
        Siblings=(Sibling(Id="D-8", Title="Export to JSON", Kind="feature"), Sibling(Id="D-2", Title="CSV writer", Done=True)),
    )
    return data._replace(**changes)


def rounds(*headlines: str) -> tuple[Round, ...]:
    return tuple(
        Round(N=n, Headline=h, Path=f".drover/runs/review-{n}/agent.log", At="2024-05-0%d" % n, By="codex")
        for n, h in enumerate(headlines, start=1)
    )


TRAIL = rounds("Commas split rows", "Quotes are not doubled")
STATES = {
    "first pass": base(),
    "repeated rounds": base(
        Posture="revise", Changes=FINDINGS, Rounds=2, Repeated=True, Trail=TRAIL, Earlier=TRAIL[:1], Runs=2, Reviews=2
    ),
    "cleared": base(
        Posture="continue",
        Changes=cleared_block(1, "2024-05-02", "codex"),
        Cleared=True,
        Rounds=1,
        Trail=TRAIL[:1],
        Earlier=TRAIL[:1],
        Note="Checked both requirements against the diff; ran the suite.",
    ),
    "capped": base(
        Posture="revise", Changes=FINDINGS, Rounds=3, Repeated=True, Capped=True,
        Trail=rounds("a", "b", "Quotes are not doubled"), Earlier=rounds("a", "b"),
    ),
    "weak deps": base(
        Deps=(MERGED, WEAK_MERGED, WEAK_UNMERGED), MergedDeps=(MERGED, WEAK_MERGED), UnmergedDeps=(WEAK_UNMERGED,)
    ),
    "unreadable deps": base(
        Deps=(MERGED, NO_BODY_DEP, BAD_ID_DEP), MergedDeps=(MERGED,), UnreadableDeps=(NO_BODY_DEP, BAD_ID_DEP)
    ),
    "follow-ups unavailable": base(
        FollowUps=(
            FollowUp(Title="Header casing", Mine=True, Unavailable="the file register has no body column"),
            FollowUp(Number=12, Title="Slow writer", Body="Takes 3s per 1000 rows.", Url="https://example.invalid/12"),
        ),
        RegisterUnreadable="gh: could not reach the tracker",
        Owned=(OwnedIssue(Number=13, Title="Crash on empty file", Mine=True, Labels=("bug", "p1"), Body="Trace attached."),),
        OwnedUnreadable="gh: rate limited",
    ),
    "unfinished run": base(Posture="resume", Unfinished=True, Runs=1),
    "never ran": base(LogPath="", Recent=Recent()),
    "review scope": base(
        Unnamed=("export/util.py", "export/types.py"),
        Closes=(
            Resolution(Number=41, Title="CSV export breaks on commas", State="open", Undisposed=True),
            Resolution(Number=44, Title="Quotes", State="open", Disposition="close", By="codex", Note="fixed by D-7"),
            Resolution(Number=45, Unavailable="gh: not found", Undisposed=True),
        ),
        UndisposedCloses=(
            Resolution(Number=41, Title="CSV export breaks on commas", State="open", Undisposed=True),
            Resolution(Number=45, Unavailable="gh: not found", Undisposed=True),
        ),
    ),
    "scope unavailable": base(ScopeUnavailable="git: unknown revision main", Recent=Recent(Unavailable="git: unknown revision main")),
    "finding with notes": base(
        Finding="Finding: D-2 (raised while reviewing D-2)",
        From="D-2",
        Notes=(AuditNote(Level="reviewed", By="codex", Note="The writer drops quotes.\nSee row 3.", At="2024-05-01"),),
    ),
    "finding without notes": base(Finding="Finding: D-2", From="D-2"),
    "origin unavailable": base(Origin=Origin(Unavailable="no tracker is configured (backend none)")),
    "empty": TemplateData(Id="D-9", Path="items/D-9.md", Body="x", Posture="build"),
}


def render(slot: str, data: TemplateData, guidance: str = "detailed", config: Config | None = None, root: Path = Path(".")) -> str:
    data = data._replace(Guidance=guidance)
    return templates.render(slot, data, root=root, config=config or Config()).text


ALL = [(slot, state, level) for slot in templates.SLOTS for state in STATES for level in GUIDANCE]


@pytest.mark.parametrize("slot,state,level", ALL)
def test_whitespace_is_clean(slot, state, level):
    text = render(slot, STATES[state], level)
    assert not text.startswith("\n"), "the prompt opens on a blank line"
    assert text.endswith("\n") and not text.endswith("\n\n"), "the prompt ends on exactly one newline"
    assert "\n\n\n" not in text, "a run of blank lines"
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        assert line == line.rstrip(), f"trailing whitespace on line {number}: {line!r}"
        assert "\t" not in line, f"a tab on line {number}"
        if line[:1] == " ":
            previous = lines[number - 2]
            assert previous.strip(), f"line {number} starts an indented paragraph: {line!r}"
            assert len(line) - len(line.lstrip(" ")) in (2, 3, 4), f"odd indentation on line {number}: {line!r}"


@pytest.mark.parametrize("slot,state", [(slot, state) for slot in templates.SLOTS for state in STATES])
def test_lean_is_a_subset_of_detailed(slot, state):
    lean = render(slot, STATES[state], "lean").splitlines()
    detailed = render(slot, STATES[state], "detailed").splitlines()
    extra = [line for line in lean if line not in set(detailed)]
    assert not extra, f"lean holds lines detailed lacks: {extra}"
    assert len(lean) < len(detailed), "detailed adds no coaching"


def _fences(source: str) -> list[tuple[str, str]]:
    return re.findall(r"<%[-+]?\s*(if|elif)\s+(.*?)\s*[-+]?%>", source)


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_every_guidance_fence_is_exact(slot):
    source = templates.builtin_source(slot)
    fences = [(kind, expr) for kind, expr in _fences(source) if "Guidance" in expr]
    assert fences, "the built-in has no coaching fence"
    for kind, expr in fences:
        assert (kind, expr) == ("if", FENCE), f"fence written as <% {kind} {expr} %>"
    # Guidance is only ever a fence: never printed, never compared any other way.
    assert source.count("Guidance") == len(fences)
    # a fence wraps whole lines: its tags stand on their own lines
    for line in source.splitlines():
        if "Guidance" in line:
            assert line == f"<% if {FENCE} %>"


def test_fence_scan_catches_a_misspelt_fence():
    assert _fences('<% if Guidance == "detailled" %>') == [("if", 'Guidance == "detailled"')]


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_block_tags_stand_on_their_own_lines(slot):
    source = templates.builtin_source(slot)
    tags = re.findall(r"^.*<%[-+]?\s*(?:block\s+\w+|endblock)\s*[-+]?%>.*$", source, re.M)
    assert tags
    for line in tags:
        assert re.fullmatch(r"<% (block \w+|endblock) %>", line), line


def test_the_blocks_spec_requires_exist_with_their_kinds():
    kinds = {(e["slot"], e["block"]): e["addition"] for e in templates.schema_prompts()}
    required = {
        ("implement", "scope"): False, ("implement", "done"): True, ("implement", "checks"): True,
        ("review", "verify"): False, ("review", "checks"): True,
        ("draft", "requirements"): False, ("draft", "checks"): True,
    }
    for key, addition in required.items():
        assert kinds[key] is addition, key


def _marker_override(slot: str, block: str, marker: str) -> str:
    default = templates.builtin_blocks(slot)[block]
    head = f"<# drover-base: {templates.base_hash(default)} #>\n" if default.strip() else ""
    return f"<% block {block} %>\n{head}- {marker}\n<% endblock %>\n"


BLOCKS = [(e["slot"], e["block"]) for e in templates.schema_prompts()]


@pytest.mark.parametrize("slot,block", BLOCKS)
def test_every_block_renders_for_every_item_at_both_levels(repo, slot, block):
    marker = f"MARK-{slot}-{block}"
    (repo / "over.tmpl").write_text(_marker_override(slot, block, marker))
    config = Config(prompts={slot: "over.tmpl"})
    for state, data in STATES.items():
        for level in GUIDANCE:
            text = render(slot, data, level, config, repo)
            assert f"\n- {marker}\n" in text, (state, level)


def test_done_lands_after_drovers_bullets_and_before_the_verify_command(repo):
    (repo / "over.tmpl").write_text(
        "<% block done %>\n- The schema file is regenerated.\n<% if Is(\"migration\") %>\n- Migrations are numbered.\n<% endif %>\n<% endblock %>\n"
    )
    config = Config(prompts={"implement": "over.tmpl"})
    lines = render("implement", base(Meta={"migration": "yes"}), config=config, root=repo).splitlines()
    verify = next(i for i, line in enumerate(lines) if line.startswith(f"- `{VERIFY}`"))
    assert lines[verify - 2 : verify] == ["- The schema file is regenerated.", "- Migrations are numbered."]
    assert lines[verify - 3].startswith("- ") and "committed" in lines[verify - 3]
    plain = render("implement", base(), config=config, root=repo).splitlines()
    verify = next(i for i, line in enumerate(plain) if line.startswith(f"- `{VERIFY}`"))
    assert plain[verify - 1] == "- The schema file is regenerated."


# ---------------------------------------------------------------------------- SPEC 8.7, bullet by bullet


@pytest.mark.parametrize("slot", templates.SLOTS)
@pytest.mark.parametrize("level", GUIDANCE)
def test_stable_instructions_come_first_and_are_shared(slot, level):
    prefixes = set()
    for state, data in STATES.items():
        if state == "empty":
            continue  # no verify command: the definition of done says so, a different prefix
        text = render(slot, data._replace(Id="D-%d" % (len(prefixes) + 90)), level)
        prefix = text.split("\n## The item\n")[0]
        for value in ("D-7", "D-9", "Quote CSV fields", "items/"):
            assert value not in prefix, (state, value)
        prefixes.add(prefix)
    assert len(prefixes) == 1


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_the_prompt_opens_on_what_to_do(slot):
    first = render(slot, STATES["first pass"]).split(".")[0]
    assert first.startswith("You are")
    assert not re.search(r"\b(not|never|don't|do not)\b", first, re.I)


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_guarantees_and_changes_are_two_named_sections(slot):
    text = render(slot, STATES["repeated rounds"])
    guarantees = text.index("\n## Guarantees\n")
    changes = text.index(f"\n{CHANGES_HEADING}\n")
    assert "- The header row is always written." in text[guarantees:changes]
    assert "`write_row` in export/csv.py leaves a bare quote" in text[changes:]


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_history_comes_from_earlier_never_trail(slot):
    data = STATES["repeated rounds"]._replace(Trail=rounds("Commas split rows", "TRAIL-ONLY headline"))
    text = render(slot, data)
    assert "- Round 1: Commas split rows (review log: .drover/runs/review-1/agent.log)" in text
    assert "TRAIL-ONLY" not in text
    history = text[text.index("## Earlier rounds"):]
    assert "current finding" in history


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_cleared_says_nothing_is_outstanding_and_drops_send_back_prose(slot):
    cleared = render(slot, STATES["cleared"])
    outstanding = render(slot, STATES["repeated rounds"])
    section = cleared[cleared.index(f"\n{CHANGES_HEADING}\n"):]
    assert "Nothing is outstanding" in section
    assert "round 1 was discharged on 2024-05-02 by codex" in section
    # the cleared round shows as history, by headline
    assert "- Round 1: Commas split rows" in cleared
    send_back = {"implement": "These findings are the only outstanding ones", "review": "The last review sent these findings back"}[slot]
    assert send_back in outstanding and send_back not in cleared
    # send-back prose follows Changes, not Cleared: empty Changes has none either
    assert send_back not in render(slot, STATES["first pass"])


def test_repeated_rounds_ask_for_the_neighbours():
    repeated = " ".join(render("implement", STATES["repeated rounds"], "lean").split())
    assert "one instance of an invariant that keeps breaking" in repeated
    assert "find the other places it covers" in repeated
    for state in ("first pass", "cleared"):
        assert "keeps breaking" not in " ".join(render("implement", STATES[state]).split())


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_deps_are_partitioned_and_weak_ones_named(slot):
    weak = render(slot, STATES["weak deps"], "lean")
    merged = weak.index("Merged into the base branch")
    unmerged = weak.index("Not merged yet")
    assert merged < weak.index("- D-2: CSV writer (items/D-2.md); confirmed: verified by codex") < unmerged
    assert merged < weak.index("- D-3: Record model (items/D-3.md); unconfirmed given: its best audit, claimed by claude") < unmerged
    assert unmerged < weak.index("- D-5: Column types (items/D-5.md); unconfirmed given: no audit confirms it")
    unreadable = render(slot, STATES["unreadable deps"], "lean")
    assert "- D-6 (items/D-6.md): has no body" in unreadable
    assert "- widget: does not resolve to an item id" in unreadable
    # an unreadable dep is reported once, whatever the ledger says of it
    assert unreadable.count("- D-6") == 1


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_path_is_named(slot):
    assert "- File: items/D-7.md" in render(slot, STATES["first pass"], "lean")


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_follow_ups_render_body_or_why_not_mine_apart(slot):
    text = render(slot, STATES["follow-ups unavailable"], "lean")
    mine = text.index("Filed against this item")
    theirs = text.index("Filed against a dependency")
    # a tracker's text is quoted between fences (tests/test_review_prompt_trust.py, test_prompt_quoting.py)
    quoted = "  ```text\n  {}\n  ```"
    assert mine < text.index("- Header casing\n  Its text is unavailable: the file register has no body column") < theirs
    assert theirs < text.index("- #12 Slow writer <https://example.invalid/12>\n" + quoted.format("Takes 3s per 1000 rows."))
    assert "could not be read (gh: could not reach the tracker), so what follows is\nincomplete" in text
    assert "- #13 Crash on empty file [bug, p1], owned by this item\n" + quoted.format("Trace attached.") in text
    assert "(gh: rate limited)" in text


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_an_unreadable_register_is_not_rendered_like_an_empty_one(slot):
    empty = render(slot, base(), "lean")
    unreadable = render(slot, base(RegisterUnreadable="gh: not logged in"), "lean")
    assert "## Follow-ups" not in empty
    assert "## Follow-ups" in unreadable and "gh: not logged in" in unreadable


def test_review_checks_the_report_against_the_contract():
    text = render("review", STATES["first pass"], "lean")
    assert "against the item's contract" in text
    assert "rather than working the design out again" in text


def test_review_tells_unfinished_from_never_ran():
    unfinished = render("review", STATES["unfinished run"], "lean")
    never = render("review", STATES["never ran"], "lean")
    finished = render("review", STATES["first pass"], "lean")
    assert "still running, or it died" in unfinished and ".drover/runs/r1/agent.log" in unfinished
    assert "never ran through drover" in never and "still running" not in never
    assert "The last implementing run finished" in finished
    assert "never ran" not in unfinished and "still running" not in finished


def test_review_lists_unnamed_files_as_a_list():
    text = render("review", STATES["review scope"], "lean")
    assert "\n- export/util.py\n- export/types.py\n" in text
    unavailable = render("review", STATES["scope unavailable"], "lean")
    assert "git could not say which modified files" in unavailable and "git: unknown revision main" in unavailable
    assert "git could not list them: git: unknown revision main" in unavailable


def test_review_reports_commits():
    text = render("review", STATES["first pass"], "lean")
    assert "- 0123456789ab Quote commas (2 files, +30 -4)" in text


def test_capped_review_keeps_send_back_and_says_drover_will_refuse():
    capped = render("review", STATES["capped"], "lean")
    assert "drover request-changes ID --file FINDINGS.md" in capped
    assert "will refuse" in capped and ".drover/parked/" in capped and "park the item" in capped
    assert "record them once" in capped
    assert "will refuse" not in render("review", STATES["repeated rounds"], "lean")


def test_review_renders_the_undisposed_worklist():
    text = render("review", STATES["review scope"], "lean")
    worklist = text[text.index("Your worklist"):]
    assert "- #41 CSV export breaks on commas\n- #45\n" in worklist
    assert "- #44 Quotes (open): judged close by codex: fixed by D-7" in text
    assert "- #45: not judged yet\n  The issue could not be read: gh: not found" in text
    assert "The issue could not be read: gh: not found" in text
    assert "Your worklist" not in render("review", STATES["first pass"], "lean")


def test_review_shows_the_newest_audit_note_verbatim():
    assert "Checked both requirements against the diff; ran the suite." in render("review", STATES["cleared"], "lean")


def test_review_names_every_loop_command():
    text = render("review", STATES["first pass"], "lean")
    for command in (
        "drover request-changes ID --file",
        "drover audit ID --level reviewed --note",
        "--level verified",
        "drover dispose ID ISSUE --as close|comment|keep",
        'drover new "TITLE" -f ID',
        'drover park ID --why "REASON"',
        "never run `git push`",
    ):
        assert command in text, command


def test_implement_names_escalation_and_never_push():
    text = render("implement", STATES["first pass"], "lean")
    assert 'drover park ID --why "REASON"' in text and "never run `git push`" in text


def test_draft_writes_from_origin_and_notes():
    text = render("draft", STATES["finding with notes"], "lean")
    assert "#41 CSV export breaks on commas <https://example.invalid/41>" in text
    assert "Rows split in two." in text
    assert "reviewed audit by codex at 2024-05-01:\n\n```text\nThe writer drops quotes.\nSee row 3.\n```" in text
    assert "- Provenance line: Finding: D-2 (raised while reviewing D-2)" in text
    unavailable = render("draft", STATES["origin unavailable"], "lean")
    assert "could not be read: no tracker is configured (backend none)" in unavailable


def test_draft_says_in_one_line_when_from_has_no_notes():
    text = render("draft", STATES["finding without notes"], "lean")
    section = text[text.index("## Audit notes on D-2"):].split("\n\n")
    assert section[1].count("\n") == 0 and "D-2 has no audit notes" in section[1]
    assert "has no audit notes" not in render("draft", STATES["first pass"], "lean")


def test_draft_routes_requirements_to_siblings():
    text = render("draft", STATES["first pass"], "lean")
    assert "- D-8 [feature]: Export to JSON\n- D-2: CSV writer (done)" in text
    assert "goes to that item" in text


@pytest.mark.parametrize("slot", ["implement", "review"])
def test_destinations_and_verify_come_from_the_data(slot):
    data = STATES["first pass"]
    text = render(slot, data, "lean")
    shown = [d for d in data.Destinations if slot == "review" or d.Token != "changes"]
    for destination in shown:
        assert destination.Wrap(2) in text
    source = templates.builtin_source(slot)
    for destination in data.Destinations:
        assert destination.Found not in source and destination.Do not in source
    assert VERIFY in text
    assert "make test" not in source


def test_the_review_tells_its_reviewer_not_to_run_the_branchs_code():
    """A program the reviewer starts from the branch runs as the review, with its verdicts: the
    review reads drover's own check of the head instead (docs/security.md)."""
    for guidance in ("lean", "detailed"):
        text = render("review", STATES["first pass"], guidance)
        assert "Do not run the branch's code" in text and VERIFY in text
        assert "Run the verify command" not in text and "you also ran the verify command" not in text


@pytest.mark.parametrize("slot", templates.SLOTS)
def test_the_body_renders_verbatim(slot):
    text = render(slot, STATES["first pass"], "lean")
    assert BODY.strip() in text
    assert "{{ x }} and <% if y %>" in text


def test_templates_spell_no_changes_heading():
    for slot in templates.SLOTS:
        assert "Changes requested" not in templates.builtin_source(slot)
