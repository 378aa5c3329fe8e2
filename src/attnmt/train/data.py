"""Everything the trainer reads: corpus, tokenizer, training loader, validation/test sets.

Data flow (one direction): ``prepare_corpus(cfg.data)`` → SentencePiece trained on the
train split (cached beside the corpus) or taken from the checkpoint being resumed →
train ids encoded once per tokenizer into .npy arrays (:mod:`attnmt.data.idcache`) →
``filter_lengths`` (max_len, max_len_ratio) → :class:`TokenBatchSampler` (sharded over
DDP ranks) → ``DataLoader(num_workers=0)`` so the sampler's position is exact. A warm
start neither parses nor encodes the train text (the ids' cache key is the model's hash
and the files' size and mtime; the tokenizer's key still hashes the files' bytes).
With subword sampling (``data.tokenizer.sampling.enabled``) the loader reads the kept
pairs from :class:`~attnmt.data.resample.EpochSegmentations` instead, which resamples
each epoch's segmentation from the cached ids (never the text), and the sampler packs by
that epoch's lengths or, for large corpora, by per-pair bounds. With guided alignment
(``trainer.guided_alignment.weight > 0``) the train split's word links are read and checked
before the tokenizer (attnmt.data.train_links), and every batch carries them as piece links
(attnmt.data.guided_batches). The valid split's word links, when it has some
(``trainer.valid_alignments``: attnmt.train.valid_links), are read and checked before the
tokenizer too; each validation then scores the attention's AER against them.
"""

from __future__ import annotations

import filecmp
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from torch.utils.data import DataLoader

from attnmt.data.config import DataConfig
from attnmt.data.corpora import PreparedCorpus, prepare_corpus, require_splits
from attnmt.data.dataset import collate, filter_lengths, make_loader
from attnmt.data.guided_batches import GuidedCollate, word_starts
from attnmt.data.idcache import cached_token_array
from attnmt.data.indexed import IndexedDataset
from attnmt.data.resample import EpochSegmentations, SamplingSettings
from attnmt.data.sampler import TokenBatchSampler
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.data.train_links import train_links
from attnmt.data.word_links import WordLinks
from attnmt.train.config import TrainerConfig
from attnmt.train.distributed import DistInfo, barrier
from attnmt.train.evaluation import EvalSet, make_eval_set
from attnmt.train.valid_links import ValidLinks, valid_links

log = logging.getLogger(__name__)


@dataclass
class TrainingData:
    """The prepared corpus and what the loop iterates."""

    corpus: PreparedCorpus
    tokenizer: Tokenizer
    train: IndexedDataset
    sampler: TokenBatchSampler
    loader: DataLoader
    valid: EvalSet
    ids_seconds: float = 0.0  # reading (or, on a cold cache, encoding) the train ids
    valid_links: ValidLinks | None = None  # the valid pairs' word links (None: no AER)

    def test_split(self) -> tuple[list[str], list[str]]:
        """The test split's (sources, references), read on demand for the final decoding."""
        return self.corpus.read("test")


