"""The RNN decoders' teacher-forcing fast paths compute the function of the plain per-step
loop: the decoder's input projection of the target embeddings in one matmul before the loop
(attnmt.models.rnn_cell), the attention keys once per source, the output layer once after
the loop, the padding mask as a view.

The reference below is the loop as the equations write it and as attnmt ran it before these
paths: at every step the decoder's own ``nn.GRU``/``nn.LSTM`` module on the concatenated
input [E y_{t-1}; h̃_{t-1} or c_t], the attention without a key cache (keys projected from
the annotations inside the call), Luong's W_c per step; the output layer over all steps
after the loop, as attnmt applied it already (so dropout draws in one order). Same weights,
same logits (atol 1e-5) and same gradients, for every scorer × mode, both decoders, GRU and
LSTM, input feeding on and off; the incremental decoding path (cached keys) agrees too, and
the parameters keep their names and shapes (checkpoints load unchanged).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attnmt.batch import Batch
from attnmt.data.batching import make_batch
from attnmt.models.attention import ALIGNMENTS, SCORERS
from attnmt.models.rnn import BahdanauSeq2Seq, LuongSeq2Seq, RNNSeq2Seq
from attnmt.models.rnn_cell import DecoderCell
from attnmt.models.rnn_encoder import RNNEncoder

V = 13
SRC = [[4, 5, 6, 7, 8, 9], [10, 11], [5, 5, 6, 12]]
TGT = [[6, 7, 8], [9, 10, 11, 4, 5, 6, 7], [8]]
VARIANTS = ("rnn_bahdanau", "rnn_luong", "rnn_luong_nofeed")


def build(name: str, cell: str, score: str, mode: str, **kw: object) -> RNNSeq2Seq:
    """A tiny model: 2 decoder layers, annotations (8) wider than the decoder state (6), so
    every weight slice and the key adapter of dot/scaled_dot/cosine are exercised."""
    cls = BahdanauSeq2Seq if name == "rnn_bahdanau" else LuongSeq2Seq
    cfg = {
        "cell": cell,
        "emb_dim": 5,
        "hidden_size": 6,
        "enc_hidden_size": 8,
        "enc_layers": 1,
        "dec_layers": 2,
        "dropout": 0.0,
        "attention": {"score": score, "mode": mode, "window": 2, "max_src_len": 16},
        **({"input_feeding": False} if name == "rnn_luong_nofeed" else {}),
        **kw,
    }
    torch.manual_seed(0)
    model = cls.from_config(cfg, V, V, shared_vocab=True)
    with torch.no_grad():  # non-zero biases everywhere, so a misplaced bias shows
        for param in model.parameters():
            param.add_(0.1 * torch.randn_like(param))
    return model


def reference(model: RNNSeq2Seq, batch: Batch) -> tuple[Tensor, Tensor]:
    """The plain per-step loop (see the module docstring) -> (logits [B,T,V], attn [B,T,S])."""
    memory = model.encode(batch.src, batch.src_pad_mask)
    annotations, allowed = memory["memory"], ~batch.src_pad_mask
    h = model.bridge_h(memory["final_h"]).transpose(0, 1).contiguous()  # [L,B,H]
    lstm = model.bridge_c is not None
    rnn_state = (h, model.bridge_c(memory["final_c"]).transpose(0, 1).contiguous()) if lstm else h
    embedded = model.dropout(model.tgt_embed(batch.decoder_input()))  # [B,T,E]
    batch_size, steps = embedded.shape[:2]
    feeding = isinstance(model, LuongSeq2Seq) and model.cfg.input_feeding
    feed = embedded.new_zeros(batch_size, model.cfg.hidden_size)
    features, attn = [], []
    for t in range(steps):
        y = embedded[:, t]
        position = torch.full((batch_size, 1), t)
        if isinstance(model, BahdanauSeq2Seq):
            top = (rnn_state[0] if lstm else rnn_state)[-1]  # s_{t-1}
            ctx, weights = model.attn(top[:, None], annotations, allowed, positions=position)
            out, rnn_state = model.decoder(torch.cat([y, ctx[:, 0]], -1)[:, None], rnn_state)
            features.append(torch.cat([out[:, 0], ctx[:, 0], y], -1))
        else:
            x = torch.cat([y, feed], -1) if feeding else y
            out, rnn_state = model.decoder(x[:, None], rnn_state)
            ctx, weights = model.attn(out, annotations, allowed, positions=position)
            feed = torch.tanh(model.combine(torch.cat([ctx[:, 0], out[:, 0]], -1)))
            features.append(feed)
        attn.append(weights[:, 0])
    return model._output(torch.stack(features, 1)), torch.stack(attn, 1)


def gradients(model: RNNSeq2Seq, logits: Tensor, probe: Tensor) -> dict[str, Tensor]:
    """d(Σ probe ⊙ logits)/dθ for every parameter (zeros where a parameter gets none)."""
    model.zero_grad(set_to_none=True)
    (logits * probe).sum().backward()
    return {
        n: p.grad.clone() if p.grad is not None else torch.zeros_like(p)
        for n, p in model.named_parameters()
    }


def assert_same_function(model: RNNSeq2Seq, batch: Batch, seed: int = 0) -> None:
    """forward == reference (logits, attention, every gradient), both from the same RNG state."""
    torch.manual_seed(seed)
    fast = model(batch)
    torch.manual_seed(seed)
    slow, slow_attn = reference(model, batch)
    assert fast.shape == slow.shape == (*batch.tgt_input.shape, V)
    torch.testing.assert_close(fast, slow, atol=1e-5, rtol=1e-5)
    probe = torch.randn_like(fast)
    fast_grads, slow_grads = gradients(model, fast, probe), gradients(model, slow, probe)
    assert any(g.abs().sum() > 0 for g in fast_grads.values())
    for name, grad in fast_grads.items():
        torch.testing.assert_close(grad, slow_grads[name], atol=1e-5, rtol=1e-4, msg=name)
    if not model.training:
        torch.manual_seed(seed)
        with torch.no_grad():
            torch.testing.assert_close(model.attention(batch)["cross"], slow_attn)


COMBOS = [
    (n, c, s, m) for n in VARIANTS for c in ("gru", "lstm") for s in SCORERS for m in ALIGNMENTS
]


@pytest.mark.parametrize(("name", "cell", "score", "mode"), COMBOS)
def test_teacher_forcing_equals_the_plain_step_loop(
    name: str, cell: str, score: str, mode: str
) -> None:
    """Eval mode (no dropout; hard attention takes the argmax): logits and gradients."""
    model = build(name, cell, score, mode).eval()
    assert_same_function(model, make_batch(SRC, TGT))


# Luong without input feeding attends for all steps in one call: one Gumbel draw [B,T,S]
# instead of the loop's T draws [B,1,S] (the same distribution, other numbers).
TRAIN_COMBOS = [
    (n, c, s, m)
    for n in VARIANTS
    for c in ("gru", "lstm")
    for s, m in (("additive", "hard"), ("general", "local_p"), ("dot", "global"))
    if not (n == "rnn_luong_nofeed" and m == "hard")
]


@pytest.mark.parametrize(("name", "cell", "score", "mode"), TRAIN_COMBOS)
def test_training_mode_equals_the_plain_step_loop(
    name: str, cell: str, score: str, mode: str
) -> None:
    """Training mode with dropout on the embeddings, between the decoder's layers and on
    the outputs, and the straight-through Gumbel sample of hard attention: the same random
    draws in the same order give the same function."""
    model = build(name, cell, score, mode, dropout=0.3).train()
    assert_same_function(model, make_batch(SRC, TGT), seed=3)


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("score", list(SCORERS))
def test_incremental_decoding_equals_teacher_forcing(name: str, cell: str, score: str) -> None:
    """decode_step one token at a time (keys cached in the state) == forward, for each
    scorer, on a model whose decoder input has both a projected and a per-step part."""
    model = build(name, cell, score, "local_m").eval()
    batch = make_batch(SRC, TGT)
    with torch.no_grad():
        expected = F.log_softmax(model(batch), -1)
        cross = model.attention(batch)["cross"]
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        for t in range(batch.tgt_input.size(1)):
            log_probs, state, attn = model.decode_step(state, batch.tgt_input[:, t])
            torch.testing.assert_close(log_probs, expected[:, t], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(attn, cross[:, t], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("training", [False, True])
def test_decoder_cell_step_equals_the_rnn_module(cell: str, layers: int, training: bool) -> None:
    """DecoderCell.project + step over [E y; extra] == nn.GRU/nn.LSTM on the concatenation:
    outputs, states and gradients; in training with the module's dropout between layers,
    drawn in the same order."""
    rnn_cls = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    rnn = rnn_cls(5 + 4, 6, layers, batch_first=True, dropout=0.5 if layers > 1 else 0.0)
    rnn.train(training)
    y, extra = torch.randn(3, 5, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    h0 = torch.randn(3, layers, 6)
    c0 = torch.randn(3, layers, 6)
    state = {"hidden": h0, **({"cell": c0} if cell == "lstm" else {})}
    torch.manual_seed(1)
    cells = DecoderCell(rnn, 5)
    out, new = cells.step(cells.project(y), extra, state)
    torch.manual_seed(1)
    module_state = h0.transpose(0, 1).contiguous()
    if cell == "lstm":
        module_state = (module_state, c0.transpose(0, 1).contiguous())
    ref_out, ref_state = rnn(torch.cat([y, extra], -1)[:, None], module_state)
    ref_h = ref_state[0] if cell == "lstm" else ref_state
    torch.testing.assert_close(out, ref_out[:, 0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(new["hidden"], ref_h.transpose(0, 1), atol=1e-6, rtol=1e-5)
    if cell == "lstm":
        torch.testing.assert_close(new["cell"], ref_state[1].transpose(0, 1), atol=1e-6, rtol=1e-5)
    assert set(new) == set(state)
    probe = torch.randn(3, 6)
    grads = torch.autograd.grad((out * probe).sum(), [y, extra, *rnn.parameters()])
    ref_grads = torch.autograd.grad((ref_out[:, 0] * probe).sum(), [y, extra, *rnn.parameters()])
    for grad, ref_grad in zip(grads, ref_grads):
        torch.testing.assert_close(grad, ref_grad, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("training", [False, True])
def test_gru_encoder_equals_the_module_on_packed_sequences(
    layers: int, bidirectional: bool, training: bool
) -> None:
    """The GRU encoder on the padded batch (the backward direction on each row reversed
    within its length) == its nn.GRU on packed sequences: outputs (0 at padding), the top
    layer's final states and every gradient. Training without dropout (its draws differ)."""
    torch.manual_seed(0)
    encoder = RNNEncoder("gru", 5, 4, layers, bidirectional, dropout=0.0).train(training)
    lengths = torch.tensor([7, 3, 5, 1])
    pad = torch.arange(7)[None, :] >= lengths[:, None]  # [B,S] True = pad
    x = torch.randn(4, 7, 5).masked_fill(pad[..., None], 9.0).requires_grad_()
    outputs, final = encoder(x, pad)
    packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
    ref_packed, ref_h = encoder.rnn(packed)
    ref_outputs, _ = pad_packed_sequence(ref_packed, batch_first=True, total_length=7)
    assert outputs.shape == ref_outputs.shape == (4, 7, 8 if bidirectional else 4)
    torch.testing.assert_close(outputs, ref_outputs, atol=1e-6, rtol=1e-5)
    assert outputs[pad].eq(0).all()
    torch.testing.assert_close(final["h"], encoder._top(ref_h), atol=1e-6, rtol=1e-5)
    probe, probe_h = torch.randn_like(outputs), torch.randn_like(final["h"])
    inputs = [x, *encoder.parameters()]
    grads = torch.autograd.grad((outputs * probe).sum() + (final["h"] * probe_h).sum(), inputs)
    ref = (ref_outputs * probe).sum() + (encoder._top(ref_h) * probe_h).sum()
    for grad, ref_grad in zip(grads, torch.autograd.grad(ref, inputs)):
        torch.testing.assert_close(grad, ref_grad, atol=1e-5, rtol=1e-4)
    assert grads[0][pad].eq(0).all()  # padding never reaches a real output


