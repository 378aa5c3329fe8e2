"""The machine: CPU model and SIMD flags, and the torch.mm peak per precision."""

from __future__ import annotations

import os
import platform
import subprocess
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


def matmul_peak(size: int, precision: str, device: torch.device, repeat: int) -> Row:
    """GFLOP/s of ``torch.mm`` of two [size, size] matrices, best of ``repeat`` calls, at
    the current thread count; emulated bf16 at :data:`EMULATED_SIZE` at most."""
    dtype = PRECISIONS[precision] or torch.float32
    native = precision == "fp32" or bf16_native(device)
    n = size if native else min(size, EMULATED_SIZE)
    g = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=g).to(device, dtype) for _ in range(2))
    seconds = best_of(lambda: torch.mm(a, b), repeat, device)
    row: Row = {"bench": "matmul", "model": f"mm {n}x{n}x{n}", "device": str(device)}
    row.update(variant=precision, sec_per_step=seconds, gflops=2 * n**3 / seconds / 1e9)
    row.update(rate=row["gflops"], unit="GFLOP/s", threads=torch.get_num_threads(), size=n)
    if not native:
        row["note"] = f"emulated {precision} (no native kernels): measured at {n}³"
    return row


def bench_matmul(ctx: Context) -> list[Row]:
    """(a) the matmul peak of every precision: what the training steps are measured against."""
    return [progress(ctx.peak(p)) for p in PRECISIONS]
