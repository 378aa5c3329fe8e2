"""Checkpoint averaging: θ_avg = (1/n) Σ_i θ_i over several checkpoints of one run.

Averaging the parameters of the last or best checkpoints of a run usually validates
better than any one of them (Vaswani et al. 2017 average the last 5 or 20). Used by the
trainer at the end of a run (``trainer.average_best``) and by
``scripts/average_checkpoints.py``. Floating point tensors are averaged in float64 and
cast back; integer buffers come from the first checkpoint. The result has the first
checkpoint's format, model, tokenizer and config, ``step`` = the newest step,
``averaged_from`` = the input files, and none of the training state: it evaluates, it
does not resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.errors import CheckpointError
from attnmt.train.state import TRAINING_STATE


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


def average_payloads(files: Sequence[Path]) -> dict[str, Any]:
    """The averaged payload of ``files`` (checkpoints of one model and tokenizer)."""
    payloads = [load_checkpoint(f) for f in files]
    names = [str(f) for f in files]
    first = payloads[0]
    for payload, name in zip(payloads[1:], names[1:]):
        for key in ("model_name", "model_config", "vocab", "tokenizer"):
            if payload[key] != first[key]:
                raise CheckpointError(
                    f"{name} and {names[0]} differ in {key}; only checkpoints of one "
                    "model and tokenizer can be averaged"
                )
    averaged = {k: v for k, v in first.items() if k not in TRAINING_STATE}
    averaged["model"] = average_state_dicts([p["model"] for p in payloads], names)
    averaged["step"] = max(int(p.get("step", 0)) for p in payloads)
    averaged["averaged_from"] = names
    averaged["metrics"] = {}
    return averaged


def average_checkpoints(files: Sequence[Path], output: str | Path) -> dict[str, Any]:
    """Average ``files`` into ``output`` (written atomically); returns the new payload."""
    averaged = average_payloads(files)
    save_checkpoint(averaged, output)
    return averaged
