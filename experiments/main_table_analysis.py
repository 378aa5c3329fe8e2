"""What the main table resolves (docs/results.md says how to read it): preset and corpus
main effects on test BLEU and chrF, y = μ + α_preset + β_corpus + ε over the runs, and per
corpus a paired bootstrap of each preset against the best over the seeds both kept test
outputs for (hyps/test.txt.xz, concatenated, the references repeated), Holm-adjusted."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from experiments.comparison_stats import (
    ALPHA,
    FactorEffects,
    Interaction,
    MainEffects,
    PairedBootstrap,
    SystemTest,
    cell_means_rows,
    fitted,
    holm,
    interaction,
    marginal_table,
    paired_bootstrap,
    paragraph,
    separation,
)
from experiments.runs import Run, kept_hypotheses

FACTORS = ("preset", "corpus")
MEASURES = (("test BLEU", "bleu", 2), ("test chrF", "chrf", 1))
"""(measure, the summary's ``test`` field, digits), in the order they are written."""
SAMPLES = 1000

References = Callable[[str], Sequence[str]]
"""Corpus name -> its test references ([] when they cannot be had)."""
Row = tuple[str, str, float]
"""(preset, corpus, value) of one run."""


def rows(runs: Sequence[Run], key: str) -> list[Row]:
    """(preset, corpus, final test ``key``) of each run that has one."""
    found = [(r.summary.model or "?", r.summary.data or "?", r.test_score(key)) for r in runs]
    return [row for row in found if not math.isnan(row[2])]


@dataclass(frozen=True)
class Fits:
    """One measure's fits: the presets over ``preset_over`` (the corpora where every preset
    ran), the corpora over ``corpus_over`` (the presets that ran on every corpus); with every
    cell run, the one fit of all runs, ``crossed`` its preset × corpus interaction test."""

    preset: MainEffects | None
    corpus: MainEffects | None
    preset_over: tuple[str, ...]
    corpus_over: tuple[str, ...]
    crossed: Interaction | None

    @property
    def complete(self) -> bool:
        return self.preset is self.corpus


def effects_of(runs: Sequence[Run], key: str) -> Fits:
    """:class:`Fits` of test ``key`` (higher is better); None where the runs do not support
    a fit yet."""
    found = rows(runs, key)
    ran = {(p, c) for p, c, _ in found}
    presets = list(dict.fromkeys(p for p, _, _ in found))
    corpora = list(dict.fromkeys(c for _, c, _ in found))
    full_corpora = tuple(c for c in corpora if all((p, c) in ran for p in presets))
    full_presets = tuple(p for p in presets if all((p, c) in ran for c in corpora))
    if len(full_corpora) == len(corpora):
        fit = fitted(found, True, FACTORS)
        crossed = interaction(found, FACTORS) if fit is not None else None
        return Fits(fit, fit, full_corpora, full_presets, crossed)
    by_preset = fitted([row for row in found if row[1] in full_corpora], True, FACTORS)
    by_corpus = fitted([row for row in found if row[0] in full_presets], True, FACTORS)
    return Fits(by_preset, by_corpus, full_corpora, full_presets, None)


def measure_paragraph(fits: Fits, measure: str, digits: int) -> str:
    """One measure's paragraph: the one fit with its interaction test, or each factor from
    its own fit, saying over which runs."""
    if fits.complete:
        fit = fits.preset
        return "" if fit is None else paragraph(fit, measure, digits=digits, crossed=fits.crossed)
    preset = f" on {', '.join(fits.preset_over)} (where every preset ran)"
    corpus = f" of {', '.join(fits.corpus_over)} (the presets that ran on every corpus)"
    parts: list[tuple[MainEffects | None, str, Callable[[MainEffects], FactorEffects]]] = [
        (fits.preset, preset, lambda fit: fit.a),  # a: the presets, b: the corpora
        (fits.corpus, corpus, lambda fit: fit.b),
    ]
    return " ".join(
        paragraph(fit, measure, digits=digits, factors=(factor(fit),), scope=scope)
        for fit, scope, factor in parts
        if fit is not None
    )


@dataclass(frozen=True)
class PresetTest:
    """One preset against its corpus' best over ``seeds`` (both kept outputs for them)."""

    preset: str
    seeds: tuple[int, ...]
    bootstrap: PairedBootstrap

    def text(self, p: float) -> str:
        diff, segments = self.result.diff, self.bootstrap.segments
        seeds = ("seed " if len(self.seeds) == 1 else "seeds ") + ", ".join(map(str, self.seeds))
        return f"{self.preset} {diff:+.2f} ({seeds}, {segments} segments, p = {p:.3f})"

    @property
    def result(self) -> SystemTest:
        return self.bootstrap.system(self.preset)


@dataclass(frozen=True)
class CorpusBootstrap:
    """A corpus' tests: ``runs`` runs, ``kept`` with usable outputs; ``untested``: presets
    sharing no kept seed with ``best`` (``best_bleu``: its mean test BLEU over its runs)."""

    corpus: str
    best: str
    best_bleu: float
    runs: int
    kept: int
    tests: tuple[PresetTest, ...]
    untested: tuple[str, ...]


def corpus_bootstrap(
    name: str, runs: Sequence[Run], refs: Sequence[str], samples: int = SAMPLES
) -> CorpusBootstrap:
    """Each preset on corpus ``name`` against the one of best mean test BLEU over the seeds
    both kept outputs for (segments = seeds × sentences; sacrebleu seed 12345)."""
    mine = [r for r in runs if r.summary.data == name]
    bleu = {p: statistics.mean(v for q, _, v in rows(mine, "bleu") if q == p)
            for p, _, _ in rows(mine, "bleu")}  # fmt: skip
    best = max(bleu, key=bleu.__getitem__)
    outputs = {(r.summary.model, r.seed): lines for r in mine if refs
               if (lines := kept_hypotheses(r, len(refs))) is not None}  # fmt: skip
    tests, untested = [], []
    for other in (p for p in bleu if p != best):
        seeds = tuple(sorted(s for p, s in outputs if p == other and (best, s) in outputs))
        if seeds:
            systems = {p: [line for s in seeds for line in outputs[(p, s)]] for p in (best, other)}
            boot = paired_bootstrap(list(refs) * len(seeds), systems, best, samples)
            tests.append(PresetTest(other, seeds, boot))
        else:
            untested.append(other)
    return CorpusBootstrap(
        name, best, bleu[best], len(mine), len(outputs), tuple(tests), tuple(untested)
    )


def bootstraps(
    runs: Sequence[Run], refs_of: References, samples: int = SAMPLES
) -> list[CorpusBootstrap]:
    """:func:`corpus_bootstrap` of every corpus; references are asked for only where a run
    kept outputs (preparing a corpus can take long)."""
    out = []
    for name in dict.fromkeys(r.summary.data or "?" for r in runs):
        kept = any((r.folder / "hyps" / "test.txt.xz").is_file() for r in runs
                   if r.summary.data == name)  # fmt: skip
        out.append(corpus_bootstrap(name, runs, refs_of(name) if kept else [], samples))
    return out


def holm_adjusted(boots: Sequence[CorpusBootstrap]) -> dict[PresetTest, float]:
    """Every test of every corpus -> its p-value Holm-adjusted over all of them."""
    tests = [t for b in boots for t in b.tests]
    return dict(zip(tests, holm([t.result.p_value for t in tests])))


def corpus_sentence(b: CorpusBootstrap, p: Mapping[PresetTest, float]) -> str:
    """What a corpus' bootstrap separates from its best preset at the adjusted ``p``."""
    head = f"On {b.corpus} ({b.kept} of {b.runs} runs with kept outputs), against {b.best}"
    head += f" (mean test BLEU {b.best_bleu:.2f})"
    left = f"; no seed in common with it: {', '.join(b.untested)}" if b.untested else ""
    if not b.tests:
        return f"{head}, nothing is tested{left}."
    separated = [t.text(p[t]) for t in b.tests if p[t] < ALPHA]
    kept = [t.text(p[t]) for t in b.tests if p[t] >= ALPHA]
    verb = "separated" if separated else "nothing is separated"
    return f"{head}, {verb} {separation(separated, kept, ALPHA)}{left}."


def bootstrap_paragraph(boots: Sequence[CorpusBootstrap], samples: int = SAMPLES) -> str:
    """How many runs the bootstrap had, then one sentence a corpus."""
    runs, kept = sum(b.runs for b in boots), sum(b.kept for b in boots)
    if kept == 0:
        return f"None of the {runs} runs has kept test outputs: the paired bootstrap tests nothing."
    p = holm_adjusted(boots)
    text = (
        f"The paired bootstrap ({samples} resamples) had {kept} of the {runs} runs (the others "
        f"have no kept test outputs), its p-values Holm-adjusted over its {len(p)} tests."
    )
    return " ".join([text, *(corpus_sentence(b, p) for b in boots)])


def analysis(runs: Sequence[Run], refs_of: References, samples: int = SAMPLES) -> list[str]:
    """Each preset's and corpus' marginal mean with its 95% interval on test BLEU and chrF,
    a paragraph per measure (a resolved interaction: then its cell means), the bootstrap's
    paragraph."""
    fits = {name: effects_of(runs, key) for name, key, _ in MEASURES}
    if all(f.preset is None and f.corpus is None for f in fits.values()):
        return ["Not enough runs for the analysis yet."]
    f = fits["test BLEU"]
    factors = {name: [e for e in (g.preset and g.preset.a, g.corpus and g.corpus.b) if e]
               for name, g in fits.items()}  # fmt: skip
    lines = [
        f"Over the {len(runs)} runs of the table:"
        if f.complete
        else f"The presets over {', '.join(f.preset_over) or 'no corpus'} (the corpora where "
        f"every preset ran), the corpora over {', '.join(f.corpus_over) or 'no preset'} (the "
        "presets that ran on every corpus):",
        "",
        *marginal_table(factors, {name: digits for name, _, digits in MEASURES}, runs=True),
        "",
    ]
    for name, _, digits in MEASURES:
        if text := measure_paragraph(fits[name], name, digits):
            lines += [text, ""]
        if (crossed := fits[name].crossed) is not None and crossed.p < ALPHA:
            lines += [*cell_means_rows(crossed, name, digits), ""]  # "The cell means:" ends text
    return [*lines, bootstrap_paragraph(bootstraps(runs, refs_of, samples), samples)]
