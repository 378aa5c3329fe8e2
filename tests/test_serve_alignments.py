"""Word alignments (Pharaoh) from the cross-attention: pieces to words, and
``translate.py alignments=true``."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from helpers.tiny_checkpoint import shared_run

from attnmt.cli.translate import run
from attnmt.decode.attention_maps import attention_maps, source_ids
from attnmt.decode.translator import load_translator
from attnmt.decode.word_alignment import pharaoh, word_alignment, word_index
from attnmt.errors import ConfigError

LINES = ["a b c", "", "d e f a", "b"]


@pytest.fixture
def ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_run(tmp_path_factory)


def _translate(ckpt: Path, lines: list[str], **settings: object) -> list[str]:
    out = io.BytesIO()
    stdin = io.BytesIO("".join(f"{line}\n" for line in lines).encode())
    run({"ckpt": str(ckpt), "interactive": False, **settings}, stdin, out)
    return out.getvalue().decode().split("\n")[:-1]


def test_pieces_map_to_whitespace_words() -> None:
    assert word_index(["▁Das", "▁ist", "▁ein", "▁Te", "st", ".", "</s>"]) == [0, 1, 2, 3, 3, 3, -1]
    assert word_index(["▁", "b", "▁a"]) == [0, 0, 1]
    assert word_index(["x", "▁y"]) == [0, 1]  # no word mark on the first piece


def test_argmax_per_target_piece_leaves_out_eos() -> None:
    src = ["▁a", "▁b", "c", "</s>"]  # words 0, 1 (b c), eos
    tgt = ["▁x", "▁y", "z", "</s>"]
    w = torch.tensor(
        [[0.7, 0.1, 0.1, 0.1], [0.0, 0.2, 0.3, 0.5], [0.1, 0.1, 0.1, 0.7], [0.0, 0.0, 0.0, 1.0]]
    )
    # row 3 (</s>) is left out; row 2 attends most to </s>, so its best real piece (a) counts
    assert word_alignment(w, src, tgt) == [(0, 0), (0, 1), (1, 1)]
    assert pharaoh([(0, 0), (1, 2)]) == "0-0 1-2"


def test_teacher_forced_maps_equal_the_search_attention(ckpt: Path) -> None:
    translator = load_translator(ckpt, "cpu")
    hyps = translator.hypotheses(["a b c", "d e f a"])
    ids = source_ids(translator.tokenizer, ["a b c", "d e f a"], 250)
    maps = attention_maps(
        translator.model, translator.tokenizer, translator.device, ids,
        [(h.tokens, h.finished) for h in hyps],
    )  # fmt: skip
    for hyp, m in zip(hyps, maps):
        assert torch.allclose(m.mean_last_cross(), hyp.attention, atol=1e-5)


def test_translate_py_alignments_follow_each_translation(ckpt: Path) -> None:
    plain = _translate(ckpt, LINES, beam=2, n_best=2, scores=True)
    got = _translate(ckpt, LINES, beam=2, n_best=2, scores=True, alignments=True)
    assert got[1] == ""
    for with_links, without in zip(got, plain):
        fields = with_links.split("\t")
        if not without:
            continue
        assert fields[0::3] + fields[1::3] == without.split("\t")[0::2] + without.split("\t")[1::2]
        for text, links in zip(fields[0::3], fields[2::3]):
            for pair in links.split():
                i, j = map(int, pair.split("-"))
                assert 0 <= j < len(text.split()) and i >= 0
    assert _translate(ckpt, LINES) == load_translator(ckpt, "cpu").translate(LINES)


def test_ctranslate2_backend_refuses_alignments(ckpt: Path) -> None:
    with pytest.raises(ConfigError, match="alignments=true"):
        _translate(ckpt, ["a"], backend="ctranslate2", alignments=True)
