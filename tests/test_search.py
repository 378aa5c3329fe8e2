"""Greedy and beam search on hand-made models (exact numbers) and random tiny ones."""

from __future__ import annotations

import math

import pytest
import torch
from torch import Tensor, nn

from attnmt import BOS_ID, EOS_ID, PAD_ID
from attnmt.batch import Batch
from attnmt.data.batching import make_batch
from attnmt.decode.ensemble import Ensemble
from attnmt.decode.search import (
    Hypothesis,
    beam_search,
    greedy_search,
    length_penalty,
    max_length,
    max_lengths,
    translate_batch,
)
from attnmt.errors import ConfigError
from attnmt.models.attention import masked_softmax
from attnmt.models.base import Seq2Seq, State, select_state

A, B = 4, 5  # the two "real" pieces of the Markov toy (V = 6)


class MarkovToy(Seq2Seq):
    """p(y_t | y_<t, x) = TABLE[y_{t-1}]: a fixed function of the previous token.

    After BOS: a 0.6, b 0.4.  After a: EOS 0.4, a 0.3, b 0.3.  After b: EOS 0.9, a 0.1.
    Greedy picks a, EOS (p = 0.24); beam k=2 finds b, EOS (p = 0.36).
    Attention is uniform over the real source positions.
    """

    def __init__(self) -> None:
        super().__init__()
        table = torch.zeros(6, 6)
        table[BOS_ID, A], table[BOS_ID, B] = 0.6, 0.4
        table[A, EOS_ID], table[A, A], table[A, B] = 0.4, 0.3, 0.3
        table[B, EOS_ID], table[B, A] = 0.9, 0.1
        table[EOS_ID, EOS_ID] = 1.0
        self.register_buffer("log_table", table.log())

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        return {"mask": src_pad_mask}

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        return {"mask": src_pad_mask}

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        real = (~state["mask"]).float()
        return self.log_table[prev_tokens], state, real / real.sum(1, keepdim=True)

    def attention(self, batch):  # pragma: no cover - unused
        raise NotImplementedError


class TinyGRU(Seq2Seq):
    """A random GRU decoder with dot-product attention over embedded sources."""

    def __init__(self, vocab: int = 13, dim: int = 16, eos_bias: float = 0.0) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD_ID)
        self.cell = nn.GRUCell(dim, dim)
        self.out = nn.Linear(2 * dim, vocab)
        with torch.no_grad():
            self.out.bias[EOS_ID] += eos_bias

    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        return {"memory": self.emb(src)}

    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        real = (~src_pad_mask).unsqueeze(-1).float()
        h = (memory["memory"] * real).sum(1) / real.sum(1)
        return {"memory": memory["memory"], "mask": src_pad_mask, "h": torch.tanh(h)}

    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        h = self.cell(self.emb(prev_tokens), state["h"])  # [B,D]
        scores = torch.einsum("bsd,bd->bs", state["memory"], h)  # [B,S]
        attn = masked_softmax(scores, ~state["mask"])
        ctx = torch.einsum("bs,bsd->bd", attn, state["memory"])
        log_probs = self.out(torch.cat([h, ctx], -1)).log_softmax(-1)
        return log_probs, {**state, "h": h}, attn

    def attention(self, batch):  # pragma: no cover - unused
        raise NotImplementedError


SOURCES = [[5, 6, 7], [8, 9], [4, 5, 6, 7, 8, 9, 10], [11]]


def _tiny(eos_bias: float = 0.0) -> TinyGRU:
    torch.manual_seed(3)
    return TinyGRU(eos_bias=eos_bias).eval()


@torch.no_grad()
def _seq_logprob(model: Seq2Seq, src: list[int], tokens: list[int], eos: bool) -> float:
    """Σ log p of ``tokens`` (+ EOS) by stepping the model one token at a time."""
    batch = make_batch([src])
    state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
    total, prev = 0.0, BOS_ID
    for tok in [*tokens, EOS_ID] if eos else tokens:
        lp, state, _ = model.decode_step(state, torch.tensor([prev]))
        total += float(lp[0, tok])
        prev = tok
    return total


def test_greedy_on_markov_toy_hand_checked() -> None:
    (hyp,) = greedy_search(MarkovToy(), make_batch([[7, 8]]))
    assert hyp.tokens == [A] and hyp.finished
    assert hyp.score == pytest.approx(math.log(0.6 * 0.4), abs=1e-6)
    # 2 steps (a, EOS) x 3 real source positions (7, 8, EOS), uniform
    assert hyp.attention.shape == (2, 3)
    assert torch.allclose(hyp.attention, torch.full((2, 3), 1 / 3))


