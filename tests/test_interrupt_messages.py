"""Issue 22: interruption messages say what exists and what to type; decoding is bounded
and honours a stop request (a signal) within one decoder step."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import MODEL_CONFIGS
from helpers.toy_train import toy_train_config

from attnmt import EOS_ID
from attnmt.checkpoint import load_checkpoint
from attnmt.data.batching import make_batch
from attnmt.decode.search import beam_search, greedy_search
from attnmt.decode.translator import Translator
from attnmt.models.base import MAX_DECODE_LENGTH
from attnmt.models.registry import build_model
from attnmt.run_record import read_record
from attnmt.train import loop
from attnmt.train.interrupt import (
    FinalTestInterrupted,
    Interrupted,
    TrainingInterrupted,
    interrupted_exit_code,
    signals_interrupt,
    stop_under_way,
)


def _untrained(name: str, positions: int = 64) -> torch.nn.Module:
    torch.manual_seed(0)
    config = dict(MODEL_CONFIGS[name])
    if name == "transformer":
        config["max_positions"] = positions
    model = build_model(config, 12, 12, True).eval()
    decode_step = model.decode_step

    def no_eos(state, prev):  # type: ignore[no-untyped-def]
        log_probs, state, attn = decode_step(state, prev)
        log_probs = log_probs.clone()
        log_probs[:, EOS_ID] = -1e9
        return log_probs, state, attn

    model.decode_step = no_eos  # type: ignore[method-assign]
    return model


@pytest.mark.parametrize(("name", "cap"), [("transformer", 63), ("rnn_luong", MAX_DECODE_LENGTH)])
def test_decoding_is_capped_by_the_model(name: str, cap: int) -> None:
    model = _untrained(name)
    batch = make_batch([[5, 6, 7], [8]])
    (hyp, _) = greedy_search(model, batch, max_len_a=0.0, max_len_b=100000)
    assert len(hyp.tokens) == cap and not hyp.finished
    if name == "transformer":
        beams = beam_search(model, batch, 2, max_len_a=0.0, max_len_b=100000)
        assert all(len(h[0].tokens) <= cap for h in beams)


def test_a_setting_beyond_the_cap_is_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    from attnmt.decode.config import DecodeConfig

    class Tok:
        def encode_src(self, lines):  # type: ignore[no-untyped-def]
            return [[5, 6, 7] for _ in lines]

        def longest_piece(self, side: str) -> int:  # the translator's character cut
            return 8

    translator = Translator(
        _untrained("transformer"), Tok(), torch.device("cpu"), DecodeConfig(max_len_b=100000)
    )  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING):
        found = translator.hypotheses(["a", "b"])
        translator.hypotheses(["c"])
    assert all(h is not None and len(h.tokens) == 63 for h in found)
    warned = [r.getMessage() for r in caplog.records if "max_len_b=100000" in r.getMessage()]
    assert len(warned) == 1 and "limit of 63" in warned[0]


def test_a_stop_request_ends_a_long_decode_within_one_step() -> None:
    model = _untrained("rnn_luong")
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return calls["n"] > 5

    with pytest.raises(KeyboardInterrupt):
        greedy_search(
            model, make_batch([[5, 6]]), max_len_a=0.0, max_len_b=100000, should_stop=stop
        )
    assert calls["n"] == 6
    with pytest.raises(KeyboardInterrupt):
        beam_search(
            model, make_batch([[5, 6]]), 2, max_len_a=0.0, max_len_b=10**5, should_stop=stop
        )


def test_sigterm_before_training_raises_with_its_status() -> None:
    with pytest.raises(Interrupted) as info, signals_interrupt():
        os.kill(os.getpid(), signal.SIGTERM)
    assert interrupted_exit_code(info.value) == 143
    assert interrupted_exit_code(KeyboardInterrupt()) == 130
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def _toy(tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    return toy_train_config(
        tmp_path / "data", "trainer.max_steps=2", "trainer.val_every_steps=2", *extra
    )


def test_an_interrupted_final_test_names_the_checkpoints_and_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)  # the trainer's flag takes it...
        raise KeyboardInterrupt  # ...and the decode stops (see the stop-request test)

    monkeypatch.setattr(loop, "score_checkpoint", interrupted)
    run = tmp_path / "run"
    with pytest.raises(FinalTestInterrupted) as info:
        loop.train(_toy(tmp_path, "trainer.test=true"), run)
    message = info.value.message()
    assert info.value.exit_code == 143
    assert "interrupted during the final test decoding" in message
    assert "best-2.pt" in message and "last.pt" in message
    assert f"python evaluate.py ckpt={run} split=test" in message
    assert "nothing was saved" not in message


def test_a_signal_during_validation_decoding_saves_last_and_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Translator.n_best

    def signalled(self, *args, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)  # arrives while validation decodes
        return real(self, *args, **kw)

    monkeypatch.setattr(Translator, "n_best", signalled)
    run = tmp_path / "run"
    with pytest.raises(TrainingInterrupted) as info:
        loop.train(_toy(tmp_path, "trainer.max_steps=100"), run)
    assert info.value.exit_code == 143 and info.value.saved
    assert (run / "checkpoints" / "last.pt").is_file()
    assert f"continue with resume={run}" in info.value.message()


def test_a_signal_while_a_validation_is_reported_keeps_its_record_and_best_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scores are in when the heatmaps are drawn (their decoding stops at a signal):
    the validation's event, the summary's best and best-<step>.pt are written before it,
    so the record agrees with the state that last.pt carries."""

    def interrupted(*args, **kw):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)  # the trainer's flag takes it...
        raise KeyboardInterrupt  # ...and the heatmaps' decoding stops

    monkeypatch.setattr(loop, "report_validation", interrupted)
    run = tmp_path / "run"
    with pytest.raises(TrainingInterrupted) as info:
        loop.train(_toy(tmp_path, "trainer.max_steps=100"), run)
    assert info.value.exit_code == 143 and info.value.step == 2
    record = read_record(run)
    assert [e["step"] for e in record.valid] == [2]
    assert record.summary and record.summary.best and record.summary.best.step == 2
    assert (run / "checkpoints" / "best-2.pt").is_file()
    last = load_checkpoint(run / "checkpoints" / "last.pt").training
    assert last is not None and last.trainer["best_step"] == last.trainer["val_step"] == 2


