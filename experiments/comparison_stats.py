"""The statistics of the comparison tables (issue 36 item 3): pure functions, no file I/O.

- :func:`t_quantile`: Student-t quantiles (no scipy), for the 95% intervals;
  :func:`t_interval`: the interval of one sample's mean.
- :func:`flattened_at`: the flattening rule that sets a protocol's training length.
- :func:`main_effects`: the additive fit of a two-factor grid with replicate seeds (e.g. scorer
  × mode) and each level's marginal mean and difference to the best level, with intervals;
  :func:`interaction`: the F test of its interaction (additive fit against cell means).
- :func:`paired_bootstrap`: sacrebleu's paired bootstrap resampling of each system against one;
  :func:`holm`: Holm's adjustment of several tests' p-values.
- :func:`paragraph`: one paragraph of text that says what those numbers resolve and what not.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest, Result

# --- Student-t quantile ---------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of I_x(a, b) (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100_000):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b) = B(x; a, b) / B(a, b), for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t), Student's t with df degrees of freedom: 1 − ½·I_{df/(df+t²)}(df/2, ½), t ≥ 0."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


@functools.lru_cache(maxsize=1024)
def t_quantile(q: float, df: int) -> float:
    """t with P(T <= t) = q for Student's t with df degrees of freedom (bisection on t_cdf)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must lie in (0, 1), got {q}")
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    if q == 0.5:
        return 0.0
    low, high = 0.0, 1.0
    while t_cdf(high, df) < q:
        low, high = high, 2.0 * high
    while high - low > 1e-12 * max(1.0, high):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if t_cdf(mid, df) < q else (low, mid)
    return 0.5 * (low + high)


# --- summaries ------------------------------------------------------------------------------


def mean_std(values: Sequence[float], digits: int = 2) -> str:
    """'m ± s' (sample standard deviation) over ≥ 2 values, the value alone for one, '–' for
    none (NaN left out)."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def t_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The ``level`` confidence interval of the mean of ``values`` (Student's t, ≥ 2 values:
    m ± t_{(1+level)/2, n−1} · s/√n); None for fewer."""
    if len(values) < 2:
        return None
    m, s = statistics.mean(values), statistics.stdev(values)
    half = t_quantile((1.0 + level) / 2.0, len(values) - 1) * s / math.sqrt(len(values))
    return m - half, m + half


# --- the flattening rule --------------------------------------------------------------------


def flattened_at(
    curve: Sequence[tuple[int, float]], tol: float = 0.01, tail: float = 0.2, stays: bool = False
) -> int | None:
    """The first validation step L at which the curve has flattened, or None if it never does.

    With best(s) = min of the NLL over validations at steps <= s and L' = the last validation
    step <= (1 − tail)·L, L has flattened when (best(L') − best(L)) / |best(L')| < tol.
    L counts only when (1 − tail)·L >= the first validation step (and L' is before L).
    ``stays``: L must also pass at every later validation of the curve (a pause in a curve
    that goes on falling does not count; the curve must run past L for this to mean much).
    """
    if not 0.0 < tail < 1.0 or tol <= 0.0:
        raise ValueError(f"need 0 < tail < 1 and tol > 0, got tail={tail}, tol={tol}")
    steps = [step for step, _ in curve]
    if any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError("the curve's steps must be strictly increasing")
    best = np.minimum.accumulate(np.array([nll for _, nll in curve], dtype=float))
    passes: list[bool | None] = []  # None: too early to judge
    for i, step in enumerate(steps):
        earlier = _last_at_or_before(steps[:i], (1.0 - tail) * step)
        passes.append(
            None if earlier is None else bool(best[earlier] - best[i] < tol * abs(best[earlier]))
        )
    for i, step in enumerate(steps):
        if passes[i] and (not stays or all(passes[i:])):
            return step
    return None


def _last_at_or_before(steps: Sequence[int], cutoff: float) -> int | None:
    """Index of the last step <= cutoff, None if there is none."""
    index = None
    for i, step in enumerate(steps):
        if step <= cutoff:
            index = i
    return index


# --- main effects of a two-factor grid ------------------------------------------------------


