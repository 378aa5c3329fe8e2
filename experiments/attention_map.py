"""The attention maps of one fixed test sentence, teacher-forced on the run's greedy translation
(attnmt.decode.attention_maps), kept as a record's attention_map.json for docs/attention.md:
an RNN's cross map [T][S], or every head of a Transformer's last layer: encoder self-attention
[H][S][S], decoder self-attention [H][T][T], cross-attention [H][T][S]."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnmt.decode.attention_maps import attention_maps
from attnmt.decode.translator import load_translator

FIXED_CORPUS = "ding_de_en"
FIXED_SOURCE = "Tieffliegende Flugzeuge sind ein ständiges Ärgernis für die Anrainer."
FIXED_REFERENCE = "Low flying aircraft are a constant irritant to neighbouring residents."
"""Ding's test pair #2 (the end-of-run block prints it for every run)."""
DIGITS = 3  # keeps a Transformer's maps of one sentence under ~80 kB


def _rounded(weights: torch.Tensor) -> list[Any]:
    """[..., R, C] -> nested lists of ``DIGITS``-rounded floats."""
    return [[round(x, DIGITS) for x in row] for row in weights.flatten(0, -2).tolist()]


def capture(run: Path, source: str = FIXED_SOURCE, reference: str = FIXED_REFERENCE) -> dict:
    """The maps of ``source`` from ``run``'s best checkpoint (plain data for JSON)."""
    translator = load_translator(run, device="cpu")
    (hyp,) = translator.hypotheses([source], beam=1)
    tokens = hyp.tokens if hyp is not None else []
    (maps,) = attention_maps(
        translator.model, translator.tokenizer, translator.device,
        translator.encode([source]), [(tokens, True)],
    )  # fmt: skip
    enc, dec = maps.encoder_self, maps.decoder_self
    layer: int | None = None
    kept: dict[str, Any] = {"cross": _rounded(maps.cross[0, 0])}  # an RNN's one map
    if enc is not None and dec is not None:
        layer = maps.cross.size(0) - 1
        last = {"enc_self": enc[-1], "self": dec[-1], "cross": maps.cross[-1]}
        kept = {name: [_rounded(head) for head in w] for name, w in last.items()}
    return {
        "source": source,
        "reference": reference,
        "hypothesis": translator.text(hyp) if hyp is not None else "",
        "src_pieces": maps.source_pieces,
        "tgt_input": maps.decoder_input_pieces,
        "tgt_out": maps.target_pieces,
        "layer": layer,
        "maps": kept,
    }
