"""Does each attention mechanism learn an alignment? AER on ``data=toy_align`` (issue 33).

    python -m experiments.alignment_aer table            # docs/alignment.md from the records
    python -m experiments.alignment_aer reach|choices|offsets RUN...   # the analyses below

The runs are studies (configs/study/alignment_*.yaml: every Luong scorer in every mode,
local-m at D = 10, Bahdanau's additive in every mode, the Transformer's cross-attention, two
longer runs), trained by experiments/sweep.py at :data:`SMALL` sizes (a smaller RNN than the
presets: the task has 90 word types) for :data:`UPDATES` updates, then decoded by ``python
evaluate.py ckpt=RUN split=test align_layer=-1 align_head=null align_words=any
align_eos=ignore``, its scores.json kept in the record (docs/alignment.md, "How the table is
made"). :func:`read_runs` reads every record (``results/alignment_*/<run>/``) as an
:class:`AlignmentRun`.

``table`` writes docs/alignment.md's generated part: each mechanism's figures and its seeds'
AER, which mechanisms miss :data:`TARGET` in which seed, and beside them two alignments no
network makes, computed from toy_align itself (experiments/alignment_baselines.py: the
diagonal and a Dice co-occurrence count); every sentence follows from the records, and the
page's hand-written end (from :data:`HAND_WRITTEN` on) is kept as it is. ``reach``,
``choices`` and ``offsets`` read trained runs in ``outputs/`` and keep their analysis
outputs in ``results/alignment/`` (these are not runs). The example sentence's maps:
experiments.alignment_maps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from attnmt.atomic import write_json, write_text
from attnmt.errors import DataError
from attnmt.machine import Machine
from attnmt.run_record import RecordError, read_record, read_summary, source_commit
from experiments.alignment_baselines import (
    ScoredBaseline,
    aer_with_interval,
    diagonal_links,
    dice_links,
)
from experiments.comparison_stats import mean_std

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
"""The records: ``RESULTS/alignment_*/<run>/`` (one folder per study, one per run)."""
RECORDS = RESULTS / "alignment"
"""The analysis outputs (maps, choices, reach, offsets): not runs."""
DOC = ROOT / "docs" / "alignment.md"
UPDATES = 1200
"""The updates of the table's runs (configs/study/alignment_*.yaml, apart from the long)."""
SMALL = ("model.emb_dim=64", "model.hidden_size=128", "model.enc_layers=1", "model.dropout=0.1")
"""The RNN size of this table (its studies' overrides): 1 bi-GRU layer (64 units a
direction), 128-unit decoder."""
"""How evaluate.py reads the attention for these records: the last layer's mean of heads,
each piece's argmax with ``</s>`` left out (its default before issue 65), so that new
records compare with the kept ones."""
TRANSFORMER = "transformer_tiny cross (last layer, mean of heads)"
SCORES = ("dot", "scaled_dot", "general", "additive", "concat", "cosine", "location")
MODES = ("global", "local_m", "local_p", "hard")
MECHANISMS = (
    *[f"luong {s} global" for s in SCORES],
    *[f"luong general {mode}" for mode in MODES[1:]],
    "luong general local_m window10",
    "bahdanau additive global",
    TRANSFORMER,
)
"""The table's rows (:func:`mechanism_of` names a run's)."""
GRID = (
    *[f"luong {s} {m}" for s in SCORES for m in MODES],
    *[f"bahdanau additive {m}" for m in MODES],
    TRANSFORMER,
)
"""The attention table's cells (experiments/results_plan.py) on this task, for its AER
column: every Luong scorer in every mode, Bahdanau's additive in every mode, the
Transformer (configs/study/alignment_luong.yaml, _bahdanau, _transformer)."""


def grid_name(model: str, score: str, mode: str) -> str:
    """The :data:`GRID` name of an attention-table cell (model, score, mode labels)."""
    if model.startswith("transformer"):
        return TRANSFORMER
    return f"{model.removeprefix('rnn_')} {score} {mode}"


