"""benchmarks/step_profile.py: a profiled step's report on the CPU, and its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import step_profile


def test_a_profiled_cpu_step_reports_its_operators_and_no_kernels(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    step_profile.main(
        [
            "--models",
            "transformer_tiny",
            "--device",
            "cpu",
            "--steps",
            "2",
            "--batches",
            "1",
            "--precisions",
            "fp32",
            "--out",
            str(out),
            "data=toy_reverse",
            f"data.root={tmp_path / 'data'}",
            "trainer.max_tokens=256",
        ]
    )
    report = json.loads(out.read_text())
    assert report["max_tokens"] == 256 and report["batches"] == 1
    (run,) = report["runs"]
    assert (run["model"], run["precision"]) == ("transformer_tiny", "fp32")
    assert len(run["wall_ms"]) == 2 and run["wall_ms_median"] > 0
    assert run["kernels_per_step"] == 0 and run["device_busy_ms_per_step"] == 0
    assert run["top_kernels"] == [] and run["cpu_op_calls_per_step"] > 0
    ops = {row["op"] for row in run["top_cpu"]}
    assert ops & {"aten::mm", "aten::addmm", "aten::bmm", "aten::linear"}, ops


def test_the_table_puts_bf16_beside_fp32(tmp_path: Path) -> None:
    def run(precision: str, wall: float) -> dict:
        return {
            "model": "transformer",
            "precision": precision,
            "wall_ms_median": wall,
            "cpu_op_calls_per_step": 4000,
            "kernels_per_step": 500,
            "cpu_self_ms_per_step": 20.0,
            "device_busy_ms_per_step": 3.0,
        }

    path = tmp_path / "p.json"
    path.write_text(
        json.dumps({"max_tokens": 2048, "runs": [run("fp32", 30.0), run("bf16", 40.0)]})
    )
    rows = step_profile.table([path]).splitlines()[2:]
    assert rows[0].startswith("| transformer | 2048 | fp32 | 30.0 |") and rows[0].endswith("|  |")
    assert rows[1].startswith("| transformer | 2048 | bf16 | 40.0 |")
    assert rows[1].endswith(f"| {30 / 40:.2f}x |") and "0.75x" in rows[1]


@pytest.mark.parametrize("bad", [["--precisions", "fp8"]])
def test_an_unknown_precision_is_refused_by_the_parser(bad: list[str]) -> None:
    with pytest.raises(SystemExit):
        step_profile.main(bad)
