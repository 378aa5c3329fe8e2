"""Why does rnn_luong learn slower than rnn_bahdanau on ding_de_en? (issue 33)

    python -m experiments.luong_bahdanau run [--only NAME ...] [--seeds 1] [--jobs 2]
    python -m experiments.luong_bahdanau table     # docs/luong_bahdanau.md + its figure

Each variant (:data:`VARIANTS`: the two presets, and rnn_luong with one difference from
rnn_bahdanau taken away at a time: the scorer, input feeding) trains :data:`UPDATES`
updates on ding_de_en at fixed settings (fp32, no time budget, no early stop), validating
every :data:`EVERY` updates on the first :data:`VALID` valid pairs. One JSON record per
(variant, seed) goes to ``results/luong_bahdanau/`` as it finishes: the validation NLL and
BLEU curve and the last validation's attention entropy. The table and figure compare them at equal
updates. Seeds are fixed in advance (1, then 2).
"""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from attnmt.atomic import write_text
from experiments.comparison_stats import mean_std
from experiments.variant_runs import (
    Variant,
    at_step,
    cross_entropies,
    provenance,
    read_all,
    run_variant,
)

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ROOT / "results" / "luong_bahdanau"
RUNS = ROOT / "outputs" / "luong_bahdanau"
DOC = ROOT / "docs" / "luong_bahdanau.md"
FIGURE = ROOT / "docs" / "attention" / "luong_bahdanau.png"
UPDATES = 500
EVERY = 100
VALID = 500
COMMON = (
    "data=ding_de_en",
    f"trainer.max_steps={UPDATES}",
    f"trainer.val_every_steps={EVERY}",
    f"trainer.val_subset={VALID}",
    "trainer.time_budget_min=0",
    "trainer.early_stopping_patience=0",
    "trainer.precision=fp32",
    "trainer.test=false",
    "trainer.num_heatmaps=0",
    "trainer.progress_bar=false",
    "trainer.keep_best=1",
)


VARIANTS = (
    Variant("rnn_bahdanau", ("model=rnn_bahdanau",), "the reference"),
    Variant("rnn_luong", ("model=rnn_luong",), "the preset (general scorer, input feeding)"),
    Variant(
        "rnn_luong additive",
        ("model=rnn_luong", "model.attention.score=additive"),
        "the scorer: Bahdanau's additive score in Luong's model",
    ),
    Variant(
        "rnn_luong dot",
        ("model=rnn_luong", "model.attention.score=dot"),
        "the scorer's parameters: no W_a at all",
    ),
    Variant(
        "rnn_luong no input feeding",
        ("model=rnn_luong", "model.input_feeding=false"),
        "input feeding",
    ),
)


def run_one(v: Variant, seed: int, threads: int) -> Path | None:
    """Train and record one (variant, seed); the record's path (None: failed)."""
    return run_variant(v, seed, threads, COMMON, RUNS, RECORDS)


def records() -> list[dict[str, Any]]:
    return read_all(RECORDS)


def figure(recs: list[dict[str, Any]]) -> Path | None:
    """Validation NLL and BLEU against update, one line per (variant, seed)."""
    if not recs:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    colours = {v.name: f"C{k}" for k, v in enumerate(VARIANTS)}
    for col, ylabel in ((1, "validation NLL per target piece"), (2, "validation BLEU")):
        ax = fig.add_subplot(1, 2, col)
        for rec in recs:
            steps = [p[0] for p in rec["curve"]]
            ax.plot(steps, [p[col] for p in rec["curve"]], marker="o", ms=3,
                    color=colours.get(rec["variant"], "k"),
                    linestyle="-" if rec["seed"] == 1 else "--",
                    label=f"{rec['variant']} (seed {rec['seed']})")  # fmt: skip
        ax.set_xlabel("update")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    fig.axes[1].legend(fontsize=8)
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    tmp = FIGURE.with_suffix(".tmp.png")
    fig.savefig(tmp)
    tmp.replace(FIGURE)
    return FIGURE


