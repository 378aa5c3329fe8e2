"""Model registry: one dict from config name to class.

Each class defines a dataclass ``Config`` (its config schema: unknown keys and wrong
types are rejected) and ``from_config(cfg, src_vocab_size, tgt_vocab_size, shared_vocab)``.
Checkpoints store the registry name and the config dict, never an import path.
Presets (``transformer_base`` …) are config files under ``configs/model/`` whose
``name`` is one of these. To add a model, add one line to ``MODELS``; a name used twice
is a repeated dict key, which ruff rejects (F601, run by tests/test_lint.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.rnn import BahdanauSeq2Seq, LuongSeq2Seq
from attnmt.models.transformer import Transformer


class ModelClass(Protocol):
    """What a registered class offers: its config schema and a constructor from a config."""

    @property
    def Config(self) -> type[Any]:
        """The config dataclass (the schema of ``configs/model/<name>.yaml``)."""

    def from_config(
        self, cfg: Any, src_vocab_size: int, tgt_vocab_size: int, shared_vocab: bool
    ) -> Seq2Seq:
        """The model built from ``cfg`` (a ``Config`` or a mapping merged onto it)."""


MODELS: dict[str, ModelClass] = {
    "rnn_bahdanau": BahdanauSeq2Seq,
    "rnn_luong": LuongSeq2Seq,
    "transformer": Transformer,
}


def model_class(name: str) -> ModelClass:
    """The class registered as ``name``; a clear error listing the choices otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(
            f"unknown model {name!r}; choose one of: {', '.join(sorted(MODELS))} "
            "(set it with model=<name> or model.name=<name>)"
        ) from None


def build_model(
    cfg: Mapping[str, Any] | Any, src_vocab_size: int, tgt_vocab_size: int, shared_vocab: bool
) -> Seq2Seq:
    """Instantiate the model named by ``cfg`` (its parsed ``Config`` or a plain mapping,
    e.g. from a checkpoint)."""
    name = str(cfg["name"] if isinstance(cfg, Mapping) else cfg.name)
    model = model_class(name).from_config(cfg, src_vocab_size, tgt_vocab_size, shared_vocab)
    model.name = name
    return model
