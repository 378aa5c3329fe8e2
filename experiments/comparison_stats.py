"""The statistics of the comparison tables, pure functions: the flattening rule of a validation
curve, the main effects of a two-factor grid (Student-t intervals) and the F test of its
interaction (scipy.stats), sacrebleu's paired bootstrap with Holm's adjustment, and the
paragraph that says what those numbers resolve and what not.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast
from unittest import mock

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest, Result
from scipy import stats

from experiments import page_blocks

Rows = Sequence[tuple[str, str, float]]
"""Runs of a two-factor grid: (level of A, level of B, y)."""
ALPHA = 0.05
"""The level of the tables' tests."""
MIN_RUNS = 3
"""The fewest runs an analysis fits."""


# --- summaries and the flattening rule -----------------------------------------------------
def mean_std(values: Sequence[float], digits: int = 2) -> str:
    """'m ± s' (sample std) over >= 2 values, the value alone for one, '–' for none (NaN left
    out)."""
    values = [v for v in values if not math.isnan(v)]
    if len(values) < 2:
        return f"{values[0]:.{digits}f}" if values else "–"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def flattened_at(
    curve: Sequence[tuple[int, float]], tol: float = 0.01, tail: float = 0.2, stays: bool = False
) -> int | None:
    """The first validation step L at which the curve of (step, NLL) has flattened, or None.

    best(s) = the least NLL at steps <= s; L' = the last validation step <= (1 − tail)·L (L
    is too early to judge without one); L passes when (best(L') − best(L)) / |best(L')| < tol.
    ``stays``: L must also pass at every later validation (a pause in a falling curve does
    not count).
    """
    if not 0.0 < tail < 1.0 or tol <= 0.0:
        raise ValueError(f"need 0 < tail < 1 and tol > 0, got tail={tail}, tol={tol}")
    steps = [step for step, _ in curve]
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError("the curve's steps must be strictly increasing")
    best = np.minimum.accumulate(np.array([nll for _, nll in curve], dtype=float))
    passes = []
    for i, step in enumerate(steps):
        j = bisect.bisect_right(steps, (1.0 - tail) * step, hi=i) - 1  # L'; -1: none
        passes.append(j >= 0 and bool(best[j] - best[i] < tol * abs(best[j])))
    for i, step in enumerate(steps):
        if passes[i] and (not stays or all(passes[i:])):
            return step
    return None


# --- main effects of a two-factor grid and their interaction --------------------------------
@dataclass(frozen=True)
class LevelEffect:
    """One level of a factor: ``mean`` = μ + α_level + the mean of the other factor's β;
    ``diff`` = mean − the best level's mean; each with its interval (NaN when df <= 0);
    ``resolved``: the interval of ``diff`` excludes 0 (never for the best level itself)."""

    level: str
    runs: int
    mean: float
    mean_low: float
    mean_high: float
    diff: float
    diff_low: float
    diff_high: float
    resolved: bool


@dataclass(frozen=True)
class FactorEffects:
    """The levels of one factor, in the order they first appear in the rows."""

    factor: str
    best: str
    levels: tuple[LevelEffect, ...]

    def level(self, name: str) -> LevelEffect:
        return {e.level: e for e in self.levels}[name]


@dataclass(frozen=True)
class MainEffects:
    """The additive fit y = μ + α_a + β_b + ε of a two-factor grid (see :func:`main_effects`)."""

    a: FactorEffects
    b: FactorEffects
    higher_is_better: bool
    confidence: float
    bonferroni: bool
    runs: int
    df: int
    residual_std: float


def _design(rows: Rows) -> tuple[list[str], list[str], np.ndarray, np.ndarray] | None:
    """A's and B's levels, X (n × p: intercept, indicators of A's levels 2.., of B's levels
    2..) and y; None when X is not of full rank (the cells do not connect every level)."""
    levels_a = list(dict.fromkeys(a for a, _, _ in rows))
    levels_b = list(dict.fromkeys(b for _, b, _ in rows))
    a_columns = np.eye(len(levels_a))[[levels_a.index(a) for a, _, _ in rows], 1:]
    b_columns = np.eye(len(levels_b))[[levels_b.index(b) for _, b, _ in rows], 1:]
    x = np.hstack([np.ones((len(rows), 1)), a_columns, b_columns])
    if np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    return levels_a, levels_b, x, np.array([y for _, _, y in rows], dtype=float)


