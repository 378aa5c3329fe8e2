"""The closed studies' pages are frozen final reports (docs/recipe.md, luong_bahdanau.md,
ding_loose.md, and docs/results.md's attention protocol and check at the preset's size; their
generators are in git history): each page still shows its records' figures, and the study
configs that made the runs still load and compose, so the runs can be repeated."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from hydra import compose, initialize_config_dir

from attnmt.train.run_config import validate_config
from experiments.protocol import flattening
from experiments.runs import Run, read_run
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]


def runs(pattern: str) -> list[Run]:
    """Every run folder of the studies results/<pattern>/ (a summary.json in it)."""
    found = sorted(ROOT.glob(f"results/{pattern}/*/summary.json"))
    assert found, f"no run folder under results/{pattern}/"
    return [read_run(path.parent) for path in found]


def spread(values: list[float], digits: int) -> str:
    """How the pages print values over seeds: 'mean ± sample std', one value alone."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def page(name: str) -> str:
    return (ROOT / "docs" / name).read_text(encoding="utf-8")


def test_the_frozen_pages_show_their_records_figures() -> None:
    """A changed record makes its page wrong: every tested run's test BLEU and chrF, every
    untested recipe run's last valid NLL beside its updates, each ding_loose seed's BLEU,
    and each luong_bahdanau variant's params, NLL and BLEU at its last update over its seeds
    stand on the page as the page prints them."""
    recipe = page("recipe.md")
    for run in runs("recipe_*"):
        if (test := run.summary.test) is not None:
            assert f"{test.bleu:.2f}" in recipe and f"{test.chrf:.2f}" in recipe, run.folder
        else:
            assert f"| {run.valid[-1].nll:.3f} | {run.summary.step} |" in recipe, run.folder
        assert f"| {run.summary.step} |" in recipe, run.folder
    loose = page("ding_loose.md")
    for run in runs("ding_loose*"):
        assert run.summary.test is not None, run.folder
        assert f"{run.summary.test.bleu:.2f} (seed {run.seed})" in loose, run.folder
    luong = page("luong_bahdanau.md").splitlines()
    variants: dict[int | None, list[Run]] = defaultdict(list)  # each variant has its own size
    for run in runs("luong_bahdanau*"):
        variants[run.summary.params].append(run)
    assert len(variants) == 5
    for params, seeds in variants.items():
        row = [line for line in luong if f"| {len(seeds)} | {params:,} |" in line]
        last = [r.valid[-1] for r in seeds]
        shown = f"| {spread([v.nll for v in last], 3)} | {spread([v.bleu for v in last], 2)} |"
        assert len(row) == 1 and shown in row[0], (params, shown)


def test_the_frozen_results_sections_show_their_records_figures() -> None:
    """docs/results.md's attention protocol: each probe's row (the 64-unit one marked) holds
    its updates, where the rule finds it flat, its last valid NLL and test BLEU; the check at
    the preset's size: each mode's row at 256 units its test BLEU over its seeds."""
    results = page("results.md").splitlines()
    for run in runs("attention_protocol*"):
        small = run.overrides["model.hidden_size"] != "128"
        row = [x for x in results if x.startswith("| rnn_luong general global")
               and ("(64 units" in x) == small]  # fmt: skip
        test = run.summary.test
        assert len(row) == 1 and test is not None, run.folder
        shown = f"| {run.summary.step} | {flattening(run) or 'not yet'} |"
        assert shown in row[0] and f"| {run.valid[-1].nll:.3f}, {test.bleu:.2f} |" in row[0]
    modes: dict[str, list[float]] = defaultdict(list)
    for run in runs("results_attention_preset"):
        assert run.summary.test is not None, run.folder
        modes[run.overrides["model.attention.mode"]].append(run.summary.test.bleu)
    assert sorted(modes) == ["local_m", "local_p"]
    for mode, bleu in modes.items():
        row = [x for x in results if x.startswith(f"| general | {mode} | 256: the preset's |")]
        assert len(row) == 1 and f"| 2 of 2 (1, 2) | {spread(bleu, 2)} |" in row[0], mode


