"""Transformer specifics: config schema, presets, embeddings, positions, norms, caches.

Interface-wide behaviour (shapes, causality, padding invariance, overfitting) is in
tests/test_model_contract.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from attnmt.data.batching import make_batch
from attnmt.errors import ConfigError
from attnmt.models.base import select_state
from attnmt.models.positional import LearnedPositions, SinusoidalPositions
from attnmt.models.transformer import Transformer, TransformerConfig
from attnmt.schema import parse

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "model"
TINY = {"name": "transformer", "d_model": 16, "n_heads": 2, "enc_layers": 2, "dec_layers": 2}
TINY |= {"d_ff": 32, "dropout": 0.0, "attention_dropout": 0.0}


VARIANTS = [{}, {"norm": "post"}, {"positions": "learned"}, {"activation": "gelu"}]
VARIANT_IDS = ["pre", "post", "learned", "gelu"]


def _model(vocab: int = 20, shared: bool = True, **overrides: object) -> Transformer:
    return Transformer.from_config({**TINY, **overrides}, vocab, vocab, shared).eval()


def _batch():
    return make_batch([[5, 6, 7, 8], [9, 10]], [[4, 5, 6], [11, 12, 13, 14, 15]])


# ------------------------------------------------------------------ config


def test_defaults_match_the_dataclass() -> None:
    cfg = parse({"name": "transformer"}, TransformerConfig, "model.")
    assert cfg == TransformerConfig()


@pytest.mark.parametrize(
    ("cfg", "needle"),
    [
        ({"d_modle": 32}, "d_modle"),
        ({"d_model": "big"}, "d_model"),
        ({"dropout": "x"}, "dropout"),
        ({"norm": "middle"}, "model.norm='middle'"),
        ({"activation": "tanh"}, "relu, gelu"),
        ({"positions": "rotary"}, "sinusoidal, learned"),
        ({"d_model": 30, "n_heads": 4}, "divisible"),
        ({"enc_layers": 0}, "model.enc_layers must be positive"),
        ({"dropout": 1.5}, "model.dropout"),
    ],
)
def test_bad_config_is_a_config_error_naming_the_key(cfg: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle.replace(".", r"\.")):
        Transformer.from_config({**TINY, **cfg}, 20, 20, True)


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIGS.glob("transformer*.yaml")))
def test_presets_parse_and_build(preset: str) -> None:
    cfg = OmegaConf.load(CONFIGS / f"{preset}.yaml")
    parsed = parse(cfg, TransformerConfig, "model.")
    assert parsed.name == "transformer"
    assert parsed.d_model % parsed.n_heads == 0


def test_default_preset_is_the_dataclass_default() -> None:
    assert (
        parse(OmegaConf.load(CONFIGS / "transformer.yaml"), TransformerConfig, "model.")
        == TransformerConfig()
    )


def test_transformer_base_is_the_papers() -> None:
    cfg = parse(OmegaConf.load(CONFIGS / "transformer_base.yaml"), TransformerConfig, "model.")
    assert (cfg.d_model, cfg.n_heads, cfg.d_model // cfg.n_heads) == (512, 8, 64)
    assert (cfg.enc_layers, cfg.dec_layers, cfg.d_ff, cfg.norm) == (6, 6, 2048, "post")
    model = Transformer(cfg, 100, 100, share=True)
    # per layer: enc 4·512² attn + 2·512·2048 ffn; dec has one more attention block
    attn, ffn = 4 * 512 * 512, 2 * 512 * 2048
    matrices = 6 * (attn + ffn) + 6 * (2 * attn + ffn)
    n = sum(p.numel() for p in model.parameters())
    assert matrices < n < matrices * 1.01 + 100 * 512


# -------------------------------------------------------------- embeddings


def test_joint_vocab_shares_and_ties_embeddings() -> None:
    model = _model(shared=True)
    assert model.src_embed is model.tgt_embed
    assert model.out_proj.weight is model.tgt_embed.weight


def test_separate_vocabularies_do_not_share() -> None:
    model = Transformer.from_config(TINY, 30, 20, False)
    assert model.src_embed is not model.tgt_embed
    assert model.src_embed.num_embeddings == 30 and model.out_proj.out_features == 20
    untied = Transformer.from_config({**TINY, "tie_embeddings": False}, 20, 20, True)
    assert untied.out_proj.weight is not untied.tgt_embed.weight
    unshared = Transformer.from_config({**TINY, "share_embeddings": False}, 20, 20, True)
    assert unshared.src_embed is not unshared.tgt_embed


def test_embeddings_are_scaled_and_positioned() -> None:
    model = _model()
    tokens = torch.tensor([[5, 6, 0]])
    x = model._embed(model.tgt_embed, tokens, torch.arange(3))
    expected = model.tgt_embed(tokens) * math.sqrt(16) + model.positions(torch.arange(3))
    torch.testing.assert_close(x, expected)
    assert torch.all(model.tgt_embed.weight[0] == 0)  # PAD row


def test_sinusoidal_positions_hand_values() -> None:
    pe = SinusoidalPositions(4)(torch.tensor([0, 1, 2]))
    assert pe.shape == (3, 4)
    # dims (0,1) use frequency 1, dims (2,3) use 1/10000^(2/4) = 1/100
    expected = [[math.sin(p), math.cos(p), math.sin(p / 100), math.cos(p / 100)] for p in range(3)]
    torch.testing.assert_close(pe, torch.tensor(expected))


def test_learned_positions_reject_too_long_inputs() -> None:
    pos = LearnedPositions(8, max_positions=4)
    assert pos(torch.arange(4)).shape == (4, 8)
    with pytest.raises(ConfigError, match="max_positions"):
        pos(torch.arange(5))


# ------------------------------------------------------------------ layers


def test_pre_norm_has_final_layer_norm_post_norm_does_not() -> None:
    assert isinstance(_model(norm="pre").enc_norm, nn.LayerNorm)
    assert isinstance(_model(norm="post").dec_norm, nn.Identity)


def test_post_norm_layer_outputs_are_normalised() -> None:
    model = _model(norm="post")
    b = _batch()
    memory = model.encode(b.src, b.src_pad_mask)["memory"]
    # LayerNorm at init (γ=1, β=0) is the last op of a post-norm layer
    torch.testing.assert_close(memory.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(memory.var(-1, unbiased=False), torch.ones(2, 5), atol=1e-3, rtol=0)


def test_gelu_activation_is_used() -> None:
    model = _model(activation="gelu")
    assert any(isinstance(m, nn.GELU) for m in model.modules())
    assert not any(isinstance(m, nn.ReLU) for m in model.modules())


def test_dropout_active_in_training_only() -> None:
    model = Transformer.from_config({**TINY, "dropout": 0.3}, 20, 20, True)
    b = _batch()
    model.train()
    assert not torch.allclose(model(b), model(b))
    model.eval()
    assert torch.equal(model(b), model(b))


# --------------------------------------------------------------- decoding


@pytest.mark.parametrize("overrides", VARIANTS, ids=VARIANT_IDS)
def test_cached_decoding_equals_teacher_forcing(overrides: dict) -> None:
    model, b = _model(**overrides), _batch()
    expected = torch.log_softmax(model(b), -1)
    state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    for t in range(b.tgt_input.size(1)):
        log_probs, state, _ = model.decode_step(state, b.tgt_input[:, t])
        torch.testing.assert_close(log_probs, expected[:, t], atol=1e-5, rtol=0)
        assert state["self_k"][0].shape == (2, 2, t + 1, 8)
        assert state["step"].tolist() == [t + 1, t + 1]


def test_cross_keys_are_computed_once_and_reused() -> None:
    model, b = _model(), _batch()
    state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    cross = state["cross_k"][1]
    _, state, _ = model.decode_step(state, b.tgt_input[:, 0])
    _, state, _ = model.decode_step(state, b.tgt_input[:, 1])
    assert state["cross_k"][1] is cross


def test_state_reorders_with_select_state() -> None:
    model, b = _model(), _batch()
    state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    _, state, _ = model.decode_step(state, b.tgt_input[:, 0])
    flipped = select_state(state, torch.tensor([1, 0, 0]))  # reorder and expand, as beam does
    lp_flip, _, attn_flip = model.decode_step(flipped, b.tgt_input[[1, 0, 0], 1])
    lp, _, attn = model.decode_step(state, b.tgt_input[:, 1])
    torch.testing.assert_close(lp_flip, lp[[1, 0, 0]])
    torch.testing.assert_close(attn_flip, attn[[1, 0, 0]])


def test_attention_maps_have_every_layer_and_valid_masks() -> None:
    model, b = _model(), _batch()
    maps = model.attention(b)
    assert set(maps) == {"cross"} | {
        f"{kind}/layer{i}" for kind in ("cross", "self", "enc_self") for i in range(2)
    }
    assert maps["enc_self/layer1"].shape == (2, 2, 5, 5)
    self_w = maps["self/layer0"]
    assert torch.all(self_w[..., torch.ones(6, 6, dtype=torch.bool).triu(1)] == 0)
    torch.testing.assert_close(maps["cross"], maps["cross/layer1"].mean(1))


def test_bf16_autocast_runs_and_log_probs_are_float32() -> None:
    model, b = _model(), _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(b)
        state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
        log_probs, _, attn = model.decode_step(state, b.tgt_input[:, 0])
    assert logits.dtype == torch.bfloat16
    assert log_probs.dtype == torch.float32
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(2))
    assert torch.all(attn[1, 3:] == 0)


def test_from_config_accepts_a_config_instance() -> None:
    cfg = parse(TINY, TransformerConfig, "model.")
    model = Transformer.from_config(cfg, 20, 20, True)
    assert model.config == cfg and model.config.d_model == 16


@pytest.mark.parametrize("overrides", VARIANTS, ids=VARIANT_IDS)
def test_every_variant_is_padding_invariant_causal_and_normalised(overrides: dict) -> None:
    model, b = _model(**overrides), _batch()
    with torch.no_grad():
        logits = model(b)
        for i, (src, tgt) in enumerate(
            [([5, 6, 7, 8], [4, 5, 6]), ([9, 10], [11, 12, 13, 14, 15])]
        ):
            alone = model(make_batch([src], [tgt]))[0]
            torch.testing.assert_close(logits[i, : alone.size(0)], alone, atol=1e-5, rtol=1e-5)
        changed = _batch()
        changed.tgt_input[:, 3] = 7
        assert torch.equal(model(changed)[:, :3], logits[:, :3])
        maps = model.attention(b)
        real_src = ~b.src_pad_mask  # [B,S]
        for name, weights in maps.items():
            if not name.startswith("cross/"):
                continue
            assert weights[~real_src[:, None, None, :].expand_as(weights)].eq(0).all(), name
            torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


# ------------------------------------------------------ cache buffers (decoding)


def _steps(model: Transformer, state: dict, tokens: torch.Tensor, copy: bool) -> list:
    """decode_step over tokens [B,T]; ``copy``: hand each step a select_state copy of the
    state (contiguous caches with no room: the appending-by-copy path)."""
    outs = []
    for t in range(tokens.size(1)):
        if copy:
            state = select_state(state, torch.arange(tokens.size(0)))
        log_probs, state, attn = model.decode_step(state, tokens[:, t])
        outs.append((log_probs, attn))
    return outs


@torch.no_grad()
def test_cache_appends_in_place_and_equals_appending_by_copy() -> None:
    model, b = _model(), _batch()
    tokens = torch.randint(4, 20, (2, 20), generator=torch.Generator().manual_seed(0))
    start = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    state, ptrs = start, []
    for t in range(tokens.size(1)):
        _, state, _ = model.decode_step(state, tokens[:, t])
        assert state["self_k"][1].shape == (2, 2, t + 1, 8)
        ptrs.append(state["self_v"][1].untyped_storage().data_ptr())
    # the first step allocates room for 16 positions, the 17th doubles it: two buffers
    assert len(set(ptrs[:16])) == 1 and len(set(ptrs)) == 2
    in_place = _steps(model, start, tokens, copy=False)
    copied = _steps(model, start, tokens, copy=True)
    for (lp, attn), (lp_c, attn_c) in zip(in_place, copied):
        assert torch.equal(lp, lp_c) and torch.equal(attn, attn_c)


@torch.no_grad()
def test_stepping_an_older_state_again_leaves_the_newer_one_intact() -> None:
    model, b = _model(), _batch()
    state0 = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    _, state1, _ = model.decode_step(state0, torch.tensor([5, 6]))
    _, state2, _ = model.decode_step(state1, torch.tensor([7, 8]))
    saved = [k.clone() for k in state2["self_k"]]
    lp_again, _, _ = model.decode_step(state1, torch.tensor([9, 10]))  # state1 a second time
    assert all(torch.equal(k, s) for k, s in zip(state2["self_k"], saved))
    lp_copy, _, _ = model.decode_step(select_state(state1, torch.arange(2)), torch.tensor([9, 10]))
    assert torch.equal(lp_again, lp_copy)
    lp2, _, _ = model.decode_step(state2, torch.tensor([9, 10]))
    lp2_copy, _, _ = model.decode_step(select_state(state2, torch.arange(2)), torch.tensor([9, 10]))
    assert torch.equal(lp2, lp2_copy)


@torch.no_grad()
def test_reorder_state_equals_select_state_and_keeps_the_source_side() -> None:
    model, b = _model(), _batch()
    state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    expand = torch.tensor([0, 0, 0, 1, 1, 1])  # two sentences, three beams each
    state = model.reorder_state(state, expand, expand)
    for t in range(3):
        _, state, _ = model.decode_step(state, torch.tensor([5, 6, 7, 8, 9, 10]) + t)
    within = torch.tensor([2, 0, 0, 5, 3, 4])  # every row stays with its sentence
    kept = model.reorder_state(state, within)
    plain = select_state(state, within)
    assert kept["cross_k"][0] is state["cross_k"][0]  # the source side is not copied
    assert kept["self_k"][0].shape == plain["self_k"][0].shape == (6, 2, 3, 8)
    dropped = model.reorder_state(state, torch.tensor([5, 3, 4]), torch.tensor([3, 4, 5]))
    assert torch.equal(dropped["cross_v"][1], state["cross_v"][1][3:])
    prev = torch.tensor([11, 12, 13, 14, 15, 16])
    for reordered, rows in ((kept, within), (dropped, torch.tensor([5, 3, 4]))):
        expected = select_state(state, rows)
        for key in ("self_k", "self_v", "cross_k", "cross_v"):
            assert all(torch.equal(x, y) for x, y in zip(reordered[key], expected[key]))
        lp, _, attn = model.decode_step(reordered, prev[: len(rows)])
        lp_plain, _, attn_plain = model.decode_step(expected, prev[: len(rows)])
        assert torch.equal(lp, lp_plain) and torch.equal(attn, attn_plain)


def test_decoding_with_autograd_never_writes_into_a_cache() -> None:
    """With grad enabled the caches grow by concatenation (autograd saved the old ones), so
    backward through several steps and a reorder works and matches the no-grad values."""
    model, b = _model(), _batch()
    state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
    state = model.reorder_state(state, torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1]))
    total = torch.zeros(())
    for t in range(4):
        log_probs, state, _ = model.decode_step(state, torch.tensor([5, 6, 7]) + t)
        total = total + log_probs[:, 4 + t].sum()
        if t % 2:  # two steps in a row, then a reorder
            state = model.reorder_state(state, torch.tensor([1, 0, 2]))
    total.backward()
    assert model.tgt_embed.weight.grad is not None
    with torch.no_grad():
        state = model.init_state(model.encode(b.src, b.src_pad_mask), b.src_pad_mask)
        state = model.reorder_state(state, torch.tensor([0, 0, 1]), torch.tensor([0, 0, 1]))
        expected = torch.zeros(())
        for t in range(4):
            log_probs, state, _ = model.decode_step(state, torch.tensor([5, 6, 7]) + t)
            expected = expected + log_probs[:, 4 + t].sum()
            if t % 2:
                state = model.reorder_state(state, torch.tensor([1, 0, 2]))
    assert torch.equal(total.detach(), expected)
