"""trainer.keep_best_at_minutes (attnmt.train.best_at): the best checkpoint as of given
training minutes, kept by the trainer. Hand-made folders for the rule itself; toy runs on a
fake clock with planted validation scores for when the trainer takes each mark, across a
resume too."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_clock import FakeClock
from helpers.toy_train import toy_train_config
from omegaconf import DictConfig

from attnmt.checkpoint import load_checkpoint
from attnmt.errors import ConfigError
from attnmt.run_dir import RunDir
from attnmt.run_record import read_record
from attnmt.train import loop
from attnmt.train.best_at import due, take
from attnmt.train.config import TrainerConfig
from attnmt.train.evaluation import EvalSet, ValResult
from attnmt.train.state import BestAt, History, TrainState

# --- the rule, on a hand-made folder ----------------------------------------------------------

VALID = [  # step, minutes, nll, bleu, chrf
    (500, 10.0, 4.0, 1.0, 20.0),
    (1000, 20.0, 3.5, 3.0, 24.0),
    (1500, 29.0, 3.4, 2.0, 23.0),
    (2000, 31.0, 3.3, 5.0, 26.0),
    (2500, 50.0, 3.3, 5.0, 25.0),  # a tie with 2000: the earlier stays the best
]


def _folder(tmp_path: Path) -> tuple[RunDir, History]:
    run, history = RunDir(tmp_path / "run"), History()
    run.checkpoints.mkdir(parents=True)
    for step, minutes, nll, bleu, chrf in VALID:
        history.add_valid(step, minutes, nll, bleu, chrf)
        run.best(step).write_bytes(f"weights {step}".encode())
    return run, history


def test_a_mark_keeps_the_best_validated_by_that_minute(tmp_path: Path) -> None:
    run, history = _folder(tmp_path)
    assert take(run, history, 30) == BestAt(30, "best-at-30min.pt", 1000, 3.0)
    assert take(run, history, 31) == BestAt(31, "best-at-31min.pt", 2000, 5.0)  # <= 31
    assert take(run, history, 60) == BestAt(60, "best-at-60min.pt", 2000, 5.0)  # tie: earlier
    assert run.best_at(30).read_bytes() == b"weights 1000"
    assert os.stat(run.best_at(30)).st_ino == os.stat(run.best(1000)).st_ino  # a hard link
    run.best(1000).unlink()  # pruned from the k best: the mark stays whole
    assert run.best_at(30).read_bytes() == b"weights 1000"
    names = sorted(p.name for p in run.checkpoints.iterdir())
    assert names == ["best-1500.pt", "best-2000.pt", "best-2500.pt", "best-500.pt",
                     "best-at-30min.pt", "best-at-31min.pt", "best-at-60min.pt"]  # fmt: skip


def test_a_mark_with_no_validation_by_it_or_whose_best_is_gone_is_missed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    run, history = _folder(tmp_path)
    assert take(run, history, 5) == BestAt(5, None, None, None)
    assert "minute 5: no validation by then" in caplog.text
    run.best(2000).unlink()
    assert take(run, history, 40) == BestAt(40, None, 2000, 5.0)  # which it would have been
    assert "best-2000.pt, is gone" in caplog.text
    assert not run.best_at(5).exists() and not run.best_at(40).exists()


def test_the_marks_due_are_those_the_clock_passed_and_not_yet_taken() -> None:
    state = TrainState(best_at=[BestAt(10, "best-at-10min.pt", 500, 1.0)])
    assert due([60, 30, 10, 20], state, 30.0) == [20, 30]
    assert due([60, 30, 10, 20], state, 30.0, before=True) == [20]  # a validation at 30 counts
    state.best_at.append(BestAt(20, None, None, None))  # missed: not looked for again
    assert due([30, 20, 20], state, 35.0) == [30]


def test_the_trainer_state_keeps_its_marks_as_plain_data() -> None:
    state = TrainState(
        best_at=[BestAt(30, "best-at-30min.pt", 1000, 3.0), BestAt(60, None, None, None)]
    )
    saved = state.state_dict()
    assert saved["best_at"][0] == {"minutes": 30, "file": "best-at-30min.pt", "step": 1000,
                                   "val_bleu": 3.0}  # fmt: skip
    back = TrainState()
    back.load_state_dict(saved)
    assert back.best_at == state.best_at
    older = TrainState()
    older.load_state_dict({"step": 7})  # a checkpoint from before the marks (and its clock)
    assert older.best_at == [] and older.wall_s == 0.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"keep_best_at_minutes": [30.0, 0.0]}, "keep_best_at_minutes: each mark is a minute"),
        ({"keep_best_at_minutes": [30.0], "keep_best": 0}, "set trainer.keep_best >= 1"),
    ],
)
def test_marks_are_positive_minutes_and_need_kept_checkpoints(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainerConfig(**settings).check()
    TrainerConfig(keep_best_at_minutes=[0.5, 120.0]).check()


# --- the trainer, on a fake clock with planted validation scores ------------------------------


class Planted:
    """One process of a toy run: each update takes one minute of training on ``clock``,
    each validation ``valid_min`` minutes and scores the BLEU planted for its step;
    ``kill_at``: the update after which the process dies (an error: nothing is saved since
    the last validation)."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        bleu: dict[int, float],
        kill_at: int = 0,
        valid_min: float = 0.0,
    ) -> None:
        self.clock, self.bleu, self.kill_at, self.valid_min = FakeClock(), bleu, kill_at, valid_min
        self.step = 0

        def validate(translator: Any, data: EvalSet, *args: Any, **kwargs: Any) -> ValResult:
            self.clock.advance(self.valid_min)
            score = self.bleu[self.step]  # no decoding: the references as hypotheses
            return ValResult(1.0, 2.7, 0.5, score, score, list(data.ref_text), {"bleu": "sig"})

        monkeypatch.setattr(loop, "validate", validate)

    def on_step(self, step: int, figures: dict[str, float]) -> None:
        self.clock.advance(1.0)
        self.step = step
        if step == self.kill_at:
            raise RuntimeError("killed")

    def train(self, cfg: DictConfig, run: Path) -> dict[str, Any]:
        return loop.train(cfg, run, self.on_step, clock=self.clock)


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("data")


