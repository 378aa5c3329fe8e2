"""Validate a composed training config once, into one typed :class:`RunConfig`.

``validate_config(cfg)`` checks every key of the composed Hydra config and returns
typed objects that the trainer passes down (nothing parses a section again):

* top level: ``seed``, ``device``, ``resume``, ``finetune``;
* ``data``    → :class:`attnmt.data.config.DataConfig`;
* ``model``   → the registered model's ``Config`` (the schema follows ``model.name``, so it
  is picked after composition; the model is also built on the ``meta`` device, which
  costs no memory, so its constructor's checks run too);
* ``trainer`` → :class:`attnmt.train.config.TrainerConfig`;
* ``decode``  → :class:`attnmt.decode.config.DecodeConfig`.

Every section goes through :func:`attnmt.schema.parse`: ``trainer.max_stpes: unknown key;
did you mean trainer.max_steps?``, ``trainer.max_steps: expected int, got 'abc' (str)``,
registry choices with the list of valid names.

No ConfigStore: registering the schemas in Hydra's global ConfigStore at import time would
make importing this module mutate process-wide state, and a static schema cannot follow
``model.name``. Validating the composed config here keeps Hydra untouched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from attnmt.data.config import DataConfig
from attnmt.decode.config import DecodeConfig
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.registry import MODELS, build_model, model_class
from attnmt.schema import check_choice, no_value, parse, plain, suggest, unknown_key
from attnmt.train.config import TrainerConfig
from attnmt.train.guided_alignment import check_guide
from attnmt.train.optim import OPTIMIZERS, SCHEDULES
from attnmt.train.precision import RESOLVERS

DEVICES = "auto, cpu, cuda, cuda:N, mps"


@dataclass
class RunConfig:
    """A validated training run: what ``train.py`` was asked to do, every section typed."""

    data: DataConfig = field(default_factory=DataConfig)
    model: Any = None  # the registered model's Config dataclass (model.name picks it)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    seed: int = 1234
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N | mps
    resume: str | None = None  # null | auto | PATH
    finetune: str | None = None  # null | PATH: a new run starting from a checkpoint's weights

    def to_dict(self) -> dict[str, Any]:
        """Plain data (checkpoints store it; TensorBoard's hparams read it)."""
        return plain(self)


SCALARS = ("seed", "device", "resume", "finetune")
"""Top-level keys of configs/train.yaml that are not config groups."""

CHOICES: dict[str, Iterable[str]] = {
    "trainer.optimizer": OPTIMIZERS,
    "trainer.schedule": SCHEDULES,
    "trainer.precision": RESOLVERS,
}
"""String keys whose value must be one of a registry's names: checked here, once."""

PASS_THROUGH = frozenset({"hydra"})
"""Top-level keys left as they are (present only with ``return_hydra_config``)."""


@dataclass
class _Scalars:
    seed: int = 1234
    device: str = "auto"
    resume: str | None = None
    finetune: str | None = None

    def check(self, prefix: str = "") -> None:
        """``seed`` must be one that numpy and torch accept: checked before any data work."""
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed={self.seed} must be between 0 and 2**32 - 1 (e.g. seed=1)")


def _model_schema(container: Mapping[str, Any]) -> type:
    name = container.get("name")
    if name not in MODELS:
        raise ConfigError(
            f"model.name: {name!r} is not a registered model; choose one of: "
            f"{', '.join(sorted(MODELS))} (model=<name> on the command line)"
            + suggest(str(name), MODELS, "model.name=")
        )
    return model_class(str(name)).Config


def _build_model_on_meta(model_cfg: Any) -> Seq2Seq:
    """Run the model constructor's own checks without allocating (meta device)."""
    try:
        with torch.device("meta"):
            return build_model(model_cfg, 8, 8, True)
    except ConfigError:
        raise
    except (ValueError, KeyError) as err:
        raise ConfigError(f"model: {err}") from None


SECTIONS: dict[str, Callable[[Mapping[str, Any]], type]] = {
    "data": lambda _: DataConfig,
    "model": _model_schema,
    "trainer": lambda _: TrainerConfig,
    "decode": lambda _: DecodeConfig,
}
"""Config groups and how to find each one's schema (the model's depends on its name)."""


def _resolved(cfg: DictConfig, key: str) -> Any:
    """``cfg[key]`` as plain data, interpolations resolved against the whole config."""
    try:
        value = cfg[key]
        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True, throw_on_missing=True)
        return value
    except MissingMandatoryValue as err:
        raise no_value(_full_key(key, err)) from None
    except OmegaConfBaseException as err:
        raise ConfigError(f"{_full_key(key, err)}: {str(err).splitlines()[0]}") from None