@dataclass(frozen=True)
class LevelEffect:
    """One level of a factor: its marginal mean and its difference to the factor's best level.

    ``mean`` = μ + α_level + mean over the other factor's levels of β; ``diff`` = mean − the
    best level's mean (0 for the best); each with its 95% interval (NaN when df <= 0);
    ``resolved``: the interval of ``diff`` excludes 0 (never for the best level itself).
    """

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
        """The level called ``name``."""
        for effect in self.levels:
            if effect.level == name:
                return effect
        raise KeyError(name)


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


def main_effects(
    rows: Sequence[tuple[str, str, float]],
    higher_is_better: bool,
    factors: tuple[str, str] = ("A", "B"),
    confidence: float = 0.95,
    bonferroni: bool = False,
) -> MainEffects:
    """Least-squares fit of y = μ + α_a + β_b + ε to rows (level of A, level of B, y).

    Reference coding (the first level of each factor has α = β = 0); any grid whose observed
    cells connect all levels works, balanced or not (missing cells and seeds are fine).
    s² = RSS / (n − p) with df = n − p, p = 1 + (|A| − 1) + (|B| − 1); a contrast c of the
    coefficients θ has variance s²·cᵀ(XᵀX)⁻¹c and interval c·θ ± t_{1−γ/2, df}·se, γ = 1 −
    confidence. The intervals hold one comparison at a time: with k levels, some difference to
    the (estimated) best is resolved in pure noise far more often than γ (in about 28% of 4 × 3
    grids with 2 seeds a cell). ``bonferroni`` widens the differences' intervals to γ/(k − 1) a
    comparison (then about 12% of those grids, 6% a factor).
    """
    levels_a = list(dict.fromkeys(a for a, _, _ in rows))
    levels_b = list(dict.fromkeys(b for _, b, _ in rows))
    x = _design(rows, levels_a, levels_b)
    y = np.array([value for _, _, value in rows], dtype=float)
    if np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError("the observed cells do not connect every level: effects not estimable")
    xtx_inv = np.linalg.inv(x.T @ x)
    theta = xtx_inv @ x.T @ y
    df = len(rows) - x.shape[1]
    rss = float(np.sum((y - x @ theta) ** 2))
    s2 = rss / df if df > 0 else math.nan
    fit = _Fit(theta, s2 * xtx_inv, df, 1.0 - confidence)
    first_a, first_b = 1, len(levels_a)  # columns of A's levels 2.., of B's levels 2..
    counts_a = [sum(1 for a, _, _ in rows if a == level) for level in levels_a]
    counts_b = [sum(1 for _, b, _ in rows if b == level) for level in levels_b]
    contrasts_a = _marginal_contrasts(len(theta), first_a, len(levels_a), first_b, len(levels_b))
    contrasts_b = _marginal_contrasts(len(theta), first_b, len(levels_b), first_a, len(levels_a))
    return MainEffects(
        a=_factor(factors[0], levels_a, counts_a, contrasts_a, fit, higher_is_better, bonferroni),
        b=_factor(factors[1], levels_b, counts_b, contrasts_b, fit, higher_is_better, bonferroni),
        higher_is_better=higher_is_better,
        confidence=confidence,
        bonferroni=bonferroni,
        runs=len(rows),
        df=df,
        residual_std=math.sqrt(s2),
    )


@dataclass(frozen=True)
class _Fit:
    theta: np.ndarray
    cov: np.ndarray  # s²(XᵀX)⁻¹; NaN when df <= 0
    df: int
    gamma: float  # 1 − confidence

    def interval(self, c: np.ndarray, comparisons: int = 1) -> tuple[float, float, float]:
        """(c·θ, low, high) with low/high = c·θ ∓ t_{1−γ/(2·comparisons), df}·sqrt(cᵀ Σ c)."""
        value = float(c @ self.theta)
        if self.df <= 0:
            return value, math.nan, math.nan
        t = t_quantile(1.0 - self.gamma / (2.0 * comparisons), self.df)
        half = t * math.sqrt(max(float(c @ self.cov @ c), 0.0))
        return value, value - half, value + half