def test_every_recipe_study_loads_and_its_runs_compose() -> None:
    """The recipe's stages are study configs: each loads through experiments.study, names
    the run folders the records are kept in, and its runs compose with train.py's configs
    to the settings the page describes."""
    studies = {p.stem: load_study(p) for p in sorted((ROOT / "configs/study").glob("recipe_*"))}
    names = {s: [r.name for r in study.runs] for s, study in studies.items()}
    assert names["recipe_compare"][0] == "recipe_variant-as_measured"
    assert len(names["recipe_compare"]) == 7 and names["recipe_seeds"] == [
        "seed-1",
        "seed-2",
        "seed-3",
    ]
    for study, run_names in names.items():  # the committed records are the studies' run folders
        assert sorted(p.name for p in (ROOT / "results" / study).iterdir()) == sorted(run_names)
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        for study in studies.values():  # every run is a valid train.py config
            for run in study.runs:
                validate_config(compose("train", [*study.overrides, *run.grid]))
        compare = studies["recipe_compare"]
        cfg = compose("train", [*compare.overrides, *compare.runs[6].grid])  # dropout02_tokens2048
        assert (cfg.model.dropout, cfg.trainer.max_tokens, cfg.model.d_model) == (0.2, 2048, 256)
        assert (cfg.trainer.time_budget_min, cfg.trainer.test) == (45, False)
        base = compose("train", [*compare.overrides, *compare.runs[0].grid])
        assert (base.model.dropout, base.trainer.max_tokens) == (0.3, 1024)
        ding = studies["recipe_corpora_ding_de_en"]
        default = compose("train", [*ding.overrides, *ding.runs[3].grid])
        assert default.trainer.early_stopping_patience == 0 and default.model.dropout == 0.1
        assert list(default.trainer.keep_best_at_minutes) == [30, 60]
        loose = compose("train", [*ding.overrides, *ding.runs[2].grid])
        assert loose.data.path == "data/ding_loose/ding_de_en.tsv.xz"
        assert loose.trainer.label_smoothing == 0.2  # the recipe's


def test_the_luong_and_ding_studies_make_their_pages_runs() -> None:
    """The luong_bahdanau studies share the page's trainer settings and make its five
    variants, each run a valid train.py config with a recorded folder (dot's seed 2 never
    ran); ding_loose differs from ding_loose_shipped only in the loose file."""
    studies = [load_study(ROOT / "configs/study" / f"{n}.yaml") for n in ("luong_bahdanau",
               "luong_bahdanau_scorer", "luong_bahdanau_feeding")]  # fmt: skip
    trainer = [o for o in studies[0].overrides if o.startswith("trainer.")]
    assert "trainer.max_steps=500" in trainer
    variants = set()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base=None):
        for study in studies:
            assert [o for o in study.overrides if o.startswith("trainer.")] == trainer
            for run in study.runs:
                cfg = compose("train", [*study.overrides, *run.grid])
                validate_config(cfg)
                assert cfg.data.name == "ding_de_en" and cfg.trainer.max_steps == 500
                feeding = cfg.model.get("input_feeding")  # rnn_luong's only
                variants.add((cfg.model.name, cfg.model.attention.score, feeding))
            recorded = {p.name for p in (ROOT / "results" / study.name).iterdir()}
            assert recorded <= {r.name for r in study.runs} and len(recorded) >= 2
    assert variants == {
        ("rnn_bahdanau", "additive", None),
        ("rnn_luong", "general", True),
        ("rnn_luong", "additive", True),
        ("rnn_luong", "dot", True),
        ("rnn_luong", "general", False),
    }
    loose, shipped = (load_study(ROOT / "configs/study" / f"{n}.yaml").overrides
                      for n in ("ding_loose", "ding_loose_shipped"))  # fmt: skip
    assert loose == (*shipped, "data.path=data/ding_loose/ding_de_en.tsv.xz")
    assert shipped[:2] == ("experiment=results_main", "model=transformer")
