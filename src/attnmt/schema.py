"""The one schema helper: a mapping of settings → a typed dataclass, or one clear error.

    obj = parse(values, Schema, "trainer.")

merges ``values`` (a dict, DictConfig or an instance of ``Schema``) onto the dataclass
``Schema`` with OmegaConf, so that

* a misspelt key fails with ``trainer.max_stpes: unknown key; did you mean
  trainer.max_steps?`` (sub-dataclasses are checked too);
* a wrong type fails with ``trainer.max_steps: expected int, got 'abc' (str)``;
* a missing mandatory value (``???``) fails with ``ckpt: no value given; ...``;
* a number outside its field's stated range fails with ``decode.alpha: 1e+308 is out of
  range; allowed: 0 <= decode.alpha <= 10`` (:func:`check_numbers`: every float, in
  sub-dataclasses and lists too, must be finite, and every field that declares a
  :class:`Range` with ``field(metadata=within(lo, hi))`` must lie in it: one check for
  every setting that multiplies a length, a score or a step, instead of a list of special
  values that overflow later);
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
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from attnmt.errors import ConfigError

T = TypeVar("T")

RANGE = "range"
"""The key of a dataclass field's metadata that holds its :class:`Range`."""


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


@dataclass(frozen=True)
class Range:
    """The numbers a setting allows: ``lo <= x <= hi`` (``<`` on an open end); always finite,
    so that a setting multiplying a length, a score or a learning rate cannot overflow."""

    lo: float
    hi: float
    lo_open: bool = False
    hi_open: bool = False

    def holds(self, x: float) -> bool:
        """Whether ``x`` is finite and within the range."""
        if not math.isfinite(x):
            return False
        above = self.lo < x if self.lo_open else self.lo <= x
        below = x < self.hi if self.hi_open else x <= self.hi
        return above and below

    def describe(self, key: str) -> str:
        """``0 <= key <= 10``, ``0 < key < 1`` ..."""
        left = "<" if self.lo_open else "<="
        right = "<" if self.hi_open else "<="
        return f"{_fmt(self.lo)} {left} {key} {right} {_fmt(self.hi)}"


def within(lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False) -> dict[str, Any]:
    """Field metadata stating a setting's range: ``field(default=0.6, metadata=within(0, 10))``
    (for a list, every element's)."""
    return {RANGE: Range(lo, hi, lo_open, hi_open)}


def range_of(schema: type, name: str) -> Range:
    """The :class:`Range` that field ``name`` of the dataclass ``schema`` states."""
    for f in dataclasses.fields(schema):
        if f.name == name and RANGE in f.metadata:
            return cast(Range, f.metadata[RANGE])
    raise KeyError(f"{schema.__name__}.{name} states no range")


def check_number(key: str, value: float, allowed: Range | None) -> None:
    """ConfigError naming ``key``, ``value`` and the allowed range unless ``value`` is finite
    and within ``allowed`` (None: any finite number)."""
    if allowed is None:
        if not math.isfinite(value):
            raise ConfigError(f"{key}: {value} is not a finite number; set it to a finite value")
        return
    if allowed.holds(value):
        return
    what = "is not a finite number" if not math.isfinite(value) else "is out of range"
    raise ConfigError(f"{key}: {value} {what}; allowed: {allowed.describe(key)}")


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
    check_numbers(obj, prefix)
    check = getattr(obj, "check", None)
    if callable(check):
        check(prefix.rstrip("."))
    return obj


def _numbers(
    value: Any, key: str, allowed: Range | None = None
) -> Iterator[tuple[str, float, Range | None]]:
    """(dotted key, value, range) of every float of a parsed dataclass, mapping or list, and
    of every int whose field states a range (bools are neither)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) or (isinstance(value, int) and allowed is not None):
        yield key, value, allowed
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            sub = f"{key}.{f.name}" if key else f.name
            yield from _numbers(getattr(value, f.name), sub, f.metadata.get(RANGE))
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _numbers(v, f"{key}.{k}" if key else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{key}[{i}]", allowed)


def check_numbers(obj: Any, prefix: str = "") -> None:
    """ConfigError naming the first number setting of ``obj`` that is NaN, infinite or
    outside its field's :class:`Range`: no setting means "no limit" by inf, a NaN passes
    every comparison, and a huge finite value (``decode.max_len_a=1e308``) overflows where
    it multiplies a length, a score or a step, so each would give a crashing or silently
    wrong run."""
    for key, value, allowed in _numbers(obj, ""):
        check_number(f"{prefix}{key}", value, allowed)


def plain(obj: Any) -> Any:
    """A parsed dataclass (or nested ones) as plain dicts and lists, for checkpoints and logs."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj
