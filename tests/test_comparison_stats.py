"""experiments/comparison_stats.py on toy numbers (issue 36 item 3): the t intervals, the
flattening rule, the main effects and their intervals, sacrebleu's paired bootstrap and the
paragraph generated from them agreeing with planted differences and planted noise."""

from __future__ import annotations

import math
import os
import re
import statistics

import numpy as np
import pytest

from experiments import comparison_stats as cs

# --- t intervals ----------------------------------------------------------------------------


def _one_cell_half(values: list[float], confidence: float = 0.95) -> float:
    """Half the interval main_effects gives the mean of one cell: t_{(1+c)/2, n−1}·s/√n."""
    fit = cs.main_effects([("a", "b", v) for v in values], True, confidence=confidence)
    level = fit.a.level("a")
    return (level.mean_high - level.mean_low) / 2.0


@pytest.mark.parametrize(
    ("df", "table"),
    [(1, 12.706), (2, 4.303), (5, 2.571), (10, 2.228), (30, 2.042), (120, 1.980)],
)
def test_the_t_quantile_of_the_intervals_matches_the_table(df: int, table: float) -> None:
    values = [float(i * i) for i in range(df + 1)]
    t = _one_cell_half(values) * math.sqrt(len(values)) / statistics.stdev(values)
    assert t == pytest.approx(table, abs=5e-4)


def test_the_confidence_sets_the_t_quantile_by_closed_forms() -> None:
    # q = (1 + c)/2; df = 1 is the Cauchy distribution: t_q = tan(π (q − ½)) = tan(π c / 2);
    # df = 2: t_q = (2q − 1)·sqrt(2 / (4q(1 − q))) = c·sqrt(2 / (1 − c²)).
    # 0, 2: s = √2, n = 2, half = t; 1, 2, 3: s = 1, n = 3, half = t / √3
    for c in (0.2, 0.8, 0.98, 0.999):
        assert _one_cell_half([0.0, 2.0], c) == pytest.approx(math.tan(math.pi * c / 2), rel=1e-9)
        assert _one_cell_half([1.0, 2.0, 3.0], c) == pytest.approx(
            c * math.sqrt(2 / (1 - c * c)) / math.sqrt(3), rel=1e-9
        )
    for c in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="confidence"):
            cs.main_effects([("a", "b", 1.0), ("a", "b", 2.0)], True, confidence=c)


# --- flattening rule ------------------------------------------------------------------------


def _planted(step: int) -> float:
    return 3.0 + 2.0 * math.exp(-step / 1000.0)


def test_planted_curve_flattens_where_computed_by_hand() -> None:
    curve = [(s, _planted(s)) for s in range(250, 10_001, 250)]
    # The curve falls monotonically, so the best NLL up to a step is its value there.
    # L = 4500: 0.8·L = 3600, last validation 3500: (f(3500) − f(4500)) / f(3500)
    #   = (3.060395 − 3.022218) / 3.060395 = 0.01247 >= 1%: not yet.
    # L = 4750: 0.8·L = 3800, last validation 3750: (f(3750) − f(4750)) / f(3750)
    #   = (3.047035 − 3.017303) / 3.047035 = 0.00976 < 1%: flattened.
    # Every earlier L is at least 1.6% (e.g. 3750 vs 3000: 1.70%, 4250 vs 3250: 1.59%).
    assert cs.flattened_at(curve) == 4750
    # a looser tolerance flattens earlier, a stricter one later
    assert cs.flattened_at(curve, tol=0.02) == 3750  # 3500 vs 2750: 2.16%, 3750 vs 3000: 1.70%
    flat_strict = cs.flattened_at(curve, tol=0.005)
    assert flat_strict is not None and flat_strict > 4750


def test_the_improvement_is_relative_to_the_earlier_best() -> None:
    # (2.0 − 1.2) / 2.0 = 0.4 < 0.5 flattens at 125; relative to the later best, 0.8 / 1.2, not
    assert cs.flattened_at([(100, 2.0), (125, 1.2)], tol=0.5) == 125
    assert cs.flattened_at([(100, 2.0), (125, 1.2)], tol=0.4) is None


