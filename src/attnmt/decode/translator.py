"""Load a checkpoint for inference and translate raw sentences with it.

The checkpoint carries everything: the model's registry name and config, its weights,
and the SentencePiece model files, so translation always uses the tokenizer and the
whitespace normalisation (:func:`attnmt.data.textio.normalize_space`) of training.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import load_checkpoint, resolve_checkpoint
from attnmt.data.batching import make_batch
from attnmt.data.textio import normalize_space
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.search import Hypothesis, translate_batch
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models.base import Seq2Seq

log = logging.getLogger(__name__)


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` → CUDA when present, else CPU; otherwise ``torch.device(name)``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as err:
        raise ConfigError(
            f"device={name!r} is not a device (auto, cpu, cuda, cuda:N): {err}"
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name!r} but CUDA is not available here; use device=cpu")
    return device


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Indices grouped by length (longest first) so that count × longest ≤ batch_tokens.

    A sentence longer than ``batch_tokens`` gets a batch of its own.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= batch_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


@dataclass
class Translator:
    """A model in eval mode on ``device`` with the tokenizer it was trained with."""

    model: Seq2Seq
    tokenizer: Tokenizer
    config: dict[str, Any]
    checkpoint_path: Path
    device: torch.device

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Source piece ids (no specials) after the training whitespace normalisation."""
        return self.tokenizer.encode_src([normalize_space(s) for s in sentences])

    def hypotheses(
        self,
        sentences: Sequence[str],
        beam_size: int = 5,
        alpha: float = 0.6,
        batch_tokens: int = 4000,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ) -> list[Hypothesis | None]:
        """The 1-best Hypothesis per sentence, in input order; None for blank lines.

        Sentences are batched by source length: at most ``batch_tokens`` padded source
        pieces per batch (beam search holds beam_size times as many decoder rows).
        """
        if batch_tokens < 1:
            raise ConfigError(f"batch_tokens must be >= 1, got {batch_tokens}")
        ids = self.encode(sentences)
        todo = [i for i, s in enumerate(sentences) if s.strip() and ids[i]]
        out: list[Hypothesis | None] = [None] * len(sentences)
        lengths = [len(ids[i]) + 1 for i in todo]
        for group in length_batches(lengths, batch_tokens):
            chosen = [todo[j] for j in group]
            batch = make_batch([ids[i] for i in chosen]).to(self.device)
            hyps = translate_batch(
                self.model,
                batch,
                beam_size=beam_size,
                alpha=alpha,
                max_len_a=max_len_a,
                max_len_b=max_len_b,
            )
            for i, hyp in zip(chosen, hyps):
                out[i] = hyp
        return out

    def detokenize(self, hyps: Sequence[Hypothesis | None]) -> list[str]:
        """Text of each hypothesis ("" for None)."""
        texts = self.tokenizer.decode_tgt([h.tokens if h is not None else [] for h in hyps])
        return [t if h is not None else "" for t, h in zip(texts, hyps)]

    def translate(
        self,
        sentences: Sequence[str],
        beam_size: int = 5,
        alpha: float = 0.6,
        batch_tokens: int = 4000,
        max_len_a: float = 1.5,
        max_len_b: int = 10,
    ) -> list[str]:
        """One translation per sentence, in order; blank lines give "" without the model."""
        hyps = self.hypotheses(sentences, beam_size, alpha, batch_tokens, max_len_a, max_len_b)
        return self.detokenize(hyps)


def load_translator(path: str | Path, device: str = "auto") -> Translator:
    """Translator for a checkpoint file or run directory (its best checkpoint, else last)."""
    from attnmt.models.registry import build_model  # imports every model module

    ckpt = resolve_checkpoint(path)
    dev = resolve_device(device)
    payload = load_checkpoint(ckpt, map_location="cpu")
    files = payload["tokenizer"]
    if not isinstance(files, dict) or not files or not all(files.values()):
        raise CheckpointError(
            f"checkpoint {ckpt} has no usable tokenizer files (got "
            f"{sorted(files) if isinstance(files, dict) else type(files).__name__}, some empty or "
            "none); it was not written by attnmt's trainer — re-save it from its run"
        )
    try:
        tokenizer = Tokenizer.from_files_dict(files)
    except CheckpointError as err:
        raise CheckpointError(f"{ckpt}: {err}") from None
    vocab = payload["vocab"]
    if (vocab["src_size"], vocab["tgt_size"]) != (
        tokenizer.src_vocab_size,
        tokenizer.tgt_vocab_size,
    ):
        raise CheckpointError(
            f"{ckpt}: vocabulary sizes {vocab['src_size']}/{vocab['tgt_size']} do not match "
            f"its tokenizer ({tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size})"
        )
    model_config = dict(payload["model_config"])
    model_config.setdefault("name", payload["model_name"])
    model = build_model(model_config, vocab["src_size"], vocab["tgt_size"], bool(vocab["joint"]))
    try:
        model.load_state_dict(payload["model"])
    except RuntimeError as err:
        raise CheckpointError(
            f"{ckpt}: weights do not fit model {payload['model_name']!r}: "
            f"{str(err).splitlines()[0]}"
        ) from None
    model.to(dev).eval()
    log.info("loaded %s (%s, step %s) on %s", ckpt, payload["model_name"], payload.get("step"), dev)
    return Translator(model, tokenizer, dict(payload["config"]), ckpt, dev)
