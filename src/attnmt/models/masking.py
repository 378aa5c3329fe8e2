"""Masked softmax, the one place masks turn into attention weights.

Masks are "allowed" masks: bool, broadcastable to the scores, True where the query may
attend to the key (the ``attn_mask`` convention of ``F.scaled_dot_product_attention``).
:mod:`attnmt.models.attention` re-exports :func:`masked_softmax`.
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
