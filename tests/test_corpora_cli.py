"""scripts/prepare_data.py and attnmt.cli.data_group: Hydra overrides of the data group,
printed split counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attnmt.cli.data_group import data_config, default_data_choice
from scripts import prepare_data as script

CONFIGS = script.CONFIGS


def test_prints_pairs_per_split(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["data=toy_reverse", f"data.root={tmp_path}", "data.toy.train=20", "data.toy.test=0"]
    assert script.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("toy_reverse src->tgt in ")
    rows = dict(re.findall(r"^\s+(\w+)\s+(\d+) pairs$", out, flags=re.M))
    assert rows == {"train": "20", "valid": "200", "test": "0", "total": "220"}


def test_default_is_ding_and_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert default_data_choice(CONFIGS) == "ding_de_en"
    assert data_config([], CONFIGS).name == "ding_de_en"
    assert data_config(["data.src_lang=en", "data.tgt_lang=de"], CONFIGS).src_lang == "en"
    assert script.main(["data=nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown data name 'nope'" in err and "toy_copy" in err and "multi30k" in err
    assert script.main(["data.no_such_key=1"]) == 2
    assert "no_such_key" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name",
    ["ding_de_en", "bible_en_fr", "toy_reverse", "toy_copy", "toy_align", "custom", "multi30k"],
)
def test_every_data_group_composes(name: str) -> None:
    cfg = data_config([f"data={name}"], CONFIGS)
    size = cfg.tokenizer.vocab_size
    assert cfg.name == name and (size == "auto" if name == "custom" else size > 4)