def test_beam_finds_better_sequence_than_greedy() -> None:
    (nbest,) = beam_search(MarkovToy(), make_batch([[7, 8]]), beam_size=2, alpha=0.0, n_best=2)
    assert [h.tokens for h in nbest] == [[B], [A]]
    assert nbest[0].score == pytest.approx(math.log(0.4 * 0.9), abs=1e-6)
    assert nbest[1].score == pytest.approx(math.log(0.6 * 0.4), abs=1e-6)


def test_length_penalty_normalises_beam_scores() -> None:
    alpha = 1.0
    (nbest,) = beam_search(MarkovToy(), make_batch([[7]]), beam_size=2, alpha=alpha, n_best=2)
    best = nbest[0]
    # b, EOS: 2 decoder steps, lp = (5+2)/6
    assert best.tokens == [B]
    assert best.score == pytest.approx(math.log(0.36) / (7 / 6), abs=1e-6)
    assert length_penalty(2, alpha) == pytest.approx(7 / 6)
    assert length_penalty(3, 0.6) == pytest.approx((8 / 6) ** 0.6)


def test_max_length_is_floor_a_x_plus_b_at_least_one() -> None:
    assert max_length(4, 1.5, 10) == 16  # floor(6.0 + 10)
    assert max_length(3, 0.5, 0) == 1  # floor(1.5)
    assert max_length(5, 0.0, 0) == 1  # never below one piece
    assert max_length(7, 1.2, -2) == 6  # floor(8.4 - 2)
    # per sentence from the padding mask: |x| counts the real tokens, EOS included
    assert max_lengths(make_batch([[7, 8, 9], [7]]).src_pad_mask, 1.5, 10) == [16, 13]


def test_length_limit_markov() -> None:
    # after a: a/b 0.3 each; with EOS banned by the limit a=0,b=1 -> one token, unfinished
    (hyp,) = greedy_search(MarkovToy(), make_batch([[7, 8]]), max_len_a=0.0, max_len_b=1)
    assert hyp.tokens == [A] and not hyp.finished
    assert hyp.attention.shape == (1, 3)
    (nbest,) = beam_search(
        MarkovToy(), make_batch([[7]]), beam_size=2, alpha=0.0, max_len_a=0, max_len_b=1, n_best=2
    )
    assert sorted(h.tokens for h in nbest) == [[A], [B]]
    assert not any(h.finished for h in nbest)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam1_equals_greedy(seed: int) -> None:
    torch.manual_seed(seed)
    model = TinyGRU(eos_bias=1.0).eval()
    batch = make_batch(SOURCES)
    greedy = greedy_search(model, batch)
    beam = [h[0] for h in beam_search(model, batch, beam_size=1)]
    assert [h.tokens for h in greedy] == [h.tokens for h in beam]
    via = translate_batch(model, batch, beam_size=1, alpha=0.6)
    assert [h.tokens for h in via] == [h.tokens for h in greedy]


def test_greedy_score_is_sum_of_logprobs_and_attention_rows() -> None:
    model = _tiny(eos_bias=2.0)
    batch = make_batch(SOURCES)
    for src, hyp in zip(SOURCES, greedy_search(model, batch)):
        assert hyp.score == pytest.approx(
            _seq_logprob(model, src, hyp.tokens, hyp.finished), abs=1e-4
        )
        steps = len(hyp.tokens) + int(hyp.finished)
        assert hyp.attention.shape == (steps, len(src) + 1)
        assert torch.allclose(hyp.attention.sum(-1), torch.ones(steps), atol=1e-5)


@pytest.mark.parametrize("eos_bias", [-3.0, 1.5])
def test_batched_equals_one_at_a_time(eos_bias: float) -> None:
    model = _tiny(eos_bias)
    batch = make_batch(SOURCES)
    greedy = greedy_search(model, batch)
    beam = beam_search(model, batch, beam_size=3, n_best=3)
    for i, src in enumerate(SOURCES):
        (g1,) = greedy_search(model, make_batch([src]))
        assert g1.tokens == greedy[i].tokens
        assert g1.score == pytest.approx(greedy[i].score, abs=1e-4)
        assert torch.allclose(g1.attention, greedy[i].attention, atol=1e-5)
        (b1,) = beam_search(model, make_batch([src]), beam_size=3, n_best=3)
        assert [h.tokens for h in b1] == [h.tokens for h in beam[i]]
        assert [h.score for h in b1] == pytest.approx([h.score for h in beam[i]], abs=1e-4)


