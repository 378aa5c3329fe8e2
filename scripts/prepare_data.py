"""Prepare a corpus (download, clean, split, cache) and print its pairs per split.

    python scripts/prepare_data.py                          # data=ding_de_en (the default)
    python scripts/prepare_data.py data=bible_en_fr data.src_lang=fr data.tgt_lang=en
    python scripts/prepare_data.py data=custom data.path=DIR data.src_lang=xx data.tgt_lang=yy

Arguments are Hydra overrides of the ``data`` group of configs/train.yaml.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from attnmt.data.corpora import prepare_corpus
from attnmt.errors import AttnmtError, ConfigError, DataError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def default_data_choice(configs: Path = CONFIGS) -> str:
    """The ``data`` entry of configs/train.yaml's defaults list."""
    defaults = OmegaConf.load(configs / "train.yaml").get("defaults", [])
    for item in defaults:
        if isinstance(item, DictConfig) and "data" in item:
            return str(item["data"])
    return "ding_de_en"


def data_config(overrides: list[str], configs: Path = CONFIGS) -> DictConfig:
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


def main(argv: list[str] | None = None) -> int:
    """Prepare the corpus; print ``split pairs`` lines. Returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        corpus = prepare_corpus(data_config(argv))
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{corpus.name} {corpus.src_lang}->{corpus.tgt_lang} in {corpus.directory}")
    for split in corpus.splits:
        print(f"  {split:<6} {corpus.counts[split]:>8} pairs")
    print(f"  {'total':<6} {sum(corpus.counts.values()):>8} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
