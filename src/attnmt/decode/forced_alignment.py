"""Word alignments of given (source, reference) pairs: the model is teacher-forced on the
reference (forced alignment) and its cross-attention read as an alignment.

The map: an RNN's alignment weights; a Transformer's cross-attention of decoder layer
``layer`` (Python indexing: -1 is the last) averaged over its heads (``head=None``) or one
head; an ensemble's members' mean last-layer map averaged over heads (the only one it
gives). Links follow :func:`attnmt.decode.word_alignment.word_alignment`: each target piece
links to the source piece it attends to most (source ``</s>`` and target ``</s>`` left
out), and a word pair is linked when any of their pieces are (as Zenkel et al. 2019 and
Garg et al. 2019 turn subword alignments into word alignments). Words are the
whitespace-separated words of the source and reference lines, as in Pharaoh gold files.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import Tensor

from attnmt.data.batching import make_batch
from attnmt.data.gold import Link
from attnmt.decode.attention_maps import attention_maps
from attnmt.decode.ensemble import Ensemble
from attnmt.decode.translator import Translator, cut_sources
from attnmt.decode.word_alignment import word_alignment, word_index
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq

log = logging.getLogger(__name__)


def describe_map(layer: int, head: int | None) -> str:
    """``"layer -1, mean of heads"`` or ``"layer 0, head 1"``."""
    return f"layer {layer}, " + ("mean of heads" if head is None else f"head {head}")


@torch.no_grad()
def cross_layout(model: Seq2Seq, device: torch.device) -> tuple[int, int]:
    """(decoder layers, heads) of the model's cross-attention, read from the maps of an
    empty pair; (1, 1) for an RNN or an ensemble (one map)."""
    was_training = model.training
    model.eval()
    try:
        maps = model.attention(make_batch([[]], [[]]).to(device))
    finally:
        model.train(was_training)
    layers = [w for k, w in maps.items() if k.startswith("cross/layer")]
    return (len(layers), layers[0].size(1)) if layers else (1, 1)


def check_map_choice(model: Seq2Seq, device: torch.device, layer: int, head: int | None) -> None:
    """ConfigError naming ``align_layer`` or ``align_head`` when the model has no such map."""
    if isinstance(model, Ensemble) and (layer != -1 or head is not None):
        raise ConfigError(
            f"align_layer={layer} align_head={head}: an ensemble aligns with its members' "
            "mean last-layer map; leave align_layer=-1 align_head=null, or evaluate one "
            "checkpoint"
        )
    layers, heads = cross_layout(model, device)
    if not -layers <= layer < layers:
        raise ConfigError(
            f"align_layer={layer}: the model has {layers} cross-attention layer(s); choose "
            f"0..{layers - 1}, or -1 for the last"
        )
    if head is not None and not 0 <= head < heads:
        raise ConfigError(
            f"align_head={head}: the model's cross-attention has {heads} head(s); choose "
            f"0..{heads - 1}, or null for their mean"
        )


def select_map(cross: Tensor, layer: int, head: int | None) -> Tensor:
    """[T, S] from ``cross`` [L, H, T, S]: layer ``layer``, its head ``head`` or their mean."""
    per_layer = cross[layer]  # [H, T, S]
    return per_layer.mean(dim=0) if head is None else per_layer[head]


def _word_count(pieces: Sequence[str]) -> int:
    return max(word_index(pieces), default=-1) + 1


def _warn_lines(what: str, lines: Sequence[int]) -> None:
    if lines:
        shown = ", ".join(str(n + 1) for n in lines[:5])
        more = f" and {len(lines) - 5} more" if len(lines) > 5 else ""
        log.warning("%d line(s) %s: line %s%s", len(lines), what, shown, more)


def forced_alignments(
    translator: Translator,
    sources: Sequence[str],
    refs: Sequence[str],
    layer: int = -1,
    head: int | None = None,
    batch_size: int = 64,
) -> list[list[Link]]:
    """(source word, target word) links of each (source, reference) pair, sorted;
    teacher-forced ``batch_size`` pairs at a time, shortest first. Sources are cut to
    ``decode.max_src_len`` pieces as for translation (links to words past the cut cannot
    be found; a warning names the lines), references to the model's
    ``max_target_length()`` pieces (a Transformer's positions; likewise warned)."""
    src_ids, cut = cut_sources(translator.tokenizer, sources, translator.decode.max_src_len)
    tgt_ids = translator.tokenizer.encode_tgt(list(refs))
    tgt_limit = int(translator.model.max_target_length())
    cut_refs = [i for i, ids in enumerate(tgt_ids) if len(ids) > tgt_limit]
    for i in cut_refs:
        tgt_ids[i] = tgt_ids[i][:tgt_limit]
    order = sorted(range(len(sources)), key=lambda i: (len(src_ids[i]), len(tgt_ids[i])))
    links: list[list[Link]] = [[] for _ in sources]
    odd: list[int] = []
    for start in range(0, len(order), batch_size):
        part = order[start : start + batch_size]
        maps = attention_maps(
            translator.model,
            translator.tokenizer,
            translator.device,
            [src_ids[i] for i in part],
            [(tgt_ids[i], True) for i in part],
        )
        for i, m in zip(part, maps):
            links[i] = word_alignment(
                select_map(m.cross, layer, head), m.source_pieces, m.target_pieces
            )
            src_words = _word_count(m.source_pieces)
            tgt_words = _word_count(m.target_pieces)
            if (i not in cut_refs and tgt_words != len(refs[i].split())) or (
                i not in cut and src_words != len(sources[i].split())
            ):
                odd.append(i)
    _warn_lines(
        f"longer than decode.max_src_len={translator.decode.max_src_len} source pieces are "
        "aligned from their first pieces only",
        sorted(cut),
    )
    _warn_lines(
        f"longer than the model's {tgt_limit} target positions (max_target_length) are "
        "aligned from their first reference pieces only",
        cut_refs,
    )
    _warn_lines(
        "split into a different number of words by the tokenizer's word marks (▁) than by "
        "whitespace; their links may name other words",
        sorted(odd),
    )
    return links
