"""Word alignments of given (source, reference) pairs: the model is teacher-forced on the
reference (forced alignment) and its cross-attention read as an alignment.

The map (:class:`MapChoice`): an RNN's alignment weights (its one map); a Transformer's
cross-attention of decoder layer ``layer`` (Python indexing: -1 is the last) averaged over
its heads (``head=None``) or one head, or with ``layer="all"`` the mean over every layer
and head, (1/LH) Σ_l Σ_h α^{(l,h)}. An ensemble aligns with its members' mean of that map
(each member's chosen map, then their mean). Links follow
:func:`attnmt.decode.word_alignment.word_alignments` as its :class:`Extraction` says (by
default each target piece links to the source piece it attends to most, source and target
``</s>`` left out, and a word pair is linked when any of their pieces are, as Zenkel et
al. 2019 and Garg et al. 2019 turn subword alignments into word alignments). Words are the
whitespace-separated words of the source and reference lines, as in Pharaoh gold files.

:func:`forced_links` reads several maps in one pass (:func:`table_choices`: each layer's
head mean, each head, the mean over layers), for evaluate.py's table of AER per map.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnmt.data.batching import make_batch
from attnmt.data.gold import Link
from attnmt.decode.attention_maps import AttentionMaps, attention_maps
from attnmt.decode.ensemble import Ensemble
from attnmt.decode.translator import Translator, cut_sources
from attnmt.decode.word_alignment import (
    DEFAULT_EXTRACTION,
    Extraction,
    word_alignments,
    word_index,
)
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq

log = logging.getLogger(__name__)

ALL_LAYERS = "all"
"""``align_layer=all``: the mean over every decoder layer and head."""


@dataclass(frozen=True)
class MapChoice:
    """Which cross-attention map aligns: ``layer`` (an index, -1 the last, or ``"all"``)
    and ``head`` (None: the mean of the heads)."""

    layer: int | str = -1
    head: int | None = None

    def select(self, cross: Tensor) -> Tensor:
        """[T, S] from ``cross`` [L, H, T, S]."""
        return select_map(cross, self.layer, self.head)

    def describe(self) -> str:
        """``"layer -1, mean of heads"``, ``"layer 0, head 1"``, ``"all layers, mean of
        heads"``."""
        return describe_map(self.layer, self.head)


EVALUATE_MAP = MapChoice(ALL_LAYERS, None)
"""evaluate.py's default map (configs/evaluate.yaml's ``align_layer``, ``align_head``: the
mean over layers, chosen by measurement there)."""
EVALUATE_EXTRACTION = Extraction("any", "unaligned", "predict")
"""evaluate.py's default reading (``align_words``, ``align_eos``, ``align_step``)."""


def describe_map(layer: int | str, head: int | None) -> str:
    """``"layer -1, mean of heads"`` or ``"layer 0, head 1"`` (``"all layers, ..."``)."""
    where = "all layers" if layer == ALL_LAYERS else f"layer {layer}"
    return f"{where}, " + ("mean of heads" if head is None else f"head {head}")


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


def members(model: Seq2Seq) -> list[Seq2Seq]:
    """The models whose maps are read: an ensemble's members, else the model itself."""
    return list(model.members) if isinstance(model, Ensemble) else [model]


def check_choice_setting(layer: Any, head: Any) -> None:
    """ConfigError naming ``align_layer`` / ``align_head`` when they name no map of any
    model: a layer that is neither an index nor ``all``, a head that is not an index, or
    a head with ``all``."""
    if isinstance(layer, bool) or not (isinstance(layer, int) or layer == ALL_LAYERS):
        raise ConfigError(
            f"align_layer={layer!r}: give a decoder layer index (-1: the last) or "
            f"{ALL_LAYERS} (the mean over every layer and head)"
        )
    if head is not None and (isinstance(head, bool) or not isinstance(head, int)):
        raise ConfigError(f"align_head={head!r}: give a head index (0, 1, ...) or null")
    if layer == ALL_LAYERS and head is not None:
        raise ConfigError(
            f"align_layer={ALL_LAYERS} align_head={head}: the mean over layers takes every "
            "head; leave align_head=null, or choose a layer for one head"
        )


def check_map_choice(
    model: Seq2Seq, device: torch.device, layer: int | str, head: int | None
) -> None:
    """ConfigError naming ``align_layer`` or ``align_head`` when the model (every member
    of an ensemble) has no such map."""
    check_choice_setting(layer, head)
    group = members(model)
    for k, member in enumerate(group):
        which = f" (ensemble member {k + 1} of {len(group)})" if len(group) > 1 else ""
        layers, heads = cross_layout(member, device)
        if isinstance(layer, int) and not -layers <= layer < layers:
            raise ConfigError(
                f"align_layer={layer}: the model{which} has {layers} cross-attention "
                f"layer(s); choose 0..{layers - 1}, -1 for the last, or {ALL_LAYERS}"
            )
        if head is not None and not 0 <= head < heads:
            raise ConfigError(
                f"align_head={head}: the model's{which} cross-attention has {heads} "
                f"head(s); choose 0..{heads - 1}, or null for their mean"
            )


