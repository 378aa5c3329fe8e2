"""Two measured CPU fast paths, each beside the plain torch expression it replaces.

Every reader of the models and the loss can read the plain version (``*_reference``) and
trust that the fast one computes the same thing: ``tests/test_kernels.py`` checks that the
two agree (values, gradients, keep rates), and ``make benchmark ARGS="--benches kernels"``
(benchmarks/bench/kernels.py) measures what the fast one saves; the figures of record are
its rows in docs/performance.md, not repeated here.

**Dropout** (Srivastava et al. 2014), inverted:

    y = x · m / (1 − p),   m_i ~ Bernoulli(1 − p)

``F.dropout`` on CPU draws one random number per element from a serial generator; on
2 cores dropout took ~16% of a default Transformer training step (profiled), and masking
a 2100×1024 FFN activation cost about as much as the 2100×256×1024 matmul producing it.
:func:`dropout` takes four 16-bit uniforms u ∈ {0..65535} from each 64-bit word of
``torch.randint`` and keeps where u ≥ round(p · 65536): 4× fewer draws, the keep rate exact
to 1/65536. CUDA keeps ``F.dropout`` (its fused Philox kernel is already fast). Both use
torch's default generator of the tensor's device, so ``torch.manual_seed`` and
checkpointed RNG states reproduce masks.

**Label-smoothed cross-entropy** (Szegedy et al. 2016) with q = (1 − ε) · onehot(y) + ε / V:

    loss = Σ_i keep_i · [(1 − ε) · (−log p_{i,y_i}) + ε · mean_j (−log p_ij)]
    ∂loss/∂z_ij = keep_i · (p_ij − q_ij)

:func:`smoothed_cross_entropy` computes the gradient in closed form, three passes over
[N,V] (exp, subtract, scale) instead of autograd's gather/mean/log_softmax chain, in less
time and memory than ``F.cross_entropy(label_smoothing=ε)``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# ---------------------------------------------------------------- dropout

_INT16_OFFSET = 32768  # int16 holds u − 32768


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> Tensor:
    """Bool mask of ``shape``, each entry True with probability 1 − p (to 1/65536)."""
    n = math.prod(shape)
    words = torch.randint(-(2**63), 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=device)
    uniform16 = words.view(torch.int16)[:n].view(shape)  # u − 32768, u uniform in 0..65535
    return uniform16 >= round(p * 65536) - _INT16_OFFSET


def dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Inverted dropout of ``x`` (any shape); the identity when not training or p = 0."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu":
        return F.dropout(x, p, training=True)
    if p >= 1.0:
        return x * 0.0
    return torch.where(keep_mask(x.shape, p, x.device), x * (1.0 / (1.0 - p)), 0.0)


class Dropout(nn.Module):
    """Drop-in for ``nn.Dropout`` using :func:`dropout`."""

    def __init__(self, p: float = 0.1) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


def dropout_reference(x: Tensor, p: float, training: bool) -> Tensor:
    """The plain version of :func:`dropout`: ``F.dropout``."""
    return F.dropout(x, p, training=training)


# ---------------------------------------------------------------- smoothed cross-entropy


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed smoothed CE over the kept rows, with its closed-form gradient

        ∂L/∂z_ij = keep_i · (p_ij − q_ij),   q_i = (1 − ε) · onehot(y_i) + ε / V

    so backward is three passes over [N,V] (exp, subtract, scale) instead of autograd's
    gather/mean/log_softmax chain; ``make benchmark`` measures the difference.
    """

    @staticmethod
    def forward(
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
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, ...]:
        lprobs, target, keep = ctx.saved_tensors
        eps, vocab = ctx.smoothing, lprobs.size(-1)
        grad = lprobs.exp()  # p [N,V]
        if eps:
            grad.sub_(eps / vocab)
        grad.scatter_add_(-1, target.unsqueeze(-1), grad.new_full((grad.size(0), 1), eps - 1.0))
        grad.mul_((keep.to(grad.dtype) * grad_loss).unsqueeze(-1))
        return grad.to(ctx.dtype), None, None, None


def smoothed_cross_entropy(
    logits: Tensor, target: Tensor, keep: Tensor, smoothing: float
) -> tuple[Tensor, Tensor]:
    """logits [N,V] (any float dtype), target [N] in [0, V), keep [N] bool
    -> (smoothed loss summed over kept rows, plain NLL summed over kept rows), in fp32 or wider.

    Only the first output is differentiable (closed-form gradient, see the module docstring).
    """
    return _SmoothedCrossEntropy.apply(logits, target, keep, float(smoothing))


def smoothed_cross_entropy_reference(
    logits: Tensor, target: Tensor, keep: Tensor, smoothing: float
) -> tuple[Tensor, Tensor]:
    """The plain version of :func:`smoothed_cross_entropy`: ``F.cross_entropy`` twice."""
    z, y = logits[keep].to(torch.promote_types(logits.dtype, torch.float32)), target[keep]
    loss = F.cross_entropy(z, y, label_smoothing=smoothing, reduction="sum")
    return loss, F.cross_entropy(z.detach(), y, reduction="sum")