def _design(
    rows: Sequence[tuple[str, str, float]], levels_a: list[str], levels_b: list[str]
) -> np.ndarray:
    """X (n × p): intercept, indicators of A's levels 2.., indicators of B's levels 2..."""
    x = np.zeros((len(rows), len(levels_a) + len(levels_b) - 1))
    x[:, 0] = 1.0
    for i, (a, b, _) in enumerate(rows):
        ia, ib = levels_a.index(a), levels_b.index(b)
        if ia > 0:
            x[i, ia] = 1.0
        if ib > 0:
            x[i, len(levels_a) - 1 + ib] = 1.0
    return x


def _marginal_contrasts(
    p: int, first: int, count: int, other_first: int, other_count: int
) -> np.ndarray:
    """Row k: the coefficients of μ + (this factor's level k) + mean of the other's levels."""
    c = np.zeros((count, p))
    c[:, 0] = 1.0
    for k in range(1, count):
        c[k, first + k - 1] = 1.0
    c[:, other_first : other_first + other_count - 1] += 1.0 / other_count
    return c


def _factor(
    name: str,
    levels: list[str],
    counts: list[int],
    contrasts: np.ndarray,
    fit: _Fit,
    higher_is_better: bool,
    bonferroni: bool,
) -> FactorEffects:
    means = contrasts @ fit.theta
    best = int(np.argmax(means) if higher_is_better else np.argmin(means))
    comparisons = max(len(levels) - 1, 1) if bonferroni else 1
    effects = []
    for k, level in enumerate(levels):
        mean, mean_low, mean_high = fit.interval(contrasts[k])
        diff, low, high = fit.interval(contrasts[k] - contrasts[best], comparisons)
        resolved = k != best and (low > 0.0 or high < 0.0)
        effects.append(
            LevelEffect(level, counts[k], mean, mean_low, mean_high, diff, low, high, resolved)
        )
    return FactorEffects(name, levels[best], tuple(effects))


@dataclass(frozen=True)
class Interaction:
    """The F test of the A × B interaction: the additive fit y = μ + α_a + β_b + ε against
    the cell-means fit y = μ_ab + ε (every observed cell its own mean).

    F = ((RSS_add − RSS_cells) / df1) / (RSS_cells / df2), df1 = df_add − df2 (the
    interaction's free parameters), df2 = n − cells; p = P(F(df1, df2) > F). ``cells``: each
    observed (level of A, level of B) -> its mean, in the order the rows first give them.
    """

    factors: tuple[str, str]
    f: float
    df1: int
    df2: int
    p: float
    cells: dict[tuple[str, str], float]


def f_sf(f: float, df1: int, df2: int) -> float:
    """P(F > f) for Fisher's F(df1, df2): I_{df2/(df2 + df1·f)}(df2/2, df1/2)."""
    if df1 < 1 or df2 < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df1}, {df2}")
    return 1.0 if f <= 0.0 else betainc(df2 / 2.0, df1 / 2.0, df2 / (df2 + df1 * f))


def interaction(
    rows: Sequence[tuple[str, str, float]], factors: tuple[str, str] = ("A", "B")
) -> Interaction | None:
    """:class:`Interaction` of rows (level of A, level of B, y); None when it cannot be
    tested: the additive fit is not estimable, no cell has two runs (df2 = 0), or the
    observed cells leave the interaction no free parameter (df1 = 0)."""
    levels_a = list(dict.fromkeys(a for a, _, _ in rows))
    levels_b = list(dict.fromkeys(b for _, b, _ in rows))
    x = _design(rows, levels_a, levels_b)
    y = np.array([value for _, _, value in rows], dtype=float)
    if np.linalg.matrix_rank(x) < x.shape[1]:
        return None
    theta = np.linalg.lstsq(x, y, rcond=None)[0]
    rss_add = float(np.sum((y - x @ theta) ** 2))
    groups: dict[tuple[str, str], list[float]] = {}
    for a, b, value in rows:
        groups.setdefault((a, b), []).append(value)
    cells = {k: statistics.fmean(v) for k, v in groups.items()}
    rss_cells = sum((value - cells[(a, b)]) ** 2 for a, b, value in rows)
    df2 = len(rows) - len(cells)
    df1 = len(rows) - x.shape[1] - df2
    if df1 < 1 or df2 < 1:
        return None
    if rss_cells == 0.0:
        f = math.inf if rss_add > 0.0 else 0.0
    else:
        f = ((rss_add - rss_cells) / df1) / (rss_cells / df2)
    return Interaction(factors, f, df1, df2, 0.0 if math.isinf(f) else f_sf(f, df1, df2), cells)


