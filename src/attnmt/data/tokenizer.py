"""SentencePiece tokenization: one joint model or separate source/target models.

Every model attnmt trains reserves the same special ids (``attnmt.PAD_ID`` ...):
``<pad>=0, <unk>=1, <s>=2 (BOS), </s>=3 (EOS)``. ``encode_*`` returns piece ids
without BOS/EOS; :func:`attnmt.data.batching.make_batch` adds them.

Normalization: ``normalization_rule_name="identity"`` by default, so that
``decode(encode(s)) == s`` for every string whose characters are in the vocabulary
(runs of spaces collapse to one and ends are stripped, as SentencePiece always does).
Hypotheses are then character-faithful to the training text, which is what sacrebleu
compares against. A config may set ``normalization`` to ``"nmt_nfkc"`` to fold
compatibility characters instead (then the round trip holds up to NFKC).

Training is deterministic: a fixed seed and a fixed thread count (SentencePiece's
result depends on the number of threads, not on the machine).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from attnmt import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attnmt.atomic import atomic_dir, write_bytes
from attnmt.data.vocab_size import AUTO, RULE, auto_vocab_size, count_word_types
from attnmt.errors import CheckpointError, ConfigError, DataError

LogFn = Callable[[str], None]

MODEL_TYPES = ("unigram", "bpe", "char", "word")
NORMALIZATIONS = ("identity", "nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf")
JOINT_FILE, SRC_FILE, TGT_FILE = "spm.model", "src.model", "tgt.model"
TRAIN_THREADS = 4  # fixed: SentencePiece output depends on the thread count
TRAIN_SEED = 1234
CACHE_VERSION = 1
_TOO_HIGH = re.compile(r"Vocabulary size too high \((\d+)\)\. Please set it to a value <= (\d+)")
_TOO_LOW = re.compile(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)")


def _load_processor(blob: bytes, name: str) -> spm.SentencePieceProcessor:
    """Parse a serialized model and check attnmt's special ids; DataError if unusable."""
    if not isinstance(blob, bytes | bytearray) or not blob:
        raise DataError(f"SentencePiece model {name} is empty or not bytes")
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(bytes(blob))
    except Exception as err:  # sentencepiece raises RuntimeError/OSError for bad protos
        raise DataError(f"cannot read SentencePiece model {name}: {err}") from None
    got = (sp.pad_id(), sp.unk_id(), sp.bos_id(), sp.eos_id())
    if got != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        raise DataError(
            f"SentencePiece model {name} has special ids pad/unk/bos/eos={got}, "
            f"attnmt needs {(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; retrain it with attnmt"
        )
    return sp


def _rows(ids: Any) -> list[list[int]]:
    """Lists of ints from lists, tuples or a [B, T] tensor/array."""
    if hasattr(ids, "tolist"):
        ids = ids.tolist()
    return [[int(i) for i in (row.tolist() if hasattr(row, "tolist") else row)] for row in ids]


