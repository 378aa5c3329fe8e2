"""Settings written by earlier attnmt read with the meaning they had: an RNN checkpoint from
before ``model.enc_hidden_size`` (when each encoder direction had ``hidden_size`` units)
still loads and decodes as it was trained; the ledger's records of those runs are stale."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import toy_tokenizer

from attnmt.checkpoint import load_checkpoint, load_weights, save_checkpoint
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.data.batching import make_batch
from attnmt.decode.translator import load_translator
from attnmt.models.registry import build_model
from attnmt.schema import plain
from attnmt.settings_history import upgrade_model_settings

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
