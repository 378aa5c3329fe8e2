"""Attention: scorers, alignment modes, masked softmax.

The contract every scorer and alignment mode here keeps:
``scores = scorer(query [B,Tq,Dq], keys [B,Tk,Dk]) -> [B,Tq,Tk]`` and
``context, weights = attend(scores, values [B,Tk,Dv], mask)``. Keys default to values, so
self-attention is query = key = value.

Masks here are "allowed" masks: bool, broadcastable to [B,Tq,Tk], True where the query
may attend to the key (the ``attn_mask`` convention of ``F.scaled_dot_product_attention``).
Batches carry padding masks (True = pad); pass ``~src_pad_mask[:, None, :]``.

:class:`Attention` composes one scorer (:data:`SCORERS`) with one alignment mode
(:data:`ALIGNMENTS`); any pair works.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnmt.models.alignment import ALIGNMENTS, AlignmentSpec, build_alignment
from attnmt.models.masking import masked_softmax
from attnmt.models.scorers import SCORERS, ScorerSpec, build_scorer

__all__ = ["ALIGNMENTS", "SCORERS", "Attention", "attend", "masked_softmax"]


def attend(scores: Tensor, values: Tensor, mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """context_i = Σ_j softmax_j(scores_ij) v_j.

    scores [B,Tq,Tk] (or [B,H,Tq,Tk]), values [B,Tk,Dv] (or [B,H,Tk,Dv]),
    mask broadcastable to scores (True = allowed) ->
    (context [B,Tq,Dv], weights [B,Tq,Tk]).
    """
    weights = masked_softmax(scores, mask)
    return torch.matmul(weights.to(values.dtype), values), weights


class Attention(nn.Module):
    """context_t = Σ_j a_t(j) v_j with a_t = mode(score(s_t, k_j)).

    score: a key of :data:`SCORERS`; mode: a key of :data:`ALIGNMENTS`.
    query_dim/key_dim: Dq/Dk; hidden_dim: additive/concat/local_p hidden size (None ->
    query_dim); window: local half-width D; max_src_len: positions the ``location``
    scorer covers; cosine_beta/learn_beta: ``cosine`` β; hard_estimator/gumbel_tau:
    ``hard`` training estimator.

    Scorers that compare query and key directly (dot, scaled_dot, cosine) are defined for
    Dq == Dk and then add no parameters (cosine: its β); the RNN models give annotations the
    decoder state's size for this. When key_dim differs, keys are first mapped to Dq by a
    learned ``key_adapter`` (Linear, no bias, part of :meth:`precompute`), which makes the
    scorer a learned one (dot becomes sᵀ A h, the form of general); the RNN models log it.
    """

    def __init__(
        self,
        score: str,
        mode: str,
        query_dim: int,
        key_dim: int | None = None,
        hidden_dim: int | None = None,
        window: int = 5,
        max_src_len: int = 256,
        cosine_beta: float = 10.0,
        learn_beta: bool = True,
        hard_estimator: str = "gumbel",
        gumbel_tau: float = 1.0,
    ) -> None:
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        self.score_name, self.mode_name = score, mode
        adapt = SCORERS.get(score) is not None and SCORERS[score].same_dims
        self.key_adapter = (
            nn.Linear(key_dim, query_dim, bias=False) if adapt and key_dim != query_dim else None
        )
        spec = ScorerSpec(
            query_dim=query_dim,
            key_dim=query_dim if self.key_adapter is not None else key_dim,
            hidden_dim=hidden_dim,
            cosine_beta=cosine_beta,
            learn_beta=learn_beta,
            max_src_len=max_src_len,
        )
        self.scorer = build_scorer(score, spec)
        self.align = build_alignment(
            mode,
            AlignmentSpec(query_dim, hidden_dim, window, hard_estimator, gumbel_tau),
        )

    def precompute(self, keys: Tensor, mask: Tensor | None = None) -> Tensor:
        """keys [B,Tk,Dk] (+ padding-allowed mask [B,Tk]) -> key cache [B,Tk,*].

        Compute once per source and pass as ``cache=`` at every decoder step. Rows
        where ``mask`` is False are zeroed, so the cache never carries pad content.
        """
        if self.key_adapter is not None:
            keys = self.key_adapter(keys)
        pre = self.scorer.precompute(keys)
        if mask is not None:
            pre = pre.masked_fill(~mask.unsqueeze(-1), 0.0)
        return pre

    def forward(
        self,
        query: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        keys: Tensor | None = None,
        cache: Tensor | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """query [B,Tq,Dq], values [B,Tk,Dv] -> (context [B,Tq,Dv], weights [B,Tq,Tk]).

        mask: [B,Tk] or [B,Tq,Tk] bool, True = allowed (None: all allowed).
        keys: [B,Tk,Dk], default ``values``; ignored when ``cache`` (from
        :meth:`precompute`) is given. positions: [B,Tq] long target step t of each
        query, used by ``local_m``; None means t = 0..Tq-1.
        """
        batch, num_queries, num_keys = query.size(0), query.size(1), values.size(1)
        if cache is None:
            cache = self.precompute(values if keys is None else keys)
        if mask is None:
            allowed = torch.ones(
                batch, num_queries, num_keys, dtype=torch.bool, device=query.device
            )
        else:  # a view: each decoder step reuses the padding mask without a copy
            allowed = (mask.unsqueeze(1) if mask.dim() == 2 else mask).expand(
                batch, num_queries, num_keys
            )
        valid = self.scorer.valid_keys(num_keys, query.device)
        if valid is not None:
            allowed = allowed & valid
        if positions is None:
            positions = torch.arange(num_queries, device=query.device).expand(batch, -1)
        scores = self.scorer.score(query, cache)  # [B,Tq,Tk]
        weights = self.align(scores, allowed, query, positions)  # [B,Tq,Tk]
        return torch.matmul(weights.to(values.dtype), values), weights
