"""The one path from sentences to hypotheses: :class:`Translator`.

The trainer's validation and final test decoding, ``evaluate.py`` and ``translate.py`` all
call :meth:`Translator.hypotheses`, so the same checkpoint, sentences and
:class:`~attnmt.decode.config.DecodeConfig` give the same hypotheses everywhere:

    raw line ─► normalize_space ─► (a very long line: cut by characters) ─► SentencePiece
             ids ─► cut to max_src_len (warned)
             ─► length-sorted batches of ≤ batch_tokens padded source pieces × beam
             (the beam-expanded rows the search holds) ─► greedy / beam search
             ─► pieces ─► detokenised text, one line per input line

A checkpoint carries everything a translator needs: the model's registry name and config,
its weights and the SentencePiece model files, so translation always uses the tokenizer
and whitespace normalisation of training. Several checkpoints that share a tokenizer
decode as one model, an :class:`~attnmt.decode.ensemble.Ensemble` (:func:`load_translator`
with ``ckpt=[A,B,...]`` or a run and ``ensemble=k``), through the same searches.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from attnmt.checkpoint import best_checkpoints, load_resolved
from attnmt.data.batching import length_batches, make_batch
from attnmt.data.textio import normalize_space
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.config import DecodeConfig
from attnmt.decode.ensemble import Ensemble, check_same_tokenizer
from attnmt.decode.search import Hypothesis, beam_search, greedy_search, length_cap, max_length
from attnmt.devices import resolve_device
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.registry import build_model

log = logging.getLogger(__name__)


def normalized_prefix(text: str, chars: int) -> str:
    """At least the first ``chars`` characters of ``normalize_space(text)`` (all of it when
    shorter), normalising only as much of ``text`` as that takes: a prefix of ``text``
    normalises to a prefix of the whole, so a 20 MB line costs a few windows, not copies."""
    window = max(chars, 1)
    while True:
        head = normalize_space(text[:window])
        if len(head) >= chars or window >= len(text):
            return head
        window *= 4


def source_text(text: str, limit: int, longest_piece: int) -> tuple[str, bool]:
    """(the normalised text to encode, whether characters were cut off) for a line that is
    decoded from at most ``limit`` pieces.

    A line longer than ``2 · limit · longest_piece`` characters is cut there, back to its
    last space when at least ``limit · longest_piece`` characters stay: those whole words
    hold at least ``limit`` pieces, and since a piece never crosses a space, its first
    ``limit`` pieces are the whole line's.
    """
    keep = 2 * limit * longest_piece
    head = normalized_prefix(text, keep + 1)
    if len(head) <= keep:
        return head, False
    head = head[:keep]
    space = head.rfind(" ")
    return (head[:space] if space >= limit * longest_piece else head), True


def cut_sources(
    tokenizer: Tokenizer, sentences: Sequence[str], limit: int
) -> tuple[list[list[int]], dict[int, str]]:
    """(whitespace-normalised source piece ids cut to ``limit`` pieces, {index: "(N pieces)"
    or "(N characters)"} of the lines that were cut). A very long line is cut by characters
    before it is encoded (:func:`source_text`), so its size never reaches SentencePiece."""
    longest = tokenizer.longest_piece("src")
    texts, notes = [], {}
    for i, sentence in enumerate(sentences):
        text, cut = source_text(sentence, limit, longest)
        texts.append(text)
        if cut:
            notes[i] = f"({len(sentence)} characters)"
    ids = tokenizer.encode_src(texts)
    for i, x in enumerate(ids):
        if len(x) > limit:
            notes.setdefault(i, f"({len(x)} pieces)")
            ids[i] = x[:limit]
    return ids, dict(sorted(notes.items()))


def encode_sources(
    tokenizer: Tokenizer,
    sentences: Sequence[str],
    limit: int,
    first_line: int = 1,
    reason: str = "the limit",
) -> list[list[int]]:
    """Whitespace-normalised source piece ids, each cut to ``limit`` pieces
    (:func:`cut_sources`); one warning names the lines cut (numbered from ``first_line``)
    and ``reason`` (what sets the limit)."""
    ids, notes = cut_sources(tokenizer, sentences, limit)
    if notes:
        shown = ", ".join(f"{first_line + i} {note}" for i, note in list(notes.items())[:5])
        more = f" and {len(notes) - 5} more" if len(notes) > 5 else ""
        log.warning(
            "%d source line(s) longer than %s pieces are translated from their first %d "
            "pieces: line %s%s",
            len(notes),
            reason,
            limit,
            shown,
            more,
        )
    return ids


def decode_batches(pieces: Sequence[int], decode: DecodeConfig) -> list[list[int]]:
    """Indices of sources of ``pieces`` pieces each (EOS not counted), grouped longest first so
    that a batch's beam-expanded size stays within ``decode.batch_tokens``:
    ``sentences × (longest + 1) × beam <= batch_tokens`` (a source over it alone). Beam
    search holds ``beam`` decoder rows per sentence, each with its caches and per-step
    attention over the padded source, so its memory follows this product, not the source
    pieces alone; beam k gets k times fewer sentences per batch than greedy search."""
    return length_batches([(n + 1) * decode.beam for n in pieces], decode.batch_tokens)


def detokenize_lines(tokenizer: Tokenizer, hyps: Sequence[Sequence[int] | None]) -> list[str]:
    """Text of each hypothesis' target piece ids on one line ("" for None): a line break
    that a piece might hold becomes a space, so line i of the output is always hypothesis i."""
    texts = tokenizer.decode_tgt([list(h) if h is not None else [] for h in hyps])
    return [" ".join(t.splitlines()) if h is not None else "" for t, h in zip(texts, hyps)]


@dataclass
class Translator:
    """A model on ``device`` with the tokenizer it was trained with and decoding settings.

    ``config`` is the run config the checkpoint was trained with (plain data; ``{}`` when
    the translator wraps a model in training), ``checkpoint_path`` where it came from;
    for an ensemble (``model`` an :class:`~attnmt.decode.ensemble.Ensemble`) those are the
    first member's and ``checkpoint_paths`` lists every member's file.
    """

    model: Seq2Seq
    tokenizer: Tokenizer
    device: torch.device
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    config: dict[str, Any] = field(default_factory=dict)
    checkpoint_path: Path | None = None
    #: checked between batches and decoder steps; True stops decoding (KeyboardInterrupt),
    #: e.g. the trainer's signal flag, so a signal during a long decode is honoured at once
    should_stop: Callable[[], bool] | None = field(default=None, repr=False)
    #: every member's checkpoint file when ``model`` is an ensemble; () for one model
    checkpoint_paths: tuple[Path, ...] = ()
    _cap_warned: bool = field(default=False, init=False, repr=False)

    def encode(self, sentences: Sequence[str], first_line: int = 1) -> list[list[int]]:
        """Source piece ids (no specials) after the training whitespace normalisation,
        cut to ``decode.max_src_len`` pieces; one warning names the lines that were cut
        (numbered from ``first_line``)."""
        limit = self.decode.max_src_len
        return encode_sources(
            self.tokenizer, sentences, limit, first_line, f"decode.max_src_len={limit}"
        )

    def hypotheses(
        self, sentences: Sequence[str], first_line: int = 1, **overrides: Any
    ) -> list[Hypothesis | None]:
        """The 1-best Hypothesis per sentence, in input order; None for blank lines.

        ``overrides`` replace fields of ``self.decode`` for this call (e.g. ``beam=1``).
        Sentences are batched by source length, longest first (:func:`decode_batches`).
        """
        return [h[0] if h else None for h in self.n_best(sentences, 1, first_line, **overrides)]

    def n_best(
        self, sentences: Sequence[str], n: int, first_line: int = 1, **overrides: Any
    ) -> list[list[Hypothesis]]:
        """The ``n`` best hypotheses per sentence, best first ([] for blank lines)."""
        decode = dataclasses.replace(self.decode, **overrides) if overrides else self.decode
        if not 1 <= n <= decode.beam:
            raise ConfigError(f"n_best={n} must be between 1 and beam={decode.beam}")
        ids = self.encode(sentences, first_line)
        todo = [i for i, s in enumerate(sentences) if s.strip() and ids[i]]
        self._warn_length_cap(decode, max((len(ids[i]) + 1 for i in todo), default=0))
        out: list[list[Hypothesis]] = [[] for _ in sentences]
        was_training = self.model.training
        self.model.eval()
        try:
            for group in decode_batches([len(ids[i]) for i in todo], decode):
                chosen = [todo[j] for j in group]
                batch = make_batch([ids[i] for i in chosen]).to(self.device)
                len_a, len_b = decode.max_len_a, decode.max_len_b
                if self.should_stop is not None and self.should_stop():
                    raise KeyboardInterrupt
                stop = self.should_stop
                if decode.beam == 1:
                    found = [
                        [h]
                        for h in greedy_search(
                            self.model, batch, max_len_a=len_a, max_len_b=len_b, should_stop=stop
                        )
                    ]
                else:
                    found = beam_search(
                        self.model,
                        batch,
                        decode.beam,
                        decode.alpha,
                        n_best=n,
                        max_len_a=len_a,
                        max_len_b=len_b,
                        should_stop=stop,
                    )
                for i, hyps in zip(chosen, found):
                    out[i] = hyps
        finally:
            self.model.train(was_training)
        return out

    def _warn_length_cap(self, decode: DecodeConfig, longest_src: int) -> None:
        """Warn once when ``max_len_a·|x| + max_len_b`` asks for more pieces than the
        model's hard cap (``Seq2Seq.max_target_length``), which then applies."""
        cap = length_cap(self.model)
        asked = max_length(longest_src, decode.max_len_a, decode.max_len_b)
        if cap is None or asked <= cap or self._cap_warned:
            return
        self._cap_warned = True
        log.warning(
            "decode.max_len_a=%g, decode.max_len_b=%d allow %d pieces for a %d-piece source, "
            "more than this %s model's limit of %d (its positions); hypotheses are cut at %d",
            decode.max_len_a,
            decode.max_len_b,
            asked,
            longest_src,
            self.model.name or type(self.model).__name__,
            cap,
            cap,
        )

    def text(self, hyp: Hypothesis) -> str:
        """One hypothesis as one line of text."""
        return self.detokenize([hyp])[0]

    def detokenize(self, hyps: Sequence[Hypothesis | None]) -> list[str]:
        """Text of each hypothesis on one line ("" for None): :func:`detokenize_lines`."""
        return detokenize_lines(self.tokenizer, [h.tokens if h is not None else None for h in hyps])

    def translate(
        self, sentences: Sequence[str], first_line: int = 1, **overrides: Any
    ) -> list[str]:
        """One translation per sentence, in order; blank lines give "" without the model."""
        return self.detokenize(self.hypotheses(sentences, first_line, **overrides))


