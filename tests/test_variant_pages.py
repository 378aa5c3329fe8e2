"""docs/luong_bahdanau.md and docs/ding_loose.md from planted run folders (results/<study>/
<run>/ as experiments/sweep.py --record leaves them): figures computed by hand; the study
configs that make the runs load and name the pages' variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from attnmt.errors import DataError
from experiments import variant_pages as vp
from experiments.runs import read_runs
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]


def plant(
    results: Path,
    study: str,
    run: str,
    overrides: list[str],
    curve: list[tuple[int, float, float]],
    *,
    entropy: float = 0.5,
    test: dict[str, float] | None = None,
) -> Path:
    """A finished run: summary.json (seed from ``overrides``), metrics.jsonl's validations
    ``curve`` (step, NLL, BLEU; the last with ``entropy``), .hydra/overrides.yaml."""
    folder = results / study / run
    (folder / ".hydra").mkdir(parents=True)
    seed = int(next(o for o in overrides if o.startswith("seed=")).split("=")[1])
    summary = {
        "format": "attnmt-run-summary",
        "status": "finished",
        "step": curve[-1][0],
        "seed": seed,
        "params": 1234567,
        "machine": {"cpu": {"name": "Toy CPU"}, "torch_version": "2.0", "threads": 1},
        "commit": "abc1234",
        **({"test": test} if test else {}),
    }
    (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    events = [{"event": "valid", "step": s, "nll": n, "bleu": b} for s, n, b in curve]
    events[-1]["attention_entropy_norm"] = {"cross": entropy}
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (folder / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    return folder


def test_the_luong_bahdanau_page_from_planted_runs(tmp_path: Path) -> None:
    """rnn_bahdanau at NLL 4.0 and 4.2 (mean 4.1, std 0.141), rnn_luong dot at 4.3: +0.200."""
    for seed, nll in ((1, 4.0), (2, 4.2)):
        plant(tmp_path, "luong_bahdanau", f"model-rnn_bahdanau_seed-{seed}",
              ["model=rnn_bahdanau", f"seed={seed}"], [(200, 5.0, 0.5), (500, nll, 1.0)],
              entropy=0.9)  # fmt: skip
    plant(tmp_path, "luong_bahdanau_scorer", "score-dot_seed-1",
          ["model=rnn_luong", "model.attention.score=dot", "seed=1"],
          [(200, 5.5, 0.2), (500, 4.3, 0.5)], entropy=0.3)  # fmt: skip
    recs = vp.luong_records(tmp_path)
    assert [(name, r.seed) for name, r in recs] == [
        ("rnn_bahdanau", 1),
        ("rnn_bahdanau", 2),
        ("rnn_luong dot", 1),
    ]
    page = vp.luong_page(recs)
    assert (
        "| rnn_bahdanau | the reference | 2 | 1,234,567 | 5.000 ± 0.000 | 4.100 ± 0.141 "
        "| 1.00 ± 0.00 | 0.90 ± 0.00 |" in page
    )
    assert "| rnn_luong dot | the scorer's parameters: no W_a at all | 1 | 1,234,567 | 5.500 |" in (
        page
    )
    assert (
        "best first: rnn_bahdanau +0.000 (entropy 0.90); rnn_luong dot +0.200 (entropy 0.30)."
        in page
    )
    assert page.rstrip().endswith("Machines: Toy CPU, 1 thread(s). Commits: abc1234.")
    vp.luong_figure(recs, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_ding_loose_page_from_planted_runs(tmp_path: Path) -> None:
    """Two loose seeds at BLEU 2.0 and 3.0 (mean 2.50, std 0.71), chrF 16 and 18; one
    shipped seed; a shipped run without a test is not a row's seed."""
    for seed, bleu, chrf in ((2, 3.0, 18.0), (1, 2.0, 16.0)):
        plant(tmp_path, "ding_loose", f"seed-{seed}", ["model=transformer", f"seed={seed}"],
              [(1500, 3.5, 2.0)], test={"bleu": bleu, "chrf": chrf})  # fmt: skip
    plant(tmp_path, "ding_loose_shipped", "seed-3", ["seed=3"],
          [(1000, 3.9, 1.0), (1500, 3.4, 4.0)], test={"bleu": 4.0, "chrf": 22.5})  # fmt: skip
    plant(tmp_path, "ding_loose_shipped", "seed-4", ["seed=4"], [(1500, 3.0, 4.0)])
    page = vp.loose_page(tmp_path)
    assert (
        "| loose (47,818 pairs) | 2 | 1500 | 2.50 ± 0.71 | 17.00 ± 1.41 | 3.500 ± 0.000 "
        "| 2.00 (seed 1), 3.00 (seed 2) |" in page
    )
    assert "| shipped (16,824 pairs) | 1 | 1500 | 4.00 | 22.50 | 3.400 | 4.00 (seed 3) |" in page
    assert "Loose rows: Machines: Toy CPU, 1 thread(s). Commits: abc1234." in page
    empty = vp.loose_page(tmp_path / "none")
    assert "| shipped (16,824 pairs) | 0 | – | – | – | – | – |" in empty


def test_a_run_folder_that_is_not_a_record_is_named(tmp_path: Path) -> None:
    folder = plant(tmp_path, "ding_loose", "seed-1", ["seed=1"], [(10, 1.0, 1.0)])
    (folder / "metrics.jsonl").write_text("")
    with pytest.raises(DataError, match=f"{folder}: not a run record"):
        read_runs(tmp_path, ("ding_loose",))


def test_the_command_refuses_a_bad_record_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plant(tmp_path, "luong_bahdanau", "seed-1", ["model=rnn_luong", "seed=1"], [(10, 2.0, 1.0)])
    folder = plant(tmp_path, "ding_loose", "seed-1", ["seed=1"], [(10, 1.0, 1.0)])
    (folder / "metrics.jsonl").write_text("")
    assert vp.main(tmp_path / "docs", tmp_path) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {folder}: not a run record") and err.count("\n") == 1
    assert not (tmp_path / "docs").exists()  # the luong page read fine but is not written


def test_the_studies_make_the_pages_variants() -> None:
    """Every run of the luong_bahdanau studies is one of the page's variants, each variant
    has its runs, all at the page's trainer settings; ding_loose's two studies differ only in
    the loose file."""
    names = set()
    trainer = [o for o in vp.study_overrides("luong_bahdanau") if o.startswith("trainer.")]
    assert "trainer.max_steps=500" in trainer
    for study in vp.LUONG_STUDIES:
        s = load_study(ROOT / "configs" / "study" / f"{study}.yaml")
        assert [o for o in s.overrides if o.startswith("trainer.")] == trainer
        assert "data=ding_de_en" in s.overrides
        for run in s.runs:
            settings = dict(o.split("=", 1) for o in (*s.overrides, *run.grid))
            names.add(vp.variant_of(settings))
    assert names == set(vp.VARIANTS)
    loose, shipped = vp.study_overrides("ding_loose"), vp.study_overrides("ding_loose_shipped")
    assert loose == (*shipped, f"data.path={vp.LOOSE_FILE}")
    assert shipped[:2] == ("experiment=results_main", "model=transformer")


def test_the_committed_runs_give_the_committed_pages() -> None:
    """docs/luong_bahdanau.md is its generator's output from the migrated run folders."""
    page = (ROOT / "docs" / "luong_bahdanau.md").read_text(encoding="utf-8")
    assert page == vp.luong_page(vp.luong_records())
