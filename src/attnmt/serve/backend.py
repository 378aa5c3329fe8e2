"""A model the server serves: decoding through the one Translator (or a CTranslate2 export),
and each line's JSON result (translations, scores, pieces, attention, alignments, the
reference's forced alignment); what ``GET /info`` says of it is in
:mod:`attnmt.serve.info`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from attnmt import UNK_ID
from attnmt.data.textio import normalize_space
from attnmt.decode.attention_maps import AttentionMaps, attention_maps
from attnmt.decode.config import DecodeConfig
from attnmt.decode.ct2 import CT2Translator, is_export_dir, load_ct2_translator
from attnmt.decode.search import Hypothesis, StopCheck, length_cap, max_length
from attnmt.decode.translator import Translator, detokenize_lines, load_translator
from attnmt.decode.word_alignment import pharaoh, word_alignment
from attnmt.errors import ConfigError
from attnmt.serve.info import attnmt_info, ct2_info
from attnmt.serve.jsonio import attention_json
from attnmt.serve.references import Reference, reference_json, word_warnings

#: padded attention values teacher-forced at once (float32: 8 MB), so that alignments of
#: long lines never hold every map of a request in memory together
MAP_VALUES_PER_CHUNK = 2_000_000
#: the rank of a line's forced reference in the (line, rank) keys of the maps computed
REF = -1

Key = tuple[int, int]  # (line, rank): rank j of the line's translations, or REF
Target = tuple[list[int], bool]  # target piece ids and whether </s> ends them


@dataclass(frozen=True)
class Options:
    """One request's decoding options (already checked)."""

    beam: int
    alpha: float
    n_best: int = 1
    attention: bool = False
    alignments: bool = False

    def batch_key(self) -> tuple[int, float]:
        """Requests with equal keys decode as one batch (``n_best`` only cuts the list)."""
        return self.beam, self.alpha