CheckpointSpec = str | Path | Sequence[str | Path]
"""``ckpt=``: a checkpoint file or run directory, or a list of them (an ensemble)."""


def checkpoint_list(ckpt: CheckpointSpec, ensemble: int = 1) -> list[Path]:
    """The checkpoints (files or run directories) that ``ckpt`` and ``ensemble`` name.

    ``ckpt=[A,B,C]`` (a list; or a string ``"A,B,C"`` that is not itself a path) names an
    ensemble's members; ``ckpt=RUN ensemble=k`` the k best of one run (its best.json,
    :func:`~attnmt.checkpoint.best_checkpoints`); ``ensemble=1`` with one path is the
    single model. ConfigError for a combination of both, an empty list or ``ensemble < 1``.
    """
    if isinstance(ensemble, bool) or not isinstance(ensemble, int) or ensemble < 1:
        raise ConfigError(f"ensemble={ensemble!r} must be an integer >= 1 (1: one model)")
    if isinstance(ckpt, str | Path):
        text = str(ckpt)
        named = [text] if "," not in text or Path(text).exists() else text.split(",")
    else:
        named = [str(p) for p in ckpt]
    paths = [Path(p.strip()) for p in named if str(p).strip()]
    if not paths:
        raise ConfigError(f"ckpt={ckpt!r} names no checkpoint")
    if ensemble > 1:
        if len(paths) > 1:
            raise ConfigError(
                f"ckpt names {len(paths)} checkpoints and ensemble={ensemble}: give either "
                "ckpt=[A,B,...] (those models) or ckpt=RUN ensemble=k (a run's k best)"
            )
        return best_checkpoints(paths[0], ensemble)
    if len(set(paths)) < len(paths):
        log.warning("ckpt lists a checkpoint more than once: %s", ", ".join(map(str, paths)))
    return paths


