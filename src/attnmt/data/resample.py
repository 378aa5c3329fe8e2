"""Subword regularisation: the training pairs segmented afresh, by sampling, every epoch.

With ``data.tokenizer.sampling.enabled=true`` the SentencePiece model that segments the
corpus also *samples* segmentations (the model itself is unchanged):

* unigram (Kudo 2018): a segmentation x of a sentence is drawn with probability
  P(x)^α / Σ_x' P(x')^α, over the ``nbest`` best segmentations (``nbest=-1``: over all of
  them, by forward-filtering backward-sampling). Small α flattens the distribution.
* BPE-dropout (Provilkov et al. 2020): each merge is skipped with probability ``dropout``
  while the merges are applied, so words break into smaller pieces now and then.

A pair is resampled from its cached best segmentation (:mod:`attnmt.data.idcache`):
the ids are decoded to their normalised text and encoded again with sampling
(:func:`sample_ids`), so no train text is read and the cache stays the one copy of the
corpus. Pair ``i``'s segmentation in epoch ``e`` is a function of (``seed``, e, side, i)
only (:func:`pair_seed` seeds SentencePiece's generator before each encode; sentencepiece
< 0.2.3 ignores such seeds, which :func:`check_seeded_sampling` refuses), so a resumed
run re-creates the epoch it stopped in, pair for pair, in either of the two ways
:class:`EpochSegmentations` serves an epoch:

* **whole epochs** (at most :data:`WHOLE_EPOCH_PAIRS` training pairs): at the epoch's start
  every pair is sampled into in-memory flat arrays (``2 bytes × pieces`` per side) and the
  batches are packed from those exact lengths, as without sampling (ding_de_en: ~1 s an
  epoch on one core);
* **as read** (larger corpora): a pair is sampled when a batch reads it, so a start costs
  what it costs without sampling and memory stays that of the cache. Batches are packed
  from per-pair *bounds*: the best segmentation's length × the :data:`BOUND_QUANTILE`
  quantile of the sampled/best length ratio, measured once on :data:`PROBE_PAIRS` pairs;
  a sampled side longer than its bound keeps its best segmentation, so a batch never
  exceeds ``max_tokens``. The price: batches hold fewer real tokens than their budget.

Which pairs train is decided once, on the best segmentation (``data.max_len``,
``data.max_len_ratio``: :func:`~attnmt.data.dataset.filter_lengths`); a sampled side longer
than ``max_len`` pieces keeps its best segmentation too, and so does a sentence holding
``<unk>`` (its text does not survive decoding).

With sampling off nothing here runs: the train ids come from the cache as they are.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sentencepiece as spm
from torch.utils.data import Dataset

from attnmt.data.dataset import Item
from attnmt.data.indexed import IndexedDataset, TokenArray, token_dtype
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import ConfigError

log = logging.getLogger(__name__)

WHOLE_EPOCH_PAIRS = 100_000
"""Up to this many training pairs an epoch is sampled whole at its start (exact packing);
above it pairs are sampled as batches read them (module docstring)."""
PROBE_PAIRS = 2_000
"""Pairs sampled once to measure the length ratio that the bounds allow."""
BOUND_QUANTILE = 0.95
"""The bounds allow this quantile of the sampled/best length ratio: about 5% of the sides
keep their best segmentation in an epoch."""
PROBE_EPOCH = 2**31 - 1
"""The probe's epoch number in :func:`pair_seed`: a stream no training epoch uses."""
SIDES = {"src": 0, "tgt": 1}
_MASK64 = 2**64 - 1


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


