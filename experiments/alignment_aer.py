"""Does each attention mechanism learn an alignment? AER on ``data=toy_align`` (issue 33).

    python -m experiments.alignment_aer run [--seeds 1 2 3] [--only NAME ...] [--jobs 2]
                                            [--updates N]
    python -m experiments.alignment_aer maps [--only NAME ...]   # one test sentence's maps
    python -m experiments.alignment_aer table            # docs/alignment.md from the records

Each mechanism (:data:`MECHANISMS`: every Luong scorer with global attention, local-m,
local-p and hard with the general scorer, Bahdanau's additive, the Transformer's
cross-attention) is trained ``python train.py data=toy_align <its settings> seed=S`` for
:data:`UPDATES` updates at :data:`SMALL` sizes (a smaller RNN than the presets: the task has 90
word types), then ``python evaluate.py ckpt=RUN split=test`` decodes the test split (greedy)
and scores the attention of the reference teacher-forced through the model against the gold
alignments (AER, precision, recall; attnmt.decode.alignment_error). One JSON record per
(mechanism, seed) goes to ``results/alignment/`` as it finishes, with the validation curve,
the attention entropy at the last validation, test BLEU/chrF and AER; a record that exists is
not run again, so the table fills over several sessions. Seeds are fixed in advance (1, 2, 3).
``--updates N`` trains N updates instead (records ``<stem>-u<N>``, their own table rows):
whether a mechanism still improves after :data:`UPDATES`.

``table`` writes docs/alignment.md's generated part: each mechanism's figures and its seeds'
AER, which mechanisms miss :data:`TARGET` in which seed, and beside them two alignments no
network makes, computed from toy_align itself (experiments/alignment_baselines.py: the
diagonal and a Dice co-occurrence count); every sentence follows from the records, and the
page's hand-written end (from :data:`HAND_WRITTEN` on) is kept as it is.

``maps`` keeps, per mechanism, the forced attention of one test sentence (:data:`EXAMPLE`)
of its seed-1 run (trained again when ``outputs/alignment/`` lacks it) with the sentence's
gold links in ``results/alignment/maps/``, and draws them side by side in
docs/attention/toy_align_maps.png (experiments.alignment_maps).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnmt.atomic import write_json, write_text
from attnmt.run_record import read_record, source_commit
from experiments.alignment_baselines import (
    ScoredBaseline,
    aer_with_interval,
    diagonal_links,
    dice_links,
)
from experiments.comparison_stats import mean_std
from experiments.variant_runs import (
    cross_entropies,
    evaluate_test,
    provenance,
    provenance_fields,
    train_run,
)

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "alignment"
RUNS = ROOT / "outputs" / "alignment"
DOC = ROOT / "docs" / "alignment.md"
UPDATES = 1200
SEEDS = (1, 2, 3)
SMALL = ("model.emb_dim=64", "model.hidden_size=128", "model.enc_layers=1", "model.dropout=0.1")
"""The RNN size of this table: 1 bi-GRU layer (64 units a direction), 128-unit decoder."""
READING = ("align_layer=-1", "align_head=null", "align_words=any", "align_eos=ignore")
"""How evaluate.py reads the attention for these records: the last layer's mean of heads,
each piece's argmax with ``</s>`` left out (its default before issue 65), so that new
records compare with the kept ones."""
COMMON = (
    "data=toy_align",
    "trainer.time_budget_min=0",
    "trainer.val_every_steps=200",
    "trainer.early_stopping_patience=0",
    "trainer.lr=0.003",
    "trainer.warmup_steps=100",
    "trainer.precision=fp32",
    "trainer.test=false",
    "trainer.num_heatmaps=0",
    "trainer.progress_bar=false",
)


@dataclass(frozen=True)
class Mechanism:
    """One row of the table: a name and the train.py overrides that select it."""

    name: str
    overrides: tuple[str, ...]


def _luong(score: str, mode: str = "global") -> Mechanism:
    settings = ("model=rnn_luong", *SMALL, f"model.attention.score={score}")
    return Mechanism(f"luong {score} {mode}", (*settings, f"model.attention.mode={mode}"))


MECHANISMS = (
    *[_luong(s) for s in ("dot", "scaled_dot", "general", "additive", "concat", "cosine")],
    _luong("location"),
    *[_luong("general", mode) for mode in ("local_m", "local_p", "hard")],
    Mechanism(
        "luong general local_m window10",
        (*_luong("general", "local_m").overrides, "model.attention.window=10"),
    ),
    Mechanism("bahdanau additive global", ("model=rnn_bahdanau", *SMALL)),
    Mechanism("transformer_tiny cross (last layer, mean of heads)", ("model=transformer_tiny",)),
)

SCORES = ("dot", "scaled_dot", "general", "additive", "concat", "cosine", "location")
MODES = ("global", "local_m", "local_p", "hard")
_KNOWN = {m.name: m for m in MECHANISMS}  # a shared name: its existing runs and records
GRID = tuple(_KNOWN.get(mech.name, mech) for mech in (
    *[_luong(s, m) for s in SCORES for m in MODES],
    *[Mechanism(f"bahdanau additive {m}", ("model=rnn_bahdanau", *SMALL,
                                            f"model.attention.mode={m}")) for m in MODES],
    MECHANISMS[-1],
))  # fmt: skip
"""The attention table's cells (experiments/results_plan.py) on this task, for its AER
column: every Luong scorer in every mode, Bahdanau's additive in every mode, the
Transformer (``run --grid``). Names shared with :data:`MECHANISMS` are the same runs."""


def grid_name(model: str, score: str, mode: str) -> str:
    """The :data:`GRID` name of an attention-table cell (model, score, mode labels)."""
    if model.startswith("transformer"):
        return MECHANISMS[-1].name
    return f"{model.removeprefix('rnn_')} {score} {mode}"


def stem(mech: Mechanism, seed: int, updates: int = UPDATES) -> str:
    """``luong-general-global-seed1``; ``...-seed1-u3000`` for a run of other length."""
    suffix = "" if updates == UPDATES else f"-u{updates}"
    return f"{mech.name.split(' (')[0].replace(' ', '-')}-seed{seed}{suffix}"


def overrides(mech: Mechanism, updates: int = UPDATES) -> tuple[str, ...]:
    """The train.py overrides of ``mech`` trained ``updates`` updates (seed apart)."""
    return (*COMMON, f"trainer.max_steps={updates}", *mech.overrides)


def train(mech: Mechanism, seed: int, threads: int, updates: int, out: Any) -> Path | None:
    """Train (or finish) the run of (mechanism, seed, updates); its folder (None: failed)."""
    run = RUNS / stem(mech, seed, updates)
    if (run / "summary.json").is_file() and read_record(run).status == "finished":
        return run
    return run if train_run(overrides(mech, updates), seed, run, threads, out) else None


def run_one(mech: Mechanism, seed: int, threads: int, updates: int = UPDATES) -> Path | None:
    """Train, evaluate and record one (mechanism, seed); the record's path (None: failed)."""
    record = RECORDS / f"{stem(mech, seed, updates)}.json"
    if record.is_file():
        return record
    started = time.time()
    log = RUNS / f"{stem(mech, seed, updates)}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        run = train(mech, seed, threads, updates, out)
        entry = None if run is None else evaluate_test(run, threads, READING, out)
    if run is None or entry is None:
        return None
    rec = read_record(run)
    last = rec.valid[-1]
    write_json(
        record,
        {
            "mechanism": mech.name,
            "overrides": list(overrides(mech, updates)),
            "seed": seed,
            "updates": rec.summary.step if rec.summary else None,
            "params": rec.summary.params if rec.summary else None,
            "curve": [[e["step"], e["nll"], e["bleu"]] for e in rec.valid],
            "attention_entropy_norm": last.get("attention_entropy_norm"),
            "test": {k: entry[k] for k in ("bleu", "chrf", "bleu_signature", "aer")},
            "aer_precision": entry["aer_precision"],
            "aer_recall": entry["aer_recall"],
            "alignment_map": entry["alignment"]["map"],
            **provenance_fields(started, threads),
        },
        indent=1,
    )
    return record


