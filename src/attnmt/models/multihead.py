"""Multi-head attention (Vaswani et al. 2017, §3.2.2).

    MultiHead(Q, K, V) = Concat(head_1, …, head_h) W_O,
    head_i = softmax(Q W_Q^i (K W_K^i)ᵀ / √d_k) V W_V^i,   d_k = d_v = d_model / h.

Two paths compute the same thing: ``F.scaled_dot_product_attention`` (fused, used when
weights are not requested) and the explicit one through
:func:`attnmt.models.attention.masked_softmax` (used when they are). In eval mode they
agree to 1e-5.

Masks are bool "allowed" masks (True = may attend), broadcastable to [B,H,Tq,Tk]; a
padding mask becomes ``~src_pad_mask[:, None, None, :]``. A query row with no allowed
key gets an all-zero context (so its output is W_O's bias) on both paths, never NaN.

On a GPU the fused path leaves out cuDNN's attention backend (:func:`sdpa`): cuDNN builds an
execution plan for every new (batch, length) shape, about 0.3 s on an H100, and the
length-bucketed loader gives nearly every batch a new shape (docs/performance.md, "On a GPU").

Incremental decoding splits the layer into :meth:`MultiHeadAttention.project_kv`
(keys/values in head layout [B,H,Tk,d_k], computed once for cross-attention, appended
step by step for a self-attention cache) and :meth:`MultiHeadAttention.attend`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from attnmt.errors import ConfigError
from attnmt.models.attention import masked_softmax


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """[B,T,H·d] -> [B,H,T,d]."""
    b, t, d = x.shape
    return x.view(b, t, n_heads, d // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """[B,H,T,d] -> [B,T,H·d]."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


NO_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
"""The SDPA backends a GPU may choose from: all but cuDNN's (module docstring)."""


def sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """``F.scaled_dot_product_attention``; on CUDA without the cuDNN backend, whose
    per-shape plans cost more than a step (module docstring)."""
    if not q.is_cuda:
        return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    with sdpa_kernel(NO_CUDNN):
        return F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)


def scaled_dot_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    causal: bool = False,
    dropout: float = 0.0,
    need_weights: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """softmax(q kᵀ / √d_k) v per head, with masking that never yields NaN.

    q [B,H,Tq,d], k/v [B,H,Tk,d], mask bool broadcastable to [B,H,Tq,Tk] (True =
    allowed), ``causal`` adds j <= i (requires Tq == Tk) ->
    (context [B,H,Tq,d], weights [B,H,Tq,Tk] before dropout, or None).
    """
    if causal:
        tq, tk = q.size(-2), k.size(-2)
        if tq != tk:
            raise ValueError(f"causal attention needs Tq == Tk, got {tq} and {tk}")
        tri = torch.ones(tq, tk, dtype=torch.bool, device=q.device).tril()
        mask = tri if mask is None else mask & tri
        causal = mask is tri  # SDPA's own causal kernel only when no other mask
    if need_weights:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        weights = masked_softmax(scores, mask)
        dropped = F.dropout(weights, dropout) if dropout > 0 else weights
        return torch.matmul(dropped.to(v.dtype), v), weights
    if causal:
        ctx = sdpa(q, k, v, dropout_p=dropout, is_causal=True)
        return ctx, None
    if mask is None:
        return sdpa(q, k, v, dropout_p=dropout), None
    # SDPA returns NaN on a row with no allowed key: open such rows fully, zero them after.
    has_key = mask.any(dim=-1, keepdim=True)  # [.., Tq, 1]
    ctx = sdpa(q, k, v, attn_mask=mask | ~has_key, dropout_p=dropout)
    return ctx.masked_fill(~has_key, 0.0), None


class MultiHeadAttention(nn.Module):
    """h parallel scaled dot-product heads over learned projections, then W_O.

    d_model: model width (divisible by n_heads); dropout: on the attention weights.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if n_heads <= 0 or d_model % n_heads:
            raise ConfigError(
                f"model.d_model={d_model} must be divisible by model.n_heads={n_heads}"
            )
        self.d_model, self.n_heads, self.dropout = d_model, n_heads, dropout
        self.d_k = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def project_kv(self, key: Tensor, value: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """key [B,Tk,D] (value defaults to key) -> (K W_K, V W_V) in heads [B,H,Tk,d_k]."""
        value = key if value is None else value
        return (
            split_heads(self.k_proj(key), self.n_heads),
            split_heads(self.v_proj(value), self.n_heads),
        )

    def attend(
        self,
        query: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query [B,Tq,D] over projected k/v [B,H,Tk,d_k] -> (out [B,Tq,D], [B,H,Tq,Tk]|None)."""
        q = split_heads(self.q_proj(query), self.n_heads)
        dropout = self.dropout if self.training else 0.0
        ctx, weights = scaled_dot_attention(q, k, v, mask, causal, dropout, need_weights)
        return self.out_proj(merge_heads(ctx)), weights

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        mask: Tensor | None = None,
        causal: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query [B,Tq,D], key/value [B,Tk,D] (default: query, i.e. self-attention),
        mask broadcastable to [B,H,Tq,Tk] (True = allowed) ->
        (output [B,Tq,D], weights [B,H,Tq,Tk] if need_weights else None)."""
        key = query if key is None else key
        k, v = self.project_kv(key, value)
        return self.attend(query, k, v, mask, causal, need_weights)