def test_a_curve_still_falling_steeply_never_flattens() -> None:
    curve = [(s, 10.0 * math.exp(-s / 500.0)) for s in range(100, 3001, 100)]
    assert cs.flattened_at(curve) is None


def test_a_late_bump_is_absorbed_by_the_best_so_far() -> None:
    rng = np.random.default_rng(7)
    steps = list(range(250, 10_001, 250))
    curve = [(s, _planted(s) + float(rng.normal(0.0, 0.002))) for s in steps]
    # Overfitting late: the NLL rises by 0.5 after step 6000. The best so far does not rise,
    # so the curve stays flattened at the same step as without the bump.
    bumped = [(s, nll + (0.5 if s > 6000 else 0.0)) for s, nll in curve]
    flat = cs.flattened_at(curve)
    assert flat is not None and 4000 <= flat <= 5500
    assert cs.flattened_at(bumped) == flat
    # A bump before flattening: the best so far ignores it, the rule does not restart there.
    early = [(s, nll + (1.0 if s == 2000 else 0.0)) for s, nll in curve]
    assert cs.flattened_at(early) == flat


def test_too_short_curves_do_not_flatten() -> None:
    assert cs.flattened_at([]) is None
    assert cs.flattened_at([(500, 3.0)]) is None
    # (1 − 0.2)·500 = 400 < the first step 450: L = 500 has no earlier validation to compare to
    assert cs.flattened_at([(450, 3.0), (500, 3.0)]) is None
    # but with the first validation at 400 it has, and a flat curve flattens at once
    assert cs.flattened_at([(400, 3.0), (500, 3.0)]) == 500
    with pytest.raises(ValueError):
        cs.flattened_at([(500, 3.0), (400, 2.0)])


# --- main effects ---------------------------------------------------------------------------

ALPHA = {"dot": 1.0, "general": 0.0, "concat": -1.0}  # planted scorer effects
BETA = {"global": 0.5, "local_m": -0.5}  # planted mode effects


def _grid(
    mu: float,
    alpha: dict[str, float],
    beta: dict[str, float],
    seeds: int,
    noise: float = 0.0,
    rng_seed: int = 0,
    skip: tuple[tuple[str, str], ...] = (),
) -> list[tuple[str, str, float]]:
    rng = np.random.default_rng(rng_seed)
    return [
        (a, b, mu + alpha[a] + beta[b] + float(rng.normal(0.0, noise)))
        for a in alpha
        for b in beta
        if (a, b) not in skip
        for _ in range(seeds)
    ]


def test_balanced_grid_without_noise_gives_the_planted_means_exactly() -> None:
    rows = _grid(10.0, ALPHA, BETA, seeds=1)
    fit = cs.main_effects(rows, higher_is_better=True, factors=("scorer", "mode"))
    # By hand: scorer means = 10 + α + mean(β) = 10 + α (β sums to 0); mode means = 10 + β.
    assert [e.mean for e in fit.a.levels] == pytest.approx([11.0, 10.0, 9.0])
    assert [e.mean for e in fit.b.levels] == pytest.approx([10.5, 9.5])
    assert (fit.a.best, fit.b.best) == ("dot", "global")
    assert [e.diff for e in fit.a.levels] == pytest.approx([0.0, -1.0, -2.0])
    assert fit.runs == 6 and fit.df == 6 - 4
    assert fit.residual_std == pytest.approx(0.0, abs=1e-9)
    # no residual: every interval is a point, every nonzero difference resolved
    assert [e.resolved for e in fit.a.levels] == [False, True, True]
    assert fit.a.level("concat").diff_low == pytest.approx(-2.0)
    # lower is better (e.g. NLL, AER): the other end is best
    low = cs.main_effects(rows, higher_is_better=False)
    assert (low.a.best, low.b.best) == ("concat", "local_m")
    assert low.a.level("dot").diff == pytest.approx(2.0)


def test_a_planted_difference_with_small_noise_is_resolved_and_covered() -> None:
    rows = _grid(10.0, ALPHA, BETA, seeds=3, noise=0.1, rng_seed=1)
    fit = cs.main_effects(rows, higher_is_better=True)
    assert fit.a.best == "dot"
    concat = fit.a.level("concat")
    assert concat.resolved
    assert concat.diff_low < -2.0 < concat.diff_high  # the planted difference α_concat − α_dot
    assert 0.05 < fit.residual_std < 0.2
    assert fit.b.level("local_m").diff_low < -1.0 < fit.b.level("local_m").diff_high
    assert fit.b.level("local_m").resolved
    # the interval is the t interval: half-width = t_{0.975, df} · se, df = 18 − 4
    assert fit.df == 14
    best = fit.a.level("dot")
    assert best.mean_low < best.mean < best.mean_high


TINY_A = {"dot": 0.001, "general": 0.0, "concat": -0.001, "location": 0.0}
TINY_B = {"global": 0.0, "local_m": 0.001, "hard": 0.0}


def test_pure_noise_resolves_nothing() -> None:
    rows = _grid(1.0, TINY_A, TINY_B, seeds=2, noise=1.0, rng_seed=1)
    fit = cs.main_effects(rows, higher_is_better=True)
    assert not any(e.resolved for e in (*fit.a.levels, *fit.b.levels))
    assert 0.5 < fit.residual_std < 1.5
    assert all(e.diff_low < 0.0 < e.diff_high for e in fit.a.levels if e.level != fit.a.best)


def test_bonferroni_widens_the_differences_and_cuts_false_resolutions() -> None:
    # Differences to the estimated best, one comparison at a time, resolve some difference in
    # about 28% of pure-noise 4 × 3 grids (selection of the best + 5 comparisons); Bonferroni
    # within each factor about 12%.
    plain = bonferroni = 0
    for rng_seed in range(200):
        rows = _grid(1.0, TINY_A, TINY_B, seeds=2, noise=1.0, rng_seed=rng_seed)
        fits = [cs.main_effects(rows, True, bonferroni=b) for b in (False, True)]
        resolved = [any(e.resolved for e in (*f.a.levels, *f.b.levels)) for f in fits]
        plain, bonferroni = plain + resolved[0], bonferroni + resolved[1]
        wide, narrow = fits[1].a.level("general"), fits[0].a.level("general")
        assert wide.diff == narrow.diff and wide.mean_low == narrow.mean_low
        if fits[0].a.best != "general":
            assert wide.diff_high - wide.diff_low > narrow.diff_high - narrow.diff_low
    assert 0.18 < plain / 200 < 0.38
    assert 0.05 < bonferroni / 200 < 0.2


def test_the_intervals_have_their_coverage_under_noise() -> None:
    # Two levels of A: "difference to the best" is a two-sided test of α_2 − α_1 = 0, so it is
    # resolved in 5% of pure-noise grids; with df = 12 − 4 = 8 a normal quantile (1.96 instead
    # of 2.306) would resolve about 8%.
    rng = np.random.default_rng(3)
    resolved, covered, trials = 0, 0, 2000
    for _ in range(trials):
        rows = [
            (a, b, float(rng.normal()) + (0.3 if b == "m2" else 0.0))
            for a in ("x", "y")
            for b in ("m1", "m2", "m3")
            for _ in range(2)
        ]
        fit = cs.main_effects(rows, higher_is_better=True)
        other = next(e for e in fit.a.levels if e.level != fit.a.best)
        resolved += other.resolved
        m1 = fit.b.level("m1")
        covered += m1.mean_low < 1.0 / 10.0 < m1.mean_high  # planted mean: 0 + mean(β) = 0.1
    assert 0.035 < resolved / trials < 0.065
    assert 0.935 < covered / trials < 0.965


