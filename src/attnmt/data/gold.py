"""Gold word alignments in Pharaoh format, with sure and possible links.

One line per sentence pair, in the order of the pairs; each line holds space-separated
links ``i-j`` (sure) and ``i?j`` (possible), where ``i`` is a 0-based word index of the
source sentence and ``j`` one of the target sentence (words: the sentence split on
whitespace). A pair without links has an empty line. This is the gold format of the
awesome-align and SimAlign tools: Och & Ney (2003) score a predicted alignment ``A``
against sure links ``S`` and possible links ``P ⊇ S``, so a link written both ways
counts as sure. attnmt.decode.alignment_error reads these files for scoring; this module
writes them and checks a recipe's lines when a corpus is prepared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from attnmt.errors import DataError

Link = tuple[int, int]  # (source word index, target word index), 0-based


@dataclass(frozen=True)
class Alignment:
    """The gold links of one sentence pair; ``possible`` includes ``sure`` (P ⊇ S)."""

    sure: frozenset[Link]
    possible: frozenset[Link]


def format_links(sure: Iterable[Link], possible: Iterable[Link] = ()) -> str:
    """One Pharaoh line: the links sorted by (source, target); ``i-j`` sure, ``i?j``
    possible (a possible link that is also sure is written once, as sure)."""
    sure_set = set(sure)
    links = [(i, j, "-") for i, j in sure_set]
    links += [(i, j, "?") for i, j in set(possible) - sure_set]
    return " ".join(f"{i}{mark}{j}" for i, j, mark in sorted(links))


MAX_INDEX_DIGITS = 9
"""The most significant digits a word index may have (up to 999,999,999): no sentence holds
more words, and a longer one is refused before ``int()``, which refuses past 4,300 digits
(and converts in time quadratic in the length)."""

SHOWN = 40
"""The most characters of a malformed link quoted in an error message."""


def _index(text: str) -> bool:
    """Is ``text`` a word index (ASCII digits only)?"""
    return text.isascii() and text.isdecimal()


def _shown(token: str) -> str:
    """``token`` quoted, its middle cut when it is longer than :data:`SHOWN` characters."""
    if len(token) <= SHOWN:
        return repr(token)
    half = SHOWN // 2
    return f"{token[:half]!r}…{token[-half:]!r} ({len(token):,} characters)"


def parse_links(line: str, where: str = "") -> Alignment:
    """An :class:`Alignment` from one Pharaoh line; DataError naming ``where`` (e.g.
    ``file:line``) and the malformed link otherwise."""
    sure: set[Link] = set()
    possible: set[Link] = set()
    for token in line.split():
        mark = "?" if "?" in token else "-"
        left, _, right = token.partition(mark)
        if not (_index(left) and _index(right)):
            raise DataError(
                f"{where}: {_shown(token)} is not a link; write i-j (sure) or i?j (possible) "
                "with 0-based word indices, source first"
            )
        left, right = left.lstrip("0") or "0", right.lstrip("0") or "0"
        digits = max(len(left), len(right))
        if digits > MAX_INDEX_DIGITS:
            raise DataError(
                f"{where}: link {_shown(token)} names a word index of {digits:,} digits; "
                f"indices have at most {MAX_INDEX_DIGITS} (no sentence holds more words), so "
                "the gold does not match its sentences"
            )
        (sure if mark == "-" else possible).add((int(left), int(right)))
    return Alignment(frozenset(sure), frozenset(possible | sure))


def check_bounds(alignment: Alignment, n_src: int, n_tgt: int, where: str = "") -> None:
    """Every link lies within a pair of ``n_src`` source and ``n_tgt`` target words;
    DataError naming ``where``, the link and the lengths otherwise."""
    for i, j in sorted(alignment.possible):
        if i >= n_src or j >= n_tgt:
            raise DataError(
                f"{where}: link {i}-{j} lies outside the pair ({n_src} source and {n_tgt} "
                "target words); the gold file does not match its sentences"
            )
