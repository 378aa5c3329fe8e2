"""Average the parameters of several checkpoints into one that evaluate.py accepts.

    python scripts/average_checkpoints.py --inputs outputs/<run> --k 5 --output avg.pt
    python scripts/average_checkpoints.py --inputs a.pt b.pt c.pt --output avg.pt

The first k checkpoints of the inputs are averaged: a run directory stands for its
checkpoints best first (``checkpoints/best.json``), a file for itself.
θ_avg = (1/n) Σ_i θ_i for every floating point tensor; integer buffers are taken from
the first checkpoint. The output has the
first checkpoint's format, model, tokenizer and config, ``step`` = the newest step,
``averaged_from`` = the input files, and none of the training state (optimizer, schedule,
scaler, RNGs, sampler, trainer counters): it evaluates, it does not resume.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import load_checkpoint, read_best_json, save_checkpoint
from attnmt.errors import AttnmtError, CheckpointError, ConfigError
from attnmt.train.state import TRAINING_STATE


def checkpoint_files(inputs: Sequence[str | Path], k: int) -> list[Path]:
    """At most k checkpoints in all, in input order: a run directory stands for its
    checkpoints best first (best.json order), a file for itself."""
    if k < 1:
        raise ConfigError(f"--k {k}: must be >= 1")
    files: list[Path] = []
    for item in map(Path, inputs):
        if item.is_file():
            files.append(item)
            continue
        ckpt_dir = item / "checkpoints" if (item / "checkpoints").is_dir() else item
        best = ckpt_dir / "best.json"
        if not best.is_file():
            raise CheckpointError(
                f"{item}: neither a checkpoint file nor a run directory with "
                f"checkpoints/best.json; pass checkpoint files instead"
            )
        names = [e["file"] for e in read_best_json(best)]
        files += [ckpt_dir / n for n in names if (ckpt_dir / n).is_file()][:k]
    if not files:
        raise CheckpointError(f"no checkpoints found in {', '.join(map(str, inputs))}")
    return files[:k]


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


def average_checkpoints(files: Sequence[Path], output: str | Path) -> dict[str, Any]:
    """Average ``files`` into ``output`` (written atomically); returns the new payload."""
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
    save_checkpoint(averaged, output)
    return averaged


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", nargs="+", required=True, help="run directories or .pt files")
    parser.add_argument("--k", type=int, default=5, help="how many best checkpoints (default 5)")
    parser.add_argument("--output", required=True, help="the averaged checkpoint to write")
    args = parser.parse_args(argv)
    try:
        files = checkpoint_files(args.inputs, args.k)
        average_checkpoints(files, args.output)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"averaged {len(files)} checkpoints -> {args.output}", file=sys.stderr)
    for f in files:
        print(f"  {f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
