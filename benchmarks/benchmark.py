"""attnmt's performance report: one run, variants timed interleaved, JSON plus a table.

    python -m benchmarks.benchmark [--quick] [--benches ...] [--out FILE.json] [key=value ...]

``key=value`` arguments (anywhere) are Hydra overrides of configs/train.yaml (the config is
composed as train.py composes it, so the benches use the real defaults). Parts
(``--benches``, modules under benchmarks/bench/):

* ``matmul``:    torch.mm GFLOP/s in fp32 and bf16 at the training thread count, best of
  ``--mm-repeat`` at each of ``--mm-sizes`` (512³, 1024³, 2048³; emulated bf16 at 512³
  at most), the best of them — the peak the training steps are put
  against; the CPU's model name and SIMD flags head the report;
* ``train``:     a real training step (the trainer's: noam lr, autocast, label-smoothed
  loss, backward, clipping, Adam) of every preset of ``--models`` on the first
  ``--batches`` token-bucketed batches of the configured corpus (trainer.max_tokens),
  fp32 and bf16 (bf16 only with native kernels, or ``--force-bf16``): target tokens/s,
  GFLOP/s (FlopCounterMode) and its share of the matmul peak, peak memory, padding; and
  the PyTorch tutorial's ``torch.nn.Transformer`` of the same size on the same batches
  (``vs ref`` = attnmt tokens/s ÷ reference tokens/s); the RNN rows on CPU split the step's
  time into encoder, decoder loop, output layer + loss, backward and optimizer;
* ``sdpa``:      fused scaled-dot-product attention vs the explicit softmax path (the op;
  the configured preset's training step);
* ``translate``: the test split through the Translator, greedy and beam 5, batched vs one
  sentence at a time (random weights: hypotheses run to decode.max_len_a·|x| + max_len_b);
* ``decode``:    incremental decoding (K/V cache) vs recomputing the prefix each step;
* ``data``:      pairs/s of reading, cleaning and encoding the corpus, and of batching;
* ``kernels``:   attnmt's dropout and smoothed cross-entropy vs torch's;
* ``ct2``:       attnmt vs its CTranslate2 export (fp32, int8), greedy and beam 5 batched on
  the same model and sentences, the RNN decoders timed beside them (needs attnmt[ct2]).

The corpus comes through the trainer's data path; when it is not prepared under
data.root (``make data``) nothing is downloaded: the toy_reverse task, generated in a
temporary directory, stands in, and the report says so. Ratios are the median of
per-round time ratios of variants run in turns, so load from other processes mostly
cancels; absolute figures depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import torch

import attnmt
from attnmt.atomic import write_json, write_text
from attnmt.machine import this_machine
from benchmarks.bench.context import Context
from benchmarks.bench.ct2 import bench_ct2
from benchmarks.bench.datapath import bench_data
from benchmarks.bench.decoding import bench_decode, bench_translate
from benchmarks.bench.kernels import bench_kernels
from benchmarks.bench.matmul import bf16_native
from benchmarks.bench.measure import PRECISIONS, Row, progress
from benchmarks.bench.report import add_ratios, markdown
from benchmarks.bench.sdpa import bench_sdpa
from benchmarks.bench.training import bench_train

ROOT = Path(__file__).resolve().parents[1]


def bench_matmul(ctx: Context) -> list[Row]:
    """The matmul peak of every precision: what the training steps are measured against."""
    return [progress(ctx.peak(p)) for p in PRECISIONS]


def machine_info() -> dict[str, Any]:
    """The report's header: :func:`attnmt.machine.this_machine`, and what else the figures
    depend on (cores, the kernels torch picked, native bf16, the load)."""
    m = this_machine()
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return {
        **m.to_dict(),
        "summary": m.short(),
        "bf16_native_cpu": bf16_native(torch.device("cpu")),
        "cores": cores,
        "load_avg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
    }


def code_source() -> str:
    """Where the measured attnmt package was imported from; a warning when that is not this
    checkout (an editable install of another one: run with ``PYTHONPATH=src``)."""
    source = Path(attnmt.__file__).resolve().parent
    if not source.is_relative_to(ROOT):
        print(
            f"warning: attnmt is imported from {source}, not from this checkout ({ROOT}); "
            "PYTHONPATH=src measures this checkout's code",
            file=sys.stderr,
        )
    return str(source)


BENCHES: dict[str, Callable[[Context], list[Row]]] = {
    "matmul": bench_matmul,
    "train": bench_train,
    "sdpa": bench_sdpa,
    "translate": bench_translate,
    "decode": bench_decode,
    "data": bench_data,
    "kernels": bench_kernels,
    "ct2": bench_ct2,  # needs attnmt[ct2]; left out of the default --benches without it
}
DEFAULT_BENCHES = [b for b in BENCHES if b != "ct2" or importlib.util.find_spec("ctranslate2")]
PRESETS = sorted(p.stem for p in (ROOT / "configs" / "model").glob("*.yaml"))
OVERRIDE = re.compile(r"^[+~]{0,2}[A-Za-z_][\w.@/-]*=")
"""A ``key=value`` argument: a Hydra override wherever it stands (after ``--models`` too)."""
QUICK_OVERRIDES = ["model=transformer_tiny", "trainer.max_tokens=256"]
"""--quick: the tiny preset for decoding, small batches (command-line overrides win)."""

NOTES = [
    "ms/call: median over interleaved rounds; train: one call = one training step on the "
    "next of the batches (every variant on the same batch in a round), "
    "rate = median over rounds of target tokens / step time",
    "GFLOP/s: FlopCounterMode's count of each batch's step (matmuls and attention) / its "
    "time, median; % of peak: of the matmul row of the same precision",
    "speedup: over the bench's baseline (train: bf16 over fp32; translate: batched over one "
    "sentence at a time; decode: cached over recomputed prefix); vs ref: attnmt over the "
    "torch.nn.Transformer tutorial model, same batches and precision (both per-round medians)",
    "peak MB: growth of the process RSS during a variant's warm-up calls (indicative)",
    "time split (RNN rows, CPU): share of each section in the timed steps' wall time, from "
    "perf_counter marks in the step and hooks after model.encoder and before the output "
    "layer (enc: source embedding + encoder RNN; dec loop: bridge, keys, decoder steps; "
    "out+loss: readout/generator + label-smoothed loss; optim: clipping, Adam, zero_grad)",
]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options; ``--quick`` shrinks every size so that the whole run takes seconds."""
    argv = sys.argv[1:] if argv is None else argv
    overrides = [a for a in argv if OVERRIDE.match(a)]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("overrides", nargs="*", help="key=value: Hydra overrides (anywhere)")
    p.add_argument("--out", type=Path, help="JSON file (default outputs/bench/<time>.json)")
    p.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda if present")
    p.add_argument("--benches", nargs="+", default=DEFAULT_BENCHES, choices=list(BENCHES))
    p.add_argument("--models", nargs="+", help=f"train: presets (default: {' '.join(PRESETS)})")
    p.add_argument("--batches", type=int, default=8, help="distinct training batches timed")
    p.add_argument("--passes", type=int, default=1, help="timed passes over the batches")
    p.add_argument("--force-bf16", action="store_true", help="train bf16 even when emulated")
    p.add_argument(
        "--mm-sizes",
        type=int,
        nargs="+",
        default=[512, 1024, 2048],
        help="matmul: n of the n×n×n products; the peak is the best of them",
    )
    p.add_argument("--mm-repeat", type=int, default=5, help="matmul: best of this many")
    p.add_argument(
        "--decode-sentences", type=int, default=100, help="translate: test sentences (0: all)"
    )
    p.add_argument("--cache-sentences", type=int, default=32, help="decode: cached/uncached")
    p.add_argument("--batch-tokens", type=int, default=2048, help="sdpa op, kernels: tokens")
    p.add_argument("--length", type=int, default=24, help="sdpa op, ct2: synthetic length")
    p.add_argument("--vocab", type=int, default=4000, help="kernels, ct2: synthetic vocabulary")
    p.add_argument("--ct2-sentences", type=int, default=32)
    p.add_argument("--ct2-ckpt", help="ct2: a trained Transformer run/checkpoint instead")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls (train: one pass)")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds (train: --passes)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test of the script")
    args = p.parse_args([a for a in argv if a not in overrides])
    args.overrides = overrides
    if args.models is None:
        args.models = ["transformer_tiny", "rnn_luong"] if args.quick else PRESETS
    if args.quick:
        args.overrides = [*QUICK_OVERRIDES, *args.overrides]
        args.batches, args.passes, args.mm_sizes, args.mm_repeat = 2, 1, [256], 1
        args.decode_sentences, args.cache_sentences, args.ct2_sentences = 4, 4, 4
        args.batch_tokens, args.length, args.vocab = 200, 8, 64
        args.warmup, args.repeat = 0, 1
    return args


