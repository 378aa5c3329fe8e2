"""Multi-head attention: hand-computed values, fast path == explicit path, masks, caches."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.models.multihead import (
    MultiHeadAttention,
    merge_heads,
    scaled_dot_attention,
    split_heads,
)


def _identity_mha(d_model: int, n_heads: int) -> MultiHeadAttention:
    mha = MultiHeadAttention(d_model, n_heads).eval()
    with torch.no_grad():
        for proj in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj):
            proj.weight.copy_(torch.eye(d_model))
            proj.bias.zero_()
    return mha


def test_split_merge_heads_roundtrip_and_layout() -> None:
    x = torch.arange(2 * 3 * 8, dtype=torch.float).view(2, 3, 8)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    # head 1 of token 0 holds features 2..3 of that token
    assert heads[0, 1, 0].tolist() == x[0, 0, 2:4].tolist()
    assert torch.equal(merge_heads(heads), x)


@pytest.mark.parametrize("need_weights", [False, True])
def test_hand_computed_single_head(need_weights: bool) -> None:
    mha = _identity_mha(2, 1)
    q = torch.tensor([[[1.0, 0.0]]])  # [1,1,2]
    kv = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # [1,2,2]
    out, w = mha(q, kv, kv, need_weights=need_weights)
    s = torch.tensor([1 / math.sqrt(2), 0.0])  # q·k_j / √d_k
    p = torch.softmax(s, 0)
    assert out.shape == (1, 1, 2)
    torch.testing.assert_close(out[0, 0], p, atol=1e-6, rtol=0)  # values are the unit vectors
    if need_weights:
        torch.testing.assert_close(w[0, 0, 0], p, atol=1e-6, rtol=0)
    else:
        assert w is None


def test_two_heads_see_separate_subspaces() -> None:
    # head 0 attends on features 0..1, head 1 on 2..3: a mask on one key changes both
    mha = _identity_mha(4, 2)
    q = torch.tensor([[[1.0, 0.0, 0.0, 1.0]]])
    kv = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]])
    _, w = mha(q, kv, kv, need_weights=True)
    # head 0: scores [1, 0]/√2; head 1: scores [0, 1]/√2
    p = torch.softmax(torch.tensor([1 / math.sqrt(2), 0.0]), 0)
    torch.testing.assert_close(w[0, 0, 0], p, atol=1e-6, rtol=0)
    torch.testing.assert_close(w[0, 1, 0], p.flip(0), atol=1e-6, rtol=0)


def _padded_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(3, 5, 16)
    lengths = torch.tensor([5, 3, 1])
    pad = torch.arange(5)[None, :] >= lengths[:, None]  # [B,S] True = pad
    return x, pad, ~pad[:, None, None, :]


@pytest.mark.parametrize("causal", [False, True])
def test_fast_path_equals_explicit_path(causal: bool) -> None:
    mha = MultiHeadAttention(16, 4, dropout=0.3).eval()  # eval: dropout off
    x, _, mask = _padded_inputs()
    fast, none = mha(x, mask=mask, causal=causal)
    slow, w = mha(x, mask=mask, causal=causal, need_weights=True)
    assert none is None and w.shape == (3, 4, 5, 5)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)


def test_cross_attention_fast_equals_explicit_and_weights_zero_on_padding() -> None:
    mha = MultiHeadAttention(16, 4).eval()
    x, pad, mask = _padded_inputs()
    q = torch.randn(3, 2, 16)
    fast, _ = mha(q, x, x, mask=mask)
    slow, w = mha(q, x, x, mask=mask, need_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=0)
    assert torch.all(w.masked_select(pad[:, None, None, :].expand_as(w)) == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(3, 4, 2))


def test_causal_weights_are_lower_triangular() -> None:
    mha = MultiHeadAttention(16, 4).eval()
    _, w = mha(torch.randn(2, 4, 16), causal=True, need_weights=True)
    upper = torch.ones(4, 4, dtype=torch.bool).triu(1)
    assert torch.all(w[..., upper] == 0)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 4, 4))


@pytest.mark.parametrize("need_weights", [False, True])
def test_fully_masked_row_gives_zero_context_not_nan(need_weights: bool) -> None:
    q, k, v = (torch.randn(2, 2, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.ones(2, 1, 3, 3, dtype=torch.bool)
    mask[0, :, 1] = False  # query 1 of sentence 0 may attend nowhere
    ctx, w = scaled_dot_attention(q, k, v, mask, need_weights=need_weights)
    assert not torch.isnan(ctx).any()
    assert torch.all(ctx[0, :, 1] == 0)
    if need_weights:
        assert torch.all(w[0, :, 1] == 0)
    ctx.sum().backward()
    assert all(not torch.isnan(t.grad).any() for t in (q, k, v))


def test_fully_masked_rows_agree_between_paths() -> None:
    mha = MultiHeadAttention(8, 2).eval()
    x = torch.randn(2, 3, 8)
    mask = torch.zeros(2, 1, 1, 3, dtype=torch.bool)
    mask[1] = True  # sentence 0 fully masked
    fast, _ = mha(x, mask=mask)
    slow, _ = mha(x, mask=mask, need_weights=True)
    torch.testing.assert_close(fast, slow, atol=1e-6, rtol=0)
    # zero context -> the output is W_O's bias
    torch.testing.assert_close(fast[0], mha.out_proj.bias.expand(3, 8))


def test_incremental_kv_cache_equals_causal_full() -> None:
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(2, 5, 16)
    full, _ = mha(x, causal=True)
    k_cache = v_cache = torch.zeros(2, 4, 0, 4)
    steps = []
    for t in range(5):
        k, v = mha.project_kv(x[:, t : t + 1])
        k_cache, v_cache = torch.cat((k_cache, k), 2), torch.cat((v_cache, v), 2)
        assert k_cache.shape == (2, 4, t + 1, 4)  # batch-first cache [B,H,t,d_k]
        steps.append(mha.attend(x[:, t : t + 1], k_cache, v_cache)[0])
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


def test_training_dropout_keeps_reported_weights_normalised() -> None:
    mha = MultiHeadAttention(8, 2, dropout=0.5).train()
    _, w = mha(torch.randn(2, 3, 8), need_weights=True)
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 2, 3))


def test_indivisible_width_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="divisible"):
        MultiHeadAttention(10, 4)


def test_causal_needs_square() -> None:
    q = torch.randn(1, 1, 2, 4)
    k = torch.randn(1, 1, 3, 4)
    with pytest.raises(ValueError, match="Tq == Tk"):
        scaled_dot_attention(q, k, k, causal=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("masked", [False, True])
def test_on_a_gpu_the_fused_path_never_runs_cudnn_attention(masked: bool) -> None:
    # cuDNN's SDPA builds a plan per new shape (~0.3 s on an H100): it must not be chosen,
    # in bf16 (where torch would prefer it on Hopper), forward and backward
    from torch.profiler import ProfilerActivity, profile

    mha = MultiHeadAttention(64, 4).cuda()
    mask = _padded_inputs()[2].cuda()
    x = torch.randn(3, 5, 64, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out, _ = mha(x, mask=mask if masked else None)
        out.float().sum().backward()
        torch.cuda.synchronize()
    names = [e.key.lower() for e in prof.key_averages()]
    assert not [n for n in names if "cudnn" in n], names
    fast = mha(x, mask=mask if masked else None)[0]
    slow = mha(x, mask=mask if masked else None, need_weights=True)[0]
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-4)
