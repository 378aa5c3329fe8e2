"""Position encodings: positions [..., T] (long) -> vectors [..., T, D].

Registry :data:`POSITIONS` maps the config value ``model.positions`` to a class.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnmt.errors import ConfigError


class SinusoidalPositions(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/D)), PE(pos, 2i+1) = cos(pos / 10000^(2i/D)).

    Computed on the fly, so any position works (``max_positions`` is ignored).
    Vaswani et al. 2017, §3.5. Sines and cosines are interleaved as in the paper.
    """

    inv_freq: Tensor

    def __init__(self, d_model: int, max_positions: int = 0):
        super().__init__()
        if d_model % 2:
            raise ConfigError(f"model.d_model={d_model} must be even for sinusoidal positions")
        self.d_model = d_model
        inv_freq = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        """positions [..., T] -> [..., T, D] (float32)."""
        angles = positions.float()[..., None] * self.inv_freq  # [..., T, D/2]
        return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


class LearnedPositions(nn.Module):
    """A trained vector per position 0..max_positions-1 (Gehring et al. 2017)."""

    def __init__(self, d_model: int, max_positions: int):
        super().__init__()
        self.max_positions = max_positions
        self.table = nn.Embedding(max_positions, d_model)
        nn.init.normal_(self.table.weight, std=d_model**-0.5)

    def forward(self, positions: Tensor) -> Tensor:
        """positions [..., T] -> [..., T, D]; positions must be < max_positions."""
        if positions.numel() and int(positions.max()) >= self.max_positions:
            raise ConfigError(
                f"position {int(positions.max())} exceeds model.max_positions="
                f"{self.max_positions}; raise model.max_positions or shorten the inputs "
                "(data max length / search max_len)"
            )
        return self.table(positions)


POSITIONS: dict[str, type[nn.Module]] = {
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
}
