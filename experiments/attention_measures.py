"""What the attention table adds to a run's ledger record, beyond BLEU and NLL.

- AER of the run's attention against the kept silver alignments of the test split
  (results/silver/, eflomal + grow-diag-final-and: an aligner's links, not a person's),
  scored by ``python evaluate.py ckpt=RUN split=test gold_alignments=FILE`` as a user would;
- the mean normalised entropy of its cross-attention at the last validation;
- the collapse share of the fixed sentence's map: the fraction of target rows whose
  largest weight sits on the most common such source column (a map whose rows all point at
  one column scores 1.0).

Its test hypotheses, kept beside the record for the paired bootstrap like every table's, are
experiments/kept_outputs.py's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attnmt.run_record import read_record
from experiments.alignment_baselines import ScoredBaseline, aer_with_interval, diagonal_links
from experiments.runs import evaluate_test

ROOT = Path(__file__).resolve().parents[1]
SILVER = {"ding_de_en": ROOT / "results" / "silver" / "ding_de_en.test.de-en.silver.align"}
"""Corpus -> its kept silver alignments of the test split."""
COLLAPSED = 0.8
"""A map is flagged collapsed when more than this share of its rows peak on one column."""


def silver_scores(run: Path, corpus: str, threads: int = 1) -> dict[str, float] | None:
    """``{"aer", "precision", "recall"}`` of ``run``'s best checkpoint against the corpus'
    silver alignments (greedy decoding; the alignment is the reference teacher-forced), or
    None when the corpus has none or evaluate.py fails."""
    gold = SILVER.get(corpus)
    if gold is None or not gold.is_file():
        return None
    entry = evaluate_test(run, threads, ("beam=1", f"gold_alignments={gold}"))
    if entry is None or entry.get("aer") is None:
        return None
    return {
        "aer": round(float(entry["aer"]), 4),
        "precision": round(float(entry["aer_precision"]), 4),
        "recall": round(float(entry["aer_recall"]), 4),
    }


def last_entropy(run: Path) -> float | None:
    """The cross-attention's mean normalised entropy at the run's last validation."""
    valid = read_record(run).valid
    value = valid[-1].get("attention_entropy_norm") if valid else None
    if isinstance(value, dict):
        value = value.get("cross")
    return round(float(value), 4) if isinstance(value, int | float) else None


def collapse_share(rows: Sequence[Sequence[float]]) -> float:
    """Share of the map's rows [T][S] whose argmax is the most common argmax column."""
    peaks = [max(range(len(r)), key=r.__getitem__) for r in rows if len(r)]
    if not peaks:
        return float("nan")
    return Counter(peaks).most_common(1)[0][1] / len(peaks)


def cross_map(maps: dict[str, Any]) -> list[list[float]]:
    """The fixed sentence's cross-attention [T][S] from an ``.attn.json``: an RNN's map, or
    the mean over heads of a Transformer's last layer."""
    cross = maps["maps"]["cross"]
    if maps.get("layer") is None:
        return [list(map(float, row)) for row in cross]
    heads = len(cross)
    return [[sum(h[t][s] for h in cross) / heads for s in range(len(cross[0][t]))]
            for t in range(len(cross[0]))]  # fmt: skip


def silver_diagonal(
    corpus: str, sources: Sequence[str], refs: Sequence[str]
) -> ScoredBaseline | None:
    """The diagonal alignment (experiments/alignment_baselines.py ``diagonal_links``) scored
    against the corpus' silver links, with its AER's bootstrap interval over the sentences;
    None without silver links or pairs."""
    from attnmt.decode.alignment_error import read_gold

    gold = SILVER.get(corpus)
    if gold is None or not gold.is_file() or not sources:
        return None
    return aer_with_interval(diagonal_links(sources, refs), read_gold(gold))
