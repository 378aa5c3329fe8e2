"""RNN encoder–decoders: interface, padding invariance, causality, cached == teacher-forced,
beam-style state selection, config validation, and overfitting a tiny batch."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from attnmt import BOS_ID
from attnmt.data.batching import make_batch
from attnmt.errors import ConfigError
from attnmt.models.attention import ALIGNMENTS, SCORERS
from attnmt.models.base import select_state
from attnmt.models.rnn import BahdanauSeq2Seq, LuongSeq2Seq, RNNSeq2Seq

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "model"
MODELS = {"rnn_bahdanau": BahdanauSeq2Seq, "rnn_luong": LuongSeq2Seq}
# rnn_luong without input feeding teacher-forces all positions in one RNN + attention call
VARIANTS = {**MODELS, "rnn_luong_nofeed": LuongSeq2Seq}
V = 12
SRC = [[4, 5, 6, 7, 8, 9], [10, 11], [5, 5, 6]]
TGT = [[6, 7, 8], [9, 10, 11, 4, 5, 6, 7], [8]]


def tiny(name: str, cell: str = "gru", score: str = "additive", mode: str = "global", **kw):
    if name == "rnn_luong_nofeed":
        kw = {"input_feeding": False, **kw}
    cfg = {
        "cell": cell,
        "emb_dim": 8,
        "hidden_size": 6,
        "enc_layers": 2,
        "dec_layers": 2,
        "dropout": 0.1,
        "attention": {"score": score, "mode": mode, "window": 2, "max_src_len": 16},
        **kw,
    }
    return VARIANTS[name].from_config(cfg, V, V, shared_vocab=True).eval()


COMBOS = [(n, s, m) for n in VARIANTS for s in SCORERS for m in ALIGNMENTS]


@pytest.mark.parametrize(("name", "score", "mode"), COMBOS)
def test_every_scorer_and_mode_padding_invariant(name: str, score: str, mode: str) -> None:
    model = tiny(name, score=score, mode=mode)
    batch = make_batch(SRC, TGT)
    with torch.no_grad():
        logits = model(batch)
        cross = model.attention(batch)["cross"]
        assert logits.shape == (3, 8, V) and cross.shape == (3, 8, 7)
        assert cross[batch.src_pad_mask[:, None, :].expand_as(cross)].eq(0).all()
        for i in range(3):
            alone = model(make_batch([SRC[i]], [TGT[i]]))[0]
            torch.testing.assert_close(logits[i, : alone.size(0)], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("name", "score", "mode"), COMBOS)
def test_every_scorer_and_mode_normalised_causal_and_cached(
    name: str, score: str, mode: str
) -> None:
    model = tiny(name, score=score, mode=mode)
    batch = make_batch(SRC, TGT)
    valid = batch.tgt_out.ne(0)  # real target steps [B,T]
    with torch.no_grad():
        logits = model(batch)
        cross = model.attention(batch)["cross"]  # [B,T,S]
        sums = cross.sum(-1)[valid]
        if mode == "local_p":  # Luong's Gaussian re-weighting: a_t = align * exp(...) <= align
            assert sums.gt(0).all() and sums.le(1 + 1e-6).all()
        else:
            torch.testing.assert_close(sums, torch.ones_like(sums))
        # causality: changing target input k leaves the logits of steps < k unchanged
        changed = make_batch(SRC, TGT)
        changed.tgt_input[:, 2] = (changed.tgt_input[:, 2] + 3) % V
        assert torch.equal(model(changed)[:, :2], logits[:, :2])
        # step-by-step decoding with the state == teacher forcing
        expected = F.log_softmax(logits, dim=-1)
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        for t in range(batch.tgt_input.size(1)):
            log_probs, state, attn = model.decode_step(state, batch.tgt_input[:, t])
            torch.testing.assert_close(log_probs, expected[:, t], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(attn, cross[:, t], atol=1e-6, rtol=1e-5)
    # training mode (dropout, Gumbel noise for hard): finite gradients for every parameter
    model.train()
    loss = F.cross_entropy(model(batch).reshape(-1, V), batch.tgt_out.reshape(-1), ignore_index=0)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_forward_equals_step_by_step_decoding(name: str, cell: str) -> None:
    model = tiny(name, cell)
    batch = make_batch(SRC, TGT)
    with torch.no_grad():
        expected = F.log_softmax(model(batch), dim=-1)
        cross = model.attention(batch)["cross"]
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        for t in range(batch.tgt_input.size(1)):
            log_probs, state, attn = model.decode_step(state, batch.tgt_input[:, t])
            assert log_probs.shape == (3, V) and attn.shape == (3, 7)
            torch.testing.assert_close(log_probs, expected[:, t], atol=1e-6, rtol=1e-6)
            torch.testing.assert_close(attn, cross[:, t])
            torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(3))


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_causality(name: str, cell: str) -> None:
    model = tiny(name, cell)
    batch = make_batch(SRC, TGT)
    with torch.no_grad():
        base = model(batch)
        for k in (1, 4):
            changed = make_batch(SRC, TGT)
            changed.tgt_input[:, k] = (changed.tgt_input[:, k] + 3) % V
            logits = model(changed)
            assert torch.equal(logits[:, :k], base[:, :k])
            assert not torch.allclose(logits[:, k:], base[:, k:])


@pytest.mark.parametrize("name", list(VARIANTS))
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_state_leaves_are_batch_first_for_beam_search(name: str, cell: str) -> None:
    model = tiny(name, cell, mode="local_m")
    batch = make_batch(SRC)
    index = torch.tensor([2, 2, 0, 1, 1])
    with torch.no_grad():
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        tokens = torch.tensor([BOS_ID, 5, 6])
        for _ in range(2):
            _, state, _ = model.decode_step(state, tokens)
        assert all(v.size(0) == 3 for v in state.values())
        assert ("cell" in state) == (cell == "lstm")
        a, state_a, attn_a = model.decode_step(select_state(state, index), tokens[index])
        b, _, attn_b = model.decode_step(state, tokens)
        torch.testing.assert_close(a, b[index])
        torch.testing.assert_close(attn_a, attn_b[index])
        assert state_a["step"].tolist() == [3] * 5


def test_luong_input_feeding_switch() -> None:
    fed, plain = tiny("rnn_luong"), tiny("rnn_luong", input_feeding=False)
    assert fed.decoder.input_size == 8 + 6 and plain.decoder.input_size == 8
    batch = make_batch(SRC)
    with torch.no_grad():
        memory = fed.encode(batch.src, batch.src_pad_mask)
        state = fed.init_state(memory, batch.src_pad_mask)
        assert state["feed"].eq(0).all()
        _, state, _ = fed.decode_step(state, torch.full((3,), BOS_ID))
        assert state["feed"].abs().sum() > 0
        assert "feed" not in plain.init_state(
            plain.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask
        )


def test_bahdanau_queries_previous_state() -> None:
    """The first step's attention depends on the bridge's s_0, not on the input token."""
    model = tiny("rnn_bahdanau")
    batch = make_batch(SRC)
    with torch.no_grad():
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        _, _, attn_a = model.decode_step(state, torch.full((3,), BOS_ID))
        _, _, attn_b = model.decode_step(state, torch.full((3,), 7))
    torch.testing.assert_close(attn_a, attn_b)


def test_bridge_and_embeddings() -> None:
    model = tiny("rnn_luong", "lstm")
    assert len(model.bridge_h.layers) == 2 and len(model.bridge_c.layers) == 2
    assert model.bridge_h.layers[0].in_features == 2 * 3  # top layer, forward ⊕ backward
    assert model.bridge_h.layers[0].out_features == 6 == model.bridge_c.layers[1].out_features
    assert model.src_embed is model.tgt_embed  # joint vocabulary shares the table
    separate = LuongSeq2Seq.from_config({"emb_dim": 6, "hidden_size": 6}, 10, 12, False)
    assert separate.src_embed is not separate.tgt_embed
    tied = BahdanauSeq2Seq.from_config({"emb_dim": 8, "tie_embeddings": True}, V, V, True)
    assert tied.generator.weight is tied.tgt_embed.weight


def test_unidirectional_single_layer_lstm() -> None:
    model = tiny("rnn_bahdanau", "lstm", bidirectional=False, enc_layers=1, dec_layers=1)
    assert model(make_batch(SRC, TGT)).shape == (3, 8, V)


# -- sizes: annotations are hidden_size wide, so dot, scaled_dot and cosine need no map --------


def _attention_parameters(model: RNNSeq2Seq) -> int:
    return sum(p.numel() for p in model.attn.parameters())


def test_each_direction_of_a_bidirectional_encoder_gets_half_the_decoder_size() -> None:
    model = tiny("rnn_luong")  # hidden_size 6, bidirectional
    assert model.encoder.rnn.hidden_size == 3 and model.encoder.rnn.bidirectional
    batch = make_batch(SRC)
    with torch.no_grad():
        memory = model.encode(batch.src, batch.src_pad_mask)
    assert memory["memory"].shape == (3, 7, 6) and memory["final_h"].shape == (3, 6)
    uni = tiny("rnn_luong", bidirectional=False)  # one direction: all of hidden_size
    assert uni.encoder.rnn.hidden_size == 6 and uni.encoder.output_dim == 6
    wide = tiny("rnn_luong", score="general", enc_hidden_size=10)  # set apart: 5 a direction
    assert wide.encoder.rnn.hidden_size == 5 and wide.attn.scorer.W.weight.shape == (6, 10)


# H = hidden_size = annotation size = 6; Dh = attention.hidden_dim (null -> H) = 6; tiny()'s
# max_src_len = 16
TINY_ATTENTION = {
    "dot": 0,
    "scaled_dot": 0,
    "cosine": 1,  # β
    "general": 6 * 6,  # W_a [H, H]
    "additive": 6 * 6 + 6 * 6 + 6,  # W_1 [Dh, H], W_2 [Dh, H], v_a [Dh]
    "concat": 6 * (6 + 6) + 6,  # W_a [Dh, H + H], v_a [Dh]
    "location": 16 * 6 + 16,  # W_a [max_src_len, H] and its bias
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("score", list(SCORERS))
def test_attention_parameters_are_the_scorers_own(name: str, score: str) -> None:
    model = tiny(name, score=score)
    assert model.attn.key_adapter is None
    assert _attention_parameters(model) == TINY_ATTENTION[score]


# The presets: H = 256, Dh = 256, max_src_len = 256.
PRESET_ATTENTION = {
    "dot": 0,
    "scaled_dot": 0,
    "cosine": 1,
    "general": 65_536,  # 256 · 256
    "additive": 131_328,  # 256 · 256 + 256 · 256 + 256
    "concat": 131_328,  # 256 · 512 + 256
    "location": 65_792,  # 256 · 256 + 256
}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("score", list(SCORERS))
def test_preset_attention_parameters(name: str, score: str) -> None:
    cfg = OmegaConf.load(CONFIGS / f"{name}.yaml")
    cfg.attention.score = score
    with torch.device("meta"):
        model = MODELS[name].from_config(cfg, 8000, 8000, True)
    assert _attention_parameters(model) == PRESET_ATTENTION[score]


def test_preset_parameter_counts() -> None:
    """Both presets at a joint 8,000-piece vocabulary, counted by hand: a 2-layer bi-GRU
    encoder with 128 units a direction, annotations and decoder state of 256."""
    embedding = 8000 * 256  # shared source/target table
    gru_128 = 3 * 128 * 256 + 3 * 128 * 128 + 2 * 3 * 128  # input 256 (emb or 2 × 128)
    encoder = 2 * 2 * gru_128  # 2 layers × 2 directions = 592,896
    bridge = 256 * 256 + 256  # [h→_n; h←_1] (256) -> s_0 (256)
    gru_dec = 3 * 256 * 512 + 3 * 256 * 256 + 2 * 3 * 256  # input 512, hidden 256
    generator = 256 * 8000 + 8000
    luong = embedding + encoder + bridge + 65_536 + gru_dec + 512 * 256 + generator  # W_c no bias
    readout = (256 + 256 + 256) * 256 + 256  # [s_t; c_t; E y_{t-1}] -> 256
    bahdanau = embedding + encoder + bridge + 131_328 + gru_dec + readout + generator
    counts = {}
    for name in MODELS:
        with torch.device("meta"):
            model = MODELS[name].from_config(
                OmegaConf.load(CONFIGS / f"{name}.yaml"), 8000, 8000, True
            )
        counts[name] = sum(p.numel() for p in model.parameters())
        assert sum(p.numel() for p in model.encoder.parameters()) == encoder == 592_896
    assert counts == {"rnn_luong": luong, "rnn_bahdanau": bahdanau}
    assert (luong, bahdanau) == (5_550_656, 5_682_240)


def test_annotations_of_another_size_go_through_a_key_adapter_and_say_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """enc_hidden_size set apart from hidden_size: dot can compare the two only through a
    learned map (as checkpoints from before enc_hidden_size need), and the log says so."""
    with caplog.at_level(logging.WARNING, logger="attnmt.models.rnn"):
        model = tiny("rnn_luong", score="dot", enc_hidden_size=10)
    assert model.attn.key_adapter is not None and model.attn.key_adapter.weight.shape == (6, 10)
    assert _attention_parameters(model) == 60
    assert "no longer parameter-free" in caplog.text
    assert "model.enc_hidden_size=10" in caplog.text and "model.hidden_size=6" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="attnmt.models.rnn"):
        additive = tiny("rnn_luong", score="additive", enc_hidden_size=10)
    assert additive.attn.key_adapter is None and caplog.text == ""  # W_2 takes any size
    assert _attention_parameters(additive) == 6 * 6 + 6 * 10 + 6


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"hiden_size": 4}, r"model\.hiden_size"),
        ({"attention": {"scor": "dot"}}, r"model\.attention\.scor"),
        ({"emb_dim": "big"}, r"model\.emb_dim"),
        ({"cell": "rnn"}, r"model\.cell='rnn'.*gru, lstm"),
        ({"attention": {"mode": "soft"}}, r"model\.attention\.mode='soft'.*local_p"),
        ({"dropout": 1.5}, r"model\.dropout"),
        ({"tie_embeddings": True, "hidden_size": 6, "emb_dim": 8}, "tie_embeddings"),
        ({"input_feeding": False}, r"model\.input_feeding"),  # a Luong-only key
        ({"hidden_size": 7}, r"model\.hidden_size=7 .*model\.bidirectional=true"),
        ({"enc_hidden_size": 9}, r"model\.enc_hidden_size=9 .*model\.bidirectional=true"),
        ({"enc_hidden_size": 0}, r"model\.enc_hidden_size=0"),
    ],
)
def test_bad_config_raises_config_error(cfg: dict, message: str) -> None:
    cls = LuongSeq2Seq if "tie_embeddings" in cfg else BahdanauSeq2Seq
    with pytest.raises(ConfigError, match=message):
        cls.from_config(cfg, V, V, True)


@pytest.mark.parametrize("name", list(MODELS))
def test_yaml_presets_build_and_accept_any_attention(name: str) -> None:
    cfg = OmegaConf.load(CONFIGS / f"{name}.yaml")
    assert cfg.name == name
    cfg.hidden_size, cfg.emb_dim = 8, 8
    cfg.attention.score, cfg.attention.mode = "concat", "local_p"
    model = MODELS[name].from_config(cfg, V, V, True)
    assert isinstance(model, RNNSeq2Seq) and model.cfg.attention.mode == "local_p"
    defaults = OmegaConf.to_container(OmegaConf.structured(MODELS[name].Config))
    assert set(OmegaConf.to_container(cfg)) == set(defaults)


def _overfit(model: RNNSeq2Seq, steps: int) -> float:
    batch = make_batch(
        [[4, 5, 6], [7, 8], [9, 10, 11, 4], [5, 7]], [[6, 5, 4], [8, 7], [11, 10, 9], [7, 7, 5]]
    )
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    model.train()
    for _ in range(steps):
        logits = model(batch)
        loss = F.cross_entropy(logits.reshape(-1, V), batch.tgt_out.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


@pytest.mark.parametrize("name", list(MODELS))
def test_overfits_tiny_batch(name: str) -> None:
    model = MODELS[name].from_config(
        {"emb_dim": 16, "hidden_size": 16, "enc_layers": 1, "dropout": 0.0}, V, V, True
    )
    assert _overfit(model, 150) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize(
    ("score", "mode"), [("dot", "local_m"), ("concat", "local_p"), ("cosine", "hard")]
)
def test_overfits_tiny_batch_lstm_other_attention(name: str, score: str, mode: str) -> None:
    cfg = {
        "cell": "lstm",
        "emb_dim": 16,
        "hidden_size": 16,
        "enc_layers": 1,
        "dropout": 0.0,
        "attention": {"score": score, "mode": mode, "window": 2},
    }
    model = MODELS[name].from_config(cfg, V, V, True)
    assert _overfit(model, 300) < 0.05
