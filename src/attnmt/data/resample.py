"""Subword regularisation: the training pairs segmented afresh, by sampling, every epoch.

With ``data.tokenizer.sampling.enabled=true`` the SentencePiece model that segments the
corpus also *samples* segmentations (the model itself is unchanged):

* unigram (Kudo 2018): a segmentation x of a sentence is drawn with probability
  P(x)^α / Σ_x' P(x')^α, over the ``nbest`` best segmentations (``nbest=-1``: over all of
  them, by forward-filtering backward-sampling). Small α flattens the distribution.
* BPE-dropout (Provilkov et al. 2020): each merge is skipped with probability ``dropout``
  while the merges are applied, so words break into smaller pieces now and then.

:class:`EpochSegmentations` is the training dataset then. For epoch ``e`` it streams the
train files (never holding their text), samples every line on each side, and keeps the
ids as in-memory flat arrays (:class:`~attnmt.data.indexed.TokenArray`): one epoch's
segmentation at a time, ``2 bytes × pieces`` per side with a vocabulary of at most 32768.
The segmentation of epoch e is a function of (``seed``, e, side, chunk) only: before
each chunk of :data:`CHUNK_LINES` lines SentencePiece's generator is seeded with
:func:`sampling_seed` and the chunk is encoded on one thread (SentencePiece draws from a
process-wide generator that every encode call restarts from the seed set last; with more
threads the lines' order of draws varies). So a resumed run re-creates the epoch it
stopped in, pair for pair, and the sampler packs its batches from those lengths.

Which pairs train is decided once, on the deterministic segmentation (``data.max_len``,
``data.max_len_ratio``: :func:`~attnmt.data.dataset.filter_lengths`); a sampled side
longer than ``max_len`` pieces falls back to its deterministic segmentation that epoch.

With sampling off nothing here runs: the train ids come from the cache
(:mod:`attnmt.data.idcache`) as before, and a warm start reads no text.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sentencepiece as spm
from torch.utils.data import Dataset

from attnmt.data.dataset import Item
from attnmt.data.indexed import IndexedDataset, TokenArray, token_dtype
from attnmt.data.textio import utf8_lines
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import ConfigError

log = logging.getLogger(__name__)

CHUNK_LINES = 50_000
SIDES = {"src": 0, "tgt": 1}


@dataclass(frozen=True)
class SamplingSettings:
    """What SentencePiece's ``encode(enable_sampling=True, alpha, nbest_size)`` is given:
    for unigram ``alpha`` = α and ``nbest_size`` = ``nbest``; for BPE ``alpha`` = the merge
    dropout probability (``nbest_size`` is unused)."""

    model_type: str  # unigram | bpe
    alpha: float
    nbest: int = -1

    def __post_init__(self) -> None:
        if self.model_type == "unigram":
            if not self.alpha > 0:
                raise ConfigError(f"sampling alpha={self.alpha} must be > 0 for unigram")
            if self.nbest == 0 or self.nbest == 1 or self.nbest < -1:
                raise ConfigError(
                    f"sampling nbest={self.nbest}: -1 (every segmentation) or >= 2 (the n best)"
                )
        elif self.model_type == "bpe":
            if not 0 < self.alpha < 1:
                raise ConfigError(f"BPE-dropout {self.alpha} must be in (0, 1)")
        else:
            raise ConfigError(f"subword sampling needs unigram or bpe, not {self.model_type!r}")


def sampling_seed(seed: int, epoch: int, side: str, chunk: int) -> int:
    """SentencePiece's seed for one chunk: 32 bits of ``SeedSequence([seed, epoch, side,
    chunk])``, never 2^32 - 1 (SentencePiece's "unseeded" value)."""
    state = np.random.SeedSequence([seed, epoch, SIDES[side], chunk]).generate_state(1)
    return int(state[0]) % (2**32 - 1)


def _chunks(path: Path) -> Iterator[list[str]]:
    with path.open("rb") as f:
        lines = utf8_lines(f, f"{path}:", "convert the file to UTF-8")
        while chunk := list(itertools.islice(lines, CHUNK_LINES)):
            yield chunk


def sample_file(
    path: Path, tokenizer: Tokenizer, side: str, settings: SamplingSettings, seed: int, epoch: int
) -> TokenArray:
    """Every line of ``path`` segmented by sampling with the ``side`` model, as in-memory
    arrays (tokens [n_pieces], offsets [n + 1]); deterministic in (seed, epoch, side)."""
    sp = tokenizer.processor(side)
    dtype = token_dtype(sp.get_piece_size())
    flats: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    for k, chunk in enumerate(_chunks(Path(path))):
        spm.set_random_generator_seed(sampling_seed(seed, epoch, side, k))
        ids = sp.encode(
            chunk,
            out_type=int,
            enable_sampling=True,
            alpha=settings.alpha,
            nbest_size=settings.nbest,
            num_threads=1,
        )
        n = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flats.append(
            np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(n.sum()))
        )
        lengths.append(n)
    offsets = np.zeros(sum(map(len, lengths)) + 1, dtype=np.int64)
    if lengths:
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
    tokens = np.concatenate(flats) if flats else np.zeros(0, dtype=dtype)
    return TokenArray(tokens, offsets)