@dataclass
class LoadedModel:
    """One checkpoint's model (eval mode, on its device), tokenizer and run config."""

    checkpoint: Path
    model: Seq2Seq
    tokenizer: Tokenizer
    config: dict[str, Any]


def load_model(path: str | Path, device: torch.device) -> LoadedModel:
    """A checkpoint file or run directory (its best checkpoint, else last; an unreadable one
    is skipped with a warning for the next, see ``load_resolved``) as a model on ``device``."""
    ckpt, loaded = load_resolved(path, map_location="cpu")
    files = loaded.tokenizer
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
    vocab = loaded.vocab
    if (vocab.src_size, vocab.tgt_size) != (tokenizer.src_vocab_size, tokenizer.tgt_vocab_size):
        raise CheckpointError(
            f"{ckpt}: vocabulary sizes {vocab.src_size}/{vocab.tgt_size} do not match "
            f"its tokenizer ({tokenizer.src_vocab_size}/{tokenizer.tgt_vocab_size})"
        )
    model_config = dict(loaded.model_config)
    model_config.setdefault("name", loaded.model_name)
    model = build_model(model_config, vocab.src_size, vocab.tgt_size, vocab.joint)
    try:
        model.load_state_dict(loaded.weights)
    except RuntimeError as err:
        raise CheckpointError(
            f"{ckpt}: weights do not fit model {loaded.model_name!r}: {str(err).splitlines()[0]}"
        ) from None
    model.to(device).eval()
    log.info("loaded %s (%s, step %s) on %s", ckpt, loaded.model_name, loaded.step, device)
    return LoadedModel(ckpt, model, tokenizer, dict(loaded.config))


