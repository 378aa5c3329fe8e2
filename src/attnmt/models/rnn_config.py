"""Config schemas of the RNN encoder–decoders (``model=rnn_bahdanau | rnn_luong``).

The dataclasses are the schema, parsed by :func:`attnmt.schema.parse` (unknown keys and
wrong types fail naming ``model.<key>``); :meth:`RNNConfig.check` holds the value checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnmt.errors import ConfigError
from attnmt.models.alignment import ALIGNMENTS, HARD_ESTIMATORS
from attnmt.models.rnn_encoder import CELLS
from attnmt.models.scorers import SCORERS
from attnmt.schema import within


@dataclass
class AttentionConfig:
    """``model.attention``: one scorer × one alignment mode (see attention.py)."""

    score: str = "additive"  # dot|scaled_dot|general|additive|concat|cosine|location
    mode: str = "global"  # global|local_m|local_p|hard
    window: int = 5  # local_m/local_p half-width D (σ = D/2 for local_p)
    hidden_dim: int | None = None  # additive/concat/local_p hidden size; null -> hidden_size
    # cosine: β (initial value if learn_beta), scaling cosines in [-1, 1] into scores
    cosine_beta: float = field(default=10.0, metadata=within(0, 100))
    learn_beta: bool = True  # cosine: learn β or keep it fixed
    hard_estimator: str = "gumbel"  # hard: gumbel (straight-through Gumbel) | straight_through
    # hard: temperature of the relaxed sample
    gumbel_tau: float = field(default=1.0, metadata=within(0, 100, lo_open=True))
    max_src_len: int = 256  # location: source positions W_a covers; later ones get weight 0


@dataclass
class RNNConfig:
    """Fields shared by both RNN decoders."""

    name: str = ""
    cell: str = "gru"  # gru|lstm
    emb_dim: int = 256
    hidden_size: int = 256  # decoder state size, and the annotation size unless set apart
    enc_hidden_size: int | None = None  # annotation size (directions together); null -> hidden_size
    enc_layers: int = 2
    dec_layers: int = 1
    bidirectional: bool = True
    dropout: float = field(default=0.2, metadata=within(0, 1, hi_open=True))
    share_embeddings: bool = True  # one source/target embedding when the vocab is joint
    tie_embeddings: bool = False  # output projection reuses the target embedding
    attention: AttentionConfig = field(default_factory=AttentionConfig)

    @property
    def annotation_size(self) -> int:
        """Size of each encoder output h_i (both directions together): the attention's keys
        and values."""
        return self.hidden_size if self.enc_hidden_size is None else self.enc_hidden_size

    @property
    def direction_size(self) -> int:
        """Units in each encoder direction: half the annotation size when bidirectional
        (OpenNMT's ``brnn`` convention), all of it otherwise."""
        return self.annotation_size // (2 if self.bidirectional else 1)

    def check(self, prefix: str = "model") -> None:
        """Value checks beyond types (called by attnmt.train.run_config and by from_config)."""
        validate(self, prefix)


@dataclass
class BahdanauConfig(RNNConfig):
    """``model=rnn_bahdanau``."""

    name: str = "rnn_bahdanau"
    readout_dim: int | None = None  # deep-output layer size; null -> emb_dim


@dataclass
class LuongConfig(RNNConfig):
    """``model=rnn_luong``."""

    name: str = "rnn_luong"
    input_feeding: bool = True  # feed h̃_{t-1} into the next RNN input
    attention: AttentionConfig = field(default_factory=lambda: AttentionConfig(score="general"))


def _choice(key: str, value: str, choices: Mapping[str, Any]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r} is unknown; choose one of: {', '.join(choices)}")


def _positive(key: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise ConfigError(f"{key}={value}: must be a positive integer")


def _even_annotations(cfg: RNNConfig, p: str) -> None:
    """A bidirectional encoder splits the annotation size between its two directions."""
    if not cfg.bidirectional or cfg.annotation_size % 2 == 0:
        return
    key = "hidden_size" if cfg.enc_hidden_size is None else "enc_hidden_size"
    raise ConfigError(
        f"{p}.{key}={cfg.annotation_size} with {p}.bidirectional=true: each encoder direction "
        f"gets half of the annotation size, so it must be even; choose an even {p}.{key} "
        f"or set {p}.bidirectional=false"
    )


def validate(cfg: RNNConfig, prefix: str = "model") -> None:
    """Value checks the schema cannot express; ConfigError naming ``<prefix>.<key>``."""
    p, a = prefix, cfg.attention
    _choice(f"{p}.cell", cfg.cell, CELLS)
    _choice(f"{p}.attention.score", a.score, SCORERS)
    _choice(f"{p}.attention.mode", a.mode, ALIGNMENTS)
    _choice(f"{p}.attention.hard_estimator", a.hard_estimator, HARD_ESTIMATORS)
    for key in ("emb_dim", "hidden_size", "enc_layers", "dec_layers"):
        _positive(f"{p}.{key}", getattr(cfg, key))
    _positive(f"{p}.enc_hidden_size", cfg.enc_hidden_size)
    _even_annotations(cfg, p)
    _positive(f"{p}.attention.hidden_dim", a.hidden_dim)
    _positive(f"{p}.attention.max_src_len", a.max_src_len)
    if a.mode in ("local_m", "local_p"):
        _positive(f"{p}.attention.window", a.window)
    # the float settings' ranges (within(...) above) are checked by attnmt.schema.parse
