"""experiments/recipe_page.py and the recipe studies: the study configs load and compose, the
page from planted run folders (figures computed by hand), and docs/recipe.md is what the
committed run folders give."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hydra import compose, initialize_config_dir

from attnmt.train.run_config import validate_config
from experiments import recipe_page
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
ZEN3: dict[str, Any] = {  # an AMD EPYC 25/1 (the cpu25.1 tag)
    "cpu": {"name": "AMD EPYC", "vendor": "AuthenticAMD", "family": 25, "model": 1,
            "flags": ["avx2"]},
    "torch_version": "2.13.0+cpu",
    "threads": 2,
}  # fmt: skip
ZEN4 = {**ZEN3, "cpu": {**ZEN3["cpu"], "model": 17, "flags": ["avx2", "avx512f"]}}


def plant(
    root: Path,
    study: str,
    run: str,
    valid: list[tuple[int, float, float, float]],
    *,
    budget: float = 45,
    machine: dict[str, Any] = ZEN3,
    test: float | None = None,
    marks: dict[int, float] | None = None,
) -> None:
    """A run folder results/<study>/<run>/: valid events (step, minutes, nll, bleu), stopped
    by the time budget (an override), a final test BLEU (chrF = BLEU + 20), tests at marks."""
    folder = root / "results" / study / run
    (folder / ".hydra").mkdir(parents=True)
    summary: dict[str, Any] = {
        "format": "attnmt-run-summary",
        "status": "finished",
        "reason": "time_budget",
        "step": valid[-1][0],
        "minutes": valid[-1][1],
        "params": 6_550_000,
        "precision": "fp32",
        "machine": machine,
        "commit": "abc1234",
    }
    sig = {"bleu_signature": "BLEU|x", "chrf_signature": "chrF2|x"}
    if test is not None:
        summary["test"] = {"beam": 5, "bleu": test, "chrf": test + 20, **sig}
    (folder / "summary.json").write_text(json.dumps(summary))
    start = {"event": "start", "step": 0, "time": 1_795_000_000.0, "precision": "fp32"}
    events = [{**start, "machine": machine, "commit": "abc1234"}] + [
        {"event": "valid", "step": s, "minutes": m, "nll": n, "bleu": b, "chrf": b + 10}
        for s, m, n, b in valid
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / ".hydra" / "overrides.yaml").write_text(f"- trainer.time_budget_min={budget}\n")
    for mark, bleu in (marks or {}).items():
        where = folder / "eval" / f"test-best-at-{mark}min" / "scores.json"
        where.parent.mkdir(parents=True)
        where.write_text(json.dumps({"t": {"beam": 5, "bleu": bleu, "chrf": bleu + 20, **sig}}))


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
    for study, runs in names.items():  # the committed records are the studies' run folders
        assert sorted(p.name for p in (ROOT / "results" / study).iterdir()) == sorted(runs)
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


def test_page_from_planted_run_folders(tmp_path: Path) -> None:
    """The compare table's best-by figures and Δ (per CPU kind), the corpora tables' tests
    at marks and differences, the seeds' mean and ensemble gain, all computed by hand."""
    curve = [(100, 14.0, 4.0, 1.0), (200, 29.0, 3.5, 2.0), (300, 45.1, 3.2, 3.0)]
    plant(tmp_path, "recipe_compare", "recipe_variant-as_measured", curve, machine=ZEN4)
    better = [(100, 14.0, 4.0, 1.5), (200, 29.0, 3.4, 2.5), (300, 45.2, 3.1, 3.2)]
    plant(tmp_path, "recipe_compare", "recipe_variant-layers4", better, machine=ZEN4)
    plant(tmp_path, "recipe_compare", "recipe_variant-dropout02", better)  # on ZEN3
    plant(tmp_path, "recipe_compare_baseline", "recipe_variant-as_measured", curve)  # ZEN3
    ding = [(1000, 29.0, 4.0, 3.0), (2000, 59.0, 3.5, 6.0), (3000, 120.3, 3.4, 7.0)]
    corpora = "recipe_corpora_ding_de_en"
    plant(
        tmp_path,
        corpora,
        "recipe_variant-recipe",
        ding,
        budget=120,
        test=6.5,
        marks={30: 2.0, 60: 5.0},
    )
    plant(
        tmp_path,
        corpora,
        "recipe_variant-default",
        ding,
        budget=120,
        test=4.0,
        marks={30: 3.0, 60: 4.5},
    )
    for seed, bleu in ((1, 7.0), (2, 6.0), (3, 8.0)):
        plant(tmp_path, "recipe_seeds", f"seed-{seed}", ding, budget=0, test=bleu)
    ens = tmp_path / "results/recipe_seeds/seed-1/eval/ensemble/scores.json"
    ens.parent.mkdir(parents=True)
    ens.write_text(json.dumps({"e": {"beam": 5, "bleu": 8.5, "chrf": 28.0}}))
    text = recipe_page.generated(tmp_path)
    # by 15/30/45 min: 1.00, 2.00, 3.00 (45.1 counts at the budget that stopped it)
    assert (
        "| recipe | none: the recipe as measured here (dropout 0.3, 1,024-token batches) "
        "| 1.00 | 2.00 | 3.00 | – | 3.200 | 300 | 6.55M | fp32 | cpu25.17 |"
    ) in text
    assert "| recipe · cpu25.1 |" in text
    assert "| layers4 | 4+4 layers (3+3) | 1.50 | 2.50 | 3.20 | +0.20 (not resolved) |" in text
    assert (
        "| dropout0.2 | dropout 0.2 (0.3) | 1.50 | 2.50 | 3.20 | +0.20 (not resolved) "
        "| 3.100 | 300 | 6.55M | fp32 | cpu25.1 |"
    ) in text
    assert (
        "| ding_de_en | recipe | 2.00 / 22.00 | 5.00 / 25.00 | 6.50 / 26.50 | 5 | 7.00 (120 min) |"
    ) in text
    assert "| ding_de_en | -1.00 | +0.50 | +2.50 |" in text  # recipe - default: 2-3, 5-4.5, 6.5-4
    assert "ding_de_en: not ahead at every mark" in text
    assert "| bible_en_fr | – | – | – |" in text  # no runs: no differences
    # seeds: seed 1 is the corpora run (6.5); 2 and 3 are 6.0 and 8.0: mean 6.83, std 1.04
    assert "| 6.83 ± 1.04 |" in text
    assert "| 1 again (fixed updates: the ensemble's) | 7.00 |" in text
    # the ensemble 8.5 against its members 7, 6, 8: +1.50 over their mean, +0.50 over the best
    assert "| 8.50 (+1.50 over its members' mean, +0.50 over the best) |" in text
    assert "compare: measured on 2 CPU kinds" in text
    assert "](recipe_minutes.png)" in text


