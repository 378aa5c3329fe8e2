"""hf: any Hugging Face translation dataset, from the hub or from local files.

Needs the optional extra (``pip install 'attnmt[hf]'``, i.e. the ``datasets`` package); it
is imported only when data=hf is used, and its absence is a ConfigError saying so.

``data.hf.name`` is one of

* a **hub id** (``wmt16`` with ``data.hf.config=de-en``, ``Helsinki-NLP/opus_books`` ...),
  loaded with ``datasets.load_dataset(name, config, revision=..., streaming=...)`` into
  ``<data.root>/raw/hf/``. *Untested here*: the test machines have no network. The cache key
  holds the id, config and revision but not the hub's content, so pin ``data.hf.revision``
  (a tag or commit) to be sure a cached copy is what the hub serves;
* a directory written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``
  (``datasets.load_from_disk``; a single saved Dataset is the train split);
* any other **directory**: ``datasets.load_dataset(DIR)``, which picks the reader from the
  files (parquet, json/jsonl, csv, arrow, ...) and the splits from their names (``train*``;
  ``validation*``, ``valid*``, ``dev*`` and ``val*`` become ``validation``; ``test*``);
* a **file or glob** of ``.parquet``, ``.json``/``.jsonl``, ``.csv``, ``.tsv`` or ``.arrow``
  files, all of one kind: together they are the train split.

Layouts (``data.hf.layout``):

* ``translation``: a column (``data.hf.translation_column``, default ``translation``) holding
  ``{language code: text}`` per row, as the hub's translation datasets do; data.src_lang and
  data.tgt_lang pick two of its languages, so both directions need no other setting;
* ``columns``: two text columns, ``data.hf.src_column`` (the data.src_lang side) and
  ``data.hf.tgt_column``, which default to the language codes; set both explicitly and the
  reverse direction needs them swapped too;
* ``auto`` (default): ``columns`` when data.hf.src_column or tgt_column is set, else
  ``translation`` when that column exists, else ``columns`` named by the language codes.

Splits: ``data.hf.train_split`` (``train``) must exist. ``data.hf.valid_split``
(``validation``) and ``data.hf.test_split`` (``test``) are used when the dataset has them;
when it has not (only for these default names: another name that is missing is an error,
as it is most likely a typo), or when set to null, that split is cut from the train split by
a hash of one side (English if present, else the alphabetically first language; the same
assignment for both directions) with the fractions data.split.valid / data.split.test (0: no
such split). ``data.hf.max_rows`` keeps the first N rows of each split (before the hash
split); with ``data.hf.streaming=true`` only those rows are read (hub ids and data files; a
save_to_disk directory is memory-mapped anyway).

Rows are used as given: no deduplication; a missing (null) side counts as empty, and
empty or whitespace-only pairs are dropped and whitespace is normalised by
:func:`attnmt.data.corpora.prepare_corpus`, as for every recipe.

Every error names the key to change and lists what the dataset has: its splits, its
columns, or the languages of its translation column.
"""

from __future__ import annotations

import glob
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from attnmt.data.config import DataConfig, HFConfig, SplitConfig
from attnmt.data.recipes.common import Built, Pair, split_by_hash
from attnmt.errors import AttnmtError, ConfigError, DataError

EXTRA = "data=hf needs the hf extra: pip install 'attnmt[hf]'"
# file suffix -> (datasets builder, its extra arguments)
READERS: dict[str, tuple[str, dict[str, Any]]] = {
    ".parquet": ("parquet", {}),
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"sep": "\t", "quoting": 3}),  # csv.QUOTE_NONE: quotes are text
    ".arrow": ("arrow", {}),
}
DEFAULT_SPLIT_NAMES = {"valid": HFConfig.valid_split, "test": HFConfig.test_split}
BATCH_ROWS = 10_000


def import_datasets() -> ModuleType:
    """The ``datasets`` module, or ConfigError naming the extra to install."""
    try:
        import datasets
    except ImportError as err:
        raise ConfigError(f"{EXTRA} ({err})") from None
    return datasets


