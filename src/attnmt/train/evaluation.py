"""Scoring a model on a split: validation loss/perplexity, decoding, BLEU/chrF, attention
heatmaps, and the final test with a checkpoint's weights.

The loss is teacher-forced on pairs cut to ``data.max_len`` pieces a side; perplexity is
``exp(NLL / tokens)`` without label smoothing. Hypotheses come from the one decoding path,
:class:`attnmt.decode.translator.Translator`, on the raw source lines, and are scored
against the raw reference lines with sacrebleu (:func:`attnmt.decode.metrics.corpus_scores`).
The entropy of each cross-attention map (:mod:`attnmt.decode.attention_entropy`) is measured
teacher-forced on the first :data:`ENTROPY_PAIRS` pairs, so a collapsing attention shows.
When the valid split has word links (:mod:`attnmt.train.valid_links`), the alignment error
rate of the attention is measured too (:func:`validation_aer`): every reference forced
through the model and read as evaluate.py reads it by default, so the figure equals
``evaluate.py ckpt=<that checkpoint> split=valid``'s ``aer`` against the same links.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from attnmt.checkpoint import load_checkpoint
from attnmt.data.batching import length_batches, make_batch
from attnmt.data.textio import write_lines
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.alignment_error import AlignmentScores, alignment_error
from attnmt.decode.attention_entropy import EntropyMeans
from attnmt.decode.forced_alignment import EVALUATE_EXTRACTION, EVALUATE_MAP, forced_alignments
from attnmt.decode.metrics import corpus_scores, score_fields
from attnmt.decode.plots import attention_figure, figure_to_array
from attnmt.decode.translator import Translator, load_translator
from attnmt.models.base import Seq2Seq
from attnmt.run_dir import RunDir
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.precision import Precision
from attnmt.train.valid_links import ValidLinks

log = logging.getLogger(__name__)

ENTROPY_PAIRS = 100
"""Validation pairs (the first ones, cut as for the loss) whose cross-attention entropy each
validation measures: one teacher-forced pass over a bounded set, a fraction of the loss's."""


@dataclass
class EvalSet:
    """A split ready for validation: ids for the loss (no specials, cut to data.max_len)
    and the raw texts for decoding and BLEU."""

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
    entropy: dict[str, float] = field(default_factory=dict)  # map -> mean H(α_t), nats
    entropy_norm: dict[str, float] = field(default_factory=dict)  # map -> mean H(α_t)/log n
    aer: float | None = None  # AER of the attention against the valid links; None: no links

    def scalars(self) -> dict[str, float]:
        """TensorBoard tags (``val/aer`` only when the split has links); metrics.jsonl's
        valid event has the same figures without ``val/``."""
        return {
            "val/nll": self.loss,
            "val/ppl": self.ppl,
            "val/bleu": self.bleu,
            "val/chrf": self.chrf,
            "val/accuracy": self.accuracy,
            **({"val/aer": self.aer} if self.aer is not None else {}),
        }

    def entropy_scalars(self) -> dict[str, float]:
        """TensorBoard tags ``val_attention/entropy/<map>`` (nats) and
        ``val_attention/entropy_norm/<map>`` (0 = one column, 1 = uniform)."""
        return {
            **{f"val_attention/entropy/{k}": v for k, v in self.entropy.items()},
            **{f"val_attention/entropy_norm/{k}": v for k, v in self.entropy_norm.items()},
        }

    def line(self) -> str:
        """One concise log line (with the normalised entropy of the ``cross`` map)."""
        line = (
            f"nll {self.loss:.3f} | ppl {self.ppl:.2f} | acc {self.accuracy:.3f} | "
            f"BLEU {self.bleu:.2f} | chrF {self.chrf:.2f}"
        )
        if "cross" in self.entropy_norm:
            line += f" | attn entropy {self.entropy_norm['cross']:.2f}"
        if self.aer is not None:
            line += f" | AER {self.aer:.4f}"
        return line


def make_eval_set(
    tokenizer: Tokenizer, src: Sequence[str], ref: Sequence[str], max_len: int, subset: int = 0
) -> EvalSet:
    """Encode a split for the teacher-forced loss; ``subset > 0`` keeps the first
    ``subset`` pairs (a fixed subset).

    The ids of both sides are cut to ``max_len`` pieces (the training filter's limit); the
    texts stay raw: decoding reads the sources through the translator (with its own
    ``decode.max_src_len`` policy) and BLEU reads the untouched references.
    """
    if subset > 0:
        src, ref = src[:subset], ref[:subset]
    src_ids = [ids[:max_len] for ids in tokenizer.encode_src(src)]
    tgt_ids = [ids[:max_len] for ids in tokenizer.encode_tgt(ref)]
    return EvalSet(src_ids, tgt_ids, list(src), list(ref))


