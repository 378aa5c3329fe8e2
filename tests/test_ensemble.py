"""Ensemble decoding (attnmt.decode.ensemble): one model = itself, copies = the model,
batched = one at a time, per-model caches, shared vocabularies, and the ckpt= spellings."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import (
    MODEL_CONFIGS,
    checkpoint,
    private_run,
    run_entry_point,
    tiny_model,
    toy_tokenizer,
)

from attnmt.checkpoint import save_checkpoint
from attnmt.cli.evaluate import run as evaluate
from attnmt.cli.translate import run as translate
from attnmt.data.batching import make_batch
from attnmt.data.tokenizer import load_or_train_tokenizer
from attnmt.decode.ensemble import Ensemble
from attnmt.decode.search import beam_search, greedy_search
from attnmt.decode.translator import checkpoint_list, load_translator
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.registry import build_model

VOCAB = 13
SOURCES = [[5, 6, 7], [8, 9, 10, 11, 12], [4], [6, 6, 7, 8]]
LIMITS = {"max_len_a": 1.0, "max_len_b": 3}


def _model(name: str, seed: int) -> Seq2Seq:
    torch.manual_seed(seed)
    config = dict(MODEL_CONFIGS[name])
    return build_model(config, VOCAB, VOCAB, True).eval()


def _copy(model: Seq2Seq, name: str) -> Seq2Seq:
    twin = build_model(dict(MODEL_CONFIGS[name]), VOCAB, VOCAB, True).eval()
    twin.load_state_dict(model.state_dict())
    return twin


def _same(a: list, b: list) -> None:  # type: ignore[type-arg]
    """Identical tokens and scores (exactly) and attention, hypothesis for hypothesis."""
    assert [h.tokens for h in a] == [h.tokens for h in b]
    assert [h.score for h in a] == [h.score for h in b]
    assert [h.finished for h in a] == [h.finished for h in b]
    for x, y in zip(a, b):
        assert torch.equal(x.attention, y.attention)


@pytest.fixture
def run(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A private copy of the tiny trained run (best-60.pt, best-61.pt, best.json)."""
    return private_run(tmp_path_factory, tmp_path)


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_an_ensemble_of_one_and_of_two_copies_equal_the_model(name: str) -> None:
    model = _model(name, 3)
    batch = make_batch(SOURCES)
    greedy = greedy_search(model, batch, **LIMITS)
    beam = beam_search(model, batch, beam_size=3, n_best=3, **LIMITS)
    for ensemble in (Ensemble([model]), Ensemble([model, _copy(model, name)])):
        _same(greedy_search(ensemble, batch, **LIMITS), greedy)
        found = beam_search(ensemble, batch, beam_size=3, n_best=3, **LIMITS)
        for got, want in zip(found, beam):
            _same(got, want)


@pytest.mark.parametrize("name", sorted(MODEL_CONFIGS))
def test_batched_equals_one_at_a_time(name: str) -> None:
    ensemble = Ensemble([_model(name, 1), _model(name, 2), _model(name, 3)])
    batch = make_batch(SOURCES)
    greedy = greedy_search(ensemble, batch, **LIMITS)
    beam = beam_search(ensemble, batch, beam_size=3, n_best=2, **LIMITS)
    for i, src in enumerate(SOURCES):
        (g1,) = greedy_search(ensemble, make_batch([src]), **LIMITS)
        assert g1.tokens == greedy[i].tokens
        assert g1.score == pytest.approx(greedy[i].score, abs=1e-4)
        (b1,) = beam_search(ensemble, make_batch([src]), beam_size=3, n_best=2, **LIMITS)
        assert [h.tokens for h in b1] == [h.tokens for h in beam[i]]
        assert [h.score for h in b1] == pytest.approx([h.score for h in beam[i]], abs=1e-4)


def test_mixed_architectures_keep_their_own_states() -> None:
    """A Transformer (key/value caches) and an RNN (hidden state) in one ensemble: each
    step's scores are the mean of what each model alone gives for the same prefix."""
    members = [_model("transformer", 1), _model("rnn_luong", 2)]
    ensemble = Ensemble(members)
    (hyp,) = greedy_search(ensemble, make_batch([SOURCES[1]]), **LIMITS)
    prefix = make_batch([SOURCES[1]], [hyp.tokens])
    with torch.no_grad():
        each = [m(prefix).log_softmax(-1) for m in members]  # teacher-forced, no cache
        mean = (each[0] + each[1]) / 2
    assert torch.allclose(ensemble(prefix), mean, atol=1e-6)
    steps = len(hyp.tokens) + int(hyp.finished)
    chosen = [*hyp.tokens, 3][:steps]
    tf_score = float(sum(mean[0, t, tok] for t, tok in enumerate(chosen)))
    assert hyp.score == pytest.approx(tf_score, abs=1e-4)
    assert ensemble.max_target_length() == min(m.max_target_length() for m in members)


