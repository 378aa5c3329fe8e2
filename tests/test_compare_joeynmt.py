"""scripts/compare_joeynmt.py's pure parts: JoeyNMT config, vocabulary, logs, table, watchdog.

No JoeyNMT needed (the helper never imports it) and no network.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compare_joeynmt.py"


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("compare_joeynmt", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["compare_joeynmt"] = module
    spec.loader.exec_module(module)
    return module


cj = _script()


def _attnmt_config(**changes: dict[str, Any]) -> dict[str, Any]:
    """The resolved config of `train.py model=transformer` (from the preset files)."""
    cfg = {
        group: yaml.safe_load((ROOT / "configs" / group / f"{name}.yaml").read_text())
        for group, name in [
            ("data", "ding_de_en"),
            ("model", "transformer"),
            ("trainer", "default"),
            ("decode", "default"),
        ]
    }
    cfg["seed"] = 1234
    for group, values in changes.items():
        cfg[group].update(values)
    return cfg


PATHS = {
    "model_dir": "/w/model",
    "train": "/w/data/train",
    "dev": "/w/data/dev",
    "src_vocab": "/w/data/vocab.txt",
    "trg_vocab": "/w/data/vocab.txt",
    "src_spm": "/w/data/spm.model",
    "trg_spm": "/w/data/spm.model",
}


def test_config_mirrors_the_attnmt_preset() -> None:
    a = _attnmt_config()
    cfg, notes = cj.joeynmt_config(a, PATHS)
    m, t, d = a["model"], a["trainer"], a["data"]
    for stack, layers in (("encoder", m["enc_layers"]), ("decoder", m["dec_layers"])):
        s = cfg["model"][stack]
        assert s["type"] == "transformer" and s["num_layers"] == layers
        assert s["hidden_size"] == s["embeddings"]["embedding_dim"] == m["d_model"]
        assert (s["num_heads"], s["ff_size"], s["dropout"]) == (
            m["n_heads"],
            m["d_ff"],
            m["dropout"],
        )
        assert (s["layer_norm"], s["activation"]) == (m["norm"], m["activation"])
        assert s["embeddings"]["scale"] is True
    assert cfg["model"]["tied_embeddings"] is (d["tokenizer"]["joint"] and m["share_embeddings"])
    assert cfg["model"]["tied_softmax"] is m["tie_embeddings"]
    tr = cfg["training"]
    assert tr["scheduling"] == "warmupinversesquareroot"
    assert tr["learning_rate"] == t["lr"] and tr["learning_rate_warmup"] == t["warmup_steps"]
    assert tr["learning_rate_min"] <= 1e-8  # JoeyNMT's default 1e-4 stops during warm-up
    assert tr["adam_betas"] == list(t["betas"]) and tr["optimizer"] == t["optimizer"]
    assert (tr["batch_size"], tr["batch_type"]) == (t["max_tokens"], "token")
    assert tr["label_smoothing"] == t["label_smoothing"]
    assert tr["normalization"] == "tokens" and tr["early_stopping_metric"] == "bleu"
    assert tr["validation_freq"] % tr["logging_freq"] == 0
    assert tr["keep_best_ckpts"] == t["keep_best"]
    assert "updates" not in tr or tr["updates"] == t["max_steps"]
    data = cfg["data"]
    assert (data["src"]["lang"], data["trg"]["lang"]) == (d["src_lang"], d["tgt_lang"])
    assert data["src"]["tokenizer_cfg"]["model_file"] == PATHS["src_spm"]
    assert data["trg"]["voc_file"] == PATHS["trg_vocab"]
    assert (data["train"], data["dev"]) == (PATHS["train"], PATHS["dev"])
    assert cfg["testing"]["beam_size"] == a["decode"]["beam"]
    assert cfg["use_cuda"] is False and cfg["random_seed"] == 1234
    assert any("attention dropout" in n for n in notes) == (m["attention_dropout"] != m["dropout"])


def test_config_yaml_round_trips_with_a_comment_header() -> None:
    cfg, notes = cj.joeynmt_config(_attnmt_config(), PATHS)
    text = cj.dump_yaml(cfg, ["first line", "", *notes])
    assert text.startswith("# first line\n#\n")
    assert yaml.safe_load(text) == cfg


def test_config_separate_vocabularies_and_other_settings() -> None:
    a = _attnmt_config(
        data={"tokenizer": {"joint": False}},
        trainer={"max_steps": 500, "clip_grad_norm": 0.0, "val_every_steps": 0},
        decode={"beam": 4, "alpha": 0.6},
    )
    cfg, _ = cj.joeynmt_config(a, PATHS)
    assert cfg["model"]["tied_embeddings"] is False
    assert cfg["training"]["updates"] == 500
    assert "clip_grad_norm" not in cfg["training"]
    assert cfg["training"]["validation_freq"] == 1000
    assert (cfg["testing"]["beam_size"], cfg["testing"]["beam_alpha"]) == (4, 0.6)


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"model": {"name": "rnn_luong"}}, "only the transformer"),
        ({"trainer": {"schedule": "plateau"}}, "only 'noam'"),
        ({"trainer": {"optimizer": "sgd"}}, "adam or adamw"),
    ],
)
def test_config_refuses_what_joeynmt_cannot_mirror(changes: dict, message: str) -> None:
    with pytest.raises(cj.CompareError, match=message):
        cj.joeynmt_config(_attnmt_config(**changes), PATHS)


@pytest.mark.parametrize(
    "log_every, val_every, expected",
    [(50, 100, (50, 100)), (25, 50, (25, 50)), (40, 100, (20, 100)), (0, 100, (100, 100)),
     (50, 0, (50, 1000)), (150, 100, (50, 100))],
)  # fmt: skip
def test_logging_frequency_divides_validation_frequency(
    log_every: int, val_every: int, expected: tuple[int, int]
) -> None:
    assert cj.log_and_val_freq(log_every, val_every) == expected


# ---- vocabulary and data files -----------------------------------------------------------------


def _joey_vocab(lines: list[str]) -> list[str]:
    """What JoeyNMT 2.3's Vocabulary holds after reading the file (read_list_from_file +
    specials first, duplicates skipped)."""
    read = [line.rstrip("\n") for line in "".join(f"{x}\n" for x in lines).splitlines()]
    itos: list[str] = []
    for t in [*cj.JOEY_SPECIALS, *read]:
        if t not in itos:
            itos.append(t)
    return itos


def test_vocab_lines_drop_specials_and_round_trip_through_joeynmt() -> None:
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁the", "s", ",", "▁Haus", "ß"]
    lines = cj.vocab_lines(pieces, {"<pad>", "<unk>", "<s>", "</s>"})
    assert lines == ["▁the", "s", ",", "▁Haus", "ß"]
    assert _joey_vocab(lines) == [*cj.JOEY_SPECIALS, *lines]


@pytest.mark.parametrize("bad", ["", "a\u2028b", "x\n", "\x85"])
def test_vocab_lines_reject_pieces_a_line_file_cannot_hold(bad: str) -> None:
    with pytest.raises(cj.CompareError, match="one line"):
        cj.vocab_lines(["a", bad])


def test_vocab_lines_reject_duplicates() -> None:
    with pytest.raises(cj.CompareError, match="twice"):
        cj.vocab_lines(["a", "b", "a"])


def test_spm_vocab_lines_on_a_model_with_attnmt_special_ids(tmp_path: Path) -> None:
    spm = pytest.importorskip("sentencepiece")
    text = tmp_path / "t.txt"
    text.write_text("Das ist ein Haus.\nThis is a house.\nEin kleines Haus.\n" * 20)
    spm.SentencePieceTrainer.train(
        input=str(text),
        model_prefix=str(tmp_path / "m"),
        vocab_size=24,
        hard_vocab_limit=False,
        pad_id=0,
        unk_id=1,
        bos_id=2,
        eos_id=3,
        pad_piece="<pad>",
        minloglevel=2,
    )
    lines = cj.spm_vocab_lines(tmp_path / "m.model")
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    assert len(lines) == sp.get_piece_size() - 4
    assert not set(lines) & set(cj.JOEY_SPECIALS)
    assert lines == [sp.id_to_piece(i) for i in range(4, sp.get_piece_size())]


def test_check_text_lines(tmp_path: Path) -> None:
    assert cj.check_text_lines(["a b", "c"], "x") == ["a b", "c"]
    with pytest.raises(cj.CompareError, match="x:2: empty"):
        cj.check_text_lines(["a", " "], "x")
    with pytest.raises(cj.CompareError, match="line break"):
        cj.check_text_lines(["a\u2029b"], "x")
    assert cj.write_lines(tmp_path / "d" / "f.txt", ["a", "b"]) == 2
    assert (tmp_path / "d" / "f.txt").read_text() == "a\nb\n"


# ---- logs --------------------------------------------------------------------------------------

ATTNMT_LOG = textwrap.dedent(
    """\
    [2026-11-23 21:35:43,406][attnmt.data.corpora][INFO] - ding_de_en: using the cache data/x
    [2026-11-23 21:35:43,705][attnmt.train.loop][INFO] - model transformer: 3.66M parameters on cpu, precision fp32, 1 rank(s)
    [2026-11-23 21:35:53,062][attnmt.train.loop][INFO] - step 1 | epoch 0 | nll 8.889 (smoothed 8.908) | ppl 7252.90 | lr 1.50e-05 | gnorm 2.91 | 202 tok/s
    [2026-11-23 21:36:23,000][attnmt.train.loop][INFO] - step 50 | epoch 0 | nll 7.1 (smoothed 7.2) | ppl 1200.00 | lr 7.50e-04 | gnorm 1.20 | 3000 tok/s
    [2026-11-23 21:36:34,550][attnmt.train.loop][INFO] - valid step 50 | nll 6.619 | ppl 534.73 | acc 0.100 | BLEU 0.10 | chrF 8.56
    [2026-11-23 21:36:53,000][attnmt.train.loop][INFO] - step 100 | epoch 0 | nll 6.1 (smoothed 6.2) | ppl 450.00 | lr 1.50e-03 | gnorm 1.00 | 4000 tok/s
    [2026-11-23 21:37:43,705][attnmt.train.loop][INFO] - valid step 104 | nll 6.019 | ppl 434.73 | acc 0.120 | BLEU 0.30 | chrF 10.56
    [2026-11-23 21:38:00,000][attnmt.train.report][INFO] - test (best-104.pt, beam 1): BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 0.41 12.0/1.0/0.1/0.0 (BP = 1.000 ratio = 1.2 hyp_len = 100 ref_len = 90)
    [2026-11-23 21:38:00,000][attnmt.train.report][INFO] - test (best-104.pt, beam 1): chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0 = 11.37
    """  # noqa: E501
)

JOEY_LOG = textwrap.dedent(
    """\
    2026-11-23 21:42:29,900 - INFO - joeynmt.model - Total params: 3660800
    2026-11-23 21:42:30,079 - INFO - joeynmt.training - EPOCH 1
    2026-11-23 21:43:08,628 - INFO - joeynmt.training - Epoch   1, Step:       25, Batch Loss:     7.860541, Batch Acc: 0.003934, Tokens per Sec:     1000, Lr: 0.000375
    2026-11-23 21:43:38,628 - INFO - joeynmt.training - Epoch   1, Step:       50, Batch Loss:     7.060541, Batch Acc: 0.013934, Tokens per Sec:     3000, Lr: 0.000750
    2026-11-23 21:43:40,693 - INFO - joeynmt.training - Checkpoint saved in /w/model/50.ckpt.
    2026-11-23 21:44:30,000 - INFO - joeynmt.training - Interrupt at epoch 1, step 61.
    2026-11-23 21:44:30,079 - INFO - joeynmt.training - Checkpoint saved in /w/model/61.ckpt.
    """  # noqa: E501
)


def test_parse_attnmt_log() -> None:
    got = cj.parse_attnmt_log(ATTNMT_LOG)
    assert got["updates"] == 104
    assert got["tok_s"] == pytest.approx(3500.0)  # median; step 1's window left out
    assert got["minutes"] == pytest.approx((60 * 2 + 0.0) / 60, abs=1e-3)
    assert got["params_m"] == 3.66
    assert (got["test_bleu"], got["test_chrf"]) == (0.41, 11.37)
    assert got["test_checkpoint"] == "best-104.pt"


def test_parse_attnmt_log_with_only_the_first_step() -> None:
    got = cj.parse_attnmt_log("\n".join(ATTNMT_LOG.splitlines()[:3]))
    assert (got["updates"], got["tok_s"]) == (1, 202.0)
    assert "test_bleu" not in got


def test_parse_joeynmt_log() -> None:
    got = cj.parse_joeynmt_log(JOEY_LOG)
    assert got["updates"] == 61 and got["interrupted"] is True
    assert got["tok_s"] == pytest.approx(2000.0)
    assert got["params"] == 3660800
    assert got["minutes"] == pytest.approx(120.0 / 60, abs=1e-3)


def test_parse_joeynmt_log_without_interrupt_or_steps() -> None:
    got = cj.parse_joeynmt_log("\n".join(JOEY_LOG.splitlines()[:2]))
    assert (got["updates"], got["tok_s"], got["interrupted"]) == (0, None, False)


# ---- table and scores --------------------------------------------------------------------------


def test_markdown_table() -> None:
    rows = [
        {"system": "attnmt (transformer)", "bleu": 20.123, "chrf": 45.0, "minutes": 12.04,
         "updates": 3000, "updates_per_min": 249.2, "tok_s": 4321.4, "params": 3660800,
         "checkpoint": "best-2900.pt"},
        {"system": "JoeyNMT 2.3.0", "bleu": 18.0, "chrf": None, "updates": 10},
    ]  # fmt: skip
    lines = cj.markdown_table(rows).splitlines()
    assert len(lines) == 4
    assert all(line.count("|") == len(cj.COLUMNS) + 1 for line in lines)
    assert (
        "| attnmt (transformer) | 20.12 | 45.00 | 12.0 | 3000 | 249 | 4321 | 3,660,800 |"
        in (lines[2])
    )
    assert "n/a" in lines[3] and "| 18.00 |" in lines[3]


def test_score_is_sacrebleu_with_its_defaults() -> None:
    pytest.importorskip("sacrebleu")
    refs = ["The house is small.", "I am here."]
    got = cj.score(refs, refs)
    assert got["bleu"] == pytest.approx(100.0) and got["chrf"] == pytest.approx(100.0)
    assert "tok:13a" in got["bleu_signature"] and "nc:6" in got["chrf_signature"]
    with pytest.raises(cj.CompareError, match="1 hypotheses for 2"):
        cj.score(refs[:1], refs)


# ---- the watchdog ------------------------------------------------------------------------------

FAKE_JOEY = """
import signal, sys, time
log = open(sys.argv[1], "a")
log.write("2026-01-01 00:00:00,000 - INFO - joeynmt.training - EPOCH 1\\n"); log.flush()
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    log.write("2026-01-01 00:00:01,000 - INFO - joeynmt.training - Interrupt at epoch 1, step 3.\\n")
    log.flush()