# --- paired bootstrap -----------------------------------------------------------------------


@dataclass(frozen=True)
class SystemTest:
    """One system against the baseline: BLEU, BLEU − baseline BLEU, sacrebleu's p-value.

    ``bootstrap_mean`` ± ``ci_half`` is sacrebleu's 95% interval of the system's own BLEU over
    the resamples (not of the difference); ``p_value`` is None for the baseline itself.
    """

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
        """The test of the system called ``name``."""
        for test in self.systems:
            if test.name == name:
                return test
        raise KeyError(name)


def paired_bootstrap(
    refs: list[str],
    systems: dict[str, list[str]],
    baseline: str,
    samples: int = 1000,
    seed: int = 12345,
) -> PairedBootstrap:
    """Paired bootstrap resampling (Koehn 2004) of BLEU, sacrebleu.significance.PairedTest("bs").

    sacrebleu resamples the segments with replacement ``samples`` times (the same indices for
    every system), and p = (#{|Δ*| − mean|Δ*| > |Δ|} + 1) / (samples + 1) with Δ = BLEU(system)
    − BLEU(baseline) and Δ* its resampled values. Where Δ = 0 exactly (e.g. identical output)
    sacrebleu's strict ">" gives p = 1/(samples + 1); that case is reported as p = 1.

    Several seeds: pass each system's test outputs of seeds 1..k concatenated in seed order and
    ``refs`` repeated k times the same way; the segments are then (seed, sentence) pairs,
    resampled independently of each other.
    """
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not one of the systems")
    if any(len(hyps) != len(refs) for hyps in systems.values()):
        raise ValueError("every system needs one hypothesis per reference")
    if samples < 1 or seed < 1:
        raise ValueError("samples and seed must be >= 1 (sacrebleu reads seed 0 as unseeded)")
    named: list[tuple[str, Sequence[str]]] = [(baseline, systems[baseline])]
    named += [(name, hyps) for name, hyps in systems.items() if name != baseline]
    with _sacrebleu_seed(seed):
        test = PairedTest(named, {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=samples)
        signatures, scores = test()
    results = [_result(item) for item in scores["BLEU"]]
    base = results[0].score
    tests = tuple(
        _system_test(name, result, base, first=i == 0)
        for i, ((name, _), result) in enumerate(zip(named, results))
    )
    return PairedBootstrap(baseline, samples, seed, len(refs), str(signatures["BLEU"]), tests)


@contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    """PairedTest reads its seed from SACREBLEU_SEED: set it for the test, then restore it."""
    before = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if before is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = before


def _result(item: str | Result) -> Result:
    if not isinstance(item, Result):
        raise TypeError(f"unexpected sacrebleu result {item!r}")
    return item


def _system_test(name: str, result: Result, base: float, first: bool) -> SystemTest:
    diff = result.score - base
    p = None if first else (1.0 if diff == 0.0 else _float(result.p_value))
    mean, half = _float(result.mean), _float(result.ci)
    return SystemTest(name, float(result.score), float(diff), p, mean, half)


def _float(value: float | None) -> float:
    return math.nan if value is None else float(value)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of m p-values, in their order: with p_(1) <= ... <= p_(m),
    p̃_(i) = max over k <= i of min(1, (m − k + 1)·p_(k)); rejecting p̃ < α keeps the chance
    of any false rejection among the m tests below α."""
    m = len(p_values)
    out = [1.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda k: p_values[k])):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


# --- the paragraph --------------------------------------------------------------------------


def marginal_rows(
    fits: Mapping[str, Sequence[FactorEffects]],
    digits: Mapping[str, int],
    runs: bool = False,
) -> list[str]:
    """Markdown rows ``| factor | level | [runs |] mean [low, high][*] | ...`` of the levels
    of the first measure's factors, one column per measure of ``fits`` (in its order; each
    measure's factors, e.g. ``(fit.a, fit.b)``, or one factor from each of two fits, or none
    without a fit): the marginal mean with its interval, ``*`` where the difference to the
    factor's best is resolved, '–' where that measure has no such factor or level."""
    first = next((f for f in fits.values() if f), ())
    rows = []
    for factor in first:
        for level in factor.levels:
            cells = []
            for name, factors in fits.items():
                found = [e for f in factors if f.factor == factor.factor
                         for e in f.levels if e.level == level.level]  # fmt: skip
                cells.append(_level_text(found[0], digits[name]) if found else "–")
            lead = f"| {factor.factor} | {level.level} | " + (f"{level.runs} | " if runs else "")
            rows.append(lead + " | ".join(cells) + " |")
    return rows