@pytest.mark.parametrize("eos_bias", [-5.0, 0.0, 2.0])
def test_every_hypothesis_ends_at_eos_or_limit(eos_bias: float) -> None:
    model = _tiny(eos_bias)
    batch = make_batch(SOURCES)
    a, b = 1.0, 2
    outputs: list[list[Hypothesis]] = [[h] for h in greedy_search(model, batch, a, b)]
    outputs += beam_search(model, batch, beam_size=4, alpha=0.6, max_len_a=a, max_len_b=b, n_best=4)
    n_src = [len(s) + 1 for s in SOURCES] * 2
    for limit_src, hyps in zip(n_src, outputs):
        limit = math.floor(a * limit_src + b)
        for h in hyps:
            assert len(h.tokens) <= limit
            assert EOS_ID not in h.tokens and PAD_ID not in h.tokens and BOS_ID not in h.tokens
            assert h.finished or len(h.tokens) == limit
            assert h.attention.shape[0] == len(h.tokens) + int(h.finished)
    if eos_bias == -5.0:  # EOS is very unlikely: everything stops at the limit
        assert not any(h.finished for hyps in outputs for h in hyps)


def test_beam_nbest_sorted_and_scores_match_model() -> None:
    model = _tiny(eos_bias=1.0)
    alpha = 0.6
    for src, hyps in zip(SOURCES, beam_search(model, make_batch(SOURCES), 4, alpha, n_best=4)):
        assert len(hyps) == 4
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 4
        for h in hyps:
            steps = len(h.tokens) + int(h.finished)
            expected = _seq_logprob(model, src, h.tokens, h.finished) / length_penalty(steps, alpha)
            assert h.score == pytest.approx(expected, abs=1e-4)


@pytest.mark.parametrize("k", [9, 11, 13])
def test_beam_as_wide_as_the_vocabulary_never_extends_eos(k: int) -> None:
    # V = 13 with PAD and BOS banned: from k > V - 3 on, fewer than k non-EOS candidates
    # exist at the first step, and the empty slots must stay dead, not revive EOS.
    model, alpha = _tiny(eos_bias=1.0), 0.6
    for src, hyps in zip(SOURCES, beam_search(model, make_batch(SOURCES), k, alpha, n_best=k)):
        assert 1 <= len(hyps) <= k
        assert len({tuple(h.tokens) for h in hyps}) == len(hyps)
        for h in hyps:
            assert EOS_ID not in h.tokens and math.isfinite(h.score)
            steps = len(h.tokens) + int(h.finished)
            expected = _seq_logprob(model, src, h.tokens, h.finished) / length_penalty(steps, alpha)
            assert h.score == pytest.approx(expected, abs=1e-4)


def test_beam_wider_than_the_markov_toy_finds_every_short_sequence() -> None:
    # Only a and b are possible after BOS; k=10 must not pad the beam with EOS repeats.
    (hyps,) = beam_search(MarkovToy(), make_batch([[7]]), beam_size=10, alpha=0.0, n_best=10)
    assert all(EOS_ID not in h.tokens for h in hyps)
    assert [B] in [h.tokens for h in hyps] and [A] in [h.tokens for h in hyps]
    assert hyps[0].tokens == [B] and hyps[0].score == pytest.approx(math.log(0.36), abs=1e-6)


def test_beam_is_at_least_as_good_as_greedy_without_penalty() -> None:
    model = _tiny(eos_bias=1.0)
    batch = make_batch(SOURCES)
    for g, (b,) in zip(greedy_search(model, batch), beam_search(model, batch, 5, alpha=0.0)):
        if g.finished and b.finished:
            assert b.score >= g.score - 1e-5


def test_bad_beam_settings() -> None:
    batch = make_batch([[5]])
    with pytest.raises(ConfigError, match="beam size"):
        beam_search(MarkovToy(), batch, beam_size=0)
    with pytest.raises(ConfigError, match="n_best"):
        beam_search(MarkovToy(), batch, beam_size=2, n_best=3)


# ---- the registered models ------------------------------------------------------------------

