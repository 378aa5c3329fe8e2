"""The model interface (attnmt.models.base), checked for every registered model.

Parametrised over ``attnmt.models.registry.MODELS`` with a tiny config per model:
shapes, attention normalisation and padding zeros, causality, padding invariance,
cached decoding == teacher forcing, state reordering, overfitting a fixed batch, and
config round trips.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import Tensor

from attnmt import PAD_ID
from attnmt.batch import Batch
from attnmt.data.batching import make_batch
from attnmt.errors import AttnmtError, ConfigError
from attnmt.models.base import Seq2Seq, map_state, select_state
from attnmt.models.registry import MODELS, build_model

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "model"
VOCAB = 24
_RNN_TINY = {"emb_dim": 16, "hidden_size": 16, "enc_layers": 1, "dec_layers": 1, "dropout": 0.0}
TINY: dict[str, dict[str, Any]] = {
    "transformer": {
        "d_model": 32,
        "n_heads": 4,
        "enc_layers": 2,
        "dec_layers": 2,
        "d_ff": 64,
        "dropout": 0.0,
        "attention_dropout": 0.0,
    },
    "rnn_bahdanau": _RNN_TINY,
    "rnn_luong": _RNN_TINY,
}
NAMES = sorted(MODELS)


def tiny_config(name: str) -> dict[str, Any]:
    return {"name": name, **TINY.get(name, {})}


def tiny_model(name: str, shared: bool = True) -> Seq2Seq:
    return build_model(tiny_config(name), VOCAB, VOCAB, shared).eval()


def padded_batch() -> Batch:
    """Three pairs of different lengths: padding on both sides."""
    return make_batch(
        [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]],
        [[15, 16], [17, 18, 19, 20, 21, 22], [4, 5, 6]],
    )


def valid_steps(batch: Batch) -> Tensor:
    """[B,T] True at target positions that are not padding."""
    return ~batch.tgt_pad_mask


def teacher_forced_decode(model: Seq2Seq, batch: Batch) -> tuple[Tensor, Tensor]:
    """decode_step over tgt_input -> (log_probs [B,T,V], attn [B,T,S])."""
    state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
    log_probs, attns = [], []
    for t in range(batch.tgt_input.size(1)):
        lp, state, attn = model.decode_step(state, batch.tgt_input[:, t])
        log_probs.append(lp)
        attns.append(attn)
    return torch.stack(log_probs, 1), torch.stack(attns, 1)


def assert_attention_distribution(attn: Tensor, src_pad_mask: Tensor) -> None:
    """attn [B,T,S]: sums to 1 over valid source positions, exactly 0 on padding."""
    pad = src_pad_mask[:, None, :].expand_as(attn)
    assert torch.all(attn.masked_select(pad) == 0), "attention leaks onto source padding"
    assert torch.all(attn >= 0)
    torch.testing.assert_close(attn.sum(-1), torch.ones(attn.shape[:2]), atol=1e-5, rtol=0)


def batch_leaves(tree: Any) -> list[Tensor]:
    leaves: list[Tensor] = []
    map_state(tree, lambda t: leaves.append(t) or t)
    return leaves


# ---------------------------------------------------------------- registry


def test_registry_has_every_family() -> None:
    assert {"transformer", "rnn_bahdanau", "rnn_luong"} <= set(MODELS)


def test_unknown_model_name_lists_the_choices() -> None:
    with pytest.raises(ConfigError, match="rnn_bahdanau, rnn_luong, transformer"):
        build_model({"name": "transfomer"}, VOCAB, VOCAB, True)


@pytest.mark.parametrize("name", NAMES)
def test_build_model_round_trips(name: str) -> None:
    a = tiny_model(name)
    b = build_model(OmegaConf.create(tiny_config(name)), VOCAB, VOCAB, True)
    assert a.name == b.name == name
    shapes = {k: v.shape for k, v in a.state_dict().items()}
    assert shapes == {k: v.shape for k, v in b.state_dict().items()}
    b.load_state_dict(a.state_dict())  # strict: same keys
    batch = padded_batch()
    torch.testing.assert_close(a(batch), b.eval()(batch))


@pytest.mark.parametrize("name", NAMES)
def test_unknown_config_key_is_rejected(name: str) -> None:
    with pytest.raises(AttnmtError, match="no_such_key"):
        build_model({**tiny_config(name), "no_such_key": 1}, VOCAB, VOCAB, True)


@pytest.mark.parametrize("preset", sorted(p.stem for p in CONFIGS.glob("*.yaml")))
def test_every_model_preset_builds(preset: str) -> None:
    cfg = OmegaConf.load(CONFIGS / f"{preset}.yaml")
    if str(cfg.name) not in MODELS:
        pytest.fail(f"configs/model/{preset}.yaml names {cfg.name!r}, not in the registry")
    model = build_model(cfg, 50, 50, True)
    assert model.name == cfg.name
    assert sum(p.numel() for p in model.parameters()) > 0


# ------------------------------------------------------------------ shapes


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_batch_first_state(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    b, s = batch.src.shape
    t = batch.tgt_input.size(1)
    assert model(batch).shape == (b, t, VOCAB)
    memory = model.encode(batch.src, batch.src_pad_mask)
    assert all(leaf.size(0) == b for leaf in batch_leaves(memory))
    state = model.init_state(memory, batch.src_pad_mask)
    log_probs, state, attn = model.decode_step(state, batch.tgt_input[:, 0])
    assert log_probs.shape == (b, VOCAB) and attn.shape == (b, s)
    torch.testing.assert_close(log_probs.exp().sum(-1), torch.ones(b))
    assert all(leaf.size(0) == b for leaf in batch_leaves(state))
    maps = model.attention(batch)
    assert maps["cross"].shape == (b, t, s)


# --------------------------------------------------------------- attention


@pytest.mark.parametrize("name", NAMES)
def test_attention_sums_to_one_and_is_zero_on_padding(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    with torch.no_grad():
        assert_attention_distribution(model.attention(batch)["cross"], batch.src_pad_mask)
        _, attn = teacher_forced_decode(model, batch)
    assert_attention_distribution(attn, batch.src_pad_mask)


@pytest.mark.parametrize("name", NAMES)
def test_decode_step_attention_matches_teacher_forced_maps(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    with torch.no_grad():
        cross = model.attention(batch)["cross"]
        _, attn = teacher_forced_decode(model, batch)
    valid = valid_steps(batch)
    torch.testing.assert_close(attn[valid], cross[valid], atol=1e-5, rtol=0)


# --------------------------------------------------------------- causality


@pytest.mark.parametrize("name", NAMES)
def test_causality(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    with torch.no_grad():
        logits = model(batch)
        for k in range(1, batch.tgt_input.size(1)):
            changed = Batch(**{**batch.__dict__, "tgt_input": batch.tgt_input.clone()})
            changed.tgt_input[:, k:] = (changed.tgt_input[:, k:] + 7) % VOCAB
            after = model(changed)
            torch.testing.assert_close(after[:, :k], logits[:, :k], atol=1e-6, rtol=0)
            assert not torch.allclose(after[:, k], logits[:, k])  # the change does matter


# ------------------------------------------------------- padding invariance


@pytest.mark.parametrize("name", NAMES)
def test_padding_invariance(name: str) -> None:
    model = tiny_model(name)
    src, tgt = [7, 8, 9], [10, 11]
    alone = make_batch([src], [tgt])
    crowd = make_batch([[4] * 9, src, [5, 6]], [[12] * 8, tgt, [13]])
    with torch.no_grad():
        single = model(alone)[0]  # [T,V]
        batched = model(crowd)[1, : single.size(0)]
        single_attn = model.attention(alone)["cross"][0]
        batched_attn = model.attention(crowd)["cross"][1, : single.size(0), : alone.src.size(1)]
    torch.testing.assert_close(batched, single, atol=1e-5, rtol=0)
    torch.testing.assert_close(batched_attn, single_attn, atol=1e-5, rtol=0)


# ------------------------------------------------------------ cached decoding


@pytest.mark.parametrize("name", NAMES)
def test_cached_decoding_equals_teacher_forcing(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    with torch.no_grad():
        expected = F.log_softmax(model(batch).float(), dim=-1)
        log_probs, _ = teacher_forced_decode(model, batch)
    valid = valid_steps(batch)
    torch.testing.assert_close(log_probs[valid], expected[valid], atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_state_reorders_along_batch(name: str) -> None:
    model, batch = tiny_model(name), padded_batch()
    order = torch.tensor([2, 0, 0, 1])  # reorder and duplicate, as beam search does
    with torch.no_grad():
        state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
        _, state, _ = model.decode_step(state, batch.tgt_input[:, 0])
        lp, _, attn = model.decode_step(state, batch.tgt_input[:, 1])
        lp_sel, _, attn_sel = model.decode_step(
            select_state(state, order), batch.tgt_input[order, 1]
        )
    torch.testing.assert_close(lp_sel, lp[order], atol=1e-5, rtol=0)
    torch.testing.assert_close(attn_sel, attn[order], atol=1e-5, rtol=0)


# ---------------------------------------------------------------- learning


def _overfit(model: Seq2Seq, batch: Batch, steps: int, lr: float) -> Callable[[], float]:
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()

    def loss_fn() -> Tensor:
        logits = model(batch)
        return F.cross_entropy(
            logits.reshape(-1, logits.size(-1)), batch.tgt_out.reshape(-1), ignore_index=PAD_ID
        )

    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        if loss.item() < 0.01:
            break
    model.eval()
    return lambda: float(loss_fn())


@pytest.mark.parametrize("name", NAMES)
def test_overfits_a_tiny_batch(name: str) -> None:
    model = build_model(tiny_config(name), VOCAB, VOCAB, True)
    batch = padded_batch()
    with torch.no_grad():
        initial = F.cross_entropy(
            model.eval()(batch).reshape(-1, VOCAB), batch.tgt_out.reshape(-1), ignore_index=PAD_ID
        ).item()
    final = _overfit(model, batch, steps=300, lr=1e-2)
    with torch.no_grad():
        final_loss = final()
        greedy = model(batch).argmax(-1)
    assert final_loss < 0.05 < initial, (initial, final_loss)
    valid = valid_steps(batch)
    assert torch.equal(greedy[valid], batch.tgt_out[valid])