def main(argv: list[str] | None = None) -> list[Row]:
    """Run the benches, print the report, write the JSON (and the report beside it)."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    started = datetime.now()
    meta: dict[str, Any] = {"started": started.isoformat(timespec="seconds")}
    meta.update(machine=machine_info(), notes=NOTES, attnmt_source=code_source())
    meta["args"] = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    names = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    ctx = Context(args, [torch.device(name) for name in names])
    rows: list[Row] = []
    try:
        for device in ctx.devices:
            ctx.device = device
            for bench in args.benches:
                try:
                    rows.extend(BENCHES[bench](ctx))
                except ImportError as err:  # an optional package is missing
                    print(f"skip {bench} on {device}: {err}", file=sys.stderr)
                    rows.append({"bench": bench, "model": "-", "device": str(device)})
                    rows[-1].update(variant="-", error=f"skipped: {err}")
        meta["workload"] = ctx.work.summary() if "work" in vars(ctx) else None
        meta["matmul_peaks"] = list(ctx.peaks.values())
    finally:
        ctx.close()
    add_ratios(rows)
    meta["load_avg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    meta["seconds"] = (datetime.now() - started).total_seconds()
    report = markdown(meta, rows)
    print(report)
    out = args.out or Path("outputs/bench") / f"{started:%Y-%m-%d_%H-%M-%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, {"meta": meta, "rows": rows})
    write_text(out.with_suffix(".md"), report + "\n")
    print(f"\nwrote {out} and {out.with_suffix('.md')}")
    return rows


if __name__ == "__main__":
    main()
