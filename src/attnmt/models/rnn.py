"""RNN encoder–decoders with attention: ``rnn_bahdanau`` and ``rnn_luong``.

Both share the encoder (embeddings → (bi)GRU/LSTM of rnn_encoder → bridge) and differ in the
recurrent core of one decoder step, ``_core(state, step inputs) -> (features, state, attn)``,
and in ``_output(features) -> logits``. ``decode_step`` runs core + output for one
step; ``forward`` (teacher forcing) embeds the whole target once, runs the same core in
a loop over t and applies the same output layers to all steps at once (one big matmul
instead of T small ones), so teacher-forced logits equal step-by-step decoding by
construction. Whatever does not depend on the previous step is computed for all steps
before the loop: the decoder RNN's input projection of the target embeddings
(:class:`~attnmt.models.rnn_cell.DecoderCell`, one [B,T,E] matmul) and the attention's key
side (``Attention.precompute``, once per source), so each step does only the recurrent part,
the part of the input that the previous step produced (Luong's h̃_{t-1}, Bahdanau's c_t) and
the attention query. Luong without input feeding has no dependence on h̃_{t-1}, so it
teacher-forces all positions in one RNN and one attention call (tested equal to
step-by-step decoding).

Sizes: the decoder state is H = ``hidden_size``; the annotations (encoder outputs) are
Denc = ``enc_hidden_size``, null -> H, and a bidirectional encoder gives each direction
Denc/2 (OpenNMT's ``brnn``). At Denc = H the scorers compare s_t and h_i as the equations
write them (dot, scaled_dot and cosine with no learned map); the bridge maps the top
layer's [h→_S; h←_1] (Denc) to each decoder layer's s_0 (H).

Decoder state (a dict; every leaf has batch dim 0, see base.select_state):
    hidden [B,L,H]    decoder RNN state, layer-second; cell [B,L,H] for LSTM
    memory [B,S,Denc] encoder outputs (the attention values)
    keys   [B,S,*]    Attention.precompute(memory): the key side, computed once per source
    src_mask [B,S]    bool, True at real source tokens (the *allowed* mask)
                      (memory, keys and src_mask depend on the source alone: the model's
                      ``source_state``, which a reorder within a sentence's beams keeps)
    step   [B]        long, target position t (the local_m centre)
    feed   [B,H]      Luong with input feeding: h̃_{t-1}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, overload

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnmt import PAD_ID
from attnmt.batch import Batch
from attnmt.errors import ConfigError
from attnmt.kernels import Dropout
from attnmt.models.attention import Attention
from attnmt.models.base import CrossAttentionRequest, Seq2Seq, State
from attnmt.models.rnn_cell import DecoderCell, layer_states
from attnmt.models.rnn_config import (
    AttentionConfig,
    BahdanauConfig,
    LuongConfig,
    RNNConfig,
)
from attnmt.models.rnn_encoder import CELLS, Bridge, RNNEncoder, rnn_run
from attnmt.schema import parse

__all__ = ["AttentionConfig", "BahdanauSeq2Seq", "LuongSeq2Seq", "RNNSeq2Seq"]

log = logging.getLogger(__name__)


def _warn_key_adapter(cfg: RNNConfig, adapter: nn.Linear) -> None:
    """Log that a parameter-free scorer compares the decoder state with the annotations
    through a learned map, because their sizes differ."""
    log.warning(
        "model.attention.score=%s compares the decoder state (model.hidden_size=%d) with "
        "annotations of size %d (model.enc_hidden_size=%d): a learned key_adapter (%d -> %d, "
        "%d parameters) maps them, so the scorer is no longer parameter-free; leave "
        "model.enc_hidden_size null (= model.hidden_size) for the scorer as defined",
        cfg.attention.score,
        cfg.hidden_size,
        cfg.annotation_size,
        cfg.annotation_size,
        adapter.in_features,
        adapter.out_features,
        adapter.weight.numel(),
    )


class RNNSeq2Seq(Seq2Seq):
    """Shared encoder, bridge, attention and teacher-forcing loop of the RNN models."""

    Config: ClassVar[type[RNNConfig]] = RNNConfig
    source_state: ClassVar[tuple[str, ...]] = ("memory", "keys", "src_mask")

    def __init__(
        self, cfg: RNNConfig, src_vocab_size: int, tgt_vocab_size: int, shared_vocab: bool
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.src_embed = nn.Embedding(src_vocab_size, cfg.emb_dim, padding_idx=PAD_ID)
        share = shared_vocab and cfg.share_embeddings and src_vocab_size == tgt_vocab_size
        self.tgt_embed = (
            self.src_embed
            if share
            else nn.Embedding(tgt_vocab_size, cfg.emb_dim, padding_idx=PAD_ID)
        )
        self.dropout = Dropout(cfg.dropout)
        self.encoder = RNNEncoder(
            cfg.cell,
            cfg.emb_dim,
            cfg.direction_size,
            cfg.enc_layers,
            cfg.bidirectional,
            cfg.dropout,
        )
        enc_dim = self.encoder.output_dim  # = cfg.annotation_size
        self.bridge_h = Bridge(enc_dim, cfg.hidden_size, cfg.dec_layers)
        self.bridge_c = (
            Bridge(enc_dim, cfg.hidden_size, cfg.dec_layers) if cfg.cell == "lstm" else None
        )
        a = cfg.attention
        self.attn = Attention(
            a.score,
            a.mode,
            query_dim=cfg.hidden_size,
            key_dim=enc_dim,
            hidden_dim=a.hidden_dim or cfg.hidden_size,
            window=a.window,
            max_src_len=a.max_src_len,
            cosine_beta=a.cosine_beta,
            learn_beta=a.learn_beta,
            hard_estimator=a.hard_estimator,
            gumbel_tau=a.gumbel_tau,
        )
        if self.attn.key_adapter is not None:
            _warn_key_adapter(cfg, self.attn.key_adapter)
        self.decoder = CELLS[cfg.cell](
            self._decoder_input_dim(enc_dim),
            cfg.hidden_size,
            cfg.dec_layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.dec_layers > 1 else 0.0,
        )
        out_dim = self._build_output(enc_dim)
        self.generator = nn.Linear(out_dim, tgt_vocab_size)
        if cfg.tie_embeddings:
            if out_dim != cfg.emb_dim:
                raise ConfigError(
                    f"model.tie_embeddings=true needs the output layer size ({out_dim}) to equal "
                    f"model.emb_dim ({cfg.emb_dim}); change one of them or set it false"
                )
            self.generator.weight = self.tgt_embed.weight

    # -- what each decoder defines -------------------------------------------------
    def _decoder_input_dim(self, enc_dim: int) -> int:
        raise NotImplementedError

    def _build_output(self, enc_dim: int) -> int:
        """Create the layers between the RNN and the generator; return their output size."""
        raise NotImplementedError

    def _core(
        self, state: State, y_prev: Tensor, projected: Tensor, cell: DecoderCell
    ) -> tuple[Tensor, State, Tensor]:
        """One decoder step: y_prev [B,E] the embedded previous token, projected [B,G·H] its
        input projection (``cell.project(y_prev)``) -> (features [B,F], state, attention
        [B,S])."""
        raise NotImplementedError

    def _output(self, features: Tensor) -> Tensor:
        """features [..., F] -> logits [..., V]."""
        raise NotImplementedError

    # -- the Seq2Seq interface -----------------------------------------------------
    @classmethod
    def from_config(
        cls,
        cfg: Mapping[str, Any] | RNNConfig,
        src_vocab_size: int,
        tgt_vocab_size: int,
        shared_vocab: bool,
    ) -> RNNSeq2Seq:
        """Build from a dict/DictConfig merged onto ``cls.Config`` (unknown keys: ConfigError)."""
        config = parse(cfg, cls.Config, "model.")
        return cls(config, src_vocab_size, tgt_vocab_size, shared_vocab)

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        """src [B,S] -> {"memory": [B,S,Denc], "final_h": [B,Denc], "final_c"?: [B,Denc]}."""
        outputs, final = self.encoder(self.dropout(self.src_embed(src)), src_pad_mask)
        memory = {"memory": outputs, "final_h": final["h"]}
        if "c" in final:
            memory["final_c"] = final["c"]
        return memory

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        """Bridge the encoder's final states to the decoder; precompute attention keys."""
        allowed = ~src_pad_mask
        state: State = {
            "hidden": self.bridge_h(memory["final_h"]),
            "memory": memory["memory"],
            "keys": self.attn.precompute(memory["memory"], allowed),
            "src_mask": allowed,
            "step": torch.zeros(src_pad_mask.size(0), dtype=torch.long, device=src_pad_mask.device),
        }
        if self.bridge_c is not None:
            state["cell"] = self.bridge_c(memory["final_c"])
        return state

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev_tokens [B] -> (log_probs [B,V], new state, attention [B,S])."""
        y_prev = self.dropout(self.tgt_embed(prev_tokens))
        cell = DecoderCell(self.decoder, self.cfg.emb_dim)
        features, state, attn = self._core(state, y_prev, cell.project(y_prev), cell)
        return F.log_softmax(self._output(features), dim=-1), state, attn

    def _attend(self, query: Tensor, state: State) -> tuple[Tensor, Tensor]:
        """query [B,H] -> (context [B,Denc], weights [B,S]) at target step state["step"]."""
        ctx, weights = self.attn(
            query.unsqueeze(1),
            state["memory"],
            state["src_mask"],
            cache=state["keys"],
            positions=state["step"].unsqueeze(1),
        )
        return ctx.squeeze(1), weights.squeeze(1)  # views, also in the backward

    def _teacher_force(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """-> (logits [B,T,V], cross-attention [B,T,S]), one _core call per position t.

        The decoder's input projection of every E y_{t-1} is one matmul before the loop;
        ``unbind`` hands out the steps as views (indexing [:, t] would make each step's
        backward write a zero-filled [B,T,*] gradient).
        """
        tgt_input = batch.decoder_input()
        state = self.init_state(self.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        embedded = self.dropout(self.tgt_embed(tgt_input))  # [B,T,E]
        cell = DecoderCell(self.decoder, self.cfg.emb_dim)
        projected = cell.project(embedded)  # [B,T,G·H]
        features, attn = [], []
        for y_prev, step_projected in zip(embedded.unbind(1), projected.unbind(1)):
            step_features, state, step_attn = self._core(state, y_prev, step_projected, cell)
            features.append(step_features)
            attn.append(step_attn)
        return self._output(torch.stack(features, dim=1)), torch.stack(attn, dim=1)

    @overload
    def forward(self, batch: Batch, request: None = None) -> Tensor: ...

    @overload
    def forward(self, batch: Batch, request: CrossAttentionRequest) -> tuple[Tensor, Tensor]: ...

    def forward(
        self, batch: Batch, request: CrossAttentionRequest | None = None
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher forcing: batch.tgt_input [B,T] -> logits [B,T,V]; with a ``request``
        (the model has one map: layer -1 or 0, heads None or (0,)) also its attention
        weights [B,T,S], which the teacher-forced pass computes anyway."""
        logits, attn = self._teacher_force(batch)
        return logits if request is None else (logits, attn)

    def guidable_attention(self) -> tuple[int, int]:
        """One map of one head: the decoder's attention over the annotations."""
        return 1, 1

    def attention(self, batch: Batch) -> dict[str, Tensor]:
        """{"cross": [B,T,S]} teacher-forced attention weights."""
        return {"cross": self._teacher_force(batch)[1]}


