"""Every attention map of a hypothesis, read by teacher-forcing the model on it.

The search keeps only the last layer's cross-attention averaged over heads
(``Hypothesis.attention``). To show every layer and head, the model is run once more,
teacher-forced on its own hypothesis (``Seq2Seq.attention``, as the trainer's heatmaps in
``attnmt.train.evaluation`` do), and the maps are cut to the real pieces:

* ``source_pieces``: the source pieces and ``</s>`` (S columns; what the encoder reads);
* ``target_pieces``: the hypothesis' pieces and ``</s>`` when it ended with EOS (T rows;
  what each decoder step produced);
* ``decoder_input_pieces``: ``<s>`` and the pieces before each step (T; the decoder's
  inputs, rows and columns of decoder self-attention).

Maps (nested lists of floats, rows sum to 1):

* ``cross``: [L, H, T, S] cross-attention per decoder layer and head (Transformer); an RNN's
  alignment weights as [1, 1, T, S];
* ``encoder_self``: [L, H, S, S] and ``decoder_self``: [L, H, T, T] (Transformer; None for
  RNNs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.data.batching import make_batch
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.translator import cut_sources
from attnmt.models.base import Seq2Seq

KINDS = ("cross", "encoder_self", "decoder_self")
"""The map kinds, in the order the page offers them."""

_PREFIX = {"cross": "cross/layer", "encoder_self": "enc_self/layer", "decoder_self": "self/layer"}


@dataclass
class AttentionMaps:
    """The maps of one hypothesis (see the module docstring for shapes)."""

    source_pieces: list[str]
    target_pieces: list[str]
    decoder_input_pieces: list[str]
    cross: Tensor  # [L, H, T, S]
    encoder_self: Tensor | None = None  # [L, H, S, S]
    decoder_self: Tensor | None = None  # [L, H, T, T]

    def mean_last_cross(self) -> Tensor:
        """[T, S]: the last cross layer averaged over its heads (what translate.py's and
        serve.py's translation alignments read; evaluate.py chooses with ``align_layer``)."""
        return self.cross[-1].mean(dim=0)

    def to_lists(self, digits: int = 4) -> dict[str, list | None]:
        """The three maps as nested lists rounded to ``digits`` (JSON-ready)."""
        return {k: _rounded(getattr(self, k), digits) for k in KINDS}


def _rounded(t: Tensor | None, digits: int) -> list | None:
    return None if t is None else torch.round(t.double(), decimals=digits).tolist()


def source_ids(tokenizer: Tokenizer, sentences: Sequence[str], limit: int) -> list[list[int]]:
    """Source piece ids as the Translator makes them (whitespace normalised, a very long
    line cut by characters, then cut to ``limit`` pieces: :func:`cut_sources`), without its
    warning: callers that decode through the Translator get it there once."""
    return cut_sources(tokenizer, sentences, limit)[0]


def _stack(maps: dict[str, Tensor], prefix: str, row: int) -> Tensor | None:
    keys = sorted((k for k in maps if k.startswith(prefix)), key=lambda k: int(k[len(prefix) :]))
    if not keys:
        return None
    return torch.stack([maps[k][row] for k in keys]).float().cpu()  # [L, H, ., .]


@torch.no_grad()
def attention_maps(
    model: Seq2Seq,
    tokenizer: Tokenizer,
    device: torch.device,
    src: Sequence[Sequence[int]],
    hyps: Sequence[tuple[Sequence[int], bool]],
) -> list[AttentionMaps]:
    """The maps of each (source ids, (hypothesis ids, finished)) pair, in one
    teacher-forced batch; the model is left in the mode it was in."""
    if not src:
        return []
    batch = make_batch(list(src), [list(t) for t, _ in hyps]).to(device)
    tgt_input, tgt_out, _ = batch.target()
    was_training = model.training
    model.eval()
    try:
        maps = model.attention(batch)
    finally:
        model.train(was_training)
    out = []
    for i, (tokens, finished) in enumerate(hyps):
        s = len(src[i]) + 1  # pieces + </s>
        t = len(tokens) + 1 if finished else len(tokens)
        cross = _stack(maps, _PREFIX["cross"], i)
        if cross is None:  # an RNN: one map [B, T, S]
            cross = maps["cross"][i].float().cpu()[None, None]
        enc = _stack(maps, _PREFIX["encoder_self"], i)
        dec = _stack(maps, _PREFIX["decoder_self"], i)
        out.append(
            AttentionMaps(
                source_pieces=tokenizer.src_pieces(batch.src[i, :s].tolist()),
                target_pieces=tokenizer.tgt_pieces(tgt_out[i, :t].tolist()),
                decoder_input_pieces=tokenizer.tgt_pieces(tgt_input[i, :t].tolist()),
                cross=cross[..., :t, :s].contiguous(),
                encoder_self=None if enc is None else enc[..., :s, :s].contiguous(),
                decoder_self=None if dec is None else dec[..., :t, :t].contiguous(),
            )
        )
    return out
