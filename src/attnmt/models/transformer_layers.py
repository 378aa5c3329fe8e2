"""Transformer encoder and decoder layers (Vaswani et al. 2017, §3.1), pre- or post-norm.

Each sub-layer F (self-attention, cross-attention, feed-forward) is wrapped as
    post-norm (the paper):  x ← LayerNorm(x + Dropout(F(x)))
    pre-norm (Xiong 2020):  x ← x + Dropout(F(LayerNorm(x)))
Tensors are batch-first [B,T,D]; masks are bool "allowed" masks (True = may attend).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from attnmt.models.dropout import Dropout
from attnmt.models.multihead import MultiHeadAttention

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU}
NORM_FIRST: dict[str, bool] = {"pre": True, "post": False}

SubLayer = Callable[[Tensor], tuple[Tensor, Tensor | None]]


class FeedForward(nn.Module):
    """FFN(x) = act(x W₁ + b₁) W₂ + b₂, act = max(0, ·) (ReLU) or GELU; [B,T,D] -> [B,T,D]."""

    def __init__(self, d_model: int, d_ff: int, activation: str, dropout: float):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, d_ff),
            ACTIVATIONS[activation](),
            Dropout(dropout),
            nn.Linear(d_ff, d_model),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class _Layer(nn.Module):
    """Shared residual wiring of encoder and decoder layers."""

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str, norm: str):
        super().__init__()
        self.norm_first = NORM_FIRST[norm]
        self.drop = Dropout(dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.ffn_norm = nn.LayerNorm(d_model)

    def residual(self, x: Tensor, norm: nn.LayerNorm, fn: SubLayer) -> tuple[Tensor, Tensor | None]:
        """Apply sub-layer ``fn`` with dropout, residual and LayerNorm (pre or post)."""
        if self.norm_first:
            out, extra = fn(norm(x))
            return x + self.drop(out), extra
        out, extra = fn(x)
        return norm(x + self.drop(out)), extra

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.residual(x, self.ffn_norm, lambda h: (self.ffn(h), None))[0]


class EncoderLayer(_Layer):
    """Self-attention then feed-forward."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        norm: str,
    ):
        super().__init__(d_model, d_ff, dropout, activation, norm)
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.self_norm = nn.LayerNorm(d_model)

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """x [B,S,D], mask [B,1,1,S] -> (x [B,S,D], self-attention [B,H,S,S] | None)."""
        x, weights = self.residual(
            x, self.self_norm, lambda h: self.self_attn(h, mask=mask, need_weights=need_weights)
        )
        return self.feed_forward(x), weights


class DecoderLayer(_Layer):
    """Causal self-attention, cross-attention over the encoder memory, feed-forward."""

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int,
        dropout: float,
        attention_dropout: float,
        activation: str,
        norm: str,
    ):
        super().__init__(d_model, d_ff, dropout, activation, norm)
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.self_norm = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.cross_norm = nn.LayerNorm(d_model)

    def forward(
        self,
        x: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher forcing. x [B,T,D], cross_kv: memory K/V [B,H,S,d_k], src_mask [B,1,1,S]
        -> (x [B,T,D], self [B,H,T,T] | None, cross [B,H,T,S] | None)."""
        x, self_w = self.residual(
            x,
            self.self_norm,
            lambda h: self.self_attn(h, causal=True, need_weights=need_weights),
        )
        x, cross_w = self.residual(
            x,
            self.cross_norm,
            lambda h: self.cross_attn.attend(
                h, *cross_kv, mask=src_mask, need_weights=need_weights
            ),
        )
        return self.feed_forward(x), self_w, cross_w

    def step(
        self,
        x: Tensor,
        cache: tuple[Tensor, Tensor],
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool = False,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor | None]:
        """One decoding step. x [B,1,D]; cache: this layer's self-attention K/V so far
        [B,H,t,d_k] -> (x [B,1,D], cache with the new step appended [B,H,t+1,d_k],
        cross-attention [B,H,1,S] | None)."""
        new_cache: list[tuple[Tensor, Tensor]] = []

        def self_attend(h: Tensor) -> tuple[Tensor, None]:
            k, v = self.self_attn.project_kv(h)
            k, v = torch.cat((cache[0], k), dim=2), torch.cat((cache[1], v), dim=2)
            new_cache.append((k, v))
            return self.self_attn.attend(h, k, v)[0], None  # the new query sees every key

        x, _ = self.residual(x, self.self_norm, self_attend)
        x, cross_w = self.residual(
            x,
            self.cross_norm,
            lambda h: self.cross_attn.attend(
                h, *cross_kv, mask=src_mask, need_weights=need_weights
            ),
        )
        return self.feed_forward(x), new_cache[0], cross_w
