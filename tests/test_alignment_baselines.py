"""experiments/alignment_baselines.py: the alignments no network makes (the diagonal, Dice
co-occurrence) and the bootstrap interval of a corpus AER, on hand-worked pairs."""

from __future__ import annotations

import pytest

from attnmt.data.gold import parse_links
from experiments import alignment_baselines as ab


def test_the_diagonal_by_hand() -> None:
    """S = 4, T = 2: j = 1 → round(1·4/2) = 2. S = 3, T = 2: round(1.5) = 2. S = 2, T = 4:
    round(0.5) = 0 (halves to even), round(1.5) = 2 → min(S − 1, 2) = 1. An empty side: none."""
    got = ab.diagonal_links(
        ["a b c d", "a b c", "a b", "", "a"], ["w x", "w x", "w x y z", "w", ""]
    )
    assert got == [
        {(0, 0), (2, 1)},
        {(0, 0), (2, 1)},
        {(0, 0), (0, 1), (1, 2), (1, 3)},
        set(),
        set(),
    ]


TRAIN = [("a b", "x y"), ("a c", "x z"), ("b", "y")]
"""c(a) = 2, c(b) = 2, c(c) = 1; c(x) = 2, c(y) = 2, c(z) = 1; c(a, x) = 2, c(b, y) = 2,
c(a, y) = c(b, x) = c(a, z) = c(c, x) = c(c, z) = 1."""


def test_dice_by_hand() -> None:
    """Dice(a, x) = 2·2/(2 + 2) = 1 > Dice(b, x) = 2·1/4 = 0.5, Dice(b, y) = 1 > Dice(a, y)
    = 0.5: in "b a" → "x y", x links to a (position 1) and y to b (0). Dice(c, z) = 2·1/(1 + 1)
    = 1 > Dice(a, z) = 2/3. A tie (the same word twice) goes to the position nearest j; a
    target word seen with no source word (q) too; an empty source links nothing."""
    sources = ["b a", "a c", "a a", "b a", ""]
    targets = ["x y", "z", "x x", "q", "x"]
    assert ab.dice_links(TRAIN, sources, targets) == [
        {(1, 0), (0, 1)},
        {(1, 0)},
        {(0, 0), (1, 1)},
        {(0, 0)},
        set(),
    ]


def test_sentence_counts_and_their_aer_by_hand() -> None:
    """Gold 0-0 1-1 (sure), links {0-0, 2-1}: |A| + |S| = 4, |A∩S| = |A∩P| = 1, AER = 1 − 2/4.
    With a possible link 2?1 added: |A∩P| = 2, AER = 1 − 3/4 = 0.25."""
    hyps = [{(0, 0), (2, 1)}]
    counts = ab.sentence_counts(hyps, [parse_links("0-0 1-1")])
    assert counts.tolist() == [[4.0, 1.0, 1.0]]
    assert ab.aer_of(counts) == pytest.approx(0.5)
    assert ab.aer_of(ab.sentence_counts(hyps, [parse_links("0-0 1-1 2?1")])) == pytest.approx(0.25)


def test_the_interval_of_identical_sentences_has_no_width() -> None:
    """Five copies of the one sentence: every resample scores the same AER 0.5."""
    scored = ab.aer_with_interval([{(0, 0), (2, 1)}] * 5, [parse_links("0-0 1-1")] * 5)
    assert scored.aer == pytest.approx(0.5) and scored.scores.sentences == 5
    assert scored.low == pytest.approx(0.5) and scored.high == pytest.approx(0.5)
    assert scored.half_width == pytest.approx(0.0) and scored.samples == ab.SAMPLES


def test_the_interval_spans_what_resamples_can_score_and_is_seeded() -> None:
    """Ten perfect sentences and ten wrong ones (AER 0.5 pooled): resamples score between 0
    and 1, the interval holds 0.5, and the same seed gives the same interval."""
    golds = [parse_links("0-0")] * 20
    hyps = [{(0, 0)}] * 10 + [{(1, 0)}] * 10
    first = ab.aer_with_interval(hyps, golds, samples=200, seed=3)
    assert first.aer == pytest.approx(0.5)
    assert 0.0 < first.low < 0.5 < first.high < 1.0
    assert ab.aer_with_interval(hyps, golds, samples=200, seed=3) == first
