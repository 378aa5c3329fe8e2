"""Alignment error rate (AER) of word alignments against gold sure and possible links.

Gold files (:func:`read_gold`) hold one Pharaoh line per sentence pair, parsed by
:func:`attnmt.data.gold.parse_links`: ``i-j`` sure, ``i?j`` possible, between
whitespace-separated words numbered from 0, source first (a file of ``i-j`` only has every
link sure); possible links include the sure ones, S ⊆ P, as Och & Ney 2003 define them.

With A the links of the alignment scored, summed over the corpus (each count is the sum of
the sentences' counts, not a mean of per-sentence rates, as Och & Ney 2003 define them):

    precision = |A ∩ P| / |A|
    recall    = |A ∩ S| / |S|
    AER       = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|)

A ratio whose denominator is 0 is undefined and given as None: precision when A is empty,
recall when the gold holds no sure link (then AER = 1 − precision), AER when both are.

Och, F. J. and Ney, H. (2003). A Systematic Comparison of Various Statistical Alignment
Models. Computational Linguistics 29(1).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from attnmt.data.gold import Alignment, Link, check_bounds, parse_links
from attnmt.data.textio import read_lines

log = logging.getLogger(__name__)


def read_gold(path: str | Path) -> list[Alignment]:
    """Every line of the gold file ``path`` (DataError naming file and line when unusable).

    A file whose lines hold no link at all is read, with a warning naming it: every
    non-empty alignment scores AER 1 against it (precision 0, recall undefined), which says
    nothing about the alignment and usually means the wrong file was given.
    """
    golds = [parse_links(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), 1)]
    if golds and not any(g.possible for g in golds):
        log.warning(
            "gold alignments %s hold no links on any of their %d lines: every non-empty "
            "alignment scores AER 1 against them; check that this is the gold file of these "
            "pairs (i-j sure, i?j possible links per line)",
            path,
            len(golds),
        )
    return golds


def check_gold_ranges(
    golds: Sequence[Alignment], sources: Sequence[str], refs: Sequence[str], path: str | Path
) -> None:
    """DataError naming the gold file, line and link when a link names a word beyond its
    source or reference line (the lines must be the pairs the gold was written for)."""
    for n, (g, src, ref) in enumerate(zip(golds, sources, refs), 1):
        check_bounds(g, len(src.split()), len(ref.split()), f"{path}:{n}")


@dataclass(frozen=True)
class AlignmentScores:
    """Corpus-level AER, precision and recall with the counts they come from."""

    aer: float | None
    precision: float | None
    recall: float | None
    links: int  # |A|
    sure: int  # |S|
    possible: int  # |P|
    links_in_sure: int  # |A ∩ S|
    links_in_possible: int  # |A ∩ P|
    sentences: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def alignment_error(hyps: Sequence[Iterable[Link]], golds: Sequence[Alignment]) -> AlignmentScores:
    """AER, precision and recall of the alignments ``hyps`` (one collection of
    (source word, target word) links per sentence; duplicates count once) against
    ``golds``, counts summed over the corpus (see the module docstring)."""
    if len(hyps) != len(golds):
        raise ValueError(f"{len(hyps)} hypothesis alignments for {len(golds)} gold alignments")
    a = s = p = a_s = a_p = 0
    for links, g in zip(hyps, golds):
        found, possible = set(links), g.possible | g.sure
        a, s, p = a + len(found), s + len(g.sure), p + len(possible)
        a_s += len(found & g.sure)
        a_p += len(found & possible)
    aer = _ratio(a_s + a_p, a + s)
    return AlignmentScores(
        aer=None if aer is None else 1.0 - aer,
        precision=_ratio(a_p, a),
        recall=_ratio(a_s, s),
        links=a,
        sure=s,
        possible=p,
        links_in_sure=a_s,
        links_in_possible=a_p,
        sentences=len(golds),
    )
