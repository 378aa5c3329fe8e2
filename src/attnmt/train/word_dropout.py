"""Word dropout: real pieces of the model's *inputs* replaced by ``<unk>`` while training.

A regulariser for small corpora (Sennrich & Zhang 2019, "Revisiting Low-Resource Neural
Machine Translation"; Gal & Ghahramani 2016 drop whole word embeddings). For every piece
``x`` of the source and of the decoder input (not the labels ``tgt_out``)::

    x' = <unk>  with probability p     (only real pieces: <pad>, <s>, </s> stay)
    x' = x      otherwise

so the model cannot lean on any single input piece and learns to use the context. The
draw comes from torch's global generator, whose state a checkpoint saves, so a resumed
run draws the same masks.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import Tensor

from attnmt import EOS_ID, UNK_ID
from attnmt.batch import Batch


def drop_pieces(ids: Tensor, p: float) -> Tensor:
    """``ids`` [B, L] with each real piece (id > EOS) set to UNK with probability ``p``."""
    if p <= 0.0:
        return ids
    hit = (torch.rand(ids.shape, device=ids.device) < p) & (ids > EOS_ID)
    return ids.masked_fill(hit, UNK_ID)


def word_dropout(batch: Batch, p_src: float, p_tgt: float) -> Batch:
    """``batch`` with its source and decoder input pieces dropped (``tgt_out`` untouched)."""
    if p_src <= 0.0 and p_tgt <= 0.0:
        return batch
    tgt_input = batch.tgt_input
    if tgt_input is not None:
        tgt_input = drop_pieces(tgt_input, p_tgt)
    return dataclasses.replace(batch, src=drop_pieces(batch.src, p_src), tgt_input=tgt_input)
