"""Every number setting states a finite range, checked in one place (attnmt.schema), so that a
huge value fails up front naming the key, the value and the range, instead of overflowing
where it multiplies a length or a score (``decode.max_len_a=1e308``, ``alpha=1e308``)."""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import cast

import pytest

from attnmt.cli.common import parse_settings
from attnmt.cli.evaluate import EvalSettings
from attnmt.cli.translate import TranslateSettings
from attnmt.decode.config import DecodeConfig
from attnmt.errors import ConfigError
from attnmt.schema import RANGE, Range, check_numbers, parse, range_of, within


def test_a_range_holds_its_numbers_and_says_itself() -> None:
    closed, half = Range(0, 10), Range(0, 1, hi_open=True)
    assert [closed.holds(x) for x in (0, 10, 10.000001, -1e-9, math.nan, math.inf)] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert [half.holds(x) for x in (0.0, 0.999, 1.0)] == [True, True, False]
    assert closed.describe("k") == "0 <= k <= 10" and half.describe("k") == "0 <= k < 1"
    assert Range(0, 1e-3, lo_open=True).describe("lr") == "0 < lr <= 0.001"


@dataclass
class _Inner:
    weights: list[float] = field(default_factory=lambda: [0.5], metadata=within(0, 1))


@dataclass
class _Outer:
    scale: float = field(default=1.0, metadata=within(0, 2))
    count: int = field(default=3, metadata=within(1, 5))
    free: float = 0.0  # no stated range: any finite number
    flag: bool = True
    inner: _Inner = field(default_factory=_Inner)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"scale": 1e308}, "x.scale: 1e+308 is out of range; allowed: 0 <= x.scale <= 2"),
        ({"count": 6}, "x.count: 6 is out of range; allowed: 1 <= x.count <= 5"),
        ({"free": "inf"}, "x.free: inf is not a finite number; set it to a finite value"),
        (
            {"inner": {"weights": [0.5, 1.5]}},
            "x.inner.weights[1]: 1.5 is out of range; allowed: 0 <= x.inner.weights[1] <= 1",
        ),
        ({"scale": "nan"}, "x.scale: nan is not a finite number; allowed: 0 <= x.scale <= 2"),
    ],
)
def test_parse_refuses_a_number_outside_its_fields_range(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse(values, _Outer, "x.")
    assert str(err.value) == message


def test_in_range_numbers_and_bools_pass() -> None:
    obj = parse({"scale": 2, "count": 1, "free": -1e300, "flag": False}, _Outer, "x.")
    assert (obj.scale, obj.count, obj.free, obj.flag) == (2.0, 1, -1e300, False)
    check_numbers(obj, "x.")  # and again, on the parsed object: nothing to refuse


@pytest.mark.parametrize("schema", [EvalSettings, TranslateSettings])
@pytest.mark.parametrize(
    ("key", "allowed"),
    [("alpha", "0 <= alpha <= 10"), ("max_len_a", "0 <= max_len_a <= 10")],
)
def test_evaluate_and_translate_refuse_a_huge_decode_number_before_loading(
    schema: type, key: str, allowed: str
) -> None:
    """``evaluate.py ckpt=RUN beam=4 alpha=1e308`` crashed in the length penalty
    (OverflowError); the settings are refused before the checkpoint is even looked for."""
    with pytest.raises(ConfigError) as err:
        parse_settings({"ckpt": "no/such/run", "beam": 4, key: 1e308}, schema)
    assert str(err.value) == f"{key}: 1e+308 is out of range; allowed: {allowed}"


def test_serve_and_the_command_line_share_alphas_range() -> None:
    """serve.py capped a request's alpha at 10 by itself; now both read decode.alpha's."""
    assert range_of(DecodeConfig, "alpha") == Range(0, 10)
    pytest.importorskip("fastapi", reason="serve.py needs attnmt[serve]")
    from attnmt.serve.api import ApiError, TranslateRequest, options_of
    from attnmt.serve.backend import ServedModel
    from attnmt.serve.settings import ServeSettings

    class _Model:  # what options_of reads of a served model
        decode = DecodeConfig()
        has_attention = True

    served = cast(list[ServedModel], [_Model()])
    settings = ServeSettings(ckpt="x")
    for alpha in (10.5, 1e308, -0.1):
        request = TranslateRequest(text="a", beam=2, alpha=alpha)
        with pytest.raises(ApiError) as err:
            options_of(request, settings, served)
        assert (err.value.status, err.value.field) == (422, "alpha")
        assert err.value.message == f"alpha: {alpha} is out of range; allowed: 0 <= alpha <= 10"
    _, options = options_of(TranslateRequest(text="a", beam=2, alpha=10), settings, served)
    assert options.alpha == 10.0


def _schemas() -> list[type]:
    """Every settings schema a user's values are parsed onto, with their sub-dataclasses."""
    from attnmt.data.config import DataConfig
    from attnmt.models.registry import MODELS
    from attnmt.serve.settings import ServeSettings
    from attnmt.train.config import TrainerConfig

    roots = [DataConfig, TrainerConfig, DecodeConfig, EvalSettings, TranslateSettings]
    roots += [ServeSettings, *(m.Config for m in MODELS.values())]
    found: list[type] = []
    while roots:
        schema = roots.pop()
        if schema in found:
            continue
        found.append(schema)
        for hint in typing.get_type_hints(schema).values():
            roots += [a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)]
    return found


def _has_float(hint: object) -> bool:
    return hint is float or any(_has_float(a) for a in typing.get_args(hint))


def test_every_float_setting_of_every_schema_states_its_range() -> None:
    """No float setting without a stated finite range: a new one fails here until it has
    ``field(..., metadata=within(lo, hi))``."""
    unbounded = [
        f"{schema.__name__}.{f.name}"
        for schema in _schemas()
        for f in dataclasses.fields(schema)
        if _has_float(typing.get_type_hints(schema)[f.name]) and RANGE not in f.metadata
    ]
    assert unbounded == []
    assert {"DecodeConfig", "TrainerConfig", "AttentionConfig", "SamplingConfig"} <= {
        s.__name__ for s in _schemas()
    }