def select_map(cross: Tensor, layer: int | str, head: int | None) -> Tensor:
    """[T, S] from ``cross`` [L, H, T, S]: layer ``layer``, its head ``head`` or their
    mean; ``layer="all"``: the mean over every layer and head."""
    if layer == ALL_LAYERS:
        return cross.mean(dim=(0, 1))
    assert isinstance(layer, int)
    per_layer = cross[layer]  # [H, T, S]
    return per_layer.mean(dim=0) if head is None else per_layer[head]


def table_choices(layers: int, heads: int) -> list[MapChoice]:
    """The maps of the AER table of a model with ``layers`` × ``heads`` cross-attention
    maps: per layer (0-based) its head mean then each head, then the mean over layers;
    one map (an RNN): that map alone."""
    if layers * heads == 1:
        return [MapChoice(0, None)]
    out: list[MapChoice] = []
    for layer in range(layers):
        out.append(MapChoice(layer, None))
        out += [MapChoice(layer, h) for h in range(heads)] if heads > 1 else []
    return out + ([MapChoice(ALL_LAYERS, None)] if layers > 1 else [])


def _word_count(pieces: Sequence[str]) -> int:
    return max(word_index(pieces), default=-1) + 1


def _warn_lines(what: str, lines: Sequence[int]) -> None:
    if lines:
        shown = ", ".join(str(n + 1) for n in lines[:5])
        more = f" and {len(lines) - 5} more" if len(lines) > 5 else ""
        log.warning("%d line(s) %s: line %s%s", len(lines), what, shown, more)


def map_links(
    maps: Sequence[AttentionMaps], choices: Sequence[MapChoice], extraction: Extraction
) -> list[list[Link]]:
    """Per map of ``choices``, the links of one pair from its ``maps`` (one per ensemble
    member, the same pieces: each member's chosen map, then their mean)."""
    chosen = torch.stack(
        [torch.stack([c.select(m.cross) for m in maps]).mean(dim=0) for c in choices]
    )  # [choices, T, S]
    return word_alignments(chosen, maps[0].source_pieces, maps[0].target_pieces, extraction)


def forced_links(
    translator: Translator,
    sources: Sequence[str],
    refs: Sequence[str],
    choices: Sequence[MapChoice],
    extraction: Extraction = DEFAULT_EXTRACTION,
    batch_size: int = 64,
) -> list[list[list[Link]]]:
    """Per map of ``choices``, the sorted (source word, target word) links of each
    (source, reference) pair; teacher-forced ``batch_size`` pairs at a time, shortest
    first, every map read from the same forward pass. Sources are cut to
    ``decode.max_src_len`` pieces as for translation (links to words past the cut cannot
    be found; a warning names the lines), references to the model's
    ``max_target_length()`` pieces (a Transformer's positions; likewise warned)."""
    src_ids, cut = cut_sources(translator.tokenizer, sources, translator.decode.max_src_len)
    tgt_ids = translator.tokenizer.encode_tgt(list(refs))
    tgt_limit = int(translator.model.max_target_length())
    cut_refs = sorted(i for i, ids in enumerate(tgt_ids) if len(ids) > tgt_limit)
    for i in cut_refs:
        tgt_ids[i] = tgt_ids[i][:tgt_limit]
    refs_cut = set(cut_refs)
    order = sorted(range(len(sources)), key=lambda i: (len(src_ids[i]), len(tgt_ids[i])))
    links: list[list[list[Link]]] = [[[] for _ in sources] for _ in choices]
    odd: list[int] = []
    for start in range(0, len(order), batch_size):
        part = order[start : start + batch_size]
        per_member = [
            attention_maps(
                member,
                translator.tokenizer,
                translator.device,
                [src_ids[i] for i in part],
                [(tgt_ids[i], True) for i in part],
            )
            for member in members(translator.model)
        ]
        for k, i in enumerate(part):
            m = per_member[0][k]
            found = map_links([got[k] for got in per_member], choices, extraction)
            for c, pairs in enumerate(found):
                links[c][i] = pairs
            src_words = _word_count(m.source_pieces)
            tgt_words = _word_count(m.target_pieces)
            if (i not in refs_cut and tgt_words != len(refs[i].split())) or (
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


def forced_alignments(
    translator: Translator,
    sources: Sequence[str],
    refs: Sequence[str],
    layer: int | str = -1,
    head: int | None = None,
    batch_size: int = 64,
    extraction: Extraction = DEFAULT_EXTRACTION,
) -> list[list[Link]]:
    """The links of each (source, reference) pair from one map (:func:`forced_links`)."""
    choice = MapChoice(layer, head)
    return forced_links(translator, sources, refs, [choice], extraction, batch_size)[0]
