"""Settings written by earlier attnmt read with the meaning they had: an RNN checkpoint from
before ``model.enc_hidden_size`` (when each encoder direction had ``hidden_size`` units)
still loads and decodes as it was trained; the ledger's records of those runs are stale."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import toy_tokenizer
from helpers.toy_train import CONFIGS, TOY_OVERRIDES
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from attnmt.checkpoint import load_checkpoint, load_weights, save_checkpoint
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.data.batching import make_batch
from attnmt.decode.translator import load_translator
from attnmt.models.registry import MODELS, build_model
from attnmt.models.rnn import RNNSeq2Seq
from attnmt.schema import plain
from attnmt.settings_history import RNN_MODELS, upgrade_model_settings
from attnmt.train.continuation import explicit_keys
from attnmt.train.loop import Trainer, train

OLD_RNN = {  # an RNN preset as attnmt wrote it before enc_hidden_size: 16 units a direction
    "emb_dim": 16,
    "hidden_size": 16,
    "enc_layers": 1,
    "dec_layers": 1,
    "bidirectional": True,
    "dropout": 0.0,
    "attention": {"score": "dot", "mode": "global"},
}


def _old_checkpoint(name: str, tmp_path: Path) -> tuple[Path, torch.nn.Module]:
    """A checkpoint of the layout attnmt built before enc_hidden_size existed (annotations
    2 × hidden_size, dot through the key adapter), with the model settings it wrote then."""
    tok = toy_tokenizer(tmp_path / "data")
    torch.manual_seed(0)
    as_built_then = {"name": name, **OLD_RNN, "enc_hidden_size": 32}
    model = build_model(as_built_then, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint).eval()
    assert model.attn.key_adapter is not None  # the 32 -> 16 map the old dot had
    written_then = {k: v for k, v in plain(model.cfg).items() if k != "enc_hidden_size"}
    v = tok.vocab_info()
    ckpt = Checkpoint(
        model_name=name,
        model_config=written_then,
        vocab=VocabInfo(v["src_size"], v["tgt_size"], v["joint"]),
        weights=model.state_dict(),
        tokenizer=tok.to_files_dict(),
        config={"model": dict(written_then), "seed": 1},
    )
    return save_checkpoint(ckpt, tmp_path / "last.pt"), model


@pytest.mark.parametrize("name", ["rnn_bahdanau", "rnn_luong"])
def test_an_rnn_checkpoint_from_before_enc_hidden_size_loads_and_decodes_as_trained(
    name: str, tmp_path: Path
) -> None:
    path, trained = _old_checkpoint(name, tmp_path)
    ckpt = load_checkpoint(path)
    assert ckpt.model_config["enc_hidden_size"] == 32  # 2 directions × 16, as built then
    assert ckpt.config["model"]["enc_hidden_size"] == 32  # what resume= rebuilds from
    model = build_model(ckpt.model_config, ckpt.vocab.src_size, ckpt.vocab.tgt_size, True)
    load_weights(model, ckpt.weights, path)
    batch = make_batch([[4, 5, 6, 7], [8, 9]], [[5, 6], [7, 8, 9]])
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(batch), trained(batch))
    (hyp,) = load_translator(path, "cpu").translate(["a b c"])
    assert isinstance(hyp, str)


def test_only_old_rnn_settings_change() -> None:
    old = {"name": "rnn_luong", "hidden_size": 64, "bidirectional": True}
    assert upgrade_model_settings(old)["enc_hidden_size"] == 128
    assert upgrade_model_settings({**old, "bidirectional": False})["enc_hidden_size"] == 64
    assert upgrade_model_settings({"name": "rnn_bahdanau"})["enc_hidden_size"] == 512  # defaults
    assert upgrade_model_settings({"hidden_size": 8}, "rnn_luong")["enc_hidden_size"] == 16
    new = {**old, "enc_hidden_size": None}
    assert upgrade_model_settings(new) == new  # written since: already today's meaning
    transformer = {"name": "transformer", "d_model": 32}
    assert upgrade_model_settings(transformer) == transformer
    assert "enc_hidden_size" not in old  # the argument is not changed


RNN_TOY = [
    *(o for o in TOY_OVERRIDES if not o.startswith("model")),
    "model=rnn_luong",
    "model.emb_dim=16",
    "model.hidden_size=16",
    "model.enc_layers=1",
    "model.attention.score=dot",
    "trainer.max_steps=2",
    "trainer.val_every_steps=2",
]


def _rnn_toy_config(data_root: Path, *overrides: str) -> DictConfig:
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose("train", [*RNN_TOY, f"data.root={data_root}", *overrides])


def test_an_rnn_run_from_before_enc_hidden_size_resumes(tmp_path: Path) -> None:
    """A run trained with the old layout (written here as then: no enc_hidden_size in its
    checkpoint) resumes with it: the weights fit and training goes on from its step."""
    data, run = tmp_path / "data", tmp_path / "run"
    train(_rnn_toy_config(data, "model.enc_hidden_size=32"), run)
    last = run / "checkpoints" / "last.pt"
    raw = torch.load(last, weights_only=True)
    del raw["model_config"]["enc_hidden_size"], raw["config"]["model"]["enc_hidden_size"]
    torch.save(raw, last)
    resumed = [f"resume={run}", "trainer.max_steps=3"]
    trainer = Trainer(
        _rnn_toy_config(data, *resumed),
        tmp_path / "new",
        explicit=explicit_keys(resumed),
    )
    try:
        assert trainer.step == 2 and trainer.cfg.model.enc_hidden_size == 32
        assert trainer.parts.model.attn.key_adapter is not None
    finally:
        trainer.close()


def test_the_rnn_names_are_the_registrys() -> None:
    assert set(RNN_MODELS) == {n for n, c in MODELS.items() if issubclass(c, RNNSeq2Seq)}
