"""The pages of two small variant studies, from their run folders (experiments.runs).

    python -m experiments.variant_pages      # docs/luong_bahdanau.md (+ figure), ding_loose.md

luong_bahdanau (issue 33): why rnn_luong learns slower than rnn_bahdanau on ding_de_en. The
studies configs/study/luong_bahdanau{,_scorer,_feeding}.yaml train both presets and rnn_luong
with one difference from rnn_bahdanau taken away at a time (:data:`VARIANTS`).

ding_loose (issue 34): the main table's Transformer on the loose Ding corpus
(``scripts/rebuild_ding.py --filter loose``: the same valid and test splits;
configs/study/ding_loose.yaml) beside the shipped one (ding_loose_shipped.yaml). Decision
rule: ship the loose corpus as the default if it gains at least 1 test BLEU.
"""

from __future__ import annotations

import sys
from pathlib import Path

from attnmt.atomic import write_text
from experiments import page_blocks
from experiments.comparison_stats import mean_std
from experiments.page_blocks import figure, header, save_png, table
from experiments.runs import Run, provenance, read_runs
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
DOCS = ROOT / "docs"
FIGURE = "attention/luong_bahdanau.png"
LUONG_STUDIES = ("luong_bahdanau", "luong_bahdanau_scorer", "luong_bahdanau_feeding")
VARIANTS = {
    "rnn_bahdanau": (("model=rnn_bahdanau",), "the reference"),
    "rnn_luong": (("model=rnn_luong",), "the preset (general scorer, input feeding)"),
    "rnn_luong additive": (("model=rnn_luong", "model.attention.score=additive"),
                           "the scorer: Bahdanau's additive score in Luong's model"),
    "rnn_luong dot": (("model=rnn_luong", "model.attention.score=dot"),
                      "the scorer's parameters: no W_a at all"),
    "rnn_luong no input feeding": (("model=rnn_luong", "model.input_feeding=false"),
                                   "input feeding"),
}  # fmt: skip
"""Name -> (the train.py overrides that select the variant, what it isolates)."""
LOOSE_FILE = "data/ding_loose/ding_de_en.tsv.xz"
LOOSE_ROWS = (("shipped (16,824 pairs)", "ding_loose_shipped"),
              ("loose (47,818 pairs)", "ding_loose"))  # fmt: skip


def study_overrides(study: str) -> tuple[str, ...]:
    return load_study(ROOT / "configs" / "study" / f"{study}.yaml").overrides


def variant_of(overrides: dict[str, str]) -> str:
    """The name of the variant all of whose overrides a run has (the one with the most)."""
    given = {f"{k}={v}" for k, v in overrides.items()}
    fits = [name for name, (ov, _) in VARIANTS.items() if set(ov) <= given]
    return max(fits, key=lambda name: len(VARIANTS[name][0]), default="?")


def luong_records(results: Path = RESULTS) -> list[tuple[str, Run]]:
    """(variant, run) of every run of the luong_bahdanau studies, sorted as
    ``<variant>-seed<n>`` (the figure's legend order)."""
    runs = [(variant_of(r.overrides), r) for r in read_runs(results, LUONG_STUDIES)]
    return sorted(runs, key=lambda vr: f"{vr[0].replace(' ', '-')}-seed{vr[1].seed}")


def luong_figure(recs: list[tuple[str, Run]], path: Path) -> Path:
    """Validation NLL and BLEU against update, a line per (variant, seed)."""
    fig = figure(11, 4.2, dpi=110)
    colours = {name: f"C{k}" for k, name in enumerate(VARIANTS)}
    for col, ylabel in ((1, "validation NLL per target piece"), (2, "validation BLEU")):
        ax = page_blocks.panel(fig, 2, col, "update", ylabel)
        for name, rec in recs:
            ax.plot([p[0] for p in rec.curve], [p[col] for p in rec.curve], marker="o", ms=3,
                    color=colours.get(name, "k"), linestyle="-" if rec.seed == 1 else "--",
                    label=f"{name} (seed {rec.seed})")  # fmt: skip
    fig.axes[1].legend(fontsize=8)
    fig.tight_layout()
    return save_png(fig, path)