def main_effects(
    rows: Rows,
    higher_is_better: bool,
    factors: tuple[str, str] = ("A", "B"),
    confidence: float = 0.95,
    bonferroni: bool = False,
) -> MainEffects:
    """Least-squares fit of y = μ + α_a + β_b + ε to rows (level of A, level of B, y).

    Reference coding (α, β = 0 for each factor's first level); any grid whose cells connect
    all levels works (missing cells and seeds are fine). s² = RSS / df, df = n − p; a
    contrast c of the coefficients θ has the interval c·θ ± t_{1−γ/2, df}·sqrt(s²·cᵀ(XᵀX)⁻¹c),
    γ = 1 − confidence. These hold one comparison at a time (with k levels, pure noise
    resolves some difference to the estimated best in about 28% of 4 × 3 grids with 2 seeds);
    ``bonferroni`` takes γ/(k − 1) for the differences (then about 12%).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    design = _design(rows)
    if design is None:
        raise ValueError("the observed cells do not connect every level: effects not estimable")
    levels_a, levels_b, x, y = design
    xtx_inv = np.linalg.inv(x.T @ x)
    theta = xtx_inv @ x.T @ y
    df = len(rows) - x.shape[1]
    rss = float(np.sum((y - x @ theta) ** 2))
    s2 = rss / df if df > 0 else math.nan
    cov, gamma = s2 * xtx_inv, 1.0 - confidence

    def interval(c: np.ndarray, comparisons: int) -> tuple[float, float, float]:
        value = float(c @ theta)
        if df <= 0:
            return value, math.nan, math.nan
        t = float(stats.t.ppf(1.0 - gamma / (2.0 * comparisons), df))
        half = t * math.sqrt(max(float(c @ cov @ c), 0.0))
        return value, value - half, value + half

    def factor(column: int, levels: list[str], c: np.ndarray) -> FactorEffects:
        """Row k of c: the coefficients of level k's mean."""
        means = c @ theta
        best = int(np.argmax(means) if higher_is_better else np.argmin(means))
        comparisons = max(len(levels) - 1, 1) if bonferroni else 1
        effects = []
        for k, level in enumerate(levels):
            mean, mean_low, mean_high = interval(c[k], 1)
            diff, low, high = interval(c[k] - c[best], comparisons)
            runs = [row[column] for row in rows].count(level)
            resolved = k != best and (low > 0.0 or high < 0.0)
            effects.append(
                LevelEffect(level, runs, mean, mean_low, mean_high, diff, low, high, resolved)
            )
        return FactorEffects(factors[column], levels[best], tuple(effects))

    a, b = len(levels_a), len(levels_b)  # a level's mean: μ + its effect + the other's mean
    means_a = np.hstack([np.ones((a, 1)), np.eye(a)[:, 1:], np.full((a, b - 1), 1.0 / b)])
    means_b = np.hstack([np.ones((b, 1)), np.full((b, a - 1), 1.0 / a), np.eye(b)[:, 1:]])
    fit_a, fit_b = factor(0, levels_a, means_a), factor(1, levels_b, means_b)
    return MainEffects(
        fit_a, fit_b, higher_is_better, confidence, bonferroni, len(rows), df, math.sqrt(s2)
    )


def fitted(rows: Rows, higher_is_better: bool, factors: tuple[str, str]) -> MainEffects | None:
    """:func:`main_effects`, Bonferroni-adjusted; None with fewer than :data:`MIN_RUNS` rows
    or cells that do not connect every level."""
    if len(rows) < MIN_RUNS or _design(rows) is None:
        return None
    return main_effects(rows, higher_is_better, factors, bonferroni=True)


@dataclass(frozen=True)
class Interaction:
    """The F test of the A × B interaction: the additive fit against the cell-means fit
    y = μ_ab + ε. F = ((RSS_add − RSS_cells) / df1) / (RSS_cells / df2), df2 = n − cells,
    df1 = df_add − df2; p = P(F(df1, df2) > F). ``cells``: each observed (A, B) -> its mean,
    in the order the rows first give them."""

    factors: tuple[str, str]
    f: float
    df1: int
    df2: int
    p: float
    cells: dict[tuple[str, str], float]