@torch.no_grad()
def evaluate_loss(
    model: nn.Module, data: EvalSet, max_tokens: int, device: torch.device, precision: Precision
) -> tuple[float, float, float]:
    """Teacher-forced (NLL per token, perplexity, token accuracy) over ``data``."""
    nll, tokens, correct = 0.0, 0, 0
    lengths = [len(s) + len(t) + 2 for s, t in zip(data.src_ids, data.tgt_ids)]
    for rows in length_batches(lengths, max_tokens):
        tgt = [data.tgt_ids[i] for i in rows]
        batch = make_batch([data.src_ids[i] for i in rows], tgt).to(device)
        with precision.autocast():
            logits = model(batch)
        out = label_smoothed_nll(logits, batch.target()[1], 0.0, count_correct=True)
        assert out.n_correct is not None  # counted: count_correct=True
        nll += float(out.nll)
        tokens += out.n_tokens
        correct += out.n_correct
    per_token = nll / max(tokens, 1)
    return per_token, math.exp(min(per_token, 50.0)), correct / max(tokens, 1)


@torch.no_grad()
def attention_entropy(
    model: Seq2Seq,
    data: EvalSet,
    max_tokens: int,
    device: torch.device,
    precision: Precision,
    pairs: int = ENTROPY_PAIRS,
) -> EntropyMeans:
    """Entropy of every cross-attention map of ``model`` teacher-forced on the first
    ``pairs`` pairs of ``data``, in batches of ``max_tokens`` padded tokens."""
    means = EntropyMeans()
    n = min(pairs, len(data))
    lengths = [len(data.src_ids[i]) + len(data.tgt_ids[i]) + 2 for i in range(n)]
    for rows in length_batches(lengths, max_tokens):
        tgt = [data.tgt_ids[i] for i in rows]
        batch = make_batch([data.src_ids[i] for i in rows], tgt).to(device)
        with precision.autocast():
            maps = model.attention(batch)
        means.add(maps, batch.src_pad_mask, batch.target()[2])
    return means


def validation_aer(translator: Translator, data: EvalSet, links: ValidLinks) -> AlignmentScores:
    """AER of the model's attention against ``links`` (one per pair of ``data``): each
    reference forced through the model (:func:`attnmt.decode.forced_alignment.forced_alignments`)
    with evaluate.py's default map and reading (``EVALUATE_MAP``, ``EVALUATE_EXTRACTION``),
    AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|) summed over the pairs."""
    found = forced_alignments(
        translator,
        data.src_text,
        data.ref_text,
        EVALUATE_MAP.layer,
        EVALUATE_MAP.head,
        extraction=EVALUATE_EXTRACTION,
    )
    return alignment_error(found, links.links)


def validate(
    translator: Translator,
    data: EvalSet,
    precision: Precision,
    max_tokens: int,
    beam: int = 1,
    entropy_pairs: int = ENTROPY_PAIRS,
    links: ValidLinks | None = None,
) -> ValResult:
    """Loss, perplexity, accuracy, the attention entropy on the first ``entropy_pairs``
    pairs, the AER against ``links`` (None: not measured, nothing forced), and BLEU/chrF
    of ``translator``'s hypotheses with ``beam`` (the rest of its decode settings as they
    are); the model's train/eval mode is restored afterwards."""
    model, device = translator.model, translator.device
    was_training = model.training
    model.eval()
    try:
        loss, ppl, acc = evaluate_loss(model, data, max_tokens, device, precision)
        entropy = attention_entropy(model, data, max_tokens, device, precision, entropy_pairs)
        aer = None if links is None else validation_aer(translator, data, links).aer
    finally:
        model.train(was_training)
    hyps = translator.translate(data.src_text, beam=beam)
    scores = corpus_scores(hyps, data.ref_text, metrics=("bleu", "chrf"))
    return ValResult(
        loss=loss,
        ppl=ppl,
        accuracy=acc,
        bleu=scores["bleu"].score,
        chrf=scores["chrf"].score,
        hyps=hyps,
        signatures={k: v.signature for k, v in scores.items()},
        entropy=entropy.means(),
        entropy_norm=entropy.normalised(),
        aer=aer,
    )


def _head_mean(maps: dict[str, torch.Tensor], prefix: str) -> list[tuple[str, torch.Tensor]]:
    """Per layer ``<prefix>/layer{i}`` [H,T,S] -> ("<prefix>_layer{i}", mean over heads)."""
    keys = sorted((k for k in maps if k.startswith(f"{prefix}/layer")), key=_layer_no)
    return [(k.replace("/", "_"), maps[k].mean(dim=0)) for k in keys]


def _layer_no(key: str) -> int:
    return int(key.rsplit("layer", 1)[1])