def load_translator(
    path: CheckpointSpec,
    device: str = "auto",
    decode: DecodeConfig | None = None,
    ensemble: int = 1,
) -> Translator:
    """Translator for a checkpoint file or run directory (its best checkpoint, else last),
    or for an ensemble (:func:`checkpoint_list`: ``[A, B, ...]``, or a run's ``ensemble``
    best): the members decode as one :class:`~attnmt.decode.ensemble.Ensemble` and must
    share one tokenizer (ConfigError naming the checkpoints otherwise). The translator's
    ``config`` and ``checkpoint_path`` are the first member's."""
    paths = checkpoint_list(path, ensemble)
    dev = resolve_device(device)
    loaded = [load_model(p, dev) for p in paths]
    first = loaded[0]
    if len(loaded) == 1:
        return Translator(
            first.model,
            first.tokenizer,
            dev,
            decode or DecodeConfig(),
            first.config,
            first.checkpoint,
        )
    checkpoints = [m.checkpoint for m in loaded]
    check_same_tokenizer([m.tokenizer for m in loaded], checkpoints)
    log.info("ensemble of %d models: %s", len(loaded), ", ".join(map(str, checkpoints)))
    return Translator(
        Ensemble([m.model for m in loaded]),
        first.tokenizer,
        dev,
        decode or DecodeConfig(),
        first.config,
        first.checkpoint,
        checkpoint_paths=tuple(checkpoints),
    )