def interaction(rows: Rows, factors: tuple[str, str] = ("A", "B")) -> Interaction | None:
    """The :class:`Interaction` of rows (level of A, level of B, y); None when the additive
    fit is not estimable or df1 or df2 is 0 (no cell has two runs, or no free parameter)."""
    design = _design(rows)
    if design is None:
        return None
    _, _, x, y = design
    theta = np.linalg.lstsq(x, y, rcond=None)[0]
    rss_add = float(np.sum((y - x @ theta) ** 2))
    keys = dict.fromkeys((a, b) for a, b, _ in rows)
    cells = {k: statistics.fmean(v for a, b, v in rows if (a, b) == k) for k in keys}
    rss_cells = sum((value - cells[(a, b)]) ** 2 for a, b, value in rows)
    df2 = len(rows) - len(cells)
    df1 = len(rows) - x.shape[1] - df2
    if df1 < 1 or df2 < 1:
        return None
    if rss_cells == 0.0:
        f = math.inf if rss_add > 0.0 else 0.0
    else:
        f = ((rss_add - rss_cells) / df1) / (rss_cells / df2)
    return Interaction(factors, f, df1, df2, float(stats.f.sf(f, df1, df2)), cells)


# --- paired bootstrap ----------------------------------------------------------------------
@dataclass(frozen=True)
class SystemTest:
    """One system against the baseline: BLEU, BLEU − baseline BLEU, sacrebleu's p-value (None
    for the baseline); ``bootstrap_mean`` ± ``ci_half``: sacrebleu's 95% interval of the
    system's own BLEU over the resamples (not of the difference)."""

    name: str
    bleu: float
    diff: float
    p_value: float | None
    bootstrap_mean: float
    ci_half: float


@dataclass(frozen=True)
class PairedBootstrap:
    """sacrebleu's paired bootstrap of each system against ``baseline`` (first in ``systems``)."""

    baseline: str
    samples: int
    seed: int
    segments: int
    signature: str
    systems: tuple[SystemTest, ...]

    def system(self, name: str) -> SystemTest:
        return {s.name: s for s in self.systems}[name]


def paired_bootstrap(
    refs: list[str],
    systems: dict[str, list[str]],
    baseline: str,
    samples: int = 1000,
    seed: int = 12345,
) -> PairedBootstrap:
    """Paired bootstrap resampling of BLEU (Koehn 2004): sacrebleu's PairedTest("bs").

    The segments are resampled ``samples`` times (the same indices for every system);
    p = (#{|Δ*| − mean|Δ*| > |Δ|} + 1) / (samples + 1), Δ = BLEU(system) − BLEU(baseline), Δ*
    its resampled values; Δ = 0 exactly (identical output) is reported as p = 1. Several
    seeds: concatenate each system's outputs in seed order and repeat ``refs`` as often.
    """
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not one of the systems")
    if any(len(hyps) != len(refs) for hyps in systems.values()):
        raise ValueError("every system needs one hypothesis per reference")
    if samples < 1 or seed < 1:
        raise ValueError("samples and seed must be >= 1 (sacrebleu reads seed 0 as unseeded)")
    named: list[tuple[str, Sequence[str]]] = [(baseline, systems[baseline])]
    named += [(name, hyps) for name, hyps in systems.items() if name != baseline]
    with mock.patch.dict(os.environ, {"SACREBLEU_SEED": str(seed)}):  # PairedTest's seed
        test = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=samples)
        signatures, scores = test()
    results = cast(list[Result], scores["BLEU"])
    tests = []
    for i, ((name, _), result) in enumerate(zip(named, results)):
        diff = result.score - results[0].score
        p = None if i == 0 else (1.0 if diff == 0.0 else _float(result.p_value))
        mean, half = _float(result.mean), _float(result.ci)
        tests.append(SystemTest(name, float(result.score), float(diff), p, mean, half))
    return PairedBootstrap(
        baseline, samples, seed, len(refs), str(signatures["BLEU"]), tuple(tests)
    )


def _float(value: float | None) -> float:
    return math.nan if value is None else float(value)


