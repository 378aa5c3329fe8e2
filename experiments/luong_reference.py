"""The attention table against Luong et al. (2015), the comparison it reproduces in miniature.

Luong, Pham & Manning, "Effective Approaches to Attention-based Neural Machine Translation"
(EMNLP 2015): Table 4 gives newstest2014 English→German BLEU (after unknown-word
replacement) of 4-layer, 1,000-unit LSTMs per scorer and alignment mode, Table 6 the AER of
three of them against 508 RWTH gold-aligned Europarl sentences. Their cells are a subset of
attnmt's grid (scorers dot, general, location; modes global, local-m, local-p); local-m with
dot has no BLEU there (perplexity 7.0, its BLEU marked x), and concat is left out of the table
(a footnote gives its perplexity: 6.7 global, 7.1 local-m and local-p). Their AER links each
target word to its source word of highest weight while force-decoding the reference; attnmt's
does the same per target piece (attnmt.decode.forced_alignment and word_alignment), so a word
of several pieces may get several links. The constants below were checked on 2026-11-27
against two public transcriptions of the paper (Table 4: all six cells and the local-m dot
row; Table 6: all three, beside the ensemble's 0.34 and the Berkeley aligner's 0.32).
:func:`comparison` ranks the cells both grids share by their figure and by attnmt's test
BLEU, and says where their best cell ranks here; their AER order is compared only among the
shared cells whose silver AER beats the diagonal alignment beyond the silver file's noise
(experiments/attention_table.py ``beating_cells``). Differences here are resolved or not by
the analysis above it, not by ranks.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

Key = tuple[str, str]
"""(scorer, mode) in attnmt's names."""

PUBLISHED_BLEU: dict[Key, float] = {
    ("general", "local_p"): 20.9,
    ("dot", "global"): 20.5,
    ("general", "local_m"): 20.4,
    ("dot", "local_p"): 19.6,
    ("location", "global"): 19.3,
    ("general", "global"): 19.1,
}
"""Luong et al. (2015) Table 4, BLEU after unknown-word replacement."""
PUBLISHED_AER: dict[Key, float] = {
    ("general", "local_m"): 0.34,
    ("general", "local_p"): 0.36,
    ("location", "global"): 0.39,
}
"""Luong et al. (2015) Table 6, AER against gold alignments."""


def name(key: Key) -> str:
    return f"{key[1]} {key[0]}"


def ranking(values: Mapping[Key, float], higher: bool, digits: int) -> str:
    """'a 1.00 > b 0.50' (or '<' where lower is better), best first; ties keep the order of
    ``values``."""
    order = sorted(values, key=lambda k: -values[k] if higher else values[k])
    sign = " > " if higher else " < "
    return sign.join(f"{name(k)} {values[k]:.{digits}f}" for k in order)


def rank_of(key: Key, values: Mapping[Key, float], higher: bool) -> int:
    """1-based rank of ``key`` among ``values`` (1: best)."""
    better = [k for k in values if (values[k] > values[key] if higher else values[k] < values[key])]
    return 1 + len(better)


def _part(
    what: str,
    published: Mapping[Key, float],
    here: Mapping[Key, float],
    higher: bool,
    digits: tuple[int, int],
) -> str:
    shared = {k: here[k] for k in published if k in here}
    theirs = ranking(published, higher, digits[0])
    if len(shared) < 2:
        return f"{what}: theirs {theirs}; here too few of these cells are measured yet."
    best = max(published, key=lambda k: published[k] if higher else -published[k])
    missing = [name(k) for k in published if k not in here]
    text = (
        f"{what}: theirs {theirs}; here {ranking(shared, higher, digits[1])}"
        + (f" ({', '.join(missing)} not yet measured)" if missing else "")
        + "; "
    )
    if best in shared:
        where = rank_of(best, shared, higher)
        text += f"their best, {name(best)}, ranks {where} of {len(shared)} here."
    else:
        text += f"their best, {name(best)}, is not yet measured here."
    return text


def _aer_part(here: Mapping[Key, float], diagonal: float | None, beats: Collection[Key]) -> str:
    """Their AER ranking beside this table's silver AER, read against the diagonal: their
    order is compared only among the shared cells that beat the diagonal beyond the silver
    file's noise (``beats``); a cell that does not has shown no alignment to rank."""
    theirs = f"AER (here: silver): theirs {ranking(PUBLISHED_AER, False, 2)}; here "
    shared = {k: here[k] for k in PUBLISHED_AER if k in here}
    if not shared:
        return theirs + "none of these cells is measured yet."
    text = theirs + ", ".join(f"{name(k)} {v:.3f}" for k, v in shared.items())
    won = {k: v for k, v in shared.items() if diagonal is not None and k in beats}
    if diagonal is None:
        return text + "; without the diagonal alignment's AER their order is not tested here."
    text += f", the diagonal alignment {diagonal:.3f}; beyond the silver file's noise "
    if len(won) < 2:
        who = f"only {name(next(iter(won)))} beats" if won else "none of them beats"
        return text + f"{who} the diagonal, so their order is not tested here."
    best = min(PUBLISHED_AER, key=PUBLISHED_AER.__getitem__)
    text += f"{len(won)} beat the diagonal: {ranking(won, False, 3)}; their best, {name(best)}, "
    if best in won:
        return text + f"ranks {rank_of(best, won, False)} of {len(won)} of those."
    return text + "is not among them."


def comparison(
    bleu: Mapping[Key, float],
    silver_aer: Mapping[Key, float],
    diagonal: float | None = None,
    beats: Collection[Key] = (),
) -> list[str]:
    """The generated paragraph: Luong et al.'s ranking of the shared cells beside this
    table's (``bleu``: mean test BLEU per (scorer, mode) of the rnn_luong grid; ``silver_aer``:
    mean AER against silver links, read against the ``diagonal`` alignment's AER: ``beats``
    are the cells that beat it beyond the silver file's noise), and where their best cells
    rank here."""
    here_bleu = {k: v for k, v in bleu.items() if k in PUBLISHED_BLEU}
    theirs = {k for table in (PUBLISHED_BLEU, PUBLISHED_AER) for k in table}
    modes = sorted({m for _, m in bleu} - {m for _, m in theirs})
    scorers = sorted({s for s, _ in bleu} - {s for s, _ in theirs})
    own = [f"{kind} {', '.join(names)}" for kind, names in (("mode", modes), ("scorers", scorers))
           if names]  # fmt: skip
    lines = [
        "Against Luong et al. (2015), the same question on WMT'14 English→German with "
        "4-layer 1,000-unit LSTMs (their Table 4: newstest2014 BLEU after unknown-word "
        "replacement; Table 6: AER against 508 gold-aligned sentences; their local_m dot has "
        "no BLEU, at perplexity 7.0), over the cells both grids share, this table's means "
        "over its seeds so far"
        + (f" (attnmt's grid adds the {' and the '.join(own)})" if own else "")
        + "."
        + (" Here local_m dot trains." if ("dot", "local_m") in bleu else ""),
        _part("BLEU", PUBLISHED_BLEU, here_bleu, True, (1, 2)),
        _aer_part(silver_aer, diagonal, beats),
    ]
    return [" ".join(lines), ""]
