"""attnmt's CPU dropout (4 masks per 64-bit random word) vs ``F.dropout``, and the
closed-form-gradient smoothed cross-entropy vs ``F.cross_entropy(label_smoothing=0.1)``,
each forward + backward on synthetic tensors."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from .measure import Row, compare

if TYPE_CHECKING:
    from .context import Context


def bench_kernels(ctx: Context) -> list[Row]:
    """Dropout on [tokens, 1024] (an FFN hidden layer) and the loss on [tokens, vocab],
    ``--batch-tokens`` rows each."""
    from attnmt.kernels import dropout
    from attnmt.train.loss import label_smoothed_nll

    args, device = ctx.args, ctx.device
    g = torch.Generator().manual_seed(0)
    n = args.batch_tokens
    x = torch.randn(n, 1024, generator=g).to(device).requires_grad_()
    logits = torch.randn(1, n, args.vocab, generator=g).to(device).requires_grad_()
    target = torch.randint(4, args.vocab, (1, n), generator=g).to(device)

    def drop(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        fn(x).sum().backward()

    def loss(fn: Callable[[], torch.Tensor]) -> None:
        fn().backward()

    def torch_ce() -> torch.Tensor:
        return F.cross_entropy(
            logits[0], target[0], ignore_index=0, label_smoothing=0.1, reduction="sum"
        )

    shape = f"{n}x1024 p=0.1"
    variants = {
        "torch": functools.partial(drop, lambda t: F.dropout(t, 0.1, True)),
        "attnmt": functools.partial(drop, lambda t: dropout(t, 0.1, True)),
    }
    rows = compare({"bench": "dropout", "model": shape}, variants, device, args)
    variants = {
        "torch": functools.partial(loss, torch_ce),
        "attnmt": functools.partial(loss, lambda: label_smoothed_nll(logits, target, 0.1).loss),
    }
    shape = f"{n}x{args.vocab} eps=0.1"
    return rows + compare({"bench": "loss", "model": shape}, variants, device, args)
