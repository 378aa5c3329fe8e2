"""python -m benchmarks.benchmark --quick: every bench runs and reports its figures and ratios.

Structure only (keys, positive numbers, ratios present): never timing thresholds. The
first run points data.root at an empty directory, so the stand-in corpus is used and
nothing is downloaded; the second finds a prepared corpus (toy_reverse, made in code).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from attnmt.data.batching import make_batch
from attnmt.machine import FLAGS
from attnmt.models.registry import build_model
from attnmt.train.config import TrainerConfig
from benchmarks import benchmark
from benchmarks.bench import split
from benchmarks.bench.training import attnmt_step


def _run(tmp_path: Path, *argv: str) -> dict[str, Any]:
    out = tmp_path / "bench.json"
    benchmark.main(["--quick", "--devices", "cpu", "--out", str(out), *argv])
    assert out.with_suffix(".md").read_text().count("\n| ") > 3  # the markdown table
    return json.loads(out.read_text())


def _rows(report: dict[str, Any], bench: str) -> dict[tuple[str, str], dict[str, Any]]:
    found = {(r["model"], r["variant"]): r for r in report["rows"] if r["bench"] == bench}
    assert found, bench
    return found


def _positive(row: dict[str, Any], *keys: str) -> None:
    for key in keys:
        assert isinstance(row.get(key), (int, float)) and row[key] > 0, (key, row)


@pytest.mark.slow
def test_quick_benchmark_reports_every_bench(tmp_path: Path) -> None:
    # bible_en_fr would be downloaded: the benchmark measures the toy stand-in instead
    report = _run(tmp_path, "data=bible_en_fr", f"data.root={tmp_path / 'empty'}")
    meta = report["meta"]
    machine = meta["machine"]
    assert machine["cpu"]["name"] and machine["threads"] >= 1
    assert set(machine["cpu"]["flags"]) <= set(FLAGS)
    # "..., torch X, N threads" and, on a machine with CUDA, ", CUDA <device name>" after it
    cuda = f", CUDA {machine['cuda']}" if machine.get("cuda") else ""
    assert machine["summary"].endswith(f"{machine['threads']} threads{cuda}")
    work = meta["workload"]
    assert "not prepared" in work["note"] and work["corpus"].startswith("toy_reverse")
    assert work["batches"] == 2 and work["target_tokens"] > 0 and 0 <= work["padding"] < 1
    rows = report["rows"]
    assert {r["bench"] for r in rows} >= {
        "matmul",
        "train",
        "sdpa_op",
        "sdpa_train",
        "translate",
        "decode",
        "data",
        "dropout",
        "loss",
    }
    for row in rows:
        if "error" in row:  # only bf16 without native kernels, or a missing optional package
            assert row["error"].startswith("skipped"), row
        else:
            _positive(row, "sec_per_step")
    matmul = _rows(report, "matmul")
    assert {v for _, v in matmul} == {"fp32", "bf16"}
    for row in matmul.values():
        _positive(row, "gflops")

    train = _rows(report, "train")
    assert {m for m, _ in train} == {"transformer_tiny", "rnn_luong"}
    for (_, variant), row in train.items():
        if "error" in row:
            assert variant.endswith("bf16") and "emulated" in row["error"], row
            continue
        _positive(row, "tokens_per_sec", "gflops", "peak_fraction", "flops_per_token", "params")
        assert 0 <= row["padding"] < 1 and row["peak_mem_mb"] >= 0
    _positive(train["transformer_tiny", "fp32"], "vs_reference")  # attnmt ÷ nn.Transformer
    for variant in ("fp32", "nofeed_fp32"):  # the RNN step's time split, not the Transformer's
        row = train["rnn_luong", variant]
        assert set(row["split_ms"]) == set(split.SECTIONS) and row["split"].startswith("enc ")
        _positive(row["split_ms"], "encoder", "decoder", "output_loss", "backward", "optimizer")
    assert "split_ms" not in train["transformer_tiny", "fp32"]
    assert ("rnn_luong", "ref_fp32") not in train  # the reference is a Transformer
    _positive(train["rnn_luong", "nofeed_fp32"], "speedup")  # ÷ the preset's input feeding
    assert train["rnn_luong", "nofeed_fp32"]["params"] < train["rnn_luong", "fp32"]["params"]
    assert ("transformer_tiny", "nofeed_fp32") not in train
    for row in _rows(report, "sdpa_train").values():
        _positive(row, "tokens_per_sec", "gflops")

    translate = _rows(report, "translate")
    assert len(translate) == 4  # greedy and beam 5, batched and single
    for (_, variant), row in translate.items():
        _positive(row, "sentences_per_sec", "mean_output_len")
        if variant == "batched":
            _positive(row, "speedup")
    decode = _rows(report, "decode")
    assert all(r["same_tokens"] for r in decode.values())  # cached == recomputed prefix
    assert any("speedup" in r for r in decode.values())
    data = _rows(report, "data")
    assert {v for _, v in data} == {"read", "clean", "encode", "sampler", "loader"}
    for row in data.values():
        _positive(row, "pairs_per_sec", "pairs")
    for bench in ("sdpa_op", "dropout", "loss"):
        assert any("speedup" in r for r in _rows(report, bench).values())


@pytest.mark.slow
def test_quick_benchmark_uses_a_prepared_corpus(tmp_path: Path) -> None:
    data = f"data.root={tmp_path / 'data'}"
    argv = ["--benches", "train", "--models", "transformer_tiny", "data=toy_reverse", data]
    report = _run(tmp_path, *argv)
    work = report["meta"]["workload"]
    assert work["note"] == "" and work["corpus"].startswith("toy_reverse")
    assert str(tmp_path / "data") in work["corpus"]
    assert {r["bench"] for r in report["rows"]} == {"train"}


def test_quick_ct2_bench_reports_greedy_and_beam5_with_the_rnn_decoders(tmp_path: Path) -> None:
    """attnmt against CTranslate2 fp32 (and int8) on the same sentences, greedy and beam 5,
    with the two RNN decoders timed in the same rounds; greedy outputs agree."""
    pytest.importorskip("ctranslate2")
    rows = _rows(_run(tmp_path, "--benches", "ct2"), "ct2")
    models = {m for m, _ in rows}
    assert models == {"transformer_tiny greedy 4x8", "transformer_tiny beam5 4x8"}
    for model in models:
        assert {v for m, v in rows if m == model} == {
            "attnmt",
            "ct2_fp32",
            "ct2_int8",
            "attnmt rnn_luong",
            "attnmt rnn_bahdanau",
        }
        for variant in ("ct2_fp32", "attnmt rnn_luong", "attnmt rnn_bahdanau"):
            _positive(rows[model, variant], "speedup", "sentences_per_sec")
        assert 0 <= rows[model, "ct2_fp32"]["same_output"] <= 1
        assert "same_output" not in rows[model, "attnmt rnn_luong"]  # another model
    assert rows["transformer_tiny greedy 4x8", "ct2_fp32"]["same_output"] == 1.0
    assert rows["transformer_tiny beam5 4x8", "attnmt"]["beam"] == 5


def test_options_and_the_report_header() -> None:
    """Fast: --quick's sizes, overrides anywhere, and the machine line heading the report."""
    args = benchmark.parse_args(["--quick", "--benches", "matmul", "data=toy_reverse"])
    assert args.overrides == [*benchmark.QUICK_OVERRIDES, "data=toy_reverse"]
    assert (args.batches, args.mm_sizes, args.models) == (
        2,
        [256],
        ["transformer_tiny", "rnn_luong"],
    )
    meta: dict[str, Any] = {
        "started": "2026-01-01T00:00:00",
        "seconds": 1.0,
        "machine": benchmark.machine_info(),
    }
    head = benchmark.markdown(meta, []).splitlines()[2]
    assert head.startswith(f"- machine: {meta['machine']['summary']} (")


