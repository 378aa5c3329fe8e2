"""Average the parameters of several checkpoints into one that evaluate.py accepts.

    python scripts/average_checkpoints.py --inputs outputs/<run> --k 5 --output avg.pt
    python scripts/average_checkpoints.py --inputs a.pt b.pt c.pt --output avg.pt

The first k checkpoints of the inputs are averaged: a run directory stands for its
checkpoints best first (``checkpoints/best.json``), a file for itself.
θ_avg = (1/n) Σ_i θ_i (attnmt.train.averaging): the output evaluates, it does not resume.
So it never replaces what a run still uses, ``--force`` or not: a run's ``last.pt`` (the
training state ``resume=`` needs), a file its best.json lists, a name its trainer writes
(``best-<step>.pt``, ``averaged.pt``), an input; another existing file only with
``--force`` (attnmt.output_guard, the guard every command's output path goes through).
A checkpoint named twice (the same file, also through a run directory) is
refused. All of that is checked before any checkpoint is read.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from attnmt.checkpoint import read_best_json
from attnmt.errors import AttnmtError, CheckpointError, ConfigError
from attnmt.output_guard import OutputKind, is_checkpoint
from attnmt.output_guard import check_output as check_output_path
from attnmt.run_dir import BEST_JSON, RunDir
from attnmt.train.averaging import average_checkpoints, average_state_dicts

__all__ = [
    "average_checkpoints",
    "average_state_dicts",
    "check_distinct",
    "check_output",
    "checkpoint_files",
    "main",
]


def checkpoint_files(inputs: Sequence[str | Path], k: int) -> list[Path]:
    """At most k checkpoints in all, in input order: a run directory stands for its
    checkpoints best first (best.json order), a file for itself. ConfigError naming a
    checkpoint that comes twice (:func:`check_distinct`)."""
    if k < 1:
        raise ConfigError(f"--k {k}: must be >= 1")
    found: list[tuple[Path, str]] = []  # (file, where it comes from)
    for item in map(Path, inputs):
        if item.is_file():
            found.append((item, str(item)))
            continue
        ckpt_dir = RunDir.checkpoint_dir(item)
        best = ckpt_dir / BEST_JSON
        if not best.is_file():
            raise CheckpointError(
                f"{item}: neither a checkpoint file nor a run directory with "
                f"checkpoints/best.json; pass checkpoint files instead"
            )
        names = [e["file"] for e in read_best_json(best)]
        listed = [ckpt_dir / n for n in names if (ckpt_dir / n).is_file()][:k]
        found += [(f, str(best)) for f in listed]
    if not found:
        raise CheckpointError(f"no checkpoints found in {', '.join(map(str, inputs))}")
    check_distinct(found[:k])
    return [f for f, _ in found[:k]]


def check_distinct(found: Sequence[tuple[Path, str]]) -> None:
    """ConfigError naming a checkpoint that comes twice among ``found`` ((file, where it
    comes from) pairs): the same file after resolving links and ``..``, given twice or
    given and also listed in a run's best.json. The mean would weigh it twice."""
    seen: dict[Path, str] = {}
    for f, origin in found:
        key = f.resolve()
        if key in seen:
            raise ConfigError(
                f"--inputs: {key} comes twice (from {seen[key]} and from {origin}); each "
                "checkpoint is averaged once, so name each one once (nothing was written)"
            )
        seen[key] = origin


AVERAGED = OutputKind(
    "an averaged checkpoint", "--output", "avg.pt", own=is_checkpoint, force="--force", in_runs=True
)
"""What --output may name (attnmt.output_guard): a new file, in a run too, but never one the
run uses or its trainer writes; an existing file only with --force."""


def check_output(output: Path, files: Sequence[Path], force: bool) -> None:
    """ConfigError when writing ``output`` would destroy something: what the shared guard
    refuses (a run's ``last.pt``, a file of its best.json, a name its trainer writes, its
    record, a prepared corpus' file, a directory, without ``force`` any existing file) or
    one of ``files`` (the inputs)."""
    check_output_path(output, AVERAGED, force)
    if any(output.resolve() == f.resolve() for f in files):
        raise ConfigError(
            f"--output {output} is one of the checkpoints being averaged; choose another "
            "name, e.g. avg.pt (nothing was written)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inputs", nargs="+", required=True, help="run directories or .pt files")
    parser.add_argument("--k", type=int, default=5, help="how many best checkpoints (default 5)")
    parser.add_argument("--output", required=True, help="the averaged checkpoint to write")
    parser.add_argument(
        "--force",
        action="store_true",
        help="replace an existing --output (never a checkpoint a run still uses)",
    )
    args = parser.parse_args(argv)
    try:
        files = checkpoint_files(args.inputs, args.k)
        check_output(Path(args.output), files, args.force)
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