class BahdanauSeq2Seq(RNNSeq2Seq):
    """Bahdanau et al. (2015) decoder.

    c_t = Attention(query = s_{t-1}, memory)                (the previous state)
    s_t = RNN([E y_{t-1}; c_t], s_{t-1})
    r_t = tanh(W_r [s_t; c_t; E y_{t-1}] + b_r)             (deep output / readout)
    p(y_t | y_<t, x) = softmax(W_o r_t + b_o)
    The query is the top decoder layer's previous state.
    """

    Config: ClassVar[type[BahdanauConfig]] = BahdanauConfig
    cfg: BahdanauConfig

    def _decoder_input_dim(self, enc_dim: int) -> int:
        return self.cfg.emb_dim + enc_dim

    def _build_output(self, enc_dim: int) -> int:
        readout_dim = self.cfg.readout_dim or self.cfg.emb_dim
        self.readout = nn.Linear(self.cfg.hidden_size + enc_dim + self.cfg.emb_dim, readout_dim)
        return readout_dim

    def _core(
        self, state: State, y_prev: Tensor, projected: Tensor, cell: DecoderCell
    ) -> tuple[Tensor, State, Tensor]:
        """features = [s_t; c_t; E y_{t-1}] (the readout's input); the RNN input [E y_{t-1};
        c_t] is projected as ``projected`` + W_ih[:, E:] c_t."""
        ctx, weights = self._attend(layer_states(state["hidden"])[-1], state)  # query s_{t-1}
        s_t, rnn_state = cell.step(projected, ctx, state)
        features = torch.cat([s_t, ctx, y_prev], dim=-1)
        return features, {**state, **rnn_state, "step": state["step"] + 1}, weights

    def _output(self, features: Tensor) -> Tensor:
        return self.generator(self.dropout(torch.tanh(self.readout(features))))