@pytest.mark.parametrize("name", ["rnn_luong", "rnn_bahdanau"])
def test_the_rnn_step_split_times_every_section(name: str) -> None:
    """Fast: the marks of the trainer's step and the hooks in an RNN model give every
    section a time, only for the steps marked; the Transformer gets no marks."""
    cfg = {"name": name, "emb_dim": 8, "hidden_size": 8, "enc_layers": 1}
    model = build_model(cfg, 12, 12, True)
    marks = split.marks_for(model, torch.device("cpu"))
    assert marks is not None
    step = attnmt_step(model, TrainerConfig(), None, torch.device("cpu"), marks)
    batch = make_batch([[4, 5, 6], [7]], [[8, 9], [10, 11, 4]])
    step(batch)
    step(batch)
    with torch.no_grad():  # a forward outside a marked step records nothing
        model.eval()(batch)
    assert len(marks.steps) == 2
    times = marks.split(1)
    assert list(times) == list(split.SECTIONS)
    _positive(times, "encoder", "decoder", "output_loss", "backward", "optimizer")
    text = split.split_text(times)
    assert [part.split()[0] for part in text.split(" · ")] == [
        "enc",
        "dec",
        "out+loss",
        "bwd",
        "optim",
    ]
    transformer = {"name": "transformer", "d_model": 16, "n_heads": 2, "d_ff": 16}
    assert split.marks_for(build_model(transformer, 12, 12, True), torch.device("cpu")) is None
    assert split.marks_for(model, torch.device("meta")) is None


@pytest.mark.slow
def test_ddp_exit_stress_ends_every_group_in_attnmt_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import ddp_exit_stress

    assert ddp_exit_stress.main(["--iterations", "3", "--pairs", "1", "--stall", "120"]) == 0
    assert "pair 0: attnmt: 3 of 3 groups; ended every group" in capsys.readouterr().out