def stem(name: str, seed: int, updates: int = UPDATES) -> str:
    """``luong-general-global-seed1``; ``...-seed1-u3000`` for a run of other length (the
    old records' names, which the analysis outputs keep, and the records' table order)."""
    suffix = "" if updates == UPDATES else f"-u{updates}"
    return f"{name.split(' (')[0].replace(' ', '-')}-seed{seed}{suffix}"


def mechanism_of(overrides: dict[str, str]) -> str:
    """The :data:`GRID` (or :data:`MECHANISMS`) name of a run's train.py overrides
    (``{"model": "rnn_luong", "model.attention.mode": "local_m", ...}``)."""
    model = overrides.get("model", "")
    if model.startswith("transformer"):
        return TRANSFORMER
    mode = overrides.get("model.attention.mode", "global")
    if model == "rnn_bahdanau":
        return f"bahdanau additive {mode}"
    name = f"luong {overrides.get('model.attention.score', 'general')} {mode}"
    return name + (f" window{w}" if (w := overrides.get("model.attention.window")) else "")


@dataclass(frozen=True)
class AlignmentRun:
    """One recorded run: its mechanism, seed and updates (summary.json), the last
    validation's cross-attention entropy (metrics.jsonl), its test scores (evaluate.py's
    scores.json under eval/), the machine and commit it ran on."""

    folder: Path
    mechanism: str
    seed: int
    updates: int
    aer: float
    precision: float
    recall: float
    bleu: float
    entropy: float | None
    machine: Machine | None
    commit: str
    wall_minutes: float | None
    """Minutes from training's start to the test's end (summary.json's ``wall_minutes``,
    which the records migrated from the old runner keep; None for others)."""

    @property
    def stem(self) -> str:
        return stem(self.mechanism, self.seed, self.updates)


def read_run(folder: Path) -> AlignmentRun:
    """The record in ``folder``; DataError naming the file when a part is missing."""
    try:
        rec = read_record(folder)
        overrides = yaml.safe_load((folder / ".hydra" / "overrides.yaml").read_text())
        tests = sorted(folder.glob("eval/*/scores.json"))
        entry = next(iter(json.loads(tests[-1].read_text(encoding="utf-8")).values()))
        summary = rec.summary
        if summary is None or summary.step is None or summary.seed is None:
            raise DataError(f"{folder}/summary.json: no step or seed")
        last = rec.valid[-1] if rec.valid else {}
        return AlignmentRun(
            folder=folder,
            mechanism=mechanism_of(dict(o.split("=", 1) for o in overrides)),
            seed=summary.seed,
            updates=summary.step,
            aer=float(entry["aer"]),
            precision=float(entry["aer_precision"]),
            recall=float(entry["aer_recall"]),
            bleu=float(entry["bleu"]),
            entropy=(last.get("attention_entropy_norm") or {}).get("cross"),
            machine=summary.machine,
            commit=summary.commit or "",
            wall_minutes=json.loads((folder / "summary.json").read_text()).get("wall_minutes"),
        )
    except (OSError, IndexError, KeyError, ValueError, RecordError) as err:
        raise DataError(
            f"{folder}: not an alignment record ({type(err).__name__}: {err}); it needs "
            "summary.json, metrics.jsonl, .hydra/overrides.yaml and eval/*/scores.json"
        ) from None


def read_runs(results: Path = RESULTS) -> list[AlignmentRun]:
    """Every finished run under ``results``/alignment_*/ with a test evaluation, in the old
    records' name order."""
    folders = sorted(results.glob("alignment_*/*/eval/*/scores.json"))
    runs = {f.parents[2] for f in folders}
    return sorted((read_run(r) for r in runs), key=lambda r: r.stem)


REACH = RECORDS / "local_m_reach.json"


