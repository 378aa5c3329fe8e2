"""attnmt.models.dropout: inverted dropout with 16-bit uniforms on CPU."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.models.dropout import Dropout, dropout, keep_mask


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_keep_rate_and_values(p: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(1001, 999)  # numel not a multiple of 4
    y = dropout(x, p, training=True)
    kept = y.ne(0)
    rate = kept.float().mean().item()
    sigma = math.sqrt(p * (1 - p) / x.numel())
    assert abs(rate - (1 - p)) < 6 * sigma
    torch.testing.assert_close(y[kept], x[kept] / (1 - p))  # survivors scaled by 1/(1-p)


def test_mask_bits_are_independent_across_positions() -> None:
    # the 4 uniforms of one 64-bit word must not be correlated: neighbours agree as often
    # as independent Bernoulli(0.5) draws would
    torch.manual_seed(1)
    m = keep_mask(torch.Size([400_000]), 0.5, torch.device("cpu")).float()
    for lag in (1, 2, 3, 4):
        agree = (m[:-lag] == m[lag:]).float().mean().item()
        assert abs(agree - 0.5) < 0.005, lag


def test_identity_in_eval_or_p0_and_zero_for_p1() -> None:
    x = torch.randn(5, 7)
    layer = Dropout(0.4).eval()
    assert layer(x) is x
    assert dropout(x, 0.0, training=True) is x
    assert dropout(x, 1.0, training=True).eq(0).all()
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.5)


def test_gradient_is_the_scaled_mask_and_seed_reproduces_it() -> None:
    x = torch.randn(64, 33, requires_grad=True)
    torch.manual_seed(7)
    y = dropout(x, 0.25, training=True)
    y.sum().backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, y.ne(0).float() / 0.75)
    torch.manual_seed(7)
    assert torch.equal(dropout(x.detach(), 0.25, training=True), y.detach())
