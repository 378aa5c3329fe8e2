"""experiments/attention_measures.py: what the attention table reads of a run beyond BLEU
(the collapse share and cross map of an attention_map.json, the last validation's entropy,
the silver diagonal), on hand-made inputs; the fixed sentence's maps of a tiny trained
model; a new run's record given its silver scores and maps by the command."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest
from helpers.tiny_checkpoint import make_run

from attnmt.run_dir import RunDir
from attnmt.run_record import RecordWriter
from experiments import attention_measures as am
from experiments.attention_table import collapsed_text
from experiments.runs import read_run, scores_entry

# ---- collapse share and the fixed sentence's cross map ---------------------------------------


def test_collapse_share_of_hand_made_maps() -> None:
    one_column = [[0.1, 0.8, 0.1], [0.0, 0.6, 0.4], [0.3, 0.4, 0.3]]  # every row peaks on 1
    assert am.collapse_share(one_column) == 1.0
    three_of_four = [[0.9, 0.1], [0.7, 0.3], [0.2, 0.8], [0.6, 0.4]]
    assert am.collapse_share(three_of_four) == 0.75
    diagonal = [[0.9, 0.05, 0.05], [0.05, 0.9, 0.05], [0.05, 0.05, 0.9]]
    assert am.collapse_share(diagonal) == pytest.approx(1 / 3)
    assert math.isnan(am.collapse_share([]))
    assert math.isnan(am.collapse_share([[], []]))  # rows without source columns
    # the flag is strictly more than COLLAPSED: 4 of 5 rows is not collapsed
    four_of_five = [[1.0, 0.0]] * 4 + [[0.0, 1.0]]
    assert am.collapse_share(four_of_five) == pytest.approx(am.COLLAPSED)
    assert collapsed_text([am.collapse_share(four_of_five)]) == "no (0.80)"
    assert collapsed_text([0.8, am.collapse_share(one_column)]) == "yes (0.80, 1.00)"
    assert collapsed_text([]) == "–"


def test_cross_map_of_an_rnn_map_is_the_map() -> None:
    rnn = {"layer": None, "maps": {"cross": [[1, 0, 0], [0.25, 0.5, 0.25]]}}  # [T=2][S=3]
    assert am.cross_map(rnn) == [[1.0, 0.0, 0.0], [0.25, 0.5, 0.25]]
    assert all(isinstance(x, float) for row in am.cross_map(rnn) for x in row)


@pytest.mark.parametrize("layer", [0, 1])  # layer 0 is a Transformer's too (not "no layer")
def test_cross_map_of_a_transformer_is_the_mean_of_its_heads(layer: int) -> None:
    heads = [  # [H=2][T=2][S=3]
        [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]],
        [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    ]
    transformer = {"layer": layer, "maps": {"cross": heads, "self": [[[1.0]]]}}
    assert am.cross_map(transformer) == [[0.5, 0.5, 0.0], [0.0, 0.25, 0.75]]  # by hand
    assert am.collapse_share(am.cross_map(transformer)) == 0.5  # peaks: columns 0 and 2


# ---- the entropy the table reads (experiments.runs.Run.entropy) -------------------------------


def fake_run(run_dir: Path, entropies: list[Any]) -> Path:
    """A run record (as train.py writes it) with one validation per entropy value (None:
    the event has no attention_entropy_norm)."""
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("- seed=1\n")
    writer = RecordWriter(RunDir(run_dir), None, {"params": 1000, "device": "cpu"})
    writer.event("start", 0)
    for i, h in enumerate(entropies):
        more = {} if h is None else {"attention_entropy_norm": h}
        writer.event("valid", 2 * (i + 1), epoch=0, minutes=0.1, nll=3.0, bleu=1.0, **more)
    writer.update(status="finished", reason="max_steps", step=2 * len(entropies), minutes=0.2)
    return run_dir


def test_the_entropy_is_the_last_validations_cross_entropy(tmp_path: Path) -> None:
    run = fake_run(tmp_path / "a", [{"cross": 0.9}, {"cross": 0.42, "cross/layer0": 0.7}])
    assert read_run(run).entropy == 0.42
    assert read_run(fake_run(tmp_path / "b", [{"cross": 0.3}, None])).entropy is None
    assert read_run(fake_run(tmp_path / "c", [{"self/layer0": 0.3}])).entropy is None


# ---- the silver links' diagonal baseline ------------------------------------------------------


def test_the_diagonal_alignment_by_hand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """S = 4, T = 2: target word 0 -> source 0, word 1 -> round(1·4/2) = 2; against sure links
    0-0 1-1, AER = 1 − (1 + 1) / (2 + 2) = 0.5 (one sentence: every resample is it, so the
    interval has no width); against 0-0 2-1 it is 0."""
    gold = tmp_path / "silver.align"
    monkeypatch.setitem(am.SILVER, "toy", gold)
    gold.write_text("0-0 1-1\n", encoding="utf-8")
    scored = am.silver_diagonal("toy", ["a b c d"], ["w x"])
    assert scored is not None and scored.aer == pytest.approx(0.5)
    assert (scored.low, scored.high) == (pytest.approx(0.5), pytest.approx(0.5))
    gold.write_text("0-0 2-1\n", encoding="utf-8")
    scored = am.silver_diagonal("toy", ["a b c d"], ["w x"])
    assert scored is not None and scored.aer == pytest.approx(0.0)
    assert am.silver_diagonal("no_silver", ["a b c d"], ["w x"]) is None
    assert am.silver_diagonal("toy", [], []) is None


# ---- the fixed sentence's maps (attention_map.json) --------------------------------------------


@pytest.mark.parametrize("name", ["transformer", "rnn_luong"])
def test_the_kept_maps_of_a_tiny_run(name: str, tmp_path: Path) -> None:
    """Rows are tgt_out pieces and columns source pieces; every row a distribution (to the
    3 kept digits); a Transformer keeps each head of its last layer, its decoder
    self-attention causal (0 above the diagonal); an RNN its one map."""
    maps = am.capture(make_run(tmp_path, name, steps=20))
    assert maps["source"] == am.FIXED_SOURCE
    src, tgt_in, tgt_out = maps["src_pieces"], maps["tgt_input"], maps["tgt_out"]
    assert src[-1] == tgt_out[-1] == "</s>" and tgt_in[0] == "<s>" and tgt_in[1:] == tgt_out[:-1]
    if name == "rnn_luong":
        assert maps["layer"] is None and set(maps["maps"]) == {"cross"}
        heads = {"cross": [maps["maps"]["cross"]]}
    else:
        assert maps["layer"] == 0 and set(maps["maps"]) == {"enc_self", "self", "cross"}
        heads = maps["maps"]
        assert all(len(heads[k]) == 2 for k in heads)  # n_heads of the tiny model
        for head in heads["self"]:
            assert all(head[i][j] == 0 for i in range(len(head)) for j in range(i + 1, len(head)))
    shapes = {"cross": (len(tgt_out), len(src)), "self": (len(tgt_in),) * 2,
              "enc_self": (len(src),) * 2}  # fmt: skip
    for key, per_head in heads.items():
        for head in per_head:
            assert (len(head), len(head[0])) == shapes[key]
            assert all(sum(row) == pytest.approx(1.0, abs=0.01) for row in head)


# ---- a new run's record gets the migrated runs' files -------------------------------------------


def test_a_new_runs_record_gets_silver_scores_and_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m experiments.attention_measures outputs/STUDY/RUN`` evaluates the trained
    run against its corpus' silver links (the command a user would type) and writes the
    entry as eval/silver/scores.json and the fixed sentence's maps as attention_map.json into
    results/STUDY/RUN/, where experiments.runs reads them; a run without its record is
    refused (exit 2, nothing written)."""
    run = make_run(tmp_path / "outputs" / "study", "rnn_luong", steps=20)  # outputs/study/run
    (run / ".hydra").mkdir()
    (run / ".hydra" / "config.yaml").write_text("data:\n  name: toy_reverse\n")
    gold = tmp_path / "toy.silver.align"
    gold.write_text("0-0\n", encoding="utf-8")
    monkeypatch.setitem(am.SILVER, "toy_reverse", gold)
    monkeypatch.setattr(am, "FIXED_CORPUS", "toy_reverse")
    calls: list[list[str]] = []

    def evaluate(cmd: list[str], cwd: Path, env: dict[str, str], **kwargs: Any) -> Any:
        calls.append(cmd)
        out = run / "eval" / "best-21-test-beam1-0123abcd"
        out.mkdir(parents=True, exist_ok=True)
        entry = {"beam": 1, "aer": 0.3125, "aer_precision": 0.7, "aer_recall": 0.65}
        (out / "scores.json").write_text(json.dumps({"best-21-test-beam1": entry}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", evaluate)
    results = tmp_path / "results"
    argv = [str(run), "--results", str(results), "--threads", "1"]
    assert am.main(argv) == 2
    assert "sweep" in capsys.readouterr().err and not results.exists()
    record = results / "study" / "run"
    record.mkdir(parents=True)
    (record / "summary.json").write_text("{}")
    assert am.main(argv) == 0
    assert calls[-1][1:] == ["evaluate.py", f"ckpt={run}", "split=test", "beam=1",
                             f"gold_alignments={gold}"]  # fmt: skip
    entry = scores_entry(record / "eval" / "silver" / "scores.json")
    assert entry is not None and (entry["aer"], entry["aer_recall"]) == (0.3125, 0.65)
    maps = json.loads((record / "attention_map.json").read_text(encoding="utf-8"))
    assert maps == am.capture(run) and maps["layer"] is None
