"""The reference: the PyTorch translation tutorial's Seq2SeqTransformer, batch-first.

https://pytorch.org/tutorials/beginner/translation_transformer.html: ``nn.Embedding``
scaled by sqrt(d_model) for source and target (separate tables), sinusoidal positions with
dropout, ``nn.Transformer``, an ``nn.Linear`` generator, Xavier-uniform initialisation;
trained with ``F.cross_entropy(ignore_index=pad)`` and Adam(lr 1e-4, betas (0.9, 0.98),
eps 1e-9), no gradient clipping. Differences, so that it does the same work as the preset
it is compared with: batch-first tensors, boolean masks throughout (the tutorial's float
causal mask beside boolean padding masks is deprecated), ``label_smoothing=0.1``, the
preset's sizes,
activation and norm placement, and the preset's ``attention_dropout`` on the attention
weights (``nn.Transformer`` would apply ``dropout`` there, which needs the slow unfused path).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt import PAD_ID
from attnmt.batch import Batch

from .measure import autocast


class PositionalEncoding(nn.Module):
    """Sinusoidal positions added to batch-first embeddings, then dropout."""

    table: Tensor  # [1, max_len, d_model], a buffer

    def __init__(self, d_model: int, dropout: float, max_len: int = 5000) -> None:
        super().__init__()
        den = torch.exp(-torch.arange(0, d_model, 2) * math.log(10000) / d_model)
        pos = torch.arange(0, max_len).reshape(max_len, 1)
        table = torch.zeros((max_len, d_model))
        table[:, 0::2] = torch.sin(pos * den)
        table[:, 1::2] = torch.cos(pos * den)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("table", table.unsqueeze(0))  # [1, max_len, d_model]

    def forward(self, x: Tensor) -> Tensor:
        return self.dropout(x + self.table[:, : x.size(1)])


class Seq2SeqTransformer(nn.Module):
    """The tutorial's model: embeddings, positions, ``nn.Transformer``, generator."""

    def __init__(self, cfg: Any, src_vocab: int, tgt_vocab: int) -> None:
        super().__init__()
        d = cfg.d_model
        with warnings.catch_warnings():  # norm_first: "enable_nested_tensor ... is False"
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(
                d_model=d,
                nhead=cfg.n_heads,
                num_encoder_layers=cfg.enc_layers,
                num_decoder_layers=cfg.dec_layers,
                dim_feedforward=cfg.d_ff,
                dropout=cfg.dropout,
                activation=cfg.activation,
                batch_first=True,
                norm_first=cfg.norm == "pre",
            )
        for module in self.transformer.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = cfg.attention_dropout
        self.src_emb = nn.Embedding(src_vocab, d)
        self.tgt_emb = nn.Embedding(tgt_vocab, d)
        self.positions = PositionalEncoding(d, cfg.dropout)
        self.generator = nn.Linear(d, tgt_vocab)
        self.scale = math.sqrt(d)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Logits [B, T, V] for source ids [B, S] and decoder input ids [B, T]."""
        src_pad, tgt_pad = src.eq(PAD_ID), tgt.eq(PAD_ID)
        s, t = src.size(1), tgt.size(1)
        src_mask = torch.zeros(s, s, dtype=torch.bool, device=src.device)
        tgt_mask = torch.ones(t, t, dtype=torch.bool, device=src.device).triu(1)  # True: hidden
        out = self.transformer(
            self.positions(self.src_emb(src) * self.scale),
            self.positions(self.tgt_emb(tgt) * self.scale),
            src_mask=src_mask,
            tgt_mask=tgt_mask,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad,
        )
        return self.generator(out)


def reference_step(
    model: Seq2SeqTransformer, dtype: torch.dtype | None, device: torch.device
) -> Callable[[Batch], None]:
    """One tutorial training step on a batch: forward, loss, backward, Adam."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
    model.train()

    def step(batch: Batch) -> None:
        assert batch.tgt_input is not None and batch.tgt_out is not None
        with autocast(device, dtype):
            logits = model(batch.src, batch.tgt_input)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.size(-1)).float(),
            batch.tgt_out.reshape(-1),
            ignore_index=PAD_ID,
            label_smoothing=0.1,
        )
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step
