"""benchmarks/probe_shapes.py: the probe's batch against new and seen shapes, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks import probe_shapes


def test_the_speedup_of_summed_seconds_and_of_each_pair() -> None:
    # by hand: sums 1.0 + 3.0 = 4.0 over 1.0 + 1.0 = 2.0; pair ratios 1.0 and 3.0, median 2.0
    found = probe_shapes.speedup([1.0, 3.0], [1.0, 1.0])
    assert found["speedup_sum"] == 2.0 and found["speedup_median"] == 2.0
    assert probe_shapes.speedup([2.0, 2.0, 9.0], [1.0, 4.0, 3.0])["speedup_median"] == 2.0


def test_a_cpu_report_times_three_parts_on_the_loader_s_batches(tmp_path: Path) -> None:
    out = tmp_path / "shapes.json"
    probe_shapes.main(["--models", "transformer_tiny", "--device", "cpu", "--batches", "4",
                       "--rounds", "2", "--out", str(out), "data=toy_reverse",
                       f"data.root={tmp_path / 'data'}", "trainer.max_tokens=256"])  # fmt: skip
    report = json.loads(out.read_text())
    assert report["max_tokens"] == 256 and report["machine"]["cpu"]["name"]
    (run,) = report["runs"]
    assert run["model"] == "transformer_tiny" and run["batches"] == 4
    assert 1 <= run["distinct_shapes"] <= 4
    probed = run["trainer_probe"]
    assert probed["choice"] in ("fp32", "bf16") and probed["rounds"] >= 5
    for part in ("trainer_probe", "probe", "first_visit", "second_visit"):
        r = run[part]
        assert r["sum_fp32_s"] > 0 and r["sum_bf16_s"] > 0
        assert r["speedup_sum"] == pytest.approx(r["sum_fp32_s"] / r["sum_bf16_s"], rel=1e-2)
    for part in ("first_visit", "second_visit"):  # one record a batch, shapes as the loader's
        rows = run[part]["per_batch"]
        assert len(rows) == 4 and all(r["fp32_s"] > 0 and r["bf16_s"] > 0 for r in rows)
        assert len({str(r["shape"]) for r in rows}) == run["distinct_shapes"]
    assert [r["shape"] for r in run["first_visit"]["per_batch"]] == [
        r["shape"] for r in run["second_visit"]["per_batch"]
    ]


def test_padding_to_a_multiple_changes_shapes_not_the_loss() -> None:
    from attnmt.data.batching import make_batch
    from attnmt.models.registry import build_model
    from attnmt.train.loss import label_smoothed_nll

    batch = make_batch([[5, 6, 7], [8, 9]], [[4, 5, 6, 7, 8], [9]])  # S = 4, T = 6
    wide = probe_shapes.padded(batch, 8)
    assert probe_shapes.shape(wide) == [[2, 8], [2, 8]]
    assert wide.src_pad_mask[:, 4:].all() and wide.tgt_pad_mask[:, 6:].all()
    assert torch.equal(wide.src[:, :4], batch.src) and wide.n_tokens == batch.n_tokens == 8
    assert probe_shapes.padded(batch, 1) is batch
    torch.manual_seed(0)
    config = {"name": "transformer", "d_model": 16, "n_heads": 2, "enc_layers": 1,
              "dec_layers": 1, "d_ff": 32, "dropout": 0.0, "attention_dropout": 0.0}  # fmt: skip
    model = build_model(config, 13, 13, True).eval()
    losses = [label_smoothed_nll(model(b), b.target()[1], 0.1).loss for b in (batch, wide)]
    assert losses[0].item() == pytest.approx(losses[1].item(), rel=1e-5)
