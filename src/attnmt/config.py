"""Validate a composed run config before any data work.

``validate_config(cfg)`` checks every key of the composed Hydra config against a schema:

* top level: :class:`RunConfig` (``seed``, ``device``, ``resume``) plus the groups below;
* ``data``    onto ``attnmt.data.config.DataConfig``;
* ``model``   onto ``model_class(cfg.model.name).Config`` (the schema depends on the
  chosen model, so it can only be picked after composition);
* ``trainer`` onto ``attnmt.train.config.TrainerConfig``.

A misspelt key fails with ``trainer.max_stpes: unknown key; did you mean
trainer.max_steps?``, a wrong type with ``trainer.max_steps: expected int, got 'abc'``,
a bad choice with the list of valid choices. Each schema's own value checks then run
(``check(prefix)`` methods; models are built on the ``meta`` device, which costs no
memory, so their constructors' checks run too).

No ConfigStore: registering the schemas in Hydra's global ConfigStore at import time
would make importing this module mutate process-wide state, and a static schema cannot
follow ``model.name`` (each model has its own schema). Validating the composed config
here keeps Hydra untouched and gives messages in our own words.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from attnmt.errors import ConfigError

DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
"""Accepted ``device`` values."""


@dataclass
class RunConfig:
    """Top-level scalar keys of ``configs/train.yaml`` (the groups are separate schemas)."""

    seed: int = 1234
    device: str = "auto"  # auto (CUDA when present) | cpu | cuda | cuda:N | mps
    resume: str | None = None  # null | auto | PATH


# ---------------------------------------------------------------- schema lookups


def _data_schema(cfg: Mapping[str, Any]) -> type:
    from attnmt.data.config import DataConfig

    return DataConfig


def _model_schema(cfg: Mapping[str, Any]) -> type:
    from attnmt.models.registry import MODELS, model_class

    name = cfg.get("name")
    if name not in MODELS:
        raise ConfigError(
            f"model.name: {name!r} is not a registered model; choose one of: "
            f"{', '.join(sorted(MODELS))} (model=<name> on the command line)"
            + _suggest(str(name), MODELS, "model.name=")
        )
    return model_class(str(name)).Config  # type: ignore[attr-defined]


def _trainer_schema(cfg: Mapping[str, Any]) -> type:
    from attnmt.train.config import TrainerConfig

    return TrainerConfig


def _build_model_on_meta(obj: Any, container: Mapping[str, Any], prefix: str) -> None:
    """Run the model constructor's own checks without allocating (meta device)."""
    from attnmt.models.registry import build_model

    try:
        with torch.device("meta"):
            build_model(container, 8, 8, True)
    except ConfigError:
        raise
    except (ValueError, KeyError) as err:
        raise ConfigError(f"{prefix}: {err}") from None


def _check_method(obj: Any, container: Mapping[str, Any], prefix: str) -> None:
    """Call the schema's ``check(prefix)`` value checks when it has them."""
    check = getattr(obj, "check", None)
    if callable(check):
        check(prefix)


def _data_checks(obj: Any, container: Mapping[str, Any], prefix: str) -> None:
    from attnmt.data.config import validate

    validate(obj)


@dataclass(frozen=True)
class Section:
    """A config group: how to find its schema and what value checks to run after typing."""

    schema: Callable[[Mapping[str, Any]], type]
    checks: tuple[Callable[[Any, Mapping[str, Any], str], None], ...] = (_check_method,)


SECTIONS: dict[str, Section] = {
    "data": Section(_data_schema, (_data_checks,)),
    "model": Section(_model_schema, (_check_method, _build_model_on_meta)),
    "trainer": Section(_trainer_schema),
}
"""Config groups validated by :func:`validate_config`."""


def _optimizers() -> Iterable[str]:
    from attnmt.train.optim import OPTIMIZERS

    return OPTIMIZERS


def _schedules() -> Iterable[str]:
    from attnmt.train.optim import SCHEDULES

    return SCHEDULES


def _precisions() -> Iterable[str]:
    from attnmt.train.precision import RESOLVERS

    return RESOLVERS


CHOICES: dict[str, Callable[[], Iterable[str]]] = {
    "trainer.optimizer": _optimizers,
    "trainer.schedule": _schedules,
    "trainer.precision": _precisions,
}
"""String keys whose value must be one of a registry's names (looked up lazily)."""

PASS_THROUGH = frozenset({"hydra"})
"""Top-level keys left as they are (present only with ``return_hydra_config``)."""


# ---------------------------------------------------------------- helpers


def _suggest(word: str, choices: Iterable[str], prefix: str) -> str:
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def _unknown_key(key: str, valid: Iterable[str], prefix: str) -> ConfigError:
    full = f"{prefix}{key}"
    valid = sorted(valid)
    hint = _suggest(key, valid, prefix)
    if not hint:
        hint = f"; valid keys under {prefix.rstrip('.') or 'the top level'}: {', '.join(valid)}"
    return ConfigError(f"{full}: unknown key{hint}")


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "null"
    return getattr(hint, "__name__", str(hint).replace("typing.", ""))