def _ranking(recs: list[dict[str, Any]], step: int) -> list[str]:
    """One sentence: the variants by mean validation NLL at ``step``, each against
    rnn_bahdanau's, with their attention entropy."""
    means = {}
    for v in VARIANTS:
        nll = [x for r in recs if r["variant"] == v.name and (x := at_step(r, step, 1)) is not None]
        ent = cross_entropies([r for r in recs if r["variant"] == v.name])
        if nll:
            means[v.name] = (sum(nll) / len(nll), sum(ent) / len(ent) if ent else float("nan"))
    if "rnn_bahdanau" not in means:
        return []
    ref = means["rnn_bahdanau"][0]
    ranked = sorted(means.items(), key=lambda kv: kv[1][0])
    parts = [f"{name} {nll - ref:+.3f} (entropy {ent:.2f})" for name, (nll, ent) in ranked]
    return [
        "",
        f"At update {step}, mean validation NLL against rnn_bahdanau's, best first: "
        + "; ".join(parts)
        + ". An entropy near 0 is an attention that puts nearly all its weight on one "
        "source piece per target piece; near 1, one spread evenly.",
    ]


def table(recs: list[dict[str, Any]]) -> str:
    """docs/luong_bahdanau.md: validation NLL and BLEU at a few updates, per variant."""
    steps = sorted({p[0] for r in recs for p in r["curve"]})
    shown = [s for s in steps if s % (2 * EVERY) == 0 or s == max(steps, default=0)]
    head = " | ".join(f"NLL @{s}" for s in shown)
    lines = [
        "# rnn_luong against rnn_bahdanau on ding_de_en",
        "",
        "<!-- generated by `python -m experiments.luong_bahdanau table` from "
        "results/luong_bahdanau/: do not edit by hand -->",
        "",
        f"Each variant trained {UPDATES} updates on ding_de_en (`" + " ".join(COMMON[1:]) + "`), "
        f"validation NLL per target piece (label smoothing off) on the first {VALID} valid "
        "pairs; mean ± sample std over the seeds recorded. Each rnn_luong variant takes one "
        "difference from rnn_bahdanau away. Curves: [attention/luong_bahdanau.png]"
        "(attention/luong_bahdanau.png).",
        "",
        f"| variant | isolates | seeds | params | {head} | BLEU @{shown[-1] if shown else '–'} "
        "| entropy |",
        "|---|---|---:|---:|" + "---:|" * (len(shown) + 2),
    ]
    for v in VARIANTS:
        mine = [r for r in recs if r["variant"] == v.name]
        if not mine:
            continue
        nll = [mean_std([x for r in mine if (x := at_step(r, s, 1)) is not None], 3) for s in shown]
        last = shown[-1] if shown else 0
        bleu = mean_std([x for r in mine if (x := at_step(r, last, 2)) is not None], 2)
        ent = cross_entropies(mine)
        lines.append(
            f"| {v.name} | {v.isolates} | {len(mine)} | {mine[0]['params']:,} | "
            + " | ".join(nll)
            + f" | {bleu} | {mean_std(ent, 2)} |"
        )
    lines += _ranking(recs, shown[-1]) if shown else []
    lines += ["", provenance(recs)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("run", "table"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--only", nargs="+", default=[], help="variant names (exact)")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (1 thread each if >1)")
    args = parser.parse_args(argv)
    if args.what == "run":
        chosen = [v for v in VARIANTS if not args.only or v.name in args.only]
        todo = [(v, s) for s in args.seeds for v in chosen]
        threads = 1 if args.jobs > 1 else (os.cpu_count() or 1)
        with ThreadPoolExecutor(args.jobs) as pool:
            for (v, s), path in zip(
                todo, pool.map(lambda vs: run_one(vs[0], vs[1], threads), todo)
            ):
                print(f"{v.name} seed {s}: {path or 'FAILED'}", flush=True)
    recs = records()
    write_text(DOC, table(recs))
    figure(recs)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