def _other_vocabulary_checkpoint(root: Path) -> Path:
    """A checkpoint like the shared run's but with another SentencePiece model."""
    tok = toy_tokenizer(root)
    src = root / "other.txt"
    src.write_text("".join(f"{w} {w}{w} x y z\n" for w in "abcdefghij"), encoding="utf-8")
    other = load_or_train_tokenizer(
        src, src, {"model_type": "unigram", "vocab_size": 24, "joint": True}, root / "spm2"
    )
    assert other.model_digest("tgt") != tok.model_digest("tgt")
    model = tiny_model("transformer", other)
    path = root / "other.pt"
    save_checkpoint(checkpoint(model, other, root), path)
    return path


def test_mismatched_vocabularies_are_refused_naming_both(run: Path, tmp_path: Path) -> None:
    other = _other_vocabulary_checkpoint(tmp_path / "other")
    best = run / "checkpoints" / "best-60.pt"
    with pytest.raises(ConfigError, match="different SentencePiece") as err:
        load_translator([best, other], "cpu")
    message = str(err.value)
    assert str(best) in message and str(other) in message and "\n" not in message


def test_checkpoint_spellings(run: Path) -> None:
    ckpts = run / "checkpoints"
    best = [ckpts / "best-60.pt", ckpts / "best-61.pt"]
    assert checkpoint_list(str(run)) == [run]
    assert checkpoint_list([str(p) for p in best]) == best
    assert checkpoint_list(",".join(map(str, best))) == best  # ckpt='A,B' (quoted)
    assert checkpoint_list(str(run), ensemble=2) == best  # best.json order
    with pytest.raises(CheckpointError, match="lists 2 checkpoint"):
        checkpoint_list(str(run), ensemble=3)
    with pytest.raises(CheckpointError, match="needs a run directory"):
        checkpoint_list(str(best[0]), ensemble=2)
    with pytest.raises(ConfigError, match="either"):
        checkpoint_list([str(p) for p in best], ensemble=2)
    with pytest.raises(ConfigError, match=">= 1"):
        checkpoint_list(str(run), ensemble=0)


def test_evaluate_ensemble_spellings_agree_and_keep_their_own_folder(run: Path) -> None:
    ckpts = run / "checkpoints"
    listed = [str(ckpts / "best-60.pt"), str(ckpts / "best-61.pt")]
    by_list = evaluate({"ckpt": listed, "device": "cpu", "beam": 2}, io.StringIO())
    by_run = evaluate({"ckpt": str(run), "ensemble": 2, "device": "cpu", "beam": 2}, io.StringIO())
    single = evaluate({"ckpt": str(run), "device": "cpu", "beam": 2}, io.StringIO())
    assert by_list["bleu"].score == by_run["bleu"].score
    (folder,) = (run / "eval").glob("ensemble2-best-60-test-beam2-*")
    assert len(list((run / "eval").glob("best-60-test-beam2-*"))) == 1  # the single model's
    entry = json.loads((folder / "scores.json").read_text())[folder.name]
    assert entry["ensemble"] == listed
    assert single["bleu"].signature == by_run["bleu"].signature


def test_translate_cli_list_syntax_and_errors(
    run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    ckpts = run / "checkpoints"
    lines = ["a b c", "", "d e f a"]

    def via_run(**settings: object) -> str:
        out = io.BytesIO()
        stdin = io.BytesIO("".join(f"{x}\n" for x in lines).encode())
        translate({"interactive": False, "device": "cpu", **settings}, stdin, out)
        return out.getvalue().decode()

    listed = via_run(ckpt=[str(ckpts / "best-60.pt"), str(ckpts / "best-61.pt")])
    assert listed == via_run(ckpt=str(run), ensemble=2)
    assert len(listed.splitlines()) == 3
    code, _, err = run_entry_point(
        "translate", [f"ckpt={run}", "ensemble=5", "interactive=false"], monkeypatch, capsys
    )
    assert code == 2 and "ensemble=5" in err and "lists 2 checkpoint" in err
    code, _, err = run_entry_point(
        "translate", ["ckpt=[]", "interactive=false"], monkeypatch, capsys
    )
    assert code == 2 and "ckpt=[]" in err


def test_trainer_option_is_validated() -> None:
    from attnmt.train.config import TrainerConfig

    with pytest.raises(ConfigError, match="test_ensemble must be >= 1"):
        TrainerConfig(test_ensemble=0).check()
    with pytest.raises(ConfigError, match=r"raise trainer\.keep_best"):
        TrainerConfig(test_ensemble=4, keep_best=3).check()
    TrainerConfig(test_ensemble=3, keep_best=3).check()
