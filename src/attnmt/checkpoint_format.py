"""The checkpoint type: :class:`Checkpoint`, one reader (:meth:`Checkpoint.from_dict`) and
one writer (:meth:`Checkpoint.to_dict`) of the dict that ``torch.save`` stores.

On disk a checkpoint is a dict of tensors and plain data only, so it loads with
``torch.load(weights_only=True)``; its keys (format ``attnmt-checkpoint-v1``):

    format        "attnmt-checkpoint-v1"
    model_name    registry name (str)
    model_config  the model's config (plain dict)
    vocab         {"src_size": int, "tgt_size": int, "joint": bool}
    model         the state_dict
    tokenizer     {file name: bytes}   SentencePiece model files (Tokenizer.to_files_dict)
    config        the whole resolved run config (plain dict)
    step, epoch   ints
    metrics       {"val_bleu": float, "val_chrf": float, "val_loss": float} (or {})
    corpus        the train/valid files' pairs and sha256 (optional: since f45454f)
    averaged_from the files an averaged checkpoint was made of (optional)
    optimizer, scheduler, scaler, rng, sampler, trainer_state, rng_ranks, precision
                  the training state (:class:`TrainingState`; absent in averaged
                  checkpoints; ``trainer_state`` since 2401cda, ``rng_ranks`` with DDP,
                  ``precision`` (the resolved fp32/bf16/fp16) since 2026-11-26)

Every version attnmt has written reads: keys added later take their defaults, model settings
whose meaning changed are rewritten to today's keys (:mod:`attnmt.settings_history`), and
keys this version does not know are kept (``extra``) and written back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from attnmt.errors import CheckpointError
from attnmt.settings_history import upgrade_model_settings

FORMAT = "attnmt-checkpoint-v1"
REQUIRED_KEYS = ("format", "model_name", "model_config", "vocab", "model", "tokenizer", "config")
TRAINING_KEYS = ("optimizer", "scheduler", "scaler", "rng", "sampler")
"""The training state a resumable checkpoint must hold (``trainer_state``, ``rng_ranks`` and
``precision`` are optional: older checkpoints lack the first and last, single-process runs
the second)."""
_KNOWN = {
    *REQUIRED_KEYS,
    *TRAINING_KEYS,
    "trainer_state",
    "rng_ranks",
    "precision",
    "step",
    "epoch",
    "metrics",
    "corpus",
    "averaged_from",
}


def _upgraded_run_config(config: Any, model_name: str) -> Any:
    """The run config with its model section in today's keys (attnmt.settings_history)."""
    if not isinstance(config, Mapping) or not isinstance(config.get("model"), Mapping):
        return config
    return {**config, "model": upgrade_model_settings(config["model"], model_name)}


def _precision(value: Any) -> str | None:
    """A recorded precision as written (fp32, bf16 or fp16); None for anything else, which
    a resume then decides afresh."""
    return value if value in ("fp32", "bf16", "fp16") else None


@dataclass(frozen=True)
class VocabInfo:
    """The vocabulary sizes the model was built for."""

    src_size: int
    tgt_size: int
    joint: bool

    def to_dict(self) -> dict[str, Any]:
        return {"src_size": self.src_size, "tgt_size": self.tgt_size, "joint": self.joint}


@dataclass
class TrainingState:
    """What resuming needs beyond the weights: optimizer, schedule, loss scaler, RNGs (this
    rank's; every rank's in ``rng_ranks`` under DDP), sampler position, the trainer's
    counters (attnmt.train.state.TrainState.state_dict) and the precision the run trained
    in (``fp32``/``bf16``/``fp16``, what ``trainer.precision`` resolved to; None: not
    recorded)."""

    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    scaler: dict[str, Any]
    rng: dict[str, Any]
    sampler: dict[str, Any]
    trainer: dict[str, Any]
    rng_ranks: list[dict[str, Any]] | None = None
    precision: str | None = None


@dataclass
class Checkpoint:
    """A model, its tokenizer and run config, and (unless averaged) its training state."""

    model_name: str
    model_config: dict[str, Any]
    vocab: VocabInfo
    weights: dict[str, Tensor]
    tokenizer: dict[str, bytes]
    config: dict[str, Any]
    step: int = 0
    epoch: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    training: TrainingState | None = None
    corpus: dict[str, Any] | None = None
    averaged_from: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # keys of a newer attnmt, kept

    @property
    def val_bleu(self) -> float | None:
        """The validation BLEU it was written with (None: not at a validation)."""
        value = self.metrics.get("val_bleu")
        return float(value) if isinstance(value, (int, float)) else None

    def to_dict(self) -> dict[str, Any]:
        """The dict ``torch.save`` writes (see the module docstring)."""
        out: dict[str, Any] = {
            **self.extra,
            "format": FORMAT,
            "model_name": self.model_name,
            "model_config": dict(self.model_config),
            "vocab": self.vocab.to_dict(),
            "model": self.weights,
            "tokenizer": self.tokenizer,
            "config": self.config,
            "step": self.step,
            "epoch": self.epoch,
            "metrics": dict(self.metrics),
        }
        if self.corpus is not None:
            out["corpus"] = self.corpus
        if self.averaged_from is not None:
            out["averaged_from"] = list(self.averaged_from)
        t = self.training
        if t is not None:
            out.update(
                optimizer=t.optimizer,
                scheduler=t.scheduler,
                scaler=t.scaler,
                rng=t.rng,
                sampler=t.sampler,
                trainer_state=t.trainer,
            )
            if t.rng_ranks is not None:
                out["rng_ranks"] = list(t.rng_ranks)
            if t.precision is not None:
                out["precision"] = t.precision
        return out

    @classmethod
    def from_dict(cls, data: Any, source: str = "the checkpoint") -> Checkpoint:
        """The checkpoint a loaded dict holds; CheckpointError naming ``source`` when it is
        not an attnmt checkpoint or lacks what every version wrote."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise CheckpointError(
                f"{source} is not an attnmt checkpoint (expected format {FORMAT})"
            )
        missing = [k for k in REQUIRED_KEYS if k not in data]
        if missing:
            raise CheckpointError(
                f"checkpoint {source} lacks {', '.join(missing)}; it is incomplete"
            )
        vocab = data["vocab"]
        try:
            sizes = VocabInfo(int(vocab["src_size"]), int(vocab["tgt_size"]), bool(vocab["joint"]))
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(
                f"checkpoint {source}: vocab must be {{src_size, tgt_size, joint}}, got {vocab!r}"
            ) from None
        step = int(data.get("step") or 0)
        training = None
        if all(k in data for k in TRAINING_KEYS):
            training = TrainingState(
                optimizer=data["optimizer"],
                scheduler=data["scheduler"],
                scaler=data["scaler"],
                rng=data["rng"],
                sampler=data["sampler"],
                trainer=data.get("trainer_state") or {"step": step},
                rng_ranks=data.get("rng_ranks"),
                precision=_precision(data.get("precision")),
            )
        return cls(
            model_name=str(data["model_name"]),
            model_config=upgrade_model_settings(data["model_config"], str(data["model_name"])),
            vocab=sizes,
            weights=data["model"],
            tokenizer=data["tokenizer"],
            config=_upgraded_run_config(data["config"], str(data["model_name"])),
            step=step,
            epoch=int(data.get("epoch") or 0),
            metrics=dict(data.get("metrics") or {}),
            training=training,
            corpus=data.get("corpus"),
            averaged_from=data.get("averaged_from"),
            extra={k: v for k, v in data.items() if k not in _KNOWN},
        )
