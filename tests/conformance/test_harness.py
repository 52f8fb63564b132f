"""The harness's own judgement (common.verdict), on figures written out: what it lets through is
what every conformance module trusts."""

from __future__ import annotations

from tests.conformance.common import CAP, Figure, verdict


def test_an_exact_count_must_equal_the_truth_unless_it_lies_between_two_reads() -> None:
    assert verdict("count_scheduled", 299.0, Figure(299.0, "exact")) == "ok"
    assert verdict("count_scheduled", 299.0, Figure(298.0, "exact")) == "wrong"
    # A job became due between the truth and the collection: the truth read after says 298.
    assert verdict("count_scheduled", 299.0, Figure(298.0, "exact"), later=298.0) == "ok (moved)"
    # The later read does not widen the window beyond the two truths.
    assert verdict("count_scheduled", 299.0, Figure(297.0, "exact"), later=298.0) == "wrong"
    assert verdict("count_scheduled", 299.0, Figure(300.0, "exact"), later=298.0) == "wrong"


def test_estimates_ages_and_absences_are_judged_by_their_own_rules() -> None:
    big = CAP * 10.0
    assert verdict("depth", big, Figure(big * 1.05, "estimate (pg_stats MCV)")) == "ok (estimate)"
    assert verdict("depth", big, Figure(big * 1.2, "estimate (pg_stats MCV)")) == "wrong"
    assert verdict("depth", 10.0, Figure(10.5, "estimate (pg_stats MCV)")) == "estimate below the cap"
    # An estimate is not excused by a later read: only exact counts are.
    assert verdict("depth", big, Figure(big * 1.2, "estimate"), later=big * 1.2) == "wrong"
    assert verdict("oldest_age_s", 100.0, Figure(125.0)) == "ok"
    assert verdict("oldest_age_s", 100.0, Figure(140.0)) == "wrong"
    assert verdict("depth", 5.0, None) == "absent"
    assert verdict("depth", None, Figure(5.0)) == "unexpected"


def test_a_lower_bound_is_right_only_near_the_truth_and_never_above_it() -> None:
    """'at least' notes are judged by their own rule, not by the word 'estimate' in some of them:
    the cap's count of 1,000 for 5,250 waiting jobs is wrong, however honest its label."""
    for note in ("at least (cap of runnable items read)", "at least (cap reached; the statistics estimate no more)"):
        assert verdict("depth", 5250.0, Figure(float(CAP), note)) == "wrong", note
        assert verdict("depth", 1050.0, Figure(1000.0, note)) == "ok (at least)", note
        assert verdict("depth", 1000.0, Figure(1000.0, note)) == "ok (at least)", note
        assert verdict("depth", 990.0, Figure(1000.0, note)) == "wrong", note  # a floor above the truth
    assert Figure(1000.0, "at least (cap reached; the statistics estimate no more)").estimate is False
