"""scripts/benchmark.py --quick: every bench runs and reports timings and ratios."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_quick_benchmark_reports_every_bench(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("benchmark", ROOT / "scripts" / "benchmark.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    bench.main(["--quick", "--devices", "cpu", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert {r["bench"] for r in rows} >= {
        "train",
        "sdpa_op",
        "sdpa_train",
        "decode",
        "dropout",
        "loss",
    }
    for row in rows:
        assert "error" not in row or row["variant"] == "bf16", row  # bf16 may lack kernels
        if "error" not in row:
            assert row["sec_per_step"] > 0 and row["speedup"] > 0, row
    assert all(r["same_tokens"] for r in rows if r["bench"] == "decode")  # cached == uncached
