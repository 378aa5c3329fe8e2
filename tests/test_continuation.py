"""Resume keeps the run's own settings (only MAY_CHANGE keys may differ, each other explicit
difference fails naming its key); finetune=PATH starts a new run from a checkpoint's weights."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from helpers.toy_train import toy_train_config

from attnmt.errors import ConfigError
from attnmt.run_record import read_record
from attnmt.train.continuation import explicit_keys
from attnmt.train.interrupt import TrainingInterrupted
from attnmt.train.loop import Trainer, train


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 4-step toy run trained with a non-default lr; (data root, run dir)."""
    root = tmp_path_factory.mktemp("cont")
    cfg = toy_train_config(
        root / "data", "trainer.max_steps=4", "trainer.val_every_steps=4", "trainer.lr=0.005"
    )
    train(cfg, root / "run")
    return root / "data", root / "run"


def _trainer(data: Path, tmp_path: Path, *overrides: str, explicit: set[str] | None) -> Trainer:
    return Trainer(toy_train_config(data, *overrides), tmp_path / "new", explicit=explicit)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("data=toy_copy", "data.name"),
        ("model.d_model=64", "model.d_model"),
        ("trainer.lr=0.1", "trainer.lr"),
        ("trainer.val_subset=5", "trainer.val_subset"),
        ("data.tokenizer.vocab_size=40", "data.tokenizer.vocab_size"),
    ],
)
def test_resume_with_run_defining_changes_fails_naming_each_key(
    first_run: tuple[Path, Path], tmp_path: Path, override: str, key: str
) -> None:
    data, run = first_run
    with pytest.raises(ConfigError) as err:
        _trainer(data, tmp_path, f"resume={run}", "trainer.lr=0.005", override, explicit=None)
    message = str(err.value)
    # the run is named by its folder (0e30e32 named the checkpoint file as the run)
    assert f"resume={run} continues the run in {run} (from its checkpoints/last.pt) " in message
    assert key in message and f"finetune={run / 'checkpoints' / 'last.pt'}" in message


def test_resume_takes_unset_keys_from_the_checkpoint_and_allows_the_listed_ones(
    first_run: tuple[Path, Path], tmp_path: Path
) -> None:
    data, run = first_run
    # the command line says only resume and a longer run; lr is the default (0.002) here,
    # but the run was trained with 0.005: the resumed run keeps 0.005
    trainer = _trainer(
        data,
        tmp_path,
        f"resume={run}",
        "trainer.max_steps=6",
        "decode.beam=2",
        explicit=explicit_keys([f"resume={run}", "trainer.max_steps=6", "decode.beam=2"]),
    )
    try:
        assert trainer.step == 4 and trainer.run_dir == run
        assert trainer.cfg.trainer.lr == 0.005
        assert trainer.cfg.trainer.max_steps == 6 and trainer.cfg.decode.beam == 2
    finally:
        trainer.close()


def test_finetune_starts_a_new_run_from_the_weights(
    first_run: tuple[Path, Path], tmp_path: Path
) -> None:
    data, run = first_run
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    # a new corpus is fine: the tokenizer and model come from the checkpoint
    trainer = _trainer(data, tmp_path, "data=toy_copy", f"finetune={run}", explicit=None)
    try:
        assert trainer.step == 0 and trainer.run_dir == tmp_path / "new"
        assert trainer.cfg.data.name == "toy_copy"
        state = trainer.parts.model.state_dict()
        best = torch.load(run / "checkpoints" / "best-4.pt", weights_only=True)
        assert all(torch.equal(state[k], best["model"][k]) for k in state)
        assert trainer.parts.data.tokenizer.to_files_dict() == saved["tokenizer"]
        assert trainer.parts.optimizer.state_dict()["state"] == {}  # fresh optimiser
    finally:
        trainer.close()
    with pytest.raises(ConfigError, match=r"finetune=.*keeps the checkpoint's model.*model\.d_ff"):
        _trainer(data, tmp_path, f"finetune={run}", "model.d_ff=128", explicit=None)
    with pytest.raises(ConfigError, match="exclude each other"):
        _trainer(data, tmp_path, f"finetune={run}", f"resume={run}", explicit=None)


