"""The JoeyNMT comparison's parts that need no JoeyNMT: its config mirroring attnmt's, the
vocabulary file, log parsing, scores and tables, the training watchdog, decoding timings."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from attnmt.run_dir import RunDir
from attnmt.run_record import RecordWriter
from benchmarks import compare_decoding as cd
from benchmarks import compare_joeynmt as cj

ROOT = Path(__file__).resolve().parents[1]
PATHS = {"model_dir": "/w/model", "train": "/w/data/train", "dev": "/w/data/dev"}
PATHS |= {f"{s}_{k}": f"/w/data/{k}.{s}" for s in ("src", "trg") for k in ("vocab", "spm")}


def _attnmt_config(**changes: dict[str, Any]) -> dict[str, Any]:
    """The resolved config of `train.py model=transformer` (from the preset files)."""
    cfg: dict[str, Any] = {"seed": 1234}
    for group, name in [("data", "ding_de_en"), ("model", "transformer"),
                        ("trainer", "default"), ("decode", "default")]:  # fmt: skip
        cfg[group] = yaml.safe_load((ROOT / "configs" / group / f"{name}.yaml").read_text())
        cfg[group].update(changes.get(group, {}))
    return cfg


def test_config_mirrors_the_attnmt_preset() -> None:
    a = _attnmt_config()
    cfg, notes = cj.joeynmt_config(a, PATHS)
    m, t, d = a["model"], a["trainer"], a["data"]
    for stack, layers in (("encoder", m["enc_layers"]), ("decoder", m["dec_layers"])):
        s = cfg["model"][stack]
        assert (s["type"], s["num_layers"], s["num_heads"]) == ("transformer", layers, m["n_heads"])
        assert s["hidden_size"] == s["embeddings"]["embedding_dim"] == m["d_model"]
        assert (s["ff_size"], s["dropout"], s["layer_norm"]) == (m["d_ff"], m["dropout"], m["norm"])
    assert cfg["model"]["tied_embeddings"] is (d["tokenizer"]["joint"] and m["share_embeddings"])
    tr = cfg["training"]
    assert (tr["scheduling"], tr["learning_rate"]) == ("warmupinversesquareroot", t["lr"])
    assert tr["learning_rate_warmup"] == t["warmup_steps"] and tr["learning_rate_min"] <= 1e-8
    assert (tr["batch_size"], tr["batch_type"]) == (t["max_tokens"], "token")
    assert tr["label_smoothing"] == t["label_smoothing"] and tr["adam_betas"] == t["betas"]
    assert tr["validation_freq"] % tr["logging_freq"] == 0
    assert cfg["data"]["src"]["tokenizer_cfg"]["model_file"] == PATHS["src_spm"]
    assert cfg["data"]["trg"]["voc_file"] == PATHS["trg_vocab"]
    assert cfg["testing"]["beam_size"] == a["decode"]["beam"] and cfg["random_seed"] == 1234
    assert any("attention dropout" in n for n in notes) == (m["attention_dropout"] != m["dropout"])
    assert yaml.safe_load(yaml.safe_dump(cfg)) == cfg  # plain data, as config.yaml is written


def test_config_of_other_settings() -> None:
    a = _attnmt_config(
        data={"tokenizer": {"joint": False}},
        trainer={"max_steps": 500, "clip_grad_norm": 0.0, "val_every_steps": 0},
        decode={"beam": 4, "alpha": 0.6},
    )
    cfg, _ = cj.joeynmt_config(a, PATHS)
    assert cfg["model"]["tied_embeddings"] is False and cfg["training"]["updates"] == 500
    assert "clip_grad_norm" not in cfg["training"] and cfg["training"]["validation_freq"] == 1000
    assert (cfg["testing"]["beam_size"], cfg["testing"]["beam_alpha"]) == (4, 0.6)


@pytest.mark.parametrize(
    "changes, message",
    [({"model": {"name": "rnn_luong"}}, "only the transformer"),
     ({"trainer": {"schedule": "plateau"}}, "only 'noam'"),
     ({"trainer": {"optimizer": "sgd"}}, "adam or adamw")],
)  # fmt: skip
def test_config_refuses_what_joeynmt_cannot_mirror(changes: dict, message: str) -> None:
    with pytest.raises(cj.CompareError, match=message):
        cj.joeynmt_config(_attnmt_config(**changes), PATHS)


@pytest.mark.parametrize(
    "log_every, val_every, expected",
    [(50, 100, (50, 100)), (40, 100, (20, 100)), (0, 100, (100, 100)), (50, 0, (50, 1000)),
     (150, 100, (50, 100))],
)  # fmt: skip
def test_logging_frequency_divides_validation_frequency(
    log_every: int, val_every: int, expected: tuple[int, int]
) -> None:
    assert cj.log_and_val_freq(log_every, val_every) == expected


def test_vocab_lines_round_trip_through_joeynmts_reader() -> None:
    pieces = ["<pad>", "<unk>", "▁the", "s", ",", "▁Haus", "ß"]
    lines = cj.vocab_lines(pieces)
    # JoeyNMT 2.3: read_text().splitlines(), its specials first, duplicates skipped
    itos = list(dict.fromkeys([*cj.JOEY_SPECIALS, *"".join(f"{x}\n" for x in lines).splitlines()]))
    assert itos == [*cj.JOEY_SPECIALS, "▁the", "s", ",", "▁Haus", "ß"]


@pytest.mark.parametrize("bad", ["", "a\u2028b", "x\n", "\x85"])
def test_vocab_lines_reject_pieces_a_line_file_cannot_hold(bad: str) -> None:
    with pytest.raises(cj.CompareError, match="one line"):
        cj.vocab_lines(["a", bad])


def test_spm_vocab_lines_on_a_model_with_attnmt_special_ids(tmp_path: Path) -> None:
    import sentencepiece as spm

    (tmp_path / "t.txt").write_text("Das ist ein Haus.\nThis is a house.\nEin Haus.\n" * 20)
    spm.SentencePieceTrainer.train(
        input=str(tmp_path / "t.txt"), model_prefix=str(tmp_path / "m"), vocab_size=24,
        hard_vocab_limit=False, pad_id=0, unk_id=1, bos_id=2, eos_id=3, minloglevel=2,
    )  # fmt: skip
    sp = spm.SentencePieceProcessor(model_file=str(tmp_path / "m.model"))
    lines = cj.spm_vocab_lines(tmp_path / "m.model")
    assert lines == [sp.id_to_piece(i) for i in range(4, sp.get_piece_size())]


def _attnmt_run(run: Path, rates: list[tuple[int, float]]) -> Path:
    """A run record with train windows (step, tokens/s) and a validation between them."""
    writer = RecordWriter(RunDir(run), None, {})
    writer.event("start", 0)
    for step, rate in rates:
        writer.event("train", step, epoch=0, minutes=step / 100, tokens_per_sec=rate)
        if step == 50:
            writer.event("valid", 50, epoch=0, minutes=0.5, nll=6.6, bleu=0.1, chrf=8.6)
    return run


JOEY_LOG = textwrap.dedent("""\
    2026-11-23 21:42:29,900 - INFO - joeynmt.model - Total params: 3660800
    2026-11-23 21:42:30,079 - INFO - joeynmt.training - EPOCH 1
    2026-11-23 21:43:08,628 - INFO - joeynmt.training - Epoch   1, Step:       25, Batch Loss:     7.860541, Tokens per Sec:     1000, Lr: 0.000375
    2026-11-23 21:43:38,628 - INFO - joeynmt.training - Epoch   1, Step:       50, Batch Loss:     7.060541, Tokens per Sec:     3000, Lr: 0.000750
    2026-11-23 21:43:40,693 - INFO - joeynmt.training - Checkpoint saved in /w/model/50.ckpt.
    2026-11-23 21:44:30,000 - INFO - joeynmt.training - Interrupt at epoch 1, step 61.