def test_an_unbalanced_grid_still_recovers_additive_effects() -> None:
    beta = {"global": 0.5, "local_m": -0.5, "hard": 1.0}
    rows = _grid(10.0, ALPHA, beta, seeds=2, skip=(("concat", "hard"),))
    rows = rows[:-1]  # and one seed fewer in the last cell
    fit = cs.main_effects(rows, higher_is_better=True)
    mean_beta = sum(beta.values()) / 3
    assert [e.mean for e in fit.a.levels] == pytest.approx(
        [10 + a + mean_beta for a in ALPHA.values()]
    )
    assert [e.mean for e in fit.b.levels] == pytest.approx([10 + b for b in beta.values()])
    assert [e.runs for e in fit.a.levels] == [6, 6, 3]
    # the raw mean of the concat rows is biased (its missing cell is the best mode); the fit is not
    raw = np.mean([y for a, _, y in rows if a == "concat"])
    assert raw != pytest.approx(fit.a.level("concat").mean)


def test_no_residual_degrees_of_freedom_gives_no_intervals() -> None:
    rows = [("dot", "global", 1.0), ("general", "global", 2.0), ("dot", "local_m", 0.0)]
    fit = cs.main_effects(rows, higher_is_better=True)
    assert fit.df == 0 and math.isnan(fit.residual_std)
    # by hand: μ = 1, α_general = 1, β_local_m = −1; means dot 1 − ½ = 0.5, general 1.5
    assert fit.a.best == "general"
    assert fit.a.level("dot").diff == pytest.approx(-1.0)
    assert all(math.isnan(e.diff_low) and not e.resolved for e in fit.a.levels)
    with pytest.raises(ValueError, match="connect"):  # two islands: (dot, global), (general, hard)
        cs.main_effects([("dot", "global", 1.0), ("general", "hard", 2.0)] * 2, True)


def test_fitted_needs_three_runs_and_connected_cells_and_adjusts() -> None:
    """Two runs or two islands: no fit; else main_effects with Bonferroni (a full 2 × 2 grid:
    level x's mean (1.0 + 2.1) / 2 = 1.55, y's 3.45)."""
    assert cs.fitted([("x", "p", 1.0), ("y", "q", 2.0)], True, ("a", "b")) is None
    assert cs.fitted([("x", "p", 1.0), ("y", "q", 2.0)] * 2, True, ("a", "b")) is None
    rows = [("x", "p", 1.0), ("x", "q", 2.1), ("y", "p", 3.0), ("y", "q", 3.9)]
    fit = cs.fitted(rows, True, ("a", "b"))
    assert fit is not None and fit.bonferroni and fit.a.factor == "a"
    assert fit == cs.main_effects(rows, True, ("a", "b"), bonferroni=True)
    assert fit.a.level("x").mean == pytest.approx(1.55) and fit.a.best == "y"


# --- paired bootstrap -----------------------------------------------------------------------

REFS = [
    "the cat sat on the mat near the door",
    "a dog runs through the park every morning",
    "we are going to the market this afternoon",
    "it has been raining for three days now",
    "she reads a long book about old ships",
    "the children played football in the garden",
    "my brother works at a small bakery in town",
    "they opened the window to let in fresh air",
    "he forgot his keys on the kitchen table",
    "the train to the city leaves at nine",
    "our teacher explained the problem very clearly",
    "the river was cold and the water was clear",
]


def _degrade(sentence: str, every: int) -> str:
    """Drop every ``every``-th word and swap the first two: a worse translation."""
    words = [w for i, w in enumerate(sentence.split()) if i % every != every - 1]
    return " ".join([words[1], words[0], *words[2:]])


def test_paired_bootstrap_against_a_noisy_baseline() -> None:
    env_before = os.environ.get("SACREBLEU_SEED")
    noisy = [_degrade(r, 3) for r in REFS]
    systems = {"noisy": noisy, "same": list(noisy), "perfect": list(REFS)}
    result = cs.paired_bootstrap(REFS, systems, baseline="noisy", samples=500, seed=7)
    assert [s.name for s in result.systems] == ["noisy", "same", "perfect"]
    assert result.system("noisy").p_value is None
    assert result.system("same").p_value == 1.0  # identical output: no evidence of a difference
    assert result.system("same").diff == 0.0
    perfect = result.system("perfect")
    assert perfect.bleu == pytest.approx(100.0)
    assert perfect.p_value is not None and perfect.p_value < 0.05
    assert perfect.diff == pytest.approx(100.0 - result.system("noisy").bleu)
    assert "bs:500" in result.signature and "seed:7" in result.signature
    assert os.environ.get("SACREBLEU_SEED") == env_before  # the seed is set only for the test