@dataclass
class ServedModel:
    """A loaded model with what ``GET /info`` says about it."""

    label: str
    translator: Translator | CT2Translator
    info: dict[str, Any] = field(default_factory=dict)
    _counts: tuple[int, int, int] | None = field(default=None, init=False, repr=False)

    @property
    def has_attention(self) -> bool:
        return isinstance(self.translator, Translator)

    @property
    def decode(self) -> DecodeConfig:
        return self.translator.decode

    def source_limit(self) -> int:
        """The most source pieces decoded per line (longer lines are cut)."""
        if isinstance(self.translator, CT2Translator):
            return min(self.decode.max_src_len, self.translator.max_positions - 1)
        return self.decode.max_src_len

    def length_limit(self, pieces: int) -> int:
        """The most target pieces (decoder steps) a translation of a source of ``pieces``
        pieces (already cut) may take: floor(a·(pieces + 1) + b), within the model's cap
        (attnmt: ``max_target_length``; CTranslate2: the export's positions)."""
        if isinstance(self.translator, CT2Translator):
            return self.translator.max_length(pieces, self.decode)
        limit = max_length(pieces + 1, self.decode.max_len_a, self.decode.max_len_b)
        cap = length_cap(self.translator.model)
        return limit if cap is None else min(limit, cap)

    def search(
        self, lines: Sequence[str], options: Options, n: int, should_stop: StopCheck | None = None
    ) -> list[list[Hypothesis]] | list[list[list[int]]]:
        """The ``n`` best per line (attnmt: Hypothesis lists; CTranslate2: one piece-id
        list per line), decoded as the Translator batches them. ``should_stop`` is checked
        between decoder steps (attnmt) or between batches (CTranslate2, which cannot stop
        inside one); True: KeyboardInterrupt."""
        beam, alpha = options.beam, options.alpha
        self.translator.should_stop = should_stop
        try:
            if isinstance(self.translator, Translator):
                return self.translator.n_best(lines, n, beam=beam, alpha=alpha)
            found = self.translator.piece_ids(lines, beam=beam, alpha=alpha)
            return [[ids] if ids is not None else [] for ids in found]
        finally:
            self.translator.should_stop = None

    def results(
        self,
        lines: Sequence[str],
        found: Sequence[Sequence[Any]],
        options: Options,
        max_values: int | None = None,
        should_stop: StopCheck | None = None,
        references: Sequence[Reference | None] | None = None,
    ) -> list[dict[str, Any]]:
        """The JSON result of each line from its ``found`` hypotheses (maps pre-encoded as
        :class:`~attnmt.serve.jsonio.RawJSON`). With ``options.attention`` the maps of at
        most ``max_values`` attention values are returned, best translations of every line
        first (:meth:`grant_maps`); the lines whose maps were left out say so in their
        ``warnings``. With ``references`` (one per line, None for none) every line gets a
        ``reference``: its reference forced through the model, the links, the gold and
        their scores (:func:`~attnmt.serve.references.reference_json`). ``should_stop`` is
        checked between teacher-forced chunks (True: raise KeyboardInterrupt, as the search
        does)."""
        tok = self.translator.tokenizer
        limit = self.source_limit()
        src_ids = tok.encode_src([normalize_space(s) for s in lines])
        sources = [ids[:limit] for ids in src_ids]
        kept = [list(hyps)[: options.n_best] for hyps in found]
        targets = self._targets(kept, references)
        granted: set[Key] = set()
        if options.attention and self.has_attention:
            granted = self.grant_maps(sources, targets, max_values)
        extras = self._map_outputs(
            sources, targets, granted, options.alignments, references, should_stop
        )
        out = []
        for i, (line, ids) in enumerate(zip(lines, src_ids)):
            warnings = []
            if len(ids) > limit:
                warnings.append(
                    f"line {i + 1}: {len(ids)} source pieces; translated from its first {limit} "
                    f"(decode.max_src_len={self.decode.max_src_len})"
                )
            left_out = [j + 1 for j in range(len(kept[i])) if (i, j) not in granted]
            if options.attention and self.has_attention and left_out:
                warnings.append(
                    f"line {i + 1}: no attention maps for translation {_ranks(left_out)}: the "
                    f"response's maps would exceed max_attention_values={max_values}; ask "
                    "for fewer lines or a smaller n_best"
                )
            translations = [
                self._translation(hyp, extras.get((i, j), {}), options)
                for j, hyp in enumerate(kept[i])
            ]
            entry: dict[str, Any] = {
                "source": line,
                "source_pieces": [*tok.src_pieces(ids[:limit]), "</s>"],
                "translations": translations,
                "warnings": warnings,
            }
            if references is not None:
                ref = extras.get((i, REF))
                if ref is not None:
                    warnings += _reference_notes(
                        i, line, ref, len(ids) > limit, options, max_values
                    )
                entry["reference"] = ref
            out.append(entry)
        return out

    def map_values(self, target: int, source: int) -> int:
        """Attention values in the maps of one translation of ``target`` rows (pieces and
        ``</s>`` when finished) for ``source`` columns (pieces and ``</s>``)."""
        cross, enc, dec = self._map_counts()
        return cross * target * source + enc * source * source + dec * target * target

    def grant_maps(
        self, sources: list[list[int]], targets: dict[Key, Target], max_values: int | None
    ) -> set[Key]:
        """The (line, rank) keys whose maps fit in ``max_values`` values, taken in the order
        every line's best translation, then every line's reference, then every second best,
        ...; a key that does not fit is skipped and smaller ones after it still get theirs
        (None: no limit)."""
        order = sorted(targets, key=lambda key: (max(key[1], 0), key[1] == REF, key[0]))
        granted, used = set(), 0
        for i, j in order:
            cost = self.map_values(_rows(targets[i, j]), len(sources[i]) + 1)
            if max_values is None or used + cost <= max_values:
                granted.add((i, j))
                used += cost
        return granted

    def _targets(
        self, kept: list[list[Any]], references: Sequence[Reference | None] | None
    ) -> dict[Key, Target]:
        """The target pieces whose maps may be computed: each kept hypothesis (attnmt only)
        and each line's reference (encoded as evaluate.py encodes it, ending with ``</s>``)."""
        targets: dict[Key, Target] = {
            (i, j): (hyp.tokens, hyp.finished)
            for i, hyps in enumerate(kept)
            for j, hyp in enumerate(hyps)
            if isinstance(hyp, Hypothesis)
        }
        if references is not None and self.has_attention:
            given = [(i, ref.text) for i, ref in enumerate(references) if ref is not None]
            ids = self.translator.tokenizer.encode_tgt([text for _, text in given])
            targets.update(((i, REF), (x, True)) for (i, _), x in zip(given, ids))
        return targets

    def _map_counts(self) -> tuple[int, int, int]:
        """How many [rows, columns] matrices (layers x heads) the cross, encoder-self and
        decoder-self maps hold, read once from the maps of a one-piece pair."""
        if self._counts is None:
            assert isinstance(self.translator, Translator)
            t = self.translator
            (probe,) = attention_maps(
                t.model, t.tokenizer, t.device, [[UNK_ID]], [([UNK_ID], True)]
            )
            cross, enc, dec = (
                0 if m is None else m.shape[0] * m.shape[1]
                for m in (probe.cross, probe.encoder_self, probe.decoder_self)
            )
            self._counts = (cross, enc, dec)
        return self._counts

    def _map_outputs(
        self,
        sources: list[list[int]],
        targets: dict[Key, Target],
        granted: set[Key],
        alignments: bool,
        references: Sequence[Reference | None] | None,
        should_stop: StopCheck | None,
    ) -> dict[Key, dict[str, Any]]:
        """Per (line, rank): its ``alignment`` (with ``alignments``) and, for the granted
        keys, its ``attention``; per (line, REF) the line's ``reference``. Teacher-forced in
        chunks of at most MAP_VALUES_PER_CHUNK padded values; each chunk's maps are encoded
        and dropped before the next."""
        if not isinstance(self.translator, Translator):
            return {}
        keys = [k for k in targets if alignments or k in granted or k[1] == REF]
        out: dict[Key, dict[str, Any]] = {}
        for part in self._chunks(keys, sources, targets):
            if should_stop is not None and should_stop():
                raise KeyboardInterrupt
            got = attention_maps(
                self.translator.model,
                self.translator.tokenizer,
                self.translator.device,
                [sources[i] for i, _ in part],
                [targets[key] for key in part],
            )
            for (i, j), maps in zip(part, got):
                if j == REF:
                    ref = references[i] if references is not None else None
                    assert ref is not None  # REF keys are those of the given references
                    out[i, j] = reference_json(maps, ref, (i, j) in granted)
                else:
                    out[i, j] = _map_output(maps, alignments, (i, j) in granted)
        return out

    def _chunks(
        self, keys: list[Key], sources: list[list[int]], targets: dict[Key, Target]
    ) -> list[list[Key]]:
        """``keys`` cut into runs whose padded maps hold at most MAP_VALUES_PER_CHUNK values
        (a pair over it alone)."""
        chunks: list[list[Key]] = []
        part: list[Key] = []
        rows = cols = 0
        for key in keys:
            size, width = _rows(targets[key]), len(sources[key[0]]) + 1
            r, c = max(rows, size), max(cols, width)
            if part and (len(part) + 1) * self.map_values(r, c) > MAP_VALUES_PER_CHUNK:
                chunks.append(part)
                part, r, c = [], size, width
            part.append(key)
            rows, cols = r, c
        if part:
            chunks.append(part)
        return chunks

    def _translation(
        self, hyp: Hypothesis | list[int], extra: dict[str, Any], options: Options
    ) -> dict[str, Any]:
        tok = self.translator.tokenizer
        if not isinstance(hyp, Hypothesis):  # CTranslate2: piece ids only
            return {
                "text": detokenize_lines(tok, [hyp])[0],
                "score": None,
                "target_pieces": tok.tgt_pieces(hyp),
                "finished": None,
            }
        assert isinstance(self.translator, Translator)
        pieces = tok.tgt_pieces(hyp.tokens) + (["</s>"] if hyp.finished else [])
        out: dict[str, Any] = {
            "text": self.translator.text(hyp),
            "score": hyp.score if math.isfinite(hyp.score) else None,
            "target_pieces": pieces,
            "finished": hyp.finished,
        }
        if options.alignments:
            out["alignment"] = extra.get("alignment")
        if options.attention:
            out["attention"] = extra.get("attention")
        return out


