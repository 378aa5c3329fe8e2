"""What ``GET /info`` says about a served model: an attnmt checkpoint (its preset and
settings, corpus, step, validation scores, attention layout) or a CTranslate2 export (from
its attnmt_export.json and, while it exists, the checkpoint it came from)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from attnmt.checkpoint import load_checkpoint
from attnmt.checkpoint_format import Checkpoint
from attnmt.decode.ct2 import CT2Translator, read_export_info
from attnmt.decode.translator import Translator

NO_ATTENTION = (
    "CTranslate2 backend: no attention, scores or alignments (serve the checkpoint for them)"
)


def attnmt_info(translator: Translator, path: str) -> dict[str, Any]:
    """What ``GET /info`` says about an attnmt checkpoint."""
    model = translator.model
    ckpt = translator.checkpoint_path
    loaded = load_checkpoint(ckpt, map_location="cpu") if ckpt is not None else None
    config = translator.config or (loaded.config if loaded is not None else {})
    data = config.get("data", {}) if isinstance(config, dict) else {}
    metrics = loaded.metrics if loaded is not None else {}
    model_config = dict(loaded.model_config) if loaded is not None else {}
    name = loaded.model_name if loaded is not None else model.name
    return {
        "backend": "attnmt",
        "given": Path(path).name,
        "checkpoint": shown_path(ckpt, path),
        "model": name,
        "model_config": model_config,
        "corpus": data.get("name"),
        "direction": _direction(data),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": translator.tokenizer.vocab_info(),
        "step": loaded.step if loaded is not None else None,
        "valid_bleu": metrics.get("val_bleu"),
        "valid_chrf": metrics.get("val_chrf"),
        "attention": _attention_shape(model_config, name),
        "decode": dataclasses.asdict(translator.decode),
    }


def ct2_info(translator: CT2Translator, path: str) -> dict[str, Any]:
    """What ``GET /info`` says about a CTranslate2 export (from its attnmt_export.json and,
    when it is still there, the checkpoint it was exported from)."""
    export = read_export_info(path)
    source = export.get("checkpoint")
    loaded: Checkpoint | None = None
    if source and Path(source).is_file():
        try:
            loaded = load_checkpoint(source, map_location="cpu")
        except Exception:  # the export still serves; /info just knows less
            loaded = None
    data = loaded.config.get("data", {}) if loaded is not None else {}
    metrics = loaded.metrics if loaded is not None else {}
    return {
        "backend": "ctranslate2",
        "given": Path(path).name,
        "checkpoint": shown_path(source, path),
        "model": "transformer",
        "model_config": export.get("model_config", {}),
        "quantization": export.get("quantization"),
        "corpus": data.get("name"),
        "direction": _direction(data),
        "parameters": None,
        "vocabulary": translator.tokenizer.vocab_info(),
        "step": loaded.step if loaded is not None else None,
        "valid_bleu": metrics.get("val_bleu"),
        "valid_chrf": metrics.get("val_chrf"),
        "attention": None,
        "note": NO_ATTENTION,
        "decode": dataclasses.asdict(translator.decode),
    }


def shown_path(path: str | Path | None, given: str) -> str | None:
    """``path`` as /info shows it: relative to the ``given`` directory when inside it, else
    its file name (never an absolute path, which would tell clients about the server's
    disk)."""
    if not path:
        return None
    if Path(given).is_dir() and Path(path).resolve().is_relative_to(Path(given).resolve()):
        return Path(path).resolve().relative_to(Path(given).resolve()).as_posix()
    return Path(path).name


def _direction(data: dict[str, Any]) -> str | None:
    src, tgt = data.get("src_lang"), data.get("tgt_lang")
    return f"{src}→{tgt}" if src and tgt else None


def _attention_shape(model_config: dict[str, Any], name: str) -> dict[str, Any]:
    """Which maps the API returns and how many layers and heads they have."""
    if "n_heads" in model_config:
        return {
            "kinds": ["cross", "encoder_self", "decoder_self"],
            "decoder_layers": model_config.get("dec_layers"),
            "encoder_layers": model_config.get("enc_layers"),
            "heads": model_config.get("n_heads"),
        }
    return {"kinds": ["cross"], "decoder_layers": 1, "encoder_layers": 0, "heads": 1, "rnn": name}