def gold_test_split(run: Path) -> tuple[Any, list[str], list[str], list[Any]]:
    """(translator of ``run``'s best checkpoint, test sources, references, gold
    alignments) of the corpus the run trained on."""
    from attnmt.data.corpora import prepare_corpus
    from attnmt.decode.alignment_error import read_gold
    from attnmt.decode.translator import load_translator

    translator = load_translator(run, device="cpu")
    corpus = prepare_corpus(translator.config["data"])
    sources, refs = corpus.read("test")
    gold_file = corpus.gold_alignments("test")
    if gold_file is None:
        raise ValueError(f"{run}: its corpus has no gold alignments of the test split")
    return translator, sources, refs, read_gold(gold_file)


def window_reach(run: Path, windows: tuple[int, ...] = (5, 10)) -> dict[str, Any]:
    """How much of the gold local-m's window can see: per half-width D, the share of test
    target pieces (those with a sure gold link) none of whose gold source pieces lies in
    |j - p_t| <= D around p_t = min(t, S - 1), the centre LocalMonotonic uses; ``run``
    gives the toy_align tokenizer."""
    from attnmt.decode.word_alignment import word_index

    translator, sources, refs, golds = gold_test_split(run)
    tok = translator.tokenizer
    pieces, blind = 0, dict.fromkeys(windows, 0)
    for src_ids, tgt_ids, gold in zip(tok.encode_src(sources), tok.encode_tgt(refs), golds):
        src_words = word_index(tok.src_pieces(src_ids))
        last = len(src_ids)  # S - 1: the source </s> is position len(src_ids)
        for t, word in enumerate(word_index(tok.tgt_pieces(tgt_ids))):
            linked = {i for i, j in gold.sure if j == word}
            if not linked:
                continue
            pieces += 1
            where = [k for k, w in enumerate(src_words) if w in linked]
            for d in windows:
                blind[d] += all(abs(k - min(t, last)) > d for k in where)
    return {
        "pieces": pieces,
        "outside": {str(d): blind[d] / pieces for d in windows},
        "run": run.name,
        "commit": source_commit(ROOT),
    }


def map_choices(run: Path) -> dict[str, Any]:
    """Test AER of every map a Transformer run offers: each decoder layer's mean of heads
    and each head, the mean over all layers and heads, and each of these read one row
    later (Shift-Att, Chen et al. 2020: the step whose input is target piece t aligns t)."""
    import torch

    from attnmt.decode.alignment_error import alignment_error
    from attnmt.decode.attention_maps import attention_maps
    from attnmt.decode.word_alignment import word_alignment

    translator, sources, refs, golds = gold_test_split(run)
    tok = translator.tokenizer
    src_ids, tgt_ids = tok.encode_src(sources), tok.encode_tgt(refs)
    maps = []
    for k in range(0, len(sources), 64):
        pairs = [(t, True) for t in tgt_ids[k : k + 64]]
        maps += attention_maps(translator.model, tok, translator.device, src_ids[k : k + 64], pairs)
    layers, heads = maps[0].cross.shape[:2]
    choices: dict[str, Any] = {"all layers, mean": lambda c: c.mean(dim=(0, 1))}
    for layer in range(layers):
        choices[f"layer {layer}, mean"] = lambda c, l=layer: c[l].mean(dim=0)
        for head in range(heads):
            choices[f"layer {layer}, head {head}"] = lambda c, l=layer, h=head: c[l, h]
    aer: dict[str, float | None] = {}
    for shift in (False, True):
        for name, pick in choices.items():
            links = []
            for m in maps:
                w = pick(m.cross)
                if shift:  # row t+1 for piece t; the last row stays
                    w = torch.cat([w[1:], w[-1:]], dim=0)
                links.append(word_alignment(w, m.source_pieces, m.target_pieces))
            aer[f"{name}{', shifted' if shift else ''}"] = alignment_error(links, golds).aer
    summary = read_summary(run)
    return {
        "run": run.name,
        "updates": summary.step if summary else None,
        "aer": aer,
        "commit": source_commit(ROOT),
    }


