"""Why does rnn_luong learn slower than rnn_bahdanau on ding_de_en? (issue 33)

    python -m experiments.luong_bahdanau table     # docs/luong_bahdanau.md + its figure

Each variant (:data:`VARIANTS`: the two presets, and rnn_luong with one difference from
rnn_bahdanau taken away at a time: the scorer, input feeding) trains :data:`UPDATES`
updates on ding_de_en at fixed settings (fp32, no time budget, no early stop), validating
every :data:`EVERY` updates on the first :data:`VALID` valid pairs: the studies
configs/study/luong_bahdanau.yaml, luong_bahdanau_scorer.yaml and luong_bahdanau_feeding.yaml
(experiments/sweep.py), their run folders in results/<study>/. The table and figure compare
the validation NLL and BLEU curves and the last validation's attention entropy at equal
updates.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attnmt.atomic import write_text
from experiments.comparison_stats import mean_std
from experiments.runs import Run, Variant, provenance, read_runs

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("luong_bahdanau", "luong_bahdanau_scorer", "luong_bahdanau_feeding")
DOC = ROOT / "docs" / "luong_bahdanau.md"
FIGURE = ROOT / "docs" / "attention" / "luong_bahdanau.png"
UPDATES = 500
EVERY = 100
VALID = 500
SETTINGS = (
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
"""The studies' trainer settings (after ``data=ding_de_en``), as the page states them."""


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


def variant_of(ov: dict[str, str]) -> str:
    """The :data:`VARIANTS` name of a run's train.py overrides (``{"model": ...}``): the
    variant all of whose overrides it has, the one with the most of them."""
    given = {f"{k}={v}" for k, v in ov.items()}
    fits = [v for v in VARIANTS if set(v.overrides) <= given]
    return max(fits, key=lambda v: len(v.overrides)).name if fits else "?"


def records(results: Path = ROOT / "results") -> list[tuple[str, Run]]:
    """(variant, run) of every run of the studies, in the old records' order (by variant
    name, then seed)."""
    runs = [(variant_of(r.overrides), r) for r in read_runs(results, STUDIES)]
    return sorted(runs, key=lambda vr: Variant(vr[0], ()).stem(vr[1].seed))


def figure(recs: list[tuple[str, Run]]) -> Path | None:
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
        for name, rec in recs:
            steps = [p[0] for p in rec.curve]
            ax.plot(steps, [p[col] for p in rec.curve], marker="o", ms=3,
                    color=colours.get(name, "k"), linestyle="-" if rec.seed == 1 else "--",
                    label=f"{name} (seed {rec.seed})")  # fmt: skip
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


def _entropies(runs: list[Run]) -> list[float]:
    return [r.entropy for r in runs if r.entropy is not None]


def _ranking(recs: list[tuple[str, Run]], step: int) -> list[str]:
    """One sentence: the variants by mean validation NLL at ``step``, each against
    rnn_bahdanau's, with their attention entropy."""
    means = {}
    for v in VARIANTS:
        mine = [r for name, r in recs if name == v.name]
        nll = [x for r in mine if (x := r.at_step(step, 1)) is not None]
        ent = _entropies(mine)
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


def table(recs: list[tuple[str, Run]]) -> str:
    """docs/luong_bahdanau.md: validation NLL and BLEU at a few updates, per variant."""
    steps = sorted({p[0] for _, r in recs for p in r.curve})
    shown = [s for s in steps if s % (2 * EVERY) == 0 or s == max(steps, default=0)]
    head = " | ".join(f"NLL @{s}" for s in shown)
    lines = [
        "# rnn_luong against rnn_bahdanau on ding_de_en",
        "",
        "<!-- generated by `python -m experiments.luong_bahdanau table` from "
        "results/luong_bahdanau*/: do not edit by hand -->",
        "",
        f"Each variant trained {UPDATES} updates on ding_de_en (`" + " ".join(SETTINGS) + "`), "
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
        mine = [r for name, r in recs if name == v.name]
        if not mine:
            continue
        nll = [mean_std([x for r in mine if (x := r.at_step(s, 1)) is not None], 3) for s in shown]
        last = shown[-1] if shown else 0
        bleu = mean_std([x for r in mine if (x := r.at_step(last, 2)) is not None], 2)
        ent = _entropies(mine)
        lines.append(
            f"| {v.name} | {v.isolates} | {len(mine)} | {mine[0].summary.params or 0:,} | "
            + " | ".join(nll)
            + f" | {bleu} | {mean_std(ent, 2)} |"
        )
    lines += _ranking(recs, shown[-1]) if shown else []
    lines += ["", provenance([r for _, r in recs])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("table",))
    parser.parse_args(argv)
    recs = records()
    write_text(DOC, table(recs))
    figure(recs)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