def _at(runs: list[Run], step: int, col: int) -> list[float]:
    return [x for r in runs if (x := r.at_step(step, col)) is not None]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def luong_page(recs: list[tuple[str, Run]]) -> str:
    """docs/luong_bahdanau.md: validation NLL at every other validation and the last, BLEU
    and attention entropy at the last, per variant; then the variants ranked by NLL."""
    given = [o for o in study_overrides(LUONG_STUDIES[0]) if o.startswith("trainer.")]
    setting = dict(o.split("=", 1) for o in given)
    every = int(setting["trainer.val_every_steps"])
    steps = sorted({p[0] for _, r in recs for p in r.curve})
    shown = [s for s in steps if s % (2 * every) == 0 or s == steps[-1]]
    last = shown[-1] if shown else 0
    head, align = ["variant", "isolates", "seeds", "params"], "llrr" + "r" * (len(shown) + 2)
    lines = [
        "# rnn_luong against rnn_bahdanau on ding_de_en",
        "",
        header("experiments.variant_pages", " (luong_bahdanau)", "results/luong_bahdanau*/"),
        "",
        f"Each variant trained {setting['trainer.max_steps']} updates on ding_de_en (`"
        + " ".join(given)
        + "`), validation NLL per target piece (label smoothing off) on the first "
        f"{setting['trainer.val_subset']} valid pairs; mean ± sample std over the seeds "
        "recorded. Each rnn_luong variant takes one difference from rnn_bahdanau away. "
        f"Curves: [{FIGURE}]({FIGURE}).",
        "",
        *table([*head, *(f"NLL @{s}" for s in shown), f"BLEU @{last or '–'}", "entropy"], align),
    ]
    ranked = {}
    for name, (_, isolates) in VARIANTS.items():
        if not (mine := [r for n, r in recs if n == name]):
            continue
        entropy = [r.entropy for r in mine if r.entropy is not None]
        lines.append(
            f"| {name} | {isolates} | {len(mine)} | {mine[0].summary.params or 0:,} | "
            + " | ".join(mean_std(_at(mine, s, 1), 3) for s in shown)
            + f" | {mean_std(_at(mine, last, 2), 2)} | {mean_std(entropy, 2)} |"
        )
        if nll := _at(mine, last, 1):
            ranked[name] = (_mean(nll), _mean(entropy))
    if "rnn_bahdanau" in ranked:
        ref = ranked["rnn_bahdanau"][0]
        order = sorted(ranked, key=lambda name: ranked[name][0])
        parts = [f"{n} {ranked[n][0] - ref:+.3f} (entropy {ranked[n][1]:.2f})" for n in order]
        lines += [
            "",
            f"At update {last}, mean validation NLL against rnn_bahdanau's, best first: "
            + "; ".join(parts)
            + ". An entropy near 0 is an attention that puts nearly all its weight on one "
            "source piece per target piece; near 1, one spread evenly.",
        ]
    return "\n".join([*lines, "", provenance([r for _, r in recs])]) + "\n"


def loose_page(results: Path = RESULTS) -> str:
    """docs/ding_loose.md: test BLEU and chrF and the last validation NLL, per corpus."""
    common = " ".join(study_overrides("ding_loose_shipped"))
    lines = [
        "# The larger Ding corpus against the shipped one",
        "",
        header("experiments.variant_pages", " (ding_loose)", "results/ding_loose*/"),
        "",
        f"`python train.py {common} seed=S` on the shipped corpus and with "
        f"`data.path={LOOSE_FILE}` (built by `python scripts/rebuild_ding.py --filter loose`: "
        "the same valid and test pairs, a train split of the looser filter). Test: greedy "
        "decoding of the best-validation checkpoint, sacrebleu; mean ± sample std over seeds. "
        "The validation NLL is of each corpus' own pieces (each trains its own 4,000-piece "
        "tokenizer), so it does not compare across the rows; BLEU and chrF do.",
        "",
        "| corpus | seeds | updates | test BLEU | test chrF | last valid NLL | seeds' BLEU |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    notes = []
    for name, study in LOOSE_ROWS:
        runs = read_runs(results, (study,))
        rs = sorted(
            (r.seed, r.summary.step, t.bleu, t.chrf, r.curve[-1][1])
            for r in runs
            if (t := r.summary.test) and t.bleu is not None and t.chrf is not None
        )
        lines.append(
            f"| {name} | {len(rs)} | {', '.join(sorted({str(r[1]) for r in rs})) or '–'} "
            f"| {mean_std([r[2] for r in rs], 2)} | {mean_std([r[3] for r in rs], 2)} "
            f"| {mean_std([r[4] for r in rs], 3)} "
            f"| {', '.join(f'{r[2]:.2f} (seed {r[0]})' for r in rs) or '–'} |"
        )
        notes.append(f"{name.split()[0].capitalize()} rows: {provenance(runs)}")
    return "\n".join([*lines, "", *notes]) + "\n"


def write_pages(docs: Path = DOCS, results: Path = RESULTS) -> list[Path]:
    """docs/luong_bahdanau.md with its figure and docs/ding_loose.md: the files written."""
    recs = luong_records(results)
    luong, loose = luong_page(recs), loose_page(results)  # both read before anything is written
    drawn = [luong_figure(recs, docs / FIGURE)] if recs else []
    written = [write_text(docs / "luong_bahdanau.md", luong), *drawn]
    return [*written, write_text(docs / "ding_loose.md", loose)]


def main(docs: Path = DOCS, results: Path = RESULTS) -> int:
    """Write the pages; exit 2 with one line naming a run folder that does not read."""
    return page_blocks.report(lambda: write_pages(docs, results))


if __name__ == "__main__":
    sys.exit(main())
