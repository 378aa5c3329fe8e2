"""scripts/average_checkpoints.py: exact means, run directories, and an evaluable result."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import private_run

from attnmt.checkpoint import load_checkpoint, save_checkpoint
from attnmt.cli.evaluate import run as evaluate
from attnmt.errors import CheckpointError, ConfigError
from attnmt.train import averaging
from scripts import average_checkpoints as avg


@pytest.fixture
def run_dir(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    return private_run(tmp_path_factory, tmp_path)


def test_average_of_identical_is_identity(run_dir: Path, tmp_path: Path) -> None:
    a = run_dir / "checkpoints" / "best-60.pt"
    out = avg.average_checkpoints([a, a, a], tmp_path / "same.pt")
    original = load_checkpoint(a).weights
    assert out.weights.keys() == original.keys()
    for key, value in original.items():
        assert torch.equal(out.weights[key], value), key


def test_average_of_two_is_the_mean(run_dir: Path, tmp_path: Path) -> None:
    files = [run_dir / "checkpoints" / f"best-{s}.pt" for s in (60, 61)]
    p, q = (load_checkpoint(f).weights for f in files)
    assert any(not torch.equal(p[k], q[k]) for k in p)  # really two different models
    code = avg.main(["--inputs", str(run_dir), "--k", "2", "--output", str(tmp_path / "avg.pt")])
    assert code == 0
    out = load_checkpoint(tmp_path / "avg.pt")
    for key in p:
        if p[key].is_floating_point():
            assert torch.allclose(out.weights[key], (p[key] + q[key]) / 2, atol=1e-7), key
    assert out.step == 61 and out.metrics == {}
    assert out.averaged_from == [str(f) for f in files]  # best.json order
    assert out.training is None and out.tokenizer == load_checkpoint(files[0]).tokenizer
    # ... and evaluate.py accepts it
    scores = evaluate({"ckpt": str(tmp_path / "avg.pt"), "split": "test", "beam": 2}, io.StringIO())
    (folder,) = (tmp_path / "eval").glob("avg-test-beam2-*")
    assert (folder / "hyps.txt").is_file()
    assert 0.0 <= scores["bleu"].score <= 100.0


def test_k_picks_the_best_of_a_run(run_dir: Path) -> None:
    files = avg.checkpoint_files([run_dir], k=1)
    assert files == [run_dir / "checkpoints" / "best-60.pt"]
    both = [run_dir / "checkpoints" / "best-61.pt", run_dir / "checkpoints" / "best-60.pt"]
    assert avg.checkpoint_files(both, k=5) == both


def test_bad_inputs(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="--k 0: must be >= 1"):
        avg.checkpoint_files([run_dir], k=0)
    assert (
        avg.main(["--inputs", str(tmp_path / "nothing"), "--output", str(tmp_path / "o.pt")]) == 2
    )
    assert "nothing: neither a checkpoint file nor a run directory" in capsys.readouterr().err
    a = run_dir / "checkpoints" / "best-60.pt"
    other = load_checkpoint(a)
    other.weights = {k: v[:1] if v.dim() else v for k, v in other.weights.items()}
    save_checkpoint(other, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="has shape"):
        avg.average_checkpoints([a, tmp_path / "other.pt"], tmp_path / "o.pt")
    assert not (tmp_path / "o.pt").exists()


def test_an_output_the_run_still_uses_is_refused_before_loading(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = run_dir / "checkpoints"
    shutil.copy(ckpt / "best-61.pt", ckpt / "last.pt")  # the run's training state
    (ckpt / "mine.pt").write_bytes(b"keep me")
    before = {p.name: p.read_bytes() for p in ckpt.iterdir()}

    def no_loading(*args: object, **kw: object) -> None:
        raise AssertionError("a checkpoint was loaded before the output was checked")

    monkeypatch.setattr(averaging, "load_checkpoint", no_loading)
    refused = [
        (ckpt / "last.pt", "is the run's last.pt"),
        (ckpt / "best-60.pt", "is listed in"),
        (ckpt / "best-75.pt", "is named like the run's own checkpoints"),
        (run_dir / "checkpoints", "is a directory"),
        (ckpt / "mine.pt", "exists; pass --force"),
    ]
    for output, why in refused:
        code = avg.main(["--inputs", str(run_dir), "--k", "2", "--output", str(output)])
        err = capsys.readouterr().err
        assert code == 2 and f"--output {output} {why}" in err, err
        assert len(err.strip().splitlines()) == 1
    for output in (ckpt / "last.pt", ckpt / "best-61.pt"):  # --force never replaces those
        assert avg.main(["--inputs", str(run_dir), "--output", str(output), "--force"]) == 2
    assert {p.name: p.read_bytes() for p in ckpt.iterdir()} == before
    assert not (ckpt / "best-75.pt").exists()
    monkeypatch.undo()
    args = ["--inputs", str(run_dir), "--k", "2", "--output", str(ckpt / "mine.pt")]
    assert avg.main([*args, "--force"]) == 0  # a file the run does not use, replaced as asked
    assert load_checkpoint(ckpt / "mine.pt").averaged_from == [
        str(ckpt / "best-60.pt"),
        str(ckpt / "best-61.pt"),
    ]


def test_a_checkpoint_named_twice_is_refused_naming_it(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On 0e30e32 ``--inputs A.pt A.pt`` averaged a file with itself (exit 0)."""
    a = run_dir / "checkpoints" / "best-60.pt"
    out = tmp_path / "avg.pt"
    also_a = run_dir / "checkpoints" / ".." / "checkpoints" / "best-60.pt"
    best = run_dir / "checkpoints" / "best.json"
    for inputs, origins in [
        ([a, a], f"from {a} and from {a}"),
        ([a, also_a], f"from {a} and from {also_a}"),
        ([run_dir, a], f"from {best} and from {a}"),  # the run's best.json lists it too
    ]:
        code = avg.main(["--inputs", *map(str, inputs), "--k", "5", "--output", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert f"error: --inputs: {a.resolve()} comes twice ({origins}); " in err, err
    assert not out.exists()
