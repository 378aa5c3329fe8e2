"""Attention entropy at validation: the figures on hand-made maps (uniform = log n,
one-hot = 0, pad rows and columns left out, normalised by log n), a real model's maps
through the validation pass, and a toy training run whose TensorBoard event file and
metrics.jsonl carry the figures at each validation."""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path

import pytest
import torch
from helpers.toy_train import CONFIGS, TOY_OVERRIDES
from hydra import compose, initialize_config_dir
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attnmt.decode.attention_entropy import EntropyMeans, row_entropy
from attnmt.models.registry import build_model
from attnmt.run_record import read_record
from attnmt.train.evaluation import EvalSet, attention_entropy
from attnmt.train.loop import train
from attnmt.train.precision import Precision


def _mask(lengths: list[int], width: int) -> torch.Tensor:
    """[B, width] True at padding, for rows of ``lengths`` real positions."""
    return torch.arange(width)[None, :] >= torch.tensor(lengths)[:, None]


def _uniform(src_len: int, tgt_len: int, width: int, rows: int | None = None) -> torch.Tensor:
    """[rows, width]: each of the first ``tgt_len`` rows uniform over the first ``src_len``
    columns, 0 elsewhere (rows and columns beyond are padding)."""
    weights = torch.zeros(rows or tgt_len, width)
    weights[:tgt_len, :src_len] = 1.0 / src_len
    return weights


def _means(maps: dict[str, torch.Tensor], src: list[int], tgt: list[int]) -> EntropyMeans:
    acc = EntropyMeans()
    acc.add(maps, _mask(src, maps["cross"].size(-1)), _mask(tgt, maps["cross"].size(-2)))
    return acc


def test_uniform_rows_have_entropy_log_n_and_one_hot_rows_zero() -> None:
    uniform = _uniform(5, 3, 5)[None]
    assert row_entropy(uniform, _mask([5], 5))[0].tolist() == pytest.approx([math.log(5)] * 3)
    one_hot = torch.eye(4)[None, :3]  # rows 0..2 each on one column
    assert row_entropy(one_hot, _mask([4], 4)).tolist() == [[0.0, 0.0, 0.0]]
    acc = _means({"cross": uniform}, [5], [3])
    assert acc.means() == {"cross": pytest.approx(math.log(5))}
    assert acc.normalised() == {"cross": pytest.approx(1.0)}
    acc = _means({"cross": one_hot}, [4], [3])
    assert acc.means() == {"cross": 0.0} and acc.normalised() == {"cross": 0.0}


def test_pad_rows_and_pad_columns_are_left_out() -> None:
    """Rows past the target's end hold garbage and columns past the source's end hold mass:
    neither counts, so the figures are those of the real rows over the real columns."""
    weights = torch.full((1, 6, 8), 1.0 / 8)  # every row uniform over all 8 columns
    weights[0, :2] = _uniform(4, 2, 8)  # the 2 real rows: uniform over the 4 real columns
    weights[0, 1, 4:] = 0.3  # mass on pad columns of a real row is not counted
    acc = _means({"cross": weights}, [4], [2])
    h1 = -4 * 0.25 * math.log(0.25)
    assert acc.means() == {"cross": pytest.approx(h1)}
    assert acc.normalised() == {"cross": pytest.approx(1.0)}


def test_a_sentence_scores_the_same_alone_and_in_a_padded_batch() -> None:
    torch.manual_seed(0)
    short = torch.softmax(torch.randn(1, 3, 4), dim=-1)  # 3 target rows over 4 source pieces
    long = torch.softmax(torch.randn(1, 7, 9), dim=-1)
    batch = torch.zeros(2, 7, 9)
    batch[0, :3, :4], batch[1] = short[0], long[0]
    together = _means({"cross": batch}, [4, 9], [3, 7])
    alone_short, alone_long = _means({"cross": short}, [4], [3]), _means({"cross": long}, [9], [7])
    token_mean = (3 * alone_short.means()["cross"] + 7 * alone_long.means()["cross"]) / 10
    assert together.means()["cross"] == pytest.approx(token_mean)


def test_normalisation_puts_lengths_on_one_scale_and_weights_target_positions() -> None:
    """Uniform rows: 3 target positions over 2 source pieces, 1 over 8. The mean is over
    target positions (3 log 2 + log 8) / 4; normalised, every row is 1."""
    weights = torch.stack([_uniform(2, 3, 8), _uniform(8, 1, 8, rows=3)])
    acc = _means({"cross": weights}, [2, 8], [3, 1])
    assert acc.means()["cross"] == pytest.approx((3 * math.log(2) + math.log(8)) / 4)
    assert acc.normalised()["cross"] == pytest.approx(1.0)
    half = torch.zeros(1, 1, 4)
    half[0, 0, :2] = 0.5  # two of four columns: log 2 / log 4
    assert _means({"cross": half}, [4], [1]).normalised()["cross"] == pytest.approx(0.5)


def test_a_one_piece_source_has_no_normalised_entropy() -> None:
    """A row over one source position has no choice: H = 0, left out of the normalised
    mean (which is NaN when nothing is left), kept in the plain mean."""
    weights = torch.zeros(2, 2, 3)
    weights[0, :, 0] = 1.0  # source of 1 piece
    weights[1, :2, :3] = 1.0 / 3
    acc = _means({"cross": weights}, [1, 3], [2, 2])
    assert acc.means()["cross"] == pytest.approx(2 * math.log(3) / 4)
    assert acc.normalised()["cross"] == pytest.approx(1.0)
    alone = _means({"cross": weights[:1]}, [1], [2])
    assert alone.means() == {"cross": 0.0} and math.isnan(alone.normalised()["cross"])
    assert math.isnan(EntropyMeans().means().get("cross", math.nan))


