"""experiments/aer_vs_bleu.py on planted run folders (hand-written metrics.jsonl): the table's
figures, Spearman's ρ by hand, the PNG, runs without an AER left out, none at all refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from experiments.aer_vs_bleu import diagonal_aer, main, read_curves, run_diagonal, spearman, table


def _plant(folder: Path, points: list[tuple[int, float, float | None]]) -> Path:
    """A run folder whose metrics.jsonl holds a start event and one valid event per
    (step, BLEU, AER) (no ``aer`` key where it is None)."""
    folder.mkdir(parents=True)
    events = [{"event": "start", "step": 0, "time": 0.0}]
    for step, bleu, aer in points:
        event = {"event": "valid", "step": step, "time": float(step), "epoch": 0}
        event |= {"minutes": step / 100, "bleu": bleu, **({"aer": aer} if aer is not None else {})}
        events.append(event)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def test_spearman_by_hand() -> None:
    # BLEU rises, AER falls monotonically: ρ = -1
    assert spearman(np.array([1.0, 2.0, 5.0]), np.array([0.9, 0.7, 0.6])) == pytest.approx(-1.0)
    # ranks (1, 2, 3, 4) against (2, 1, 4, 3): d² = 1+1+1+1 = 4, ρ = 1 - 6·4/(4·15) = 0.6
    rho = spearman(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.2, 0.1, 0.4, 0.3]))
    assert rho == pytest.approx(0.6)
    # tied AER take their mean rank: (1.5, 1.5, 4, 3) against (1, 2, 3, 4); centred, the ranks
    # are (-1, -1, 1.5, 0.5) and (-1.5, -0.5, 0.5, 1.5): ρ = 3.5 / sqrt(4.5 · 5)
    rho = spearman(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.1, 0.1, 0.3, 0.2]))
    assert rho == pytest.approx(3.5 / (4.5 * 5) ** 0.5)
    assert spearman(np.array([1.0, 2.0]), np.array([0.5, 0.4])) is None  # too few
    assert spearman(np.array([1.0, 2.0, 3.0]), np.array([0.5, 0.5, 0.5])) is None  # constant


def test_table_and_figure_of_planted_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ding = _plant(tmp_path / "ding", [(200, 1.5, 0.70), (400, 3.0, 0.65), (600, 6.0, 0.60)])
    bible = _plant(tmp_path / "bible", [(400, 10.0, 0.50), (200, 4.0, 0.55), (600, 12.0, 0.52)])
    plain = _plant(tmp_path / "plain", [(200, 2.0, None)])
    out = tmp_path / "fig" / "aer_vs_bleu.png"
    assert main([str(ding), str(bible), str(plain), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "note: plain logged no validation AER; left out" in captured.err
    lines = captured.out.splitlines()
    assert lines[2] == "| ding | 200 | 2.0 | 1.50 | 0.7000 |"
    # the bible run's events are put in step order
    assert [line.split(" | ")[1] for line in lines[5:8]] == ["200", "400", "600"]
    assert "| ding | 3 | 0.7000 | 0.6000 | 0.6000 (600) | 1.50 → 6.00 | -1.00 | – |" in lines
    # bible: BLEU ranks (1, 2, 3), AER (0.55, 0.50, 0.52) ranks (3, 1, 2): ρ = 1 - 6·6/24 = -0.5
    assert "| bible | 3 | 0.5500 | 0.5200 | 0.5000 (400) | 4.00 → 12.00 | -0.50 | – |" in lines
    assert lines[-1] == f"wrote {out}"
    image = imread(out)
    assert image.shape[:2] == (500, 750)  # 7.5 × 5 inches at 100 dpi


def test_runs_without_any_aer_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _plant(tmp_path / "plain", [(200, 2.0, None)])
    out = tmp_path / "x.png"
    assert main([str(plain), "--out", str(out)]) == 2
    assert "none of the runs logged a validation AER" in capsys.readouterr().err
    assert not out.exists()
    assert main([str(tmp_path / "absent")]) == 2  # not a run folder: one line
    assert "no run record" in capsys.readouterr().err


def test_repeated_folder_names_are_told_apart(tmp_path: Path) -> None:
    a = _plant(tmp_path / "ding" / "seed-1", [(200, 1.0, 0.7)])
    b = _plant(tmp_path / "bible" / "seed-1", [(200, 5.0, 0.5)])
    curves, without = read_curves([a, b])
    assert [c.label for c in curves] == ["ding/seed-1", "bible/seed-1"] and without == []
    assert table(curves)[2].startswith("| ding/seed-1 | 200 |")


def test_the_diagonal_of_a_split_against_its_links_by_hand(tmp_path: Path) -> None:
    """Target word j links to source word round(j·S/T): pair 1 (S = 2, T = 2) gives 0-0 1-1,
    pair 2 (S = 3, T = 1) gives 0-0, pair 3 (S = 4, T = 2) gives 0-0 2-1. Against 0-0 1-1 /
    0-0 / 0-0 1-1 (all sure): 4 of the 5 links are right, |A| = |S| = 5, AER = 1 − 8/10."""
    links = tmp_path / "valid.align"
    links.write_text("0-0 1-1\n0-0\n0-0 1-1\n")
    sources, refs = ["a b", "a b c", "a b c d"], ["x y", "x", "x y"]
    assert diagonal_aer(sources, refs, links) == pytest.approx(0.2)
    links.write_text("0-0 1-1\n0-0\n0-0 2-1\n")
    assert diagonal_aer(sources, refs, links) == pytest.approx(0.0)
    # a run without a valid links file (planted, or trained with valid_alignments=none) has none
    assert run_diagonal(_plant(tmp_path / "run", [(200, 1.0, 0.7)])) is None