def offset_recall(run: Path) -> dict[str, dict[str, float | int]]:
    """Recall of the gold sure links of the test split by word offset d = j - i (target
    minus source index; |d| >= 3 pooled), from the run's newest ``evaluate.py split=test``
    forced alignments: where in the sentence a mechanism loses links."""
    from attnmt.data.gold import parse_links

    found = sorted(run.glob("eval/*-test-*/forced-alignments.txt"))
    if not found:
        raise FileNotFoundError(f"{run}: no evaluate.py split=test forced alignments")
    golds = gold_test_split(run)[3]
    hyps = [parse_links(line).sure for line in found[-1].read_text().splitlines()]
    counts: dict[str, list[int]] = {}
    for hyp, gold in zip(hyps, golds):
        for i, j in gold.sure:
            d = j - i
            key = "<=-3" if d <= -3 else (">=3" if d >= 3 else str(d))
            hit = counts.setdefault(key, [0, 0])
            hit[0] += (i, j) in hyp
            hit[1] += 1
    return {k: {"recall": a / b, "links": b} for k, (a, b) in sorted(counts.items())}


CHOICE_COLUMNS = (
    "layer 0, mean",
    "layer 1, mean",
    "all layers, mean",
    "layer 1, head 0",
    "layer 1, head 1",
    "layer 1, head 2",
    "layer 1, head 3",
    "layer 1, mean, shifted",
    "all layers, mean, shifted",
)


