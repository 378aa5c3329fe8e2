"""experiments/attention_guide.py: the sheet's worked example through attnmt's own scorer and
attend, code quoted from the source, and docs/attention.md's generated blocks from planted
run folders (the hand-written text around them kept as it is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.run_folders import plant_run

from attnmt.errors import DataError
from experiments import attention_guide as ag
from experiments.page_blocks import BLOCK, fill

SHEET = {  # the attention reference sheet's worked example (shared/ATTENTION.md)
    "scores": [927, 397, 148, 929],
    "weights": [0.1192, 7.9e-232, 0.0, 0.8808],
    "context": [3.881, 4.073, 45.264],
}


def test_the_worked_example_gives_the_sheets_numbers() -> None:
    got = ag.worked_example()
    assert got["scores"] == SHEET["scores"]
    assert got["weights"][0] == pytest.approx(SHEET["weights"][0], abs=5e-5)
    assert got["weights"][1] == pytest.approx(SHEET["weights"][1], rel=0.01)
    assert got["weights"][2] == 0.0
    assert got["weights"][3] == pytest.approx(SHEET["weights"][3], abs=5e-5)
    assert got["context"] == pytest.approx(SHEET["context"], abs=5e-4)
    assert sum(got["weights"]) == pytest.approx(1.0)


def test_code_is_quoted_from_the_source() -> None:
    path, name, line, text = ag.code_lines(ag.scorers.Dot.score)
    assert (path, name) == ("src/attnmt/models/scorers.py", "Dot.score")
    assert text == "return torch.matmul(query, pre.transpose(-1, -2))"
    source = (ag.ROOT / path).read_text(encoding="utf-8").splitlines()
    assert source[line - 1].lstrip().startswith("def score")
    _, _, _, shift = ag.code_lines(ag.batching.make_batch)
    assert "batch.tgt_input = full[:, :-1].clone()" in shift and '"""' not in shift


def _maps(n_src: int, n_tgt: int, heads: int | None = None) -> dict:
    row = [1.0 / n_src] * n_src
    cross = [row] * n_tgt
    data = {
        "source": "a b",
        "reference": "b a",
        "hypothesis": "b a",
        "src_pieces": [f"s{i}" for i in range(n_src)],
        "tgt_input": [f"i{i}" for i in range(n_tgt)],
        "tgt_out": [f"o{i}" for i in range(n_tgt)],
        "layer": None if heads is None else 0,
    }
    if heads is None:
        data["maps"] = {"cross": cross}
    else:
        causal = [[1.0 if j <= i else 0.0 for j in range(n_tgt)] for i in range(n_tgt)]
        enc = [[1.0 / n_src] * n_src] * n_src
        data["maps"] = {
            "enc_self": [enc] * heads,
            "self": [causal] * heads,
            "cross": [cross] * heads,
        }
    return data


def test_the_guide_from_planted_runs(tmp_path: Path) -> None:
    results, docs = tmp_path / "results", tmp_path / "docs"
    base = ["experiment=results_attention", "model=rnn_luong", "model.emb_dim=128",
            "model.hidden_size=128", "model.attention.score=dot", "seed=1"]  # fmt: skip
    for mode, bleu in (("global", 1.5), ("local_m", 2.5)):
        overrides = [*base, f"model.attention.mode={mode}"]
        run = plant_run(
            results, "results_attention", f"mode-{mode}_score-dot_seed-1", overrides, bleu
        )
        (run / "attention_map.json").write_text(json.dumps(_maps(3, 2)), encoding="utf-8")
    main = ["experiment=results_main", "data=ding_de_en", "model=transformer", "seed=1"]
    run = plant_run(results, "results_main", "data-ding_de_en_model-transformer_seed-1", main)
    (run / "attention_map.json").write_text(json.dumps(_maps(3, 4, 2)), encoding="utf-8")
    out = docs / "attention.md"
    ag.write_guide(results, out)
    text = out.read_text(encoding="utf-8")
    keys = BLOCK.findall(text)
    assert len(set(keys)) == len(keys) == 3 + len(ag.SCORERS) + len(ag.MODES) + len(ag.CODE)
    dot_part = text.split("<!-- generated: score dot -->")[1].split("<!-- end -->")[0]
    assert "`src/attnmt/models/scorers.py`, `Dot.score`" in dot_part
    assert "| global | local_m | local_p | hard |" in dot_part
    assert "| 1.50 / 21.5 / 3.500 | 2.50 / 22.5 / 3.500 | not yet run | not yet run |" in dot_part
    assert "](attention/rnn_luong_dot_global.png)" in dot_part
    local_m = text.split("<!-- generated: mode local_m -->")[1].split("<!-- end -->")[0]
    assert "| dot | scaled_dot | general |" in local_m and "| additive (bahdanau) |" in local_m
    assert "| 2.50 / 22.5 / 3.500 | not yet run |" in local_m
    assert "| additive (bahdanau) | scaled_dot, 4 heads (transformer) |" in text  # mode global
    assert "Heatmap: not yet run (rnn_luong cosine global" in text
    assert "- dot scores sᵀh_i: 927, 397, 148, 929" in text
    for name in ("rnn_luong_dot_global", "worked_example", "transformer_self", "transformer_cross"):
        assert (docs / "attention" / f"{name}.png").read_bytes()[:4] == b"\x89PNG", name
    assert "](attention/transformer_enc_self.png)" in text


def test_only_the_blocks_are_rewritten(tmp_path: Path) -> None:
    """The hand-written text around the blocks stays byte for byte; a block's old content
    goes; a page lacking a block, or naming one the generator does not know, is refused."""
    page = ag.PAGE.read_text(encoding="utf-8")
    stale = page.replace(
        "<!-- generated: code masks -->\n", "<!-- generated: code masks -->\nSTALE\n"
    )
    blocks = ag.blocks(ag.Rows({}), tmp_path / "attention")
    out = fill(stale, blocks, ag.PAGE)
    assert BLOCK.sub("", out) == BLOCK.sub("", page) and "STALE" not in out
    assert "`src/attnmt/models/masking.py`, `masked_softmax`" in out
    assert "Heatmaps: not yet run (transformer on ding_de_en, seed 1)." in out
    without = page.replace("<!-- generated: code shift -->", "<!-- code shift -->")
    with pytest.raises(DataError, match="code shift"):
        fill(without, blocks, ag.PAGE)
    unknown = page + "\n<!-- generated: score bogus -->\n<!-- end -->\n"
    with pytest.raises(DataError, match="score bogus"):
        fill(unknown, blocks, ag.PAGE)