def test_only_a_stop_every_rank_saved_for_waits_for_the_others_at_the_end(tmp_path: Path) -> None:
    # ddp.cleanup(together=...) waits for every rank: only where every rank leaves alike
    saved = TrainingInterrupted(8, tmp_path / "last.pt", True, signal.SIGTERM)
    aborted = TrainingInterrupted(8, None, False, signal.SIGINT)  # inside an update, one rank
    final_test = FinalTestInterrupted(8, tmp_path, signal.SIGTERM)
    assert loop._every_rank_ends_so(saved) and loop._every_rank_ends_so(final_test)
    for err in (aborted, KeyboardInterrupt(), OSError("disk full"), RuntimeError("peer gone")):
        assert not loop._every_rank_ends_so(err), err


def test_a_signal_during_a_stop_s_ending_is_reported_as_that_stop(tmp_path: Path) -> None:
    # a second SIGTERM (torchrun's agent forwarding its own) lands while TrainingInterrupted
    # goes out (the last barrier, the run folder's release): train.py reports the stop
    stop = TrainingInterrupted(8, None, True, signal.SIGTERM, main_host="node0")
    with pytest.raises(Interrupted) as info, signals_interrupt():
        try:
            raise stop
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
    assert stop_under_way(info.value) is stop
    assert stop.message().startswith("interrupted at step 8 with every rank: rank 0, on host node0")
    assert stop.exit_code == 143
    assert stop_under_way(KeyboardInterrupt()) is None  # before training: nothing under way
    try:
        try:
            raise OSError("disk full")
        except OSError:
            raise Interrupted(signal.SIGTERM) from None
    except Interrupted as err:
        assert stop_under_way(err) is None
