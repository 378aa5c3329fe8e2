"""The Transformer encoder–decoder (Vaswani et al. 2017) behind the attnmt model interface.

    x₀ = √d_model · E[y] + PE(pos);  encoder: N × (self-attn, FFN);
    decoder: N × (causal self-attn, cross-attn over memory, FFN);  p(y_t) = softmax(h_t Eᵀ)

Pre-norm stacks end with a final LayerNorm. Source and target embeddings are one
matrix when ``share_embeddings`` and the vocabulary is joint (same size); the output
projection is the target embedding when ``tie_embeddings``.

Incremental decoding keeps, per decoder layer, the self-attention keys/values of the
steps so far ([B,H,t,d_k], grown by one each step) and the cross-attention keys/values
of the memory (computed once in :meth:`Transformer.init_state`). Without autograd (the
searches run under ``torch.no_grad``), the self-attention cache
is a view [:, :, :t] of a buffer [B,H,capacity,d_k] with room after it: a step writes its
key/value into the next slot in place (no copy of the cache; the capacity doubles when
full), and :meth:`Transformer.reorder_state` gathers the rows into a buffer with one free
slot (one copy per beam step, not two); the cross-attention keys/values are not copied
when beams move within their sentence. A state is the newest user of its buffer until a
step appends: stepping an older state again copies its cache instead of overwriting.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt import PAD_ID
from attnmt.batch import Batch
from attnmt.errors import ConfigError
from attnmt.kernels import Dropout
from attnmt.models.base import (
    CrossAttentionRequest,
    Seq2Seq,
    State,
    TypedModuleList,
    select_state,
)
from attnmt.models.positional import POSITIONS
from attnmt.models.transformer_layers import (
    ACTIVATIONS,
    NORM_FIRST,
    DecoderLayer,
    EncoderLayer,
    concat_cache,
)
from attnmt.schema import parse, within


@dataclass
class TransformerConfig:
    """Schema of ``configs/model/transformer*.yaml`` (unknown keys are rejected)."""

    name: str = "transformer"
    d_model: int = 256
    n_heads: int = 4
    enc_layers: int = 2
    dec_layers: int = 2
    d_ff: int = 512
    dropout: float = field(default=0.1, metadata=within(0, 1, hi_open=True))
    # >0 forces the unfused SDPA kernel on CPU
    attention_dropout: float = field(default=0.0, metadata=within(0, 1, hi_open=True))
    activation: str = "relu"  # relu | gelu
    norm: str = "pre"  # pre | post
    positions: str = "sinusoidal"  # sinusoidal | learned
    max_positions: int = 1024  # learned positions only
    tie_embeddings: bool = True  # output projection = target embedding
    share_embeddings: bool = True  # source = target embedding when the vocabulary is joint

    def check(self, prefix: str = "model") -> None:
        """Value checks that types cannot express; ConfigError naming ``<prefix>.<key>``."""
        for key, choices in _CHOICES.items():
            if getattr(self, key) not in choices:
                raise ConfigError(
                    f"{prefix}.{key}={getattr(self, key)!r} is not one of: {', '.join(choices)}"
                )
        for key in ("d_model", "n_heads", "enc_layers", "dec_layers", "d_ff", "max_positions"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{prefix}.{key} must be positive, got {getattr(self, key)}")
        if self.d_model % self.n_heads:
            raise ConfigError(
                f"{prefix}.d_model={self.d_model} must be divisible by "
                f"{prefix}.n_heads={self.n_heads}"
            )
        # the dropouts' ranges (within(...) above) are checked by attnmt.schema.parse


class CacheFill:
    """How many positions of the self-attention cache buffers of one decoding state hold
    keys/values (shared by the states that view those buffers). A step appends in place only
    when its state's length t equals ``filled`` (it is the newest state of the buffers)."""

    __slots__ = ("filled",)

    def __init__(self, filled: int) -> None:
        self.filled = filled


def _room(cache: Tensor) -> int:
    """The capacity of the buffer that ``cache`` [B,H,t,d] is the view [:, :, :t] of (its
    own t when it is not such a view: e.g. a contiguous copy from ``select_state``)."""
    b, h, t, d = cache.shape
    row = cache.stride(1)
    if cache.stride(3) != 1 or cache.stride(2) != d or cache.storage_offset() != 0 or b * h == 0:
        return t
    if row % d or cache.stride(0) != h * row or row // d < t:
        return t
    capacity = row // d
    if cache.untyped_storage().nbytes() < b * h * capacity * d * cache.element_size():
        return t
    return capacity


