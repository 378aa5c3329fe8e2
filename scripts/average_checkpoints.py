"""Average the parameters of several checkpoints into one that evaluate.py accepts.

    python scripts/average_checkpoints.py --inputs outputs/<run> --k 5 --output avg.pt
    python scripts/average_checkpoints.py --inputs a.pt b.pt c.pt --output avg.pt

The first k checkpoints of the inputs are averaged: a run directory stands for its
checkpoints best first (``checkpoints/best.json``), a file for itself.
θ_avg = (1/n) Σ_i θ_i (attnmt.train.averaging): the output evaluates, it does not resume.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from attnmt.checkpoint import read_best_json
from attnmt.errors import AttnmtError, CheckpointError, ConfigError
from attnmt.train.averaging import average_checkpoints, average_state_dicts

__all__ = ["average_checkpoints", "average_state_dicts", "checkpoint_files", "main"]


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
