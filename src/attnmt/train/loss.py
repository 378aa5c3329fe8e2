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

from torch import Tensor

from attnmt import PAD_ID
from attnmt.kernels import smoothed_cross_entropy


@dataclass
class LossOutput:
    """loss: smoothed CE summed over tokens (differentiable); nll: plain NLL sum (detached);
    n_tokens: non-pad tokens; n_correct: tokens whose argmax equals the target (None unless
    asked for: the argmax over V is a pass over the logits that training does not need)."""

    loss: Tensor
    nll: Tensor
    n_tokens: int
    n_correct: int | None = None


def label_smoothed_nll(
    logits: Tensor,
    target: Tensor,
    smoothing: float = 0.0,
    pad_id: int = PAD_ID,
    count_correct: bool = False,
) -> LossOutput:
    """logits [B,T,V] (any float dtype; computed in fp32), target [B,T] -> summed losses.

    Positions where ``target == pad_id`` contribute nothing (and get no gradient).
    """
    vocab = logits.size(-1)
    flat_target = target.reshape(-1)
    keep = flat_target.ne(pad_id)  # [B·T]
    safe_target = flat_target.masked_fill(~keep, 0)  # pad_id may lie outside [0, V)
    loss, nll = smoothed_cross_entropy(logits.reshape(-1, vocab), safe_target, keep, smoothing)
    correct = None
    if count_correct:
        correct = int((logits.detach().argmax(-1).reshape(-1).eq(flat_target) & keep).sum())
    return LossOutput(loss, nll, int(keep.sum()), correct)