def _rows(target: Target) -> int:
    """A target's map rows: its pieces and ``</s>`` when it ended with it."""
    tokens, finished = target
    return len(tokens) + (1 if finished else 0)


def _reference_notes(
    i: int,
    line: str,
    ref: dict[str, Any],
    source_cut: bool,
    options: Options,
    max_values: int | None,
) -> list[str]:
    """Line ``i``'s warnings about its reference (word counts that differ,
    :func:`~attnmt.serve.references.word_warnings`; maps left out); with
    ``options.attention`` a reference without maps gets ``"attention": null``."""
    warnings = word_warnings(i, line, ref, source_cut)
    if options.attention and "attention" not in ref:
        ref["attention"] = None
        warnings.append(
            f"line {i + 1}: no attention maps for the reference: the response's maps would "
            f"exceed max_attention_values={max_values}; ask for fewer lines or a smaller n_best"
        )
    return warnings


def _ranks(ranks: list[int]) -> str:
    """``[2, 3, 4, 6]`` -> ``2-4, 6``."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def _map_output(maps: AttentionMaps, alignments: bool, attention: bool) -> dict[str, Any]:
    """One translation's alignment and encoded maps, as the API returns them."""
    out: dict[str, Any] = {}
    if alignments:
        weights = maps.mean_last_cross()
        out["alignment"] = pharaoh(word_alignment(weights, maps.source_pieces, maps.target_pieces))
    if attention:
        out["attention"] = attention_json(maps)
    return out


def load_model(
    label: str, path: str, backend: str, device: str, decode: DecodeConfig
) -> ServedModel:
    """Load ``path`` (a run, a .pt file or, with backend auto/ctranslate2, an export)."""
    use_ct2 = backend == "ctranslate2" or (backend == "auto" and is_export_dir(path))
    if use_ct2:
        ct2 = load_ct2_translator(path, device, decode)
        return ServedModel(label, ct2, ct2_info(ct2, path))
    if is_export_dir(path):
        raise ConfigError(
            f"{label}={path} is a CTranslate2 export; use backend=auto or backend=ctranslate2"
        )
    translator = load_translator(path, device, decode)
    return ServedModel(label, translator, attnmt_info(translator, path))
