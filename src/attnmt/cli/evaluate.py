"""``python evaluate.py``: decode a split (or the user's files) and score it with sacrebleu.

Outputs go to a folder of their own,
``<run>/eval/<ckpt-stem>-<split or src file name>-beam<k>-<key>/`` (``ensemble<K>-<first
member's stem>-...`` for an ensemble, ``ckpt=[A,B]`` or ``ckpt=RUN ensemble=K``, in the
first member's run) (beside the checkpoint's
``checkpoints/`` folder; ``out_dir=`` chooses another). ``<key>`` is a short hash of
everything that changes the output (:func:`evaluation_key`): the checkpoint file (path,
size, modification time), every decode setting, the metrics, and the source and reference
lines themselves. So another file of the same name, another ``alpha`` or ``max_len_b``
gets a new folder and never replaces an earlier result; a folder that exists already holds
the same evaluation, and a re-run refreshes it with the same output. An ``out_dir=`` that
holds another evaluation's ``hyps.txt`` is refused. The folder is created and written
(``evaluation.json``: the settings and key) before decoding, so an unwritable location
fails at once:

* ``evaluation.json``      the key and the settings it was computed from
* ``hyps.txt``             one detokenised hypothesis per source line
* ``refs.txt``             the references (corpus splits only; for files, ``ref_file`` is named)
* ``scores.json``          ``{<tag>: {"metrics": {bleu: {...}, ...}, "hyp_file": ..., ...}}``
  (merged with earlier entries of the same folder); each entry also holds the run record's
  score fields (attnmt.run_record: ``beam``, ``bleu``, ``bleu_signature``, ``chrf``, ...)
* ``attention-<i>.png``    heatmaps of the first ``plot_attention`` sentences
* ``forced-alignments.txt`` with gold alignments (``gold_alignments=FILE``, or a split whose
  corpus has gold): the model's word links of each (source, reference) pair, Pharaoh
  ``i-j``, read from its cross-attention while teacher-forced on the reference
  (:mod:`attnmt.decode.forced_alignment`); scores.json gets ``aer``, ``aer_precision``,
  ``aer_recall``, ``align_*`` (the map and its reading), ``alignment`` (the counts) and
  ``aer_table`` (the AER of every layer, head and the mean over layers:
  :mod:`attnmt.decode.alignment_table`)

Every path written is logged on stderr; stdout gets one line per metric, in sacrebleu's own
format with its signature, then the AER line and the table of every map (a model with more
than one) when alignments are scored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from omegaconf import DictConfig

from attnmt import EOS_ID
from attnmt.atomic import check_writable_dir, write_error, write_json
from attnmt.cli.common import check_ckpt, parse_settings
from attnmt.cli.eval_alignment import Gold, key_record, load_gold, score_alignments
from attnmt.data.textio import read_lines, write_lines
from attnmt.decode.config import DecodeConfig
from attnmt.decode.forced_alignment import (
    EVALUATE_EXTRACTION,
    EVALUATE_MAP,
    MapChoice,
    check_choice_setting,
    check_map_choice,
)
from attnmt.decode.metrics import METRICS, MetricResult, corpus_scores, score_fields
from attnmt.decode.plots import save_attention_png
from attnmt.decode.search import Hypothesis
from attnmt.decode.translator import Translator, load_translator
from attnmt.decode.word_alignment import Extraction
from attnmt.errors import CommandInterrupted, ConfigError, DataError, WriteError
from attnmt.run_dir import RunDir
from attnmt.run_record import VERSION as RECORD_VERSION

log = logging.getLogger(__name__)


@dataclass
class EvalSettings:
    """Schema of configs/evaluate.yaml (besides the decode group's keys, which sit at the
    top level there: beam, alpha, max_len_a, max_len_b, max_src_len, batch_tokens)."""

    # a run directory (its best checkpoint, else last.pt) or a .pt file; a list [A,B,...]
    # decodes those models as an ensemble (attnmt.decode.ensemble)
    ckpt: Any = "???"
    ensemble: int = 1  # k > 1: ckpt=RUN's k best checkpoints (best.json) as an ensemble
    split: str = "test"
    src_file: str | None = None
    ref_file: str | None = None
    device: str = "auto"
    plot_attention: int = 0
    out_dir: str | None = None
    metrics: list[str] = field(default_factory=lambda: ["bleu", "chrf", "ter"])
    # Pharaoh gold links (i-j sure, i?j possible), one line per pair; a split of a corpus
    # with gold (data=toy_align) is scored without it
    gold_alignments: str | None = None
    # the Transformer's cross-attention layer aligned with (an index, -1: the last; "all":
    # the mean over every layer and head); Any: an int or "all" (checked in check())
    align_layer: Any = EVALUATE_MAP.layer
    align_head: int | None = EVALUATE_MAP.head  # one of its heads; None: their mean
    # how the map becomes word links (attnmt.decode.word_alignment.Extraction):
    align_words: str = EVALUATE_EXTRACTION.words  # any | one: pieces to words
    align_eos: str = EVALUATE_EXTRACTION.eos  # ignore | unaligned: an argmax on source </s>
    align_step: str = EVALUATE_EXTRACTION.step  # predict | shift: the row aligning y_t

    @property
    def map_choice(self) -> MapChoice:
        """The map aligned with (``align_layer``, ``align_head``)."""
        return MapChoice(self.align_layer, self.align_head)

    @property
    def extraction(self) -> Extraction:
        """How the map becomes word links (``align_words``, ``align_eos``, ``align_step``)."""
        return Extraction(self.align_words, self.align_eos, self.align_step)

    def check(self, prefix: str = "") -> None:
        check_ckpt(self.ckpt, self.ensemble)
        if self.plot_attention < 0:
            raise ConfigError(f"plot_attention={self.plot_attention} must be >= 0")
        if (self.src_file is None) != (self.ref_file is None):
            raise ConfigError(
                "give both src_file=... and ref_file=..., or neither (then split=...)"
            )
        unknown = [m for m in self.metrics if m.lower() not in METRICS]
        if unknown or not self.metrics:
            raise ConfigError(
                f"metrics={self.metrics}: unknown metric {unknown[0] if unknown else '(none)'!r}"
                f"; choose from: {', '.join(sorted(METRICS))}"
            )
        check_choice_setting(self.align_layer, self.align_head)
        self.extraction.check()
        if self.out_dir is not None and Path(self.out_dir).is_file():
            raise ConfigError(
                f"out_dir={self.out_dir} is an existing file, not a folder; "
                "choose a folder for the evaluation's outputs"
            )


@dataclass
class EvalData:
    """The pairs evaluated: ``label`` names them in the folder name, ``pairs`` in messages;
    ``gold`` is ``gold_alignments=`` or the split's own gold file (None: no alignment)."""

    label: str
    pairs: str
    sources: list[str]
    refs: list[str]
    gold: Path | None


