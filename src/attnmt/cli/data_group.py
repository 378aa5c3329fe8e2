"""The ``data`` config group composed alone, from ``data=NAME`` and ``data.KEY=VALUE``
overrides, for the scripts that prepare or align a corpus without a whole training config
(scripts/prepare_data.py, scripts/silver_alignments.py); ``configs`` is the repository's
configs/ folder."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from attnmt.errors import ConfigError, DataError


def default_data_choice(configs: Path) -> str:
    """The ``data`` entry of configs/train.yaml's defaults list."""
    train = OmegaConf.load(configs / "train.yaml")
    defaults = train.get("defaults", []) if isinstance(train, DictConfig) else []
    for item in defaults:
        if isinstance(item, DictConfig) and "data" in item:
            return str(item["data"])
    return "ding_de_en"


def data_config(overrides: list[str], configs: Path) -> DictConfig:
    """Compose the ``data`` group with ``data=NAME`` and ``data.key=value`` overrides."""
    choice = default_data_choice(configs)
    rest: list[str] = []
    for item in overrides:
        if item.startswith("data="):
            choice = item.split("=", 1)[1]
        elif item.startswith(("data.", "+data.", "~data.")):
            rest.append(item)
        else:
            raise ConfigError(f"{item!r}: only data=NAME and data.KEY=VALUE overrides apply here")
    choices = sorted(p.stem for p in (configs / "data").glob("*.yaml"))
    if choice not in choices:
        raise DataError(f"unknown data name {choice!r}; choose one of: {', '.join(choices)}")
    try:
        with initialize_config_dir(str(configs / "data"), version_base=None):
            cfg = compose(config_name=choice, overrides=[o.replace("data.", "", 1) for o in rest])
    except HydraException as err:
        first = str(err).splitlines()[0]
        raise ConfigError(
            f"bad data override in {rest}: {first} (the keys of data are in "
            f"configs/data/{choice}.yaml and attnmt.data.config.DataConfig)"
        ) from None
    return cfg
