"""trainer.precision=auto on a CPU: the timed probe, its verdict, its cache, and that it
leaves the run untouched."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import attnmt.train.precision_probe as pp
from attnmt.data.batching import make_batch
from attnmt.models.registry import build_model
from attnmt.train.distributed import DistInfo

CPU = torch.device("cpu")
TINY = {
    "name": "transformer",
    "d_model": 32,
    "n_heads": 2,
    "enc_layers": 1,
    "dec_layers": 1,
    "d_ff": 64,
}
SINGLE = DistInfo()


def _model():
    torch.manual_seed(0)
    return build_model(dict(TINY), 40, 40, True)


def _batch():
    return make_batch([[5, 6, 7], [8, 9]], [[10, 11], [12, 13, 14]])


@pytest.mark.parametrize(
    ("fp32", "bf16", "choice"),
    [
        ([1.0, 1.0, 1.0], [0.5, 0.6, 0.4], "bf16"),
        ([1.0] * 3, [0.97] * 3, "fp32"),
        ([1.0] * 3, [20.0] * 3, "fp32"),
    ],
)
def test_decide_takes_bf16_only_when_clearly_faster(fp32, bf16, choice) -> None:
    got, reason = pp.decide({"fp32": fp32, "bf16": bf16})
    assert got == choice
    assert "bf16" in reason and "fp32" in reason


def test_the_verdict_is_cached_per_key_and_read_back(tmp_path: Path) -> None:
    calls: list[int] = []

    def timer(model, batch):
        calls.append(1)
        return {"fp32": [2.0, 2.0, 2.0], "bf16": [1.0, 1.0, 1.0]}

    def no_timer(model, batch):
        raise AssertionError("the cache should have answered")

    model, batch = _model(), _batch()
    assert pp.probe(model, batch, tmp_path, "k1", timer)[0] == "bf16"
    choice, why = pp.probe(model, batch, tmp_path, "k1", no_timer)
    assert choice == "bf16" and "cached in" in why
    assert pp.probe(model, batch, tmp_path, "k2", timer)[0] == "bf16"  # another key: timed
    assert len(calls) == 2
    saved = json.loads((tmp_path / pp.CACHE_FILE).read_text())
    assert set(saved) == {"k1", "k2"} and saved["k1"]["times"]["fp32"] == [2.0] * 3


def test_an_unreadable_cache_is_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / pp.CACHE_FILE).write_text("{not json")
    timer = lambda m, b: {"fp32": [1.0] * 3, "bf16": [3.0] * 3}  # noqa: E731
    assert pp.probe(_model(), _batch(), tmp_path, "k", timer)[0] == "fp32"
    assert "k" in json.loads((tmp_path / pp.CACHE_FILE).read_text())


def test_timing_leaves_weights_gradients_and_random_state_as_they_were() -> None:
    model, batch = _model(), _batch()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(7)
    times = pp.time_steps(model, batch, rounds=2)
    after_probe = torch.rand(5)
    torch.manual_seed(7)
    assert torch.equal(after_probe, torch.rand(5))  # as if the probe had not run
    assert set(times) == {"fp32", "bf16"} and all(len(v) == 2 for v in times.values())
    assert all(t > 0 for v in times.values() for t in v)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert all(p.grad is None for p in model.parameters())


def test_cache_key_names_cpu_torch_threads_and_changes_with_the_model() -> None:
    b = _batch()
    a = pp.cache_key("transformer", TINY, 40, b)
    assert torch.__version__ in a and f"{torch.get_num_threads()} threads" in a
    assert pp.cache_key("transformer", {**TINY, "d_ff": 128}, 40, b) != a
    assert pp.cache_key("transformer", TINY, 80, b) != a


def test_no_native_bf16_means_fp32_without_a_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: False)
    monkeypatch.setattr(pp, "time_steps", lambda m, b: pytest.fail("no probe expected"))
    with caplog.at_level(logging.INFO):
        p = pp.choose_precision("auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == "fp32" and "no native bf16" in caplog.text
    assert not (tmp_path / pp.CACHE_FILE).exists()


@pytest.mark.parametrize("faster", ["fp32", "bf16"])
def test_native_bf16_is_probed_and_the_faster_one_chosen(
    faster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    slow, fast = [2.0] * 3, [1.0] * 3
    times = {"fp32": fast, "bf16": slow} if faster == "fp32" else {"fp32": slow, "bf16": fast}
    monkeypatch.setattr(pp, "cpu_has_fast_bf16", lambda: True)
    monkeypatch.setattr(pp, "time_steps", lambda m, b: times)
    with caplog.at_level(logging.INFO):
        p = pp.choose_precision("auto", CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40)
    assert p.name == faster
    assert f"precision auto -> {faster}: timed step" in caplog.text


@pytest.mark.parametrize("name", ["fp32", "bf16"])
def test_an_explicit_precision_is_never_probed(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pp, "time_steps", lambda m, b: pytest.fail("no probe expected"))
    assert pp.choose_precision(name, CPU, _model(), _batch, tmp_path, SINGLE, TINY, 40).name == name


def test_probe_batch_fills_about_max_tokens_from_the_first_pairs() -> None:
    data = [([7] * 9, [8] * 9, i) for i in range(100)]
    batch = pp.probe_batch(data, 100)
    assert batch.src.shape == (10, 10)  # 10 pairs of 9 pieces + EOS = 100 tokens a side