class LuongSeq2Seq(RNNSeq2Seq):
    """Luong et al. (2015) decoder.

    h_t = RNN([E y_{t-1}; h̃_{t-1}], h_{t-1})   (h̃_{t-1} only with input_feeding; h̃_0 = 0)
    c_t = Attention(query = h_t, memory)
    h̃_t = tanh(W_c [c_t; h_t])
    p(y_t | y_<t, x) = softmax(W_s h̃_t + b_s)
    """

    Config: ClassVar[type[LuongConfig]] = LuongConfig
    cfg: LuongConfig

    def _decoder_input_dim(self, enc_dim: int) -> int:
        return self.cfg.emb_dim + (self.cfg.hidden_size if self.cfg.input_feeding else 0)

    def _build_output(self, enc_dim: int) -> int:
        self.combine = nn.Linear(enc_dim + self.cfg.hidden_size, self.cfg.hidden_size, bias=False)
        return self.cfg.hidden_size

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        state = super().init_state(memory, src_pad_mask)
        if self.cfg.input_feeding:
            state["feed"] = state["hidden"].new_zeros(src_pad_mask.size(0), self.cfg.hidden_size)
        return state

    def _core(
        self, state: State, y_prev: Tensor, projected: Tensor, cell: DecoderCell
    ) -> tuple[Tensor, State, Tensor]:
        """features = h̃_t; the RNN input [E y_{t-1}; h̃_{t-1}] is projected as ``projected``
        + W_ih[:, E:] h̃_{t-1} (``projected`` alone without input feeding)."""
        h_t, rnn_state = cell.step(projected, state.get("feed"), state)
        ctx, weights = self._attend(h_t, state)
        h_tilde = self._attentional(ctx, h_t)  # [B,H]
        new_state = {**state, **rnn_state, "step": state["step"] + 1}
        if self.cfg.input_feeding:
            new_state["feed"] = h_tilde
        return h_tilde, new_state, weights

    def _attentional(self, ctx: Tensor, h: Tensor) -> Tensor:
        """h̃ = tanh(W_c [c; h]): ctx [...,Denc], h [...,H] -> [...,H] (one step or all T)."""
        return torch.tanh(self.combine(torch.cat([ctx, h], dim=-1)))

    def _output(self, features: Tensor) -> Tensor:
        return self.generator(self.dropout(features))

    def _teacher_force(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """-> (logits [B,T,V], cross-attention [B,T,S]).

        Without input feeding h_t does not depend on h̃_{t-1}, so all T positions go through
        one RNN call over [B,T,E] and one attention call with T queries [B,T,H] (query t at
        position t) instead of T steps: the same equations as ``_core``, batched over time.
        """
        if self.cfg.input_feeding:
            return super()._teacher_force(batch)
        tgt_input = batch.decoder_input()
        state = self.init_state(self.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        embedded = self.dropout(self.tgt_embed(tgt_input))  # [B,T,E]
        h, _ = rnn_run(self.decoder, embedded, state)  # [B,T,H]
        ctx, weights = self.attn(h, state["memory"], state["src_mask"], cache=state["keys"])
        return self._output(self._attentional(ctx, h)), weights
