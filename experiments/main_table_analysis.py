"""What the main table resolves (issue 36 item 3): text generated from its records, under the
main table of docs/results.md (experiments/results_table.py).

- Preset and corpus main effects on test BLEU and chrF: the additive fit
  y = μ + α_preset + β_corpus + ε over every current record of the table, each seed a run
  (:func:`experiments.comparison_stats.main_effects`, differences Bonferroni-widened within a
  factor). The corpus term absorbs the corpora's very different BLEU levels, so a preset's
  marginal mean and its difference to the best preset compare presets on the same footing;
  a preset × corpus interaction, if any, goes into the residual and widens every interval.
- Per corpus, sacrebleu's paired bootstrap of BLEU (:func:`~experiments.comparison_stats.
  paired_bootstrap`) of each preset against the corpus' best preset by mean test BLEU, over the
  seeds both have kept test outputs for (experiments/kept_outputs.py), concatenated in seed
  order with the references repeated. Records without kept outputs (those from before the
  runner kept them) are left out of the bootstrap only; the text says how many runs it had.
- Paragraphs from those numbers (:func:`~experiments.comparison_stats.paragraph`) saying which
  differences are resolved and which are not.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
from experiments.kept_outputs import kept_lines, references
from experiments.ledger import Record
from experiments.results_plan import Plan

FACTORS = ("preset", "corpus")
MEASURES: tuple[tuple[str, str, int], ...] = (("test BLEU", "bleu", 2), ("test chrF", "chrf", 1))
"""(measure, the record's ``test`` key, digits), in the order they are written."""
MIN_RUNS = 3
SAMPLES = 1000
"""Bootstrap resamples (sacrebleu's default)."""
ALPHA = 0.05

References = Callable[[str], Sequence[str]]
"""Corpus name -> its test references ([] when they cannot be had)."""


def main_records(plan: Plan, records: Sequence[Record]) -> list[Record]:
    """The main table's records among ``records``, in the plan's row order, then by seed."""
    out: list[Record] = []
    for cell in (c for c in plan.cells if c.table == "main"):
        mine = [r for r in records if r.table == "main" and r.key == plan.keys[cell]]
        out += sorted(mine, key=lambda r: r.seed)
    return out


@dataclass(frozen=True)
class Fits:
    """The main table's fits of one measure, each over a part where no cell is missing: the
    presets over ``preset_over`` (the corpora where every preset ran), the corpora over
    ``corpus_over`` (the presets that ran on every corpus). A marginal mean over a corpus a
    preset has no run on would be the additive fit's guess, not a measurement. When every
    preset ran on every corpus both are the one fit of all runs and ``crossed`` tests the
    preset × corpus interaction."""

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


def effects_of(records: Sequence[Record], key: str) -> Fits:
    """:class:`Fits` of ``test[key]`` (higher is better) over the records; a fit is None
    when its runs do not yet support it."""
    rows = [
        (r.cell["model"], r.cell["data"], float(r.test[key]))
        for r in records
        if key in r.test and not math.isnan(float(r.test[key]))
    ]
    ran = {(p, c) for p, c, _ in rows}
    presets = list(dict.fromkeys(p for p, _, _ in rows))
    corpora = list(dict.fromkeys(c for _, c, _ in rows))
    full_corpora = tuple(c for c in corpora if all((p, c) in ran for p in presets))
    full_presets = tuple(p for p in presets if all((p, c) in ran for c in corpora))
    if len(full_corpora) == len(corpora):
        fit = _fit(rows)
        crossed = interaction(rows, FACTORS) if fit is not None else None
        return Fits(fit, fit, full_corpora, full_presets, crossed)
    preset = _fit([row for row in rows if row[1] in full_corpora]) if full_corpora else None
    corpus = _fit([row for row in rows if row[0] in full_presets]) if full_presets else None
    return Fits(preset, corpus, full_corpora, full_presets, None)


def measure_paragraph(fits: Fits, measure: str, digits: int) -> str:
    """The paragraph of one measure: the one fit and its interaction test, or each factor
    from its own fit, saying over which runs."""
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


# ---- the paired bootstrap per corpus -------------------------------------------------------


@dataclass(frozen=True)
class PresetTest:
    """One preset against its corpus' best over ``seeds`` (the seeds both have outputs for)."""

    preset: str
    seeds: tuple[int, ...]
    bootstrap: PairedBootstrap

    @property
    def result(self) -> SystemTest:
        return self.bootstrap.system(self.preset)


@dataclass(frozen=True)
class CorpusBootstrap:
    """The paired bootstraps of one corpus: ``runs`` records, ``kept`` of them with usable test
    outputs; ``untested``: presets that share no kept seed with ``best``."""

    corpus: str
    best: str
    best_bleu: float  # its mean test BLEU over all its records
    runs: int
    kept: int
    tests: tuple[PresetTest, ...]
    untested: tuple[str, ...]


def corpus_bootstrap(
    corpus: str,
    records: Sequence[Record],
    ledger: Path,
    refs: Sequence[str],
    samples: int = SAMPLES,
) -> CorpusBootstrap:
    """Each preset of ``corpus`` against the one of best mean test BLEU (over all its records),
    by sacrebleu's paired bootstrap (``samples`` resamples, seed 12345) over the seeds both
    have kept outputs for: each side's outputs of those seeds concatenated in seed order,
    ``refs`` repeated as many times (segments = seeds × sentences)."""
    mine = [r for r in records if r.cell["data"] == corpus]
    presets = list(dict.fromkeys(r.cell["model"] for r in mine))
    bleu = {p: statistics.mean(float(r.test["bleu"]) for r in mine if r.cell["model"] == p)
            for p in presets}  # fmt: skip
    best = max(presets, key=bleu.__getitem__)
    outputs: dict[tuple[str, int], list[str]] = {}
    for r in mine if refs else ():
        lines = kept_lines(r, ledger, len(refs))
        if lines is not None:
            outputs[(r.cell["model"], r.seed)] = lines
    tests, untested = [], []
    for preset in (p for p in presets if p != best):
        seeds = tuple(sorted(s for p, s in outputs if p == preset and (best, s) in outputs))
        if not seeds:
            untested.append(preset)
            continue
        systems = {
            name: [line for s in seeds for line in outputs[(name, s)]] for name in (best, preset)
        }
        boot = paired_bootstrap(list(refs) * len(seeds), systems, best, samples)
        tests.append(PresetTest(preset, seeds, boot))
    return CorpusBootstrap(
        corpus, best, bleu[best], len(mine), len(outputs), tuple(tests), tuple(untested)
    )


def bootstraps(
    records: Sequence[Record], ledger: Path, refs_of: References, samples: int = SAMPLES
) -> list[CorpusBootstrap]:
    """:func:`corpus_bootstrap` of every corpus in ``records``; references are asked for only
    where some record of the corpus names kept outputs (preparing a corpus can take long)."""
    out = []
    for corpus in dict.fromkeys(r.cell["data"] for r in records):
        named = any("hypotheses" in r.extra for r in records if r.cell["data"] == corpus)
        refs = refs_of(corpus) if named else []
        out.append(corpus_bootstrap(corpus, records, ledger, refs, samples))
    return out


def references_of(plan: Plan, root: Path) -> References:
    """Corpus -> the test references of the main table's settings for it (prepared under
    ``root``/data, experiments/kept_outputs.py ``references``), each prepared once."""
    data = {
        c.label["data"]: plan.settings.get(c, {}).get("data")
        for c in plan.cells
        if c.table == "main"
    }
    found: dict[str, list[str]] = {}

    def refs(corpus: str) -> list[str]:
        if corpus not in found:
            found[corpus] = references(data.get(corpus), root)
        return found[corpus]

    return refs


def _seeds(seeds: Sequence[int]) -> str:
    return ("seed " if len(seeds) == 1 else "seeds ") + ", ".join(map(str, seeds))


def _tests(tests: Sequence[PresetTest], adjusted: Mapping[PresetTest, float], digits: int) -> str:
    return ", ".join(
        f"{t.preset} {t.result.diff:+.{digits}f} ({_seeds(t.seeds)}, {t.bootstrap.segments} "
        f"segments, p = {adjusted[t]:.3f})"
        for t in tests
    )


def holm_adjusted(boots: Sequence[CorpusBootstrap]) -> dict[PresetTest, float]:
    """Every test of every corpus -> its p-value Holm-adjusted over all of them."""
    tests = [t for b in boots for t in b.tests]
    raw = [1.0 if t.result.p_value is None else t.result.p_value for t in tests]
    return dict(zip(tests, holm(raw)))


def corpus_sentence(
    b: CorpusBootstrap,
    adjusted: Mapping[PresetTest, float] | None = None,
    alpha: float = ALPHA,
    digits: int = 2,
) -> str:
    """What the bootstrap of one corpus separates from its best preset and what not, at
    ``adjusted`` p-values (default: Holm over this corpus' tests alone)."""
    p = holm_adjusted([b]) if adjusted is None else adjusted
    head = f"On {b.corpus} ({b.kept} of {b.runs} runs with kept outputs), against {b.best}"
    head += f" (mean test BLEU {b.best_bleu:.{digits}f})"
    left = f"; no seed in common with it: {', '.join(b.untested)}" if b.untested else ""
    if not b.tests:
        return f"{head}, nothing is tested{left}."
    separated = [t for t in b.tests if p[t] < alpha]
    kept = [t for t in b.tests if t not in separated]
    if not separated:
        return f"{head}, nothing is separated at p < {alpha:g}: {_tests(kept, p, digits)}{left}."
    text = f"{head}, separated at p < {alpha:g}: {_tests(separated, p, digits)}"
    return text + (f"; not resolved: {_tests(kept, p, digits)}" if kept else "") + left + "."


def bootstrap_paragraph(boots: Sequence[CorpusBootstrap], samples: int = SAMPLES) -> str:
    """The bootstrap's paragraph: what it is, how many runs it had, one sentence a corpus,
    the p-values Holm-adjusted over the tests of every corpus together."""
    runs, kept = sum(b.runs for b in boots), sum(b.kept for b in boots)
    head = (
        f"A paired bootstrap of BLEU per corpus (sacrebleu, {samples} resamples) tests each "
        "preset against the corpus' best preset by mean test BLEU, over the seeds both have kept "
        "test outputs for (concatenated in seed order; BLEU differences are of the concatenation)"
    )
    if kept == 0:
        return (
            f"{head}. None of the {runs} runs has kept test outputs yet (the runner keeps them "
            "since issue 36; earlier records have none), so it tests nothing."
        )
    adjusted = holm_adjusted(boots)
    text = f"{head}; it had {kept} of the {runs} runs (the others have no kept test outputs)"
    text += f", its p-values Holm-adjusted over its {len(adjusted)} tests." if adjusted else "."
    return " ".join([text, *(corpus_sentence(b, adjusted) for b in boots), BOOTSTRAP_NOISE])


# ---- the section ---------------------------------------------------------------------------


def analysis(
    plan: Plan,
    records: Sequence[Record],
    ledger: Path,
    refs_of: References,
    samples: int = SAMPLES,
) -> list[str]:
    """The generated section: each preset's and corpus' marginal mean with its 95% interval
    on test BLEU and chrF (each over the part of the grid where no cell is missing,
    :class:`Fits`), one paragraph per measure, then the bootstrap's paragraph."""
    runs = main_records(plan, records)
    fits = {name: effects_of(runs, key) for name, key, _ in MEASURES}
    if all(f.preset is None and f.corpus is None for f in fits.values()):
        return ["Not enough runs for the analysis yet."]
    lines = [
        _table_head(next(iter(fits.values())), len(runs)),
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
        text = measure_paragraph(fits[name], name, digits)
        lines += [text, ""] if text else []
    lines.append(bootstrap_paragraph(bootstraps(runs, ledger, refs_of, samples), samples))
    return lines


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
