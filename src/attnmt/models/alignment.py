"""Alignment modes: how scores [B,Tq,Tk] become attention weights [B,Tq,Tk].

Every mode is an nn.Module ``mode(scores, mask, query, positions) -> weights`` with

* ``scores``    [B,Tq,Tk]  from any scorer (:mod:`attnmt.models.scorers`)
* ``mask``      [B,Tq,Tk]  bool, True where the key may be attended (padding already False)
* ``query``     [B,Tq,Dq]  the attention query (``local_p`` predicts its centre from it)
* ``positions`` [B,Tq]     long, the target step t of each query (``local_m`` centre)

Weights are exactly 0 wherever ``mask`` is False, and a row with no allowed key is all
zeros (never NaN). The real source length S_real of a row is (last allowed index + 1);
local windows are intersected with the mask, so they never reach padding.

``ALIGNMENTS`` maps the config name (``model.attention.mode``) to the class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.errors import ConfigError
from attnmt.models.masking import masked_softmax


@dataclass(frozen=True)
class AlignmentSpec:
    """Everything a mode may need; each mode reads only its own fields."""

    query_dim: int
    hidden_dim: int | None = None  # local_p: size of W_p; None -> query_dim
    window: int = 5  # local_m/local_p: D, the window is [p_t - D, p_t + D]
    hard_estimator: str = "gumbel"  # hard: a key of HARD_ESTIMATORS
    gumbel_tau: float = 1.0  # hard: softmax temperature of the relaxed sample


class AlignmentMode(Protocol):
    """What :data:`ALIGNMENTS` holds: a module class built from an :class:`AlignmentSpec`."""

    def from_spec(self, spec: AlignmentSpec) -> nn.Module:
        """The mode's module, configured by ``spec``."""


def source_lengths(mask: Tensor) -> Tensor:
    """mask [B,Tq,Tk] -> S_real [B,Tq] long: index of the last allowed key + 1 (0 if none)."""
    ids = torch.arange(1, mask.size(-1) + 1, device=mask.device)
    return (mask * ids).amax(dim=-1)


def key_offsets(centre: Tensor, num_keys: int) -> Tensor:
    """centre [B,Tq] -> j - centre [B,Tq,Tk] for key positions j = 0..Tk-1 (float)."""
    j = torch.arange(num_keys, device=centre.device, dtype=torch.float32)
    return j - centre.unsqueeze(-1).float()


def _check_window(window: int, mode: str) -> int:
    if window < 1:
        raise ConfigError(
            f"model.attention.window={window}: mode {mode!r} needs a half-width D >= 1"
        )
    return window


class GlobalAlignment(nn.Module):
    """a_t = softmax(score(s_t, h_j)) over every allowed source position j."""

    @classmethod
    def from_spec(cls, spec: AlignmentSpec) -> GlobalAlignment:
        return cls()

    def forward(self, scores: Tensor, mask: Tensor, query: Tensor, positions: Tensor) -> Tensor:
        return masked_softmax(scores, mask)


class LocalMonotonic(nn.Module):
    """local-m (Luong 2015): p_t = t, a_t = softmax over the window |j - p_t| <= D.

    The centre is clipped to the real source, p_t = min(t, S_real - 1), so a target
    longer than its source still attends to the last D + 1 source positions instead of
    to nothing. Weights sum to 1 over the window ∩ real positions.
    """

    def __init__(self, window: int) -> None:
        super().__init__()
        self.window = _check_window(window, "local_m")

    @classmethod
    def from_spec(cls, spec: AlignmentSpec) -> LocalMonotonic:
        return cls(spec.window)

    def forward(self, scores: Tensor, mask: Tensor, query: Tensor, positions: Tensor) -> Tensor:
        last = (source_lengths(mask) - 1).clamp(min=0)
        centre = torch.minimum(positions.clamp(min=0), last)
        inside = key_offsets(centre, scores.size(-1)).abs() <= self.window
        return masked_softmax(scores, mask & inside)


