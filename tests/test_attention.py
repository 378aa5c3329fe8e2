"""Attention = scorer × alignment mode: shapes, normalisation, masks, windows, hard mode."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.models.alignment import HardAlignment, LocalPredictive, source_lengths
from attnmt.models.attention import ALIGNMENTS, SCORERS, Attention, attend, masked_softmax

PAIRS = [(s, m) for s in SCORERS for m in ALIGNMENTS]
LENGTHS = [7, 4, 1]  # real source lengths of the three rows; Tk = 7
D = 2  # local window half-width


def _make(score: str, mode: str, query_dim: int = 4, key_dim: int = 6) -> Attention:
    att = Attention(score, mode, query_dim, key_dim, hidden_dim=5, window=D, max_src_len=10)
    return att.eval()


def _inputs(tq: int = 5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    query = torch.randn(len(LENGTHS), tq, 4)
    values = torch.randn(len(LENGTHS), max(LENGTHS), 6)
    mask = torch.arange(max(LENGTHS)) < torch.tensor(LENGTHS)[:, None]  # [B,Tk] allowed
    return query, values, mask


@pytest.mark.parametrize(("score", "mode"), PAIRS)
def test_shapes_normalisation_and_padding(score: str, mode: str) -> None:
    att = _make(score, mode)
    query, values, mask = _inputs()
    context, weights = att(query, values, mask)
    assert context.shape == (3, 5, 6) and weights.shape == (3, 5, 7)
    assert torch.isfinite(context).all()
    pad = ~mask[:, None, :].expand_as(weights)
    assert weights[pad].eq(0).all(), "padding must get exactly 0"
    assert (weights >= 0).all()
    sums = weights.sum(-1)
    if mode == "local_p":  # Gaussian-weighted, not renormalised (Luong 2015)
        assert (sums > 0).all() and (sums <= 1 + 1e-6).all()
    else:
        torch.testing.assert_close(sums, torch.ones_like(sums))
    torch.testing.assert_close(context, weights @ values)


@pytest.mark.parametrize(("score", "mode"), PAIRS)
def test_fully_masked_row_is_zero_not_nan(score: str, mode: str) -> None:
    att = _make(score, mode).train()
    query, values, mask = _inputs()
    mask[1] = False
    query.requires_grad_(True)
    context, weights = att(query, values, mask)
    assert torch.isfinite(weights).all() and torch.isfinite(context).all()
    assert weights[1].eq(0).all() and context[1].eq(0).all()
    context.sum().backward()
    assert torch.isfinite(query.grad).all()


@pytest.mark.parametrize(("score", "mode"), PAIRS)
def test_cache_equals_recompute_and_keys_default_to_values(score: str, mode: str) -> None:
    att = _make(score, mode)
    query, values, mask = _inputs()
    cache = att.precompute(values, mask)
    a = att(query, values, mask, cache=cache)
    b = att(query, values, mask)
    c = att(query, values, mask, keys=values)
    for x, y in [(a, b), (b, c)]:
        torch.testing.assert_close(x[0], y[0])
        torch.testing.assert_close(x[1], y[1])


@pytest.mark.parametrize("score", list(SCORERS))
def test_three_dim_mask_is_respected(score: str) -> None:
    att = _make(score, "global")
    query, values, _ = _inputs(tq=3)
    mask3 = torch.zeros(3, 3, 7, dtype=torch.bool)
    mask3[:, 0, :2] = True  # query 0 sees keys 0-1, query 1 sees key 5, query 2 nothing
    mask3[:, 1, 5] = True
    _, weights = att(query, values, mask3)
    torch.testing.assert_close(weights[:, 0, :2].sum(-1), torch.ones(3))
    assert weights[:, 0, 2:].eq(0).all()
    assert weights[:, 1, 5].eq(1).all() and weights[:, 2].eq(0).all()


@pytest.mark.parametrize("score", list(SCORERS))
def test_local_m_window_around_t(score: str) -> None:
    att = _make(score, "local_m")
    query, values, mask = _inputs(tq=1)
    for t in range(9):
        positions = torch.full((3, 1), t)
        _, weights = att(query, values, mask, positions=positions)
        for row, length in enumerate(LENGTHS):
            centre = min(t, length - 1)  # clipped to the last real position
            inside = [j for j in range(7) if abs(j - centre) <= D and j < length]
            outside = [j for j in range(7) if j not in inside]
            assert weights[row, 0, outside].eq(0).all()
            assert weights[row, 0, inside].gt(0).all()
            torch.testing.assert_close(weights[row, 0].sum(), torch.tensor(1.0))


def test_local_m_positions_default_to_query_index() -> None:
    att = _make("dot", "local_m")
    query, values, mask = _inputs(tq=4)
    explicit = att(query, values, mask, positions=torch.arange(4).expand(3, -1))[1]
    torch.testing.assert_close(att(query, values, mask)[1], explicit)


def test_local_p_hand_computed() -> None:
    """v_p = 0 -> p_t = S_real/2; zero query -> uniform dot scores over the window."""
    att = Attention("dot", "local_p", query_dim=2, window=2)
    torch.nn.init.zeros_(att.align.v_p.weight)
    values = torch.randn(1, 8, 2)
    mask = torch.tensor([[True] * 6 + [False] * 2])  # S_real = 6 -> p_t = 3, σ = 1
    _, weights = att(torch.zeros(1, 1, 2), values, mask)
    expected = torch.zeros(8)
    for j in range(1, 6):  # |j - 3| <= 2
        expected[j] = 0.2 * math.exp(-((j - 3) ** 2) / 2.0)
    torch.testing.assert_close(weights[0, 0], expected)


@pytest.mark.parametrize("score", list(SCORERS))
def test_local_p_window_around_predicted_centre(score: str) -> None:
    att = _make(score, "local_p")
    query, values, mask = _inputs()
    _, weights = att(query, values, mask)
    allowed = mask[:, None, :].expand_as(weights)
    centre = att.align.centre(query, allowed)  # [B,Tq]
    assert (centre >= 0).all() and (centre <= source_lengths(allowed)).all()
    far = (torch.arange(7) - centre.unsqueeze(-1)).abs() > D
    assert weights[far].eq(0).all()


def test_local_p_gradient_reaches_position_predictor() -> None:
    att = Attention("general", "local_p", 4, 6, window=2)
    query, values, mask = _inputs()
    att(query, values, mask)[0].pow(2).sum().backward()
    assert att.align.W_p.weight.grad.abs().sum() > 0
    assert att.align.v_p.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("score", list(SCORERS))
def test_hard_eval_is_argmax_one_hot(score: str) -> None:
    att = _make(score, "hard")
    query, values, mask = _inputs()
    context, weights = att(query, values, mask)
    assert set(weights.unique().tolist()) <= {0.0, 1.0}
    scores = att.scorer.score(query, att.precompute(values, mask))
    best = scores.masked_fill(~mask[:, None, :], -math.inf).argmax(-1)
    torch.testing.assert_close(weights.argmax(-1), best)
    torch.testing.assert_close(context, torch.gather(values, 1, best[..., None].expand(-1, -1, 6)))


@pytest.mark.parametrize("estimator", ["gumbel", "straight_through"])
def test_hard_training_is_one_hot_forward_with_gradient(estimator: str) -> None:
    align = HardAlignment(estimator).train()
    scores = torch.randn(3, 5, 7, requires_grad=True)
    mask = torch.arange(7) < torch.tensor(LENGTHS)[:, None, None]
    weights = align(scores, mask.expand(3, 5, 7), torch.empty(0), torch.empty(0))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    assert weights.max(-1).values.sub(1).abs().max() < 1e-6
    assert weights[~mask.expand(3, 5, 7)].eq(0).all()
    (weights * torch.randn(3, 5, 7)).sum().backward()
    assert scores.grad.abs().sum() > 0 and torch.isfinite(scores.grad).all()
    if estimator == "straight_through":  # no noise: the sample is the argmax
        best = scores.detach().masked_fill(~mask, -math.inf).argmax(-1)
        torch.testing.assert_close(weights.argmax(-1), best)


def test_hard_gumbel_samples_vary() -> None:
    align = HardAlignment("gumbel").train()
    scores, mask = torch.zeros(1, 200, 4), torch.ones(1, 200, 4, dtype=torch.bool)
    picks = align(scores, mask, torch.empty(0), torch.empty(0)).argmax(-1)
    assert len(picks.unique()) == 4  # uniform scores: every position gets sampled


def test_location_renormalises_over_real_length() -> None:
    att = Attention("location", "global", query_dim=2, max_src_len=4)
    with torch.no_grad():
        att.scorer.W_a.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]]))
        att.scorer.W_a.bias.zero_()
    query = torch.tensor([[[1.0, 2.0]]])  # W_a s = [1, 2, 3, 2]
    _, weights = att(query, torch.randn(1, 3, 5), torch.tensor([[True, True, False]]))
    e = math.e
    torch.testing.assert_close(
        weights[0, 0], torch.tensor([e / (e + e**2), e**2 / (e + e**2), 0.0])
    )
    full = torch.softmax(torch.tensor([1.0, 2.0, 3.0, 2.0]), -1)
    torch.testing.assert_close(weights[0, 0, :2], full[:2] / full[:2].sum())


def test_location_masks_positions_beyond_max_len() -> None:
    att = Attention("location", "global", query_dim=4, max_src_len=3)
    _, weights = att(torch.randn(2, 2, 4), torch.randn(2, 5, 6))
    assert weights[..., 3:].eq(0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2))


# d = Dq = Dk = 4, Dh = hidden_dim = 5, max_src_len = 10
SAME_SIZE_PARAMETERS = {
    "dot": 0,
    "scaled_dot": 0,
    "cosine": 1,  # β
    "general": 4 * 4,  # W_a [d, d]
    "additive": 5 * 4 + 5 * 4 + 5,  # W_1 [Dh, d], W_2 [Dh, d], v_a [Dh]
    "concat": 5 * (4 + 4) + 5,  # W_a [Dh, 2d], v_a [Dh]
    "location": 10 * 4 + 10,  # W_a [max_src_len, d] and its bias
}


@pytest.mark.parametrize("score", list(SCORERS))
def test_parameters_when_query_and_keys_share_one_size(score: str) -> None:
    att = Attention(score, "global", 4, 4, hidden_dim=5, max_src_len=10)
    assert att.key_adapter is None
    assert sum(p.numel() for p in att.parameters()) == SAME_SIZE_PARAMETERS[score]


def test_cosine_with_a_fixed_beta_has_no_parameters() -> None:
    att = Attention("cosine", "global", 4, 4, cosine_beta=3.0, learn_beta=False)
    assert list(att.parameters()) == [] and float(att.scorer.beta) == 3.0


@pytest.mark.parametrize("score", ["dot", "scaled_dot", "cosine"])
def test_key_adapter_when_dims_differ(score: str) -> None:
    assert Attention(score, "global", 4, 4).key_adapter is None
    att = Attention(score, "global", 4, 6)
    assert att.key_adapter is not None and att.precompute(torch.randn(2, 3, 6)).shape == (2, 3, 4)
    assert sum(p.numel() for p in att.parameters()) == 4 * 6 + (score == "cosine")  # + β


def test_scaled_dot_divides_by_the_square_root_of_the_annotation_size() -> None:
    """n = 9 (the size of h_i, no map between): score = sᵀh / 3."""
    att = Attention("scaled_dot", "global", 9, 9)
    query, keys = torch.ones(1, 1, 9), torch.full((1, 2, 9), 2.0)
    torch.testing.assert_close(att.scorer(query, att.precompute(keys)), torch.full((1, 1, 2), 6.0))


def test_bad_names_and_windows_raise_config_error() -> None:
    with pytest.raises(ConfigError, match="mode='locl'"):
        Attention("dot", "locl", 4)
    with pytest.raises(ConfigError, match="window"):
        Attention("dot", "local_m", 4, window=0)
    with pytest.raises(ConfigError, match="hard_estimator"):
        Attention("dot", "hard", 4, hard_estimator="reinforce")
    assert LocalPredictive(4, 4, window=3).sigma == 1.5  # σ = D / 2


def test_masked_softmax_and_attend_contract() -> None:
    scores = torch.tensor([[[1.0, 2.0, 3.0]]])
    mask = torch.tensor([[[True, True, False]]])
    weights = masked_softmax(scores, mask)
    torch.testing.assert_close(
        weights, torch.tensor([[[1 / (1 + math.e), math.e / (1 + math.e), 0.0]]])
    )
    assert masked_softmax(scores, torch.zeros_like(mask)).eq(0).all()
    context, w = attend(scores, torch.eye(3)[None], mask)
    torch.testing.assert_close(context, weights)
    torch.testing.assert_close(w, weights)
