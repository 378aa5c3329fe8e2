"""A run's parts to a :class:`~attnmt.checkpoint_format.Checkpoint` and back.

``resume_point`` is the (sampler state, RNG state) captured right after the last completed
update; checkpoints are only written between updates (attnmt.train.interrupt), so weights
and position always agree. Resuming restores model, optimizer, schedule, scaler, sampler
position and every RNG, so a resumed CPU run repeats the uninterrupted run step for step.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from attnmt.checkpoint import load_weights
from attnmt.checkpoint_format import Checkpoint, TrainingState, VocabInfo
from attnmt.errors import CheckpointError
from attnmt.schema import plain
from attnmt.train.continuation import check_same_corpus
from attnmt.train.distributed import rank_seed
from attnmt.train.rng import seed_everything, set_rng_state
from attnmt.train.setup import RunParts
from attnmt.train.state import TrainState

log = logging.getLogger(__name__)

ResumePoint = tuple[dict[str, int], dict[str, Any]]
"""(sampler state, RNG state) right after the last completed update."""


def make_checkpoint(
    parts: RunParts,
    state: TrainState,
    resume_point: ResumePoint,
    metrics: dict[str, float],
    rng_ranks: list[dict[str, Any]] | None = None,
) -> Checkpoint:
    """The model and every piece of training state; ``rng`` is this (rank 0's) RNG
    snapshot, ``rng_ranks`` every rank's under DDP."""
    sampler_state, rng = resume_point
    cfg, tok = parts.settings.cfg, parts.data.tokenizer
    vocab = tok.vocab_info()
    return Checkpoint(
        model_name=str(getattr(parts.model, "name", "")),
        model_config=dict(plain(cfg.model)),
        vocab=VocabInfo(int(vocab["src_size"]), int(vocab["tgt_size"]), bool(vocab["joint"])),
        weights=parts.model.state_dict(),
        tokenizer=tok.to_files_dict(),
        config=cfg.to_dict(),
        step=state.step,
        epoch=int(sampler_state["epoch"]),
        metrics=dict(metrics),
        training=TrainingState(
            optimizer=parts.optimizer.state_dict(),
            scheduler=parts.schedule.state_dict(),
            scaler=parts.precision.scaler.state_dict(),
            rng=rng,
            sampler=dict(sampler_state),
            trainer=state.state_dict(),
            rng_ranks=list(rng_ranks) if rng_ranks is not None and len(rng_ranks) > 1 else None,
            precision=parts.precision.name,
        ),
        corpus=parts.corpus,
    )


def restore(
    parts: RunParts,
    checkpoint: Checkpoint,
    state: TrainState,
    source: str | Path = "the checkpoint",
) -> None:
    """Load ``checkpoint`` into ``parts`` and ``state``; the RNGs last (after model building).

    Rank r takes its own RNG snapshot when the checkpoint has one (same world size);
    otherwise rank 0's, reseeded per rank so that ranks > 0 still draw their own masks.
    The corpus must be the one the checkpoint was trained on
    (:func:`~attnmt.train.continuation.check_same_corpus`), checked before anything loads.
    """
    t = checkpoint.training
    if t is None:
        raise CheckpointError(
            f"{source} holds no training state (e.g. an averaged checkpoint): evaluate it "
            "with evaluate.py, or resume from last.pt"
        )
    check_same_corpus(checkpoint.corpus, parts.corpus, str(source))
    load_weights(parts.model, checkpoint.weights, source)
    parts.optimizer.load_state_dict(t.optimizer)
    parts.schedule.load_state_dict(t.scheduler)
    if t.scaler or not parts.precision.scaler.is_enabled():
        parts.precision.scaler.load_state_dict(t.scaler)
    else:  # trained in fp32/bf16, now in fp16 (auto re-decided: see choose_precision)
        log.info("%s was trained without fp16 loss scaling: the loss scale starts afresh", source)
    parts.data.sampler.load_state_dict(t.sampler)
    state.load_state_dict(t.trainer)
    rank, ranks = parts.dist.rank, t.rng_ranks or [t.rng]
    if rank < len(ranks):
        set_rng_state(ranks[rank])
    else:
        set_rng_state(t.rng)
        seed_everything(rank_seed(checkpoint.step, rank))
