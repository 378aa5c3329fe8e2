"""Timing and memory: variants timed interleaved, medians, peak memory growth."""

from __future__ import annotations

import contextlib
import ctypes
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

Row = dict[str, Any]
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def peak_memory(device: torch.device, out: Row) -> Iterator[None]:
    """Put ``peak_mem_mb`` (and how it was measured) into ``out``.

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the peak growth of the process RSS
    (sampled from /proc/self/statm every 2 ms, after malloc_trim; indicative only).
    """
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        yield
        out["peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        out["mem_kind"] = "cuda_max_allocated"
        return
    if not os.path.exists("/proc/self/statm"):
        yield
        return
    _trim()
    base, peak, stop = _rss_bytes(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    out["peak_mem_mb"] = max(peak[0] - base, 0) / 2**20
    out["mem_kind"] = "cpu_rss_growth"


def compare(
    base: Row,
    variants: Mapping[str, Callable[[], Any]],
    device: torch.device,
    args: Any,
    warmup: int | None = None,
    rounds: int | None = None,
) -> list[Row]:
    """Time the variants *interleaved* (A B A B ...), so load changes hit all alike.

    Each variant first runs ``warmup`` untimed calls (default ``max(args.warmup, 1)``)
    under :func:`peak_memory` (the first training step allocates the optimizer state:
    that is the peak), then ``rounds`` (default ``args.repeat``) timed calls in turns. A
    variant that raises RuntimeError (e.g. no bf16 kernel) gets an ``error`` instead of
    times. Rows hold the median ``sec_per_step`` and every round's time in ``times``.
    """
    warmup = max(args.warmup, 1) if warmup is None else warmup
    rounds = args.repeat if rounds is None else rounds
    rows = {v: {**base, "device": str(device), "variant": v} for v in variants}
    ready: dict[str, Callable[[], Any]] = {}
    for name, fn in variants.items():
        try:
            with peak_memory(device, rows[name]):
                for _ in range(warmup):
                    fn()
                sync(device)
            ready[name] = fn
        except RuntimeError as err:
            rows[name]["error"] = (str(err).splitlines() or [type(err).__name__])[0][:80]
    times: dict[str, list[float]] = {name: [] for name in ready}
    for _ in range(rounds):
        for name, fn in ready.items():
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        rows[name]["sec_per_step"] = statistics.median(ts)
        rows[name]["times"] = ts
    return [progress(rows[name]) for name in variants]


def best_of(fn: Callable[[], Any], repeat: int, device: torch.device) -> float:
    """The shortest of ``repeat`` timed calls after one untimed call (seconds)."""
    fn()
    sync(device)
    best = float("inf")
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return best


def add_rate(rows: list[Row], key: str, unit: str, amount: float) -> list[Row]:
    """``row[key]`` = ``amount`` (sentences, pairs, ...) per second of the median call,
    and ``rate``/``unit`` for the table."""
    for row in rows:
        if "sec_per_step" in row:
            row[key] = amount / row["sec_per_step"]
            row["rate"], row["unit"] = row[key], unit
    return rows


def progress(row: Row) -> Row:
    """Echo a finished measurement to stderr (the table comes at the end) and return it."""
    ms = f"{row['sec_per_step'] * 1e3:.1f} ms" if "sec_per_step" in row else row.get("error", "")
    name = f"{row['bench']} {row['model']} {row['device']} {row['variant']}"
    print(f"  {name}: {ms}", file=sys.stderr, flush=True)
    return row


def skipped(base: Row, device: torch.device, variant: str, why: str) -> Row:
    """A row for a variant that was not run, saying why."""
    return progress({**base, "device": str(device), "variant": variant, "error": why})


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    """``torch.autocast`` to ``dtype``, or nothing for fp32 (``dtype`` None)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