REAL_CONFIGS = {
    "transformer": {
        "name": "transformer",
        "d_model": 16,
        "n_heads": 2,
        "enc_layers": 2,
        "dec_layers": 2,
        "d_ff": 32,
        "dropout": 0.0,
        "attention_dropout": 0.0,
    },
    "rnn_bahdanau": {
        "name": "rnn_bahdanau",
        "emb_dim": 8,
        "hidden_size": 8,
        "enc_layers": 1,
        "dropout": 0.0,
    },
    "rnn_luong": {
        "name": "rnn_luong",
        "emb_dim": 8,
        "hidden_size": 8,
        "enc_layers": 1,
        "dropout": 0.0,
    },
}
VOCAB = 13


def _real(name: str) -> Seq2Seq:
    from attnmt.models.registry import build_model

    torch.manual_seed(1)
    return build_model(REAL_CONFIGS[name], VOCAB, VOCAB, True).eval()


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
@torch.no_grad()
def test_cached_decoding_equals_recomputing_prefix(name: str) -> None:
    model = _real(name)
    src, tgt = [5, 6, 7, 8, 9], [10, 4, 11, 12, 6, 7]
    batch = make_batch([src])
    state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
    prev = BOS_ID
    for t in range(len(tgt) + 1):
        log_probs, state, attn = model.decode_step(state, torch.tensor([prev]))
        prefix = make_batch([src], [tgt[:t]])  # tgt_input = [BOS, y_0 .. y_{t-1}]
        full = model(prefix).log_softmax(-1)[0, t]
        assert torch.allclose(log_probs[0], full, atol=1e-5), f"step {t}"
        cross = model.attention(prefix)["cross"][0, t]
        assert torch.allclose(attn[0], cross, atol=1e-5), f"attention at step {t}"
        prev = tgt[t] if t < len(tgt) else EOS_ID


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_real_models_batched_equals_single_and_beam1_equals_greedy(name: str) -> None:
    model = _real(name)
    batch = make_batch(SOURCES)
    greedy = greedy_search(model, batch, max_len_a=1.0, max_len_b=3)
    beam = beam_search(model, batch, beam_size=3, max_len_a=1.0, max_len_b=3, n_best=2)
    beam1 = beam_search(model, batch, beam_size=1, max_len_a=1.0, max_len_b=3)
    assert [h.tokens for h in greedy] == [b[0].tokens for b in beam1]
    for i, src in enumerate(SOURCES):
        single = make_batch([src])
        (g1,) = greedy_search(model, single, max_len_a=1.0, max_len_b=3)
        assert g1.tokens == greedy[i].tokens
        assert torch.allclose(g1.attention, greedy[i].attention, atol=1e-5)
        (b1,) = beam_search(model, single, beam_size=3, max_len_a=1.0, max_len_b=3, n_best=2)
        assert [h.tokens for h in b1] == [h.tokens for h in beam[i]]
        assert [h.score for h in b1] == pytest.approx([h.score for h in beam[i]], abs=1e-4)
        for h in (g1, *b1):
            assert h.finished or len(h.tokens) == len(src) + 1 + 3
            assert h.attention.shape == (len(h.tokens) + int(h.finished), len(src) + 1)


def _searches(net: Seq2Seq, batch: Batch) -> list[list[Hypothesis]]:
    """Greedy (as one-element lists) and beam-3 3-best hypotheses of every sentence."""
    greedy = [[h] for h in greedy_search(net, batch, max_len_a=1.5, max_len_b=4)]
    return greedy + beam_search(net, batch, beam_size=3, max_len_a=1.5, max_len_b=4, n_best=3)


@pytest.mark.parametrize("name", sorted(REAL_CONFIGS))
def test_model_reorder_equals_plain_select_state(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The searches' reorders through ``model.reorder_state`` (source side kept within a
    sentence's beams, the Transformer's caches gathered into buffers with room) give
    exactly the outputs of reordering every leaf with select_state."""
    model = _real(name)
    batch = make_batch([*SOURCES, [5, 6, 7, 8, 9, 10, 11, 12], [4]])
    for net in (model, Ensemble([model, _real("transformer")])):
        fast = _searches(net, batch)
        with monkeypatch.context() as patch:
            patch.setattr(
                net, "reorder_state", lambda state, index, _=None: select_state(state, index)
            )
            plain = _searches(net, batch)
        assert [[h.tokens for h in hs] for hs in fast] == [[h.tokens for h in hs] for hs in plain]
        assert [[h.score for h in hs] for hs in fast] == [[h.score for h in hs] for hs in plain]
        for hs, ps in zip(fast, plain):
            assert all(torch.equal(h.attention, p.attention) for h, p in zip(hs, ps))
