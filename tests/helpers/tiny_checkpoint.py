"""Build a tiny run directory (toy corpus, tokenizer, briefly trained model) for CLI tests.

No trainer needed: a few Adam steps of teacher-forced cross-entropy on toy_reverse, then
checkpoints in the attnmt format under ``<run>/checkpoints/`` with a ``best.json``.
"""

from __future__ import annotations

import json
import runpy
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from attnmt import PAD_ID
from attnmt.checkpoint import save_checkpoint
from attnmt.checkpoint_format import Checkpoint, VocabInfo
from attnmt.data.batching import make_batch
from attnmt.data.corpora import prepare_corpus
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.models.base import Seq2Seq
from attnmt.models.registry import build_model

MODEL_CONFIGS: dict[str, dict[str, Any]] = {
    "transformer": {
        "name": "transformer",
        "d_model": 32,
        "n_heads": 2,
        "enc_layers": 1,
        "dec_layers": 1,
        "d_ff": 64,
        "dropout": 0.0,
        "attention_dropout": 0.0,
    },
    "rnn_bahdanau": {
        "name": "rnn_bahdanau",
        "emb_dim": 16,
        "hidden_size": 16,
        "enc_hidden_size": None,  # as the trainer writes it (without it: the layout before)
        "enc_layers": 1,
        "dropout": 0.0,
    },
    "rnn_luong": {
        "name": "rnn_luong",
        "emb_dim": 16,
        "hidden_size": 16,
        "enc_hidden_size": None,  # as the trainer writes it (without it: the layout before)
        "enc_layers": 1,
        "dropout": 0.0,
    },
}


def data_config(root: Path) -> dict[str, Any]:
    return {
        "name": "toy_reverse",
        "src_lang": "src",
        "tgt_lang": "tgt",
        "root": str(root),
        "toy": {"train": 200, "valid": 10, "test": 12, "n_symbols": 6, "max_symbols": 6},
        "tokenizer": {"model_type": "unigram", "vocab_size": 16, "joint": True},
    }


def toy_tokenizer(root: Path) -> Tokenizer:
    corpus = prepare_corpus(data_config(root))
    src, tgt = corpus.files("train")
    return load_or_train_tokenizer(src, tgt, data_config(root)["tokenizer"], root / "spm")


def tiny_model(name: str, tok: Tokenizer, seed: int = 0) -> Seq2Seq:
    torch.manual_seed(seed)
    return build_model(MODEL_CONFIGS[name], tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)


def train_briefly(model: Seq2Seq, tok: Tokenizer, root: Path, steps: int) -> Seq2Seq:
    """``steps`` Adam steps of cross-entropy on the toy training pairs; returns eval mode."""
    src, tgt = prepare_corpus(data_config(root)).read("train")
    batch = make_batch(tok.encode_src(src), tok.encode_tgt(tgt))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(steps):
        logits = model(batch)
        loss = F.cross_entropy(logits.transpose(1, 2), batch.tgt_out, ignore_index=PAD_ID)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model.eval()


def payload(model: Seq2Seq, tok: Tokenizer, root: Path, step: int = 0) -> dict[str, Any]:
    """The on-disk dict of an evaluable checkpoint (no training state) of ``model``."""
    return checkpoint(model, tok, root, step).to_dict()


def checkpoint(model: Seq2Seq, tok: Tokenizer, root: Path, step: int = 0) -> Checkpoint:
    """An evaluable checkpoint (no training state) of ``model``."""
    name = model.name
    v = tok.vocab_info()
    return Checkpoint(
        model_name=name,
        model_config=dict(MODEL_CONFIGS[name]),
        vocab=VocabInfo(v["src_size"], v["tgt_size"], v["joint"]),
        weights=model.state_dict(),
        tokenizer=tok.to_files_dict(),
        config={"data": data_config(root), "model": dict(MODEL_CONFIGS[name])},
        step=step,
        metrics={"val_bleu": 0.0},
    )


def make_run(root: Path, name: str = "transformer", steps: int = 60) -> Path:
    """``root/run`` with checkpoints/best-<step>.pt for steps, steps+1 and best.json."""
    tok = toy_tokenizer(root)
    model = train_briefly(tiny_model(name, tok), tok, root, steps)
    ckpt_dir = root / "run" / "checkpoints"
    entries = []
    for i, step in enumerate((steps, steps + 1)):
        if i:  # a second, slightly different checkpoint
            train_briefly(model, tok, root, 1)
        save_checkpoint(checkpoint(model, tok, root, step), ckpt_dir / f"best-{step}.pt")
        entries.append({"file": f"best-{step}.pt", "step": step, "val_bleu": 10.0 - i})
    (ckpt_dir / "best.json").write_text(json.dumps(entries))
    return root / "run"


def shared_run(factory: pytest.TempPathFactory) -> Path:
    """One tiny trained run per test session (built by the first caller), read-only."""
    base = factory.getbasetemp() / "tiny-run"
    if not (base / "run" / "checkpoints" / "best.json").is_file():
        make_run(base)
    return base / "run"


def private_run(factory: pytest.TempPathFactory, tmp_path: Path) -> Path:
    """A copy of :func:`shared_run` in ``tmp_path`` (evaluation writes beside checkpoints)."""
    return Path(shutil.copytree(shared_run(factory), tmp_path / "run"))


ROOT = Path(__file__).resolve().parents[2]


def run_entry_point(name: str, args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    """Run ``<repo>/<name>.py`` as ``__main__`` in-process; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *args])
    code = 0
    try:
        runpy.run_path(str(ROOT / f"{name}.py"), run_name="__main__")
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err
