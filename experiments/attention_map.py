"""The attention maps of one fixed test sentence from a finished run's best checkpoint.

The results runner keeps them beside the run's ledger record (``<stem>.attn.json``), so the
attention guide (experiments/attention_guide.py) draws every model's map of the same sentence
without the checkpoint. The model is teacher-forced on its own greedy translation, as the
trainer's heatmaps are; an RNN gives its one cross-attention map [T, S], a Transformer
every head of its last layer: encoder self-attention [H, S, S], decoder (masked)
self-attention [H, T, T] and cross-attention [H, T, S].
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from attnmt.atomic import write_json
from attnmt.data.batching import make_batch
from attnmt.decode.translator import load_translator

FIXED_CORPUS = "ding_de_en"
FIXED_SOURCE = "Tieffliegende Flugzeuge sind ein ständiges Ärgernis für die Anrainer."
FIXED_REFERENCE = "Low flying aircraft are a constant irritant to neighbouring residents."
"""Ding's test pair #2 (the end-of-run block prints it for every run)."""
DIGITS = 3  # keeps a Transformer's maps of one sentence under ~80 kB


def _rounded(weights: torch.Tensor) -> list[Any]:
    return [[round(float(x), DIGITS) for x in row] for row in weights.reshape(-1, weights.size(-1))]


@torch.no_grad()
def capture(run: Path, source: str = FIXED_SOURCE, reference: str = FIXED_REFERENCE) -> dict:
    """The maps of ``source`` from ``run``'s best checkpoint (plain data for JSON)."""
    translator = load_translator(run, device="cpu")
    model, tok = translator.model, translator.tokenizer
    (hyp,) = translator.hypotheses([source], beam=1)
    src_ids = translator.encode([source])[0]
    batch = make_batch([src_ids], [hyp.tokens if hyp is not None else []])
    tgt_input, tgt_out, _ = batch.target()
    maps = {k: v[0].float().cpu() for k, v in model.attention(batch).items()}
    last = max((int(k.rsplit("layer", 1)[1]) for k in maps if "/layer" in k), default=None)
    kept: dict[str, Any] = {}
    if last is None:
        kept["cross"] = _rounded(maps["cross"])
    else:
        for prefix in ("enc_self", "self", "cross"):
            w = maps.get(f"{prefix}/layer{last}")
            if w is not None:
                kept[prefix] = [_rounded(head) for head in w]
    return {
        "source": source,
        "reference": reference,
        "hypothesis": translator.text(hyp) if hyp is not None else "",
        "src_pieces": tok.src_pieces(batch.src[0].tolist()),
        "tgt_input": tok.tgt_pieces(tgt_input[0].tolist()),
        "tgt_out": tok.tgt_pieces(tgt_out[0].tolist()),
        "layer": last,
        "maps": kept,
    }


def keep(run: Path, target: Path, source: str = FIXED_SOURCE, reference: str = FIXED_REFERENCE):
    """Capture and write ``target`` (JSON, atomically); returns its path."""
    return write_json(target, capture(run, source, reference), indent=None)
