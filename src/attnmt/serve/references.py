"""A line's reference translation and gold word alignment, as the API answers them.

The reference is forced through the model and its links read from the cross-attention
the way evaluate.py's alignment error reads them by default
(:data:`attnmt.decode.forced_alignment.EVALUATE_MAP` and ``EVALUATE_EXTRACTION``, the
defaults of configs/evaluate.yaml; pieces mapped to whitespace words). With a gold
alignment (:mod:`attnmt.data.gold`: ``i-j`` sure, ``i?j`` possible) the links are scored
by :func:`attnmt.decode.alignment_error.alignment_error`, the one sentence's counts as
evaluate.py sums them over a corpus, and so is every map of the model (``aer_table``:
each layer's mean of heads, each head, the mean over layers, as in evaluate.py's table:
:mod:`attnmt.decode.alignment_table`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attnmt.data.gold import Alignment
from attnmt.decode.alignment_error import alignment_error
from attnmt.decode.alignment_table import aer_table
from attnmt.decode.attention_maps import AttentionMaps
from attnmt.decode.forced_alignment import (
    EVALUATE_EXTRACTION,
    EVALUATE_MAP,
    map_links,
    table_choices,
)
from attnmt.decode.word_alignment import pharaoh, word_index
from attnmt.serve.jsonio import attention_json


@dataclass(frozen=True)
class Reference:
    """One line's reference translation and, when given, its gold links (checked against
    the line's and the reference's word counts)."""

    text: str
    gold: Alignment | None = None


def gold_json(gold: Alignment) -> dict[str, list[list[int]]]:
    """``{"sure": [[i, j], ...], "possible": [...]}``, each sorted; ``possible`` holds the
    links written ``i?j`` only (the scored P is sure and possible together)."""
    return {
        "sure": [list(link) for link in sorted(gold.sure)],
        "possible": [list(link) for link in sorted(gold.possible - gold.sure)],
    }


def reference_json(maps: AttentionMaps, ref: Reference, attention: bool) -> dict[str, Any]:
    """The API's ``reference`` of a line from the maps of its forced reference: pieces and
    the word of each (-1: ``</s>``), the forced alignment (Pharaoh), the gold echoed, the
    scores and the AER of every map (``aer_table``; these three null without gold); with
    ``attention`` its encoded maps."""
    (links,) = map_links([maps], [EVALUATE_MAP], EVALUATE_EXTRACTION)
    out: dict[str, Any] = {
        "text": ref.text,
        "target_pieces": maps.target_pieces,
        "source_words": word_index(maps.source_pieces),
        "target_words": word_index(maps.target_pieces),
        "alignment": pharaoh(links),
        "gold": None,
        "scores": None,
        "aer_table": None,
    }
    if ref.gold is not None:
        scores = alignment_error([links], [ref.gold]).to_dict()
        del scores["sentences"]
        layers, heads = maps.cross.shape[:2]
        choices = table_choices(layers, heads)
        per_map = [[x] for x in map_links([maps], choices, EVALUATE_EXTRACTION)]
        table = aer_table(choices, per_map, [ref.gold], EVALUATE_EXTRACTION)
        out.update(gold=gold_json(ref.gold), scores=scores, aer_table=table.to_dict())
    if attention:
        out["attention"] = attention_json(maps)
    return out


def word_warnings(line: int, source: str, out: dict[str, Any], source_cut: bool) -> list[str]:
    """Warnings for line ``line`` (0-based) when the tokenizer's word marks (▁) split the
    source (unless it was cut) or the reference into another number of words than
    whitespace does: the links then name other words than the gold's."""
    warnings = []
    for what, text, words, skip in (
        ("source", source, out["source_words"], source_cut),
        ("reference", out["text"], out["target_words"], False),
    ):
        marked, spaced = max(words, default=-1) + 1, len(text.split())
        if marked != spaced and not skip:
            warnings.append(
                f"line {line + 1}: the tokenizer's word marks (▁) split the {what} into "
                f"{marked} words, whitespace into {spaced}; its links may name other words "
                "than the gold's"
            )
    return warnings