def test_paired_bootstrap_is_reproducible_with_its_seed() -> None:
    base = [_degrade(r, 3) for r in REFS]
    close = [_degrade(r, 4) for r in REFS]  # a system whose difference is not clear-cut
    systems = {"base": base, "close": close}
    first = cs.paired_bootstrap(REFS, systems, baseline="base", samples=300, seed=11)
    again = cs.paired_bootstrap(REFS, systems, baseline="base", samples=300, seed=11)
    other = cs.paired_bootstrap(REFS, systems, baseline="base", samples=300, seed=12)
    assert first == again
    assert first.system("close").bootstrap_mean != other.system("close").bootstrap_mean


def test_paired_bootstrap_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        cs.paired_bootstrap(REFS, {"a": REFS}, baseline="b")
    with pytest.raises(ValueError):
        cs.paired_bootstrap(REFS, {"a": REFS[:-1]}, baseline="a")
    with pytest.raises(ValueError):
        cs.paired_bootstrap(REFS, {"a": REFS}, baseline="a", seed=0)


# --- the paragraph --------------------------------------------------------------------------


def _clause(text: str, start: str) -> str:
    """The sentence of ``text`` from ``start`` on (up to a full stop not inside a number)."""
    tail = text[text.index(start) :]
    return re.split(r"\.(?:\s|$)", tail)[0]


def test_the_paragraph_follows_planted_differences() -> None:
    rows = _grid(10.0, ALPHA, BETA, seeds=3, noise=0.1, rng_seed=1)
    fit = cs.main_effects(rows, higher_is_better=True, factors=("scorer", "mode"))
    noisy = [_degrade(r, 3) for r in REFS]
    boot = cs.paired_bootstrap(
        REFS, {"dot global": REFS, "concat local_m": noisy}, "dot global", samples=300
    )
    text = cs.paragraph(fit, "test BLEU", boot)
    assert "\n" not in text
    scorer = _clause(text, "The best scorer")
    assert scorer.startswith("The best scorer is dot at ")
    assert "concat" in _clause(scorer, "resolved differences to it:")
    assert "not resolved" not in scorer  # general (−1) and concat (−2) are both resolved
    mode = _clause(text, "The best mode")
    assert mode.startswith("The best mode is global") and "local_m" in mode
    assert f"residual std of {fit.residual_std:.2f}" in text
    assert "separates from it at p < 0.05: concat local_m" in text


def test_the_paragraph_says_nothing_is_resolved_under_planted_noise() -> None:
    rows = _grid(1.0, TINY_A, TINY_B, seeds=2, noise=1.0, rng_seed=1)
    fit = cs.main_effects(rows, higher_is_better=True, factors=("scorer", "mode"))
    assert not any(e.resolved for e in (*fit.a.levels, *fit.b.levels))
    text = cs.paragraph(fit, "test BLEU")
    assert "no difference to it is resolved" in _clause(text, "The best scorer")
    assert "no difference to it is resolved" in _clause(text, "The best mode")
    assert "resolved differences" not in text
    same = cs.paired_bootstrap(REFS, {"a": REFS, "b": list(REFS)}, "a", samples=100)
    assert "separates nothing from it at p < 0.05: b +0.00 (p = 1.000)" in cs.paragraph(
        fit, "BLEU", same
    )


