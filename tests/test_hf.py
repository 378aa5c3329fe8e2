"""data=hf on Hugging Face datasets built here and saved locally (no network).

Covered: save_to_disk directories, parquet directories (split names from file names), a glob
of jsonl files and a tsv file; the translation-dict and the two-column layouts; both
directions; own splits and the hash split of train; max_rows and streaming; the cache (reused,
rebuilt when a file changes); the errors; train.py's config with data=hf. Hub ids are only
checked for the arguments handed to ``datasets.load_dataset`` (a stand-in returns local data):
real downloads are untested here.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import pytest

datasets = pytest.importorskip("datasets")

from attnmt.data import corpora  # noqa: E402
from attnmt.data.config import to_data_config  # noqa: E402
from attnmt.data.corpora import RECIPES, Recipe, check_splits, prepare_corpus  # noqa: E402
from attnmt.data.recipes import hf  # noqa: E402
from attnmt.data.recipes.common import Built, hash_fraction  # noqa: E402
from attnmt.errors import ConfigError, DataError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LANGS = ["de", "en", "fr"]
SIZES = {"train": 40, "validation": 6, "test": 5}


def sentence(lang: str, split: str, i: int) -> str:
    words = {"de": "Satz {} Nummer {} ist hier.", "en": "Sentence {} number {} is here."}
    return words.get(lang, "Phrase {} numéro {} est ici.").format(split, i)


def translation_rows(split: str, n: int) -> list[dict[str, str | None]]:
    rows: list[dict[str, str | None]] = [
        {lang: sentence(lang, split, i) for lang in LANGS} for i in range(n)
    ]
    if split == "train":
        rows[3]["de"] = "  \t "  # whitespace-only German side: dropped for de<->*
        rows[5]["de"] = "Satz  train\tNummer\n5 ist hier."  # normalised to one space each
        rows[7]["fr"] = None  # a missing French side
    return rows


def expected(split: str, n: int, src: str, tgt: str) -> list[tuple[str, str]]:
    pairs = []
    for row in translation_rows(split, n):
        a, b = (" ".join((row[lang] or "").split()) for lang in (src, tgt))
        if a and b:
            pairs.append((a, b))
    return pairs


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every local form of the same data (and a two-column train-only dataset)."""
    base = tmp_path_factory.mktemp("hf-sources")
    features = datasets.Features(
        {"id": datasets.Value("string"), "translation": datasets.Translation(languages=LANGS)}
    )
    dd = datasets.DatasetDict(
        {
            split: datasets.Dataset.from_dict(
                {
                    "id": [str(i) for i in range(n)],
                    "translation": translation_rows(split, n),
                },
                features=features,
            )
            for split, n in SIZES.items()
        }
    )
    dd.save_to_disk(str(base / "disk"))
    (base / "parquet").mkdir()
    for split, ds in dd.items():  # dev.parquet: load_dataset calls it "validation"
        ds.to_parquet(
            str(base / "parquet" / f"{'dev' if split == 'validation' else split}.parquet")
        )
    columns = datasets.Dataset.from_dict(
        {
            "source": [f"Quelle {i} ist gut." for i in range(300)],
            "target": [f"Source {i} is good." for i in range(300)],
            "score": [i / 300 for i in range(300)],
        }
    )
    datasets.DatasetDict({"train": columns}).save_to_disk(str(base / "columns"))
    (base / "jsonl").mkdir()
    for part in range(2):
        with (base / "jsonl" / f"part{part}.jsonl").open("w", encoding="utf-8") as f:
            for i in range(50):
                de, en = f"Teil {part} Zeile {i}.", f"Part {part} line {i}."
                f.write(json.dumps({"translation": {"de": de, "en": en}}) + "\n")
    return {name: base / name for name in ("disk", "parquet", "columns", "jsonl")}


def config(root: Path, name: str | Path, **hf_keys: object) -> dict:
    src = hf_keys.pop("src_lang", "de")
    tgt = hf_keys.pop("tgt_lang", "en")
    return {
        "name": "hf",
        "root": str(root),
        "src_lang": src,
        "tgt_lang": tgt,
        "hf": {"name": str(name), **hf_keys},
    }