def read_eval_data(s: EvalSettings, translator: Translator) -> EvalData:
    """The pairs of src_file/ref_file or of the checkpoint's corpus split, with the gold."""
    gold = Path(s.gold_alignments) if s.gold_alignments is not None else None
    if s.src_file is not None and s.ref_file is not None:
        src, ref = read_lines(s.src_file, "src_file"), read_lines(s.ref_file, "ref_file")
        if len(src) != len(ref):
            raise DataError(
                f"src_file {s.src_file} has {len(src)} lines but ref_file {s.ref_file} has "
                f"{len(ref)}; they must be aligned, one sentence per line"
            )
        pairs = f"src_file {s.src_file} / ref_file {s.ref_file}"
        return EvalData(Path(s.src_file).name, pairs, src, ref, gold)
    from attnmt.data.corpora import prepare_corpus

    data_cfg = translator.config.get("data")
    if not isinstance(data_cfg, Mapping):
        raise ConfigError(
            f"{translator.checkpoint_path} stores no data config; pass src_file=... ref_file=..."
        )
    corpus = prepare_corpus(data_cfg, log)
    src, ref = corpus.read(s.split)
    if gold is None:
        gold = corpus.gold_alignments(s.split)
    pairs = f"split {s.split} of corpus {corpus.name!r} ({corpus.directory})"
    return EvalData(s.split, pairs, src, ref, gold)


