"""custom: the user's own parallel text in ``data.path``.

Per split, either ``DIR/<split>.<src_lang>`` + ``DIR/<split>.<tgt_lang>`` (one sentence per
line, aligned) or ``DIR/<split>.tsv`` (``source<TAB>target``; columns in the order
src_lang, tgt_lang). ``train`` and ``valid`` are required; ``test`` is optional (the
prepared corpus then has no test split). Pairs are used as given: no deduplication, no
re-splitting; only empty or whitespace-only pairs are dropped (and counted).
"""

from __future__ import annotations

import logging
from pathlib import Path

from attnmt.data.config import DataConfig
from attnmt.data.recipes.common import SPLITS, Built, Pair
from attnmt.data.textio import read_parallel, read_tsv
from attnmt.errors import ConfigError, DataError

REQUIRED = ("train", "valid")


def directory(cfg: DataConfig) -> Path:
    """``data.path`` as an existing directory, or ConfigError/DataError saying what to set."""
    if not cfg.path:
        raise ConfigError(
            "data.path is not set: data=custom needs data.path=DIR with "
            "DIR/{train,valid,test}.{src_lang,tgt_lang} or DIR/{train,valid,test}.tsv"
        )
    path = Path(cfg.path).expanduser()
    if not path.is_dir():
        raise DataError(f"{path}: directory not found (data.path)")
    return path


def split_files(cfg: DataConfig, split: str) -> list[Path]:
    """The files one split is read from: [src, tgt], [tsv], or [] when absent."""
    root = directory(cfg)
    src, tgt = root / f"{split}.{cfg.src_lang}", root / f"{split}.{cfg.tgt_lang}"
    tsv = root / f"{split}.tsv"
    if src.exists() or tgt.exists():
        return [src, tgt]  # a missing partner is reported by read_parallel
    return [tsv] if tsv.exists() else []


def fingerprint(cfg: DataConfig) -> dict[str, object]:
    """Path, size and mtime of every input file: a changed file means a new cache."""
    files = [f for split in SPLITS for f in split_files(cfg, split)]
    return {
        str(f.resolve()): [f.stat().st_size, f.stat().st_mtime_ns] if f.exists() else None
        for f in files
    }


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """Read the user's splits; train and valid must exist."""
    splits: dict[str, list[Pair]] = {}
    for split in SPLITS:
        files = split_files(cfg, split)
        if not files:
            if split in REQUIRED:
                root = directory(cfg)
                raise DataError(
                    f"{root / f'{split}.{cfg.src_lang}'}: file not found (nor "
                    f"{root / f'{split}.{cfg.tgt_lang}'} or {root / f'{split}.tsv'}); "
                    f"data=custom needs train and valid"
                )
            continue
        splits[split] = read_tsv(files[0]) if len(files) == 1 else read_parallel(*files)
    return Built(splits)


def preflight(cfg: DataConfig, needed: tuple[str, ...]) -> None:
    """Before any data work: each needed split's files exist and hold a non-blank line."""
    root = directory(cfg)
    for split in needed:
        files = split_files(cfg, split)
        hint = (
            "; add it, or set trainer.test=false to train without the final test decoding"
            if split == "test"
            else f"; data=custom needs {' and '.join(REQUIRED)}"
        )
        if not files:
            raise DataError(
                f"{root / f'{split}.{cfg.src_lang}'}: file not found (nor "
                f"{root / f'{split}.{cfg.tgt_lang}'} or {root / f'{split}.tsv'}){hint}"
            )
        for path in files:
            if not path.is_file():
                raise DataError(f"{path}: file not found{hint}")
            if not _has_text(path):
                raise DataError(f"{path}: the {split} split is empty (no non-blank line){hint}")


def _has_text(path: Path) -> bool:
    """Does the file hold a line with a non-whitespace character? (reads up to that line)"""
    with path.open("rb") as f:
        return any(line.strip() for line in f)