@torch.no_grad()
def attention_images(
    translator: Translator, data: EvalSet, index: int, step: int
) -> list[tuple[str, np.ndarray]]:
    """Heatmaps (name, HWC uint8) of validation pair ``index`` at ``step``.

    The rows are the model's own greedy hypothesis (the model is teacher-forced on it to
    read every layer's maps), the columns the source pieces; the reference is in the
    caption. Always ``cross``; for models with per-layer maps also every cross layer
    averaged over heads, each head of the last cross layer, and decoder self-attention.
    """
    model, tok = translator.model, translator.tokenizer
    (hyp,) = translator.hypotheses([data.src_text[index]], beam=1)
    src_ids = translator.encode([data.src_text[index]])[0]
    model.eval()
    batch = make_batch([src_ids], [hyp.tokens if hyp is not None else []]).to(translator.device)
    maps = {k: v[0].float().cpu() for k, v in model.attention(batch).items()}
    src_tok = tok.src_pieces(batch.src[0].tolist())
    tgt_input, tgt_output, _ = batch.target()
    tgt_in = tok.tgt_pieces(tgt_input[0].tolist())
    tgt_out = tok.tgt_pieces(tgt_output[0].tolist())
    panels: list[tuple[str, str, torch.Tensor, list[str], list[str]]] = []
    cross_layers = _head_mean(maps, "cross")
    if not cross_layers:
        panels.append(("cross", "cross-attention", maps["cross"], src_tok, tgt_out))
    for name, w in cross_layers:
        what = f"cross-attention, layer {_layer_no(name)}, mean of heads"
        panels.append((name, what, w, src_tok, tgt_out))
    if cross_layers:
        last = max((k for k in maps if k.startswith("cross/layer")), key=_layer_no)
        for h in range(maps[last].size(0)):
            what = f"cross-attention, layer {_layer_no(last)}, head {h}"
            panels.append((f"cross_last_head{h}", what, maps[last][h], src_tok, tgt_out))
    for name, w in _head_mean(maps, "self"):
        what = f"decoder self-attention, layer {_layer_no(name)}, mean of heads"
        panels.append((name, what, w, tgt_in, tgt_in))
    caption = f"reference: {data.ref_text[index]}"
    images = []
    for name, what, weights, cols, rows in panels:
        is_self = name.startswith("self")
        labels = ("hypothesis (keys)", "hypothesis (queries)") if is_self else None
        title = f"valid #{index}, step {step}: {what}"
        fig = attention_figure(
            weights, cols, rows, title, labels or ("source", "greedy hypothesis"), caption
        )
        images.append((name, figure_to_array(fig)))
    return images


def score_checkpoint(
    translator: Translator, checkpoint: Path, src: list[str], ref: list[str], run_dir: Path
) -> tuple[dict[str, Any], list[str]]:
    """Load ``checkpoint``'s weights into the translator's model and decode the test split
    exactly as ``evaluate.py ckpt=<checkpoint> split=test`` does with the same decode
    settings; write ``<run>/hyps/test.txt``. (BLEU/chrF and the BLEU signature, hypotheses)."""
    weights = load_checkpoint(checkpoint, map_location=translator.device).weights
    translator.model.load_state_dict(weights)
    return _score_test(translator, checkpoint.name, src, ref, run_dir)


def score_ensemble(
    translator: Translator, checkpoints: list[Path], src: list[str], ref: list[str], run_dir: Path
) -> tuple[dict[str, Any], list[str]]:
    """:func:`score_checkpoint` for an ensemble of ``checkpoints`` (``trainer.test_ensemble``),
    decoded as ``evaluate.py ckpt=[...]`` does with the translator's decode settings."""
    members = load_translator(checkpoints, str(translator.device), translator.decode)
    members.should_stop = translator.should_stop
    label = "ensemble of " + ", ".join(c.name for c in checkpoints)
    figures, hyps = _score_test(members, label, src, ref, run_dir)
    return {**figures, "test_ensemble": [c.name for c in checkpoints]}, hyps


def _score_test(
    translator: Translator, label: str, src: list[str], ref: list[str], run_dir: Path
) -> tuple[dict[str, Any], list[str]]:
    hyps = translator.translate(src)
    write_lines(RunDir(run_dir).hyps / "test.txt", hyps)
    scores = corpus_scores(hyps, ref, metrics=("bleu", "chrf"))
    beam = translator.decode.beam
    log.info("test (%s, beam %d): %s", label, beam, scores["bleu"].text)
    log.info("test (%s, beam %d): %s", label, beam, scores["chrf"].text)
    figures = {
        "test_signature": scores["bleu"].signature,
        "test_beam": beam,
        **{f"test_{k}": v for k, v in score_fields(scores).items()},
    }
    return figures, hyps
