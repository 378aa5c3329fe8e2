"""Does the precision probe's one repeated batch predict a run's bf16 speed-up? The probe
(attnmt/train/precision_probe.py) times one batch over and over; a run's loader gives nearly
every batch a new shape. This times the trainer's update (benchmarks/bench/training.py) in
fp32 and bf16 autocast, each precision on its own copy of the model (same initial weights):

    python -m benchmarks.probe_shapes [--models transformer_base] [--device cuda]
        [--batches 40] [--rounds 15] [--pad-multiple 8] [--out FILE.json] [key=value ...]

* ``trainer_probe``: what ``trainer.precision=auto`` itself times: its batch
  (:func:`~attnmt.train.precision_probe.probe_batch`, the first training pairs in corpus
  order) and its forward+backward (no optimizer step) under its own rule
  (:func:`~attnmt.train.precision_probe.measure`), on a third copy of the model;
* ``probe``: the loader's first batch, one untimed warm-up each, then ``--rounds`` rounds
  interleaved (fp32, bf16), as the probe does, with the trainer's whole update;
* ``first visit``: the loader's next ``--batches`` batches, each stepped once in fp32 and once
  in bf16 (which goes first alternates), the first time each shape is seen;
* ``second visit``: the same batches again, their shapes now seen by both.

``--pad-multiple N`` right-pads every batch's source and target length to a multiple of N
(padding masked, so the loss is unchanged): fewer distinct shapes, and tensor-core friendly
lengths. Per part: the bf16 speed-up (fp32 seconds / bf16 seconds) of the summed steps and
the median of the per-batch ratios. A probe speed-up far above the first visit's and near the
second's says the probe misses a cost bf16 pays per new shape. Written after the third GPU
check found the probe 2.02x for bf16 on an H100 where whole runs trained 0.66x; the fourth
found the cost (cuDNN's attention plans) with it (docs/performance.md).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from attnmt import PAD_ID
from attnmt.atomic import write_json
from attnmt.batch import Batch
from attnmt.machine import this_machine
from attnmt.train import precision_probe
from benchmarks.bench.measure import PRECISIONS, sync
from benchmarks.bench.training import attnmt_step
from benchmarks.bench.workload import Workload, load_workload

Step = Callable[[Batch], None]


def timed(step: Step, batch: Batch, device: torch.device) -> float:
    """Seconds of one ``step(batch)``, the device synchronised before and after."""
    sync(device)
    start = time.perf_counter()
    step(batch)
    sync(device)
    return time.perf_counter() - start


def speedup(fp32: Sequence[float], bf16: Sequence[float]) -> dict[str, float]:
    """bf16's speed-up over fp32: of the summed seconds, and the median per-pair ratio."""
    return {
        "sum_fp32_s": round(sum(fp32), 6),
        "sum_bf16_s": round(sum(bf16), 6),
        "speedup_sum": round(sum(fp32) / sum(bf16), 3),
        "speedup_median": round(statistics.median(a / b for a, b in zip(fp32, bf16)), 3),
    }


def _pad(x: Tensor, n: int, value: int | bool) -> Tensor:
    """``x`` [B, L] right-padded with ``value`` to [B, ceil(L / n) * n]."""
    return F.pad(x, (0, -x.size(1) % n), value=value)


def padded(batch: Batch, n: int) -> Batch:
    """``batch`` with its source and target lengths right-padded to multiples of ``n``
    (PAD ids, masked): the same loss and gradients, other tensor shapes."""
    if n <= 1:
        return batch
    tgt_in, tgt_out, tgt_mask = batch.target()
    return Batch(
        src=_pad(batch.src, n, PAD_ID),
        src_pad_mask=_pad(batch.src_pad_mask, n, True),
        tgt_input=_pad(tgt_in, n, PAD_ID),
        tgt_out=_pad(tgt_out, n, PAD_ID),
        tgt_pad_mask=_pad(tgt_mask, n, True),
        n_tokens=batch.n_tokens,
        index=batch.index,
    )


def shape(batch: Batch) -> list[list[int]]:
    """[[batch, source length], [batch, target length]] of one batch."""
    return [list(batch.src.shape), list(batch.target()[1].shape)]


