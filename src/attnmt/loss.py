"""Label-smoothed cross-entropy over non-pad target tokens.

With smoothing ε and V classes the target distribution is
``q = (1 - ε) · onehot(y) + ε / V`` (the convention of ``F.cross_entropy(label_smoothing=ε)``,
Szegedy et al. 2016), so per token

    loss = (1 - ε) · (-log p_y) + ε · mean_j (-log p_j)

Both the smoothed loss and the plain negative log-likelihood (for perplexity) are returned
as sums over the non-pad tokens; the caller divides by the token count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt import PAD_ID


@dataclass
class LossOutput:
    """loss: smoothed CE summed over tokens (differentiable); nll: plain NLL sum (detached);
    n_tokens: non-pad tokens; n_correct: tokens whose argmax equals the target."""

    loss: Tensor
    nll: Tensor
    n_tokens: int
    n_correct: int


def label_smoothed_nll(
    logits: Tensor, target: Tensor, smoothing: float = 0.0, pad_id: int = PAD_ID
) -> LossOutput:
    """logits [B,T,V] (any float dtype; computed in fp32), target [B,T] -> summed losses.

    Positions where ``target == pad_id`` contribute nothing.
    """
    lprobs = torch.log_softmax(logits.float(), dim=-1)  # [B,T,V]
    keep = target.ne(pad_id)  # [B,T]
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [B,T]
    smooth = -lprobs.mean(dim=-1)  # [B,T]
    per_token = (1.0 - smoothing) * nll + smoothing * smooth
    zero = per_token.new_zeros(())
    loss = torch.where(keep, per_token, zero).sum()
    nll_sum = torch.where(keep, nll, zero).sum().detach()
    correct = (lprobs.argmax(-1).eq(target) & keep).sum()
    return LossOutput(loss, nll_sum, int(keep.sum()), int(correct))