def test_the_paragraph_changes_with_the_numbers() -> None:
    flipped = {"dot": -1.0, "general": 0.0, "concat": 1.0}
    first = cs.main_effects(_grid(10.0, ALPHA, BETA, 2, 0.1, 1), True, ("scorer", "mode"))
    second = cs.main_effects(_grid(10.0, flipped, BETA, 2, 0.1, 1), True, ("scorer", "mode"))
    text_first, text_second = cs.paragraph(first, "chrF"), cs.paragraph(second, "chrF")
    assert "The best scorer is dot" in text_first
    assert "The best scorer is concat" in text_second
    assert text_first != text_second
    # lower is better: the same numbers read the other way round
    lower = cs.main_effects(_grid(10.0, ALPHA, BETA, 2, 0.1, 1), False, ("scorer", "mode"))
    assert "The best scorer is concat" in cs.paragraph(lower, "AER")
    assert "lower is better" in cs.paragraph(lower, "AER")
    # no degrees of freedom: no intervals, nothing resolved
    bare = cs.main_effects(_grid(10.0, ALPHA, {"global": 0.0}, 1), True, ("scorer", "mode"))
    text = cs.paragraph(bare, "BLEU")
    assert "no residual degrees of freedom" in text and "resolved differences" not in text


def test_flattening_that_stays_skips_a_pause_in_a_falling_curve() -> None:
    """A curve that pauses (one flat stretch) and then falls again: the plain rule stops at
    the pause, ``stays=True`` at the first step from which every later validation passes."""
    nll = [4.8, 4.3, 4.1, 4.0, 3.94, 3.88, 3.85, 3.82, 3.80, 3.775, 3.752, 3.737, 3.724, 3.707,
           3.706, 3.687, 3.677, 3.671, 3.667]  # fmt: skip
    curve = [(250 * (i + 1), v) for i, v in enumerate(nll)]
    assert cs.flattened_at(curve) == 3750  # (3.737 - 3.706) / 3.737 = 0.83% < 1%
    # 4000 vs 3000: (3.737 - 3.687) / 3.737 = 1.34%: falling again; 4250 vs 3250: 1.26%;
    # 4500 vs 3500: (3.707 - 3.671) / 3.707 = 0.97%; 4750 vs 3750: 1.05%: fails again.
    assert cs.flattened_at(curve, stays=True) is None
    assert cs.flattened_at([*curve, (5000, 3.667), (5250, 3.667)], stays=True) == 5000


def test_marginal_table_shows_each_measure_of_each_level() -> None:
    """Two measures over a 2 × 2 additive grid without noise (df = 1, residual 0): scorer x
    = (1 + 2) / 2, mode p = (1 + 3) / 2, zero-width intervals, the worse levels resolved (*),
    a measure without a fit '–', and the run counts when asked."""
    rows = [("x", "p", 1.0), ("x", "q", 2.0), ("y", "p", 3.0), ("y", "q", 4.0)]
    fit = cs.main_effects(rows, True, ("scorer", "mode"))
    lines = cs.marginal_table({"BLEU": (fit.a, fit.b), "AER": ()}, {"BLEU": 2, "AER": 3}, runs=True)
    assert lines == [
        "| factor | level | runs | BLEU | AER |",
        "|---|---|---:|---:|---:|",
        "| scorer | x | 2 | 1.50 [1.50, 1.50]* | – |",
        "| scorer | y | 2 | 3.50 [3.50, 3.50] | – |",
        "| mode | p | 2 | 2.00 [2.00, 2.00]* | – |",
        "| mode | q | 2 | 3.00 [3.00, 3.00] | – |",
    ]
    assert cs.marginal_table({"BLEU": ()}, {"BLEU": 2}) == []


def test_marginal_table_takes_each_factor_from_its_own_fit() -> None:
    """The scorers from a fit over mode p alone (x 1, y 3: one run each, no df, so no
    interval and nothing resolved), the modes from a fit over scorer x alone (p 1, q 2); a
    measure with the scorer factor only shows '–' on the mode rows."""
    rows = [("x", "p", 1.0), ("x", "q", 2.0), ("y", "p", 3.0)]
    over_p = cs.main_effects([r for r in rows if r[1] == "p"], True, ("scorer", "mode"))
    over_x = cs.main_effects([r for r in rows if r[0] == "x"], True, ("scorer", "mode"))
    lines = cs.marginal_table(
        {"BLEU": (over_p.a, over_x.b), "chrF": (over_p.a,)}, {"BLEU": 1, "chrF": 1}, runs=True
    )
    assert lines[2:] == [
        "| scorer | x | 1 | 1.0 | 1.0 |",
        "| scorer | y | 1 | 3.0 | 3.0 |",
        "| mode | p | 1 | 1.0 | – |",
        "| mode | q | 1 | 2.0 | – |",
    ]


