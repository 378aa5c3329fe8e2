"""scripts/compare_decoding.py's pure parts: log parsing, medians, the table, bad inputs.

No JoeyNMT needed: the decoding commands themselves are not run here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compare_decoding.py"


@pytest.fixture(scope="module")
def cd():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("compare_decoding", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare_decoding"] = module
    spec.loader.exec_module(module)
    return module


JOEY_LOG = """\
2026-11-23 23:53:58,729 - INFO - joeynmt.prediction - Predicting 866 example(s)...
2026-11-23 23:55:59,705 - INFO - joeynmt.prediction - Generation took 120.9752[sec].
"""


def test_joeynmt_generation_time_is_read_from_its_log(cd) -> None:  # type: ignore[no-untyped-def]
    assert cd.joeynmt_generation_seconds(JOEY_LOG) == pytest.approx(120.9752)
    with pytest.raises(cd.CompareError, match="Generation took"):
        cd.joeynmt_generation_seconds("Predicting 866 example(s)...\n")


def test_attnmt_decode_time_is_read_from_scores_json(cd) -> None:  # type: ignore[no-untyped-def]
    entry = {"metrics": {}, "speed": {"decode_seconds": 12.5}}
    assert cd.attnmt_decode_seconds({"best-1-test-beam5": entry}) == 12.5
    with pytest.raises(cd.CompareError, match="found 0"):
        cd.attnmt_decode_seconds({"old": {"metrics": {}}})


def test_summary_takes_medians_and_counts_words(cd) -> None:  # type: ignore[no-untyped-def]
    hyps = ["a b c", "d", "", "e f"]  # 6 words, 4 sentences
    row = cd.summarise("x", [4.0, 2.0, 3.0], [9.0, 7.0, 8.0], hyps)
    assert row["decode_s"] == 3.0 and (row["decode_s_min"], row["decode_s_max"]) == (2.0, 4.0)
    assert row["process_s"] == 8.0
    assert row["sent_per_s"] == pytest.approx(4 / 3)
    assert row["words_per_hyp"] == 1.5 and row["words_per_s"] == pytest.approx(2.0)


def test_table_gives_speed_ups_over_the_baseline(cd) -> None:  # type: ignore[no-untyped-def]
    joey = cd.summarise("JoeyNMT beam 1", [120.0], [130.0], ["a b"] * 10)
    beam5 = cd.summarise("attnmt beam 5", [20.0], [25.0], ["a"] * 10)
    beam5["bleu"] = 4.25
    lines = cd.markdown([joey, beam5], "JoeyNMT beam 1").splitlines()
    assert len(lines) == 4 and lines[1].count("---") == 9
    cells = [c.strip() for c in lines[3].strip("|").split("|")]
    assert cells[0] == "attnmt beam 5" and cells[6] == "6.00" and cells[7] == "4.25"
    assert [c.strip() for c in lines[2].strip("|").split("|")][6] == "1.00"


def test_a_folder_that_is_not_a_comparison_is_refused(cd, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cd.main(["--compare-dir", str(tmp_path), "--rounds", "1"]) == 1
    err = capsys.readouterr().err
    assert "joeynmt/setup.json" in err and "compare_joeynmt.sh" in err
