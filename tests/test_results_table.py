"""experiments/results_table.py and `make results`: docs/results.md generated from the results
studies' run folders (planted: the main table, mean ± std, machines, curves, missing runs)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers.run_folders import MACHINE, plant_run
from omegaconf import OmegaConf

from attnmt.errors import DataError
from attnmt.train.run_config import validate_config
from experiments import page_blocks
from experiments import results_table as rt
from experiments.protocol import length_config
from experiments.runs import study_cells
from experiments.study import load_study

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "configs" / "study"


def test_span() -> None:
    assert rt.span([]) == "–"
    assert rt.span([3.66, 3.66], "M") == "3.66M"
    assert rt.span([1500, 1800], digits=0) == "1500–1800"


def main_run(
    results: Path, corpus: str, preset: str, seed: int, bleu: float, **more: object
) -> Path:
    langs = {"ding_de_en": ("de", "en"), "bible_en_fr": ("en", "fr")}[corpus]
    steps = {"ding_de_en": 1800, "bible_en_fr": 1500}[corpus]
    config = {
        "data": {"name": corpus, "src_lang": langs[0], "tgt_lang": langs[1]},
        "trainer": {"max_steps": steps, "val_every_steps": 200},
    }
    overrides = ["experiment=results_main", f"data={corpus}", f"model={preset}", f"seed={seed}"]
    name = f"data-{corpus}_model-{preset}_seed-{seed}"
    return plant_run(results, "results_main", name, overrides, bleu, config, **more)


def test_study_cells_group_a_studys_runs_by_seed_and_name_the_missing(tmp_path: Path) -> None:
    """results_main.yaml: 6 rows (corpus × preset, grid order) of 3 seeds; a row's runs are
    the folders with a summary.json, by seed; the others are named missing."""
    main_run(tmp_path, "ding_de_en", "transformer", 2, 6.0)
    main_run(tmp_path, "ding_de_en", "transformer", 1, 4.0)
    (tmp_path / "results_main" / "data-ding_de_en_model-transformer_seed-3").mkdir()  # no summary
    cells = study_cells(tmp_path, load_study(STUDIES / "results_main.yaml"))
    assert [(c.overrides["data"], c.overrides["model"]) for c in cells] == [
        (d, m)
        for d in ("ding_de_en", "bible_en_fr")
        for m in ("transformer", "rnn_bahdanau", "rnn_luong")
    ]
    first = cells[0]
    assert first.overrides["experiment"] == "results_main" and "seed" not in first.overrides
    assert first.seeds == (1, 2, 3) and [r.seed for r in first.runs] == [1, 2]
    assert [r.summary.test.bleu for r in first.runs if r.summary.test] == [4.0, 6.0]
    assert first.missing == ("data-ding_de_en_model-transformer_seed-3",)
    assert cells[1].runs == () and len(cells[1].missing) == 3


def test_the_main_table_machines_curves_and_missing_come_from_run_folders(tmp_path: Path) -> None:
    results = tmp_path / "results"
    other = {**MACHINE, "cpu": {**MACHINE["cpu"], "name": "Other CPU"}}
    main_run(results, "ding_de_en", "transformer", 1, 4.0)
    main_run(results, "ding_de_en", "transformer", 2, 6.0, machine=other, commit="def5678")
    main_run(results, "bible_en_fr", "transformer", 1, 14.0, params=4_684_800, step=1500)
    out = tmp_path / "docs" / "results.md"
    rt.write_docs(results, out, tmp_path / "no_probes")
    text = out.read_text(encoding="utf-8")
    assert "`experiment=results_main`: 1500, 1800 updates per run, seeds 1, 2, 3." in text
    assert (
        "| ding_de_en (de→en) | transformer | 2 of 3 (1, 2) | 5.00 ± 1.41 | 25.00 ± 1.41 "
        "| 3.66M | 400 | 11.5 | M1, M2 |"
    ) in text
    assert (
        "| bible_en_fr (en→fr) | transformer | 1 of 3 (1) | 14.00 | 34.00 | 4.68M | 1500 " in text
    )
    assert "| ding_de_en (de→en) | rnn_luong | 0 of 3 | – | – | – | – | – | not yet run |" in text
    assert "<!-- generated: main analysis -->\n\nOver the 3 runs of the table:" in text
    assert "### Protocol: the main table's length" in text  # one length a corpus, no probe
    assert "| rnn_luong | dot | global | 0 of 2 | – |" in text  # the attention table: no run
    assert "sacrebleu: `BLEU|nrefs:1|toy`; `chrF2|nrefs:1|toy`; beam 1." in text
    machines = text[text.index("## Machines") : text.index("## Still missing")]
    assert (
        "| M1 | Toy CPU (family 25 model 1) avx2, 2 cores, torch 2.13.0, 1 threads | 2 "
        "| 2026-11-26 | abc1234 |"
    ) in machines  # seed 1's runs (planted a day apart per seed)
    assert "| M2 | Other CPU (family 25 model 1) avx2, 2 cores, torch 2.13.0, 1 threads | 1 " in (
        machines
    )
    missing = text[text.index("<!-- generated: missing -->") :].splitlines()[2:-2]
    assert missing[0] == "- results_main: data-ding_de_en_model-transformer_seed-3"
    assert len(missing) == 15 + 56 + 8 + 2 + 4  # the main grid's 18 less 3, the attention studies'
    for corpus in ("ding_de_en", "bible_en_fr"):
        png = f"results_{corpus}.png"
        assert f"![validation BLEU on {corpus} against updates and minutes]({png})" in text
        assert (out.parent / png).read_bytes()[:4] == b"\x89PNG"


def test_every_results_study_run_is_a_valid_run_config() -> None:
    """Seed 1 of every row of the results studies composes (Hydra) to a config train.py takes,
    with the table's settings: the main table's length per corpus; the attention table's
    scorer, mode and 128 units; the Transformer row the preset at its own size; the check at
    the preset's size everything the same cell of the table has but rnn_luong.yaml's size."""
    from hydra import compose, initialize_config_dir

    configs = ROOT / "configs"
    table = OmegaConf.load(configs / "experiment" / "results_attention.yaml")
    preset = OmegaConf.load(configs / "model" / "rnn_luong.yaml")
    composed: dict[tuple[str, str], dict] = {}
    with initialize_config_dir(config_dir=str(configs), version_base="1.3"):
        for name in ("results_main", *rt.ATTENTION, rt.PRESET):
            study = load_study(STUDIES / f"{name}.yaml")
            for run in (r for r in study.runs if "seed=1" in r.grid):
                cfg = compose(config_name="train", overrides=[*study.overrides, *run.grid])
                got = validate_config(cfg)
                if name == "results_main":
                    length = OmegaConf.load(ROOT / length_config(got.data.name)).max_steps
                    assert got.trainer.max_steps == length and got.trainer.time_budget_min == 0
                    continue
                assert got.data.name == "ding_de_en" and got.trainer.precision == "fp32"
                assert got.trainer.max_steps == table.trainer.max_steps
                if name == "results_attention_transformer":
                    assert not any(o.startswith("model.") for o in study.overrides)
                    assert (
                        got.model.d_model
                        == OmegaConf.load(configs / "model" / "transformer.yaml").d_model
                    )
                    continue
                size = preset.hidden_size if name == rt.PRESET else 128
                assert got.model.hidden_size == got.model.emb_dim == size
                key = (got.model.attention.score, got.model.attention.mode)
                plain = OmegaConf.to_container(cfg, resolve=True)
                assert isinstance(plain, dict)
                plain.pop("seed")
                composed.setdefault(key, {})[name] = plain
    assert preset.hidden_size == preset.emb_dim == 256
    for key in (("general", "local_m"), ("general", "local_p")):
        ours, theirs = composed[key][rt.PRESET], composed[key]["results_attention"]
        assert {**ours["model"], "emb_dim": 128, "hidden_size": 128} == theirs["model"]
        assert {k: v for k, v in ours.items() if k != "model"} == {
            k: v for k, v in theirs.items() if k != "model"
        }  # data, trainer, decode: the table's


def test_the_toy_align_grid_is_the_attention_tables_cells() -> None:
    """experiments/alignment_aer.py's GRID: the AER toy_align column's mechanisms, one per
    attention-table row (tests/test_alignment_page.py: the study configs make them)."""
    from experiments.alignment_aer import GRID, grid_name

    cells = rt.cells(ROOT / "results", *rt.ATTENTION)
    of_cells = [
        grid_name(
            c.overrides["model"],
            c.overrides.get("model.attention.score", ""),
            c.overrides.get("model.attention.mode", ""),
        )
        for c in cells
    ]
    assert sorted(of_cells) == sorted(GRID)  # every row has its own GRID mechanism


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_results_runs_the_results_studies_and_the_docs() -> None:
    def dry(*args: str) -> str:
        done = subprocess.run(
            ["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    run = dry("results", "RESULTS_HOURS=1.5")
    for name in ("results_main", *rt.ATTENTION, rt.PRESET):
        assert f"-m experiments.sweep configs/study/{name}.yaml --hours 1.5 --record" in run
    docs = dry("results-docs")
    assert "-m experiments.results_table docs" in docs and "-m experiments.attention_guide" in docs


def test_the_readme_holds_no_generated_table() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "results:main" not in readme and "results:attention" not in readme
    assert "docs/results.md" in readme
    assert "<!-- generated: main -->" in (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def test_page_blocks_rewrite_each_block_and_keep_the_hand_written_text() -> None:
    page = (
        "# T\n\nby hand\n\n<!-- generated: a -->\n\nold a\n\n<!-- end -->\n\nmore by hand\n\n"
        "<!-- generated: b c -->\n<!-- end -->\n"
    )
    filled = page_blocks.fill(page, {"a": ["new a", ""], "b c": ["| x |", "|---|"]}, Path("p"))
    assert filled == (
        "# T\n\nby hand\n\n<!-- generated: a -->\n\nnew a\n\n<!-- end -->\n\nmore by hand\n\n"
        "<!-- generated: b c -->\n\n| x |\n|---|\n\n<!-- end -->\n"
    )
    assert page_blocks.fill(filled, {"a": ["new a"], "b c": ["| x |", "|---|"]}, Path("p")) == (
        filled  # filling again changes nothing
    )


@pytest.mark.parametrize(
    ("blocks", "named"),
    [({"a": []}, "b"), ({"a": [], "b": [], "c": []}, "c"), ({"a": [], "b": []}, "a")],
)
def test_page_blocks_name_a_block_the_page_lacks_holds_unknown_or_repeats(
    blocks: dict[str, list[str]], named: str
) -> None:
    page = "<!-- generated: a -->\n<!-- end -->\n<!-- generated: b -->\n<!-- end -->\n"
    if named == "a":  # repeated
        page += "<!-- generated: a -->\n<!-- end -->\n"
    with pytest.raises(
        DataError, match=rf"^p\.md: generated blocks missing, repeated or unknown: {named} "
    ):
        page_blocks.fill(page, blocks, Path("p.md"))


def test_results_docs_refuses_a_page_without_a_block_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "results.md"
    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    start = text.index("<!-- generated: machines -->")
    page.write_text(text[:start] + text[text.index("<!-- end -->", start) + 12 :])
    out = tmp_path / "out" / "results.md"
    with pytest.raises(DataError, match="generated blocks missing, repeated or unknown: machines"):
        rt.write_docs(tmp_path / "results", out, tmp_path / "no_probes", page)
    assert not out.parent.exists()  # neither the page nor its PNGs


def test_a_corpus_whose_probe_has_not_flattened_is_labelled_capped_not_flat(
    tmp_path: Path,
) -> None:
    """The main table's rows on a corpus whose main-protocol probe ran and has not flattened
    say so beside their updates; a corpus whose probe flattened, or without a probe, not."""
    results, probes = tmp_path / "results", tmp_path / "probes"
    main_run(results, "ding_de_en", "transformer", 1, 4.0)
    main_run(results, "bible_en_fr", "transformer", 1, 14.0, step=1500)
    falling = [4.0 - s / 1000 for s in range(250, 3001, 250)]  # 1/4 nat better every 1,000
    flat = [max(3.0, 4.0 - s / 1000) for s in range(250, 3001, 250)]  # flat from 1,000 on
    for corpus, nlls in (("bible_en_fr", falling), ("ding_de_en", flat)):
        overrides = ["experiment=results_main", f"data={corpus}", "model=transformer", "seed=1"]
        probe = plant_run(probes, "main_protocol", f"data-{corpus}_model-transformer", overrides)
        events = [{"event": "valid", "step": 250 * (i + 1), "minutes": 1.0 * i, "nll": nll,
                   "bleu": 1.0, "chrf": 20.0} for i, nll in enumerate(nlls)]  # fmt: skip
        (probe / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    main = rt.cells(results, rt.MAIN)
    assert rt.capped(main, rt.protocol.probes(probes), 250) == frozenset({"bible_en_fr"})
    assert rt.capped(main, rt.protocol.probes(tmp_path / "none"), 250) == frozenset()
    labels = rt.machine_labels(r for c in main for r in c.runs)
    text = "\n".join(rt.main_table(main, labels, frozenset({"bible_en_fr"})))
    rows = [x for x in text.splitlines() if "| transformer |" in x]
    bible, ding = (
        next(x for x in rows if x.startswith(f"| {c} (")) for c in ("bible_en_fr", "ding_de_en")
    )
    assert "| 1500 (capped, not flat) |" in bible and "capped" not in ding
    assert "On bible_en_fr the length is capped, not flat" in text
