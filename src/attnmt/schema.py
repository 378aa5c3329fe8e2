"""The one schema helper: a mapping of settings → a typed dataclass, or one clear error.

    obj = parse(values, Schema, "trainer.")

merges ``values`` (a dict, DictConfig or an instance of ``Schema``) onto the dataclass
``Schema`` with OmegaConf, so that

* a misspelt key fails with ``trainer.max_stpes: unknown key; did you mean
  trainer.max_steps?`` (sub-dataclasses are checked too);
* a wrong type fails with ``trainer.max_steps: expected int, got 'abc' (str)``;
* a missing mandatory value (``???``) fails with ``ckpt: no value given; ...``;
* a float setting that is NaN or infinite fails with ``decode.alpha: nan is not a finite
  number; ...`` (:func:`check_finite`: every float, in sub-dataclasses and lists too);
* the schema's own value checks run last: its ``check(prefix)`` method, if it has one.

Every config section (data, model, trainer, decode, and the evaluate/translate
settings) is parsed here, so all of them speak with one voice.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from attnmt.errors import ConfigError

T = TypeVar("T")


def suggest(word: str, choices: Iterable[str], prefix: str) -> str:
    """``"; did you mean <prefix><closest>?"`` or "" when nothing is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"; did you mean {prefix}{close[0]}?" if close else ""


def unknown_key(key: str, valid: Iterable[str], prefix: str) -> ConfigError:
    """The error for ``<prefix><key>``, which is not among ``valid``."""
    valid = sorted(valid)
    hint = suggest(key, valid, prefix) or (
        f"; valid keys under {prefix.rstrip('.') or 'the top level'}: {', '.join(valid)}"
    )
    return ConfigError(f"{prefix}{key}: unknown key{hint}")


def no_value(key: str) -> ConfigError:
    """The error for a mandatory ``key`` (``???``) left without a value."""
    return ConfigError(f"{key}: no value given; set it on the command line ({key}=...)")


def check_choice(key: str, value: Any, choices: Iterable[str]) -> None:
    """ConfigError naming ``key`` unless ``value`` is one of ``choices`` (a registry's names)."""
    valid = list(choices)
    if value not in valid:
        raise ConfigError(
            f"{key}: {value!r} is not one of: {', '.join(valid)}"
            + suggest(str(value), valid, f"{key}=")
        )


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
            raise unknown_key(str(key), names, prefix)
        sub = _dataclass_of(hints.get(key))
        if sub is not None and isinstance(value, Mapping):
            check_keys(value, sub, f"{prefix}{key}.")


def _join(prefix: str, err: OmegaConfBaseException) -> str:
    """``prefix`` + the error's key relative to the section (the section itself if none)."""
    rel = str(getattr(err, "full_key", "") or "")
    return f"{prefix}{rel}" if rel else (prefix.rstrip(".") or "config")


def _type_message(err: OmegaConfBaseException, schema: type) -> str:
    """``expected int, got 'abc' (str)``-style text for an OmegaConf validation error."""
    rel_key = str(getattr(err, "full_key", "") or "")
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


def parse(values: Mapping[str, Any] | Any, schema: type[T], prefix: str = "") -> T:
    """``values`` merged onto the dataclass ``schema`` and checked; ConfigError naming the key.

    ``prefix`` (``"trainer."``, ``""`` for top-level settings) starts every key in messages.
    """
    if isinstance(values, schema):
        obj = values
    else:
        if not isinstance(values, (Mapping, DictConfig)):
            where = prefix.rstrip(".") or "config"
            raise ConfigError(f"{where}: expected a mapping of settings, got {values!r}")
        check_keys(values, schema, prefix)
        try:
            merged = OmegaConf.merge(OmegaConf.structured(schema), values)
            missing = sorted(OmegaConf.missing_keys(merged))
            if missing:
                raise no_value(f"{prefix}{missing[0]}")
            # a structured config's object is an instance of its dataclass, ``schema``
            obj = cast(T, OmegaConf.to_object(merged))
        except MissingMandatoryValue as err:
            raise no_value(_join(prefix, err)) from None
        except OmegaConfBaseException as err:
            raise ConfigError(f"{_join(prefix, err)}: {_type_message(err, schema)}") from None
    check_finite(obj, prefix)
    check = getattr(obj, "check", None)
    if callable(check):
        check(prefix.rstrip("."))
    return obj


def _floats(value: Any, key: str) -> Iterable[tuple[str, float]]:
    """(dotted key, value) of every float in a parsed dataclass, mapping or list."""
    if isinstance(value, float):
        yield key, value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from _floats(getattr(value, f.name), f"{key}.{f.name}" if key else f.name)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _floats(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _floats(v, f"{key}[{i}]")


def check_finite(obj: Any, prefix: str = "") -> None:
    """ConfigError naming the first float setting of ``obj`` that is NaN or infinite: no
    setting means "no limit" by inf, and a NaN passes every comparison, so either would
    give a silently wrong or crashing run."""
    for key, value in _floats(obj, ""):
        if not math.isfinite(value):
            raise ConfigError(
                f"{prefix}{key}: {value} is not a finite number; set it to a finite value"
            )


def plain(obj: Any) -> Any:
    """A parsed dataclass (or nested ones) as plain dicts and lists, for checkpoints and logs."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
