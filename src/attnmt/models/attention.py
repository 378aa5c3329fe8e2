"""Attention: scorers, alignment modes, masked softmax.

Contract (see DESIGN.md): ``scores = scorer(query [B,Tq,Dq], keys [B,Tk,Dk]) -> [B,Tq,Tk]``
and ``context, weights = attend(scores, values [B,Tk,Dv], mask)``. Keys default to values,
so self-attention is query = key = value.

Masks here are "allowed" masks: bool, broadcastable to [B,Tq,Tk], True where the query
may attend to the key (the ``attn_mask`` convention of ``F.scaled_dot_product_attention``).
Batches carry padding masks (True = pad); pass ``~src_pad_mask[:, None, :]``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def masked_softmax(scores: Tensor, mask: Tensor | None, dim: int = -1) -> Tensor:
    """softmax over ``dim`` where ``mask`` is True; exactly 0 elsewhere.

    Masked scores are set to ``finfo(dtype).min`` (never -1e9). A row with no allowed
    position returns all zeros instead of NaN.
    """
    if mask is None:
        return torch.softmax(scores, dim=dim)
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = torch.softmax(scores, dim=dim)
    return weights.masked_fill(~mask, 0.0)


def attend(scores: Tensor, values: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """context_i = Σ_j softmax_j(scores_ij) v_j.

    scores [B,Tq,Tk] (or [B,H,Tq,Tk]), values [B,Tk,Dv] (or [B,H,Tk,Dv]),
    mask broadcastable to scores (True = allowed) ->
    (context [B,Tq,Dv], weights [B,Tq,Tk]).
    """
    weights = masked_softmax(scores, mask)
    return torch.matmul(weights.to(values.dtype), values), weights