def map_one(mech: Mechanism, threads: int, seed: int = 1) -> Path | None:
    """The example sentence's map of (mechanism, seed)'s run, kept in results/alignment/maps/
    (the run is trained again when it is gone); the file's path (None: training failed)."""
    from experiments import alignment_maps

    kept = alignment_maps.MAPS / f"{stem(mech, seed)}.json"
    if kept.is_file():
        return kept
    log = RUNS / f"{stem(mech, seed)}.maps.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        run = train(mech, seed, threads, UPDATES, out)
    if run is None:
        return None
    return alignment_maps.keep(run, mech.name, kept)


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
    rec = read_record(run)
    return {
        "run": run.name,
        "updates": rec.summary.step if rec.summary else None,
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


def records() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(RECORDS.glob("*-seed*.json"))]


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


def _row(name: str, mine: list[dict[str, Any]]) -> str:
    """One table row: the mechanism, its seeds, mean ± std of each figure and each seed's
    test AER."""
    ent = cross_entropies(mine)
    return (
        f"| {name} | {len(mine)} | {mean_std([r['test']['aer'] for r in mine], 3)} "
        f"| {_per_seed(mine)} "
        f"| {mean_std([r['aer_precision'] for r in mine], 3)} "
        f"| {mean_std([r['aer_recall'] for r in mine], 3)} "
        f"| {mean_std([r['test']['bleu'] for r in mine], 2)} | {mean_std(ent, 2)} |"
    )