def _full_key(top: str, err: OmegaConfBaseException) -> str:
    """Dotted key of an OmegaConf error raised under ``cfg[top]``."""
    sub = str(getattr(err, "full_key", "") or "")
    if not sub or sub == top or sub.startswith(f"{top}.") or sub.startswith(f"{top}["):
        return sub or top
    return f"{top}.{sub}"


def validate_config(cfg: DictConfig | Mapping[str, Any] | RunConfig) -> RunConfig:
    """The typed run config of a composed Hydra config (a RunConfig is returned as is).

    Missing groups take their schema's defaults (``model`` must be given). Raises
    :class:`ConfigError` naming the full key of the first problem.
    """
    if isinstance(cfg, RunConfig):
        return cfg
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    allowed = [*SCALARS, *SECTIONS, *PASS_THROUGH]
    for key in cfg:
        if key not in allowed:
            raise unknown_key(str(key), [k for k in allowed if k not in PASS_THROUGH], "")
    scalars = parse({k: _resolved(cfg, k) for k in SCALARS if k in cfg}, _Scalars)
    if not isinstance(scalars.device, str) or not _device_ok(scalars.device):
        raise ConfigError(f"device: {scalars.device!r} is not one of: {DEVICES}")
    check_exclusive(scalars.resume, scalars.finetune)
    if "model" not in cfg:
        raise ConfigError("model: no model given; choose one with model=<name>")
    sections: dict[str, Any] = {}
    for name, schema_of in SECTIONS.items():
        if name not in cfg:
            continue
        container = _resolved(cfg, name)
        if not isinstance(container, Mapping):
            raise ConfigError(f"{name}: expected a config group (mapping), got {container!r}")
        sections[name] = parse(container, schema_of(container), f"{name}.")
    trainer = sections.get("trainer", TrainerConfig())
    for dotted, names in CHOICES.items():
        check_choice(dotted, getattr(trainer, dotted.partition(".")[2]), names)
    model = _build_model_on_meta(sections["model"])
    check_guide(trainer.guided_alignment, model, "trainer.guided_alignment")
    return RunConfig(**sections, **dataclasses.asdict(scalars))


def check_exclusive(resume: Any, finetune: Any) -> None:
    """``resume`` and ``finetune`` cannot both be set."""
    if resume not in (None, "") and finetune not in (None, ""):
        raise ConfigError(
            f"finetune={finetune} and resume={resume} exclude each other: "
            "resume continues a run, finetune starts a new one from a checkpoint's weights"
        )


def settings_of(cfg: DictConfig | Mapping[str, Any] | RunConfig) -> dict[str, Any]:
    """The composed (not yet validated) settings as plain data, interpolations resolved;
    an unresolvable value fails naming its key."""
    if isinstance(cfg, RunConfig):
        return cfg.to_dict()
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    return {str(k): _resolved(cfg, str(k)) for k in cfg if k not in PASS_THROUGH}


def setting_defaults(model_name: str) -> dict[str, Any]:
    """Every dotted leaf setting of today's schema with its default, for model
    ``model_name`` (e.g. ``{"trainer.lr": 0.001, ...}``)."""
    model = model_class(model_name).Config() if model_name in MODELS else None
    flat: dict[str, Any] = {}
    todo: list[tuple[str, Any]] = [("", plain(RunConfig(model=model)))]
    while todo:
        prefix, node = todo.pop()
        for key, value in node.items():
            if isinstance(value, Mapping) and value:
                todo.append((f"{prefix}{key}.", value))
            else:
                flat[prefix + key] = value
    return flat


def setting_keys(model_name: str) -> set[str]:
    """Every dotted key today's schema knows, for a run of model ``model_name``: each leaf
    of :func:`setting_defaults` and every section above it."""
    keys: set[str] = set()
    for leaf in setting_defaults(model_name):
        parts = leaf.split(".")
        keys.update(".".join(parts[:n]) for n in range(1, len(parts) + 1))
    return keys


def _device_ok(name: str) -> bool:
    head, _, index = name.partition(":")
    if name in ("auto", "cpu", "mps", "cuda"):
        return True
    return head == "cuda" and index.isdigit()