def _mix(x: int) -> int:
    """splitmix64's finaliser: a 64-bit integer to a well-mixed 64-bit integer."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def pair_seed(seed: int, epoch: int, side: str, pair: int) -> int:
    """SentencePiece's seed for one side of one pair in one epoch: 32 bits of a splitmix64
    chain over (seed, epoch, side, pair), never 2^32 - 1 (SentencePiece's "unseeded")."""
    h = 0
    for part in (seed, epoch, SIDES[side], pair):
        h = _mix((h + (part & _MASK64) + 0x9E3779B97F4A7C15) & _MASK64)
    return (h >> 32) % (2**32 - 1)


def sample_ids(
    sp: spm.SentencePieceProcessor, ids: Sequence[int], settings: SamplingSettings, seed: int
) -> list[int]:
    """``ids`` (a best segmentation) segmented again by sampling, deterministic in ``seed``:
    decoded to its normalised text and encoded with ``enable_sampling``. A sentence holding
    ``<unk>`` is returned as it is (the text of ``<unk>`` is not the text it stood for)."""
    ids = [int(t) for t in ids]
    if not ids or sp.unk_id() in ids:
        return ids
    spm.set_random_generator_seed(seed)
    return sp.encode(
        sp.decode(ids),
        out_type=int,
        enable_sampling=True,
        alpha=settings.alpha,
        nbest_size=settings.nbest,
    )


PROBE_PIECES = 16
""":func:`check_seeded_sampling` samples the text of this many pieces: the longest of about
:data:`PROBE_VOCAB` pieces spread evenly over the model's vocabulary."""
PROBE_VOCAB = 1024
"""How many pieces :func:`check_seeded_sampling` looks at (bounds its cost)."""
SEEDING_ROUNDS = 4
"""How many seed pairs (A, B) :func:`check_seeded_sampling` tries: broken seeding passes only if
every round's two draws with seed A happen to agree."""


def check_seeded_sampling(sp: spm.SentencePieceProcessor, settings: SamplingSettings) -> None:
    """Raise :class:`ConfigError` unless seeding SentencePiece's generator reproduces a
    sampled segmentation, which :func:`pair_seed` relies on. Before sentencepiece 0.2.3
    ``set_random_generator_seed`` only seeds a thread's generator when the thread first
    samples (google/sentencepiece#540, #609): later seeds are ignored, and sampling is
    silently not reproducible (a resumed run does not re-create its epoch).

    The check samples one text (:data:`PROBE_PIECES` long pieces of the model, which can be
    cut into smaller ones) with seed A, then B, then A again, for
    :data:`SEEDING_ROUNDS` seeds A, and compares the two draws with A: about 2 ms for an
    8k-piece model. A model whose pieces have no other segmentation cannot tell, and passes.
    """
    size = sp.get_piece_size()
    normal = [
        i
        for i in range(0, size, max(1, size // PROBE_VOCAB))  # a spread of the vocabulary
        if not (sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i) or sp.is_byte(i))
    ]
    longest = sorted(normal, key=lambda i: len(sp.id_to_piece(i)), reverse=True)
    probe = longest[:PROBE_PIECES]

    def draw(seed: int) -> list[int]:
        return sample_ids(sp, probe, settings, seed)  # the very call training makes

    for a in range(1, SEEDING_ROUNDS + 1):
        first = draw(a)
        draw(a + SEEDING_ROUNDS)  # seed B: moves an unseeded generator on
        if draw(a) != first:
            version = getattr(spm, "__version__", "unknown")
            raise ConfigError(
                f"data.tokenizer.sampling.enabled=true needs sentencepiece >= 0.2.3: the "
                f"installed sentencepiece {version} ignores set_random_generator_seed once a "
                "thread has sampled (google/sentencepiece#540), so sampled segmentations "
                "would not be reproducible and a resumed run would not re-create its epoch. "
                'Run `pip install -U "sentencepiece>=0.2.3"`, or set '
                "data.tokenizer.sampling.enabled=false"
            )


def sample_array(
    best: TokenArray,
    sp: spm.SentencePieceProcessor,
    side: str,
    settings: SamplingSettings,
    seed: int,
    epoch: int,
    rows: Sequence[int] | np.ndarray | None = None,
) -> TokenArray:
    """Rows ``rows`` (default: all) of ``best`` sampled for ``epoch``, as in-memory flat
    arrays: row j of the result is pair ``rows[j]``."""
    picked = range(len(best)) if rows is None else rows
    sampled = [
        sample_ids(sp, best[int(i)], settings, pair_seed(seed, epoch, side, int(i))) for i in picked
    ]
    return TokenArray.from_lists(sampled, token_dtype(sp.get_piece_size()))


class EpochSegmentations(Dataset[Item]):
    """The training pairs ``fixed`` holds (its ``index``: the pairs kept by the length
    filter), each epoch with its own sampled segmentation (module docstring).

    ``dataset[k] -> (src ids, tgt ids, k)`` of the selected epoch (:meth:`set_epoch`);
    :meth:`lengths` gives the piece counts (whole epochs) or bounds (sampled as read) the
    batch sampler packs by. ``whole_epoch_pairs``: see :data:`WHOLE_EPOCH_PAIRS`.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        settings: SamplingSettings,
        seed: int,
        fixed: IndexedDataset,
        max_len: int,
        whole_epoch_pairs: int = WHOLE_EPOCH_PAIRS,
    ) -> None:
        if fixed.tgt is None:
            raise ConfigError("subword sampling needs target sentences")
        self.tokenizer = tokenizer
        self.processors = {side: tokenizer.processor(side) for side in SIDES}
        for sp in {id(sp): sp for sp in self.processors.values()}.values():
            check_seeded_sampling(sp, settings)  # pair_seed's determinism relies on it
        self.best = {"src": fixed.src, "tgt": fixed.tgt}
        self.settings = settings
        self.seed = seed
        self.fixed = fixed
        self.max_len = max_len
        self.index = np.arange(len(fixed), dtype=np.int64) if fixed.index is None else fixed.index
        self._epoch: int | None = None  # the epoch sampled last (whole epochs)
        self._served: int | None = None  # the epoch __getitem__ reads (set_epoch)
        self._arrays: tuple[TokenArray, TokenArray] | None = None
        self._lengths: tuple[np.ndarray, np.ndarray] | None = None
        whole = len(self.index) <= whole_epoch_pairs
        self.bounds = None if whole else self._measure_bounds()
        full = np.full(len(self.index), max_len, dtype=np.int32)
        self.limits = self.bounds or (full, full)  # longest sampled side a pair may serve

    def __len__(self) -> int:
        return len(self.index)

    @property
    def whole_epochs(self) -> bool:
        """Whether epochs are sampled whole (else pairs are sampled as read)."""
        return self.bounds is None

    def _measure_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Per pair and side: ``max(best, ceil(q × best))`` pieces, at most ``max_len``
        (but never below the best length), q the :data:`BOUND_QUANTILE` quantile of the
        sampled/best ratio over :data:`PROBE_PAIRS` pairs (a seeded choice)."""
        started = time.perf_counter()
        rng = np.random.default_rng([self.seed, PROBE_EPOCH])
        probe = np.sort(rng.permutation(self.index)[:PROBE_PAIRS])
        bounds = []
        kept = {"src": self.fixed.src_lengths, "tgt": self.fixed.tgt_lengths}  # [m] each
        for side in SIDES:
            best = self.best[side]
            sampled = sample_array(
                best, self.processors[side], side, self.settings, self.seed, PROBE_EPOCH, probe
            )
            base = np.maximum(best.lengths()[probe], 1)
            q = float(np.quantile(sampled.lengths() / base, BOUND_QUANTILE)) if len(probe) else 1.0
            lengths = np.asarray(kept[side], dtype=np.int64)
            bound = np.minimum(np.ceil(q * lengths), self.max_len)
            bounds.append(np.maximum(bound, lengths).astype(np.int32))
            log.info(
                "subword sampling (%s): %d pairs are sampled as batches read them; batches "
                "packed for %.2f× the best segmentation's pieces (the %.0f%% quantile over %d "
                "pairs; longer samples keep the best segmentation)",
                side,
                len(self.index),
                q,
                100 * BOUND_QUANTILE,
                len(probe),
            )
        log.info("subword sampling: bounds measured in %.1f s", time.perf_counter() - started)
        return bounds[0], bounds[1]

    def _sample(self, side: str, k: int, epoch: int) -> list[int]:
        """Side ``side`` of selected pair ``k`` in ``epoch``: sampled, or its best
        segmentation when the sample is longer than the pair's limit."""
        i = int(self.index[k])
        best = self.best[side][i]
        ids = sample_ids(
            self.processors[side], best, self.settings, pair_seed(self.seed, epoch, side, i)
        )
        return ids if len(ids) <= self.limits[SIDES[side]][k] else best

    def _build(self, epoch: int) -> None:
        """Whole epochs: sample epoch ``epoch``'s segmentation of both sides (once)."""
        if self._epoch == epoch:
            return
        started = time.perf_counter()
        dtype = {s: token_dtype(sp.get_piece_size()) for s, sp in self.processors.items()}
        src, tgt = (
            TokenArray.from_lists(
                [self._sample(side, k, epoch) for k in range(len(self))], dtype[side]
            )
            for side in SIDES
        )
        self._epoch, self._arrays = epoch, (src, tgt)
        self._lengths = (src.lengths().astype(np.int32), tgt.lengths().astype(np.int32))
        log.info(
            "subword sampling: epoch %d segmented in %.1f s (%d + %d pieces)",
            epoch,
            time.perf_counter() - started,
            int(src.offsets[-1]),
            int(tgt.offsets[-1]),
        )

    def lengths(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """What the batches of ``epoch`` are packed by, (src [m], tgt [m]) int32: the
        sampled piece counts (whole epochs) or each pair's bound (sampled as read)."""
        if self.bounds is not None:
            return self.bounds
        self._build(epoch)
        assert self._lengths is not None
        return self._lengths

    def set_epoch(self, epoch: int) -> None:
        """Serve ``epoch``'s segmentation from now on (whole epochs: sampled now if not yet)."""
        self._served = epoch
        if self.whole_epochs:
            self._build(epoch)

    def __getitem__(self, k: int) -> Item:
        if self._served is None:
            raise RuntimeError("EpochSegmentations: call set_epoch before reading pairs")
        if not self.whole_epochs:
            return self._sample("src", k, self._served), self._sample("tgt", k, self._served), k
        self._build(self._served)  # only one epoch is held: lengths(other) may have replaced it
        assert self._arrays is not None
        return self._arrays[0][k], self._arrays[1][k], k