# ---------------------------------------------------------------- layouts and sources


@pytest.mark.parametrize("form", ["disk", "parquet"])
def test_translation_layout_own_splits_both_directions(
    form: str, sources: dict[str, Path], tmp_path: Path
) -> None:
    de_en = prepare_corpus(config(tmp_path, sources[form]))
    assert de_en.counts == {"train": 39, "valid": 6, "test": 5}  # one whitespace-only side
    for split, hub_split in (("train", "train"), ("valid", "validation"), ("test", "test")):
        src, tgt = de_en.read(split)
        assert list(zip(src, tgt)) == expected(hub_split, SIZES[hub_split], "de", "en")
    assert "Satz train Nummer 5 ist hier." in de_en.read("train")[0]
    assert de_en.removed == {"empty or whitespace-only pairs (train)": 1}

    en_de = prepare_corpus(config(tmp_path, sources[form], src_lang="en", tgt_lang="de"))
    assert en_de.counts == de_en.counts
    assert en_de.read("train") == de_en.read("train")[::-1]

    fr_en = prepare_corpus(config(tmp_path, sources[form], src_lang="fr", tgt_lang="en"))
    assert fr_en.counts["train"] == 39  # here row 7 (no French) is the one dropped
    assert list(zip(*fr_en.read("train"))) == expected("train", 40, "fr", "en")