def _with_slot(cache: Tensor, capacity: int, dtype: torch.dtype) -> Tensor:
    """cache [B,H,t,d] copied into the first t slots of a new buffer [B,H,capacity,d]
    of ``dtype`` (capacity > t); returns the view [B,H,t,d]."""
    b, h, t, d = cache.shape
    buf = cache.new_empty(b, h, capacity, d, dtype=dtype)
    buf[:, :, :t].copy_(cache)
    return buf[:, :, :t]


def _append(cache: Tensor, new: Tensor, in_place: bool) -> Tensor:
    """cache [B,H,t,d] + new [B,H,1,d] -> [B,H,t+1,d] (the dtype ``torch.cat`` would give),
    written into the buffer's next slot when ``in_place`` (the caller checked its room),
    else into a new buffer with room (twice the length, at least 16)."""
    b, h, t, d = cache.shape
    dtype = torch.promote_types(cache.dtype, new.dtype)
    if not in_place or cache.dtype != dtype:
        cache = _with_slot(cache, max(2 * (t + 1), 16), dtype)
    grown = cache.as_strided((b, h, t + 1, d), cache.stride())
    grown[:, :, t:].copy_(new)
    return grown


_CHOICES: dict[str, Mapping[str, Any]] = {
    "activation": ACTIVATIONS,
    "norm": NORM_FIRST,
    "positions": POSITIONS,
}


