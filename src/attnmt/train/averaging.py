"""Checkpoint averaging: θ_avg = (1/n) Σ_i θ_i over several checkpoints of one run.

Averaging the parameters of the last or best checkpoints of a run usually validates
better than any one of them (Vaswani et al. 2017 average the last 5 or 20). Used by the
trainer at the end of a run (``trainer.average_best``) and by
``scripts/average_checkpoints.py``. Floating point tensors are averaged in float64 and
cast back; integer buffers come from the first checkpoint. The result has the first
checkpoint's model, tokenizer and config, ``step`` = the newest step, ``averaged_from`` =
the input files, and none of the training state: it evaluates, it
does not resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.checkpoint_format import Checkpoint
from attnmt.errors import CheckpointError


def average_state_dicts(states: Sequence[dict[str, torch.Tensor]], names: Sequence[str]) -> dict:
    """Mean of each floating point tensor (in float64, cast back); others from the first."""
    first = states[0]
    for state, name in zip(states[1:], names[1:]):
        if state.keys() != first.keys():
            diff = sorted(set(state) ^ set(first))[:5]
            raise CheckpointError(f"{name} has different parameters than {names[0]}: {diff}")
        for key, value in state.items():
            if value.shape != first[key].shape:
                raise CheckpointError(
                    f"{name}: parameter {key} has shape {tuple(value.shape)}, "
                    f"but {tuple(first[key].shape)} in {names[0]}"
                )
    out: dict[str, torch.Tensor] = {}
    for key, value in first.items():
        if value.is_floating_point():
            total = torch.stack([s[key].double() for s in states]).mean(dim=0)
            out[key] = total.to(value.dtype)
        else:
            out[key] = value.clone()
    return out


def average_files(files: Sequence[Path]) -> Checkpoint:
    """The average of ``files`` (checkpoints of one model and tokenizer): the first one's
    model, tokenizer and config, the mean weights, the newest step, no training state."""
    checkpoints = [load_checkpoint(f) for f in files]
    names = [str(f) for f in files]
    first = checkpoints[0]
    for other, name in zip(checkpoints[1:], names[1:]):
        for what in ("model_name", "model_config", "vocab", "tokenizer"):
            if getattr(other, what) != getattr(first, what):
                raise CheckpointError(
                    f"{name} and {names[0]} differ in {what}; only checkpoints of one "
                    "model and tokenizer can be averaged"
                )
    return replace(
        first,
        weights=average_state_dicts([c.weights for c in checkpoints], names),
        step=max(c.step for c in checkpoints),
        metrics={},
        training=None,
        averaged_from=names,
    )


def average_checkpoints(files: Sequence[Path], output: str | Path) -> Checkpoint:
    """Average ``files`` into ``output`` (written atomically); returns the new checkpoint."""
    averaged = average_files(files)
    save_checkpoint(averaged, output)
    return averaged