def test_page_of_no_run_folders(tmp_path: Path) -> None:
    text = recipe_page.generated(tmp_path)
    assert "**Nothing has been measured yet**" in text
    assert recipe_page.write_page(tmp_path / "recipe.md", tmp_path) == [tmp_path / "recipe.md"]
    assert (tmp_path / "recipe.md").read_text(encoding="utf-8") == text + "\n"


def test_the_hand_written_text_around_the_generated_part_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """write_page replaces what lies from BEGIN to END and nothing else; a page without
    them: exit 2 naming it, left as it was."""
    page = tmp_path / "docs" / "recipe.md"
    page.parent.mkdir()
    stale = f"{recipe_page.BEGIN}\nan old table\n{recipe_page.END}"
    page.write_text(f"# Title\n\nintro\n\n{stale}\n\n## Reading\n\nprose\n", encoding="utf-8")
    assert recipe_page.main(["--out", str(page), "--root", str(tmp_path)]) == 0
    block = recipe_page.generated(tmp_path)
    assert (
        page.read_text(encoding="utf-8") == f"# Title\n\nintro\n\n{block}\n\n## Reading\n\nprose\n"
    )
    page.write_text("# Title\n\nno generated part\n", encoding="utf-8")
    capsys.readouterr()
    assert recipe_page.main(["--out", str(page), "--root", str(tmp_path)]) == 2
    assert f"{page}: no generated part" in capsys.readouterr().err
    assert page.read_text(encoding="utf-8") == "# Title\n\nno generated part\n"


def test_runs_of_two_cpu_kinds_are_not_compared(tmp_path: Path) -> None:
    ding = [(1000, 29.0, 4.0, 3.0), (2000, 59.0, 3.5, 6.0), (3000, 120.3, 3.4, 7.0)]
    corpora = "recipe_corpora_ding_de_en"
    plant(tmp_path, corpora, "recipe_variant-recipe", ding, budget=120, test=6.5)
    plant(tmp_path, corpora, "recipe_variant-default", ding, budget=120, test=4.0, machine=ZEN4)
    text = recipe_page.generated(tmp_path)
    assert "| ding_de_en | other CPU kind: not compared |" in text
    assert "**Not one CPU kind**: the corpora stage's runs on ding_de_en" in text


def test_docs_recipe_md_is_what_the_committed_run_folders_give(tmp_path: Path) -> None:
    """docs/recipe.md's generated part and its figure regenerate from results/recipe_*/ as
    they are; writing the page again leaves it as it is."""
    page = (ROOT / "docs/recipe.md").read_text(encoding="utf-8")
    assert recipe_page.generated(ROOT) in page
    (tmp_path / "recipe.md").write_text(page, encoding="utf-8")
    written = recipe_page.write_page(tmp_path / "recipe.md", ROOT)
    assert written[0].read_text(encoding="utf-8") == page
    assert written[1].read_bytes() == (ROOT / "docs" / recipe_page.FIGURE).read_bytes()


@pytest.mark.parametrize("mark", [30, 60])
def test_marks_read_from_eval_scores(mark: int) -> None:
    """The committed corpora runs' tests at the marks come from eval/test-best-at-<m>min/."""
    recs = recipe_page.read_records(ROOT)
    run = recs.corpus("ding_de_en")
    assert run is not None
    kept = (run.folder / "eval" / f"test-best-at-{mark}min" / "scores.json").read_text()
    assert (
        recs.tests[run.folder, float(mark)][0].bleu == next(iter(json.loads(kept).values()))["bleu"]
    )
    assert recs.test_bleu(run, 120.0) == pytest.approx(6.364182085974369)


@pytest.mark.parametrize(
    ("file", "text", "says"),
    [
        ("summary.json", "{not json", "summary.json: unreadable"),
        (".hydra/overrides.yaml", "[trainer", "overrides.yaml: not YAML"),
        ("eval/test-best-at-30min/scores.json", "{}", "scores.json: not one evaluation"),
        ("eval/test-best-at-30min/scores.json", "[]", "scores.json: 'list' object"),
    ],
)
def test_a_run_folder_that_does_not_read_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], file: str, text: str, says: str
) -> None:
    """A damaged file in a run folder: exit 2, one line naming it, no page written."""
    ding = [(1000, 29.0, 4.0, 3.0)]
    plant(tmp_path, "recipe_corpora_ding_de_en", "recipe_variant-recipe", ding, marks={30: 2.0})
    bad = tmp_path / "results/recipe_corpora_ding_de_en/recipe_variant-recipe" / file
    bad.write_text(text)
    out = tmp_path / "recipe.md"
    assert recipe_page.main(["--out", str(out), "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and says in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
