"""Alignment error rate (AER) of word alignments against gold sure and possible links.

Gold files are Pharaoh-style, one line per sentence pair, links separated by spaces: ``i-j``
is a sure link and ``i?j`` a possible one between source word ``i`` and target word ``j``
(whitespace-separated words, numbered from 0). A file with only ``i-j`` links has every
link sure. Possible links include the sure ones (S ⊆ P, as Och & Ney 2003 define them): a
link written both ways is sure.

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

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from attnmt.data.textio import read_lines
from attnmt.errors import DataError

Link = tuple[int, int]
_LINK = re.compile(r"(\d+)([-?])(\d+)")


@dataclass(frozen=True)
class GoldAlignment:
    """One sentence pair's gold links; ``possible`` includes ``sure``."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def parse_links(line: str, where: str) -> GoldAlignment:
    """The links of one gold line; DataError naming ``where`` (``file:line``) and the
    first malformed link."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in line.split():
        match = _LINK.fullmatch(token)
        if match is None:
            raise DataError(
                f"{where}: {token!r} is not a link; write source-target word indices from "
                "0 separated by spaces: i-j (sure) or i?j (possible), e.g. 0-0 1?2"
            )
        link = (int(match[1]), int(match[3]))
        (sure if match[2] == "-" else possible).add(link)
    return GoldAlignment(frozenset(sure), frozenset(possible | sure))


def read_gold(path: str | Path) -> list[GoldAlignment]:
    """Every line of the gold file ``path`` (DataError naming file and line when unusable)."""
    return [parse_links(line, f"{path}:{n}") for n, line in enumerate(read_lines(path), 1)]


def check_gold_ranges(
    golds: Sequence[GoldAlignment], sources: Sequence[str], refs: Sequence[str], path: str | Path
) -> None:
    """DataError naming the gold file, line and link when a link names a word beyond its
    source or reference line (the lines must be the pairs the gold was written for)."""
    for n, (g, src, ref) in enumerate(zip(golds, sources, refs), 1):
        n_src, n_ref = len(src.split()), len(ref.split())
        for i, j in sorted(g.possible):
            if i >= n_src or j >= n_ref:
                side, count = ("source", n_src) if i >= n_src else ("reference", n_ref)
                raise DataError(
                    f"{path}:{n}: link {i}-{j} names a word beyond the sentence: {side} line "
                    f"{n} has {count} words (numbered from 0); is the gold file written for "
                    "these source and reference lines?"
                )


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


def alignment_error(
    hyps: Sequence[Iterable[Link]], golds: Sequence[GoldAlignment]
) -> AlignmentScores:
    """AER, precision and recall of the alignments ``hyps`` (one collection of
    (source word, target word) links per sentence; duplicates count once) against
    ``golds``, counts summed over the corpus (see the module docstring)."""
    if len(hyps) != len(golds):
        raise ValueError(f"{len(hyps)} hypothesis alignments for {len(golds)} gold alignments")
    a = s = p = a_s = a_p = 0
    for links, g in zip(hyps, golds):
        found = set(links)
        a, s, p = a + len(found), s + len(g.sure), p + len(g.possible)
        a_s += len(found & g.sure)
        a_p += len(found & g.possible)
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
