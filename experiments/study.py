"""A study: configs/study/NAME.yaml, the train.py runs it makes (experiments/README.md).

Its ``study:`` header (:class:`Header`) states the runs and their hours on 2 cores (checked),
``overrides`` go to every run, and ``hydra.sweeper.params`` is the grid in Hydra's sweep
syntax (``seed: 1,2``, ``range(1,3)``, ``choice(...)``). One :class:`Run` per combination,
named by its values: ``model-transformer_seed-1`` (keys sorted; each key's last part, the
whole key where two share it), so values are letters, digits and ``_ . + -``. A bad file
fails with one ConfigError naming the file and the key.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import HydraException
from omegaconf import OmegaConf

from attnmt.errors import ConfigError
from attnmt.schema import check_choice, parse, within

NAME_VALUE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*")  # Hydra and the shell take it as is
SESSION_HOURS = 2.5  # a lent machine is held ~3 h; only the repository (results/) outlives it
PARAMS = "hydra.sweeper.params"


@dataclass
class Header:
    """A study's ``study:`` header; minutes and hours are for one run with 2 cores."""

    runs: int = 0  # the grid's size
    minutes_per_run: float = field(default=0.0, metadata=within(0, 10_000, lo_open=True))
    hours: float = field(default=0.0, metadata=within(0, 10_000))  # runs × minutes_per_run / 60
    runs_on: str = "cpu"  # cpu: at most SESSION_HOURS in all; gpu: a lent 16-core GPU host
    what: str = ""  # what the study measures
    capped: str = ""  # what is capped so that it fits


@dataclass
class Sweeper:
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class HydraPart:
    sweeper: Sweeper = field(default_factory=Sweeper)


@dataclass
class StudyFile:
    study: Header = field(default_factory=Header)
    overrides: list[str] = field(default_factory=list)
    hydra: HydraPart = field(default_factory=HydraPart)

    def check(self, prefix: str) -> None:
        h = self.study
        check_choice("study.runs_on", h.runs_on, ("cpu", "gpu"))
        if h.runs < 1:
            raise ConfigError("study.runs: missing or not positive; give the grid's size")
        if abs(h.hours - h.runs * h.minutes_per_run / 60) > 0.1:
            raise ConfigError(
                f"study.hours: {h.hours}, but runs × minutes_per_run / 60 = "
                f"{h.runs * h.minutes_per_run / 60:.2f}; write that"
            )
        if h.runs_on == "cpu" and h.hours > SESSION_HOURS:
            raise ConfigError(
                f"study.hours: {h.hours} on 2 cores is more than a session's {SESSION_HOURS}: "
                "shrink the study (say what is capped in study.capped) or set study.runs_on: gpu"
            )


@dataclass(frozen=True)
class Run:
    name: str  # its folder's name, from its grid values
    grid: tuple[str, ...]  # its grid overrides


@dataclass(frozen=True)
class Study:
    name: str
    path: Path
    header: Header
    overrides: tuple[str, ...]
    runs: tuple[Run, ...]


def _parsed(items: Sequence[str], where: str) -> list[Override]:
    """Each override parsed by Hydra; ConfigError naming the first that is not one."""
    parser, parsed = OverridesParser.create(), []
    for item in items:
        try:
            parsed += parser.parse_overrides([item])
        except HydraException as err:
            raise ConfigError(
                f"{where}: {item!r} is not a Hydra override ({str(err).splitlines()[0]}; "
                "https://hydra.cc/docs/advanced/override_grammar/basic/)"
            ) from None
    return parsed


def _checked(base: list[Override], grid: list[Override]) -> None:
    """No key twice, none the driver sets, no sweep outside the grid."""
    seen: set[str] = set()
    for where, o in [("overrides", o) for o in base] + [(PARAMS, o) for o in grid]:
        key = o.key_or_group
        if key == "resume" or key.startswith("hydra."):
            raise ConfigError(f"{where}: {key}: the driver sets a run's folder; remove it")
        if key in seen:
            raise ConfigError(f"{where}: {key} is given twice; keep one")
        seen.add(key)
        if where == "overrides" and o.is_sweep_override():
            raise ConfigError(f"overrides: {o.get_key_element()}: a sweep; put it in {PARAMS}")


def _values(o: Override) -> list[str]:
    """A grid key's values, checked: listed, each once, each able to name a folder."""
    where = f"{PARAMS}.{o.get_key_element()}"
    if o.is_sweep_override() and not o.is_discrete_sweep():
        raise ConfigError(f"{where}: only lists of values, range() and choice() sweep here")
    values = (
        list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()]
    )
    if len(set(values)) < len(values) or not all(NAME_VALUE.fullmatch(v) for v in values):
        raise ConfigError(
            f"{where}: {', '.join(values)}: a value twice, or one that cannot name a "
            "folder (letters, digits and _ . + - only)"
        )
    return values


def _expand(spec: StudyFile) -> list[Run]:
    """Every combination of the grid's values (keys sorted)."""
    base = _parsed(spec.overrides, "overrides")
    params = spec.hydra.sweeper.params
    for key, value in params.items():
        if not isinstance(value, (str, int, float, bool)):
            raise ConfigError(f"{PARAMS}.{key}: expected values like 1,2; got {value!r}")
    grid = _parsed([f"{k}={v}" for k, v in params.items()], PARAMS)
    _checked(base, grid)
    leaves = [o.key_or_group.rpartition(".")[2] for o in grid]
    axes = []
    for o in sorted(grid, key=lambda o: o.key_or_group):
        leaf = o.key_or_group.rpartition(".")[2]
        label = leaf if leaves.count(leaf) == 1 else o.key_or_group
        axes.append([(o.get_key_element(), label, v) for v in _values(o)])
    return [
        Run(
            "_".join(f"{label}-{v}" for _, label, v in combo) or "run",
            tuple(f"{key}={v}" for key, _, v in combo),
        )
        for combo in itertools.product(*axes)
    ]


def load_study(path: str | Path) -> Study:
    """The study at ``path``; ConfigError naming the file and the key of the first problem."""
    path = Path(path)
    try:
        if not path.is_file():
            raise ConfigError("no such file (studies are configs/study/NAME.yaml)")
        try:
            spec = parse(OmegaConf.load(path), StudyFile)
        except yaml.YAMLError as err:
            raise ConfigError(f"not YAML ({str(err).splitlines()[0]}...)") from None
        runs = _expand(spec)
        if spec.study.runs != len(runs):
            raise ConfigError(f"study.runs: {spec.study.runs}, but the grid makes {len(runs)}")
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}") from None
    return Study(path.stem, path, spec.study, tuple(spec.overrides), tuple(runs))