class EpochSegmentations(Dataset[Item]):
    """The training pairs ``fixed`` holds (its ``index``: the pairs kept by the length
    filter), with each epoch's sampled segmentation (module docstring).

    ``dataset[k] -> (src ids, tgt ids, k)`` of the selected epoch (:meth:`set_epoch`);
    :meth:`lengths` gives an epoch's piece counts for the batch sampler.
    """

    def __init__(
        self,
        src_path: Path,
        tgt_path: Path,
        tokenizer: Tokenizer,
        settings: SamplingSettings,
        seed: int,
        fixed: IndexedDataset,
        max_len: int,
    ) -> None:
        if fixed.tgt is None:
            raise ConfigError("subword sampling needs target sentences")
        self.paths = {"src": Path(src_path), "tgt": Path(tgt_path)}
        self.tokenizer = tokenizer
        self.settings = settings
        self.seed = seed
        self.fixed = fixed
        self.max_len = max_len
        self.index = (
            np.arange(len(fixed), dtype=np.int64) if fixed.index is None else fixed.index
        )
        self._epoch: int | None = None  # the epoch sampled last
        self._served: int | None = None  # the epoch __getitem__ reads (set_epoch)
        self._arrays: tuple[TokenArray, TokenArray] | None = None
        self._lengths: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.index)

    def _build(self, epoch: int) -> None:
        """Sample epoch ``epoch``'s segmentation of both sides (once per epoch)."""
        if self._epoch == epoch:
            return
        started = time.perf_counter()
        src, tgt = (
            sample_file(self.paths[side], self.tokenizer, side, self.settings, self.seed, epoch)
            for side in ("src", "tgt")
        )
        for side, arr, full in (("src", src, self.fixed.src), ("tgt", tgt, self.fixed.tgt)):
            if len(arr) != len(full):
                raise ConfigError(
                    f"{self.paths[side]} has {len(arr)} lines now but {len(full)} when its "
                    "ids were cached; the file changed during the run"
                )
        src_len = src.lengths()[self.index]
        tgt_len = tgt.lengths()[self.index]
        # a sampled side longer than max_len: its deterministic segmentation instead
        src_len = np.where(src_len > self.max_len, self.fixed.src_lengths, src_len)
        tgt_len = np.where(tgt_len > self.max_len, self.fixed.tgt_lengths, tgt_len)
        self._epoch, self._arrays = epoch, (src, tgt)
        self._lengths = (src_len.astype(np.int32), tgt_len.astype(np.int32))
        log.info(
            "subword sampling: epoch %d segmented in %.1f s (%d + %d pieces)",
            epoch,
            time.perf_counter() - started,
            int(src.offsets[-1]),
            int(tgt.offsets[-1]),
        )

    def lengths(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """Pieces per pair in ``epoch``'s segmentation: (src [m], tgt [m]) int32."""
        self._build(epoch)
        assert self._lengths is not None
        return self._lengths

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch``'s segmentation from now on (sampled now if not yet)."""
        self._served = epoch
        self._build(epoch)

    def __getitem__(self, k: int) -> Item:
        if self._served is None:
            raise RuntimeError("EpochSegmentations: call set_epoch before reading pairs")
        self._build(self._served)  # only one epoch is held: lengths(other) may have replaced it
        assert self._arrays is not None
        i = int(self.index[k])
        src, tgt = self._arrays
        s, t = src[i], tgt[i]
        if len(s) > self.max_len:
            s = self.fixed.src[i]
        if len(t) > self.max_len:
            t = self.fixed.tgt[i]  # type: ignore[index]
        return s, t, k
