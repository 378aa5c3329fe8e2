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
from typing import Any

import torch
from torch import Tensor

from attnmt import PAD_ID


@dataclass
class LossOutput:
    """loss: smoothed CE summed over tokens (differentiable); nll: plain NLL sum (detached);
    n_tokens: non-pad tokens; n_correct: tokens whose argmax equals the target (None unless
    asked for: the argmax over V is a pass over the logits that training does not need)."""

    loss: Tensor
    nll: Tensor
    n_tokens: int
    n_correct: int | None = None


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed smoothed CE over the kept rows, with its closed-form gradient

        ∂L/∂z_ij = keep_i · (p_ij − q_ij),   q_i = (1 − ε) · onehot(y_i) + ε / V

    so backward is three passes over [N,V] (exp, subtract, scale) instead of autograd's
    gather/mean/log_softmax chain; ``scripts/benchmark.py`` measures the difference.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: Any, logits: Tensor, target: Tensor, keep: Tensor, smoothing: float
    ) -> tuple[Tensor, Tensor]:
        """logits [N,V], target [N], keep [N] bool -> (loss sum, nll sum), fp32 or wider."""
        work = torch.promote_types(logits.dtype, torch.float32)  # bf16/fp16 -> fp32
        lprobs = torch.log_softmax(logits.to(work), dim=-1)  # [N,V]
        nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)  # [N]
        smooth = -lprobs.mean(dim=-1)  # [N]
        zero = nll.new_zeros(())
        loss = torch.where(keep, (1.0 - smoothing) * nll + smoothing * smooth, zero).sum()
        nll_sum = torch.where(keep, nll, zero).sum()
        ctx.save_for_backward(lprobs, target, keep)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:  # type: ignore[override]
        lprobs, target, keep = ctx.saved_tensors
        eps, vocab = ctx.smoothing, lprobs.size(-1)
        grad = lprobs.exp()  # p [N,V]
        if eps:
            grad.sub_(eps / vocab)
        grad.scatter_add_(-1, target.unsqueeze(-1), grad.new_full((grad.size(0), 1), eps - 1.0))
        grad.mul_((keep.to(grad.dtype) * grad_loss).unsqueeze(-1))
        return grad.to(ctx.dtype), None, None, None


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
    loss, nll = _SmoothedCrossEntropy.apply(
        logits.reshape(-1, vocab), safe_target, keep, float(smoothing)
    )
    correct = None
    if count_correct:
        correct = int((logits.detach().argmax(-1).reshape(-1).eq(flat_target) & keep).sum())
    return LossOutput(loss, nll, int(keep.sum()), correct)
