"""benchmarks/probe_shapes.py: the probe's batch against new and seen shapes, on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    for part in ("probe", "first_visit", "second_visit"):
        r = run[part]
        assert r["sum_fp32_s"] > 0 and r["sum_bf16_s"] > 0
        assert r["speedup_sum"] == pytest.approx(r["sum_fp32_s"] / r["sum_bf16_s"], rel=1e-2)