class Transformer(Seq2Seq):
    """Encoder–decoder Transformer; see the module docstring and attnmt.models.base."""

    Config: ClassVar[type[TransformerConfig]] = TransformerConfig
    source_state: ClassVar[tuple[str, ...]] = ("src_pad_mask", "cross_k", "cross_v")

    def __init__(
        self, config: TransformerConfig, src_vocab_size: int, tgt_vocab_size: int, share: bool
    ):
        super().__init__()
        self.config = config
        d = config.d_model
        self.scale = math.sqrt(d)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d, padding_idx=PAD_ID)
        self.src_embed = self.tgt_embed if share else nn.Embedding(src_vocab_size, d, PAD_ID)
        self.positions = POSITIONS[config.positions](d, config.max_positions)
        self.drop = Dropout(config.dropout)
        layer_args = (
            d,
            config.n_heads,
            config.d_ff,
            config.dropout,
            config.attention_dropout,
            config.activation,
            config.norm,
        )
        self.encoder = TypedModuleList(EncoderLayer(*layer_args) for _ in range(config.enc_layers))
        self.decoder = TypedModuleList(DecoderLayer(*layer_args) for _ in range(config.dec_layers))
        final_norm = nn.LayerNorm if NORM_FIRST[config.norm] else (lambda _: nn.Identity())
        self.enc_norm, self.dec_norm = final_norm(d), final_norm(d)
        self.out_proj = nn.Linear(d, tgt_vocab_size, bias=False)
        self._init_weights()
        if config.tie_embeddings:
            self.out_proj.weight = self.tgt_embed.weight

    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any] | TransformerConfig,
        src_vocab_size: int,
        tgt_vocab_size: int,
        shared_vocab: bool,
    ) -> Transformer:
        """Build from a config mapping (see :class:`TransformerConfig`); ConfigError on bad
        keys/values."""
        config = parse(cfg, TransformerConfig, "model.")
        share = config.share_embeddings and shared_vocab and src_vocab_size == tgt_vocab_size
        return cls(config, src_vocab_size, tgt_vocab_size, share)

    def _init_weights(self) -> None:
        """Xavier-uniform for matrices; embeddings N(0, d^-½) with a zero PAD row."""
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        for emb in {id(e): e for e in (self.src_embed, self.tgt_embed)}.values():
            nn.init.normal_(emb.weight, std=self.config.d_model**-0.5)
            with torch.no_grad():
                emb.weight[PAD_ID].zero_()

    # ------------------------------------------------------------------ pieces

    def _embed(self, table: nn.Embedding, tokens: Tensor, positions: Tensor) -> Tensor:
        """tokens [B,T], positions [B,T] or [T] -> √d · E[tokens] + PE(positions), [B,T,D]."""
        x = table(tokens) * self.scale
        return self.drop(x + self.positions(positions).to(x.dtype))

    @staticmethod
    def _src_mask(src_pad_mask: Tensor) -> Tensor:
        """[B,S] (True = pad) -> allowed mask [B,1,1,S]."""
        return ~src_pad_mask[:, None, None, :]

    def _encode(
        self, src: Tensor, src_pad_mask: Tensor, need_weights: bool = False
    ) -> tuple[Tensor, list[Tensor]]:
        """src [B,S] -> (memory [B,S,D], per-layer self-attention [B,H,S,S] if requested)."""
        mask = self._src_mask(src_pad_mask)
        x = self._embed(self.src_embed, src, torch.arange(src.size(1), device=src.device))
        weights = []
        for layer in self.encoder:
            x, w = layer(x, mask, need_weights)
            if w is not None:
                weights.append(w)
        return self.enc_norm(x), weights

    def _decode(
        self,
        tgt_input: Tensor,
        memory: Tensor,
        src_pad_mask: Tensor,
        need_weights: bool = False,
        cross_layer: int | None = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor]]:
        """Teacher forcing: tgt_input [B,T] -> (hidden [B,T,D], self [B,H,T,T] list,
        cross [B,H,T,S] list). ``need_weights``: every layer's maps; ``cross_layer`` (an
        index into the decoder layers): that layer's cross-attention map alone, the only
        one off the fused path (the cross list then holds it alone)."""
        mask = self._src_mask(src_pad_mask)
        positions = torch.arange(tgt_input.size(1), device=tgt_input.device)
        x = self._embed(self.tgt_embed, tgt_input, positions)
        self_ws, cross_ws = [], []
        for i, layer in enumerate(self.decoder):
            kv = layer.cross_attn.project_kv(memory)
            x, self_w, cross_w = layer(x, kv, mask, need_weights, cross_weights=i == cross_layer)
            if need_weights:
                self_ws.append(self_w)
            if cross_w is not None:
                cross_ws.append(cross_w)
        return self.dec_norm(x), self_ws, cross_ws

    # --------------------------------------------------------------- interface

    @overload
    def forward(self, batch: Batch, request: None = None) -> Tensor: ...

    @overload
    def forward(self, batch: Batch, request: CrossAttentionRequest) -> tuple[Tensor, Tensor]: ...

    def forward(
        self, batch: Batch, request: CrossAttentionRequest | None = None
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher-forced logits [B,T,V] for ``batch.tgt_input`` (fused attention path);
        with a ``request`` also (logits, attn [B,T,S]): decoder layer ``request.layer``'s
        cross-attention, the mean of ``request.heads`` (all heads when None), 0 on padding;
        only that layer computes its weights explicitly."""
        tgt_input = batch.decoder_input()
        memory, _ = self._encode(batch.src, batch.src_pad_mask)
        layer = None if request is None else range(len(self.decoder))[request.layer]
        hidden, _, cross = self._decode(tgt_input, memory, batch.src_pad_mask, cross_layer=layer)
        logits = self.out_proj(hidden)
        if request is None:
            return logits
        (weights,) = cross  # [B,H,T,S]
        if request.heads is not None:
            weights = weights[:, list(request.heads)]
        return logits, weights.mean(dim=1)

    def guidable_attention(self) -> tuple[int, int]:
        """(decoder layers, heads): every layer's cross-attention can be returned."""
        return len(self.decoder), self.config.n_heads

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        """src [B,S], src_pad_mask [B,S] -> {"memory": [B,S,D], "src_pad_mask": [B,S]}."""
        memory, _ = self._encode(src, src_pad_mask)
        return {"memory": memory, "src_pad_mask": src_pad_mask}

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        """Cross-attention K/V per layer [B,H,S,d_k], empty self-attention caches
        [B,H,0,d_k], and the step counter [B] (the next target position)."""
        mem = memory["memory"]
        b, h = mem.size(0), self.config.n_heads
        empty = mem.new_zeros(b, h, 0, self.config.d_model // h)
        cross = [layer.cross_attn.project_kv(mem) for layer in self.decoder]
        return {
            "src_pad_mask": src_pad_mask,
            "step": torch.zeros(b, dtype=torch.long, device=mem.device),
            "self_k": [empty] * len(self.decoder),
            "self_v": [empty] * len(self.decoder),
            "cross_k": [k for k, _ in cross],
            "cross_v": [v for _, v in cross],
            "cache_fill": CacheFill(0),
        }

    def reorder_state(
        self, state: State, index: Tensor, source_index: Tensor | None = None
    ) -> State:
        """Seq2Seq.reorder_state, with the self-attention caches gathered straight into new
        buffers that have one free slot (the next step appends there without a copy);
        with autograd on, plain ``select_state`` copies."""
        if torch.is_grad_enabled():
            return super().reorder_state(state, index, source_index)
        caches = {key: state[key] for key in ("self_k", "self_v")}
        out = super().reorder_state(
            {k: v for k, v in state.items() if k not in caches}, index, source_index
        )
        t = caches["self_k"][0].size(2)
        for key, layers in caches.items():
            out[key] = [self._gather_cache(c, index) for c in layers]
        out["cache_fill"] = CacheFill(t)
        return out

    @staticmethod
    def _gather_cache(cache: Tensor, index: Tensor) -> Tensor:
        """cache [B,H,t,d] -> its rows ``index`` [B'] as the view [B',H,t,d] of a new buffer
        [B',H,t+1,d] (index_select writes into it: one copy)."""
        _, h, t, d = cache.shape
        if t == 0:
            return select_state(cache, index)
        buf = cache.new_empty(index.numel(), h, t + 1, d)
        return torch.index_select(cache, 0, index, out=buf[:, :, :t])

    def max_target_length(self) -> int:
        """``max_positions - 1``: decoder inputs are BOS and the pieces before the last, at
        positions 0..L, so L pieces plus EOS fit the position table (learned positions);
        sinusoidal ones keep the same cap, the length the model is configured for."""
        return max(1, self.config.max_positions - 1)

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev_tokens [B] -> (log_probs [B,V] float32, new state, attn [B,S]: the last
        layer's cross-attention averaged over heads, 0 on padding)."""
        mask = self._src_mask(state["src_pad_mask"])
        x = self._embed(self.tgt_embed, prev_tokens[:, None], state["step"][:, None])
        self_k, self_v, last = [], [], len(self.decoder) - 1
        cross_w: Tensor | None = None
        t = state["self_k"][0].size(2)
        fill = state.get("cache_fill")
        caches = [*state["self_k"], *state["self_v"]]
        in_place = (
            isinstance(fill, CacheFill) and fill.filled == t and all(_room(c) > t for c in caches)
        )
        append: Callable[[Tensor, Tensor], Tensor] = functools.partial(_append, in_place=in_place)
        if torch.is_grad_enabled():  # autograd saves the caches: never write into them
            append, in_place = concat_cache, False
        for i, layer in enumerate(self.decoder):
            x, (k, v), cross_w = layer.step(
                x,
                (state["self_k"][i], state["self_v"][i]),
                (state["cross_k"][i], state["cross_v"][i]),
                mask,
                need_weights=i == last,
                append=append,
            )
            self_k.append(k)
            self_v.append(v)
        if in_place:
            assert isinstance(fill, CacheFill)
            fill.filled = t + 1
        logits = self.out_proj(self.dec_norm(x))[:, 0]
        assert cross_w is not None
        new_state = {
            **state,
            "step": state["step"] + 1,
            "self_k": self_k,
            "self_v": self_v,
            "cache_fill": fill if in_place else CacheFill(t + 1),
        }
        return F.log_softmax(logits.float(), dim=-1), new_state, cross_w.mean(dim=1)[:, 0]

    def attention(self, batch: Batch) -> dict[str, Tensor]:
        """Teacher-forced maps: "cross" [B,T,S] (last layer, head mean), "cross/layer{i}"
        [B,H,T,S], "self/layer{i}" [B,H,T,T], "enc_self/layer{i}" [B,H,S,S]."""
        tgt_input = batch.decoder_input()
        memory, enc_ws = self._encode(batch.src, batch.src_pad_mask, need_weights=True)
        _, self_ws, cross_ws = self._decode(
            tgt_input, memory, batch.src_pad_mask, need_weights=True
        )
        maps = {"cross": cross_ws[-1].mean(dim=1)}
        for prefix, ws in (("cross", cross_ws), ("self", self_ws), ("enc_self", enc_ws)):
            maps.update({f"{prefix}/layer{i}": w for i, w in enumerate(ws)})
        return maps