""")  # noqa: E501


def test_logs_give_rates_updates_and_parameters(tmp_path: Path) -> None:
    rates = [(1, 202.0), (50, 3000.0), (100, 4000.0)]
    assert cj.attnmt_tok_s(_attnmt_run(tmp_path / "a", rates)) == 3500.0  # step 1 left out
    assert cj.attnmt_tok_s(_attnmt_run(tmp_path / "b", rates[:1])) == 202.0  # unless alone
    assert cj.attnmt_tok_s(_attnmt_run(tmp_path / "c", [])) is None
    assert cj.parse_joeynmt_log(JOEY_LOG) == {"updates": 61, "tok_s": 2000.0, "params": 3660800}
    head = "\n".join(JOEY_LOG.splitlines()[:2])
    assert cj.parse_joeynmt_log(head) == {"updates": 0, "tok_s": None, "params": 3660800}


def test_rows_are_scored_by_attnmts_scorer_and_tabulated() -> None:
    refs = ["The house is small.", "I am here."]
    row = cj.system_row("attnmt", refs, refs, minutes=2.0, updates=300, tok_s=4321.4, params=10)
    assert row["bleu"] == pytest.approx(100.0) and row["chrf"] == pytest.approx(100.0)
    assert "tok:13a" in row["signatures"][0] and row["updates_per_min"] == 150.0
    joey = cj.system_row("JoeyNMT", ["The house.", "Here."], refs, updates=10, params=None)
    lines = cj.markdown_table([row, joey]).splitlines()
    assert len(lines) == 4 and all(line.count("|") == len(cj.COLUMNS) + 1 for line in lines)
    assert lines[2] == "| attnmt | 100.00 | 100.00 | 2.0 | 300 | 150 | 4321 | 10 |"
    assert lines[3].startswith("| JoeyNMT | ") and lines[3].endswith(
        "| n/a | 10 | n/a | n/a | n/a |"
    )
    with pytest.raises(cj.AttnmtError, match="1 hypotheses against 2"):
        cj.system_row("short", refs[:1], refs)


FAKE_JOEY = """
import signal, sys, time
{setup}
log = open(sys.argv[1], "a")
log.write("2026-01-01 00:00:00,000 - INFO - joeynmt.training - EPOCH 1\\n"); log.flush()
try:
    while True:
        time.sleep(0.05)
