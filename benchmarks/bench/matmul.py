"""The torch.mm peak GFLOP/s per precision: what the training steps are put against."""

from __future__ import annotations

from functools import partial

import torch

from .measure import PRECISIONS, Row, best_of

EMULATED_SIZE = 512
"""The matmul size for a precision without native kernels (bf16 on AVX2: ~0.5 GFLOP/s,
so 2048³ would take minutes)."""


def bf16_native(device: torch.device) -> bool:
    """bf16 runs on native kernels: CUDA with bf16, or a CPU where oneDNN has them."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    from attnmt.train.precision import cpu_has_fast_bf16

    return device.type == "cpu" and cpu_has_fast_bf16()


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
