"""Label-smoothed cross-entropy: hand-computed values, pad positions ignored."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attnmt import PAD_ID
from attnmt.train.loss import label_smoothed_nll


def _torch_ce(logits: torch.Tensor, target: torch.Tensor, eps: float = 0.0) -> torch.Tensor:
    """The reference: PyTorch's summed, pad-ignoring, label-smoothed cross-entropy."""
    flat = logits.reshape(-1, logits.size(-1))
    return F.cross_entropy(
        flat, target.reshape(-1), ignore_index=PAD_ID, label_smoothing=eps, reduction="sum"
    )


def test_hand_computed_value() -> None:
    # V = 3, one real token with target 1; logits give p = softmax([0, ln 2, 0]) = [1/4, 1/2, 1/4]
    logits = torch.tensor([[[0.0, math.log(2.0), 0.0]]])
    target = torch.tensor([[1]])
    eps = 0.3
    out = label_smoothed_nll(logits, target, smoothing=eps, pad_id=-100, count_correct=True)
    nll = math.log(2.0)  # -log 1/2
    smooth = (math.log(4.0) + math.log(2.0) + math.log(4.0)) / 3  # mean_j -log p_j
    assert out.nll.item() == pytest.approx(nll, abs=1e-6)
    assert out.loss.item() == pytest.approx((1 - eps) * nll + eps * smooth, abs=1e-6)
    assert out.n_tokens == 1 and out.n_correct == 1


def test_pad_positions_contribute_nothing() -> None:
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 7)
    target = torch.tensor([[4, 5, 6, PAD_ID], [4, PAD_ID, PAD_ID, PAD_ID]])
    out = label_smoothed_nll(logits, target, smoothing=0.1)
    changed = logits.clone()
    changed[0, 3] += 100.0  # garbage at padded positions changes nothing
    changed[1, 1:] -= 50.0
    out2 = label_smoothed_nll(changed, target, smoothing=0.1)
    assert out.n_tokens == 4
    assert out.loss.item() == pytest.approx(out2.loss.item(), abs=1e-5)


def test_matches_torch_cross_entropy() -> None:
    torch.manual_seed(1)
    logits = torch.randn(3, 5, 11)
    target = torch.randint(4, 11, (3, 5))
    target[0, 3:] = PAD_ID
    eps = 0.1
    out = label_smoothed_nll(logits, target, smoothing=eps)
    ref, ref_nll = _torch_ce(logits, target, eps), _torch_ce(logits, target)
    assert out.loss.item() == pytest.approx(ref.item(), rel=1e-5)
    assert out.nll.item() == pytest.approx(ref_nll.item(), rel=1e-5)
    assert out.n_tokens == 13


def test_gradient_flows_and_bf16_logits_are_upcast() -> None:
    logits = torch.randn(1, 2, 5, requires_grad=True)
    out = label_smoothed_nll(logits.bfloat16(), torch.tensor([[2, PAD_ID]]), 0.1)
    assert out.loss.dtype == torch.float32
    out.loss.backward()
    assert logits.grad is not None and logits.grad[0, 1].abs().sum() == 0  # pad: no gradient
    assert logits.grad[0, 0].abs().sum() > 0


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_closed_form_gradient_equals_autograd_of_torch_cross_entropy(eps: float) -> None:
    torch.manual_seed(2)
    logits = torch.randn(3, 6, 13, dtype=torch.float64)
    target = torch.randint(4, 13, (3, 6))
    target[1, 2:] = PAD_ID
    target[2, 5] = PAD_ID
    mine = logits.clone().requires_grad_()
    out = label_smoothed_nll(mine, target, smoothing=eps)
    (0.5 * out.loss).backward()
    ref = logits.clone().requires_grad_()
    ref_loss = _torch_ce(ref, target, eps)
    (0.5 * ref_loss).backward()
    assert out.loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    assert mine.grad is not None and ref.grad is not None
    torch.testing.assert_close(mine.grad, ref.grad, atol=1e-6, rtol=1e-5)
    assert out.n_correct is None  # only counted when asked for


def test_gradcheck() -> None:
    torch.manual_seed(3)
    logits = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[4, 2, PAD_ID], [3, 4, 1]])
    assert torch.autograd.gradcheck(
        lambda z: label_smoothed_nll(z, target, smoothing=0.2).loss, (logits,)
    )
