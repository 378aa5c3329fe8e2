"""Word alignments in Pharaoh format (``i-j``: source word i, target word j, from 0).

Taken from a cross-attention map ``weights`` [T, S] (target pieces × source pieces, rows
sum to 1; :mod:`attnmt.decode.attention_maps`) as :class:`Extraction` says:

* ``step``: which row aligns target piece t. ``predict``: row t, the step that predicts
  y_t (the usual reading); ``shift``: row t+1, the step whose *input* is y_t (Shift-Att,
  Chen et al. 2020: in a Transformer that step still reads y_t). A piece without a next
  row (a hypothesis cut before ``</s>``) keeps its own.
* ``words``: pieces to words. ``any``: each target piece links to the source piece it
  attends to most and two words link when any of their pieces do (Zenkel et al. 2019,
  Garg et al. 2019); ``one``: one link per target word, w_{j,i} = Σ_{t∈j} Σ_{s∈i}
  weights[t, s] (its pieces' rows summed, then each source word's pieces' columns), linked
  to argmax_i w_{j,i} (as Luong et al. 2015 score their alignments).
* ``eos``: the source ``</s>`` column. ``ignore``: left out of the argmax, so every target
  word links to some source word; ``unaligned``: it takes part, and an argmax on it leaves
  the target piece (``any``) or word (``one``) without a link.

The target ``</s>`` row is never a word. Pieces map to words by SentencePiece's
word-start mark ``▁``: a piece starting with it opens the next whitespace-separated word,
so word j is the j-th word of the detokenised translation and word i the i-th word of the
whitespace-normalised (and, past ``decode.max_src_len``, cut) source. Pairs are unique,
sorted by source then target word. Ties go to the first column (``torch.argmax``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from attnmt.data.gold import Link
from attnmt.decode.attention_maps import attention_maps, source_ids
from attnmt.decode.search import Hypothesis
from attnmt.decode.translator import Translator
from attnmt.errors import ConfigError

WORD_START = "▁"
EOS = "</s>"
SPECIALS = ("<s>", EOS, "<pad>")
WORDS = ("any", "one")
EOS_READINGS = ("ignore", "unaligned")
STEPS = ("predict", "shift")


@dataclass(frozen=True)
class Extraction:
    """How a map becomes word links (evaluate.py's ``align_words``, ``align_eos``,
    ``align_step``; see the module docstring). The defaults are the reading attnmt always
    had: every piece's argmax, ``</s>`` left out, the predicting step."""

    words: str = "any"
    eos: str = "ignore"
    step: str = "predict"

    def check(self) -> None:
        """ConfigError naming the setting whose value is not one of its choices."""
        for key, value, choices in (
            ("align_words", self.words, WORDS),
            ("align_eos", self.eos, EOS_READINGS),
            ("align_step", self.step, STEPS),
        ):
            if value not in choices:
                raise ConfigError(f"{key}={value!r}: choose one of {', '.join(choices)}")

    def describe(self) -> str:
        """``"align_words=any align_eos=ignore align_step=predict"``."""
        return f"align_words={self.words} align_eos={self.eos} align_step={self.step}"


DEFAULT_EXTRACTION = Extraction()
"""The reading of :class:`Extraction`'s defaults."""


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


def aligning_rows(weights: Tensor, step: str) -> Tensor:
    """[..., T, S] -> [..., T, S]: row t is the row that aligns target piece t: row t
    itself (``predict``) or row t+1 (``shift``; the last row keeps its own)."""
    if step == "predict":
        return weights
    return torch.cat([weights[..., 1:, :], weights[..., -1:, :]], dim=-2)


def word_alignments(
    weights: Tensor,
    source_pieces: Sequence[str],
    target_pieces: Sequence[str],
    extraction: Extraction = DEFAULT_EXTRACTION,
) -> list[list[Link]]:
    """The sorted (source word, target word) pairs of each map of ``weights`` [N, T, S]
    over the given pieces (N maps of one sentence pair, e.g. every layer and head)."""
    n = weights.size(0)
    src_words, tgt_words = word_index(source_pieces), word_index(target_pieces)
    rows = aligning_rows(weights, extraction.step)
    pieces = [t for t, w in enumerate(tgt_words[: rows.size(1)]) if w >= 0]
    columns = [s for s, w in enumerate(src_words[: rows.size(2)]) if w >= 0]
    n_src = max(src_words, default=-1) + 1
    if extraction.eos == "unaligned":
        columns += [s for s, p in enumerate(source_pieces[: rows.size(2)]) if p == EOS]
    if not pieces or not columns:
        return [[] for _ in range(n)]
    # each column's source word; n_src (no word) for </s>
    column_word = torch.tensor([src_words[s] if src_words[s] >= 0 else n_src for s in columns])
    picked = rows[:, pieces][:, :, columns].float()  # [N, T', C]
    if extraction.words == "any":
        best = column_word[picked.argmax(dim=-1)]  # [N, T']: each piece's source word
        targets = [tgt_words[t] for t in pieces]
    else:
        n_tgt = max(tgt_words) + 1
        by_target = torch.zeros(n, n_tgt, len(columns)).index_add_(
            1, torch.tensor([tgt_words[t] for t in pieces]), picked
        )  # [N, J, C]: each target word's rows summed
        by_word = torch.zeros(n, n_tgt, n_src + 1).index_add_(2, column_word, by_target)
        if extraction.eos == "ignore":  # no </s> column: its group (the last) is left out
            by_word = by_word[..., :n_src]
        best = by_word.argmax(dim=-1)  # [N, J]: each target word's source word
        targets = list(range(n_tgt))
    return [
        sorted({(i, j) for i, j in zip(found.tolist(), targets) if i < n_src}) for found in best
    ]


def word_alignment(
    weights: Tensor,
    source_pieces: Sequence[str],
    target_pieces: Sequence[str],
    extraction: Extraction = DEFAULT_EXTRACTION,
) -> list[Link]:
    """(source word, target word) pairs from ``weights`` [T, S] over the given pieces."""
    return word_alignments(weights[None], source_pieces, target_pieces, extraction)[0]


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
    ``sentences``), in the same nesting; teacher-forced ``batch_size`` hypotheses at a time.
    The map is the last layer's mean of heads, read with the default :class:`Extraction`."""
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