def test_transformer_layers_average_their_heads_entropies() -> None:
    """cross_layer{i} is the mean of each head's entropy (one-hot head 0, uniform head 1:
    log 4 / 2), not the entropy of the head-averaged map ("cross"); layers in order."""
    head0 = torch.eye(4)[None, :2]  # [1,2,4]
    head1 = _uniform(4, 2, 4)[None]
    layer = torch.stack([head0, head1], dim=1)  # [1,H=2,T=2,S=4]
    maps = {"cross": layer.mean(dim=1), "self/layer0": torch.ones(1, 2, 2, 2)}
    maps.update({f"cross/layer{i}": layer for i in (10, 2, 0)})
    acc = _means(maps, [4], [2])
    assert list(acc.means()) == ["cross", "cross_layer0", "cross_layer2", "cross_layer10"]
    assert acc.means()["cross_layer2"] == pytest.approx(math.log(4) / 2)
    assert acc.normalised()["cross_layer2"] == pytest.approx(0.5)
    mixed = [0.625, 0.125, 0.125, 0.125]  # row 0 of the head mean
    assert acc.means()["cross"] == pytest.approx(-sum(p * math.log(p) for p in mixed))


def test_the_validation_pass_reads_the_first_pairs_in_any_batching() -> None:
    """attention_entropy teacher-forces the first ``pairs`` pairs only; one pair a batch
    or all in one padded batch give the same figures."""
    torch.manual_seed(0)
    tiny = {"d_model": 16, "n_heads": 2, "enc_layers": 1, "dec_layers": 2, "d_ff": 32}
    model = build_model({"name": "transformer", **tiny}, 30, 30, True).eval()
    lengths = [(3, 5), (7, 2), (1, 4), (9, 9), (4, 6)]
    src = [torch.randint(4, 30, (s,)).tolist() for s, _ in lengths]
    tgt = [torch.randint(4, 30, (t,)).tolist() for _, t in lengths]
    data = EvalSet(src, tgt, [""] * 5, [""] * 5)
    fp32 = Precision("fp32", None, "cpu", torch.amp.GradScaler("cpu", enabled=False))
    cpu = torch.device("cpu")

    def figures(data: EvalSet, max_tokens: int, pairs: int) -> dict[str, float]:
        means = attention_entropy(model, data, max_tokens, cpu, fp32, pairs)
        return {**means.means(), **{f"{k}/norm": v for k, v in means.normalised().items()}}

    first3 = EvalSet(src[:3], tgt[:3], [""] * 3, [""] * 3)
    one_batch, one_a_batch = figures(data, 10_000, 3), figures(first3, 1, 100)
    assert list(one_batch) == [
        *("cross", "cross_layer0", "cross_layer1"),
        *("cross/norm", "cross_layer0/norm", "cross_layer1/norm"),
    ]
    assert one_batch == pytest.approx(one_a_batch)
    assert figures(data, 10_000, 5) != pytest.approx(one_batch)


def _events(run: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def _toy_run(tmp_path: Path, *model: str) -> Path:
    """4 updates of the toy trainer with ``model`` overrides, validating at steps 2 and 4."""
    settings = [
        *(o for o in TOY_OVERRIDES if not o.startswith("model")),
        *model,
        f"data.root={tmp_path / 'data'}",
        "data.toy.train=100",
        "data.toy.valid=5",
        "trainer.max_tokens=256",
        "trainer.max_steps=4",
        "trainer.val_every_steps=2",
        "trainer.num_samples=0",
    ]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name="train", overrides=settings)
    train(cfg, tmp_path / "run")
    return tmp_path / "run"


def _check_run(run: Path, names: list[str]) -> None:
    """Every validation has each map's entropy (nats, in [0, log S]) and its normalised
    figure (in [0, 1]), in TensorBoard and in the record's valid event, the same numbers."""
    acc, valid = _events(run), read_record(run).valid
    assert [e["step"] for e in valid] == [2, 4]
    for event in valid:
        assert list(event["attention_entropy"]) == names
        assert list(event["attention_entropy_norm"]) == names
    for name in names:
        plain = acc.Scalars(f"val_attention/entropy/{name}")
        norm = acc.Scalars(f"val_attention/entropy_norm/{name}")
        assert [e.step for e in plain] == [e.step for e in norm] == [2, 4]
        for e, n, event in zip(plain, norm, valid):
            assert e.value == pytest.approx(event["attention_entropy"][name], rel=1e-6)
            assert n.value == pytest.approx(event["attention_entropy_norm"][name], rel=1e-6)
            assert 0.0 < e.value < math.log(40) and 0.0 < n.value <= 1.0


def test_a_transformer_run_logs_each_cross_layer_at_each_validation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tiny = ["model=transformer_tiny", "model.d_model=32", "model.d_ff=64", "model.n_heads=2"]
    with caplog.at_level(logging.INFO):
        run = _toy_run(tmp_path, *tiny, "model.enc_layers=1", "model.dec_layers=2")
    _check_run(run, ["cross", "cross_layer0", "cross_layer1"])
    logged = re.findall(r"valid step (\d+) \|.* \| attn entropy ([\d.]+)$", caplog.text, re.M)
    norm = [e["attention_entropy_norm"]["cross"] for e in read_record(run).valid]
    assert [(int(s), float(v)) for s, v in logged] == [
        (2, round(norm[0], 2)),
        (4, round(norm[1], 2)),
    ]


def test_an_rnn_run_logs_its_one_map(tmp_path: Path) -> None:
    run = _toy_run(tmp_path, "model=rnn_bahdanau", "model.emb_dim=16", "model.hidden_size=16")
    _check_run(run, ["cross"])