# --- interaction and Holm -------------------------------------------------------------------


def test_holm_by_hand() -> None:
    """m = 3: sorted 0.01·3 = 0.03, 0.03·2 = 0.06, 0.04·1 = 0.04 → max(0.06, 0.04) = 0.06;
    in the input's order; capped at 1."""
    assert cs.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert cs.holm([0.5]) == [0.5]
    assert cs.holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert cs.holm([0.6, 0.9]) == [1.0, 1.0]
    assert cs.holm([]) == []
    assert cs.holm([None, 0.02]) == pytest.approx([1.0, 0.04])  # None: a baseline's p of 1


def test_separation_names_the_separated_then_the_rest() -> None:
    assert cs.separation(["a"], ["b", "c"], 0.05) == "at p < 0.05: a; not resolved: b, c"
    assert cs.separation(["a"], [], 0.01) == "at p < 0.01: a"
    assert cs.separation([], ["b", "c"], 0.05) == "at p < 0.05: b, c"


def test_the_interaction_test_by_hand() -> None:
    """2 × 2, two runs a cell, each ±1 around its mean (2, 3, 3, 8): RSS_cells = 8 on
    df2 = 8 − 4 = 4; the interaction contrast 2 − 3 − 3 + 8 = 4 adds r·4²/4 = 8 on df1 = 1,
    so F = (8/1)/(8/4) = 4, p = P(F(1, 4) > 4) = 0.116: not resolved."""
    means = {("a1", "b1"): 2.0, ("a1", "b2"): 3.0, ("a2", "b1"): 3.0, ("a2", "b2"): 8.0}
    rows = [(a, b, m + d) for (a, b), m in means.items() for d in (-1.0, 1.0)]
    test = cs.interaction(rows, ("scorer", "mode"))
    assert test is not None
    assert (test.df1, test.df2) == (1, 4) and test.f == pytest.approx(4.0)
    assert test.p == pytest.approx(0.1161, abs=1e-4) and test.cells == means
    assert cs.interaction_sentence(test, True, 2) == (
        "The scorer × mode interaction is not resolved (F = 4.00 on 1 and 4 degrees of "
        "freedom, p = 0.116)."
    )
    additive = [(a, b, 1.0 * (a == "a2") + 2.0 * (b == "b2") + d) for a, b, _ in rows
                for d in (-0.5, 0.5)]  # fmt: skip
    flat = cs.interaction(additive, ("scorer", "mode"))
    assert flat is not None and flat.f == pytest.approx(0.0, abs=1e-9) and flat.p == 1.0
    one_run_a_cell = [(a, b, m) for (a, b), m in means.items()]
    assert cs.interaction(one_run_a_cell) is None  # no replicate: df2 = 0


def test_the_interaction_p_of_two_and_six_degrees_of_freedom() -> None:
    """3 × 2, two runs a cell, each ±1 around its mean; the interaction part of the cell means
    is ((1, −1), (−1, 1), (0, 0)) on top of main effects: SS = 2·4 = 8 on df1 = 2,
    RSS_cells = 12 on df2 = 12 − 6 = 6, F = (8/2)/(12/6) = 2, and F(2, d2) has
    P(F > f) = (1 + 2f/d2)^(−d2/2) = (5/3)^(−3) = 27/125 (P(F(6, 2) > 2) would be 0.37)."""
    a = {"a1": 0.0, "a2": 1.0, "a3": 3.0}
    e = {("a1", "b1"): 1.0, ("a1", "b2"): -1.0, ("a2", "b1"): -1.0, ("a2", "b2"): 1.0}
    rows = [(x, y, 5.0 + a[x] + 2.0 * (y == "b2") + e.get((x, y), 0.0) + d)
            for x in a for y in ("b1", "b2") for d in (-1.0, 1.0)]  # fmt: skip
    test = cs.interaction(rows)
    assert test is not None and (test.df1, test.df2) == (2, 6)
    assert test.f == pytest.approx(2.0) and test.p == pytest.approx(27 / 125, rel=1e-9)


