"""Attention scorers: ``scores = scorer(query [B,Tq,Dq], keys [B,Tk,Dk]) -> [B,Tq,Tk]``.

Every scorer splits into two steps so that the key side is computed once per source
sentence and reused at every decoder step:

* ``precompute(keys [B,Tk,Dk]) -> pre [B,Tk,*]``  (e.g. W₂h for ``additive``)
* ``score(query [B,Tq,Dq], pre) -> scores [B,Tq,Tk]``

and ``forward(query, keys) == score(query, precompute(keys))``.

``SCORERS`` maps the config name (``model.attention.score``) to the class; each class
builds itself from a :class:`ScorerSpec` with ``from_spec``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt.errors import ConfigError


@dataclass(frozen=True)
class ScorerSpec:
    """Everything a scorer may need; each scorer reads only its own fields."""

    query_dim: int
    key_dim: int
    hidden_dim: int | None = None  # additive/concat hidden size; None -> query_dim
    cosine_beta: float = 10.0  # cosine: initial (or fixed) sharpness β
    learn_beta: bool = True  # cosine: β is a parameter (True) or a constant (False)
    max_src_len: int = 256  # location: number of source positions W_a scores


class Scorer(nn.Module):
    """Base class: ``forward(query, keys) = score(query, precompute(keys))``."""

    #: True when the scorer compares query and key directly (defined for Dq == Dk);
    #: :class:`attnmt.models.attention.Attention` maps keys of another size to Dq first.
    same_dims: bool = False

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Scorer:
        raise NotImplementedError

    def precompute(self, keys: Tensor) -> Tensor:
        """keys [B,Tk,Dk] -> the key-side term, reused for every query (default: keys)."""
        return keys

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        """query [B,Tq,Dq], pre = precompute(keys) -> scores [B,Tq,Tk]."""
        raise NotImplementedError

    def valid_keys(self, num_keys: int, device: torch.device) -> Tensor | None:
        """BoolTensor [Tk] of key positions this scorer can score, or None (all)."""
        return None

    def forward(self, query: Tensor, keys: Tensor) -> Tensor:
        return self.score(query, self.precompute(keys))


class Dot(Scorer):
    """score(s, h) = sᵀh  (Luong 2015 "dot")."""

    same_dims = True

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Dot:
        return cls()

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        return torch.matmul(query, pre.transpose(-1, -2))


class ScaledDot(Scorer):
    """score(s, h) = sᵀh / √n, n = key dim, the size of h (Vaswani et al. 2017)."""

    same_dims = True

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> ScaledDot:
        return cls()

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        return torch.matmul(query, pre.transpose(-1, -2)) / math.sqrt(pre.size(-1))


class General(Scorer):
    """score(s, h) = sᵀ W h, W [Dq, Dk] (Luong 2015 "general", bilinear).

    ``precompute`` returns W h [B,Tk,Dq] once per source.
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.W = nn.Linear(key_dim, query_dim, bias=False)  # h -> W h

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> General:
        return cls(spec.query_dim, spec.key_dim)

    def precompute(self, keys: Tensor) -> Tensor:
        return self.W(keys)

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        return torch.matmul(query, pre.transpose(-1, -2))