def _cfg(data_root: Path, *overrides: str) -> DictConfig:
    small = ("data.toy.train=120", "data.toy.valid=4", "data.toy.test=4")
    rest = ("trainer.max_tokens=256", "trainer.num_samples=0", "trainer.keep_best=1")
    return toy_train_config(data_root, *small, *rest, *overrides)


def _kept(run: Path) -> dict[float, tuple[int, float]]:
    """Each best-at file's (step, validation BLEU), as its checkpoint says, by mark."""
    out = {}
    for path in (run / "checkpoints").glob("best-at-*min.pt"):
        ckpt = load_checkpoint(path)
        out[float(path.name.removeprefix("best-at-").removesuffix("min.pt"))] = (
            ckpt.step,
            ckpt.val_bleu,
        )
    return out


def _summary_best_at(run: Path) -> list[dict[str, Any]]:
    summary = read_record(run).summary
    assert summary is not None
    return [vars(b) for b in summary.best_at or ()]  # attnmt.run_summary.BestAt


def test_each_mark_keeps_the_best_as_of_its_minute_though_the_k_best_move_on(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One validation a minute; keep_best=1, so each best checkpoint is pruned by the next
    better one: the marks still hold the best as of their minute (a validation at the mark's
    very minute counts; ties keep the earlier), and a mark the run never reached is not
    written."""
    bleu = {1: 1.0, 2: 5.0, 3: 6.0, 4: 7.0, 5: 7.0, 6: 2.0}
    marks = "trainer.keep_best_at_minutes=[2.5,3,5.5,10]"
    cfg = _cfg(data_root, marks, "trainer.val_every_steps=1", "trainer.max_steps=6")
    result = Planted(monkeypatch, bleu).train(cfg, tmp_path)
    assert result["stop_reason"] == "max_steps"
    assert _kept(tmp_path) == {2.5: (2, 5.0), 3.0: (3, 6.0), 5.5: (4, 7.0)}
    ckpts = RunDir(tmp_path).checkpoints
    assert not RunDir(tmp_path).best(2).exists() and not RunDir(tmp_path).best(3).exists()
    assert os.stat(ckpts / "best-at-5.5min.pt").st_ino == os.stat(RunDir(tmp_path).best(4)).st_ino
    assert _summary_best_at(tmp_path) == [
        {"minutes": 2.5, "file": "best-at-2.5min.pt", "step": 2, "val_bleu": 5.0},
        {"minutes": 3.0, "file": "best-at-3min.pt", "step": 3, "val_bleu": 6.0},
        {"minutes": 5.5, "file": "best-at-5.5min.pt", "step": 4, "val_bleu": 7.0},
    ]
    best = [e["file"] for e in json.loads((ckpts / "best.json").read_text())]
    assert best == ["best-4.pt"]  # the k-best list never lists a mark


def test_marks_passed_by_the_final_validation_count_it_only_at_its_minute(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validations take half a minute: at 2 (recorded at 2.5), then the final one after
    update 3 (recorded at 4.0). Minute 3.75 passes during the final validation, which does
    not count for it; minute 4 is taken at the run's end, with it."""
    cfg = _cfg(data_root, "trainer.keep_best_at_minutes=[3.75,4,9]", "trainer.val_every_steps=2",
               "trainer.max_steps=3")  # fmt: skip
    Planted(monkeypatch, {2: 1.0, 3: 2.0}, valid_min=0.5).train(cfg, tmp_path)
    assert _kept(tmp_path) == {3.75: (2, 1.0), 4.0: (3, 2.0)}
    summary = read_record(tmp_path).summary
    assert summary is not None and summary.minutes == 4.0


def test_a_resume_across_a_mark_keeps_the_marks_taken_and_takes_the_later_ones(
    data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bleu = {1: 3.0, 2: 1.0, 3: 4.0, 4: 1.0, 5: 1.0}
    settings = ("trainer.keep_best_at_minutes=[1.5,3.5]", "trainer.val_every_steps=1",
                "trainer.max_steps=5")  # fmt: skip
    with pytest.raises(RuntimeError, match="killed"):
        Planted(monkeypatch, bleu, kill_at=3).train(_cfg(data_root, *settings), tmp_path)
    first = RunDir(tmp_path).best_at(1.5)
    assert _kept(tmp_path) == {1.5: (1, 3.0)}
    inode = os.stat(first).st_ino
    resumed = Planted(monkeypatch, bleu)
    result = resumed.train(_cfg(data_root, *settings, f"resume={tmp_path}"), tmp_path / "h")
    assert result["step"] == 5
    assert _kept(tmp_path) == {1.5: (1, 3.0), 3.5: (3, 4.0)}
    assert os.stat(first).st_ino == inode  # kept, not taken again
    assert [b["minutes"] for b in _summary_best_at(tmp_path)] == [1.5, 3.5]


def test_marks_added_on_resume_take_what_the_k_best_still_hold(
    data_root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A run that kept no marks, resumed at minute 4 with some: a mark it has passed is
    taken from its curve if that checkpoint is still kept (minute 2.5: the best, step 2),
    missed if it was pruned (minute 1.5: step 1's); the later ones as they come."""
    bleu = {1: 1.0, 2: 5.0, 3: 3.0, 4: 2.0, 5: 4.0, 6: 6.0}
    cfg = _cfg(data_root, "trainer.val_every_steps=1", "trainer.max_steps=4")
    Planted(monkeypatch, bleu).train(cfg, tmp_path)
    assert _kept(tmp_path) == {}
    marks = "trainer.keep_best_at_minutes=[1.5,2.5,5]"
    resumed = _cfg(data_root, "trainer.val_every_steps=1", "trainer.max_steps=6", marks,
                   f"resume={tmp_path}")  # fmt: skip
    with caplog.at_level(logging.INFO, logger="attnmt.train.best_at"):
        Planted(monkeypatch, bleu).train(resumed, tmp_path / "h")
    assert _kept(tmp_path) == {2.5: (2, 5.0), 5.0: (2, 5.0)}
    assert _summary_best_at(tmp_path)[0] == {"minutes": 1.5, "file": None, "step": 1,
                                             "val_bleu": 1.0}  # fmt: skip
    assert "minute 1.5: the best by then, best-1.pt, is gone" in caplog.text