def _dataclass_of(hint: Any) -> type | None:
    """The dataclass in ``hint`` (``X`` or ``X | None``), else None."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return None  # dict[str, X] / list[X]: OmegaConf checks their values
    for arg in typing.get_args(hint):
        if dataclasses.is_dataclass(arg) and isinstance(arg, type):
            return arg
    return None


def _hints(schema: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(schema)
    except Exception:  # unresolvable annotation: fall back to the raw field types
        return {f.name: f.type for f in dataclasses.fields(schema)}


def check_keys(node: Mapping[str, Any], schema: type, prefix: str) -> None:
    """Reject keys of ``node`` that ``schema`` (a dataclass) lacks, recursing into sub-schemas."""
    hints = _hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    for key, value in node.items():
        if key not in names:
            raise _unknown_key(str(key), names, prefix)
        sub = _dataclass_of(hints.get(key))
        if sub is not None and isinstance(value, Mapping):
            check_keys(value, sub, f"{prefix}{key}.")


def _typed(container: Mapping[str, Any], schema: type, prefix: str) -> Any:
    """Merge ``container`` onto ``schema`` and build the dataclass; ConfigError on bad types."""
    check_keys(container, schema, prefix)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), container)
        return OmegaConf.to_object(merged)
    except MissingMandatoryValue as err:
        key = _join(prefix, err)
        raise ConfigError(
            f"{key}: no value given; set it on the command line ({key}=...)"
        ) from None
    except OmegaConfBaseException as err:
        rel = str(getattr(err, "full_key", "") or "")
        raise ConfigError(f"{_join(prefix, err)}: {_type_message(err, schema, rel)}") from None


def _join(prefix: str, err: OmegaConfBaseException) -> str:
    """``prefix`` + the error's key relative to the section (the section itself if none)."""
    rel = str(getattr(err, "full_key", "") or "")
    return f"{prefix}{rel}" if rel else (prefix.rstrip(".") or "config")


def _type_message(err: OmegaConfBaseException, schema: type, rel_key: str) -> str:
    """``expected int, got 'abc' (str)``-style text for an OmegaConf validation error."""
    hint: Any = None
    node_schema: type | None = schema
    for part in rel_key.split(".") if rel_key else []:
        if node_schema is None:
            hint = None
            break
        hint = _hints(node_schema).get(part)
        node_schema = _dataclass_of(hint)
    value = getattr(err, "value", None)
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    if hint is None:
        return first
    if value is None:
        return f"expected {_type_name(hint)} [{first}]"
    return f"expected {_type_name(hint)}, got {value!r} ({type(value).__name__})"


def _resolved(cfg: DictConfig, key: str) -> Any:
    """``cfg[key]`` as plain data, interpolations resolved against the whole config."""
    try:
        value = cfg[key]
        if isinstance(value, (DictConfig, ListConfig)):
            return OmegaConf.to_container(value, resolve=True, throw_on_missing=True)
        return value
    except MissingMandatoryValue as err:
        full = _full_key(key, err)
        raise ConfigError(
            f"{full}: no value given; set it on the command line ({full}=...)"
        ) from None
    except OmegaConfBaseException as err:
        raise ConfigError(f"{_full_key(key, err)}: {str(err).splitlines()[0]}") from None


def _full_key(top: str, err: OmegaConfBaseException) -> str:
    """Dotted key of an OmegaConf error raised under ``cfg[top]``."""
    sub = str(getattr(err, "full_key", "") or "")
    if not sub or sub == top or sub.startswith(f"{top}.") or sub.startswith(f"{top}["):
        return sub or top
    return f"{top}.{sub}"


def _check_choices(plain: Mapping[str, Any]) -> None:
    for dotted, names in CHOICES.items():
        section, _, key = dotted.partition(".")
        node = plain.get(section)
        if not isinstance(node, Mapping) or key not in node:
            continue
        valid = list(names())
        value = node[key]
        if value not in valid:
            raise ConfigError(
                f"{dotted}: {value!r} is not one of: {', '.join(valid)}"
                + _suggest(str(value), valid, f"{dotted}=")
            )


# ---------------------------------------------------------------- entry point


def validate_config(
    cfg: DictConfig | Mapping[str, Any], run_schema: type = RunConfig
) -> DictConfig:
    """Validated copy of a composed run config, defaults filled in, interpolations resolved.

    ``run_schema`` describes the top-level scalar keys (evaluate/translate entry points
    may pass their own dataclass). Groups in :data:`SECTIONS` are validated when present
    (``model`` always needs one). Raises :class:`ConfigError` naming the full key.
    """
    if not isinstance(cfg, DictConfig):
        cfg = OmegaConf.create(dict(cfg))
    top_names = [f.name for f in dataclasses.fields(run_schema)]
    allowed = [*top_names, *SECTIONS, *PASS_THROUGH]
    for key in cfg:
        if key not in allowed:
            raise _unknown_key(str(key), [k for k in allowed if k not in PASS_THROUGH], "")

    plain: dict[str, Any] = {}
    scalars = {k: _resolved(cfg, k) for k in top_names if k in cfg}
    run = _typed(scalars, run_schema, "")
    plain.update(dataclasses.asdict(run))
    device = plain.get("device")
    if isinstance(device, str) and not DEVICE_PATTERN.match(device):
        raise ConfigError(f"device: {device!r} is not one of: auto, cpu, cuda, cuda:N, mps")

    typed: dict[str, Any] = {}
    for name, section in SECTIONS.items():
        if name not in cfg:
            continue
        container = _resolved(cfg, name)
        if not isinstance(container, Mapping):
            raise ConfigError(f"{name}: expected a config group (mapping), got {container!r}")
        typed[name] = _typed(container, section.schema(container), f"{name}.")
        plain[name] = dataclasses.asdict(typed[name])
    _check_choices(plain)
    for name, obj in typed.items():
        for check in SECTIONS[name].checks:
            check(obj, plain[name], name)
    if "hydra" in cfg:
        plain["hydra"] = cfg["hydra"]
    return OmegaConf.create(plain)
