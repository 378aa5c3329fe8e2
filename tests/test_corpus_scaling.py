"""benchmarks/make_big_corpus.py writes a parallel, seeded data=custom corpus;
benchmarks/corpus_scaling.py tabulates what it measured."""

from __future__ import annotations

from pathlib import Path

from benchmarks import corpus_scaling
from benchmarks import make_big_corpus as make


def test_generated_pairs_join_the_same_source_pairs_on_both_sides(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    de = [f"satz {i} ." for i in range(20)]
    en = [f"sentence {i} ." for i in range(20)]
    for split in ("train", "valid", "test"):
        (src / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
        (src / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert make.main(["--pairs", "250", "--out", str(out), "--source", str(src)]) == 0
    gen_de = (out / "train.de").read_text(encoding="utf-8").splitlines()
    gen_en = (out / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(gen_de) == len(gen_en) == 250
    splits = ("train", "valid", "test")
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"{s}.{x}" for s in splits for x in ["de", "en"]
    )
    counts = set()
    for a, b in zip(gen_de, gen_en):
        ids = [int(w) for w in a.split() if w.isdigit()]
        assert b == " ".join(f"sentence {i} ." for i in ids)
        counts.add(len(ids))
    assert counts == {1, 2, 3}
    assert (out / "valid.en").read_text(encoding="utf-8") == (src / "valid.en").read_text()
    again = tmp_path / "again"
    make.main(["--pairs", "250", "--out", str(again), "--source", str(src)])
    assert (again / "train.de").read_bytes() == (out / "train.de").read_bytes()  # seeded


def test_table_marks_what_was_not_measured() -> None:
    row = {
        "pairs": 30000,
        "train_bytes": 5 * 2**20,
        "cold": None,
        "prep_s": None,
        "prep_pairs_per_s": None,
        "warm_first_update_s": 9.25,
        "warm_data_s": 0.05,
        "warm_data_peak_rss_mb": 350.0,
        "warm_peak_rss_mb": 612.4,
    }
    table = corpus_scaling.table([row], "Some CPU, torch 2.13.0, 2 threads")
    assert table.startswith("Machine: Some CPU, torch 2.13.0, 2 threads (")
    assert "| 30,000 | 5 MiB | - | - | - | - | 9.2 | 0.05 | 350 MB | 612 MB |" in table
