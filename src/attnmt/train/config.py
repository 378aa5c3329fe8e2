"""Schema of the ``trainer`` config group (``configs/trainer/default.yaml``).

:class:`TrainerConfig` is a plain dataclass: :meth:`TrainerConfig.from_mapping` rejects
unknown keys and wrong types with a :class:`~attnmt.errors.ConfigError` naming the key,
so a misspelt override fails before any data work.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from attnmt.errors import ConfigError


@dataclass
class TrainerConfig:
    """Every training knob (defaults = configs/trainer/default.yaml)."""

    # optimisation
    optimizer: str = "adam"  # adam | adamw  (attnmt.train.optim.OPTIMIZERS)
    lr: float = 2e-3  # peak learning rate (after warmup)
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    eps: float = 1e-9
    weight_decay: float = 0.0
    schedule: str = "noam"  # noam | plateau | constant  (attnmt.train.optim.SCHEDULES)
    warmup_steps: int = 100
    plateau_factor: float = 0.5  # lr *= factor after `plateau_patience` validations w/o gain
    plateau_patience: int = 2
    min_lr: float = 1e-5
    label_smoothing: float = 0.1
    clip_grad_norm: float = 1.0  # 0 disables clipping (the norm is still logged)
    accum_steps: int = 1  # batches per optimizer update
    max_tokens: int = 2048  # padded tokens per training batch (token buckets)
    bucket_size: int = 4096  # pairs shuffled together, then sorted by length; 0 = all
    precision: str = "auto"  # fp32 | bf16 | fp16 | auto  (attnmt.train.precision)
    # stopping
    max_steps: int = 0  # optimizer updates; 0 = no limit
    max_epochs: int = 0  # 0 = no limit
    time_budget_min: float = 12.0  # wall-clock training budget; 0 = no limit
    early_stopping_patience: int = 5  # validations without a BLEU gain; 0 disables
    # validation
    val_every_steps: int = 100  # 0 = only at the end of each epoch
    val_every_epoch: bool = False  # also validate at the end of each epoch
    val_subset: int = 200  # first N valid pairs; 0 = the whole split
    val_max_tokens: int = 8192
    val_beam_size: int = 1  # 1 = batched greedy search
    max_len_a: float = 1.5  # hypotheses stop at a * src_len + b tokens
    max_len_b: int = 10
    num_heatmaps: int = 2  # fixed validation sentences drawn as attention heatmaps
    num_samples: int = 3  # source / reference / hypothesis text samples
    # checkpoints and logging
    keep_best: int = 3  # k best checkpoints by validation BLEU
    log_every_steps: int = 50
    progress_bar: bool = True  # shown only on a TTY and on rank 0
    # final test decoding with the best checkpoint
    test: bool = True
    test_beam_size: int = 4

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], prefix: str = "trainer") -> TrainerConfig:
        """Validated config from a mapping; unknown keys or wrong types raise ConfigError."""
        hints = get_type_hints(cls)
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in known:
                close = difflib.get_close_matches(str(key), sorted(known), n=1)
                hint = f"; did you mean {prefix}.{close[0]}?" if close else ""
                raise ConfigError(f"unknown config key {prefix}.{key}{hint}")
            kwargs[key] = _coerce(f"{prefix}.{key}", value, hints[key])
        cfg = cls(**kwargs)
        cfg.check(prefix)
        return cfg

    def check(self, prefix: str = "trainer") -> None:
        """Value checks that types cannot express."""
        positive = (
            "lr",
            "eps",
            "max_tokens",
            "accum_steps",
            "val_max_tokens",
            "val_beam_size",
            "test_beam_size",
            "log_every_steps",
            "plateau_patience",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"{prefix}.{name} must be > 0, got {getattr(self, name)}")
        non_negative = (
            "weight_decay",
            "warmup_steps",
            "min_lr",
            "clip_grad_norm",
            "max_steps",
            "max_epochs",
            "bucket_size",
            "time_budget_min",
            "early_stopping_patience",
            "val_every_steps",
            "val_subset",
            "max_len_a",
            "max_len_b",
            "num_heatmaps",
            "num_samples",
            "keep_best",
        )
        for name in non_negative:
            if getattr(self, name) < 0:
                raise ConfigError(f"{prefix}.{name} must be >= 0, got {getattr(self, name)}")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(
                f"{prefix}.label_smoothing must be in [0, 1), got {self.label_smoothing}"
            )
        from attnmt.train.optim import OPTIMIZERS, SCHEDULES  # here: optim imports this module
        from attnmt.train.precision import RESOLVERS

        for name, choices in (
            ("optimizer", OPTIMIZERS),
            ("schedule", SCHEDULES),
            ("precision", RESOLVERS),
        ):
            if getattr(self, name) not in choices:
                raise ConfigError(
                    f"{prefix}.{name}={getattr(self, name)!r} is not one of {', '.join(choices)}"
                )
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"{prefix}.betas must be two numbers in [0, 1), got {self.betas}")
        if not 0.0 < self.plateau_factor < 1.0:
            raise ConfigError(
                f"{prefix}.plateau_factor must be in (0, 1), got {self.plateau_factor}"
            )


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _coerce(key: str, value: Any, hint: Any) -> Any:
    """Check ``value`` against a simple type hint (int/float/bool/str/list[float])."""
    if hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif hint is str:
        if isinstance(value, str):
            return value
    elif hint == list[float] and isinstance(value, (list, tuple)) and all(map(_is_num, value)):
        return [float(v) for v in value]
    name = getattr(hint, "__name__", str(hint))
    raise ConfigError(f"{key} must be {name}, got {value!r} ({type(value).__name__})")
