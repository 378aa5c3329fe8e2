"""Validation: loss/perplexity, batched decoding, BLEU/chrF, attention heatmaps, samples.

Scores are computed on detokenised hypotheses against the raw reference lines with
sacrebleu (:func:`attnmt.decode.metrics.corpus_scores`); perplexity is ``exp(NLL / tokens)``
without label smoothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from attnmt.data.batching import Batch, make_batch
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.metrics import corpus_scores
from attnmt.decode.plots import attention_figure, figure_to_array
from attnmt.decode.search import translate_batch
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.precision import Precision


@dataclass
class EvalSet:
    """A split ready for evaluation: ids (no specials, truncated) and the raw text."""

    src_ids: list[list[int]]
    tgt_ids: list[list[int]]
    src_text: list[str]
    ref_text: list[str]

    def __len__(self) -> int:
        return len(self.src_ids)


@dataclass
class ValResult:
    """Corpus-level validation figures and the hypotheses in split order."""

    loss: float
    ppl: float
    accuracy: float
    bleu: float
    chrf: float
    hyps: list[str]
    signatures: dict[str, str] = field(default_factory=dict)

    def scalars(self) -> dict[str, float]:
        return {
            "val/loss": self.loss,
            "val/ppl": self.ppl,
            "val/bleu": self.bleu,
            "val/chrf": self.chrf,
            "val/accuracy": self.accuracy,
        }

    def line(self) -> str:
        """One concise log line."""
        return (
            f"loss {self.loss:.3f} | ppl {self.ppl:.2f} | acc {self.accuracy:.3f} | "
            f"BLEU {self.bleu:.2f} | chrF {self.chrf:.2f}"
        )


def make_eval_set(
    tokenizer: Tokenizer, src: Sequence[str], ref: Sequence[str], max_len: int, subset: int = 0
) -> EvalSet:
    """Encode a split; ``subset > 0`` keeps the first ``subset`` pairs (a fixed subset).

    Both sides are cut to ``max_len`` pieces (so positions stay in range); references
    for BLEU stay the raw, untouched lines.
    """
    if subset > 0:
        src, ref = src[:subset], ref[:subset]
    src_ids = [ids[:max_len] for ids in tokenizer.encode_src(src)]
    tgt_ids = [ids[:max_len] for ids in tokenizer.encode_tgt(ref)]
    return EvalSet(src_ids, tgt_ids, list(src), list(ref))


def eval_batches(
    src_ids: Sequence[Sequence[int]],
    tgt_ids: Sequence[Sequence[int]] | None,
    max_tokens: int,
) -> Iterator[Batch]:
    """Length-sorted batches of at most ``max_tokens`` padded source+target tokens.

    ``batch.index`` holds each sentence's position in the split, to restore the order.
    """
    order = sorted(range(len(src_ids)), key=lambda i: (len(src_ids[i]), i))
    chunk: list[int] = []
    width = 0
    for i in order:
        size = len(src_ids[i]) + 1 + (len(tgt_ids[i]) + 1 if tgt_ids is not None else 0)
        if chunk and max(width, size) * (len(chunk) + 1) > max_tokens:
            yield _batch(src_ids, tgt_ids, chunk)
            chunk, width = [], 0
        chunk.append(i)
        width = max(width, size)
    if chunk:
        yield _batch(src_ids, tgt_ids, chunk)


def _batch(
    src_ids: Sequence[Sequence[int]], tgt_ids: Sequence[Sequence[int]] | None, chunk: list[int]
) -> Batch:
    tgt = [tgt_ids[i] for i in chunk] if tgt_ids is not None else None
    return make_batch([src_ids[i] for i in chunk], tgt, index=chunk)


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, data: EvalSet, max_tokens: int, device: torch.device, precision: Precision
) -> tuple[float, float, float]:
    """Teacher-forced (NLL per token, perplexity, token accuracy) over ``data``."""
    nll, tokens, correct = 0.0, 0, 0
    for batch in eval_batches(data.src_ids, data.tgt_ids, max_tokens):
        batch = batch.to(device)
        with precision.autocast():
            logits = model(batch)
        out = label_smoothed_nll(logits, batch.tgt_out, 0.0, count_correct=True)
        nll += float(out.nll)
        tokens += out.n_tokens
        correct += out.n_correct
    per_token = nll / max(tokens, 1)
    return per_token, math.exp(min(per_token, 50.0)), correct / max(tokens, 1)


@torch.no_grad()
def decode(
    model: nn.Module,
    src_ids: Sequence[Sequence[int]],
    max_tokens: int,
    device: torch.device,
    beam_size: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
) -> list[list[int]]:
    """Hypothesis piece ids per source sentence, in the order of ``src_ids``."""
    out: list[list[int]] = [[] for _ in src_ids]
    for batch in eval_batches(src_ids, None, max_tokens):
        batch = batch.to(device)
        hyps = translate_batch(
            model, batch, beam_size=beam_size, max_len_a=max_len_a, max_len_b=max_len_b
        )
        for i, hyp in zip(batch.index.tolist(), hyps):
            out[i] = list(hyp.tokens)
    return out


def validate(
    model: nn.Module,
    data: EvalSet,
    tokenizer: Tokenizer,
    device: torch.device,
    precision: Precision,
    max_tokens: int,
    beam_size: int = 1,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
) -> ValResult:
    """Loss, perplexity, accuracy, and BLEU/chrF of decoded hypotheses (model in eval mode)."""
    was_training = model.training
    model.eval()
    try:
        loss, ppl, acc = evaluate_loss(model, data, max_tokens, device, precision)
        ids = decode(model, data.src_ids, max_tokens, device, beam_size, max_len_a, max_len_b)
    finally:
        model.train(was_training)
    hyps = tokenizer.decode_tgt(ids)
    scores = corpus_scores(hyps, data.ref_text, metrics=("bleu", "chrf"))
    return ValResult(
        loss=loss,
        ppl=ppl,
        accuracy=acc,
        bleu=scores["bleu"].score,
        chrf=scores["chrf"].score,
        hyps=hyps,
        signatures={k: v.signature for k, v in scores.items()},
    )


def _head_mean(maps: dict[str, torch.Tensor], prefix: str) -> list[tuple[str, torch.Tensor]]:
    """Per layer ``<prefix>/layer{i}`` [H,T,S] -> ("<prefix>_layer{i}", mean over heads)."""
    keys = sorted((k for k in maps if k.startswith(f"{prefix}/layer")), key=_layer_no)
    return [(k.replace("/", "_"), maps[k].mean(dim=0)) for k in keys]


def _layer_no(key: str) -> int:
    return int(key.rsplit("layer", 1)[1])


@torch.no_grad()
def attention_images(
    model: nn.Module, tokenizer: Tokenizer, data: EvalSet, index: int, device: torch.device
) -> list[tuple[str, np.ndarray]]:
    """Heatmaps (name, HWC uint8) for validation pair ``index``, teacher-forced on its reference.

    Always ``cross``; for models with per-layer maps also every cross layer averaged over
    heads, each head of the last cross layer, and decoder self-attention per layer.
    """
    model.eval()
    batch = make_batch([data.src_ids[index]], [data.tgt_ids[index]]).to(device)
    maps = {k: v[0].float().cpu() for k, v in model.attention(batch).items()}
    src_tok = tokenizer.src_pieces(batch.src[0].tolist())
    tgt_in = tokenizer.tgt_pieces(batch.tgt_input[0].tolist())
    tgt_out = tokenizer.tgt_pieces(batch.tgt_out[0].tolist())
    panels: list[tuple[str, torch.Tensor, list[str], list[str]]] = []
    cross_layers = _head_mean(maps, "cross")
    if not cross_layers:
        panels.append(("cross", maps["cross"], src_tok, tgt_out))
    panels += [(name, w, src_tok, tgt_out) for name, w in cross_layers]
    if cross_layers:
        last = max((k for k in maps if k.startswith("cross/layer")), key=_layer_no)
        for h in range(maps[last].size(0)):
            panels.append((f"cross_last_head{h}", maps[last][h], src_tok, tgt_out))
    panels += [(name, w, tgt_in, tgt_in) for name, w in _head_mean(maps, "self")]
    images = []
    for name, weights, cols, rows in panels:
        labels = ("target (keys)", "target (queries)") if name.startswith("self") else None
        fig = attention_figure(
            weights, cols, rows, f"{name} (valid #{index})", labels or ("source", "target")
        )
        images.append((name, figure_to_array(fig)))
    return images


def sample_text(data: EvalSet, hyps: Sequence[str], index: int) -> str:
    """Markdown for TensorBoard's text plugin: source / reference / hypothesis."""
    return (
        f"**source:** {data.src_text[index]}  \n"
        f"**reference:** {data.ref_text[index]}  \n"
        f"**hypothesis:** {hyps[index]}"
    )