class LocalPredictive(nn.Module):
    """local-p (Luong 2015, eqs. 9–10).

    p_t = S_real · sigmoid(v_pᵀ tanh(W_p s_t)),   window W_t = {j : |j - p_t| <= D}
    a_t(j) = softmax_{j ∈ W_t}(score_j) · exp(-(j - p_t)² / (2σ²)),   σ = D / 2.

    As in Luong et al. the weights are NOT renormalised after the Gaussian, so a row
    sums to a value in (0, 1], not to 1. p_t ∈ [0, S_real] and D >= 1, so the window
    always holds a real position. Gradients reach W_p and v_p through the Gaussian;
    the window's edges are not differentiable.
    """

    def __init__(self, query_dim: int, hidden_dim: int, window: int) -> None:
        super().__init__()
        self.window = _check_window(window, "local_p")
        self.sigma = window / 2.0
        self.W_p = nn.Linear(query_dim, hidden_dim, bias=False)
        self.v_p = nn.Linear(hidden_dim, 1, bias=False)

    @classmethod
    def from_spec(cls, spec: AlignmentSpec) -> LocalPredictive:
        return cls(spec.query_dim, spec.hidden_dim or spec.query_dim, spec.window)

    def centre(self, query: Tensor, mask: Tensor) -> Tensor:
        """p_t [B,Tq] = S_real · sigmoid(v_pᵀ tanh(W_p s_t))."""
        gate = torch.sigmoid(self.v_p(torch.tanh(self.W_p(query)))).squeeze(-1)
        return source_lengths(mask).to(gate.dtype) * gate

    def forward(self, scores: Tensor, mask: Tensor, query: Tensor, positions: Tensor) -> Tensor:
        offsets = key_offsets(self.centre(query, mask), scores.size(-1)).to(scores.dtype)
        align = masked_softmax(scores, mask & (offsets.abs() <= self.window))
        return align * torch.exp(-offsets.pow(2) / (2 * self.sigma**2))


def _argmax_one_hot(scores: Tensor, mask: Tensor) -> Tensor:
    """One-hot of the best allowed key per row [B,Tq,Tk]; all zeros for an empty row."""
    masked = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    one_hot = F.one_hot(masked.argmax(dim=-1), scores.size(-1)).to(scores.dtype)
    return one_hot * mask.any(dim=-1, keepdim=True)


def _gumbel_noise(scores: Tensor) -> Tensor:
    """g = -log(E), E ~ Exponential(1), i.e. Gumbel(0, 1) noise like ``scores``."""
    return -torch.empty_like(scores).exponential_().log()


#: hard-attention training estimators: scores -> the noise added before the relaxation
HARD_ESTIMATORS: dict[str, Callable[[Tensor], Tensor]] = {
    "gumbel": _gumbel_noise,  # straight-through Gumbel-softmax (Jang et al. 2017)
    "straight_through": torch.zeros_like,  # straight-through softmax, no sampling
}


class HardAlignment(nn.Module):
    """Hard (one-position) attention.

    Eval: a_t = one_hot(argmax_j score_j) over allowed j.
    Training, straight-through estimator: y = softmax((score + g) / τ) over allowed j,
    with g Gumbel(0,1) noise (``gumbel``) or g = 0 (``straight_through``);
    a_t = one_hot(argmax y) - stopgrad(y) + y — the forward pass uses the one-hot
    sample, the backward pass the gradient of the relaxed y.
    """

    def __init__(self, estimator: str = "gumbel", tau: float = 1.0) -> None:
        super().__init__()
        if estimator not in HARD_ESTIMATORS:
            raise ConfigError(
                f"model.attention.hard_estimator={estimator!r} is unknown; choose one of: "
                f"{', '.join(HARD_ESTIMATORS)}"
            )
        if tau <= 0:
            raise ConfigError(f"model.attention.gumbel_tau={tau}: must be > 0")
        self.estimator = estimator
        self.tau = tau

    @classmethod
    def from_spec(cls, spec: AlignmentSpec) -> HardAlignment:
        return cls(spec.hard_estimator, spec.gumbel_tau)

    def forward(self, scores: Tensor, mask: Tensor, query: Tensor, positions: Tensor) -> Tensor:
        if not self.training:
            return _argmax_one_hot(scores, mask)
        noise = HARD_ESTIMATORS[self.estimator](scores)
        soft = masked_softmax((scores + noise) / self.tau, mask)
        hard = _argmax_one_hot(soft, mask)
        return hard - soft.detach() + soft


ALIGNMENTS: dict[str, AlignmentMode] = {
    "global": GlobalAlignment,
    "local_m": LocalMonotonic,
    "local_p": LocalPredictive,
    "hard": HardAlignment,
}


def build_alignment(name: str, spec: AlignmentSpec) -> nn.Module:
    """The mode registered as ``name``; ConfigError listing the choices otherwise."""
    try:
        cls = ALIGNMENTS[name]
    except KeyError:
        raise ConfigError(
            f"model.attention.mode={name!r} is unknown; choose one of: {', '.join(ALIGNMENTS)}"
        ) from None
    return cls.from_spec(spec)
