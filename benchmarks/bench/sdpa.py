"""Fused ``F.scaled_dot_product_attention`` vs the explicit softmax path of
attnmt.models.multihead: the op alone (forward + backward, synthetic shapes), and the
configured Transformer preset's training step on the real batches (the explicit path
forced by patching ``scaled_dot_attention``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any
from unittest import mock

import torch
from torch import Tensor

from .measure import Row, compare, skipped
from .training import TrainCycle, add_step_figures, attnmt_step
from .workload import is_transformer

if TYPE_CHECKING:
    from .context import Context


def explicit_attention() -> Any:
    """Patch the Transformer's attention to always take the explicit (weights) path."""
    from attnmt.models import multihead

    original = multihead.scaled_dot_attention

    def explicit(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        mask: Tensor | None = None,
        causal: bool = False,
        dropout: float = 0.0,
        need_weights: bool = False,
    ) -> tuple[Tensor, None]:
        out, _ = original(q, k, v, mask, causal, dropout, need_weights=True)
        return out, None

    return mock.patch.object(multihead, "scaled_dot_attention", explicit)


def bench_sdpa_op(ctx: Context) -> list[Row]:
    """The attention op, forward + backward, with a padding mask and causal."""
    from attnmt.models.multihead import scaled_dot_attention

    args, device = ctx.args, ctx.device
    rows: list[Row] = []
    b, h, t, d = max(args.batch_tokens // (args.length + 1), 1), 4, args.length + 1, 64
    g = torch.Generator().manual_seed(0)
    qkv = [torch.randn(b, h, t, d, generator=g).to(device).requires_grad_() for _ in range(3)]
    pad = torch.ones(b, 1, 1, t, dtype=torch.bool, device=device)
    pad[::2, ..., -3:] = False  # every other sentence has 3 padding positions
    for case, mask, causal in (("padding_mask", pad, False), ("causal", None, True)):

        def op(weights: bool, mask: Any = mask, causal: bool = causal) -> None:
            q, k, v = qkv
            out, _ = scaled_dot_attention(q, k, v, mask, causal, 0.0, need_weights=weights)
            out.sum().backward()

        variants = {"sdpa": partial(op, False), "explicit": partial(op, True)}
        base = {"bench": "sdpa_op", "model": f"[{b},{h},{t},{d}] {case}"}
        rows += compare(base, variants, device, args)
    return rows


def bench_sdpa_train(ctx: Context) -> list[Row]:
    """The configured Transformer preset's fp32 training step, fused vs explicit."""
    args, device, work = ctx.args, ctx.device, ctx.work
    base = {"bench": "sdpa_train", "model": work.preset}
    if not is_transformer(work.model_config(work.preset)):
        return [skipped(base, device, "-", "skipped: not a Transformer preset")]
    batches = [b.to(device) for b in work.batches]
    tcfg = work.run.trainer
    fused = TrainCycle(attnmt_step(work.model(work.preset, device), tcfg, None, device), batches)
    slow = attnmt_step(work.model(work.preset, device), tcfg, None, device)

    def explicit_step(batch: Any, step: Callable = slow) -> None:
        with explicit_attention():
            step(batch)

    cycles = {"sdpa": fused, "explicit": TrainCycle(explicit_step, batches)}
    n, rounds = len(batches), len(batches) * args.passes
    rows = compare(base, dict(cycles), device, args, n, rounds)
    add_step_figures(ctx, rows, cycles, {"sdpa": "fp32", "explicit": "fp32"})
    return rows


def bench_sdpa(ctx: Context) -> list[Row]:
    """Both: the op, then the training step."""
    return bench_sdpa_op(ctx) + bench_sdpa_train(ctx)
