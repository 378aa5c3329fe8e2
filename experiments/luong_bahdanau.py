"""Why does rnn_luong learn slower than rnn_bahdanau on ding_de_en? (issue 33)

    python -m experiments.luong_bahdanau table     # docs/luong_bahdanau.md + its figure

The studies configs/study/luong_bahdanau{,_scorer,_feeding}.yaml train the two presets and
rnn_luong with one difference from rnn_bahdanau taken away at a time (:data:`VARIANTS`); the
page sets their validation NLL, BLEU and attention entropy side by side at equal updates.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from attnmt.atomic import write_text
from experiments.comparison_stats import mean_std
from experiments.runs import Run, provenance, read_runs
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ("luong_bahdanau", "luong_bahdanau_scorer", "luong_bahdanau_feeding")
DOC = ROOT / "docs" / "luong_bahdanau.md"
FIGURE = ROOT / "docs" / "attention" / "luong_bahdanau.png"


@dataclass(frozen=True)
class Variant:
    """A row: its name, the train.py overrides that select it, what it isolates."""

    name: str
    overrides: tuple[str, ...]
    isolates: str


VARIANTS = (
    Variant("rnn_bahdanau", ("model=rnn_bahdanau",), "the reference"),
    Variant("rnn_luong", ("model=rnn_luong",), "the preset (general scorer, input feeding)"),
    Variant("rnn_luong additive", ("model=rnn_luong", "model.attention.score=additive"),
            "the scorer: Bahdanau's additive score in Luong's model"),
    Variant("rnn_luong dot", ("model=rnn_luong", "model.attention.score=dot"),
            "the scorer's parameters: no W_a at all"),
    Variant("rnn_luong no input feeding", ("model=rnn_luong", "model.input_feeding=false"),
            "input feeding"),
)  # fmt: skip


def settings() -> tuple[str, ...]:
    """The studies' trainer settings (those of configs/study/luong_bahdanau.yaml)."""
    study = load_study(ROOT / "configs" / "study" / f"{STUDIES[0]}.yaml")
    return tuple(o for o in study.overrides if o.startswith("trainer."))


def variant_of(overrides: dict[str, str]) -> str:
    """The name of the variant all of whose overrides a run has (the one with the most)."""
    given = {f"{k}={v}" for k, v in overrides.items()}
    fits = [v for v in VARIANTS if set(v.overrides) <= given]
    return max(fits, key=lambda v: len(v.overrides)).name if fits else "?"


def records(results: Path = ROOT / "results") -> list[tuple[str, Run]]:
    """(variant, run) of every run of the studies, sorted as ``<variant>-seed<n>`` (the
    figure's legend order)."""
    runs = [(variant_of(r.overrides), r) for r in read_runs(results, STUDIES)]
    return sorted(runs, key=lambda vr: f"{vr[0].replace(' ', '-')}-seed{vr[1].seed}")


def figure(recs: list[tuple[str, Run]]) -> None:
    """:data:`FIGURE`: validation NLL and BLEU against update, a line per (variant, seed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    colours = {v.name: f"C{k}" for k, v in enumerate(VARIANTS)}
    for col, ylabel in ((1, "validation NLL per target piece"), (2, "validation BLEU")):
        ax = fig.add_subplot(1, 2, col)
        for name, rec in recs:
            ax.plot([p[0] for p in rec.curve], [p[col] for p in rec.curve], marker="o", ms=3,
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


def _at(runs: list[Run], step: int, col: int) -> list[float]:
    return [x for r in runs if (x := r.at_step(step, col)) is not None]


def _entropies(runs: list[Run]) -> list[float]:
    return [r.entropy for r in runs if r.entropy is not None]


def _ranking(by_variant: dict[str, list[Run]], step: int) -> list[str]:
    """The variants by mean validation NLL at ``step``, each against rnn_bahdanau's."""
    means = {}
    for name, runs in by_variant.items():
        nll, ent = _at(runs, step, 1), _entropies(runs)
        if nll:
            means[name] = (sum(nll) / len(nll), sum(ent) / len(ent) if ent else float("nan"))
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
    given = settings()
    setting = dict(o.split("=", 1) for o in given)
    every = int(setting["trainer.val_every_steps"])
    steps = sorted({p[0] for _, r in recs for p in r.curve})
    shown = [s for s in steps if s % (2 * every) == 0 or s == steps[-1]]
    last = shown[-1] if shown else 0
    lines = [
        "# rnn_luong against rnn_bahdanau on ding_de_en",
        "",
        "<!-- generated by `python -m experiments.luong_bahdanau table` from "
        "results/luong_bahdanau*/: do not edit by hand -->",
        "",
        f"Each variant trained {setting['trainer.max_steps']} updates on ding_de_en (`"
        + " ".join(given)
        + "`), validation NLL per target piece (label smoothing off) on the first "
        f"{setting['trainer.val_subset']} valid pairs; mean ± sample std over the seeds "
        "recorded. Each rnn_luong variant takes one difference from rnn_bahdanau away. "
        "Curves: [attention/luong_bahdanau.png](attention/luong_bahdanau.png).",
        "",
        f"| variant | isolates | seeds | params | {' | '.join(f'NLL @{s}' for s in shown)} "
        f"| BLEU @{last or '–'} | entropy |",
        "|---|---|---:|---:|" + "---:|" * (len(shown) + 2),
    ]
    by_variant = {v.name: [r for name, r in recs if name == v.name] for v in VARIANTS}
    for v in VARIANTS:
        if mine := by_variant[v.name]:
            lines.append(
                f"| {v.name} | {v.isolates} | {len(mine)} | {mine[0].summary.params or 0:,} | "
                + " | ".join(mean_std(_at(mine, s, 1), 3) for s in shown)
                + f" | {mean_std(_at(mine, last, 2), 2)} | {mean_std(_entropies(mine), 2)} |"
            )
    lines += _ranking(by_variant, last) if shown else []
    lines += ["", provenance([r for _, r in recs])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("table",))
    parser.parse_args(argv)
    recs = records()
    write_text(DOC, table(recs))
    if recs:
        figure(recs)
    print(f"wrote {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
