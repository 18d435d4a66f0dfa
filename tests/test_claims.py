"""The one Claim type: every page's claims are Claims with a real verdict, and the frame has fixed columns."""

import pytest

from sim.claims import SEEDS, Claim, Verdict, claims_frame, verdict_counts


def test_claim_needs_a_verdict_enum():
    with pytest.raises(AssertionError):
        Claim("s", "002", "a", "b", "right")  # a string is not a Verdict


def test_verdict_counts_and_frame():
    cs = (Claim("one", "002", "5×", "7.3×", Verdict.UNDERSTATED),
          Claim("two", "000", "n³", "n(n+1)(2n+1)/6", Verdict.RIGHT, why="sum of squares"),
          Claim("three", "this machine", "-", "12.7×", Verdict.RIGHT))
    assert verdict_counts(cs) == {Verdict.RIGHT: 2, Verdict.UNDERSTATED: 1}
    df = claims_frame(cs)
    assert list(df.columns) == ["Source", "Claim", "Seed says", "We compute", "Verdict", "Why", "As written"]
    assert list(df["Source"]) == ["seed 002", "seed 000", "this machine"]
    assert list(df["Verdict"]) == ["understated", "right", "right"]


def test_every_seed_is_named():
    assert sorted(SEEDS) == ["000", "001", "002", "004"]