def pairs(steps: dict[str, Step], batches: Sequence[Batch], device: torch.device) -> dict:
    """Each batch stepped once per precision, the order alternating batch by batch; the
    summary of :func:`speedup` and, per batch, its shape and both precisions' seconds."""
    times: dict[str, list[float]] = {"fp32": [], "bf16": []}
    for i, batch in enumerate(batches):
        order = ("fp32", "bf16") if i % 2 == 0 else ("bf16", "fp32")
        for name in order:
            times[name].append(timed(steps[name], batch, device))
    per_batch = [
        {"shape": shape(b), "fp32_s": round(a, 6), "bf16_s": round(c, 6)}
        for b, a, c in zip(batches, times["fp32"], times["bf16"])
    ]
    return {**speedup(times["fp32"], times["bf16"]), "per_batch": per_batch}


def shapes(batches: Sequence[Batch]) -> int:
    """Distinct (source, target) tensor shapes among ``batches``."""
    return len({str(shape(b)) for b in batches})


def trainer_probe(work: Workload, preset: str, device: torch.device, pad: int = 1) -> dict:
    """The trainer's own probe (module docstring): its batch, steps and timing rule."""
    batch = precision_probe.probe_batch(work.data.train, work.run.trainer.max_tokens)
    batch = padded(batch, pad).to(device)
    model = work.model(preset, device)
    with precision_probe.untouched(model):
        steps = precision_probe.model_steps(model, batch)
        timing = precision_probe.measure(steps, precision_probe.device_sensors(device))
    choice, why = precision_probe.decide(timing.times)
    return {
        **speedup(timing.times["fp32"], timing.times["bf16"]),
        "rounds": timing.rounds,
        "choice": choice,
        "why": why,
        "shape": shape(batch),
    }


def measure(
    work: Workload, preset: str, device: torch.device, n: int, rounds: int, pad: int = 1
) -> dict:
    """The parts of the module docstring for one model preset."""
    probed = trainer_probe(work, preset, device, pad)
    batches = [padded(b, pad).to(device) for b in work.batches]
    first, rest = batches[0], batches[1 : 1 + n]
    steps = {
        name: attnmt_step(work.model(preset, device), work.run.trainer, PRECISIONS[name], device)
        for name in ("fp32", "bf16")
    }
    for step in steps.values():  # the probe's untimed warm-up
        step(first)
    probe = pairs(steps, [first] * (2 * rounds), device)
    return {
        "model": preset,
        "pad_multiple": pad,
        "trainer_probe": probed,
        "probe": probe,
        "first_visit": pairs(steps, rest, device),
        "second_visit": pairs(steps, rest, device),
        "batches": len(rest),
        "distinct_shapes": shapes(rest),
        "probe_batch_shape": shape(first),
    }


def line(found: dict[str, Any]) -> str:
    parts = ("trainer_probe", "probe", "first_visit", "second_visit")
    ratios = ", ".join(f"{p} {found[p]['speedup_sum']:.2f}x" for p in parts)
    return (
        f"{found['model']}: bf16 speed-up (summed seconds) {ratios}; "
        f"{found['distinct_shapes']} shapes in {found['batches']} batches"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="key=value: Hydra overrides of the config")
    p.add_argument("--models", nargs="+", default=["transformer"], help="model presets")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", type=int, default=40, help="new-shape batches per visit")
    p.add_argument("--rounds", type=int, default=15, help="the probe part's (fp32, bf16) pairs")
    p.add_argument("--pad-multiple", type=int, default=1, help="pad lengths to multiples of N")
    p.add_argument("--out", type=Path, default=Path("outputs/probe_shapes.json"))
    args = p.parse_args(argv)
    device = torch.device(args.device)
    work = load_workload(args.overrides, args.batches + 1)
    report: dict[str, Any] = {"machine": this_machine().to_dict(), **work.summary()}
    report["runs"] = []
    for preset in args.models:
        found = measure(work, preset, device, args.batches, args.rounds, args.pad_multiple)
        report["runs"].append(found)
        print(line(found), flush=True)
        write_json(args.out, report)  # after each preset: a time limit keeps what was done
    work.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