class Tokenizer:
    """Source and target SentencePiece processors (one shared model when ``joint``)."""

    def __init__(self, src_model: bytes, tgt_model: bytes | None = None) -> None:
        """``tgt_model=None`` means one joint model for both sides."""
        self.joint = tgt_model is None
        self._src_blob = bytes(src_model)
        self._tgt_blob = self._src_blob if tgt_model is None else bytes(tgt_model)
        self._src = _load_processor(self._src_blob, JOINT_FILE if self.joint else SRC_FILE)
        self._tgt = self._src if self.joint else _load_processor(self._tgt_blob, TGT_FILE)
        self._longest: dict[str, int] = {}  # side -> longest_piece(side)

    @property
    def src_vocab_size(self) -> int:
        return self._src.get_piece_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._tgt.get_piece_size()

    def longest_piece(self, side: str) -> int:
        """Characters of the longest piece in the ``"src"`` or ``"tgt"`` vocabulary (the
        ``▁`` word mark counts as one; at least 1), computed once per side. A text of
        ``n · longest_piece`` characters or more holds at least ``n`` pieces, except where
        SentencePiece merges a run of unknown characters into one ``<unk>``."""
        if side not in self._longest:
            sp = self.processor(side)
            sizes = (len(sp.id_to_piece(i)) for i in range(sp.get_piece_size()))
            self._longest[side] = max(1, *sizes)
        return self._longest[side]

    def vocab_info(self) -> dict[str, Any]:
        """``{"src_size", "tgt_size", "joint"}`` as stored in checkpoints."""
        return {
            "src_size": self.src_vocab_size,
            "tgt_size": self.tgt_vocab_size,
            "joint": self.joint,
        }

    # ---- encoding / decoding -------------------------------------------------------------

    def encode_src(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """Piece ids of each source sentence, without BOS/EOS (``num_threads=-1``:
        SentencePiece's default, every core it sees)."""
        return self._encode(self._src, texts, num_threads)

    def encode_tgt(self, texts: Sequence[str], num_threads: int = -1) -> list[list[int]]:
        """Piece ids of each target sentence, without BOS/EOS."""
        return self._encode(self._tgt, texts, num_threads)

    @staticmethod
    def _encode(
        sp: spm.SentencePieceProcessor, texts: Sequence[str], num_threads: int
    ) -> list[list[int]]:
        return sp.encode(list(texts), out_type=int, num_threads=num_threads) if len(texts) else []

    def processor(self, side: str) -> spm.SentencePieceProcessor:
        """The ``"src"`` or ``"tgt"`` side's SentencePiece processor (the same object for
        both sides of a joint model); for encoders that need its own options (sampling)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side={side!r}: 'src' or 'tgt'")
        return self._src if side == "src" else self._tgt

    def model_digest(self, side: str) -> str:
        """sha256 (hex) of the ``"src"`` or ``"tgt"`` side's serialized model: the identity
        that caches of encoded ids are keyed by (a joint model gives both sides one)."""
        if side not in ("src", "tgt"):
            raise ValueError(f"side={side!r}: 'src' or 'tgt'")
        return hashlib.sha256(self._src_blob if side == "src" else self._tgt_blob).hexdigest()

    @staticmethod
    def _decode(sp: spm.SentencePieceProcessor, ids: Any) -> list[str]:
        out = []
        for row in _rows(ids):
            if EOS_ID in row:
                row = row[: row.index(EOS_ID)]
            out.append(sp.decode([i for i in row if i not in (PAD_ID, BOS_ID)]))
        return out

    def decode_tgt(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Detokenized text per row: stops at the first EOS, drops PAD and BOS."""
        return self._decode(self._tgt, ids)

    def decode_src(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Like :meth:`decode_tgt`, with the source model."""
        return self._decode(self._src, ids)

    def src_pieces(self, ids: Sequence[int]) -> list[str]:
        """Piece strings for plot axes (``▁`` marks a word start; specials as ``<s>``, ``</s>``)."""
        return [self._src.id_to_piece(i) for i in _rows([ids])[0]]

    def tgt_pieces(self, ids: Sequence[int]) -> list[str]:
        """Like :meth:`src_pieces`, with the target model."""
        return [self._tgt.id_to_piece(i) for i in _rows([ids])[0]]

    # ---- serialization -------------------------------------------------------------------

    def to_files_dict(self) -> dict[str, bytes]:
        """The serialized model(s): ``{"spm.model": ...}`` or ``{"src.model", "tgt.model"}``."""
        if self.joint:
            return {JOINT_FILE: self._src_blob}
        return {SRC_FILE: self._src_blob, TGT_FILE: self._tgt_blob}

    @classmethod
    def from_files_dict(cls, files: Mapping[str, bytes]) -> Tokenizer:
        """Inverse of :meth:`to_files_dict`; CheckpointError when files are missing or bad."""
        names = set(files)
        try:
            if names == {JOINT_FILE}:
                return cls(files[JOINT_FILE])
            if names == {SRC_FILE, TGT_FILE}:
                return cls(files[SRC_FILE], files[TGT_FILE])
        except DataError as err:
            raise CheckpointError(f"checkpoint tokenizer: {err}") from None
        raise CheckpointError(
            f"checkpoint tokenizer has files {sorted(names)}; expected "
            f"['{JOINT_FILE}'] or ['{SRC_FILE}', '{TGT_FILE}']"
        )

    def save(self, directory: Path) -> None:
        """Write the model file(s) into ``directory`` (created if needed), atomically per file."""
        for name, blob in self.to_files_dict().items():
            write_bytes(Path(directory) / name, blob)

    @classmethod
    def load(cls, directory: Path) -> Tokenizer:
        """Read what :meth:`save` wrote; DataError naming the directory if nothing is there."""
        directory = Path(directory)
        if (directory / JOINT_FILE).is_file():
            names = [JOINT_FILE]
        elif (directory / SRC_FILE).is_file() and (directory / TGT_FILE).is_file():
            names = [SRC_FILE, TGT_FILE]
        else:
            raise DataError(
                f"no tokenizer in {directory}: expected {JOINT_FILE} or {SRC_FILE} + {TGT_FILE}"
            )
        blobs = [(directory / n).read_bytes() for n in names]
        try:
            return cls(*blobs)
        except DataError as err:
            raise DataError(f"{directory}: {err}; delete the directory to retrain") from None


# ---- training ------------------------------------------------------------------------------


def _cfg_get(cfg: Any, key: str, default: Any = ...) -> Any:
    """Read ``key`` from a dataclass/namespace/DictConfig or a Mapping."""
    if isinstance(cfg, Mapping):
        if key in cfg:
            return cfg[key]
    elif hasattr(cfg, key):
        return getattr(cfg, key)
    if default is ...:
        raise ConfigError(f"tokenizer config lacks key '{key}'")
    return default


def _settings(cfg: Any) -> dict[str, Any]:
    """Validated training settings (the cache key hashes exactly these)."""
    s = {
        "model_type": str(_cfg_get(cfg, "model_type")),
        "vocab_size": _cfg_get(cfg, "vocab_size"),
        "joint": _cfg_get(cfg, "joint"),
        "character_coverage": _cfg_get(cfg, "character_coverage", 1.0),
        "normalization": str(_cfg_get(cfg, "normalization", "identity")),
    }
    if s["model_type"] not in MODEL_TYPES:
        raise ConfigError(f"tokenizer model_type={s['model_type']!r}; choose one of {MODEL_TYPES}")
    size = s["vocab_size"]
    if size == AUTO:
        s["vocab_rule"] = RULE  # in the cache key: a new rule trains anew
    elif isinstance(size, bool) or not isinstance(size, int):
        raise ConfigError(f"tokenizer vocab_size={size!r} must be an integer or auto")
    elif size < 5:
        raise ConfigError(f"tokenizer vocab_size={size} must be > 4 (4 specials)")
    if not isinstance(s["joint"], bool):
        raise ConfigError(f"tokenizer joint={s['joint']!r} must be true or false")
    cov = s["character_coverage"]
    if isinstance(cov, bool) or not isinstance(cov, int | float) or not 0.0 < cov <= 1.0:
        raise ConfigError(f"tokenizer character_coverage={cov!r} must be in (0, 1]")
    s["character_coverage"] = float(cov)
    if s["normalization"] not in NORMALIZATIONS:
        raise ConfigError(
            f"tokenizer normalization={s['normalization']!r}; choose one of {NORMALIZATIONS}"
        )
    return s


def _file_digest(path: Path) -> str:
    """sha256 of a file's content; DataError naming the path when it is missing or empty."""
    if not path.is_file():
        raise DataError(f"tokenizer training file not found: {path}")
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if path.stat().st_size == 0:
        raise DataError(f"tokenizer training file is empty: {path}")
    return h.hexdigest()


def cache_key(train_src: Path, train_tgt: Path, cfg: Any) -> str:
    """Hex digest of the settings, the training files' contents and the library version."""
    payload = {
        "settings": _settings(cfg),
        "src": _file_digest(Path(train_src)),
        "tgt": _file_digest(Path(train_tgt)),
        "threads": TRAIN_THREADS,
        "seed": TRAIN_SEED,
        "sentencepiece": spm.__version__,
        "version": CACHE_VERSION,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]


def train_model(inputs: Sequence[Path], settings: Mapping[str, Any], log: LogFn) -> bytes:
    """Train one SentencePiece model on ``inputs``; returns the serialized model.

    If the corpus cannot fill ``vocab_size`` pieces, retries once with the largest size
    SentencePiece reports as possible, and logs it (toy tasks have ~20 symbols).
    """
    vocab_size = settings["vocab_size"]
    names = ", ".join(str(p) for p in inputs)
    for attempt in range(2):
        writer = io.BytesIO()
        spm.set_random_generator_seed(TRAIN_SEED)
        try:
            spm.SentencePieceTrainer.train(
                input=[str(p) for p in inputs],
                model_writer=writer,
                model_type=settings["model_type"],
                vocab_size=vocab_size,
                character_coverage=settings["character_coverage"],
                normalization_rule_name=settings["normalization"],
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                pad_piece="<pad>",
                unk_piece="<unk>",
                bos_piece="<s>",
                eos_piece="</s>",
                num_threads=TRAIN_THREADS,
                input_sentence_size=2_000_000,
                shuffle_input_sentence=True,
                minloglevel=2,
            )
        except RuntimeError as err:
            msg = str(err)
            if (m := _TOO_HIGH.search(msg)) and attempt == 0:
                log(
                    f"tokenizer: {names} supports at most {m.group(2)} pieces, not "
                    f"vocab_size={vocab_size}; using {m.group(2)}"
                )
                vocab_size = int(m.group(2))
                continue
            if m := _TOO_LOW.search(msg):
                raise ConfigError(
                    f"tokenizer vocab_size={vocab_size} is smaller than the {m.group(2)} "
                    f"characters and specials in {names}; raise vocab_size to at least "
                    f"{m.group(2)} or lower character_coverage"
                ) from None
            raise DataError(f"SentencePiece training on {names} failed: {msg}") from None
        return writer.getvalue()
    raise AssertionError("unreachable")  # pragma: no cover


def resolve_vocab_size(
    settings: Mapping[str, Any], inputs: Sequence[Path], log: LogFn
) -> dict[str, Any]:
    """``settings`` with ``vocab_size=auto`` replaced by :func:`auto_vocab_size` of the
    word types in ``inputs`` (logged); other sizes pass through."""
    if settings["vocab_size"] != AUTO:
        return dict(settings)
    types = count_word_types(inputs)
    size = auto_vocab_size(types)
    names = " + ".join(p.name for p in inputs)
    log(f"tokenizer: vocab_size=auto: {types} word types in {names} -> {size} pieces ({RULE})")
    return {**settings, "vocab_size": size}


def _as_log(log: LogFn | logging.Logger | None) -> LogFn:
    if log is None:
        return logging.getLogger(__name__).info
    return log.info if isinstance(log, logging.Logger) else log


def load_or_train_tokenizer(
    train_src: Path,
    train_tgt: Path,
    cfg: Any,
    cache_dir: Path,
    log: LogFn | logging.Logger | None = None,
) -> Tokenizer:
    """The tokenizer for a train split: loaded from ``cache_dir/spm-<key>/`` or trained there.

    ``cfg`` is any object or Mapping with ``model_type``, ``vocab_size``, ``joint``,
    ``character_coverage`` (and optionally ``normalization``); ``vocab_size="auto"`` sizes
    each model to its training text (:func:`resolve_vocab_size`, logged). The key (see
    :func:`cache_key`) hashes the settings and the files' contents, so editing the corpus
    retrains. A finished model is written to a temporary directory and renamed into
    place, so an interrupted run never leaves a half-written cache entry.
    """
    say = _as_log(log)
    train_src, train_tgt, cache_dir = Path(train_src), Path(train_tgt), Path(cache_dir)
    settings = _settings(cfg)
    target = cache_dir / f"spm-{cache_key(train_src, train_tgt, cfg)}"
    if target.is_dir():
        say(f"tokenizer: loaded {target}")
        return Tokenizer.load(target)

    sides = [[train_src, train_tgt]] if settings["joint"] else [[train_src], [train_tgt]]
    blobs = [train_model(p, resolve_vocab_size(settings, p, say), say) for p in sides]
    tokenizer = Tokenizer(*blobs)
    with atomic_dir(target, complete=Path.is_dir) as tmp:  # a concurrent run may finish first
        tokenizer.save(tmp)
        (tmp / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    say(
        f"tokenizer: trained {settings['model_type']} "
        f"({'joint' if settings['joint'] else 'separate'}) src={tokenizer.src_vocab_size} "
        f"tgt={tokenizer.tgt_vocab_size} pieces -> {target}"
    )
    return tokenizer
