"""The one batch type: what data/ builds, models read, the loop trains on and search decodes.

A leaf module (torch only), so models/ can name the type without importing data/.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import Tensor


@dataclass
class Batch:
    """One batch, every tensor batch-first.

    src:          LongTensor [B, S]   source ids, EOS-terminated, right-padded
    src_pad_mask: BoolTensor [B, S]   True at padding
    tgt_input:    LongTensor [B, T]   tgt[:, :-1], starts with BOS
    tgt_out:      LongTensor [B, T]   tgt[:, 1:], ends with EOS (before padding)
    tgt_pad_mask: BoolTensor [B, T]   True where tgt_out is padding
    n_tokens:     int                 non-pad target tokens (the loss normaliser)
    index:        LongTensor [B]      position of each pair in its dataset (or -1)
    align_links:  LongTensor [N, 3]   guided alignment's reference links, one row per piece
                                      link (b, t, s): attention row t of pair b (the step
                                      that predicts tgt_out[b, t]) to source position s
    align_rows:   int                 distinct (b, t) rows with a link (the loss normaliser)

    A source-only batch (decoding input) has no target: ``tgt_*`` are None and
    :meth:`target` raises.
    """

    src: Tensor
    src_pad_mask: Tensor
    tgt_input: Tensor | None = None
    tgt_out: Tensor | None = None
    tgt_pad_mask: Tensor | None = None
    n_tokens: int = 0
    index: Tensor | None = None
    align_links: Tensor | None = None
    align_rows: int = 0

    def to(self, device: torch.device | str) -> Batch:
        """Move every tensor to ``device`` (non-blocking where possible)."""
        moved: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = (
                value.to(device, non_blocking=True) if isinstance(value, Tensor) else value
            )
        return Batch(**moved)

    def pin_memory(self) -> Batch:
        """Page-locked copy, so that ``to(cuda)`` can overlap; DataLoader calls this."""
        pinned: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            pinned[f.name] = value.pin_memory() if isinstance(value, Tensor) else value
        return Batch(**pinned)

    def decoder_input(self) -> Tensor:
        """tgt_input [B,T]: what a teacher-forced forward reads (the loss's targets need not
        be there); ValueError for a source-only batch."""
        if self.tgt_input is None:
            raise ValueError(
                "this batch holds only sources (decoding input): it has no decoder input to "
                "teacher-force; build it with make_batch(src, tgt)"
            )
        return self.tgt_input

    def target(self) -> tuple[Tensor, Tensor, Tensor]:
        """(tgt_input [B,T], tgt_out [B,T], tgt_pad_mask [B,T]): what teacher forcing and the
        loss read; ValueError for a source-only batch."""
        if self.tgt_input is None or self.tgt_out is None or self.tgt_pad_mask is None:
            raise ValueError(
                "this batch holds only sources (decoding input): it has no target to "
                "teacher-force or score; build it with make_batch(src, tgt)"
            )
        return self.tgt_input, self.tgt_out, self.tgt_pad_mask

    def __len__(self) -> int:
        return self.src.size(0)