def build_data(
    dcfg: DataConfig,
    tcfg: TrainerConfig,
    seed: int,
    dist: DistInfo,
    tokenizer_files: Mapping[str, bytes] | None = None,
) -> TrainingData:
    """Prepare the corpus and loaders; ``tokenizer_files`` (from a checkpoint) skip training."""
    if dist.enabled and not dist.is_main:
        barrier()  # rank 0 prepares, trains the tokenizer, encodes; the others read the caches
    corpus = prepare_corpus(dcfg)
    require_splits(corpus, ("train", "valid", "test") if tcfg.test else ("train", "valid"))
    guided = tcfg.guided_alignment
    word_links = train_links(corpus, guided.links) if guided.weight > 0 else None
    valid_src, valid_ref = corpus.read("valid")
    links = valid_links(corpus, tcfg.valid_alignments, valid_src, valid_ref)
    train_src, train_tgt = corpus.files("train")
    if tokenizer_files is not None:
        tokenizer = Tokenizer.from_files_dict(tokenizer_files)
        log.info("tokenizer: taken from the checkpoint")
    else:
        tokenizer = load_or_train_tokenizer(
            train_src, train_tgt, dcfg.tokenizer, corpus.directory, log=log
        )
    ids_started = time.perf_counter()
    full = IndexedDataset(
        cached_token_array(train_src, tokenizer, "src", corpus.directory, log),
        cached_token_array(train_tgt, tokenizer, "tgt", corpus.directory, log),
    )
    ids_seconds = time.perf_counter() - ids_started
    if dist.enabled and dist.is_main:
        barrier()
    kept, removed = filter_lengths(
        full.src_lengths, full.tgt_lengths, dcfg.max_len, dcfg.max_len_ratio, "train"
    )
    train = full.subset(kept)
    log.info(
        "train: %d pairs kept of %d (removed: %s); vocab src=%d tgt=%d (%s)",
        len(train),
        len(full),
        ", ".join(f"{k} {v}" for k, v in removed.items()),
        tokenizer.src_vocab_size,
        tokenizer.tgt_vocab_size,
        "joint" if tokenizer.joint else "separate",
    )
    resampled = subword_sampling(dcfg, tokenizer, seed, train)
    sampler = TokenBatchSampler(
        train.src_lengths,
        train.tgt_lengths,
        max_tokens=tcfg.max_tokens,
        shuffle=True,
        seed=seed,
        num_replicas=dist.world_size,
        rank=dist.rank,
        bucket_size=tcfg.bucket_size or None,
        segmentation=resampled,
    )
    # num_workers=0: exact sampler position
    batches = collate if word_links is None else guided_collate(word_links, tokenizer, train)
    loader = make_loader(train if resampled is None else resampled, sampler, collate_fn=batches)
    warn_suspicious_valid(corpus)
    valid = make_eval_set(tokenizer, valid_src, valid_ref, dcfg.max_len, tcfg.val_subset)
    log.info("valid: %d pairs for validation; %d train batches/epoch", len(valid), len(sampler))
    links = None if links is None else links.first(tcfg.val_subset)
    return TrainingData(corpus, tokenizer, train, sampler, loader, valid, ids_seconds, links)


def guided_collate(links: WordLinks, tokenizer: Tokenizer, train: IndexedDataset) -> GuidedCollate:
    """Batches of ``train`` (its kept pairs, in its order) with their piece links."""
    lines = train.index
    return GuidedCollate(
        links.subset(lines), word_starts(tokenizer, "src"), word_starts(tokenizer, "tgt"), lines
    )


def subword_sampling(
    dcfg: DataConfig,
    tokenizer: Tokenizer,
    seed: int,
    train: IndexedDataset,
) -> EpochSegmentations | None:
    """The training pairs resegmented by sampling each epoch
    (``data.tokenizer.sampling.enabled``), else None: the cached ids as they are."""
    cfg = dcfg.tokenizer.sampling
    if not cfg.enabled:
        return None
    bpe = dcfg.tokenizer.model_type == "bpe"
    settings = SamplingSettings(
        dcfg.tokenizer.model_type, cfg.dropout if bpe else cfg.alpha, -1 if bpe else cfg.nbest
    )
    what = f"BPE-dropout {cfg.dropout}" if bpe else f"unigram alpha={cfg.alpha} nbest={cfg.nbest}"
    log.info("subword sampling on (%s): each epoch segments the train split afresh", what)
    return EpochSegmentations(tokenizer, settings, seed, train, dcfg.max_len)


def _same_bytes(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (sizes first, so usually no read)."""
    return a.stat().st_size == b.stat().st_size and filecmp.cmp(a, b, shallow=False)


def warn_suspicious_valid(corpus: PreparedCorpus) -> None:
    """One warning line when the valid split is the train split (validation would measure
    memorisation). (All-blank splits already fail in the pre-flight checks.)"""
    (train_src, train_tgt), (valid_src, valid_tgt) = corpus.files("train"), corpus.files("valid")
    if _same_bytes(train_src, valid_src) and _same_bytes(train_tgt, valid_tgt):
        log.warning(
            "the valid split (%s, %s) is identical to the train split: validation BLEU "
            "measures memorisation, not translation; give held-out valid files",
            valid_src,
            valid_tgt,
        )
