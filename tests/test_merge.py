"""The three-way line merge behind `drover override --update`."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from drover.prompts.merge import conflict_lines, merge3

LABELS = ("yours", "base", "today")
# Block texts are stripped before they are merged (as base hashes are taken), so these are too.
lines = st.lists(st.sampled_from(["a", "b", "c", "d", "- x", ""]), max_size=8).map(lambda parts: "\n".join(parts).strip())


@given(lines, lines)
def test_a_side_that_did_not_change_takes_the_other(base, other):
    for merged, clean in (merge3(base, base, other, LABELS), merge3(base, other, base, LABELS)):
        assert (merged, clean) == (other, True)


@given(lines, lines)
def test_the_same_change_on_both_sides_merges_to_it(base, other):
    merged, clean = merge3(base, other, other, LABELS)
    assert (merged, clean) == (other, True)


def test_changes_to_different_lines_both_land():
    base = "one\ntwo\nthree\nfour\nfive"
    ours = "one\nTWO\nthree\nfour\nfive"
    theirs = "one\ntwo\nthree\nfour\nFIVE\nsix"
    assert merge3(base, ours, theirs, LABELS) == ("one\nTWO\nthree\nfour\nFIVE\nsix", True)


def test_changes_to_the_same_line_conflict_with_the_base_shown():
    merged, clean = merge3("one\ntwo\nthree", "one\nmine\nthree", "one\ntheirs\nthree", LABELS)
    assert not clean
    assert merged.splitlines() == [
        "one", "<<<<<<< yours", "mine", "||||||| base", "two", "=======", "theirs", ">>>>>>> today", "three"]
    assert conflict_lines(merged) == [2]
