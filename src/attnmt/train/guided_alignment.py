"""Guided alignment: one cross-attention map trained towards reference word links.

Garg et al. (2019), OpenNMT-py's ``lambda_align``, Marian's ``--guided-alignment``: with
reference links G (target piece t × source piece i, 0/1; attnmt.data.guided_batches turns
word links into piece links) row-normalised to

    p_{t,i} = G_{t,i} / Σ_j G_{t,j}                    (rows without a link left out)

and α the attention of one decoder layer (its heads' mean, or the mean of chosen heads; an
RNN's one map), row t being the step that predicts ``tgt_out[t]``:

    L_align = −Σ_t Σ_i p_{t,i} log α_{t,i} / R,        R = rows with at least one link
    L       = L_translation + λ · L_align

summed over an update's batches (and ranks) before dividing by R, as the translation loss
is divided by the update's tokens. Padding has no links, so it takes no part. α is read in
fp32 and clamped to :data:`EPS` before the log (a link into a local window's zeros costs
−log EPS and gets no gradient).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attnmt.batch import Batch
from attnmt.errors import ConfigError
from attnmt.models.base import CrossAttentionRequest, Seq2Seq
from attnmt.train.config import GuidedAlignmentConfig

EPS = 1e-9
"""Floor of α before the log."""


@dataclass
class AlignmentLoss:
    """total: Σ over rows of −Σ_i p_{t,i} log α_{t,i} (differentiable, fp32);
    rows: R, the rows with a link (0-dim long tensor)."""

    total: Tensor
    rows: Tensor

    @property
    def mean(self) -> Tensor:
        """L_align = total / R (0 when no row has a link)."""
        return self.total / self.rows.clamp(min=1)


def alignment_loss(attn: Tensor, links: Tensor, unique: bool = False) -> AlignmentLoss:
    """attn [B,T,S] (each row a distribution over the source), links [N,3] long (b, t, s)
    piece links (duplicates count once; ``unique``: the caller's links hold none, as
    GuidedCollate's do, and are not sorted again) -> the summed cross-entropy and its row count.

    Only the linked entries are read: −Σ_i p_{t,i} log α_{t,i} = −Σ_{i∈G_t} log α_{t,i} / |G_t|.
    """
    if not unique and links.numel():
        links = torch.unique(links, dim=0)
    b, t, s = links.long().unbind(dim=1)
    width = attn.size(1)
    row = b * width + t  # [N] flat row of each link
    per_row = torch.bincount(row, minlength=attn.size(0) * width)  # [B·T] links per row
    alpha = attn.float()[b, t, s].clamp(min=EPS)
    total = -(alpha.log() / per_row[row]).sum()
    return AlignmentLoss(total, torch.count_nonzero(per_row))


def check_guide(cfg: GuidedAlignmentConfig, model: Seq2Seq, prefix: str) -> None:
    """ConfigError naming ``<prefix>.weight/layer/heads`` when guided alignment is on and
    the model cannot return that map (checked before any data work)."""
    if cfg.weight <= 0:
        return
    layout = model.guidable_attention()
    if layout is None:
        raise ConfigError(
            f"{prefix}.weight={cfg.weight}: model {model.name or type(model).__name__} cannot "
            "return its attention in training; set it to 0 or use transformer / rnn_* models"
        )
    layers, heads = layout
    if not -layers <= cfg.layer < layers:
        raise ConfigError(
            f"{prefix}.layer={cfg.layer}: the model has {layers} cross-attention layer(s); "
            f"choose 0..{layers - 1}, or -1 for the last"
        )
    if cfg.heads is not None and max(cfg.heads) >= heads:
        raise ConfigError(
            f"{prefix}.heads={cfg.heads}: the model's cross-attention has {heads} head(s); "
            f"choose among 0..{heads - 1}, or null for their mean"
        )


@dataclass(frozen=True)
class GuidedAlignment:
    """λ and the map it trains, for the training loop (None there when λ = 0)."""

    weight: float
    request: CrossAttentionRequest

    @classmethod
    def of(cls, cfg: GuidedAlignmentConfig) -> GuidedAlignment | None:
        """The guide ``cfg`` asks for; None when its weight is 0 (off)."""
        if cfg.weight <= 0:
            return None
        heads = None if cfg.heads is None else tuple(cfg.heads)
        return cls(cfg.weight, CrossAttentionRequest(cfg.layer, heads))


def teacher_forced(
    net: nn.Module, batch: Batch, guide: GuidedAlignment | None
) -> tuple[Tensor, Tensor | None]:
    """(logits [B,T,V], the guided map [B,T,S] or None without a guide) of one forward
    through ``net`` (the model, or its DDP wrapper: the request passes through)."""
    if guide is None:
        return net(batch), None
    logits, attn = net(batch, guide.request)
    return logits, attn


def batch_alignment_loss(attn: Tensor, batch: Batch) -> AlignmentLoss:
    """:func:`alignment_loss` of ``batch``'s links (ValueError for a batch without them)."""
    if batch.align_links is None:
        raise ValueError("guided alignment: this batch carries no links (GuidedCollate)")
    return alignment_loss(attn, batch.align_links.to(attn.device), unique=True)