class Additive(Scorer):
    """score(s, h) = vᵀ tanh(W₁ s + W₂ h) (Bahdanau et al. 2015).

    W₁ [Dh, Dq], W₂ [Dh, Dk], v [Dh], no biases: Dh·(Dq + Dk + 1) parameters (the RNN
    models: Dq = Dk = hidden_size, Dh = attention.hidden_dim, null -> hidden_size).
    ``precompute`` returns W₂h [B,Tk,Dh] once per source; each step adds W₁s and
    reduces with v: [B,Tq,1,Dh] + [B,1,Tk,Dh] -> tanh -> · v -> [B,Tq,Tk].
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.W1 = nn.Linear(query_dim, hidden_dim, bias=False)
        self.W2 = nn.Linear(key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Additive:
        return cls(spec.query_dim, spec.key_dim, spec.hidden_dim or spec.query_dim)

    def precompute(self, keys: Tensor) -> Tensor:
        return self.W2(keys)

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        hidden = torch.tanh(self.W1(query).unsqueeze(2) + pre.unsqueeze(1))  # [B,Tq,Tk,Dh]
        return self.v(hidden).squeeze(-1)


class Concat(Scorer):
    """score(s, h) = vᵀ tanh(W [s; h]), W [Dh, Dq+Dk], v [Dh] (Luong 2015 "concat").

    W [s; h] = W[:, :Dq] s + W[:, Dq:] h, so the key half is precomputed per source.
    """

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.W = nn.Linear(query_dim + key_dim, hidden_dim, bias=False)
        self.v = nn.Linear(hidden_dim, 1, bias=False)

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Concat:
        return cls(spec.query_dim, spec.key_dim, spec.hidden_dim or spec.query_dim)

    def precompute(self, keys: Tensor) -> Tensor:
        return F.linear(keys, self.W.weight[:, self.query_dim :])

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        q = F.linear(query, self.W.weight[:, : self.query_dim])  # [B,Tq,Dh]
        return self.v(torch.tanh(q.unsqueeze(2) + pre.unsqueeze(1))).squeeze(-1)


class Cosine(Scorer):
    """score(s, h) = β · sᵀh / (‖s‖‖h‖)  (content-based addressing, Graves et al. 2014).

    β is a learnable scalar initialised to ``beta`` or, with ``learn_beta=False``, a
    fixed constant (a buffer). Norms are clamped at 1e-8 so zero vectors score 0.
    """

    same_dims = True

    def __init__(self, beta: float = 10.0, learn_beta: bool = True) -> None:
        super().__init__()
        value = torch.tensor(float(beta))
        if learn_beta:
            self.beta = nn.Parameter(value)
        else:
            self.register_buffer("beta", value)

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Cosine:
        return cls(spec.cosine_beta, spec.learn_beta)

    def precompute(self, keys: Tensor) -> Tensor:
        return F.normalize(keys, dim=-1, eps=1e-8)

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        q = F.normalize(query, dim=-1, eps=1e-8)
        return self.beta * torch.matmul(q, pre.transpose(-1, -2))


class Location(Scorer):
    """a_t = softmax(W_a s_t), W_a [max_src_len, Dq] (Luong 2015 "location").

    The scores depend on the query only. They are the logits W_a s, so the softmax
    that :mod:`attention` applies produces the equation. For a source of S_real < max
    real tokens the first Tk logits are kept and padding is masked, so the softmax
    renormalises over the real positions: a_tj = exp(z_j) / Σ_{k<S_real} exp(z_k).
    Positions at or beyond ``max_src_len`` cannot be scored: ``valid_keys`` marks them
    and the attention masks them out (they get weight 0).
    """

    def __init__(self, query_dim: int, max_src_len: int) -> None:
        super().__init__()
        if max_src_len < 1:
            raise ConfigError(
                f"model.attention.max_src_len={max_src_len}: the location scorer needs >= 1"
            )
        self.max_src_len = max_src_len
        self.W_a = nn.Linear(query_dim, max_src_len)

    @classmethod
    def from_spec(cls, spec: ScorerSpec) -> Location:
        return cls(spec.query_dim, spec.max_src_len)

    def score(self, query: Tensor, pre: Tensor) -> Tensor:
        num_keys = pre.size(1)
        logits = self.W_a(query)[..., :num_keys]  # [B,Tq,min(Tk,max)]
        missing = num_keys - logits.size(-1)
        if missing > 0:  # beyond max_src_len: any finite value; valid_keys masks them
            logits = F.pad(logits, (0, missing), value=0.0)
        return logits

    def valid_keys(self, num_keys: int, device: torch.device) -> Tensor | None:
        if num_keys <= self.max_src_len:
            return None
        return torch.arange(num_keys, device=device) < self.max_src_len


SCORERS: dict[str, type[Scorer]] = {
    "dot": Dot,
    "scaled_dot": ScaledDot,
    "general": General,
    "additive": Additive,
    "concat": Concat,
    "cosine": Cosine,
    "location": Location,
}


def build_scorer(name: str, spec: ScorerSpec) -> Scorer:
    """The scorer registered as ``name``; ConfigError listing the choices otherwise."""
    try:
        cls = SCORERS[name]
    except KeyError:
        raise ConfigError(
            f"model.attention.score={name!r} is unknown; choose one of: {', '.join(SCORERS)}"
        ) from None
    return cls.from_spec(spec)
