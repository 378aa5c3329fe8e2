"""The attention table against Luong, Pham & Manning (EMNLP 2015), the comparison it reproduces
in miniature: their 4-layer 1,000-unit LSTMs' BLEU and AER per scorer and mode, and the
paragraph that ranks the cells both grids share. Their AER, like attnmt's (per target piece),
links each target word to its most-attended source word while force-decoding the reference."""

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
"""Luong et al. (2015) Table 4, newstest2014 English→German BLEU after unknown-word
replacement (local_m dot has none; concat is only in a footnote)."""
PUBLISHED_AER: dict[Key, float] = {
    ("general", "local_m"): 0.34,
    ("general", "local_p"): 0.36,
    ("location", "global"): 0.39,
}
"""Luong et al. (2015) Table 6, AER against 508 gold-aligned Europarl sentences."""


def name(key: Key) -> str:
    return f"{key[1]} {key[0]}"


def ranking(values: Mapping[Key, float], higher: bool, digits: int) -> str:
    """'a 1.00 > b 0.50' (or '<' where lower is better), best first; ties keep their order."""
    order = sorted(values, key=lambda k: -values[k] if higher else values[k])
    return (" > " if higher else " < ").join(f"{name(k)} {values[k]:.{digits}f}" for k in order)


def rank_of(key: Key, values: Mapping[Key, float], higher: bool) -> int:
    """1-based rank of ``key`` among ``values`` (1: best)."""
    better = [k for k in values if (values[k] > values[key] if higher else values[k] < values[key])]
    return 1 + len(better)


def _bleu_part(here: Mapping[Key, float]) -> str:
    """Their BLEU ranking, this table's over the shared cells, and where their best ranks."""
    shared = {k: here[k] for k in PUBLISHED_BLEU if k in here}
    text = f"BLEU: theirs {ranking(PUBLISHED_BLEU, True, 1)}; here "
    if len(shared) < 2:
        return text + "too few of these cells are measured yet."
    best = max(PUBLISHED_BLEU, key=PUBLISHED_BLEU.__getitem__)
    missing = ", ".join(name(k) for k in PUBLISHED_BLEU if k not in here)
    text += ranking(shared, True, 2) + (f" ({missing} not yet measured)" if missing else "")
    where = f"ranks {rank_of(best, shared, True)} of {len(shared)}" if best in shared else ""
    return text + f"; their best, {name(best)}, {where or 'is not yet measured'} here."


def _aer_part(here: Mapping[Key, float], diagonal: float | None, beats: Collection[Key]) -> str:
    """Their AER ranking beside this table's silver AER: their order is compared only among
    the shared cells that beat the diagonal beyond the silver file's noise (``beats``)."""
    theirs = f"AER (here: silver): theirs {ranking(PUBLISHED_AER, False, 2)}; here "
    shared = {k: here[k] for k in PUBLISHED_AER if k in here}
    if not shared:
        return theirs + "none of these cells is measured yet."
    text = theirs + ", ".join(f"{name(k)} {v:.3f}" for k, v in shared.items())
    if diagonal is None:
        return text + "; without the diagonal alignment's AER their order is not tested here."
    text += f", the diagonal alignment {diagonal:.3f}; beyond the silver file's noise "
    won = {k: v for k, v in shared.items() if k in beats}
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
    """The paragraph (and a blank line): Luong et al.'s rankings of the shared cells beside
    this table's mean test BLEU (``bleu``) and silver AER (``silver_aer``, read against the
    ``diagonal`` alignment's AER; ``beats``: the cells that beat it beyond the noise)."""
    theirs = {*PUBLISHED_BLEU, *PUBLISHED_AER}
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
        _bleu_part(bleu),
        _aer_part(silver_aer, diagonal, beats),
    ]
    return [" ".join(lines), ""]
