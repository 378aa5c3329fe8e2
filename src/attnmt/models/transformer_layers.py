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

from attnmt.kernels import Dropout
from attnmt.models.multihead import MultiHeadAttention

ACTIVATIONS: dict[str, type[nn.Module]] = {"relu": nn.ReLU, "gelu": nn.GELU}
NORM_FIRST: dict[str, bool] = {"pre": True, "post": False}


def concat_cache(cache: Tensor, new: Tensor) -> Tensor:
    """cache [B,H,t,d] + new [B,H,1,d] -> [B,H,t+1,d] (a new tensor)."""
    return torch.cat((cache, new), dim=2)


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
    """Shared residual wiring of encoder and decoder layers: a sub-layer F is applied as

    h = norm(x) (pre-norm) or x (post-norm);  out = F(h)
    x ← x + Dropout(out) (pre-norm)  or  norm(x + Dropout(out)) (post-norm)
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float, activation: str, norm: str):
        super().__init__()
        self.norm_first = NORM_FIRST[norm]
        self.drop = Dropout(dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, dropout)
        self.ffn_norm = nn.LayerNorm(d_model)

    def sublayer_input(self, x: Tensor, norm: nn.LayerNorm) -> Tensor:
        """What a sub-layer reads: norm(x) before it (pre-norm) or x itself (post-norm)."""
        return norm(x) if self.norm_first else x

    def add_residual(self, x: Tensor, out: Tensor, norm: nn.LayerNorm) -> Tensor:
        """x + Dropout(out), normalised after the sum in post-norm layers."""
        y = x + self.drop(out)
        return y if self.norm_first else norm(y)

    def feed_forward(self, x: Tensor) -> Tensor:
        return self.add_residual(x, self.ffn(self.sublayer_input(x, self.ffn_norm)), self.ffn_norm)


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
        h = self.sublayer_input(x, self.self_norm)
        out, weights = self.self_attn(h, mask=mask, need_weights=need_weights)
        x = self.add_residual(x, out, self.self_norm)
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

    def cross_attend(
        self,
        x: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """The cross-attention sub-layer: x [B,T,D] -> (x [B,T,D], weights [B,H,T,S] | None)."""
        h = self.sublayer_input(x, self.cross_norm)
        out, weights = self.cross_attn.attend(
            h, *cross_kv, mask=src_mask, need_weights=need_weights
        )
        return self.add_residual(x, out, self.cross_norm), weights

    def forward(
        self,
        x: Tensor,
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool = False,
        cross_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """Teacher forcing. x [B,T,D], cross_kv: memory K/V [B,H,S,d_k], src_mask [B,1,1,S]
        -> (x [B,T,D], self [B,H,T,T] | None, cross [B,H,T,S] | None). ``need_weights``:
        both maps; ``cross_weights``: the cross-attention map alone."""
        h = self.sublayer_input(x, self.self_norm)
        out, self_w = self.self_attn(h, causal=True, need_weights=need_weights)
        x = self.add_residual(x, out, self.self_norm)
        x, cross_w = self.cross_attend(x, cross_kv, src_mask, need_weights or cross_weights)
        return self.feed_forward(x), self_w, cross_w

    def step(
        self,
        x: Tensor,
        cache: tuple[Tensor, Tensor],
        cross_kv: tuple[Tensor, Tensor],
        src_mask: Tensor,
        need_weights: bool = False,
        append: Callable[[Tensor, Tensor], Tensor] = concat_cache,
    ) -> tuple[Tensor, tuple[Tensor, Tensor], Tensor | None]:
        """One decoding step. x [B,1,D]; cache: this layer's self-attention K/V so far
        [B,H,t,d_k] -> (x [B,1,D], cache with the new step appended [B,H,t+1,d_k],
        cross-attention [B,H,1,S] | None). ``append(cache, new)`` does the appending
        (default: ``torch.cat`` on dim 2; the Transformer writes into the cache's buffer)."""
        h = self.sublayer_input(x, self.self_norm)
        k_new, v_new = self.self_attn.project_kv(h)  # [B,H,1,d_k]
        k = append(cache[0], k_new)  # [B,H,t+1,d_k]
        v = append(cache[1], v_new)
        out, _ = self.self_attn.attend(h, k, v)  # no mask: the newest query sees every key
        x = self.add_residual(x, out, self.self_norm)
        x, cross_w = self.cross_attend(x, cross_kv, src_mask, need_weights)
        return self.feed_forward(x), (k, v), cross_w