def alignment_gold(s: EvalSettings, translator: Translator, data: EvalData) -> Gold | None:
    """The gold alignments to score (checked against the pairs, and the map asked for
    against the model), or None when there are none."""
    if data.gold is None:
        defaults = EvalSettings()
        if (s.map_choice, s.extraction) != (defaults.map_choice, defaults.extraction):
            log.warning(
                "align_layer/align_head/align_words/align_eos/align_step have no effect: %s "
                "has no gold alignments (gold_alignments=FILE gives them)",
                data.pairs,
            )
        return None
    given = "gold_alignments" if s.gold_alignments is not None else None
    gold = load_gold(data.gold, data.sources, data.refs, data.pairs, given)
    check_map_choice(translator.model, translator.device, s.align_layer, s.align_head)
    return gold


def _file_record(ckpt: Path) -> dict[str, Any]:
    stat = ckpt.stat()
    return {"path": str(ckpt.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def evaluation_key(
    ckpt: Path | Sequence[Path],
    s: EvalSettings,
    decode: DecodeConfig,
    sources: list[str],
    refs: list[str],
    alignment: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """(8 hex digits, the record they hash): everything that changes hyps.txt or
    scores.json, i.e. the checkpoint file (absolute path, size, mtime; an ensemble's
    files in order, under ``ensemble``), the decode settings, the metrics, the split or
    file names, the source and reference lines and, when alignments are scored, the
    gold file (path and lines) and the map aligned with (``alignment``)."""
    files = [ckpt] if isinstance(ckpt, Path) else list(ckpt)
    text = hashlib.sha256()
    for line in [*sources, "\0", *refs]:
        text.update(line.encode("utf-8", "surrogatepass") + b"\n")
    record: dict[str, Any] = {
        "checkpoint": _file_record(files[0]),
        **({"ensemble": [_file_record(f) for f in files]} if len(files) > 1 else {}),
        "decode": asdict(decode),
        "metrics": [m.lower() for m in s.metrics],
        "split": None if s.src_file else s.split,
        "src_file": str(Path(s.src_file).resolve()) if s.src_file else None,
        "ref_file": str(Path(s.ref_file).resolve()) if s.ref_file else None,
        "lines_sha256": text.hexdigest(),
        **({"alignment": alignment} if alignment is not None else {}),
    }
    digest = hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:8]
    return digest, record


def open_out_dir(out_dir: Path, key: str, record: dict[str, Any], chosen: bool) -> None:
    """Before decoding: make sure ``out_dir`` is writable (WriteError naming it) and holds no
    other evaluation (ConfigError), then write its ``evaluation.json``."""
    marker = out_dir / "evaluation.json"
    if (out_dir / "hyps.txt").exists():
        try:
            same = json.loads(marker.read_text(encoding="utf-8")).get("key") == key
        except (OSError, ValueError, AttributeError):
            same = False
        if not same:
            raise ConfigError(
                f"{'out_dir=' if chosen else ''}{out_dir} holds another evaluation's hyps.txt; "
                "choose another out_dir (nothing there was changed)"
            )
    where = "out_dir" if chosen else "the run directory; pass out_dir=DIR to write elsewhere"
    try:
        check_writable_dir(out_dir, where)
        write_json(marker, {"key": key, **record}, indent=2)
    except WriteError as err:
        raise WriteError(f"{err}; nothing was decoded") from None


def write_scores(path: Path, tag: str, entry: dict[str, Any]) -> None:
    """Merge ``{tag: entry}`` into the JSON file ``path`` (written atomically)."""
    scores: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            scores = loaded if isinstance(loaded, dict) else {}
        except (json.JSONDecodeError, UnicodeDecodeError):
            log.warning("%s is not valid JSON; overwriting it", path)
    scores[tag] = entry
    write_json(path, scores, indent=2)


def plot_hypotheses(
    translator: Translator,
    sources: list[str],
    hyps: list[Hypothesis | None],
    n: int,
    folder: Path,
    refs: list[str] | None = None,
) -> list[Path]:
    """Heatmaps (source pieces + </s> × produced pieces) of the first ``n`` non-blank lines;
    the title names the sentence and what its score is."""
    beam = translator.decode.beam
    what = "log-prob / length penalty" if beam > 1 else "log-prob"
    paths: list[Path] = []
    for i, hyp in enumerate(hyps):
        if len(paths) >= n:
            break
        if hyp is None:
            continue
        src_ids = [*translator.encode([sources[i]])[0], EOS_ID]
        tgt_ids = [*hyp.tokens, EOS_ID] if hyp.finished else list(hyp.tokens)
        tok = translator.tokenizer
        path = folder / f"attention-{i:04d}.png"
        title = f"line {i + 1}, beam {beam}: score {hyp.score:.2f} = {what}"
        caption = f"reference: {refs[i]}" if refs is not None else None
        labels = ("source", f"hypothesis (beam {beam})")
        pieces = tok.src_pieces(src_ids), tok.tgt_pieces(tgt_ids)
        paths.append(save_attention_png(hyp.attention, *pieces, path, title, labels, caption))
    return paths


def decoding_speed(hyps: list[Hypothesis | None], seconds: float) -> dict[str, float]:
    """Wall-clock decoding figures: seconds, sentences/s and output pieces/s (EOS not
    counted; blank lines count as sentences with no pieces)."""
    pieces = sum(len(h.tokens) for h in hyps if h is not None)
    per_sec = 1.0 / max(seconds, 1e-9)
    return {
        "decode_seconds": seconds,
        "sentences_per_sec": len(hyps) * per_sec,
        "pieces": float(pieces),
        "pieces_per_sec": pieces * per_sec,
    }


@dataclass
class Progress:
    """How far an evaluation got: what a Ctrl-C leaves behind."""

    out_dir: Path | None = None  # set once the folder holds evaluation.json
    stage: str = "before anything was written"
    scores: Path | None = None  # set once scores.json is written

    def interrupted(self) -> str:
        """The line for a Ctrl-C now."""
        if self.scores is not None:
            return f"interrupted (Ctrl-C): the scores are in {self.scores}"
        if self.out_dir is None:
            return f"interrupted (Ctrl-C) {self.stage}"
        return (
            f"interrupted (Ctrl-C) {self.stage}: {self.out_dir} holds no scores yet; the same "
            "command again evaluates into it"
        )


def text_stdout(stdout: TextIO | None) -> TextIO:
    """``stdout``, else ``sys.stdout``; ConfigError when that is closed (``>&-``)."""
    out = stdout or sys.stdout
    if out is None:
        raise ConfigError(
            "stdout is closed; evaluate.py prints its scores there: give it somewhere to "
            "write, e.g. > scores.txt (nothing was decoded)"
        )
    return out


def print_scores(lines: Sequence[str], out: TextIO, scores_file: Path) -> None:
    """The score ``lines`` (one per metric, then AER's) on ``out``; a write error (a full
    disk) is one WriteError line."""
    try:
        for line in lines:
            print(line, file=out)
        out.flush()
    except BrokenPipeError:
        raise
    except OSError as err:
        raise write_error("stdout", err, f"the scores are in {scores_file}") from None


def run(
    cfg: DictConfig | Mapping[str, Any], stdout: TextIO | None = None
) -> dict[str, MetricResult]:
    """Evaluate as configs/evaluate.yaml describes; print one line per metric to stdout.
    Ctrl-C ends it with :class:`CommandInterrupted` saying what was written."""
    out = text_stdout(stdout)
    progress = Progress()
    try:
        return _run(cfg, out, progress)
    except KeyboardInterrupt:
        raise CommandInterrupted(progress.interrupted()) from None


def _run(
    cfg: DictConfig | Mapping[str, Any], out: TextIO, progress: Progress
) -> dict[str, MetricResult]:
    """:func:`run`, recording in ``progress`` how far it got."""
    s, decode = parse_settings(cfg, EvalSettings)
    translator = load_translator(s.ckpt, s.device, decode, s.ensemble)
    data = read_eval_data(s, translator)
    label, sources, refs = data.label, data.sources, data.refs
    gold = alignment_gold(s, translator, data)
    ckpt = translator.checkpoint_path
    assert ckpt is not None
    members = translator.checkpoint_paths or (ckpt,)
    aligning = key_record(gold, s.map_choice, s.extraction) if gold is not None else None
    key, record = evaluation_key(list(members), s, decode, sources, refs, aligning)
    name = ckpt.stem if len(members) == 1 else f"ensemble{len(members)}-{ckpt.stem}"
    tag = f"{name}-{label}-beam{decode.beam}-{key}"
    run = RunDir.of_checkpoint(ckpt) or RunDir(ckpt.parent)
    out_dir = Path(s.out_dir) if s.out_dir else run.eval / tag
    open_out_dir(out_dir, key, record, chosen=bool(s.out_dir))
    progress.out_dir = out_dir
    aligned = None
    if gold is not None:
        progress.stage = "while aligning the references"
        log.info(
            "aligning %d references against %s (cross-attention %s; %s)",
            len(refs),
            gold.path,
            s.map_choice.describe(),
            s.extraction.describe(),
        )
        aligned = score_alignments(
            translator, sources, refs, gold, s.map_choice, s.extraction, out_dir
        )
    progress.stage = "while decoding"
    log.info("decoding %d sentences of %s with beam %d", len(sources), label, decode.beam)
    start = time.perf_counter()
    hyps = translator.hypotheses(sources)
    speed = decoding_speed(hyps, time.perf_counter() - start)
    log.info(
        "decoded %d sentences in %.1f s: %.1f sentences/s, %.0f output pieces/s",
        len(sources),
        speed["decode_seconds"],
        speed["sentences_per_sec"],
        speed["pieces_per_sec"],
    )
    progress.stage = "while writing the hypotheses"
    texts = translator.detokenize(hyps)
    scores = corpus_scores(texts, refs, s.metrics)
    hyp_path = out_dir / "hyps.txt"
    write_lines(hyp_path, texts)
    written = [hyp_path]
    if s.ref_file is not None:
        ref_path = Path(s.ref_file)
    else:
        ref_path = out_dir / "refs.txt"
        write_lines(ref_path, refs)
        written.append(ref_path)
    plots = plot_hypotheses(translator, sources, hyps, s.plot_attention, out_dir, refs)
    entry = {
        "checkpoint": str(ckpt),
        **({"ensemble": [str(p) for p in members]} if len(members) > 1 else {}),
        "hyp_file": str(hyp_path),
        "ref_file": str(ref_path),
        "sentences": len(sources),
        "speed": speed,
        "settings": {
            **{k: v for k, v in asdict(s).items() if k not in ("ckpt", "ensemble", "out_dir")},
            **asdict(decode),
        },
        "metrics": {k: r.to_dict() for k, r in scores.items()},
        "record_version": RECORD_VERSION,
        "beam": decode.beam,
        **score_fields(scores),
        **(aligned.fields() if aligned is not None else {}),
    }
    if aligned is not None:
        written.append(aligned.written)
    write_scores(out_dir / "scores.json", tag, entry)
    progress.scores = out_dir / "scores.json"
    for path in [out_dir / "evaluation.json", *written, out_dir / "scores.json", *plots]:
        log.info("wrote %s", path)
    lines = [r.text for r in scores.values()] + (aligned.lines() if aligned else [])
    print_scores(lines, out, out_dir / "scores.json")
    return scores