def _per_seed(mine: list[dict[str, Any]]) -> str:
    """'0.203 / 0.081 / 0.075': each seed's test AER in seed order ('–' without one)."""
    ordered = sorted(mine, key=lambda r: r["seed"])
    return " / ".join(f"{r['test']['aer']:.3f}" for r in ordered) or "–"


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


def target_paragraph(recs: list[dict[str, Any]], baselines: Baselines | None) -> list[str]:
    """Which mechanisms miss :data:`TARGET` in which seeds, beside the two alignments no
    network makes."""
    rows = {m.name: sorted((r for r in recs if r["mechanism"] == m.name
                            and r["updates"] == UPDATES), key=lambda r: r["seed"])
            for m in MECHANISMS}  # fmt: skip
    measured = {name: mine for name, mine in rows.items() if mine}
    if not measured:
        return []
    missed = {n: [r for r in mine if r["test"]["aer"] > TARGET] for n, mine in measured.items()}
    text = (
        f"Issue 33's target, test AER ≤ {TARGET:.2f} for every mechanism at {UPDATES} "
        f"updates, read per seed: {sum(1 for n in measured if not missed[n])} of the "
        f"{len(measured)} mechanisms measured reach it in every seed"
    )
    parts = []
    for name, misses in missed.items():
        if misses:
            seeds = ", ".join(f"seed {r['seed']} {r['test']['aer']:.3f}" for r in misses)
            kept = [r["seed"] for r in measured[name] if r not in misses]
            who = "seed {} reaches" if len(kept) == 1 else "seeds {} reach"
            parts.append(f"{name}: {seeds}" + (f" ({who.format(_seeds(kept))} it)" if kept else ""))
    text += "; " + ("none misses it." if not parts else f"missed by {'; '.join(parts)}.")
    if baselines is not None:
        dice, diag = baselines.dice.aer, baselines.diagonal.aer
        below = sum(1 for mine in measured.values()
                    if statistics.fmean(r["test"]["aer"] for r in mine) < dice)  # fmt: skip
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