def _level_text(e: LevelEffect, digits: int) -> str:
    star = "*" if e.resolved else ""
    if math.isnan(e.mean_low):
        return f"{e.mean:.{digits}f}{star}"
    return f"{e.mean:.{digits}f} [{e.mean_low:.{digits}f}, {e.mean_high:.{digits}f}]{star}"


def paragraph(
    effects: MainEffects,
    measure: str,
    bootstrap: PairedBootstrap | None = None,
    alpha: float = 0.05,
    digits: int = 2,
    factors: Sequence[FactorEffects] | None = None,
    scope: str = "",
    crossed: Interaction | None = None,
) -> str:
    """One paragraph from the numbers: the fit (``scope``: which runs it is over, when not
    all), each of ``factors``' (default: both of the fit's) best level with its interval,
    which differences to it are resolved (interval excludes 0) and which not, the residual
    std, the interaction test ``crossed`` when given, and which systems the paired bootstrap
    separates from its baseline (Holm-adjusted p < alpha) and which not."""
    sentences = [_fit_sentence(effects, measure, digits, scope)]
    chosen = (effects.a, effects.b) if factors is None else factors
    sentences += [_factor_sentence(f, effects, digits) for f in chosen]
    if crossed is not None:
        sentences.append(interaction_sentence(crossed, effects.higher_is_better, digits, alpha))
    if bootstrap is not None:
        sentences.append(_bootstrap_sentence(bootstrap, alpha, digits))
    return " ".join(sentences)


def p_text(p: float) -> str:
    """'p = 0.023', or 'p < 0.001' below that."""
    return f"p = {p:.3f}" if p >= 0.001 else "p < 0.001"


def interaction_sentence(test: Interaction, higher: bool, digits: int, alpha: float = 0.05) -> str:
    """Whether the interaction is resolved (p < alpha); when it is, that a level's marginal
    mean averages cells far apart: the best and the worst cell, and the level they share."""
    a, b = test.factors
    stat = f"F = {test.f:.2f} on {test.df1} and {test.df2} degrees of freedom, {p_text(test.p)}"
    if test.p >= alpha:
        return f"The {a} × {b} interaction is not resolved ({stat})."
    order = sorted(test.cells, key=test.cells.__getitem__, reverse=higher)
    best, worst = order[0], order[-1]
    shared = [f"the {f} {x}" for f, x, y in zip(test.factors, best, worst) if x == y]
    return (
        f"The {a} × {b} interaction is resolved ({stat}): what a {a} gains or loses "
        f"depends on the {b}, so each marginal mean above averages cells that go different "
        f"ways; the best cell is {' '.join(best)} "
        f"({_num(test.cells[best], digits)}), the worst {' '.join(worst)} "
        f"({_num(test.cells[worst], digits)})"
        + (f", both of {shared[0]}" if shared else "")
        + ". The cell means:"
    )