"""  # noqa: E501


def test_watch_interrupts_after_the_budget(tmp_path: Path) -> None:
    fake, log, out = tmp_path / "fake.py", tmp_path / "train.log", tmp_path / "watch.json"
    fake.write_text(FAKE_JOEY)
    rc = cj.main(
        ["watch", "--budget-min", "0.01", "--log", str(log), "--out", str(out),
         "--console", str(tmp_path / "console.log"), "--", sys.executable, str(fake), str(log)]
    )  # fmt: skip
    assert rc == 0
    verdict = json.loads(out.read_text())
    assert verdict["stopped_by"] == "budget" and verdict["returncode"] == 0
    assert 0.6 <= verdict["train_s"] < 10
    assert "Interrupt at epoch 1, step 3." in log.read_text()


DEAF_JOEY = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # as JoeyNMT 2.3.0 inside a long validation
log = open(sys.argv[1], "a")
log.write("2026-01-01 00:00:00,000 - INFO - joeynmt.training - EPOCH 1\\n"); log.flush()
while True:
    time.sleep(0.05)
"""


def test_watch_terminates_a_run_deaf_to_sigint_and_counts_it_as_stopped(tmp_path: Path) -> None:
    fake, log, out = tmp_path / "deaf.py", tmp_path / "train.log", tmp_path / "watch.json"
    fake.write_text(DEAF_JOEY)
    rc = cj.main(
        ["watch", "--budget-min", "0.01", "--grace", "0.5", "--log", str(log), "--out", str(out),
         "--", sys.executable, str(fake), str(log)]
    )  # fmt: skip
    assert rc == 0
    verdict = json.loads(out.read_text())
    assert verdict["stopped_by"] == "budget" and verdict["returncode"] == -15


def test_watch_gives_up_when_training_never_starts(tmp_path: Path) -> None:
    log, out = tmp_path / "train.log", tmp_path / "watch.json"
    rc = cj.main(
        ["watch", "--budget-min", "1", "--log", str(log), "--out", str(out),
         "--startup-timeout", "0.5", "--", sys.executable, "-c", "import time; time.sleep(30)"]
    )  # fmt: skip
    assert rc == 1 and not out.exists()
