"""What the main table resolves: the text under it in docs/results.md, from its runs.

- Preset and corpus main effects on test BLEU and chrF, the additive fit
  y = μ + α_preset + β_corpus + ε over every run (each seed a run; differences
  Bonferroni-widened within a factor), each factor fitted only where no cell is missing.
- Per corpus, sacrebleu's paired bootstrap of BLEU of each preset against the corpus' best
  by mean test BLEU, over the seeds both have kept test outputs for (hyps/test.txt.xz),
  concatenated in seed order with the references repeated; p-values Holm-adjusted.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from experiments.comparison_stats import (
    BOOTSTRAP_NOISE,
    Interaction,
    MainEffects,
    PairedBootstrap,
    SystemTest,
    holm,
    interaction,
    main_effects,
    marginal_rows,
    paired_bootstrap,
    paragraph,
)
from experiments.runs import Run, kept_hypotheses

FACTORS = ("preset", "corpus")
MEASURES = (("test BLEU", "bleu", 2), ("test chrF", "chrf", 1))
"""(measure, the summary's ``test`` field, digits), in the order they are written."""
MIN_RUNS = 3
SAMPLES = 1000
ALPHA = 0.05

References = Callable[[str], Sequence[str]]
"""Corpus name -> its test references ([] when they cannot be had)."""


def preset(run: Run) -> str:
    return run.summary.model or "?"


def corpus(run: Run) -> str:
    return run.summary.data or "?"


def score(run: Run, key: str) -> float:
    """The run's final test ``key`` (bleu, chrf); NaN without one."""
    value = getattr(run.summary.test, key, None) if run.summary.test else None
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class Fits:
    """The fits of one measure: the presets over ``preset_over`` (the corpora where every
    preset ran), the corpora over ``corpus_over`` (the presets that ran on every corpus): a
    marginal mean over a corpus a preset has no run on would be a guess. With every cell run,
    both are the one fit of all runs and ``crossed`` tests the preset × corpus interaction."""

    preset: MainEffects | None
    corpus: MainEffects | None
    preset_over: tuple[str, ...]
    corpus_over: tuple[str, ...]
    crossed: Interaction | None

    @property
    def complete(self) -> bool:
        return self.preset is self.corpus


def _fit(rows: Sequence[tuple[str, str, float]]) -> MainEffects | None:
    if len(rows) < MIN_RUNS:
        return None
    try:
        return main_effects(rows, True, FACTORS, bonferroni=True)
    except ValueError:  # the observed cells do not connect every level yet
        return None


def effects_of(runs: Sequence[Run], key: str) -> Fits:
    """:class:`Fits` of test ``key`` (higher is better); a fit is None where the runs do not
    yet support it."""
    rows = [(preset(r), corpus(r), v) for r in runs if not math.isnan(v := score(r, key))]
    ran = {(p, c) for p, c, _ in rows}
    presets = list(dict.fromkeys(p for p, _, _ in rows))
    corpora = list(dict.fromkeys(c for _, c, _ in rows))
    full_corpora = tuple(c for c in corpora if all((p, c) in ran for p in presets))
    full_presets = tuple(p for p in presets if all((p, c) in ran for c in corpora))
    if len(full_corpora) == len(corpora):
        fit = _fit(rows)
        crossed = interaction(rows, FACTORS) if fit is not None else None
        return Fits(fit, fit, full_corpora, full_presets, crossed)
    by_preset = _fit([row for row in rows if row[1] in full_corpora]) if full_corpora else None
    by_corpus = _fit([row for row in rows if row[0] in full_presets]) if full_presets else None
    return Fits(by_preset, by_corpus, full_corpora, full_presets, None)


def measure_paragraph(fits: Fits, measure: str, digits: int) -> str:
    """One measure's paragraph: the one fit with its interaction test, or each factor from
    its own fit, saying over which runs."""
    if fits.complete:
        return (
            paragraph(fits.preset, measure, digits=digits, crossed=fits.crossed)
            if fits.preset
            else ""
        )
    parts = []
    if fits.preset is not None:
        scope = f" on {', '.join(fits.preset_over)} (where every preset ran)"
        parts.append(
            paragraph(fits.preset, measure, digits=digits, factors=(fits.preset.a,), scope=scope)
        )
    if fits.corpus is not None:
        scope = f" of {', '.join(fits.corpus_over)} (the presets that ran on every corpus)"
        parts.append(
            paragraph(fits.corpus, measure, digits=digits, factors=(fits.corpus.b,), scope=scope)
        )
    return " ".join(parts)


@dataclass(frozen=True)
class PresetTest:
    """One preset against its corpus' best over ``seeds`` (both have outputs for them)."""

    preset: str
    seeds: tuple[int, ...]
    bootstrap: PairedBootstrap

    @property
    def result(self) -> SystemTest:
        return self.bootstrap.system(self.preset)


@dataclass(frozen=True)
class CorpusBootstrap:
    """A corpus' paired bootstraps: ``runs`` runs, ``kept`` of them with usable test outputs;
    ``untested``: presets that share no kept seed with ``best``."""

    corpus: str
    best: str
    best_bleu: float  # its mean test BLEU over all its runs
    runs: int
    kept: int
    tests: tuple[PresetTest, ...]
    untested: tuple[str, ...]


def corpus_bootstrap(
    name: str, runs: Sequence[Run], refs: Sequence[str], samples: int = SAMPLES
) -> CorpusBootstrap:
    """Each preset on corpus ``name`` against the one of best mean test BLEU, by sacrebleu's
    paired bootstrap (seed 12345) over the seeds both have kept outputs for: each side's
    outputs of those seeds concatenated, ``refs`` repeated (segments = seeds × sentences)."""
    mine = [r for r in runs if corpus(r) == name]
    presets = list(dict.fromkeys(preset(r) for r in mine))
    bleu = {p: statistics.mean(score(r, "bleu") for r in mine if preset(r) == p) for p in presets}
    best = max(presets, key=bleu.__getitem__)
    outputs: dict[tuple[str, int], list[str]] = {}
    for r in mine if refs else ():
        if (lines := kept_hypotheses(r, len(refs))) is not None:
            outputs[(preset(r), r.seed)] = lines
    tests, untested = [], []
    for other in (p for p in presets if p != best):
        seeds = tuple(sorted(s for p, s in outputs if p == other and (best, s) in outputs))
        if not seeds:
            untested.append(other)
            continue
        systems = {p: [line for s in seeds for line in outputs[(p, s)]] for p in (best, other)}
        boot = paired_bootstrap(list(refs) * len(seeds), systems, best, samples)
        tests.append(PresetTest(other, seeds, boot))
    return CorpusBootstrap(
        name, best, bleu[best], len(mine), len(outputs), tuple(tests), tuple(untested)
    )


def bootstraps(
    runs: Sequence[Run], refs_of: References, samples: int = SAMPLES
) -> list[CorpusBootstrap]:
    """:func:`corpus_bootstrap` of every corpus; references are asked for only where a run
    of the corpus kept outputs (preparing a corpus can take long)."""
    out = []
    for name in dict.fromkeys(corpus(r) for r in runs):
        kept = any((r.folder / "hyps" / "test.txt.xz").is_file() for r in runs if corpus(r) == name)
        out.append(corpus_bootstrap(name, runs, refs_of(name) if kept else [], samples))
    return out


def _tests(tests: Sequence[PresetTest], adjusted: Mapping[PresetTest, float], digits: int) -> str:
    return ", ".join(
        f"{t.preset} {t.result.diff:+.{digits}f} ({'seed' if len(t.seeds) == 1 else 'seeds'} "
        f"{', '.join(map(str, t.seeds))}, {t.bootstrap.segments} segments, "
        f"p = {adjusted[t]:.3f})"
        for t in tests
    )


def holm_adjusted(boots: Sequence[CorpusBootstrap]) -> dict[PresetTest, float]:
    """Every test of every corpus -> its p-value Holm-adjusted over all of them."""
    tests = [t for b in boots for t in b.tests]
    raw = [1.0 if t.result.p_value is None else t.result.p_value for t in tests]
    return dict(zip(tests, holm(raw)))


def corpus_sentence(b: CorpusBootstrap, p: Mapping[PresetTest, float], digits: int = 2) -> str:
    """What the bootstrap of one corpus separates from its best preset at the adjusted
    p-values ``p``, and what not."""
    head = f"On {b.corpus} ({b.kept} of {b.runs} runs with kept outputs), against {b.best}"
    head += f" (mean test BLEU {b.best_bleu:.{digits}f})"
    left = f"; no seed in common with it: {', '.join(b.untested)}" if b.untested else ""
    if not b.tests:
        return f"{head}, nothing is tested{left}."
    separated = [t for t in b.tests if p[t] < ALPHA]
    kept = [t for t in b.tests if t not in separated]
    if not separated:
        return f"{head}, nothing is separated at p < {ALPHA:g}: {_tests(kept, p, digits)}{left}."
    text = f"{head}, separated at p < {ALPHA:g}: {_tests(separated, p, digits)}"
    return text + (f"; not resolved: {_tests(kept, p, digits)}" if kept else "") + left + "."


def bootstrap_paragraph(boots: Sequence[CorpusBootstrap], samples: int = SAMPLES) -> str:
    """What the bootstrap is, how many runs it had, one sentence a corpus."""
    runs, kept = sum(b.runs for b in boots), sum(b.kept for b in boots)
    head = (
        f"A paired bootstrap of BLEU per corpus (sacrebleu, {samples} resamples) tests each "
        "preset against the corpus' best preset by mean test BLEU, over the seeds both have kept "
        "test outputs for (concatenated in seed order; BLEU differences are of the concatenation)"
    )
    if kept == 0:
        return f"{head}. None of the {runs} runs has kept test outputs, so it tests nothing."
    adjusted = holm_adjusted(boots)
    text = f"{head}; it had {kept} of the {runs} runs (the others have no kept test outputs)"
    text += f", its p-values Holm-adjusted over its {len(adjusted)} tests." if adjusted else "."
    return " ".join([text, *(corpus_sentence(b, adjusted) for b in boots), BOOTSTRAP_NOISE])


def analysis(runs: Sequence[Run], refs_of: References, samples: int = SAMPLES) -> list[str]:
    """The section: each preset's and corpus' marginal mean with its 95% interval on test
    BLEU and chrF, a paragraph per measure, then the bootstrap's paragraph. ``runs``: the
    main table's, in row order."""
    fits = {name: effects_of(runs, key) for name, key, _ in MEASURES}
    if all(f.preset is None and f.corpus is None for f in fits.values()):
        return ["Not enough runs for the analysis yet."]
    lines = [
        _table_head(fits["test BLEU"], len(runs)),
        "",
        "| factor | level | runs | " + " | ".join(name for name, _, _ in MEASURES) + " |",
        "|---|---|---:|" + "---:|" * len(MEASURES),
    ]
    factors = {
        name: [*([f.preset.a] if f.preset else []), *([f.corpus.b] if f.corpus else [])]
        for name, f in fits.items()
    }
    lines += marginal_rows(factors, {name: digits for name, _, digits in MEASURES}, runs=True)
    lines.append("")
    for name, _, digits in MEASURES:
        if text := measure_paragraph(fits[name], name, digits):
            lines += [text, ""]
    return [*lines, bootstrap_paragraph(bootstraps(runs, refs_of, samples), samples)]


def _table_head(fits: Fits, runs: int) -> str:
    tail = (
        "95% intervals; a level whose difference to its factor's best is resolved, with "
        "Bonferroni-widened intervals, is marked *):"
    )
    if fits.complete:
        return (
            f"Marginal means over the {runs} runs of the table (additive fit of preset and "
            "corpus, every seed a run: the corpus term absorbs the corpora's different levels, "
            f"so the presets compare on the same footing; {tail}"
        )
    return (
        f"Marginal means of the presets over {', '.join(fits.preset_over) or 'no corpus'} (the "
        f"corpora where every preset ran) and of the corpora over "
        f"{', '.join(fits.corpus_over) or 'no preset'} (the presets that ran on every corpus): "
        "a mean over a corpus where a preset has no run would be the additive fit's guess, not "
        "a measurement, and the preset × corpus interaction is tested once every preset has "
        f"run on every corpus (additive fit of preset and corpus, every seed a run; {tail}"
    )