def holm(raw: Sequence[float | None]) -> list[float]:
    """Holm's step-down adjustment, in the input's order (None: 1, a baseline's): with p_(1)
    <= ... <= p_(m), p̃_(i) = max over k <= i of min(1, (m − k + 1)·p_(k))."""
    p_values = [1.0 if p is None else p for p in raw]
    m = len(p_values)
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: p_values[k])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --- tables and paragraphs -----------------------------------------------------------------
def marginal_table(
    fits: Mapping[str, Sequence[FactorEffects]], digits: Mapping[str, int], runs: bool = False
) -> list[str]:
    """``| factor | level | [runs |] mean [low, high][*] | ...`` for the levels of the first
    measure's factors, a column per measure of ``fits`` (its factors, possibly from different
    fits): ``*`` where the difference to the best is resolved, '–' where a measure lacks it;
    [] without levels."""
    first = next((f for f in fits.values() if f), ())
    rows = []
    for factor in first:
        for level in factor.levels:
            cells = []
            for name, factors in fits.items():
                found = [e for f in factors if f.factor == factor.factor
                         for e in f.levels if e.level == level.level]  # fmt: skip
                cells.append(_level_text(found[0], digits[name]) if found else "–")
            rows.append([factor.factor, level.level, *([str(level.runs)] if runs else []), *cells])
    head = ["factor", "level", *(["runs"] if runs else []), *fits]
    return page_blocks.table(head, "ll" + "r" * (len(head) - 2), rows) if rows else []


def _level_text(e: LevelEffect, d: int) -> str:
    star = "*" if e.resolved else ""
    if math.isnan(e.mean_low):
        return f"{e.mean:.{d}f}{star}"
    return f"{e.mean:.{d}f} [{e.mean_low:.{d}f}, {e.mean_high:.{d}f}]{star}"


def cell_means_rows(test: Interaction, measure: str, digits: int) -> list[str]:
    """Markdown table of the cell means: a row per level of A, a column per level of B."""
    rows = list(dict.fromkeys(k[0] for k in test.cells))
    cols = list(dict.fromkeys(k[1] for k in test.cells))
    text = {k: f"{v:.{digits}f}" for k, v in test.cells.items()}
    body = [[r, *(text.get((r, c), "–") for c in cols)] for r in rows]
    head = [f"{measure}: {test.factors[0]} × {test.factors[1]}", *cols]
    return page_blocks.table(head, "l" + "r" * len(cols), body)


def paragraph(
    effects: MainEffects,
    measure: str,
    bootstrap: PairedBootstrap | None = None,
    alpha: float = ALPHA,
    digits: int = 2,
    factors: Sequence[FactorEffects] | None = None,
    scope: str = "",
    crossed: Interaction | None = None,
) -> str:
    """One paragraph from the numbers: the fit (``scope``: which runs it is over), the best
    level of each of ``factors`` (default both) and which differences to it are resolved, the
    interaction test ``crossed``, and what the bootstrap separates (Holm-adjusted p < alpha)."""
    sentences = [_fit_sentence(effects, measure, digits, scope)]
    chosen = (effects.a, effects.b) if factors is None else factors
    sentences += [_factor_sentence(f, effects, digits) for f in chosen]
    if crossed is not None:
        sentences.append(interaction_sentence(crossed, effects.higher_is_better, digits, alpha))
    if bootstrap is not None:
        sentences.append(_bootstrap_sentence(bootstrap, alpha, digits))
    return " ".join(sentences)


def interaction_sentence(test: Interaction, higher: bool, digits: int, alpha: float = ALPHA) -> str:
    """Whether the interaction is resolved (p < alpha); if so, the best and the worst cell and
    the level they share."""
    a, b = test.factors
    p = f"p = {test.p:.3f}" if test.p >= 0.001 else "p < 0.001"
    stat = f"F = {test.f:.2f} on {test.df1} and {test.df2} degrees of freedom, {p}"
    if test.p >= alpha:
        return f"The {a} × {b} interaction is not resolved ({stat})."
    order = sorted(test.cells, key=test.cells.__getitem__, reverse=higher)
    best, worst = order[0], order[-1]
    shared = [f", both of the {f} {x}" for f, x, y in zip(test.factors, best, worst) if x == y]
    return (
        f"The {a} × {b} interaction is resolved ({stat}): what a {a} gains or loses "
        f"depends on the {b}, so each marginal mean above averages cells that go different "
        f"ways; the best cell is {' '.join(best)} ({test.cells[best]:.{digits}f}), the worst "
        f"{' '.join(worst)} ({test.cells[worst]:.{digits}f}){shared[0] if shared else ''}. "
        "The cell means:"
    )


