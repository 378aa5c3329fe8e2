"""Where a training step's time goes, fp32 against bf16 autocast: ``torch.profiler`` over a
few steps of the trainer's update (benchmarks/bench/training.py) on real batches.

    python -m benchmarks.step_profile [--models transformer ...] [--device cuda]
        [--steps 5] [--out FILE.json] [key=value ...]
    python -m benchmarks.step_profile --table FILE.json ...   # a markdown table of reports

Written to find out why bf16 autocast trained 2-4x slower than fp32 on an H100
(docs/performance.md, "On a GPU"). Per preset and precision it reports the synchronised
wall time of a step (median), the number of operator calls the CPU dispatched and of GPU
kernels launched per step, the CPU time per step spent in operators (self time, summed) and
the GPU's busy time per step; then the operators with the most self CPU time and the most
device time. A step whose GPU time is far below its wall time is bound by the CPU's dispatch
(kernel launches), not by the GPU's arithmetic.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from attnmt.atomic import write_json
from attnmt.machine import this_machine
from benchmarks.bench.measure import PRECISIONS, sync
from benchmarks.bench.training import attnmt_step
from benchmarks.bench.workload import load_workload

TOP = 12


def _top_cpu(events: Any, n: int) -> list[dict[str, Any]]:
    """The ``n`` CPU operators (and CUDA runtime calls) with the most self time (µs)."""
    rows = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:n]
    return [
        {"op": e.key, "calls": e.count, "self_cpu_us": round(e.self_cpu_time_total, 1)}
        for e in rows
    ]


def _top_kernels(kernels: list[Any], n: int) -> list[dict[str, Any]]:
    """The ``n`` device kernels (grouped by name) with the most device time (µs)."""
    calls: Counter[str] = Counter()
    busy: Counter[str] = Counter()
    for e in kernels:
        calls[e.name] += 1
        busy[e.name] += e.time_range.elapsed_us()
    return [
        {"kernel": k, "calls": calls[k], "device_us": round(us, 1)} for k, us in busy.most_common(n)
    ]


def profile_steps(step: Any, batches: list[Any], device: torch.device, steps: int) -> dict:
    """Profile ``steps`` calls of ``step`` (cycling ``batches``) after a warm-up pass."""
    for batch in batches:  # warm-up: allocator, kernel selection, lazy init
        step(batch)
    sync(device)
    walls = []
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for i in range(steps):
            start = time.perf_counter()
            step(batches[i % len(batches)])
            sync(device)
            walls.append(time.perf_counter() - start)
    events = prof.key_averages()
    cpu_ops = [e for e in events if e.device_type.name == "CPU"]
    # kernels, copies and memsets on the device; not the ranges that annotate them
    kernels = [
        e
        for e in prof.events()
        if e.device_type.name == "CUDA" and not getattr(e, "is_user_annotation", False)
    ]
    device_us = sum(e.time_range.elapsed_us() for e in kernels)
    return {
        "wall_ms_median": 1e3 * statistics.median(walls),
        "wall_ms": [round(1e3 * w, 2) for w in walls],
        "cpu_op_calls_per_step": sum(e.count for e in cpu_ops) / steps,
        "kernels_per_step": len(kernels) / steps,
        "cpu_self_ms_per_step": sum(e.self_cpu_time_total for e in cpu_ops) / 1e3 / steps,
        "device_busy_ms_per_step": device_us / 1e3 / steps,
        "top_cpu": _top_cpu(cpu_ops, TOP),
        "top_kernels": _top_kernels(kernels, TOP),
    }


def table(paths: list[Path]) -> str:
    """One markdown row per preset, precision and report (``trainer.max_tokens`` from its
    ``max_tokens``): the step's wall time, dispatch and device time, and bf16's speed-up."""
    lines = [
        "| preset | max_tokens | precision | ms/step | ops/step | kernels/step "
        "| CPU ms/step | device ms/step | bf16 speed-up |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for path in paths:
        report = json.loads(path.read_text())
        walls = {(r["model"], r["precision"]): r["wall_ms_median"] for r in report["runs"]}
        for r in report["runs"]:
            fp32 = walls.get((r["model"], "fp32"))
            speedup = (
                f"{fp32 / r['wall_ms_median']:.2f}x" if fp32 and r["precision"] == "bf16" else ""
            )
            lines.append(
                f"| {r['model']} | {report['max_tokens']} | {r['precision']} "
                f"| {r['wall_ms_median']:.1f} | {r['cpu_op_calls_per_step']:.0f} "
                f"| {r['kernels_per_step']:.0f} | {r['cpu_self_ms_per_step']:.1f} "
                f"| {r['device_busy_ms_per_step']:.1f} | {speedup} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("overrides", nargs="*", help="key=value: Hydra overrides of the config")
    p.add_argument("--models", nargs="+", default=["transformer"], help="model presets")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--batches", type=int, default=4, help="distinct batches cycled")
    p.add_argument("--steps", type=int, default=5, help="profiled steps per variant")
    p.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=list(PRECISIONS))
    p.add_argument("--out", type=Path, default=Path("outputs/step_profile.json"))
    p.add_argument("--table", type=Path, nargs="+", help="print these reports as a table")
    args = p.parse_args(argv)
    if args.table:
        print(table(args.table))
        return
    device = torch.device(args.device)
    work = load_workload(args.overrides, args.batches)
    batches = [b.to(device) for b in work.batches]
    report: dict[str, Any] = {"machine": this_machine().to_dict(), **work.summary()}
    runs: list[dict[str, Any]] = []
    for preset in args.models:
        for precision in args.precisions:
            model = work.model(preset, device)
            tcfg = work.run.trainer
            step = attnmt_step(model, tcfg, PRECISIONS[precision], device)
            found = profile_steps(step, batches, device, args.steps)
            runs.append({"model": preset, "precision": precision, **found})
            print(
                f"{preset} {precision}: {found['wall_ms_median']:.1f} ms/step, "
                f"{found['cpu_op_calls_per_step']:.0f} ops, "
                f"{found['kernels_per_step']:.0f} kernels, "
                f"CPU {found['cpu_self_ms_per_step']:.1f} ms, "
                f"device {found['device_busy_ms_per_step']:.1f} ms",
                flush=True,
            )
            del model, step
    report["runs"] = runs
    work.close()
    write_json(args.out, report)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