# State-dict entries and parameter count of build()'s tiny models (concat, local_p) as the
# per-step code before the fast paths had them (commit 4e60aa9).
BEFORE = {
    ("rnn_bahdanau", "gru"): (30, 1377),
    ("rnn_bahdanau", "lstm"): (34, 1783),
    ("rnn_luong", "gru"): (29, 1338),
    ("rnn_luong", "lstm"): (33, 1732),
}


@pytest.mark.parametrize("name", ["rnn_bahdanau", "rnn_luong"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_parameter_names_and_shapes_are_unchanged(name: str, cell: str) -> None:
    """The decoder is still the nn.GRU/nn.LSTM over the whole input [E y; c_t or h̃], so
    checkpoints of the per-step code load strictly."""
    model = build(name, cell, "concat", "local_p")
    state = model.state_dict()
    assert (len(state), sum(p.numel() for p in model.parameters())) == BEFORE[name, cell]
    assert isinstance(model.decoder, torch.nn.GRU if cell == "gru" else torch.nn.LSTM)
    rows = (3 if cell == "gru" else 4) * 6  # G gate blocks of H = 6
    extra = 8 if name == "rnn_bahdanau" else 6  # c_t (annotations) or h̃_{t-1}
    expected = {
        "decoder.weight_ih_l0": (rows, 5 + extra),  # [E y_{t-1}; extra]
        "decoder.weight_ih_l1": (rows, 6),
        **{f"decoder.weight_hh_l{k}": (rows, 6) for k in (0, 1)},
        **{f"decoder.bias_{s}_l{k}": (rows,) for s in ("ih", "hh") for k in (0, 1)},
    }
    assert {k: tuple(v.shape) for k, v in state.items() if k.startswith("decoder.")} == expected
    twin = build(name, cell, "concat", "local_p")
    twin.load_state_dict({k: v + 1 for k, v in state.items()}, strict=True)
    batch = make_batch(SRC, TGT)
    with torch.no_grad():
        assert not torch.allclose(twin.eval()(batch), model.eval()(batch))