def test_columns_layout_with_only_train_is_hash_split(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    cfg = config(tmp_path, sources["columns"], src_column="source", tgt_column="target")
    cfg["split"] = {"valid": 0.1, "test": 0.2}
    de_en = prepare_corpus(cfg)
    counts = de_en.counts
    assert sum(counts.values()) == 300
    assert 10 < counts["valid"] < 55 and 30 < counts["test"] < 95  # 30 and 60 expected
    every = {(f"Quelle {i} ist gut.", f"Source {i} is good.") for i in range(300)}
    seen: set[tuple[str, str]] = set()
    for split in ("train", "valid", "test"):
        pairs = set(zip(*de_en.read(split)))
        assert pairs <= every and not pairs & seen
        seen |= pairs
    # the rule: keyed on the English side, u < 0.1 -> valid, < 0.3 -> test
    assert all(hash_fraction(en) < 0.1 for en in de_en.read("valid")[1])
    # the other direction (columns swapped too) has the same split, mirrored
    rev = {**cfg, "src_lang": "en", "tgt_lang": "de"}
    rev["hf"] = {**cfg["hf"], "src_column": "target", "tgt_column": "source"}
    en_de = prepare_corpus(rev)
    assert en_de.directory != de_en.directory
    for split in ("train", "valid", "test"):
        assert en_de.read(split) == de_en.read(split)[::-1]


def test_missing_test_split_only_is_cut_from_train(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    cfg = config(tmp_path, sources["disk"], test_split=None)
    cfg["split"] = {"valid": 0.05, "test": 0.25}
    corpus = prepare_corpus(cfg)
    assert corpus.counts["valid"] == 6  # the dataset's own validation split
    assert corpus.counts["train"] + corpus.counts["test"] == 39
    assert 0 < corpus.counts["test"] < 25
    cfg["split"] = {"valid": 0.05, "test": 0.0}  # no fraction: no test split at all
    assert prepare_corpus(cfg).splits == ["train", "valid"]


def test_glob_of_jsonl_files_is_the_train_split(sources: dict[str, Path], tmp_path: Path) -> None:
    corpus = prepare_corpus(config(tmp_path, sources["jsonl"] / "*.jsonl"))
    assert sum(corpus.counts.values()) == 100 and set(corpus.counts) == {"train", "valid", "test"}
    src, tgt = corpus.read("train")
    assert all(s.replace("Teil", "Part").replace("Zeile", "line") == t for s, t in zip(src, tgt))


def test_tsv_file_with_default_column_names_keeps_quotes(tmp_path: Path) -> None:
    tsv = tmp_path / "pairs.tsv"
    lines = ["en\tde"] + [f'"Hi" {i}, she said.\t„Hallo" {i}, sagte sie.' for i in range(40)]
    tsv.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = config(tmp_path / "data", tsv, valid_split=None, test_split=None)
    corpus = prepare_corpus(cfg)
    assert sum(corpus.counts.values()) == 40
    src, tgt = corpus.read("train")
    assert src[0].startswith("„Hallo") and tgt[0].startswith('"Hi"') and tgt[0].endswith("said.")


def test_max_rows_and_streaming(sources: dict[str, Path], tmp_path: Path) -> None:
    full = prepare_corpus(config(tmp_path, sources["parquet"]))
    cut = prepare_corpus(config(tmp_path, sources["parquet"], max_rows=4))
    assert cut.counts == {"train": 3, "valid": 4, "test": 4}  # train row 3 is dropped
    assert cut.read("valid")[0] == full.read("valid")[0][:4]
    streamed = prepare_corpus(config(tmp_path, sources["parquet"], max_rows=4, streaming=True))
    assert streamed.directory != cut.directory
    for split in ("train", "valid", "test"):
        assert streamed.read(split) == cut.read(split)


def test_hub_id_is_passed_to_load_dataset(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network here: a stand-in load_dataset checks the call and returns local data."""
    calls: list[tuple] = []

    def fake_load_dataset(path: str, name: str | None = None, **kwargs: object) -> object:
        calls.append((path, name, kwargs))
        return datasets.load_from_disk(str(sources["disk"]))

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    cfg = config(tmp_path, "wmt16", config="de-en", revision="v1.0", max_rows=5)
    corpus = prepare_corpus(cfg)
    assert corpus.counts == {"train": 4, "valid": 5, "test": 5}
    assert calls == [
        (
            "wmt16",
            "de-en",
            {"revision": "v1.0", "cache_dir": str(tmp_path / "raw" / "hf"), "streaming": False},
        )
    ]
    key = corpora.cache_key(RECIPES["hf"], to_data_config(cfg), ("de", "en"))
    assert key["inputs"] is None and key["settings"]["hf"]["revision"] == "v1.0"


# ---------------------------------------------------------------- cache


def test_second_prepare_reads_the_cache_and_a_changed_file_rebuilds(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "pq"
    data.mkdir()
    for f in sources["parquet"].iterdir():
        (data / f.name).write_bytes(f.read_bytes())
    cfg = config(tmp_path / "cache", data)
    first = prepare_corpus(cfg)

    def fail(*args: object) -> Built:
        raise AssertionError("rebuilt although cached")

    real = RECIPES["hf"]
    monkeypatch.setitem(RECIPES, "hf", Recipe(fail, None, real.settings, 1, real.fingerprint))
    assert prepare_corpus(cfg) == first
    monkeypatch.setitem(RECIPES, "hf", real)
    other = prepare_corpus({**cfg, "hf": {**cfg["hf"], "max_rows": 2}})  # a setting: new key
    assert other.directory != first.directory

    new = datasets.Dataset.from_dict(
        {"translation": [{"de": "Neu ist das.", "en": "This is new.", "fr": "C'est neuf."}] * 3}
    )
    new.to_parquet(str(data / "test.parquet"))
    stat = (data / "test.parquet").stat()
    os.utime(data / "test.parquet", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    rebuilt = prepare_corpus(cfg)
    assert rebuilt.directory != first.directory
    assert rebuilt.read("test") == (["Neu ist das."] * 3, ["This is new."] * 3)


# ---------------------------------------------------------------- errors


def test_missing_language_lists_the_dataset_languages(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    with pytest.raises(DataError, match=r"^data\.tgt_lang='it': .*its languages: de, en, fr"):
        prepare_corpus(config(tmp_path, sources["disk"], tgt_lang="it"))


def test_missing_column_lists_the_columns(sources: dict[str, Path], tmp_path: Path) -> None:
    cfg = config(tmp_path, sources["columns"], src_column="src", tgt_column="target")
    with pytest.raises(
        DataError, match=r"^data\.hf\.src_column='src': .*its columns: source, target, score"
    ):
        prepare_corpus(cfg)
    auto = config(tmp_path, sources["columns"])  # neither translation nor de/en columns
    with pytest.raises(DataError, match=r"^data\.hf\.layout=auto: .*its columns: source, target"):
        prepare_corpus(auto)
    forced = config(tmp_path, sources["disk"], layout="columns")
    with pytest.raises(DataError, match=r"^data\.hf\.src_column='de' \(default: data\.src_lang\)"):
        prepare_corpus(forced)


def test_missing_split_names_the_key_and_lists_the_splits(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    splits = "its splits: train, validation, test"
    with pytest.raises(DataError, match=rf"^data\.hf\.train_split='training': .*{splits}"):
        prepare_corpus(config(tmp_path, sources["disk"], train_split="training"))
    with pytest.raises(DataError, match=rf"^data\.hf\.valid_split='dev': .*{splits}"):
        prepare_corpus(config(tmp_path, sources["disk"], valid_split="dev"))


def test_without_the_extra_the_error_says_what_to_install(
    sources: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` raises ImportError
    cfg = config(tmp_path, sources["disk"])
    message = re.escape("data=hf needs the hf extra: pip install 'attnmt[hf]'")
    with pytest.raises(ConfigError, match=message):
        check_splits(to_data_config(cfg), ("train", "valid"))
    with pytest.raises(ConfigError, match=message):
        prepare_corpus(cfg)


def test_config_mistakes_name_the_key(sources: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^data\.hf\.name is not set"):
        prepare_corpus({"name": "hf", "root": str(tmp_path)})
    with pytest.raises(DataError, match=r"^data\.hf\.name='\./nowhere': no such file"):
        prepare_corpus(config(tmp_path, "./nowhere"))
    with pytest.raises(DataError, match=r"no file matches"):
        prepare_corpus(config(tmp_path, tmp_path / "*.parquet"))
    with pytest.raises(ConfigError, match=r"^data\.hf\.config='de-en': a saved dataset"):
        prepare_corpus(config(tmp_path, sources["disk"], config="de-en"))
    with pytest.raises(ConfigError, match=r"^data\.hf\.revision='main': only hub ids"):
        prepare_corpus(config(tmp_path, sources["disk"], revision="main"))
    with pytest.raises(ConfigError, match=r"^data\.hf\.layout='rows': use one of auto"):
        to_data_config(config(tmp_path, sources["disk"], layout="rows"))
    with pytest.raises(ConfigError, match=r"^data\.hf\.max_rows=-1"):
        to_data_config(config(tmp_path, sources["disk"], max_rows=-1))
    with pytest.raises(ConfigError, match=r"^data\.hf\.valid_split='train': must differ"):
        to_data_config(config(tmp_path, sources["disk"], valid_split="train"))
    with pytest.raises(ConfigError, match=r"^data\.hf\.naem: unknown key; did you mean data\.hf"):
        to_data_config({"name": "hf", "hf": {"naem": "x"}})


def test_hub_load_failure_is_a_data_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(*args: object, **kwargs: object) -> object:
        raise ConnectionError("Couldn't reach 'wmt16' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataError, match=r"^data\.hf\.name='wmt16' \(config 'de-en'\): cannot"):
        prepare_corpus(config(tmp_path, "wmt16", config="de-en"))


# ---------------------------------------------------------------- train.py's config


def test_train_config_composes_validates_and_prepares_with_data_hf(
    sources: dict[str, Path], tmp_path: Path
) -> None:
    from hydra import compose, initialize_config_dir

    from attnmt.train.run_config import validate_config

    overrides = [
        "data=hf",
        f"data.hf.name={sources['disk']}",
        "data.src_lang=en",
        "data.tgt_lang=fr",
        f"data.root={tmp_path}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = validate_config(compose("train", overrides=overrides))
    assert cfg.data.name == "hf" and cfg.data.hf.name == str(sources["disk"])
    check_splits(cfg.data, ("train", "valid", "test"))
    corpus = prepare_corpus(cfg.data, logging.getLogger("test"))
    corpora.require_splits(corpus, ("train", "valid", "test"))
    assert corpus.counts == {"train": 39, "valid": 6, "test": 5}
    assert hf.hash_side(cfg.data) == 0  # English
