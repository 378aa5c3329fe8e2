"""Word alignments in Pharaoh format (``i-j``: source word i, target word j, from 0).

Taken from the cross-attention of a hypothesis (:mod:`attnmt.decode.attention_maps`): the
last decoder layer's map averaged over its heads (an RNN: its one alignment map), as
OpenNMT and Sockeye read alignments from attention. Each target piece is aligned to the
source piece it attends to most (argmax of its row over the real source pieces: the
source ``</s>`` column is left out, and so is the target ``</s>`` row).
Pieces map to words by SentencePiece's word-start mark ``▁``: a piece starting with it
opens the next whitespace-separated word, so word j is the j-th word of the detokenised
translation and word i the i-th word of the whitespace-normalised (and, past
``decode.max_src_len``, cut) source. Pairs are unique, sorted by source then target word.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import Tensor

from attnmt.decode.attention_maps import attention_maps, source_ids
from attnmt.decode.search import Hypothesis
from attnmt.decode.translator import Translator

WORD_START = "▁"
SPECIALS = ("<s>", "</s>", "<pad>")


def word_index(pieces: Sequence[str]) -> list[int]:
    """The word of each piece (-1 for specials): a new word at every ``▁``-initial piece."""
    words, index = -1, []
    for piece in pieces:
        if piece in SPECIALS:
            index.append(-1)
            continue
        if piece.startswith(WORD_START) or words < 0:
            words += 1
        index.append(words)
    return index


def word_alignment(
    weights: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str]
) -> list[tuple[int, int]]:
    """(source word, target word) pairs from ``weights`` [T, S] over the given pieces."""
    src_words, tgt_words = word_index(source_pieces), word_index(target_pieces)
    real_src = [j for j, w in enumerate(src_words) if w >= 0]
    if not real_src:
        return []
    pairs = set()
    for t, tgt_word in enumerate(tgt_words[: weights.size(0)]):
        if tgt_word < 0:
            continue
        best = real_src[int(weights[t, real_src].argmax())]
        pairs.add((src_words[best], tgt_word))
    return sorted(pairs)


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """``"0-0 1-2 ..."``."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


def hypothesis_alignments(
    translator: Translator,
    sentences: Sequence[str],
    found: Sequence[Sequence[Hypothesis]],
    batch_size: int = 64,
) -> list[list[str]]:
    """Pharaoh alignments of every hypothesis in ``found`` (the Translator's ``n_best`` of
    ``sentences``), in the same nesting; teacher-forced ``batch_size`` hypotheses at a time."""
    ids = source_ids(translator.tokenizer, sentences, translator.decode.max_src_len)
    flat = [(i, h) for i, hyps in enumerate(found) for h in hyps]
    texts: list[str] = []
    for start in range(0, len(flat), batch_size):
        part = flat[start : start + batch_size]
        maps = attention_maps(
            translator.model,
            translator.tokenizer,
            translator.device,
            [ids[i] for i, _ in part],
            [(h.tokens, h.finished) for _, h in part],
        )
        texts += [
            pharaoh(word_alignment(m.mean_last_cross(), m.source_pieces, m.target_pieces))
            for m in maps
        ]
    it = iter(texts)
    return [[next(it) for _ in hyps] for hyps in found]