except KeyboardInterrupt:
    log.write("Interrupt at epoch 1, step 3.\\n")
"""


@pytest.mark.parametrize("deaf", [False, True])
def test_watch_stops_training_at_the_budget(tmp_path: Path, deaf: bool) -> None:
    """SIGINT after the budget; a run deaf to it (JoeyNMT inside a validation) gets SIGTERM."""
    ignore = "signal.signal(signal.SIGINT, signal.SIG_IGN)" if deaf else ""
    (tmp_path / "fake.py").write_text(FAKE_JOEY.format(setup=ignore))
    log = tmp_path / "train.log"
    cmd = [sys.executable, str(tmp_path / "fake.py"), str(log)]
    verdict = cj.watch(cmd, log, 0.6, tmp_path / "console.log", grace=0.5)
    assert verdict["stopped_by"] == "budget" and 0.6 <= verdict["train_s"] < 10
    assert verdict["returncode"] == (-15 if deaf else 0)
    assert ("Interrupt at epoch 1, step 3." in log.read_text()) is not deaf


def test_watch_gives_up_when_training_never_starts(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import time; time.sleep(30)"]
    with pytest.raises(cj.CompareError, match="did not start in 0 s"):
        cj.watch(cmd, tmp_path / "train.log", 60.0, startup_timeout=0.5)


# ---- decoding speed -----------------------------------------------------------------------------


def test_decoding_times_come_from_each_toolkits_own_clock() -> None:
    log = "Predicting 866 example(s)...\nGeneration took 120.9752[sec].\n"
    assert cd.joeynmt_seconds(log) == 120.9752
    with pytest.raises(cd.CompareError, match="Generation took"):
        cd.joeynmt_seconds("Predicting 866 example(s)...\n")
    entry = {"metrics": {}, "speed": {"decode_seconds": 12.5}}
    assert cd.attnmt_seconds({"best-1-test-beam5": entry, "old": {"metrics": {}}}) == 12.5
    with pytest.raises(cd.CompareError, match="found 0"):
        cd.attnmt_seconds({"old": {"metrics": {}}})


def test_decoding_table_gives_medians_and_speed_ups_over_the_first_row() -> None:
    row = cd.summarise("x", [4.0, 2.0, 3.0], ["a b c", "d", "", "e f"])  # 6 words, 4 sentences
    assert (row["decode_s"], row["min_s"], row["max_s"]) == (3.0, 2.0, 4.0)
    assert row["sent_per_s"] == 4 / 3 and (row["words_per_hyp"], row["words_per_s"]) == (1.5, 2.0)
    joey = cd.summarise("joeynmt-beam1", [120.0], ["a b"] * 10)
    beam5 = {**cd.summarise("attnmt-beam5", [20.0], ["a"] * 10), "bleu": 4.25}
    lines = cd.markdown([joey, beam5]).splitlines()
    assert len(lines) == 4 and "× joeynmt-beam1" in lines[0]
    assert lines[3] == "| attnmt-beam5 | 20.0 (20.0–20.0) | 0.5 | 1.0 | 0 | 6.00 | 4.25 |"


def test_a_folder_that_is_not_a_comparison_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert cd.main([str(tmp_path), "--rounds", "1"]) == 2
    assert "joeynmt/setup.json" in capsys.readouterr().err
