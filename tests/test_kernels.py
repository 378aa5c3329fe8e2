"""attnmt.kernels: each fast CPU path agrees with the plain torch version beside it."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.kernels import (
    Dropout,
    dropout,
    dropout_reference,
    keep_mask,
    smoothed_cross_entropy,
    smoothed_cross_entropy_reference,
)


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


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_fast_dropout_agrees_with_f_dropout_in_distribution(p: float) -> None:
    # same keep rate (within sampling noise of both), same scaling of the survivors, same mean
    torch.manual_seed(3)
    x = torch.rand(600, 500) + 1.0
    fast, ref = dropout(x, p, training=True), dropout_reference(x, p, training=True)
    sigma = math.sqrt(2 * p * (1 - p) / x.numel())
    assert abs(fast.ne(0).float().mean().item() - ref.ne(0).float().mean().item()) < 6 * sigma
    torch.testing.assert_close(fast[fast.ne(0)], x[fast.ne(0)] / (1 - p))
    torch.testing.assert_close(ref[ref.ne(0)], x[ref.ne(0)] / (1 - p))
    assert fast.mean().item() == pytest.approx(ref.mean().item(), rel=0.01)
    assert torch.equal(dropout(x, p, training=False), dropout_reference(x, p, training=False))


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_closed_form_cross_entropy_agrees_with_f_cross_entropy(
    eps: float, dtype: torch.dtype
) -> None:
    torch.manual_seed(4)
    logits = torch.randn(37, 19).to(dtype)
    target = torch.randint(0, 19, (37,))
    keep = torch.rand(37) > 0.3
    fast_z = logits.clone().requires_grad_()
    loss, nll = smoothed_cross_entropy(fast_z, target, keep, eps)
    (2.0 * loss).backward()
    ref_z = logits.clone().requires_grad_()
    ref_loss, ref_nll = smoothed_cross_entropy_reference(ref_z, target, keep, eps)
    (2.0 * ref_loss).backward()
    tol = {"atol": 1e-2, "rtol": 1e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(loss.double(), ref_loss.double(), **tol)
    torch.testing.assert_close(nll.double(), ref_nll.double(), **tol)
    assert fast_z.grad is not None and ref_z.grad is not None
    assert fast_z.grad.dtype == dtype  # the gradient comes back in the logits' dtype
    torch.testing.assert_close(fast_z.grad.double(), ref_z.grad.double(), **tol)
    assert fast_z.grad[~keep].abs().sum() == 0  # dropped rows get no gradient
