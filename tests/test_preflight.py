"""Pre-flight: what can be known up front fails before any data work or model building,
in one line naming the setting or file and what to do."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers.toy_train import toy_train_config

from attnmt.errors import ConfigError, DataError
from attnmt.train.loop import Trainer, train
from attnmt.train.setup import check_writable

ROOT = Path(__file__).resolve().parents[1]


def _custom(tmp_path: Path, splits: dict[str, int]) -> Path:
    """DIR/<split>.xx + .yy with ``n`` toy pairs each (0: empty files)."""
    d = tmp_path / "corpus"
    d.mkdir()
    rng = random.Random(0)
    for split, n in splits.items():
        src = [" ".join(rng.choice("abcdefgh") for _ in range(rng.randint(3, 7))) for _ in range(n)]
        (d / f"{split}.xx").write_text("".join(f"{s}\n" for s in src), encoding="utf-8")
        (d / f"{split}.yy").write_text("".join(f"{s[::-1]}\n" for s in src), encoding="utf-8")
    return d


def _custom_cfg(tmp_path: Path, corpus: Path, *overrides: str):  # type: ignore[no-untyped-def]
    return toy_train_config(
        tmp_path / "data",
        "data=custom",
        f"data.path={corpus}",
        "data.src_lang=xx",
        "data.tgt_lang=yy",
        "data.tokenizer.vocab_size=20",
        *overrides,
    )


def test_empty_valid_split_fails_up_front_naming_the_file(tmp_path: Path) -> None:
    corpus = _custom(tmp_path, {"train": 50, "valid": 0})
    (corpus / "valid.xx").write_text("\n  \n", encoding="utf-8")  # blank lines only
    with pytest.raises(DataError, match=r"valid\.xx: the valid split is empty"):
        Trainer(_custom_cfg(tmp_path, corpus), tmp_path / "run")
    assert not (tmp_path / "data").exists()  # no data work was done


def test_missing_test_split_fails_up_front_unless_the_test_is_off(tmp_path: Path) -> None:
    corpus = _custom(tmp_path, {"train": 200, "valid": 10})
    with pytest.raises(DataError, match=r"test\.xx: file not found.*trainer\.test=false"):
        Trainer(_custom_cfg(tmp_path, corpus, "trainer.test=true"), tmp_path / "run")
    result = train(
        _custom_cfg(tmp_path, corpus, "trainer.test=false", "trainer.max_steps=2"),
        tmp_path / "run",
    )
    assert result["step"] == 2 and "test_bleu" not in result


def test_hash_split_without_a_test_share_fails_when_the_test_is_on(tmp_path: Path) -> None:
    cfg = toy_train_config(tmp_path / "data", "trainer.test=true", "data.toy.test=0")
    with pytest.raises(DataError, match=r"data\.toy\.test=0 leaves the test split empty"):
        Trainer(cfg, tmp_path / "run")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_missing_cuda_device_is_named_before_data_work(tmp_path: Path) -> None:
    cfg = toy_train_config(tmp_path / "data", "device=cuda")
    with pytest.raises(ConfigError, match=r"device='cuda' but CUDA is not available here"):
        Trainer(cfg, tmp_path / "run")
    assert not (tmp_path / "data").exists()


def test_unwritable_run_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"hydra\.run\.dir=/proc/x: cannot write"):
        check_writable(Path("/proc/x"))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "hydra.run.dir=/proc/x/${now:%H}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: hydra.run.dir=/proc/x/${now:%H}: cannot write /proc/x/")
    assert proc.stderr.rstrip().endswith("choose a writable folder")
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) == 1


def test_a_failing_job_of_a_sweep_is_reported_and_the_sweep_goes_on(tmp_path: Path) -> None:
    # both jobs fail in config validation (no data work): the second still runs
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "train.py"),
            "-m",
            "trainer.max_tokens=-1,-2",
            f"hydra.sweep.dir={tmp_path / 'sweep'}",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
    )
    assert proc.returncode == 2, proc.stderr  # the sweep went on, and says it had failures
    assert "error: 2 of 2 sweep jobs failed: job 0 (" in proc.stderr
    for n, value in ((0, -1), (1, -2)):
        line = f"trainer.max_tokens must be > 0, got {value} [job {n} ("
        assert line in proc.stderr
        log = next((tmp_path / "sweep").glob(f"{n}_*/train.log")).read_text()
        assert "the sweep goes on" in log
    assert "Traceback" not in proc.stderr


def test_valid_identical_to_train_warns(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    corpus = _custom(tmp_path, {"train": 60})
    for lang in ("xx", "yy"):
        (corpus / f"valid.{lang}").write_bytes((corpus / f"train.{lang}").read_bytes())
    Trainer(_custom_cfg(tmp_path, corpus), tmp_path / "run").close()
    assert "is identical to the train split" in caplog.text
    caplog.clear()
    other = tmp_path / "other"
    other.mkdir()
    Trainer(_custom_cfg(other, _custom(other, {"train": 60, "valid": 5})), other / "run").close()
    assert "identical to the train split" not in caplog.text
