"""Several trained models decoding as one: :class:`Ensemble`.

An :class:`Ensemble` *is* a :class:`~attnmt.models.base.Seq2Seq`, so greedy and beam search
(:mod:`attnmt.decode.search`) run it unchanged, and the trainer's final test,
``evaluate.py`` and ``translate.py`` keep their one decoding path (the
:class:`~attnmt.decode.translator.Translator`). Its state is one state per member,
``{"members": [state_1, ..., state_K]}``: each Transformer keeps its own key/value caches
and each RNN its own hidden state; :meth:`Ensemble.reorder_state` reorders them together,
each member by its own ``reorder_state`` (and ``select_state`` would too, since it maps
every tensor leaf).

Combination: at every step the members' log-probabilities are averaged,

    log p_ens(v | y_<t, x) = (1/K) Σ_k log p_k(v | y_<t, x)          (mean of log-probs)

i.e. the normalised-less geometric mean of the members' distributions (a product of
experts, the log-linear combination of OpenNMT-py's and Marian's ensembles), not the log
of the mean of the probabilities (fairseq's linear mixture). Why this one: (1) an ensemble
of one, and of K copies of one model, gives *exactly* that model's scores (Σ of K equal
float32 numbers / K is exact for K = 1, 2, 4, and within an ulp otherwise), so the
single-model path is the K = 1 special case and the tests can ask for identical tokens and
scores; (2) it is one add per member, no exp/log round trip; (3) a piece that one member
gives probability 0 (log p = -inf, e.g. a banned id) stays impossible. The scores are not
renormalised: Σ_v exp(log p_ens) <= 1, so a beam's score is the members' mean log-prob of
the hypothesis, with the members' disagreement counting against it. Greedy search is the
same under either normalisation (argmax). The attention row a search records is the
members' mean cross-attention [B,S].

The members must read and write the same pieces: one SentencePiece model (joint) or pair
(source, target). :func:`check_same_tokenizer` refuses checkpoints trained with others,
naming them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch.nn.functional as F
from torch import Tensor

from attnmt.batch import Batch
from attnmt.data.tokenizer import Tokenizer
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq, State, TypedModuleList


def mean_tensors(tensors: Sequence[Tensor]) -> Tensor:
    """(1/K) Σ_k t_k in float32 (exact for K = 1): [*] each -> [*]."""
    total = tensors[0].float()
    for t in tensors[1:]:
        total = total + t.float()
    return total / len(tensors) if len(tensors) > 1 else total


class Ensemble(Seq2Seq):
    """K models over the same vocabularies, decoding by their mean log-probabilities."""

    def __init__(self, members: Sequence[Seq2Seq]) -> None:
        super().__init__()
        if not members:
            raise ConfigError("an ensemble needs at least one model")
        self.members = TypedModuleList(members)
        self.name = "+".join(m.name or type(m).__name__ for m in members)

    def __len__(self) -> int:
        return len(self.members)

    def max_target_length(self) -> int:
        """The smallest of the members' caps: every member must be able to go on."""
        return min(int(m.max_target_length()) for m in self.members)

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        """src [B,S] -> {"members": [memory_k]}, each member's own encoding."""
        return {"members": [m.encode(src, src_pad_mask) for m in self.members]}

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        """{"members": [state_k]}: each member's caches / hidden states, batch-first."""
        pairs = zip(self.members, memory["members"])
        return {"members": [m.init_state(mem, src_pad_mask) for m, mem in pairs]}

    def reorder_state(
        self, state: State, index: Tensor, source_index: Tensor | None = None
    ) -> State:
        """Each member's state by its own ``reorder_state`` (see Seq2Seq.reorder_state)."""
        pairs = zip(self.members, state["members"])
        return {"members": [m.reorder_state(s, index, source_index) for m, s in pairs]}

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev_tokens [B] -> (mean log-probs [B,V] float32, new state, mean attention [B,S]);
        see the module docstring for the equation."""
        outs = [m.decode_step(s, prev_tokens) for m, s in zip(self.members, state["members"])]
        log_probs = mean_tensors([lp for lp, _, _ in outs])
        attn = mean_tensors([a for _, _, a in outs])
        return log_probs, {"members": [s for _, s, _ in outs]}, attn

    def forward(self, batch: Batch) -> Tensor:
        """Teacher-forced scores [B,T,V]: the members' mean log-softmax (usable as logits)."""
        return mean_tensors([F.log_softmax(m(batch).float(), dim=-1) for m in self.members])

    def attention(self, batch: Batch) -> dict[str, Tensor]:
        """{"cross": [B,T,S]}: the members' mean teacher-forced cross-attention."""
        return {"cross": mean_tensors([m.attention(batch)["cross"] for m in self.members])}


def check_same_tokenizer(tokenizers: Sequence[Tokenizer], checkpoints: Sequence[Path]) -> None:
    """ConfigError in one line naming the checkpoints when any tokenizer differs from the
    first one's (joint or not, or either side's SentencePiece model bytes)."""

    def identity(tok: Tokenizer) -> tuple[bool, str, str]:
        return tok.joint, tok.model_digest("src"), tok.model_digest("tgt")

    first = identity(tokenizers[0])
    for tok, ckpt in zip(tokenizers[1:], checkpoints[1:]):
        if identity(tok) != first:
            raise ConfigError(
                f"ensemble: {checkpoints[0]} and {ckpt} were trained with different "
                "SentencePiece vocabularies; an ensemble needs models that share one "
                "tokenizer (checkpoints of one run, or runs on the same cached tokenizer)"
            )
