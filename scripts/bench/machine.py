"""The machine: CPU model and SIMD flags, and the torch.mm peak per precision."""

from __future__ import annotations

import os
import platform
import subprocess
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .measure import PRECISIONS, Row, best_of, progress

if TYPE_CHECKING:
    from .context import Context

FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU flags that decide the fp32 and bf16 matmul speed (oneDNN, MKL)."""
EMULATED_SIZE = 512
"""The matmul size for a precision without native kernels (bf16 on AVX2: ~0.5 GFLOP/s,
so 2048³ would take minutes)."""


def _cpuinfo() -> dict[str, str]:
    """The first processor's ``key: value`` lines of /proc/cpuinfo ({} elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.split("\n\n")[0].splitlines():
        key, _, value = line.partition(":")
        info[key.strip()] = value.strip()
    return info


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo, else lscpu, else the platform's field)."""
    name = _cpuinfo().get("model name")
    if name:
        return name
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine() or "unknown"


def cpu_flags() -> dict[str, bool]:
    """Which of :data:`FLAGS` the CPU reports."""
    flags = set(_cpuinfo().get("flags", "").split())
    return {f: f in flags for f in FLAGS}


def bf16_native(device: torch.device) -> bool:
    """bf16 runs on native kernels: CUDA with bf16, or a CPU where oneDNN has them."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    from attnmt.train.precision import cpu_has_fast_bf16

    return device.type == "cpu" and cpu_has_fast_bf16()


def machine_info() -> dict[str, Any]:
    """The report's header: CPU, flags, threads, load, library versions."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return {
        "cpu": cpu_name(),
        "cpu_flags": cpu_flags(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "bf16_native_cpu": bf16_native(torch.device("cpu")),
        "cores": cores,
        "threads": torch.get_num_threads(),
        "load_avg_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }


def matmul_peak(sizes: list[int], precision: str, device: torch.device, repeat: int) -> Row:
    """GFLOP/s of ``torch.mm`` of two [n, n] matrices at the current thread count: the best
    over ``sizes`` of the best of ``repeat`` calls each (one size understates the peak: on a
    2-core AVX2 EPYC 2048³ ran at 76-129 GFLOP/s and 512³-1536³ at ~150); emulated bf16 at
    :data:`EMULATED_SIZE` at most."""
    dtype = PRECISIONS[precision] or torch.float32
    native = precision == "fp32" or bf16_native(device)
    ns = sorted({n if native else min(n, EMULATED_SIZE) for n in sizes})
    g = torch.Generator().manual_seed(0)
    by_size: dict[int, float] = {}
    for n in ns:
        a, b = (torch.randn(n, n, generator=g).to(device, dtype) for _ in range(2))
        mm = partial(torch.mm, a, b)
        by_size[n] = 2 * n**3 / best_of(mm, repeat, device) / 1e9
    n = max(by_size, key=lambda k: by_size[k])
    row: Row = {"bench": "matmul", "model": f"mm {n}x{n}x{n}", "device": str(device)}
    row.update(variant=precision, sec_per_step=2 * n**3 / by_size[n] / 1e9, gflops=by_size[n])
    row.update(rate=row["gflops"], unit="GFLOP/s", threads=torch.get_num_threads(), size=n)
    row["gflops_by_size"] = {str(k): v for k, v in by_size.items()}
    sizes_note = ", ".join(f"{k}³ {v:.0f}" for k, v in by_size.items())
    row["note"] = f"best of sizes (GFLOP/s): {sizes_note}"
    if not native:
        row["note"] = f"emulated {precision} (no native kernels): {sizes_note}"
    return row


def bench_matmul(ctx: Context) -> list[Row]:
    """(a) the matmul peak of every precision: what the training steps are measured against."""
    return [progress(ctx.peak(p)) for p in PRECISIONS]
