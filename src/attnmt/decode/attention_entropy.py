"""Entropy of cross-attention: how widely each target position spreads its attention.

For the row α_t of a cross-attention map (target position t over source positions i)

    H(α_t) = −Σ_i α_{t,i} log α_{t,i}        (nats; 0 log 0 = 0)

summed over the real source positions (padding left out, ``</s>`` counted): 0 when the
row's whole weight sits on one source position, log n when it is uniform over n positions.
The normalised entropy H(α_t) / log n (n: the sentence's real source positions) puts
sentences of different lengths on one scale, 0 = one column, 1 = uniform; rows of a
one-position source (n = 1: no choice to make) are left out of it.

:class:`EntropyMeans` averages both over every real target position (pad rows left out) of
the batches it is given, per map of ``Seq2Seq.attention``:

* ``cross``: the model's ``"cross"`` map (an RNN's alignment weights; a Transformer's last
  layer averaged over its heads, the map that decoding and word alignments read);
* ``cross_layer{i}``: a Transformer's cross-attention layer i, the mean over its heads of
  each head's entropy (the entropy of the head-averaged map would call a layer diffuse
  whose heads each attend sharply to different positions).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

_LAYER_PREFIX = "cross/layer"


def row_entropy(weights: Tensor, src_pad_mask: Tensor) -> Tensor:
    """H(α_t) in nats of every row of ``weights`` [B,...,T,S] over the real source columns
    (``src_pad_mask`` [B,S], True at padding) -> [B,...,T]."""
    batch, width = src_pad_mask.shape
    pad = src_pad_mask.reshape(batch, *([1] * (weights.dim() - 2)), width)  # [B,1..,1,S]
    alpha = weights.float().masked_fill(pad, 0.0)
    return -torch.special.xlogy(alpha, alpha).sum(dim=-1)


def cross_maps(maps: dict[str, Tensor]) -> dict[str, Tensor]:
    """The cross-attention maps of ``Seq2Seq.attention``'s output under their figure names:
    ``cross`` [B,T,S], then ``cross_layer{i}`` [B,H,T,S] in layer order."""
    layers = sorted(
        (k for k in maps if k.startswith(_LAYER_PREFIX)),
        key=lambda k: int(k.removeprefix(_LAYER_PREFIX)),
    )
    return {"cross": maps["cross"], **{k.replace("/", "_"): maps[k] for k in layers}}


class EntropyMeans:
    """Running means of H(α_t) and H(α_t) / log n over the real target positions of the
    batches added, per cross-attention map (see the module docstring)."""

    def __init__(self) -> None:
        # name -> [sum of H, sum of normalised H, rows, rows with n > 1]
        self._sums: dict[str, list[float]] = {}

    def add(self, maps: dict[str, Tensor], src_pad_mask: Tensor, tgt_pad_mask: Tensor) -> None:
        """Count one batch: ``maps`` from ``Seq2Seq.attention`` (``cross`` [B,T,S] and any
        ``cross/layer{i}`` [B,H,T,S]), ``src_pad_mask`` [B,S] and ``tgt_pad_mask`` [B,T]
        (True at padding)."""
        real = ~tgt_pad_mask  # [B,T]
        n_src = (~src_pad_mask).sum(dim=-1)  # [B]
        choice = real & (n_src > 1)[:, None]  # [B,T] rows with a normalised entropy
        log_n = torch.where(n_src > 1, n_src.double().log(), 1.0)[:, None]  # [B,1]
        for name, weights in cross_maps(maps).items():
            h = row_entropy(weights, src_pad_mask)  # [B,...,T]
            h = h.reshape(h.size(0), -1, h.size(-1)).mean(dim=1).double()  # heads averaged
            sums = torch.stack(
                [
                    h.masked_fill(~real, 0.0).sum(),
                    (h / log_n).masked_fill(~choice, 0.0).sum(),
                    real.sum().double(),
                    choice.sum().double(),
                ]
            ).tolist()
            total = self._sums.setdefault(name, [0.0, 0.0, 0.0, 0.0])
            self._sums[name] = [a + b for a, b in zip(total, sums)]

    def means(self) -> dict[str, float]:
        """Mean H(α_t) in nats per map (NaN for a map without real rows)."""
        return {k: _ratio(s[0], s[2]) for k, s in self._sums.items()}

    def normalised(self) -> dict[str, float]:
        """Mean H(α_t) / log n per map, in [0, 1] (NaN without rows over n > 1 positions)."""
        return {k: _ratio(s[1], s[3]) for k, s in self._sums.items()}


def _ratio(total: float, count: float) -> float:
    return total / count if count > 0 else math.nan