def _fit_sentence(effects: MainEffects, measure: str, digits: int, scope: str) -> str:
    direction = "higher" if effects.higher_is_better else "lower"
    fit = (
        f"On {measure} ({direction} is better), an additive fit of {effects.a.factor} and "
        f"{effects.b.factor} to {effects.runs} runs{scope}"
    )
    if effects.df <= 0:
        return f"{fit} leaves no residual degrees of freedom, so it gives no intervals."
    adjusted = ", those of differences Bonferroni-adjusted within each factor"
    return (
        f"{fit} leaves a residual std of {effects.residual_std:.{digits}f} "
        f"({effects.df} degrees of freedom); intervals are {effects.confidence:.0%}"
        + (adjusted if effects.bonferroni else "")
        + "."
    )


def _factor_sentence(factor: FactorEffects, effects: MainEffects, d: int) -> str:
    best = factor.level(factor.best)
    head = f"The best {factor.factor} is {factor.best} at {best.mean:.{d}f}"
    if effects.df > 0:
        head += f" ({best.mean_low:.{d}f} to {best.mean_high:.{d}f})"
    others = [e for e in factor.levels if e.level != factor.best]
    if not others:
        return head + f"; it is the only {factor.factor}."

    resolved = [e for e in others if e.resolved]
    unresolved = [e for e in others if not e.resolved]
    parts = [head]
    if resolved:
        parts.append("resolved differences to it: " + _differences(resolved, effects, d))
    if unresolved:
        lead = "not resolved: " if resolved else "no difference to it is resolved: "
        parts.append(lead + _differences(unresolved, effects, d))
    return "; ".join(parts) + "."


def _differences(levels: list[LevelEffect], effects: MainEffects, d: int) -> str:
    """'level +diff (low to high), ...' (no interval without residual degrees of freedom)."""
    return ", ".join(
        f"{e.level} {e.diff:+.{d}f}"
        + (f" ({e.diff_low:+.{d}f} to {e.diff_high:+.{d}f})" if effects.df > 0 else "")
        for e in levels
    )


BOOTSTRAP_NOISE = (
    "It resamples the test sentences of the outputs it is given, so it measures the test "
    "set's noise, not training variance: another seed's model is not in it."
)
"""What a paired bootstrap over concatenated seeds' outputs does not measure."""


def _bootstrap_sentence(bootstrap: PairedBootstrap, alpha: float, d: int) -> str:
    others = [s for s in bootstrap.systems if s.p_value is not None]
    head = (
        f"A paired bootstrap of BLEU (sacrebleu, {bootstrap.samples} resamples of "
        f"{bootstrap.segments} segments) against {bootstrap.baseline} "
        f"(BLEU {bootstrap.system(bootstrap.baseline).bleu:.{d}f})"
    )
    if not others:
        return head + " has nothing to compare."
    p = dict(zip((s.name for s in others), holm([s.p_value for s in others])))
    head += f", its p-values Holm-adjusted over its {len(others)} tests,"
    named = {s.name: f"{s.name} {s.diff:+.{d}f} (p = {p[s.name]:.3f})" for s in others}
    separated = [named[s.name] for s in others if p[s.name] < alpha]
    kept = [named[s.name] for s in others if p[s.name] >= alpha]
    verb = "separates from it" if separated else "separates nothing from it"
    return f"{head} {verb} {separation(separated, kept, alpha)}. {BOOTSTRAP_NOISE}"


def separation(separated: Sequence[str], kept: Sequence[str], alpha: float) -> str:
    """'at p < 0.05: A, B; not resolved: C': the tests separated at ``alpha``, else the rest."""
    text = f"at p < {alpha:g}: {', '.join(separated or kept)}"
    return text + (f"; not resolved: {', '.join(kept)}" if separated and kept else "")
