"""Alignments that no network makes, the yardsticks an attention's AER is read against: the
diagonal (it reads no words: an attention no better has learnt nothing the lengths do not
give), a Dice co-occurrence count, and a corpus AER's percentile bootstrap interval over the
sentences (the gold file's own sampling noise).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attnmt.data.gold import Alignment, Link
from attnmt.decode.alignment_error import AlignmentScores, alignment_error

SAMPLES = 1000
SEED = 12345


def diagonal_links(sources: Sequence[str], targets: Sequence[str]) -> list[set[Link]]:
    """Per pair of S and T words, {(min(S − 1, round(j·S/T)), j) for each target word j}
    (empty for an empty side); Python's round: halves to the even neighbour."""
    out = []
    for src, tgt in zip(sources, targets):
        s, t = len(src.split()), len(tgt.split())
        out.append({(min(s - 1, round(j * s / t)), j) for j in range(t)} if s and t else set())
    return out


def dice_links(
    train: Sequence[tuple[str, str]], sources: Sequence[str], targets: Sequence[str]
) -> list[set[Link]]:
    """Per test pair, each target word t's link to the source word s of highest
    Dice(s, t) = 2·c(s, t) / (c(s) + c(t)), c counting the ``train`` pairs a word (a pair of
    words) occurs in; a tie (and a word no source word co-occurs with) goes to the source
    position nearest to j, then the first."""
    types = [(set(src.split()), set(tgt.split())) for src, tgt in train]
    c_src = Counter(a for s, _ in types for a in s)
    c_tgt = Counter(b for _, t in types for b in t)
    c_pair = Counter((a, b) for s, t in types for a in s for b in t)

    def dice(a: str, b: str) -> float:
        total = c_src[a] + c_tgt[b]
        return 2.0 * c_pair[(a, b)] / total if total else 0.0

    out = []
    for src, tgt in zip(sources, targets):
        s_words = src.split()
        links = set()
        for j, word in enumerate(tgt.split() if s_words else ()):
            scores = [dice(a, word) for a in s_words]
            top = max(scores)
            i = min((i for i, v in enumerate(scores) if v == top), key=lambda i: (abs(i - j), i))
            links.add((i, j))
        out.append(links)
    return out


@dataclass(frozen=True)
class ScoredBaseline:
    """Corpus-level scores of a baseline's links and the 95% bootstrap interval of its AER."""

    scores: AlignmentScores
    low: float
    high: float
    samples: int

    @property
    def aer(self) -> float:
        return float("nan") if self.scores.aer is None else self.scores.aer

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def sentence_counts(hyps: Sequence[set[Link]], golds: Sequence[Alignment]) -> np.ndarray:
    """[sentences, 3]: |A| + |S|, |A ∩ S|, |A ∩ P| of each pair, the sums AER is built of:
    AER = 1 − (Σ|A∩S| + Σ|A∩P|) / Σ(|A| + |S|)."""
    rows = []
    for links, gold in zip(hyps, golds, strict=True):
        possible = gold.possible | gold.sure
        rows.append((len(links) + len(gold.sure), len(links & gold.sure), len(links & possible)))
    return np.array(rows, dtype=float).reshape(-1, 3)


def aer_of(counts: np.ndarray) -> float:
    """AER of the summed counts of :func:`sentence_counts`."""
    total, sure, possible = counts.sum(axis=0)
    return 1.0 - (sure + possible) / total if total else float("nan")


def aer_with_interval(
    hyps: Sequence[set[Link]], golds: Sequence[Alignment], samples: int = SAMPLES, seed: int = SEED
) -> ScoredBaseline:
    """The links' corpus scores and the 2.5th and 97.5th percentiles of their AER over
    ``samples`` resamples of the sentences with replacement (numpy's generator, ``seed``)."""
    counts = sentence_counts(hyps, golds)
    rng = np.random.default_rng(seed)
    n = len(counts)
    draws = [aer_of(counts[rng.integers(0, n, n)]) for _ in range(samples)] if n else [np.nan]
    low, high = np.percentile(draws, [2.5, 97.5])
    return ScoredBaseline(alignment_error(hyps, golds), float(low), float(high), samples)