def cell_means_rows(test: Interaction, measure: str, digits: int) -> list[str]:
    """Markdown table of the cell means: a row per level of A, a column per level of B."""
    rows = list(dict.fromkeys(k[0] for k in test.cells))
    cols = list(dict.fromkeys(k[1] for k in test.cells))
    lines = [
        f"| {measure}: {test.factors[0]} × {test.factors[1]} | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for r in rows:
        values = [_num(test.cells[(r, c)], digits) if (r, c) in test.cells else "–" for c in cols]
        lines.append(f"| {r} | " + " | ".join(values) + " |")
    return lines


def _num(value: float, digits: int, sign: bool = False) -> str:
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _fit_sentence(effects: MainEffects, measure: str, digits: int, scope: str = "") -> str:
    direction = "higher" if effects.higher_is_better else "lower"
    fit = (
        f"On {measure} ({direction} is better), an additive fit of {effects.a.factor} and "
        f"{effects.b.factor} to {effects.runs} runs{scope}"
    )
    if effects.df <= 0:
        return f"{fit} leaves no residual degrees of freedom, so it gives no intervals."
    return (
        f"{fit} leaves a residual std of {_num(effects.residual_std, digits)} "
        f"({effects.df} degrees of freedom); intervals are {effects.confidence:.0%}"
        + (
            ", those of differences Bonferroni-adjusted within each factor."
            if effects.bonferroni
            else "."
        )
    )


def _factor_sentence(factor: FactorEffects, effects: MainEffects, digits: int) -> str:
    best = factor.level(factor.best)
    head = f"The best {factor.factor} is {factor.best} at {_num(best.mean, digits)}"
    if effects.df > 0:
        head += f" ({_num(best.mean_low, digits)} to {_num(best.mean_high, digits)})"
    others = [e for e in factor.levels if e.level != factor.best]
    if not others:
        return head + f"; it is the only {factor.factor}."
    resolved = [e for e in others if e.resolved]
    unresolved = [e for e in others if not e.resolved]
    if not resolved:
        return f"{head}; no difference to it is resolved: {_differences(others, effects, digits)}."
    parts = [head, "resolved differences to it: " + _differences(resolved, effects, digits)]
    if unresolved:
        parts.append("not resolved: " + _differences(unresolved, effects, digits))
    return "; ".join(parts) + "."


def _differences(levels: list[LevelEffect], effects: MainEffects, digits: int) -> str:
    if effects.df <= 0:
        return ", ".join(f"{e.level} {_num(e.diff, digits, sign=True)}" for e in levels)
    return ", ".join(
        f"{e.level} {_num(e.diff, digits, sign=True)} "
        f"({_num(e.diff_low, digits, sign=True)} to {_num(e.diff_high, digits, sign=True)})"
        for e in levels
    )


BOOTSTRAP_NOISE = (
    "It resamples the test sentences of the outputs it is given, so it measures the test "
    "set's noise, not training variance: another seed's model is not in it."
)
"""What a paired bootstrap over concatenated seeds' outputs does not measure."""


def _bootstrap_sentence(bootstrap: PairedBootstrap, alpha: float, digits: int) -> str:
    base = bootstrap.system(bootstrap.baseline)
    others = [s for s in bootstrap.systems if s.p_value is not None]
    head = (
        f"A paired bootstrap of BLEU (sacrebleu, {bootstrap.samples} resamples of "
        f"{bootstrap.segments} segments) against {bootstrap.baseline} "
        f"(BLEU {_num(base.bleu, digits)})"
    )
    if not others:
        return head + " has nothing to compare."
    raw = [1.0 if s.p_value is None else s.p_value for s in others]
    adjusted = dict(zip((s.name for s in others), holm(raw)))
    head += f", its p-values Holm-adjusted over its {len(others)} tests,"
    separated = [s for s in others if adjusted[s.name] < alpha]
    kept = [s for s in others if s not in separated]
    if not separated:
        text = (
            f"{head} separates nothing from it at p < {alpha:g}: {_tests(kept, adjusted, digits)}."
        )
    else:
        text = f"{head} separates from it at p < {alpha:g}: {_tests(separated, adjusted, digits)}"
        text += f"; not resolved: {_tests(kept, adjusted, digits)}." if kept else "."
    return f"{text} {BOOTSTRAP_NOISE}"


def _tests(tests: list[SystemTest], p: Mapping[str, float], digits: int) -> str:
    return ", ".join(
        f"{s.name} {_num(s.diff, digits, sign=True)} (p = {p[s.name]:.3f})" for s in tests
    )