@dataclass(frozen=True)
class Source:
    """Where data.hf.name points. kind: hub | disk (save_to_disk) | dir | files."""

    kind: str
    name: str  # the hub id, or the local path (absolute)
    files: tuple[Path, ...] = ()  # local: every input file (for the cache fingerprint)


def describe(hf: HFConfig) -> str:
    """``data.hf.name='wmt16' (config 'de-en')`` for messages."""
    return f"data.hf.name={hf.name!r}" + (f" (config {hf.config!r})" if hf.config else "")


def source(cfg: DataConfig) -> Source:
    """Resolve data.hf.name; ConfigError/DataError when it is unset or a missing local path."""
    hf = cfg.hf
    if not hf.name:
        raise ConfigError(
            "data.hf.name is not set: data=hf needs data.hf.name=HUB_ID (e.g. wmt16 with "
            "data.hf.config=de-en) or a local save_to_disk directory, data directory, file or glob"
        )
    name = hf.name
    path = Path(name).expanduser()
    if any(c in name for c in "*?["):
        files = tuple(sorted(Path(p).resolve() for p in glob.glob(str(path), recursive=True)))
        files = tuple(f for f in files if f.is_file())
        if not files:
            raise DataError(f"data.hf.name={name!r}: no file matches this pattern")
        src = Source("files", name, files)
    elif path.is_dir():
        path = path.resolve()
        saved = (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()
        files = tuple(
            sorted(
                p
                for p in path.rglob("*")
                if p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        )
        src = Source("disk" if saved else "dir", str(path), files)
    elif path.is_file():
        src = Source("files", str(path.resolve()), (path.resolve(),))
    elif name.startswith(("/", "./", "../", "~")) or path.suffix.lower() in READERS:
        raise DataError(f"data.hf.name={name!r}: no such file or directory")
    else:
        src = Source("hub", name)
    if src.kind != "hub" and hf.revision:
        raise ConfigError(
            f"data.hf.revision={hf.revision!r}: only hub ids have revisions, but "
            f"data.hf.name={name!r} is a local path; drop data.hf.revision"
        )
    if src.kind in ("disk", "files") and hf.config:
        raise ConfigError(
            f"data.hf.config={hf.config!r}: a saved dataset or data files have no configs "
            f"(data.hf.name={name!r}); drop data.hf.config"
        )
    if src.kind == "files":
        reader(src)  # one kind of file, with a known suffix
    return src


def reader(src: Source) -> tuple[str, dict[str, Any]]:
    """The datasets builder (and its arguments) for a file source's suffix."""
    suffixes = sorted({f.suffix.lower() for f in src.files})
    known = [s for s in suffixes if s in READERS]
    if len(suffixes) != 1 or not known:
        raise DataError(
            f"data.hf.name={src.name!r}: expected files of one kind ending in "
            f"{', '.join(READERS)}; found {', '.join(s or '(no suffix)' for s in suffixes)}"
        )
    return READERS[known[0]]


def fingerprint(cfg: DataConfig) -> dict[str, list[int]] | None:
    """Local inputs: path, size and mtime of every file (a changed file means a new cache).
    Hub ids: None (the id, config and revision in data.hf are the key)."""
    src = source(cfg)
    if src.kind == "hub":
        return None
    return {str(f): [f.stat().st_size, f.stat().st_mtime_ns] for f in src.files}


def preflight(cfg: DataConfig, needed: tuple[str, ...]) -> None:
    """Before any data work: the extra is installed and data.hf.name resolves.

    Which splits the dataset has is known only after loading it; :func:`build` reports a
    missing one, and ``require_splits`` an empty one.
    """
    import_datasets()
    source(cfg)


def load(cfg: DataConfig, raw: Path) -> Mapping[str, Any]:
    """The dataset's splits (split name -> Dataset or IterableDataset)."""
    datasets = import_datasets()
    hf = cfg.hf
    src = source(cfg)
    cache = str(raw / "hf")
    try:
        if src.kind == "disk":
            loaded = datasets.load_from_disk(src.name)
        elif src.kind == "files":
            builder, kwargs = reader(src)
            loaded = datasets.load_dataset(
                builder,
                data_files={"train": [str(f) for f in src.files]},
                cache_dir=cache,
                streaming=hf.streaming,
                **kwargs,
            )
        else:  # a data directory, or a hub id (untested here: no network)
            loaded = datasets.load_dataset(
                src.name,
                hf.config,
                revision=hf.revision,
                cache_dir=cache,
                streaming=hf.streaming,
            )
    except AttnmtError:
        raise
    except Exception as err:
        text = " ".join(str(err).split())
        raise DataError(
            f"{describe(hf)}: cannot load it ({type(err).__name__}: {text[:800]}); check "
            f"data.hf.name / data.hf.config / data.hf.revision"
        ) from None
    if not isinstance(loaded, Mapping):  # a single saved Dataset: the train split
        loaded = {hf.train_split: loaded}
    return loaded


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _lang_dict(value: Any) -> Mapping[str, Any]:
    """A translation cell as {lang: text}; TranslationVariableLanguages cells hold lists."""
    if not isinstance(value, Mapping):
        return {}
    if isinstance(value.get("language"), list) and isinstance(value.get("translation"), list):
        return dict(zip(value["language"], value["translation"]))
    return value


def _columns(ds: Any) -> dict[str, Any]:
    """column -> feature; a streamed dataset without features: column -> first row's value."""
    features = getattr(ds, "features", None)
    if features is not None:
        return dict(features)
    first = next(iter(ds), None)
    return dict(first) if isinstance(first, Mapping) else {}


def _languages(feature: Any) -> list[str] | None:
    """The languages of a translation column, or None when it holds no {lang: text}."""
    if type(feature).__name__ in ("Translation", "TranslationVariableLanguages"):
        return list(feature.languages or [])  # []: not declared, rows decide
    if isinstance(feature, Mapping):  # a struct of strings, or a streamed row's dict
        if "language" in feature and "translation" in feature:
            return None if not isinstance(feature["language"], list) else feature["language"]
        return list(feature)
    return None


def _layout(cfg: DataConfig, columns: Mapping[str, Any], where: str) -> str:
    hf = cfg.hf
    if hf.layout != "auto":
        return hf.layout
    if hf.src_column or hf.tgt_column:  # columns named explicitly
        return "columns"
    if hf.translation_column in columns:
        return "translation"
    src_col, tgt_col = hf.src_column or cfg.src_lang, hf.tgt_column or cfg.tgt_lang
    if src_col in columns and tgt_col in columns:
        return "columns"
    raise DataError(
        f"data.hf.layout=auto: {where} has neither a {hf.translation_column!r} column of "
        f"{{language: text}} (data.hf.translation_column) nor the columns {src_col!r} and "
        f"{tgt_col!r} (data.hf.src_column, data.hf.tgt_column); its columns: "
        f"{', '.join(columns) or '(none)'}"
    )


def _rows(ds: Any, columns: list[str], max_rows: int) -> Iterator[tuple[Any, ...]]:
    """The values of ``columns`` per row, for at most ``max_rows`` rows (0: all)."""
    datasets = import_datasets()
    if isinstance(ds, datasets.Dataset):
        ds = ds.with_format(None)
        if max_rows:
            ds = ds.select(range(min(max_rows, len(ds))))
        ds = ds.select_columns(columns)
        for batch in ds.iter(batch_size=BATCH_ROWS):
            yield from zip(*(batch[c] for c in columns))
    else:  # an IterableDataset (streaming=true)
        rows = iter(ds)
        if max_rows:
            rows = itertools.islice(rows, max_rows)
        for row in rows:
            yield tuple(row.get(c) for c in columns)


def read_split(cfg: DataConfig, ds: Any, split_name: str) -> list[Pair]:
    """(src_lang text, tgt_lang text) of every row of one split of the dataset."""
    hf = cfg.hf
    where = f"{describe(hf)} split {split_name!r}"
    columns = _columns(ds)
    layout = _layout(cfg, columns, where)
    to_pair: Callable[[tuple[Any, ...]], Pair]
    if layout == "translation":
        col = hf.translation_column
        if col not in columns:
            raise DataError(
                f"data.hf.translation_column={col!r}: {where} has no such column; its "
                f"columns: {', '.join(columns) or '(none)'}"
                + ("" if hf.layout == "auto" else " (or use data.hf.layout=columns)")
            )
        langs = _languages(columns[col])
        if langs is None:
            raise DataError(
                f"data.hf.translation_column={col!r}: this column of {where} does not hold "
                f"{{language: text}} ({columns[col]}); use data.hf.layout=columns with "
                f"data.hf.src_column and data.hf.tgt_column"
            )
        for key, lang in (("src_lang", cfg.src_lang), ("tgt_lang", cfg.tgt_lang)):
            if langs and lang not in langs:
                raise DataError(
                    f"data.{key}={lang!r}: the {col!r} column of {where} has no {lang!r} "
                    f"text; its languages: {', '.join(map(str, langs))}; set data.src_lang "
                    f"and data.tgt_lang to two of them"
                )
        wanted = [col]
        src_lang, tgt_lang = cfg.src_lang, cfg.tgt_lang

        def to_pair(values: tuple[Any, ...]) -> Pair:
            cell = _lang_dict(values[0])
            return _text(cell.get(src_lang)), _text(cell.get(tgt_lang))

    else:
        wanted = [hf.src_column or cfg.src_lang, hf.tgt_column or cfg.tgt_lang]
        for key, col, lang in zip(("src", "tgt"), wanted, ("src_lang", "tgt_lang")):
            if col not in columns:
                default = "" if getattr(hf, f"{key}_column") else f" (default: data.{lang})"
                raise DataError(
                    f"data.hf.{key}_column={col!r}{default}: {where} has no such column; "
                    f"its columns: {', '.join(columns) or '(none)'}"
                )

        def to_pair(values: tuple[Any, ...]) -> Pair:
            return _text(values[0]), _text(values[1])

    return [to_pair(values) for values in _rows(ds, wanted, hf.max_rows)]


def hash_side(cfg: DataConfig) -> int:
    """The side the hash split keys on: English if present, else the first code in sorted
    order; the same sentence for both directions, so both get the same split."""
    langs = (cfg.src_lang, cfg.tgt_lang)
    return langs.index("en" if "en" in langs else min(langs))


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """Load the dataset, read its train/valid/test splits, hash-split the missing ones."""
    hf = cfg.hf
    loaded = load(cfg, raw)
    have = ", ".join(map(str, loaded)) or "(none)"
    if hf.train_split not in loaded:
        raise DataError(
            f"data.hf.train_split={hf.train_split!r}: {describe(hf)} has no such split; "
            f"its splits: {have}"
        )
    splits: dict[str, list[Pair]] = {"train": read_split(cfg, loaded[hf.train_split], "train")}
    made: list[str] = []
    for split in ("valid", "test"):
        name = getattr(hf, f"{split}_split")
        if name is not None and name in loaded:
            splits[split] = read_split(cfg, loaded[name], name)
        elif name is None or name == DEFAULT_SPLIT_NAMES[split]:
            made.append(split)
        else:
            raise DataError(
                f"data.hf.{split}_split={name!r}: {describe(hf)} has no such split; its "
                f"splits: {have}; name one of them, or set data.hf.{split}_split=null to cut "
                f"it from the train split (data.split.{split})"
            )
    if made:
        fractions = SplitConfig(
            valid=cfg.split.valid if "valid" in made else 0.0,
            test=cfg.split.test if "test" in made else 0.0,
        )
        parts = split_by_hash(splits["train"], hash_side(cfg), fractions)
        splits["train"] = parts["train"]
        for split in made:
            fraction = getattr(fractions, split)
            if fraction > 0:
                splits[split] = parts[split]
                log.info(
                    "hf: %s split cut from the train split by hash (data.split.%s=%s): %d rows",
                    split,
                    split,
                    fraction,
                    len(parts[split]),
                )
            else:
                log.warning(
                    "hf: no %s split (the dataset has none and data.split.%s=0)", split, split
                )
    return Built(splits)