def table(recs: list[dict[str, Any]], baselines: Baselines | None = None) -> str:
    """docs/alignment.md's generated part: per mechanism, mean ± std over its seeds and each
    seed's AER, the ``baselines`` as rows, which mechanisms miss :data:`TARGET`; then the
    longer runs, the Transformer's maps, local-m's reach and recall by offset when kept."""
    lines = [
        "# Attention as alignment: AER on the synthetic task",
        "",
        "<!-- generated by `python -m experiments.alignment_aer table` from "
        "results/alignment/: do not edit by hand -->",
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
    lines += [_row(mech.name, [r for r in recs if r["mechanism"] == mech.name
                               and r["updates"] == UPDATES]) for mech in MECHANISMS]  # fmt: skip
    if baselines is not None:
        lines += [
            _baseline_row("diagonal, no network (reads no words)", baselines.diagonal),
            _baseline_row("Dice co-occurrence, no network", baselines.dice),
        ]
    lines += target_paragraph(recs, baselines)
    longer = sorted({(r["mechanism"], r["updates"]) for r in recs if r["updates"] != UPDATES})
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
            mine = [r for r in recs if r["mechanism"] == name and r["updates"] == updates]
            lines.append(_row(name, mine).replace(f"| {name} |", f"| {name} | {updates} |", 1))
    choice_files = sorted((RECORDS / "choices").glob("*.json"))
    if choice_files:
        lines += [
            "",
            "Which Transformer map aligns best (test AER of the seed-1 run's maps: "
            "`python -m experiments.alignment_aer choices`, results/alignment/choices/; "
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
            "experiments.alignment_aer reach`, results/alignment/local_m_reach.json)."
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
            "offsets --only ...`, results/alignment/offsets.json):",
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


def window_sentence(recs: list[dict[str, Any]]) -> str:
    """' With the general scorer: local-m at D = 5 a, at D = 10 b, global c.' (mean test
    AER at :data:`UPDATES`); '' while one of them is not recorded."""
    names = {
        "local-m at D = 5": "luong general local_m",
        "at D = 10": "luong general local_m window10",
        "global attention": "luong general global",
    }
    means = {}
    for label, name in names.items():
        aer = [r["test"]["aer"] for r in recs if r["mechanism"] == name and r["updates"] == UPDATES]
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
    return table(records(), toy_baselines()) + hand_written(doc)


HAND_WRITTEN = "<!-- written by hand from here on: the generator keeps it as it is -->"
"""The line after which docs/alignment.md is prose the table command leaves alone."""


def hand_written(doc: Path) -> str:
    """The hand-written end of ``doc`` (from the :data:`HAND_WRITTEN` line), or ""."""
    text = doc.read_text(encoding="utf-8") if doc.is_file() else ""
    at = text.find(HAND_WRITTEN)
    return "\n" + text[at:] if at >= 0 else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("run", "maps", "reach", "choices", "offsets", "table"))
    parser.add_argument("--updates", type=int, default=UPDATES, help="updates a run (run)")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--only", nargs="+", default=[], help="mechanism names (substrings)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (1 thread each if >1)")
    parser.add_argument("--grid", action="store_true", help="the attention table's cells (run)")
    args = parser.parse_args(argv)
    pool_of = GRID if args.grid else MECHANISMS
    chosen = [m for m in pool_of if not args.only or any(o in m.name for o in args.only)]
    threads = 1 if args.jobs > 1 else (os.cpu_count() or 1)
    if args.what == "run":
        todo = [(m, s) for s in args.seeds for m in chosen]
        with ThreadPoolExecutor(args.jobs) as pool:
            done = pool.map(lambda ms: run_one(ms[0], ms[1], threads, args.updates), todo)
            for (m, s), path in zip(todo, done):
                print(f"{m.name} seed {s}: {path or 'FAILED'}", flush=True)
    if args.what == "reach":
        run = RUNS / stem(MECHANISMS[0], 1)
        write_json(REACH, window_reach(run), indent=1)
        print(f"wrote {REACH}")
    if args.what == "choices":  # every map of the Transformer's seed-1 runs
        tf = MECHANISMS[-1]
        for updates in sorted({UPDATES, args.updates}):
            run = RUNS / stem(tf, 1, updates)
            if (run / "summary.json").is_file():
                out = RECORDS / "choices" / f"{stem(tf, 1, updates)}.json"
                write_json(out, map_choices(run), indent=1)
                print(f"wrote {out}")
    if args.what == "offsets":  # recall by word offset, seed 1 of the chosen mechanisms
        recall = {m.name: offset_recall(RUNS / stem(m, 1)) for m in chosen}
        write_json(RECORDS / "offsets.json", recall, indent=1)
        for name, by in recall.items():
            cells = ", ".join(f"d {k}: {v['recall']:.2f}" for k, v in by.items())
            print(f"{name}: {cells}")
    if args.what == "maps":
        from experiments import alignment_maps

        with ThreadPoolExecutor(args.jobs) as pool:
            for m, path in zip(chosen, pool.map(lambda m: map_one(m, threads), chosen)):
                print(f"{m.name}: {path or 'FAILED'}", flush=True)
        alignment_maps.draw()
    write_text(DOC, page(DOC))
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
