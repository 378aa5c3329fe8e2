"""Training batches that carry guided alignment's reference links, as piece positions.

Links are between words (attnmt.data.word_links); attention is between pieces. A piece
belongs to a word as :func:`attnmt.decode.word_alignment.word_index` reads it: a piece
starting with SentencePiece's ``▁`` opens the next whitespace word (the first piece always
opens word 0). A word link ``i-j`` becomes a link between **every** piece of source word
``i`` and every piece of target word ``j`` (the convention of Garg et al. 2019's subword
links): with source pieces ``x`` and target pieces ``y``,

    G[t, s] = 1  iff  (word(x_s), word(y_t)) is a link,

t indexing the target pieces ``y_1..y_n`` and s the source pieces (the decoder's row t is the
step that predicts ``tgt_out[t] = y_{t+1}``, so piece t sits at row t). ``</s>`` on either
side gets no link, so its row is left out of the loss and its column never a target.

A pair whose pieces make another number of words than its line (a tokenizer that splits
or joins whitespace words) contributes no links: its indices would point at other words.
The first such pair is logged, with the line; :attr:`GuidedCollate.skipped` counts them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch

from attnmt.batch import Batch
from attnmt.data.dataset import Item, collate
from attnmt.data.tokenizer import Tokenizer
from attnmt.data.word_links import WordLinks

log = logging.getLogger(__name__)

WORD_START = "▁"


def word_starts(tokenizer: Tokenizer, side: str) -> np.ndarray:
    """[V] bool: which of ``side``'s piece ids open a word (start with ``▁``)."""
    sp = tokenizer.processor(side)
    return np.array(
        [sp.id_to_piece(i).startswith(WORD_START) for i in range(sp.get_piece_size())],
        dtype=bool,
    )


def piece_words(ids: Sequence[int], starts: np.ndarray) -> np.ndarray:
    """[n] int: the word of each piece of ``ids`` (no specials), from 0."""
    opens = starts[np.asarray(ids, dtype=np.int64)]
    if len(opens):
        opens[0] = True
    return np.cumsum(opens) - 1


def piece_links(
    src_words: np.ndarray, tgt_words: np.ndarray, links: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """(t [N], s [N]) piece links of one pair: ``src_words`` [S] / ``tgt_words`` [T] the
    word of each piece (:func:`piece_words`), ``links`` (source words, target words) [l]."""
    n_src = int(src_words.max()) + 1 if len(src_words) else 0
    n_tgt = int(tgt_words.max()) + 1 if len(tgt_words) else 0
    linked = np.zeros((n_tgt, n_src), dtype=bool)  # word links, target × source
    i, j = links
    keep = (i < n_src) & (j < n_tgt)
    linked[j[keep], i[keep]] = True
    t, s = np.nonzero(linked[tgt_words][:, src_words])  # [T, S] piece links
    return t, s


class GuidedCollate:
    """``collate`` (attnmt.data.dataset) plus ``Batch.align_links`` / ``align_rows``:
    ``links`` holds the dataset's pairs in its order (pair ``k`` = item ``k``);
    ``lines`` [len(links)]: each pair's line in the split (None: k itself), for messages."""

    def __init__(
        self,
        links: WordLinks,
        src_starts: np.ndarray,
        tgt_starts: np.ndarray,
        lines: np.ndarray | None = None,
    ) -> None:
        self.links = links
        self.src_starts = src_starts
        self.tgt_starts = tgt_starts
        self.lines = lines
        self.skipped = 0

    def __call__(self, items: Sequence[Item]) -> Batch:
        batch = collate(items)
        parts: list[np.ndarray] = []
        for row, (src, tgt, k) in enumerate(items):
            if tgt is None:
                continue
            sw, tw = piece_words(src, self.src_starts), piece_words(tgt, self.tgt_starts)
            if not self._words_match(k, sw, tw):
                continue
            t, s = piece_links(sw, tw, self.links.pair(k))
            parts.append(np.stack([np.full_like(t, row), t, s], axis=1))
        coords = np.concatenate(parts) if parts else np.zeros((0, 3), dtype=np.int64)
        coords = coords.astype(np.int64)
        width = batch.tgt_out.size(1) if batch.tgt_out is not None else 1
        batch.align_links = torch.from_numpy(coords)
        batch.align_rows = len(np.unique(coords[:, 0] * width + coords[:, 1]))
        return batch

    def _words_match(self, k: int, src_words: np.ndarray, tgt_words: np.ndarray) -> bool:
        """Whether pair ``k``'s pieces make as many words as its line (else it is skipped)."""
        want = (int(self.links.src_words[k]), int(self.links.tgt_words[k]))
        got = (_count(src_words), _count(tgt_words))
        if got == want:
            return True
        if not self.skipped:
            line = 1 + (k if self.lines is None else int(self.lines[k]))
            log.warning(
                "guided alignment: train line %d makes %d source and %d target words from its "
                "pieces but %d and %d from its text (the tokenizer splits or joins words): its "
                "links are left out, as are those of every such pair",
                line,
                *got,
                *want,
            )
        self.skipped += 1
        return False


def _count(words: np.ndarray) -> int:
    """Words of a pair side from :func:`piece_words` (0 for no pieces)."""
    return int(words[-1]) + 1 if len(words) else 0