def test_explicit_keys_from_hydra_overrides() -> None:
    assert explicit_keys(["trainer.lr=0.1", "model=rnn_luong", "+data.x=1", "hydra.run.dir=d"]) == {
        "trainer.lr",
        "model",
        "data.x",
    }
    assert explicit_keys(["experiment=quick"]) == {"data", "model", "trainer", "decode"}


def _write_custom(directory: Path) -> None:
    """A small reversal task as the user's own files (data=custom)."""
    import random

    rng = random.Random(0)
    directory.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 300), ("valid", 20)):
        src = [" ".join(rng.choices("abcdefghijklmnop", k=rng.randint(3, 8))) for _ in range(n)]
        (directory / f"{split}.xx").write_text("".join(s + "\n" for s in src))
        (directory / f"{split}.yy").write_text("".join(s[::-1] + "\n" for s in src))


CUSTOM = (
    "data=custom",
    "data.src_lang=xx",
    "data.tgt_lang=yy",
    "data.tokenizer.model_type=bpe",
    "data.tokenizer.vocab_size=36",
)


@pytest.fixture(scope="module")
def custom_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A 4-step run on data=custom; (its files, data root, run dir)."""
    root = tmp_path_factory.mktemp("custom")
    _write_custom(root / "mine")
    overrides = (*CUSTOM, f"data.path={root / 'mine'}")
    cfg = toy_train_config(root / "data", *overrides, "trainer.max_steps=4")
    train(cfg, root / "run")
    return root / "mine", root / "data", root / "run"


def _resume(files: Path, data: Path, run: Path, tmp_path: Path) -> Trainer:
    """Resume the finished 4-step run for 2 more steps (as it was, it is not resumed)."""
    overrides = (*CUSTOM, f"data.path={files}", f"resume={run}", "trainer.max_steps=6")
    explicit = {"resume", "trainer.max_steps"}
    return Trainer(toy_train_config(data, *overrides), tmp_path / "new", explicit=explicit)


def test_resume_on_changed_corpus_files_fails_naming_them(
    custom_run: tuple[Path, Path, Path], tmp_path: Path
) -> None:
    """The files of data=custom changed under a run: resuming would have prepared a new
    cache and trained on other pairs without a word."""
    files, data, run = custom_run
    saved = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert set(saved["corpus"]["files"]) == {"train.xx", "train.yy", "valid.xx", "valid.yy"}
    for name in ("train.yy", "valid.xx"):
        original = (files / name).read_text()
        lines = original.splitlines(keepends=True)
        try:
            (files / name).write_text("".join(lines[:-1]) + "z z z\n")  # last line edited
            with pytest.raises(ConfigError) as err:
                _resume(files, data, run, tmp_path)
            message = str(err.value)
            assert f"{name} (" in message and "corpus differs" in message, message
            assert f"finetune={run / 'checkpoints' / 'last.pt'}" in message
        finally:
            (files / name).write_text(original)
    # the same content written again (a new modification time, so a new cache): resumes
    trainer = _resume(files, data, run, tmp_path)
    try:
        assert trainer.step == 4
    finally:
        trainer.close()


def test_a_checkpoint_without_a_corpus_fingerprint_still_resumes(
    custom_run: tuple[Path, Path, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import shutil

    from attnmt.checkpoint import save_checkpoint
    from attnmt.checkpoint_format import Checkpoint

    files, data, run = custom_run
    old = Path(shutil.copytree(run, tmp_path / "old", ignore=shutil.ignore_patterns(".lock")))
    for ckpt in (old / "checkpoints").glob("*.pt"):
        payload = torch.load(ckpt, weights_only=True)
        payload.pop("corpus")
        save_checkpoint(Checkpoint.from_dict(payload), ckpt)
    with caplog.at_level("INFO"):
        trainer = _resume(files, data, old, tmp_path)
    try:
        assert trainer.step == 4
    finally:
        trainer.close()
    assert "records no corpus fingerprint" in caplog.text


def test_resuming_a_finished_run_says_it_is_finished_and_raising_its_limit_goes_on(
    tmp_path: Path,
) -> None:
    """On 0e30e32 ``resume=RUN`` of a finished run decoded the test again and appended a
    second ``test`` and ``end`` event at the same step."""
    data, run = tmp_path / "data", tmp_path / "run"
    settings = ("trainer.max_steps=4", "trainer.val_every_steps=4", "trainer.test=true")
    train(toy_train_config(data, *settings), run)
    before = {name: (run / name).read_bytes() for name in ("metrics.jsonl", "summary.json")}
    with pytest.raises(ConfigError) as err:
        train(toy_train_config(data, *settings, f"resume={run}"), tmp_path / "hydra")
    message = str(err.value)
    assert message.startswith(
        f"resume={run}: the run in {run} is finished (max_steps at step 4), so resuming would "
        "train nothing and only decode the test again. To decode again: python evaluate.py "
        f"ckpt={run} split=test; to train on, raise what stops it: trainer.max_steps=4 (step "
        f"4), e.g. resume={run} trainer.max_steps=8; or start a new run"
    ), message
    assert "\n" not in message
    assert {name: (run / name).read_bytes() for name in before} == before  # nothing written
    assert not (run / ".lock").exists()
    # the way on that the message names: a larger trainer.max_steps trains 2 more updates
    result = train(
        toy_train_config(data, *settings, f"resume={run}", "trainer.max_steps=6"),
        tmp_path / "hydra",
    )
    assert result["step"] == 6
    record = read_record(run)
    assert [(e["event"], e["step"]) for e in record.events if e["event"] in ("test", "end")] == [
        ("test", 4),
        ("end", 4),
        ("test", 6),
        ("end", 6),
    ]
    assert record.status == "finished"


def test_a_killed_run_at_its_last_step_is_still_resumed_to_finish(tmp_path: Path) -> None:
    """A run killed during its final test (summary still ``running``) has reached its
    limit too; resuming it is how it gets its test, so it is not refused."""
    data, run = tmp_path / "data", tmp_path / "run"
    settings = ("trainer.max_steps=2", "trainer.val_every_steps=2", "trainer.test=false")
    train(toy_train_config(data, *settings), run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "status": "running"}))
    result = train(toy_train_config(data, *settings, f"resume={run}"), tmp_path / "hydra")
    assert result["step"] == 2 and read_record(run).status == "finished"


def test_a_resumed_run_names_its_best_checkpoint_from_its_start(tmp_path: Path) -> None:
    """On 0e30e32 the resumed run's summary.json had no ``best`` until its next validation,
    although best.json listed the checkpoints of the validations before the stop."""
    data, run = tmp_path / "data", tmp_path / "run"
    settings = ("trainer.val_every_steps=4", "trainer.test=false")

    def ctrl_c(step: int, fig: dict[str, float]) -> None:
        if step == 6:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(TrainingInterrupted):
        train(toy_train_config(data, *settings, "trainer.max_steps=8"), run, on_step=ctrl_c)
    valid = read_record(run).valid
    assert [e["step"] for e in valid] == [4]
    seen = []

    def peek(step: int, fig: dict[str, float]) -> None:
        if step == 7:  # resumed at 6; the next validation is at 8
            seen.append(json.loads((run / "summary.json").read_text()))

    cfg = toy_train_config(data, *settings, "trainer.max_steps=8", f"resume={run}")
    train(cfg, tmp_path / "hydra", on_step=peek)
    (summary,) = seen
    assert summary["step"] == 6 and summary.get("best") is not None
    assert (summary["best"]["file"], summary["best"]["step"]) == ("best-4.pt", 4)
    assert summary["best"]["val_bleu"] == pytest.approx(valid[0]["bleu"])
    assert (run / "checkpoints" / "best-4.pt").is_file()
