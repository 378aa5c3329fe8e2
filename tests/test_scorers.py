"""Scorers: hand-computed values on a 2-d query and three keys, precompute reuse, registry."""

from __future__ import annotations

import math

import pytest
import torch

from attnmt.errors import ConfigError
from attnmt.models.scorers import (
    SCORERS,
    Additive,
    Concat,
    Cosine,
    Dot,
    General,
    Location,
    ScaledDot,
    ScorerSpec,
    build_scorer,
)

# s = [1, 2]; h_1 = [1, 0], h_2 = [0, 1], h_3 = [1, 1]
QUERY = torch.tensor([[[1.0, 2.0]]])  # [1,1,2]
KEYS = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])  # [1,3,2]


def _set(linear: torch.nn.Linear, rows: list[list[float]]) -> None:
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(rows))
        if linear.bias is not None:
            linear.bias.zero_()


def test_dot() -> None:
    assert Dot()(QUERY, KEYS).tolist() == [[[1.0, 2.0, 3.0]]]


def test_scaled_dot_divides_by_sqrt_key_dim() -> None:
    expected = torch.tensor([[[1.0, 2.0, 3.0]]]) / math.sqrt(2)
    torch.testing.assert_close(ScaledDot()(QUERY, KEYS), expected)


def test_general_is_bilinear() -> None:
    scorer = General(query_dim=2, key_dim=2)
    _set(scorer.W, [[1.0, 2.0], [0.0, 1.0]])  # sᵀW = [1, 4]
    torch.testing.assert_close(scorer(QUERY, KEYS), torch.tensor([[[1.0, 4.0, 5.0]]]))


def test_general_rectangular_weight() -> None:
    scorer = General(query_dim=2, key_dim=3)
    _set(scorer.W, [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    keys = torch.tensor([[[1.0, 1.0, 1.0], [0.0, 0.0, 2.0]]])  # W h = [2, 1], [2, 0]
    torch.testing.assert_close(scorer(QUERY, keys), torch.tensor([[[4.0, 2.0]]]))


# W₁ = I, W₂ = diag(1, -1), v = [1, 1]: W₁s + W₂h = [2,2], [1,1], [2,1]
ADDITIVE_EXPECTED = torch.tensor(
    [[[2 * math.tanh(2), 2 * math.tanh(1), math.tanh(2) + math.tanh(1)]]]
)


def test_additive() -> None:
    scorer = Additive(query_dim=2, key_dim=2, hidden_dim=2)
    _set(scorer.W1, [[1.0, 0.0], [0.0, 1.0]])
    _set(scorer.W2, [[1.0, 0.0], [0.0, -1.0]])
    _set(scorer.v, [[1.0, 1.0]])
    torch.testing.assert_close(scorer(QUERY, KEYS), ADDITIVE_EXPECTED)


def test_concat() -> None:
    scorer = Concat(query_dim=2, key_dim=2, hidden_dim=2)
    _set(scorer.W, [[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, -1.0]])  # W [s; h]
    _set(scorer.v, [[1.0, 1.0]])
    torch.testing.assert_close(scorer(QUERY, KEYS), ADDITIVE_EXPECTED)


def test_concat_equals_explicit_concatenation() -> None:
    scorer = Concat(query_dim=3, key_dim=5, hidden_dim=4)
    query, keys = torch.randn(2, 3, 3), torch.randn(2, 4, 5)
    pairs = torch.cat(
        [query.unsqueeze(2).expand(-1, -1, 4, -1), keys.unsqueeze(1).expand(-1, 3, -1, -1)], -1
    )  # [B,Tq,Tk,Dq+Dk]
    expected = scorer.v(torch.tanh(scorer.W(pairs))).squeeze(-1)
    torch.testing.assert_close(scorer(query, keys), expected)


@pytest.mark.parametrize("learn_beta", [True, False])
def test_cosine(learn_beta: bool) -> None:
    scorer = Cosine(beta=2.0, learn_beta=learn_beta)
    root5 = math.sqrt(5)
    expected = 2.0 * torch.tensor([[[1 / root5, 2 / root5, 3 / (root5 * math.sqrt(2))]]])
    torch.testing.assert_close(scorer(QUERY, KEYS), expected)
    names = [n for n, _ in scorer.named_parameters()]
    assert names == (["beta"] if learn_beta else [])
    assert "beta" in scorer.state_dict()


def test_cosine_zero_vector_scores_zero() -> None:
    scores = Cosine(beta=3.0)(torch.zeros(1, 1, 2), KEYS)
    assert torch.isfinite(scores).all() and scores.abs().max() == 0


def test_location_depends_on_query_only() -> None:
    scorer = Location(query_dim=2, max_src_len=4)
    _set(scorer.W_a, [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 0.0]])  # W_a s = [1,2,3,2]
    torch.testing.assert_close(scorer(QUERY, KEYS), torch.tensor([[[1.0, 2.0, 3.0]]]))
    torch.testing.assert_close(scorer(QUERY, torch.randn(1, 3, 7)), scorer(QUERY, KEYS))
    assert scorer.valid_keys(4, torch.device("cpu")) is None
    assert scorer.valid_keys(6, torch.device("cpu")).tolist() == [1, 1, 1, 1, 0, 0]
    assert scorer(QUERY, torch.randn(1, 6, 2)).shape == (1, 1, 6)


@pytest.mark.parametrize("name", list(SCORERS))
def test_precompute_equals_recompute(name: str) -> None:
    spec = ScorerSpec(query_dim=4, key_dim=4, hidden_dim=5, max_src_len=8)
    scorer = build_scorer(name, spec)
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 6, 4)
    pre = scorer.precompute(keys)
    full = scorer(query, keys)
    assert full.shape == (2, 3, 6)
    steps = torch.cat([scorer.score(query[:, t : t + 1], pre) for t in range(3)], dim=1)
    torch.testing.assert_close(steps, full)


def test_additive_precompute_is_the_key_projection() -> None:
    scorer = Additive(query_dim=3, key_dim=4, hidden_dim=5)
    keys = torch.randn(2, 6, 4)
    torch.testing.assert_close(scorer.precompute(keys), scorer.W2(keys))


def test_unknown_scorer_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"score='bilinear'.*additive"):
        build_scorer("bilinear", ScorerSpec(2, 2))


def test_location_rejects_nonpositive_length() -> None:
    with pytest.raises(ConfigError, match="max_src_len"):
        Location(query_dim=2, max_src_len=0)
