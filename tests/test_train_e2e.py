"""End-to-end training on toy_reverse: artefacts, TensorBoard read-back, accuracy, entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import plugin_data_pb2

from attnmt.train.loop import train

ROOT = Path(__file__).resolve().parents[1]
TRAIN_SCALARS = [
    "train/nll",
    "train/loss_smoothed",
    "train/ppl",
    "train/lr",
    "train/grad_norm",
    "train/tokens_per_sec",
]
VAL_SCALARS = ["val/nll", "val/ppl", "val/bleu", "val/chrf", "val/best_bleu", "val/test_bleu"]


def _cfg(data_root: Path, *overrides: str) -> DictConfig:
    base = [
        "experiment=toy_reverse_transformer",
        f"data.root={data_root}",
        "device=cpu",
        "trainer.progress_bar=false",
        "trainer.time_budget_min=0",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose(config_name="train", overrides=base + list(overrides))


def _events(run: Path) -> EventAccumulator:
    acc = EventAccumulator(str(run), size_guidance={"images": 0, "scalars": 0})
    acc.Reload()
    return acc


def test_short_run_writes_every_artefact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _cfg(
        tmp_path / "data",
        "data.toy.train=300",
        "data.toy.valid=6",
        "data.toy.test=5",
        "trainer.max_tokens=512",
        "trainer.max_steps=6",
        "trainer.val_every_steps=3",
        "trainer.log_every_steps=2",
        "trainer.num_heatmaps=1",
        "trainer.keep_best=1",
        "decode.beam=2",
    )
    run = tmp_path / "run"
    result = train(cfg, run)
    assert result["step"] == 6 and result["stop_reason"] == "max_steps"
    assert {"test_bleu", "test_chrf", "best_val_bleu"} <= set(result)
    acc = _events(run)
    tags = acc.Tags()
    assert set(TRAIN_SCALARS + VAL_SCALARS) <= set(tags["scalars"])
    assert [e.step for e in acc.Scalars("val/bleu")] == [3, 6]
    assert [e.step for e in acc.Scalars("train/nll")] == [1, 2, 4, 6]
    assert [e.step for e in acc.Scalars("val/test_bleu")] == [6]  # final metrics at the end
    # transformer_tiny: 2 decoder layers x 4 heads
    images = set(tags["images"])
    expected = {"cross_layer0", "cross_layer1", "self_layer0", "self_layer1"}
    expected |= {f"cross_last_head{h}" for h in range(4)}
    assert images == {f"valid_attention/0/{name}" for name in expected} | {"valid_summary/results"}
    image = acc.Images("valid_attention/0/cross_layer1")[-1]
    assert image.width > 50 and image.height > 50 and image.encoded_image_string[:4] == b"\x89PNG"
    assert "samples/valid0/text_summary" in tags["tensors"]
    assert image.width >= 400 and image.height >= 250  # ~40 px a piece, readable unzoomed
    content = acc.PluginTagToContent("hparams")
    assert "_hparams_/experiment" in content
    start = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    chosen = set(start.session_start_info.hparams)
    assert {"model", "model.shape", "model.params_M", "corpus", "vocab", "lr"} <= chosen
    assert {"schedule", "label_smoothing", "batch_tokens", "precision", "seed"} <= chosen
    assert len(chosen) < 20  # a curated set, not every flattened key
    assert (run / "results.png").read_bytes()[:4] == b"\x89PNG"
    printed = capsys.readouterr().out
    assert f"run directory    {run}" in printed and f"python evaluate.py ckpt={run}" in printed
    assert "make tensorboard" in printed and "nrefs:1|case:mixed" in printed
    # checkpoints: last + 1 best, weights_only-loadable, with the whole training state
    ckpts = run / "checkpoints"
    best = json.loads((ckpts / "best.json").read_text())
    assert len(best) == 1 and (ckpts / best[0]["file"]).is_file()
    last = torch.load(ckpts / "last.pt", weights_only=True)
    assert last["step"] == 6 and last["model_name"] == "transformer"
    assert set(last["tokenizer"]) == {"spm.model"} and last["config"]["trainer"]["max_steps"] == 6
    assert last["sampler"]["epoch"] >= 0 and "torch" in last["rng"]
    # hypotheses: one line per validation / test sentence
    assert len((run / "hyps" / "valid-6.txt").read_text().splitlines()) == 6
    assert len((run / "hyps" / "test.txt").read_text().splitlines()) == 5


def test_rnn_model_trains_through_the_same_loop(tmp_path: Path) -> None:
    cfg = _cfg(
        tmp_path / "data",
        "model=rnn_bahdanau",
        "model.emb_dim=16",
        "model.hidden_size=16",
        "data.toy.train=100",
        "data.toy.valid=4",
        "data.toy.test=2",
        "trainer.max_tokens=256",
        "trainer.max_steps=2",
        "trainer.val_every_steps=2",
        "trainer.num_heatmaps=1",
        "trainer.test=false",
    )
    train(cfg, tmp_path / "run")
    images = _events(tmp_path / "run").Tags()["images"]
    assert set(images) == {"valid_attention/0/cross", "valid_summary/results"}  # RNN: one map


def test_entry_point_reports_config_errors_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "trainer.optimizer=sgdd",
            f"hydra.run.dir={tmp_path}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr
    assert "trainer.optimizer" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_toy_reverse_reaches_high_accuracy(tmp_path: Path) -> None:
    """A tiny Transformer learns to reverse 3-6 symbol sequences (8-letter alphabet)."""
    cfg = _cfg(
        tmp_path / "data",
        "data.toy.n_symbols=8",
        "data.toy.max_symbols=6",
        "data.toy.train=2000",
        "data.toy.valid=100",
        "data.toy.test=50",
        "data.tokenizer.vocab_size=20",
        "model.dropout=0.0",
        "trainer.max_tokens=1024",
        "trainer.warmup_steps=50",
        "trainer.max_steps=300",
        "trainer.val_every_steps=100",
        "trainer.num_heatmaps=1",
    )
    run = tmp_path / "run"
    result = train(cfg, run)
    acc = _events(run)
    assert [e.step for e in acc.Scalars("val/bleu")] == [100, 200, 300]
    assert acc.Scalars("val/accuracy")[-1].value > 0.9  # teacher-forced token accuracy
    assert acc.Scalars("val/bleu")[-1].value > 80.0 and result["best_val_bleu"] > 80.0
    assert result["test_bleu"] > 80.0  # greedy, best checkpoint, 50 unseen sentences
