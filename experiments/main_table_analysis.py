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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.comparison_stats import (
    MainEffects,
    PairedBootstrap,
    SystemTest,
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


def effects_of(records: Sequence[Record], key: str) -> MainEffects | None:
    """Preset and corpus main effects of ``test[key]`` (higher is better) over every record;
    None when the runs do not yet support a fit."""
    rows = [
        (r.cell["model"], r.cell["data"], float(r.test[key]))
        for r in records
        if key in r.test and not math.isnan(float(r.test[key]))
    ]
    if len(rows) < MIN_RUNS:
        return None
    try:
        return main_effects(rows, True, FACTORS, bonferroni=True)
    except ValueError:  # the observed cells do not connect every level yet
        return None


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


def _tests(tests: Sequence[PresetTest], digits: int) -> str:
    return ", ".join(
        f"{t.preset} {t.result.diff:+.{digits}f} ({_seeds(t.seeds)}, {t.bootstrap.segments} "
        f"segments, p = {t.result.p_value:.3f})"
        for t in tests
    )


def corpus_sentence(b: CorpusBootstrap, alpha: float = ALPHA, digits: int = 2) -> str:
    """What the bootstrap of one corpus separates from its best preset and what not."""
    head = f"On {b.corpus} ({b.kept} of {b.runs} runs with kept outputs), against {b.best}"
    head += f" (mean test BLEU {b.best_bleu:.{digits}f})"
    left = f"; no seed in common with it: {', '.join(b.untested)}" if b.untested else ""
    if not b.tests:
        return f"{head}, nothing is tested{left}."
    separated = [t for t in b.tests if t.result.p_value is not None and t.result.p_value < alpha]
    kept = [t for t in b.tests if t not in separated]
    if not separated:
        return f"{head}, nothing is separated at p < {alpha:g}: {_tests(kept, digits)}{left}."
    text = f"{head}, separated at p < {alpha:g}: {_tests(separated, digits)}"
    return text + (f"; not resolved: {_tests(kept, digits)}" if kept else "") + left + "."


def bootstrap_paragraph(boots: Sequence[CorpusBootstrap], samples: int = SAMPLES) -> str:
    """The bootstrap's paragraph: what it is, how many runs it had, one sentence a corpus."""
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
    text = f"{head}; it had {kept} of the {runs} runs (the others have no kept test outputs)."
    return " ".join([text, *(corpus_sentence(b) for b in boots)])


# ---- the section ---------------------------------------------------------------------------


def analysis(
    plan: Plan,
    records: Sequence[Record],
    ledger: Path,
    refs_of: References,
    samples: int = SAMPLES,
) -> list[str]:
    """The generated section: each preset's and corpus' marginal mean with its 95% interval
    on test BLEU and chrF, one paragraph per measure, then the bootstrap's paragraph."""
    runs = main_records(plan, records)
    fits = {name: effects_of(runs, key) for name, key, _ in MEASURES}
    if all(f is None for f in fits.values()):
        return ["Not enough runs for the analysis yet."]
    lines = [
        f"Marginal means over the {len(runs)} runs of the table (additive fit of preset and "
        "corpus, every seed a run: the corpus term absorbs the corpora's different levels, so "
        "the presets compare on the same footing; 95% intervals; a level whose difference to "
        "its factor's best is resolved, with Bonferroni-widened intervals, is marked *):",
        "",
        "| factor | level | runs | " + " | ".join(name for name, _, _ in MEASURES) + " |",
        "|---|---|---:|" + "---:|" * len(MEASURES),
    ]
    lines += marginal_rows(fits, {name: digits for name, _, digits in MEASURES}, runs=True)
    lines.append("")
    for name, _, digits in MEASURES:
        fit = fits[name]
        if fit is not None:
            lines += [paragraph(fit, name, digits=digits), ""]
    lines.append(bootstrap_paragraph(bootstraps(runs, ledger, refs_of, samples), samples))
    return lines