def _num(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _row(name: str, mine: list[AlignmentRun]) -> str:
    """One table row: the mechanism, its seeds, mean ± std of each figure and each seed's
    test AER."""
    ent = [r.entropy for r in mine if r.entropy is not None]
    return (
        f"| {name} | {len(mine)} | {mean_std([r.aer for r in mine], 3)} "
        f"| {_per_seed(mine)} "
        f"| {mean_std([r.precision for r in mine], 3)} "
        f"| {mean_std([r.recall for r in mine], 3)} "
        f"| {mean_std([r.bleu for r in mine], 2)} | {mean_std(ent, 2)} |"
    )


def _per_seed(mine: list[AlignmentRun]) -> str:
    """'0.203 / 0.081 / 0.075': each seed's test AER in seed order ('–' without one)."""
    ordered = sorted(mine, key=lambda r: r.seed)
    return " / ".join(f"{r.aer:.3f}" for r in ordered) or "–"


def _baseline_row(name: str, b: ScoredBaseline) -> str:
    """A table row of an alignment no network makes: no seeds, BLEU or entropy."""
    return (
        f"| {name} | – | {_num(b.scores.aer)} | – | {_num(b.scores.precision)} "
        f"| {_num(b.scores.recall)} | – | – |"
    )


TARGET = 0.10
"""Issue 33's target: every mechanism's test AER on toy_align at most this."""


@dataclass(frozen=True)
class Baselines:
    """The synthetic task's alignments that no network makes, scored on its test split."""

    diagonal: ScoredBaseline
    dice: ScoredBaseline
    train_pairs: int


def toy_baselines(root: Path = ROOT) -> Baselines:
    """The diagonal and the Dice co-occurrence alignment (experiments/alignment_baselines.py)
    of toy_align's test split against its gold links, Dice counted over its train split
    (the corpus of configs/data/toy_align.yaml, prepared under ``root``/data)."""
    from attnmt.cli.data_group import data_config
    from attnmt.data.corpora import prepare_corpus
    from attnmt.decode.alignment_error import read_gold

    configs = root / "configs"
    corpus = prepare_corpus(data_config(["data=toy_align", f"data.root={root / 'data'}"], configs))
    sources, refs = corpus.read("test")
    train = list(zip(*corpus.read("train")))
    gold_file = corpus.gold_alignments("test")
    if gold_file is None:
        raise ValueError(f"{corpus.directory}: toy_align has no gold alignments of its test split")
    golds = read_gold(gold_file)
    return Baselines(
        aer_with_interval(diagonal_links(sources, refs), golds),
        aer_with_interval(dice_links(train, sources, refs), golds),
        len(train),
    )


def target_paragraph(recs: list[AlignmentRun], baselines: Baselines | None) -> list[str]:
    """Which mechanisms miss :data:`TARGET` in which seeds, beside the two alignments no
    network makes."""
    rows = {m: sorted((r for r in recs if r.mechanism == m
                            and r.updates == UPDATES), key=lambda r: r.seed)
            for m in MECHANISMS}  # fmt: skip
    measured = {name: mine for name, mine in rows.items() if mine}
    if not measured:
        return []
    missed = {n: [r for r in mine if r.aer > TARGET] for n, mine in measured.items()}
    text = (
        f"Issue 33's target, test AER ≤ {TARGET:.2f} for every mechanism at {UPDATES} "
        f"updates, read per seed: {sum(1 for n in measured if not missed[n])} of the "
        f"{len(measured)} mechanisms measured reach it in every seed"
    )
    parts = []
    for name, misses in missed.items():
        if misses:
            seeds = ", ".join(f"seed {r.seed} {r.aer:.3f}" for r in misses)
            kept = [r.seed for r in measured[name] if r not in misses]
            who = "seed {} reaches" if len(kept) == 1 else "seeds {} reach"
            parts.append(f"{name}: {seeds}" + (f" ({who.format(_seeds(kept))} it)" if kept else ""))
    text += "; " + ("none misses it." if not parts else f"missed by {'; '.join(parts)}.")
    if baselines is not None:
        dice, diag = baselines.dice.aer, baselines.diagonal.aer
        below = sum(1 for mine in measured.values()
                    if statistics.fmean(r.aer for r in mine) < dice)  # fmt: skip
        text += (
            f" Two alignments without a network, on the same test split: the diagonal (target "
            f"word j → source word round(j·S/T)) scores {diag:.3f}; a co-occurrence count "
            f"(Dice over the {baselines.train_pairs:,} training pairs, argmax per target word, "
            f"a tie to the source position nearest j) scores {dice:.3f}, 95% interval "
            f"{baselines.dice.low:.3f} to {baselines.dice.high:.3f} over the "
            f"{baselines.dice.scores.sentences} test sentences; {below} of the "
            f"{len(measured)} mechanisms have a mean AER below the count's."
        )
    return ["", text]


def _seeds(seeds: list[int]) -> str:
    return ", ".join(map(str, seeds[:-1])) + (" and " if len(seeds) > 1 else "") + str(seeds[-1])


def table(recs: list[AlignmentRun], baselines: Baselines | None = None) -> str:
    """docs/alignment.md's generated part: per mechanism, mean ± std over its seeds and each
    seed's AER, the ``baselines`` as rows, which mechanisms miss :data:`TARGET`; then the
    longer runs, the Transformer's maps, local-m's reach and recall by offset when kept."""
    lines = [
        "# Attention as alignment: AER on the synthetic task",
        "",
        "<!-- generated by `python -m experiments.alignment_aer table` from "
        "results/alignment_*/: do not edit by hand -->",
        "",
        f"Each mechanism trained {UPDATES} updates on `data=toy_align` (5,000 training pairs "
        "of a grammar with known word alignments: src/attnmt/data/recipes/toy_align.py), RNNs "
        "at a small size (`" + " ".join(SMALL) + "`: smaller than the presets, the task has "
        "90 word types), the Transformer as `model=transformer_tiny`; then `evaluate.py "
        "split=test` (greedy): test BLEU, and AER of the attention on the reference "
        "teacher-forced through the model against the gold sure/possible links (Och & Ney "
        "2003; attnmt.decode.alignment_error). Mean ± sample std over the seeds recorded. "
        "Entropy: the last validation's normalised attention entropy (0 = one source column "
        "per target piece, 1 = uniform). The particle `ne` has no source word, so some "
        "AER remains even for a perfect attention (docs/training.md). *AER per seed*: each "
        "recorded seed's, in seed order.",
        "",
        "| mechanism | seeds | test AER | AER per seed | precision | recall | test BLEU "
        "| entropy |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    lines += [_row(mech, [r for r in recs if r.mechanism == mech
                               and r.updates == UPDATES]) for mech in MECHANISMS]  # fmt: skip
    if baselines is not None:
        lines += [
            _baseline_row("diagonal, no network (reads no words)", baselines.diagonal),
            _baseline_row("Dice co-occurrence, no network", baselines.dice),
        ]
    lines += target_paragraph(recs, baselines)
    longer = sorted({(r.mechanism, r.updates) for r in recs if r.updates != UPDATES})
    if longer:
        lines += [
            "",
            "Longer runs (the same settings and seeds, more updates): does a mechanism "
            f"above 0.10 at {UPDATES} updates still improve?",
            "",
            "| mechanism | updates | seeds | test AER | AER per seed | precision | recall "
            "| test BLEU | entropy |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for name, updates in longer:
            mine = [r for r in recs if r.mechanism == name and r.updates == updates]
            lines.append(_row(name, mine).replace(f"| {name} |", f"| {name} | {updates} |", 1))
    choice_files = sorted((RECORDS / "choices").glob("*.json"))
    if choice_files:
        lines += [
            "",
            "Which Transformer map aligns best (test AER of the seed-1 run's maps: "
            "`python -m experiments.alignment_aer choices RUN ...`, results/alignment/choices/; "
            "“shifted”: each target piece read from the next row, Shift-Att):",
            "",
            "| run | updates | " + " | ".join(CHOICE_COLUMNS) + " |",
            "|---|---:|" + "---:|" * len(CHOICE_COLUMNS),
        ]
        for path in choice_files:
            c = json.loads(path.read_text())
            cells = " | ".join(_num(c["aer"].get(k)) for k in CHOICE_COLUMNS)
            lines.append(f"| {c['run']} | {c['updates']} | {cells} |")
        lines += ["", best_maps_sentence([json.loads(p.read_text()) for p in choice_files])]
    if REACH.is_file():
        reach = json.loads(REACH.read_text())
        shares = ", ".join(f"{float(v):.1%} at D = {d}" for d, v in reach["outside"].items())
        lines += [
            "",
            "Local-m's window |j − p_t| ≤ D around p_t = t assumes that target piece t "
            "comes from near source piece t; the reorderings, the dropped article and the "
            "one-to-many entries move the gold source pieces of some target pieces out of it: "
            f"{shares} of the {reach['pieces']:,} test target pieces with a sure link have "
            "none of their gold source pieces inside the window (`python -m "
            "experiments.alignment_aer reach RUN`, results/alignment/local_m_reach.json)."
            + window_sentence(recs),
        ]
    offsets = RECORDS / "offsets.json"
    if offsets.is_file():
        by_mech = json.loads(offsets.read_text())
        keys = ["<=-3", "-2", "-1", "0", "1", "2", ">=3"]
        lines += [
            "",
            "Where the links are lost: recall of the sure gold links by word offset d = j − i "
            "(target minus source word index), seed 1 (`python -m experiments.alignment_aer "
            "offsets RUN ...`, results/alignment/offsets.json):",
            "",
            "| mechanism | " + " | ".join(f"d {k}" for k in keys) + " |",
            "|---|" + "---:|" * len(keys),
        ]
        lines += [
            f"| {name} | "
            + " | ".join(f"{by[k]['recall']:.2f}" if k in by else "–" for k in keys)
            + " |"
            for name, by in by_mech.items()
        ]
    lines += ["", provenance(recs)]
    return "\n".join(lines) + "\n"


def provenance(recs: list[AlignmentRun]) -> str:
    """``Machines: ... Commits: ...`` of the records (the threads: those train.py ran with)."""
    machines = sorted(
        {f"{r.machine.describe('plain')}, {r.machine.threads} thread(s)" for r in recs if r.machine}
    )
    commits = sorted({r.commit for r in recs})
    return f"Machines: {'; '.join(machines) or '–'}. Commits: {', '.join(commits) or '–'}."


def best_maps_sentence(choices: list[dict[str, Any]]) -> str:
    """Per run of the choices table, its map of lowest AER, and whether any reaches
    :data:`TARGET`."""
    best = []
    for c in choices:
        scored = {k: v for k, v in c["aer"].items() if v is not None}
        name = min(scored, key=scored.__getitem__)
        best.append(f"{c['run']} ({c['updates']} updates): {name} {scored[name]:.3f}")
    reach = any(v is not None and v <= TARGET for c in choices for v in c["aer"].values())
    return f"Lowest AER of each run's maps: {'; '.join(best)}; " + (
        f"a map reaches {TARGET:.2f}." if reach else f"none reaches {TARGET:.2f}."
    )


def window_sentence(recs: list[AlignmentRun]) -> str:
    """' With the general scorer: local-m at D = 5 a, at D = 10 b, global c.' (mean test
    AER at :data:`UPDATES`); '' while one of them is not recorded."""
    names = {
        "local-m at D = 5": "luong general local_m",
        "at D = 10": "luong general local_m window10",
        "global attention": "luong general global",
    }
    means = {}
    for label, name in names.items():
        aer = [r.aer for r in recs if r.mechanism == name and r.updates == UPDATES]
        if not aer:
            return ""
        means[label] = statistics.fmean(aer)
    return (
        " Mean test AER with the general scorer: "
        + ", ".join(f"{label} {v:.3f}" for label, v in means.items())
        + "."
    )


def page(doc: Path = DOC) -> str:
    """docs/alignment.md as the table command writes it: the generated part from the records
    and the baselines, then ``doc``'s hand-written end as it is."""
    return table(read_runs(), toy_baselines()) + hand_written(doc)


HAND_WRITTEN = "<!-- written by hand from here on: the generator keeps it as it is -->"
"""The line after which docs/alignment.md is prose the table command leaves alone."""


def hand_written(doc: Path) -> str:
    """The hand-written end of ``doc`` (from the :data:`HAND_WRITTEN` line), or ""."""
    text = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    at = text.find(HAND_WRITTEN)
    return "\n" + text[at:] if at >= 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("reach", "choices", "offsets", "table"))
    parser.add_argument("runs", nargs="*", type=Path, help="trained run folders (analyses)")
    args = parser.parse_args(argv)
    if args.what != "table" and not args.runs:
        parser.error(f"{args.what}: name the trained run folders (outputs/alignment_*/RUN)")
    if args.what == "reach":  # any toy_align run: it gives the tokenizer
        write_json(REACH, window_reach(args.runs[0]), indent=1)
        print(f"wrote {REACH}")
    if args.what == "choices":  # every map of Transformer runs
        for run in args.runs:
            out = RECORDS / "choices" / f"{run.parent.name}-{run.name}.json"
            write_json(out, map_choices(run), indent=1)
            print(f"wrote {out}")
    if args.what == "offsets":  # recall by word offset, per run's mechanism
        overrides = [
            yaml.safe_load((r / ".hydra" / "overrides.yaml").read_text()) for r in args.runs
        ]
        names = [mechanism_of(dict(o.split("=", 1) for o in ov)) for ov in overrides]
        recall = {name: offset_recall(run) for name, run in zip(names, args.runs)}
        write_json(RECORDS / "offsets.json", recall, indent=1)
        for name, by in recall.items():
            cells = ", ".join(f"d {k}: {v['recall']:.2f}" for k, v in by.items())
            print(f"{name}: {cells}")
    write_text(DOC, page(DOC))
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