def test_a_crossed_grid_is_resolved_and_its_cells_shown() -> None:
    """a1 is best in b2 and worst in b1, a2 the reverse (cell means 1.1, 5.1, 5.1, 1.1, runs
    ±0.1): contrast 1.1 − 5.1 − 5.1 + 1.1 = −8, SS = 2·64/4 = 32, RSS_cells = 8·0.01 = 0.08 on
    4 df: F = 32 / 0.02 = 1600. The main effects are flat (every marginal mean 3.1): the
    sentence says they average cells that go different ways and names the best and the worst
    cell with the level they share; the table holds the cell means."""
    means = {("a1", "b1"): 1.1, ("a1", "b2"): 5.1, ("a2", "b1"): 5.1, ("a2", "b2"): 1.1}
    rows = [(a, b, m + d) for (a, b), m in means.items() for d in (-0.1, 0.1)]
    test = cs.interaction(rows, ("scorer", "mode"))
    assert test is not None and test.f == pytest.approx(1600.0) and test.p < 1e-5
    fit = cs.main_effects(rows, True, ("scorer", "mode"))
    assert fit.a.level("a1").mean == pytest.approx(3.1) and fit.a.level("a2").mean == (
        pytest.approx(3.1)
    )
    text = cs.paragraph(fit, "BLEU", crossed=test)
    assert text.endswith(
        "The scorer × mode interaction is resolved (F = 1600.00 on 1 and 4 degrees of freedom, "
        "p < 0.001): what a scorer gains or loses depends on the mode, so each marginal mean "
        "above averages cells that go different ways; the best cell is a1 b2 (5.10), the worst "
        "a2 b2 (1.10), both of the mode b2. The cell means:"
    )
    assert cs.cell_means_rows(test, "BLEU", 2) == [
        "| BLEU: scorer × mode | b1 | b2 |",
        "|---|---:|---:|",
        "| a1 | 1.10 | 5.10 |",
        "| a2 | 5.10 | 1.10 |",
    ]
    lower = cs.interaction_sentence(test, False, 1)
    assert "the best cell is a1 b1 (1.1), the worst a2 b1 (5.1), both of the mode b1" in lower


def test_the_bootstrap_sentence_holm_adjusts_and_says_what_it_leaves_out() -> None:
    """Raw p 0.01, 0.04, 0.03 over 3 tests: Holm gives 0.03, 0.06, 0.06, so only the first
    is separated at 0.05 (unadjusted, all three would be)."""

    def test(name: str, p: float | None) -> cs.SystemTest:
        return cs.SystemTest(name, 10.0, -1.0 if p else 0.0, p, 10.0, 1.0)

    tests = (test("base", None), test("s1", 0.01), test("s2", 0.04), test("s3", 0.03))
    boot = cs.PairedBootstrap("base", 1000, 12345, 50, "sig", tests)
    fit = cs.main_effects(_grid(10.0, ALPHA, BETA, 2, 0.1, 1), True, ("scorer", "mode"))
    text = cs.paragraph(fit, "BLEU", boot)
    assert (
        "against base (BLEU 10.00), its p-values Holm-adjusted over its 3 tests, separates from "
        "it at p < 0.05: s1 -1.00 (p = 0.030); not resolved: s2 -1.00 (p = 0.060), "
        "s3 -1.00 (p = 0.060)."
    ) in text
    assert text.endswith(cs.BOOTSTRAP_NOISE)
    assert "not training variance" in cs.BOOTSTRAP_NOISE
