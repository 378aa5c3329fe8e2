"""Bad input gets a clear error (or a logged count) and loses nothing: one test each."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from helpers.shipped_ding import ship_ding
from omegaconf import OmegaConf

from attnmt.data.config import DataConfig, to_data_config
from attnmt.data.corpora import RECIPES, prepare_corpus
from attnmt.data.textio import read_lines, read_tsv
from attnmt.errors import ConfigError, DataError

ROOT = Path(__file__).resolve().parent.parent


def custom_dir(tmp_path: Path, files: dict[str, bytes]) -> dict:
    data = tmp_path / "in"
    data.mkdir(parents=True)
    for name, content in files.items():
        (data / name).write_bytes(content)
    return {
        "name": "custom",
        "path": str(data),
        "src_lang": "de",
        "tgt_lang": "en",
        "root": str(tmp_path / "cache"),
    }


def test_line_count_mismatch_names_both_files_and_counts(tmp_path: Path) -> None:
    cfg = custom_dir(
        tmp_path,
        {"train.de": b"a\nb\nc\n", "train.en": b"A\nB\n", "valid.de": b"v\n", "valid.en": b"V\n"},
    )
    with pytest.raises(DataError) as err:
        prepare_corpus(cfg)
    message = str(err.value)
    assert f"{cfg['path']}/train.de has 3 lines" in message
    assert f"{cfg['path']}/train.en has 2" in message


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    cfg = custom_dir(
        tmp_path,
        {
            "train.de": b"gut\nsch\xf6n\n",  # latin-1 ö on line 2
            "train.en": b"good\nnice\n",
            "valid.de": b"v\n",
            "valid.en": b"V\n",
        },
    )
    with pytest.raises(DataError) as err:
        prepare_corpus(cfg)
    assert f"{cfg['path']}/train.de:2: invalid UTF-8 (byte 0xf6 at column 4)" in str(err.value)
    assert not (tmp_path / "cache").exists()


def test_empty_pairs_dropped_with_logged_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = custom_dir(
        tmp_path,
        {
            "train.de": b"eins\n\nzwei\n \t \ndrei\n",
            "train.en": b"one\nlost\ntwo\n\nthree\n",
            "valid.tsv": b"v\tV\n\n",
        },
    )
    with caplog.at_level(logging.WARNING):
        corpus = prepare_corpus(cfg)
    assert "custom/train: dropped 2 empty or whitespace-only pairs" in caplog.text
    assert "custom/valid: dropped 1 empty or whitespace-only pairs" in caplog.text
    assert corpus.read("train") == (["eins", "zwei", "drei"], ["one", "two", "three"])
    assert corpus.removed == {
        "empty or whitespace-only pairs (train)": 2,
        "empty or whitespace-only pairs (valid)": 1,
    }


def test_nothing_left_says_which_filters_removed_what(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "Haus {n} :: house\njemand kommt heute an. :: Someone comes.\n"
    ship_ding(tmp_path / "raw" / "shipped.tsv.xz", text, monkeypatch)
    with pytest.raises(DataError) as err:
        prepare_corpus({"root": str(tmp_path)})
    message = str(err.value)
    assert "no training pairs left after filtering" in message
    assert "sub-entries fewer than 3 words: 1" in message
    assert "sub-entries not starting with a capital letter: 1" in message
    assert [p.name for p in tmp_path.iterdir()] == ["raw"]  # no cache written


def test_missing_file_names_its_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.de"
    with pytest.raises(DataError, match=re.escape(f"{missing}: file not found")):
        read_lines(missing)
    cfg = custom_dir(tmp_path, {"train.de": b"a\n", "train.en": b"A\n", "valid.de": b"v\n"})
    with pytest.raises(DataError, match=re.escape(f"{cfg['path']}/valid.en: file not found")):
        prepare_corpus(cfg)
    cfg = custom_dir(tmp_path / "b", {"train.tsv": b"a\tA\n"})
    with pytest.raises(DataError, match=re.escape(f"{cfg['path']}/valid.de: file not found")):
        prepare_corpus(cfg)


def test_unknown_data_name_lists_choices(tmp_path: Path) -> None:
    with pytest.raises(DataError) as err:
        prepare_corpus({"name": "wmt14", "root": str(tmp_path)})
    message = str(err.value)
    assert "unknown data name 'wmt14'" in message
    assert all(name in message for name in RECIPES)


def test_tsv_wrong_column_count(tmp_path: Path) -> None:
    path = tmp_path / "train.tsv"
    path.write_text("a\tA\nb\tB\textra\n", encoding="utf-8")
    with pytest.raises(
        DataError, match=re.escape(f"{path}:2: expected 2 tab-separated columns") + ".*found 3"
    ):
        read_tsv(path)


def test_schema_rejects_unknown_keys_and_wrong_types() -> None:
    schema = OmegaConf.structured(DataConfig)
    with pytest.raises(Exception, match="srclang"):
        OmegaConf.merge(schema, {"srclang": "de"})
    with pytest.raises(ConfigError, match=re.escape("data.srclang")):
        to_data_config({"srclang": "de"})
    with pytest.raises(ConfigError, match=re.escape("data.tokenizer.vocab_size")):
        to_data_config({"tokenizer": {"vocab_size": "many"}})
    with pytest.raises(ConfigError, match=r"data\.split=.*valid \+ test must be < 1"):
        to_data_config({"split": {"valid": 0.6, "test": 0.5}})
    with pytest.raises(ConfigError, match=re.escape("data.tgt_lang='de': must differ")):
        to_data_config({"src_lang": "de", "tgt_lang": "de"})
    with pytest.raises(ConfigError, match=re.escape("data.path is not set")):
        prepare_corpus({"name": "custom"})


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "data").glob("*.yaml")), ids=str)
def test_every_data_yaml_fits_the_schema(path: Path) -> None:
    cfg = to_data_config(OmegaConf.load(path))
    assert cfg.name == path.stem and cfg.name in RECIPES


def test_a_line_break_in_a_line_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from attnmt.data.textio import write_lines

    out = tmp_path / "train.en"
    out.write_text("old\n")
    with pytest.raises(ValueError, match=r"train\.en: a line contains a line break"):
        write_lines(out, ["fine", "two\rlines", "never reached"])
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["train.en"]  # no temporary file
    write_lines(out, ["a", "b"])
    assert out.read_bytes() == b"a\nb\n"
