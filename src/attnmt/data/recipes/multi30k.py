"""multi30k: the Multi30k task-1 de-en benchmark (WMT16 multimodal), from public URLs.

``data.archives`` maps each split to an archive (url, sha256, stem); each archive holds
``<stem>.de`` and ``<stem>.en`` somewhere inside. Archives are downloaded to
``data/raw/multi30k/``, verified, extracted, and used with their own splits.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import urlparse

from attnmt.data import download
from attnmt.data.config import DataConfig
from attnmt.data.recipes.common import Built, Pair
from attnmt.data.textio import read_parallel
from attnmt.errors import ConfigError, DataError

LANGS = ("de", "en")


def _find(root: Path, name: str) -> Path:
    hits = sorted(root.rglob(name))
    if not hits:
        raise DataError(f"{root}: the archive has no file named {name}; check data.archives")
    return hits[0]


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """Download, verify and extract each split's archive; read its aligned files."""
    if not cfg.archives or "train" not in cfg.archives:
        raise ConfigError("data.archives has no train archive; use data=multi30k's defaults")
    splits: dict[str, list[Pair]] = {}
    for split, arc in cfg.archives.items():
        name = Path(urlparse(arc.url).path).name
        if not arc.url or not name or not arc.stem:
            raise ConfigError(f"data.archives.{split}: url and stem are required")
        archive = download.fetch(arc.url, raw / "multi30k" / name, arc.sha256, log)
        out = download.extract(archive, raw / "multi30k" / f"{split}-{name}.d")
        de, en = (_find(out, f"{arc.stem}.{lang}") for lang in LANGS)
        splits[split] = read_parallel(de, en)
    return Built(splits)
