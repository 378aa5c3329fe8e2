"""Corpus-level BLEU, chrF and TER from sacrebleu, with their signatures.

Detokenised hypotheses against one reference each, sacrebleu's default settings, so the
numbers match ``sacrebleu REF -i HYP -m bleu chrf ter``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric

from attnmt.errors import ConfigError, DataError

METRICS: dict[str, Callable[[], Metric]] = {"bleu": BLEU, "chrf": CHRF, "ter": TER}


@dataclass
class MetricResult:
    """One corpus score.

    name:      sacrebleu's name ("BLEU", "chrF2", "TER")
    score:     the corpus score (0–100; lower is better for TER)
    signature: sacrebleu's signature, e.g. "nrefs:1|case:mixed|eff:no|tok:13a|…"
    text:      sacrebleu's own line, "BLEU|nrefs:1|…|version:2.6.0 = 23.41 55.0/…"
    """

    name: str
    score: float
    signature: str
    text: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def score_fields(results: Mapping[str, MetricResult]) -> dict[str, Any]:
    """The run record's form of scores (attnmt.run_record; evaluate.py's scores.json too):
    ``{"bleu": 23.41, "bleu_signature": "BLEU|nrefs:1|…", "chrf": …, …}``."""
    fields: dict[str, Any] = {}
    for key, result in results.items():
        fields[key] = result.score
        fields[f"{key}_signature"] = f"{result.name}|{result.signature}"
    return fields


def corpus_scores(
    hyps: Sequence[str], refs: Sequence[str], metrics: Sequence[str] = ("bleu", "chrf", "ter")
) -> dict[str, MetricResult]:
    """Score ``hyps`` against ``refs`` (one reference per line); keys are the names asked."""
    if len(hyps) != len(refs):
        raise DataError(
            f"cannot score {len(hyps)} hypotheses against {len(refs)} references; "
            "they must be parallel, one line each"
        )
    if not hyps:
        raise DataError(
            "nothing to score: the source has no lines (an empty file or split); give a "
            "source and reference with at least one line each"
        )
    results: dict[str, MetricResult] = {}
    for key in metrics:
        try:
            metric = METRICS[key.lower()]()
        except KeyError:
            raise ConfigError(
                f"unknown metric {key!r}; choose from: {', '.join(sorted(METRICS))}"
            ) from None
        score = metric.corpus_score(list(hyps), [list(refs)])
        signature = str(metric.get_signature())
        results[key] = MetricResult(
            name=score.name,
            score=float(score.score),
            signature=signature,
            text=score.format(signature=signature),
        )
    return results
