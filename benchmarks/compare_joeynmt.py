"""Helpers of scripts/compare_joeynmt.sh (attnmt vs JoeyNMT 2.3.0 on the same splits).

Runs with attnmt's interpreter (.venv); never imports joeynmt. Subcommands:

    prepare --run RUN --work DIR [--val-subset N]
        From a finished attnmt run (its checkpoint holds the whole resolved config and
        the SentencePiece model(s) it trained with): JoeyNMT's data files (train filtered
        with attnmt's own length filter, the first ``trainer.val_subset`` valid pairs as
        dev, the test sources), vocabulary file(s), the same SentencePiece model(s) and a
        JoeyNMT config mirroring ``model`` / ``trainer`` / ``decode``; writes
        DIR/setup.json (paths, the reference file, attnmt's exact parameter count).
    watch --budget-min M --log FILE --out JSON -- CMD ...
        Runs CMD (``python -m joeynmt train ...``); the clock starts when FILE shows the
        first epoch (data and model are ready), SIGINT after M minutes (JoeyNMT catches
        it and saves the current weights), SIGTERM/SIGKILL if it does not exit.
    report --out DIR --budget-min M --attnmt-run RUN --attnmt-hyps H
           --joeynmt-work DIR --joeynmt-hyps H
        Scores both hypothesis files with one sacrebleu call against the same reference,
        reads each toolkit's log, writes DIR/results.md and DIR/results.json.

The pure functions (config, vocabulary, log parsing, table) are tested in
tests/test_compare_joeynmt.py without JoeyNMT installed.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

JOEYNMT_VERSION = "2.3.0"
# the four specials JoeyNMT puts first in every vocabulary itself (unk, pad, bos, eos)
JOEY_SPECIALS = ("<unk>", "<pad>", "<s>", "</s>")
START_MARKER = re.compile(r" - joeynmt\.training - EPOCH 1\s*$")


class CompareError(Exception):
    """A problem the user can fix; printed without a traceback."""


# ---- JoeyNMT config ---------------------------------------------------------------------------


def log_and_val_freq(log_every: int, val_every: int) -> tuple[int, int]:
    """(logging_freq, validation_freq): JoeyNMT requires logging_freq to divide
    validation_freq; attnmt's ``val_every_steps=0`` (epoch ends only) has no JoeyNMT
    equivalent, so it becomes a validation every 1000 updates."""
    val = val_every if val_every > 0 else 1000
    log = log_every if log_every > 0 else val
    if val % log:
        log = math.gcd(log, val)
    return log, val


def joeynmt_config(
    attnmt: Mapping[str, Any], paths: Mapping[str, str], name: str = "compare"
) -> tuple[dict[str, Any], list[str]]:
    """JoeyNMT config dict mirroring an attnmt run config, and the differences that remain.

    ``attnmt``: the resolved run config (``data``, ``model``, ``trainer``, ``decode``,
    ``seed``). ``paths``: ``model_dir``, ``train``, ``dev`` (file prefixes: JoeyNMT reads
    ``<prefix>.<lang>``), ``src_vocab``, ``trg_vocab``, ``src_spm``, ``trg_spm``.
    CompareError for settings JoeyNMT cannot mirror at all.
    """
    data, model, tr, dec = (attnmt[k] for k in ("data", "model", "trainer", "decode"))
    notes: list[str] = []
    if model["name"] != "transformer":
        raise CompareError(
            f"the attnmt run uses model {model['name']!r}; only the transformer presets are "
            "mirrored in JoeyNMT (train attnmt with model=transformer)"
        )
    if tr["schedule"] != "noam":
        raise CompareError(
            f"trainer.schedule={tr['schedule']!r}: only 'noam' is mirrored (JoeyNMT's "
            "'warmupinversesquareroot'); its plateau scheduler fails on torch 2.13"
        )
    if tr["optimizer"] not in ("adam", "adamw"):
        raise CompareError(f"trainer.optimizer={tr['optimizer']!r}: adam or adamw only")
    joint = bool(data["tokenizer"]["joint"])
    shared = joint and bool(model["share_embeddings"])
    d = int(model["d_model"])
    lr, warmup = float(tr["lr"]), int(tr["warmup_steps"])
    logging_freq, validation_freq = log_and_val_freq(
        int(tr["log_every_steps"]), int(tr["val_every_steps"])
    )

    def side(lang: str, vocab: str, spm: str) -> dict[str, Any]:
        return {
            "lang": lang,
            "level": "bpe",
            "tokenizer_type": "sentencepiece",
            "tokenizer_cfg": {"model_file": spm},
            "voc_file": vocab,
            "max_length": int(data["max_len"]),  # train is pre-filtered; a no-op guard
            "lowercase": False,
            "normalize": False,
        }

    def stack(layers: int) -> dict[str, Any]:
        return {
            "type": "transformer",
            "num_layers": layers,
            "num_heads": int(model["n_heads"]),
            "embeddings": {"embedding_dim": d, "scale": True, "dropout": float(model["dropout"])},
            "hidden_size": d,
            "ff_size": int(model["d_ff"]),
            "dropout": float(model["dropout"]),
            "layer_norm": str(model["norm"]),
            "activation": str(model["activation"]),
        }

    cfg: dict[str, Any] = {
        "name": name,
        "joeynmt_version": JOEYNMT_VERSION,
        "model_dir": paths["model_dir"],
        "use_cuda": False,
        "fp16": False,
        "random_seed": int(attnmt["seed"]),
        "data": {
            "train": paths["train"],
            "dev": paths["dev"],
            "dataset_type": "plain",
            "src": side(data["src_lang"], paths["src_vocab"], paths["src_spm"]),
            "trg": side(data["tgt_lang"], paths["trg_vocab"], paths["trg_spm"]),
        },
        "testing": {
            "n_best": 1,
            "beam_size": int(dec["beam"]),
            "beam_alpha": float(dec["alpha"]) if int(dec["beam"]) > 1 else -1,
            "batch_size": int(dec["batch_tokens"]),
            "batch_type": "token",
            "max_output_length": -1,  # 1.5 x the longest source in the batch
            "eval_metrics": ["bleu", "chrf"],
            "sacrebleu_cfg": {"tokenize": "13a"},
            "generate_unk": True,
        },
        "training": {
            "optimizer": str(tr["optimizer"]),
            "adam_betas": [float(b) for b in tr["betas"]],
            "weight_decay": float(tr["weight_decay"]),
            "scheduling": "warmupinversesquareroot",  # lr * min(s / warmup, sqrt(warmup / s))
            "learning_rate": lr,  # the peak (2.3.0 ignores learning_rate_peak)
            "learning_rate_warmup": warmup,
            # JoeyNMT stops when the lr is below learning_rate_min (default 1e-4: during
            # warm-up); attnmt has no such rule
            "learning_rate_min": 1.0e-8,
            "label_smoothing": float(tr["label_smoothing"]),
            "loss": "crossentropy",
            "normalization": "tokens",
            "clip_grad_norm": float(tr["clip_grad_norm"]) if tr["clip_grad_norm"] > 0 else None,
            "batch_size": int(tr["max_tokens"]),
            "batch_type": "token",
            "batch_multiplier": int(tr["accum_steps"]),
            "epochs": int(tr["max_epochs"]) if int(tr["max_epochs"]) > 0 else 1_000_000,
            "early_stopping_metric": "bleu",
            "validation_freq": validation_freq,
            "logging_freq": logging_freq,
            "keep_best_ckpts": int(tr["keep_best"]),
            "shuffle": True,
            "print_valid_sents": [0, 1, 2][: int(tr["num_samples"])],
            "overwrite": False,
            "num_workers": 0,
        },
        "model": {
            "initializer": "xavier_uniform",
            "bias_initializer": "zeros",
            "init_gain": 1.0,
            "embed_initializer": "normal",  # attnmt: N(0, d_model^-0.5)
            "embed_init_weight": d**-0.5,
            "tied_embeddings": shared,
            "tied_softmax": bool(model["tie_embeddings"]),
            "encoder": stack(int(model["enc_layers"])),
            "decoder": stack(int(model["dec_layers"])),
        },
    }
    if int(tr["max_steps"]) > 0:
        cfg["training"]["updates"] = int(tr["max_steps"])
    if cfg["training"]["clip_grad_norm"] is None:
        del cfg["training"]["clip_grad_norm"]

    # what stays different (each toolkit's fixed behaviour)
    if float(model.get("attention_dropout", 0.0)) != float(model["dropout"]):
        notes.append(
            f"attention dropout: attnmt {model.get('attention_dropout', 0.0)}, JoeyNMT uses "
            f"the layer dropout {model['dropout']} (not configurable)"
        )
    if model.get("positions", "sinusoidal") != "sinusoidal":
        notes.append(f"positions: attnmt {model['positions']}, JoeyNMT sinusoidal only")
    notes.append(f"Adam eps: attnmt {tr['eps']:g}, JoeyNMT torch's default 1e-08")
    if warmup > 0:
        notes.append(
            f"first update: JoeyNMT runs it at the peak lr {lr:g} (its scheduler sets the "
            f"lr after each update), attnmt at lr/warmup {lr / warmup:g}; the same "
            "schedule from the second update on (one step behind)"
        )
    notes.append(
        "batches: attnmt sorts buckets of "
        f"{tr['bucket_size']} pairs by length before packing {tr['max_tokens']}-token "
        "batches; JoeyNMT packs in random order (more padding per batch)"
    )
    if tr.get("src_word_dropout") or tr.get("tgt_word_dropout"):
        notes.append("word dropout: attnmt only (JoeyNMT has none)")
    if int(tr.get("early_stopping_patience", 0)) > 0:
        notes.append(
            f"early stopping: attnmt after {tr['early_stopping_patience']} validations "
            "without a BLEU gain; JoeyNMT none"
        )
    if tr.get("average_best"):
        notes.append(
            "checkpoint averaging: attnmt averages its best checkpoints at the end and tests "
            "the average if it validates better; JoeyNMT tests its best checkpoint"
        )
    notes.append(
        "decoding length: attnmt a*|src|+b per sentence "
        f"(a={dec['max_len_a']}, b={dec['max_len_b']}); JoeyNMT 1.5 x the longest source in "
        "the batch"
    )
    return cfg, notes


def dump_yaml(cfg: Mapping[str, Any], header: Sequence[str] = ()) -> str:
    """YAML text with ``# `` comment lines on top (PyYAML, keys in insertion order)."""
    import yaml

    head = "".join(f"# {line}\n" if line else "#\n" for line in header)
    return head + yaml.safe_dump(dict(cfg), sort_keys=False, allow_unicode=True, width=100)


# ---- vocabulary / data files ------------------------------------------------------------------


def vocab_lines(pieces: Sequence[str], specials: Collection[str] = ()) -> list[str]:
    """The lines of a JoeyNMT vocabulary file: the pieces in id order without ``specials``.

    JoeyNMT reads the file with ``read_text().splitlines()`` and puts its own
    ``<unk> <pad> <s> </s>`` in front (duplicates are skipped), so a piece must be
    non-empty, unique and survive ``splitlines``; CompareError otherwise.
    """
    out, seen = [], set()
    for i, piece in enumerate(pieces):
        if piece in specials:
            continue
        if not piece or piece.splitlines() != [piece] or piece != piece.rstrip("\n"):
            raise CompareError(f"piece {i} ({piece!r}) cannot be one line of a vocabulary file")
        if piece in seen:
            raise CompareError(f"piece {i} ({piece!r}) occurs twice")
        seen.add(piece)
        out.append(piece)
    return out


def spm_vocab_lines(model_file: Path) -> list[str]:
    """:func:`vocab_lines` of a SentencePiece model: every piece that is not a control
    symbol (``<pad> <s> </s>``) or ``<unk>``; JoeyNMT adds those itself."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(model_file))
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    skip = {p for i, p in enumerate(pieces) if sp.is_control(i) or sp.is_unknown(i)}
    return vocab_lines(pieces, skip | set(JOEY_SPECIALS))


def check_text_lines(lines: Iterable[str], name: str) -> list[str]:
    """Lines JoeyNMT can read back one for one: non-empty, no characters that
    ``str.splitlines`` breaks on (JoeyNMT drops empty lines and splits on those)."""
    out = list(lines)
    for i, line in enumerate(out, 1):
        if not line.strip():
            raise CompareError(f"{name}:{i}: empty line; JoeyNMT would drop it and misalign")
        if line.splitlines() != [line]:
            raise CompareError(f"{name}:{i}: a line break character inside the line: {line!r}")
    return out


def write_lines(path: Path, lines: Iterable[str]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{line}\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return text.count("\n")


# ---- log parsing ------------------------------------------------------------------------------

_ATTNMT_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")
_ATTNMT_STEP = re.compile(r"- step (\d+) \| .*\| ([\d.]+) tok/s\s*$")
_ATTNMT_VALID = re.compile(r"- valid step (\d+) \|")
_ATTNMT_PARAMS = re.compile(r"- model \S+: ([\d.]+)M parameters")
_ATTNMT_TEST = re.compile(r"- test \((\S+), beam (\d+)\): (BLEU|chrF2?)\S* = ([\d.]+)")
_JOEY_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) - ")
_JOEY_STEP = re.compile(r"Step:\s+(\d+),.*Tokens per Sec:\s+([\d.]+),")
_JOEY_PARAMS = re.compile(r"Total params: (\d+)")
_JOEY_INTERRUPT = re.compile(r"Interrupt at epoch (\d+), step (\d+)\.")
_JOEY_SAVED = re.compile(r"Checkpoint saved in .*?(\d+)\.ckpt\.")
_JOEY_EPOCH = re.compile(r" - EPOCH (\d+)\s*$")


def _ts(match: re.Match[str] | None) -> float | None:
    if match is None:
        return None
    stamp = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S")
    return stamp.timestamp() + int(match.group(2)) / 1000


def _median(values: Sequence[float]) -> float | None:
    """The median (robust to windows slowed by other work on a shared CPU); None if empty."""
    return statistics.median(values) if values else None


def parse_attnmt_log(text: str) -> dict[str, Any]:
    """Figures of an attnmt train.log: ``updates`` (last step logged), ``minutes`` (from
    the model line, where the clock starts, to the last step or validation line),
    ``tok_s`` (median of the logged windows' target tokens/s, step 1's single-update window
    left out unless it is the only one), ``params_m``, ``test_bleu`` / ``test_chrf`` as the
    run reported them."""
    updates, start, end = 0, None, None
    rates: list[tuple[int, float]] = []
    out: dict[str, Any] = {}
    for line in text.splitlines():
        ts = _ts(_ATTNMT_TS.match(line))
        if m := _ATTNMT_PARAMS.search(line):
            out["params_m"] = float(m.group(1))
            start = ts if start is None else start  # a resumed run logs it again
        elif m := _ATTNMT_STEP.search(line):
            updates = max(updates, int(m.group(1)))
            rates.append((int(m.group(1)), float(m.group(2))))
            end = ts
        elif m := _ATTNMT_VALID.search(line):
            updates = max(updates, int(m.group(1)))
            end = ts
        elif m := _ATTNMT_TEST.search(line):
            key = "test_bleu" if m.group(3) == "BLEU" else "test_chrf"
            out[key] = float(m.group(4))
            out["test_checkpoint"] = m.group(1)
    windows = [r for s, r in rates if s != 1] or [r for _, r in rates]
    out["updates"] = updates
    out["tok_s"] = _median(windows)
    out["minutes"] = (end - start) / 60 if start is not None and end is not None else None
    return out


def parse_joeynmt_log(text: str) -> dict[str, Any]:
    """Figures of a JoeyNMT train.log: ``updates`` (the interrupt's step, else the last
    checkpoint or logged step), ``minutes`` (first epoch to the last line), ``tok_s`` (median
    of the logged ``Tokens per Sec``: target tokens over the window's time without
    validation), ``params`` (``Total params``), ``interrupted``."""
    updates, start, end = 0, None, None
    rates: list[float] = []
    out: dict[str, Any] = {"interrupted": False}
    for line in text.splitlines():
        ts = _ts(_JOEY_TS.match(line))
        if ts is not None:
            end = ts
        if m := _JOEY_PARAMS.search(line):
            out["params"] = int(m.group(1))
        elif m := _JOEY_STEP.search(line):
            updates = max(updates, int(m.group(1)))
            rates.append(float(m.group(2)))
        elif m := _JOEY_INTERRUPT.search(line):
            updates = max(updates, int(m.group(2)))
            out["interrupted"] = True
        elif m := _JOEY_SAVED.search(line):
            updates = max(updates, int(m.group(1)))
        elif (m := _JOEY_EPOCH.search(line)) and m.group(1) == "1" and start is None:
            start = ts
    out["updates"] = updates
    out["tok_s"] = _median(rates)
    out["minutes"] = (end - start) / 60 if start is not None and end is not None else None
    return out


# ---- table ------------------------------------------------------------------------------------

COLUMNS = (
    ("system", "system", "{}"),
    ("BLEU", "bleu", "{:.2f}"),
    ("chrF", "chrf", "{:.2f}"),
    ("train min", "minutes", "{:.1f}"),
    ("updates", "updates", "{:d}"),
    ("updates/min", "updates_per_min", "{:.0f}"),
    ("tgt tok/s", "tok_s", "{:.0f}"),
    ("params", "params", "{:,}"),
    ("checkpoint", "checkpoint", "{}"),
)


def _cell(fmt: str, value: Any) -> str:
    if value is None:
        return "n/a"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def markdown_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One markdown table row per system (COLUMNS; missing figures are ``n/a``)."""
    head = "| " + " | ".join(h for h, _, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" if k == "system" else "---:" for _, k, _ in COLUMNS) + "|"
    lines = [head, rule]
    for row in rows:
        cells = [_cell(fmt, row.get(key)) for _, key, fmt in COLUMNS]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def score(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, Any]:
    """BLEU (13a) and chrF with sacrebleu's defaults: the one call both systems get."""
    from sacrebleu.metrics import BLEU, CHRF

    if len(hyps) != len(refs):
        raise CompareError(f"{len(hyps)} hypotheses for {len(refs)} references")
    bleu, chrf = BLEU(), CHRF()
    b, c = bleu.corpus_score(list(hyps), [list(refs)]), chrf.corpus_score(list(hyps), [list(refs)])
    return {
        "bleu": b.score,
        "chrf": c.score,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


# ---- prepare ----------------------------------------------------------------------------------


def _attnmt_checkpoint(run: Path) -> tuple[Path, dict[str, Any]]:
    """The run's last.pt (it holds the final trainer state), else its evaluation choice."""
    from attnmt.checkpoint import load_checkpoint, load_resolved

    last = run / "checkpoints" / "last.pt"
    if last.is_file():
        return last, load_checkpoint(last)
    if not run.is_dir():
        raise CompareError(f"{run}: not an attnmt run directory")
    return load_resolved(run)


def _attnmt_params(payload: Mapping[str, Any]) -> int:
    """Exact parameter count of the run's model (tied weights once), as attnmt counts."""
    from attnmt.models.registry import build_model

    v = payload["vocab"]
    model = build_model(payload["model_config"], v["src_size"], v["tgt_size"], v["joint"])
    return sum(p.numel() for p in model.parameters())


def cmd_prepare(args: argparse.Namespace) -> int:
    import numpy as np

    from attnmt.data.corpora import prepare_corpus
    from attnmt.data.dataset import filter_lengths
    from attnmt.data.textio import read_lines
    from attnmt.data.tokenizer import JOINT_FILE, SRC_FILE, TGT_FILE, Tokenizer

    run, work = Path(args.run).resolve(), Path(args.work).resolve()
    ckpt, payload = _attnmt_checkpoint(run)
    cfg = payload["config"]
    data_cfg, tr = cfg["data"], cfg["trainer"]
    corpus = prepare_corpus(data_cfg)
    src_lang, tgt_lang = corpus.src_lang, corpus.tgt_lang
    files = payload["tokenizer"]
    tok = Tokenizer.from_files_dict(files)

    dd = work / "data"
    dd.mkdir(parents=True, exist_ok=True)
    if tok.joint:
        (dd / JOINT_FILE).write_bytes(files[JOINT_FILE])
        src_spm = trg_spm = dd / JOINT_FILE
        write_lines(dd / "vocab.txt", spm_vocab_lines(src_spm))
        src_vocab = trg_vocab = dd / "vocab.txt"
    else:
        (dd / SRC_FILE).write_bytes(files[SRC_FILE])
        (dd / TGT_FILE).write_bytes(files[TGT_FILE])
        src_spm, trg_spm = dd / SRC_FILE, dd / TGT_FILE
        src_vocab, trg_vocab = dd / f"vocab.{src_lang}", dd / f"vocab.{tgt_lang}"
        write_lines(src_vocab, spm_vocab_lines(src_spm))
        write_lines(trg_vocab, spm_vocab_lines(trg_spm))

    # train: exactly the pairs attnmt trains on (its length filter on its own pieces)
    src, tgt = corpus.read("train")
    src_len = np.array([len(x) for x in tok.encode_src(src)])
    tgt_len = np.array([len(x) for x in tok.encode_tgt(tgt)])
    kept, removed = filter_lengths(
        src_len, tgt_len, data_cfg.get("max_len"), data_cfg.get("max_len_ratio"), "train"
    )
    n_train = write_lines(
        dd / f"train.{src_lang}", check_text_lines([src[i] for i in kept], "train")
    )
    write_lines(dd / f"train.{tgt_lang}", check_text_lines([tgt[i] for i in kept], "train"))
    # dev: the fixed subset attnmt validates on (the first val_subset valid pairs)
    vsrc, vref = corpus.read("valid")
    n = int(tr.get("val_subset") or 0)
    if n > 0:
        vsrc, vref = vsrc[:n], vref[:n]
    n_dev = write_lines(dd / f"dev.{src_lang}", check_text_lines(vsrc, "dev"))
    write_lines(dd / f"dev.{tgt_lang}", check_text_lines(vref, "dev"))
    test_src, test_ref = corpus.files("test")
    test_lines = check_text_lines(read_lines(test_src), str(test_src))
    n_test_all = len(test_lines)
    if args.test_lines:
        test_lines = test_lines[: args.test_lines]
    n_test = write_lines(dd / f"test.{src_lang}", test_lines)

    paths = {
        "model_dir": str(work / "model"),
        "train": str(dd / "train"),
        "dev": str(dd / "dev"),
        "src_vocab": str(src_vocab),
        "trg_vocab": str(trg_vocab),
        "src_spm": str(src_spm),
        "trg_spm": str(trg_spm),
    }
    jcfg, notes = joeynmt_config(cfg, paths, name=f"compare_{corpus.name}")
    header = [
        f"JoeyNMT {JOEYNMT_VERSION} config written by scripts/compare_joeynmt.py from the attnmt",
        f"run {run} ({ckpt.name}):",
        "the same train pairs (after attnmt's length filter), validation subset, test split,",
        "SentencePiece model, model sizes and optimiser settings. Differences that remain:",
        *[f"  - {ln}" for note in notes for ln in textwrap.wrap(note, 86, subsequent_indent="  ")],
    ]
    (work / "config.yaml").write_text(dump_yaml(jcfg, header), encoding="utf-8")
    setup = {
        "attnmt_run": str(run),
        "attnmt_checkpoint": str(ckpt),
        "attnmt_params": _attnmt_params(payload),
        "corpus": str(Path(corpus.directory).resolve()),
        "src_lang": src_lang,
        "tgt_lang": tgt_lang,
        "test_src": str(dd / f"test.{src_lang}"),
        "reference": str(Path(test_ref).resolve()),
        "beam": int(cfg["decode"]["beam"]),
        "train_pairs": n_train,
        "train_removed": removed,
        "dev_pairs": n_dev,
        "test_pairs": n_test,
        "test_pairs_all": n_test_all,
        "config": str(work / "config.yaml"),
        "model_dir": paths["model_dir"],
        "differences": notes,
    }
    (work / "setup.json").write_text(json.dumps(setup, indent=1) + "\n", encoding="utf-8")
    print(
        f"joeynmt data in {dd}: train {n_train} pairs (attnmt's filter removed "
        f"{sum(removed.values())}), dev {n_dev}, test {n_test}; config {work / 'config.yaml'}"
    )
    return 0


# ---- watch ------------------------------------------------------------------------------------


def cmd_watch(args: argparse.Namespace) -> int:
    """Run the command; SIGINT ``budget`` minutes after the start marker shows in the log."""
    log, budget = Path(args.log), 60.0 * args.budget_min
    console = open(args.console, "ab") if args.console else None  # noqa: SIM115
    # a background job (``cmd &``, nohup) inherits SIGINT ignored: give the child the default
    # back, or JoeyNMT never sees the budget's SIGINT
    proc = subprocess.Popen(
        args.cmd,
        stdout=console or None,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    t0, started, stop_sent, pos, buf = time.monotonic(), None, None, 0, ""
    verdict = {"budget_s": budget, "train_s": None, "stopped_by": None}
    show = re.compile(r"Step:|Evaluation result|Hooray|Interrupt at|Training ended|Total params")
    try:
        while True:
            rc = proc.poll()
            if log.is_file():
                with log.open("r", encoding="utf-8", errors="replace") as f:
                    f.seek(pos)
                    buf += f.read()
                    pos = f.tell()
                *lines, buf = buf.split("\n")
                for line in lines:
                    if started is None and START_MARKER.search(line):
                        started = time.monotonic()
                        print(f"joeynmt: training started; stopping it in {args.budget_min:g} min")
                    if show.search(line):
                        print("joeynmt:", line.split(" - ", 3)[-1], flush=True)
            now = time.monotonic()
            if rc is not None:
                break
            if started is None and now - t0 > args.startup_timeout:
                print(
                    f"joeynmt: no '{START_MARKER.pattern}' in {log} after "
                    f"{args.startup_timeout:.0f} s; stopping it",
                    file=sys.stderr,
                )
                proc.terminate()
                proc.wait(30)
                return 1
            if started is not None and stop_sent is None and now - started >= budget:
                verdict["train_s"], verdict["stopped_by"] = now - started, "budget"
                print(
                    f"joeynmt: budget of {args.budget_min:g} min reached; SIGINT (it saves "
                    "its current weights)",
                    flush=True,
                )
                proc.send_signal(signal.SIGINT)
                stop_sent = now
            if stop_sent is not None and now - stop_sent > args.grace:
                print(
                    f"joeynmt: still running {args.grace:.0f} s after SIGINT; SIGTERM",
                    file=sys.stderr,
                )
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        return 130
    finally:
        if console:
            console.close()
    rc = proc.wait()
    if verdict["stopped_by"] is None:
        verdict["stopped_by"] = "exit"
        verdict["train_s"] = None if started is None else time.monotonic() - started
    verdict["returncode"] = rc
    Path(args.out).write_text(json.dumps(verdict, indent=1) + "\n", encoding="utf-8")
    if rc != 0 and verdict["stopped_by"] == "budget":
        # JoeyNMT 2.3.0 may sit in a validation past SIGINT; SIGTERM after the grace period
        # ends it, and the checkpoints it saved before are the ones decoded
        print(f"joeynmt: stopped at the budget (status {rc}); its saved checkpoints are used")
        return 0
    if rc != 0:
        print(f"joeynmt exited with status {rc}; see {log}", file=sys.stderr)
        return 1
    return 0


# ---- report -----------------------------------------------------------------------------------


def _read(path: Path, what: str, expected: int, keep: int) -> list[str]:
    """The first ``keep`` of the ``expected`` lines of a file, read as attnmt reads text."""
    from attnmt.data.textio import read_lines

    if not path.is_file():
        raise CompareError(f"{path}: {what} file not found")
    lines = read_lines(path)
    if len(lines) != expected:
        raise CompareError(f"{path}: {len(lines)} lines, expected {expected} ({what})")
    return lines[:keep]


def _joey_best(model_dir: Path) -> str | None:
    best = model_dir / "best.ckpt"
    if best.is_symlink() or best.is_file():
        return f"best.ckpt ({best.resolve().name})"
    latest = model_dir / "latest.ckpt"
    return f"latest.ckpt ({latest.resolve().name})" if latest.exists() else None


def _attnmt_best(run: Path) -> str | None:
    best = run / "checkpoints" / "best.json"
    try:
        entries = json.loads(best.read_text(encoding="utf-8"))
        return str(entries[0]["file"])
    except (OSError, ValueError, LookupError, TypeError):
        return None


def cmd_report(args: argparse.Namespace) -> int:
    from attnmt.checkpoint import load_checkpoint

    out = Path(args.out)
    work = Path(args.joeynmt_work)
    setup = json.loads((work / "setup.json").read_text(encoding="utf-8"))
    ref_path = Path(setup["reference"])
    n, n_all = int(setup["test_pairs"]), int(setup["test_pairs_all"])
    refs = _read(ref_path, "reference", n_all, n)
    run = Path(args.attnmt_run)

    a_log = parse_attnmt_log((run / "train.log").read_text(encoding="utf-8", errors="replace"))
    a_state: dict[str, Any] = {}
    last = run / "checkpoints" / "last.pt"
    if last.is_file():
        a_state = load_checkpoint(last).get("trainer_state") or {}
    a_min = a_state["wall_s"] / 60 if "wall_s" in a_state else a_log["minutes"]
    a_upd = int(a_state.get("step", a_log["updates"]))
    attnmt = {
        "system": "attnmt (transformer)",
        **score(_read(Path(args.attnmt_hyps), "attnmt hypotheses", n_all, n), refs),
        "minutes": a_min,
        "updates": a_upd,
        "tok_s": a_log["tok_s"],
        "params": setup["attnmt_params"],
        "checkpoint": _attnmt_best(run),
        "hyps": str(args.attnmt_hyps),
        "run": str(run),
        "reported_test_bleu": a_log.get("test_bleu"),
    }
    model_dir = Path(setup["model_dir"])
    j_log = parse_joeynmt_log((model_dir / "train.log").read_text(encoding="utf-8"))
    watch_file = work / "watch.json"
    watch = json.loads(watch_file.read_text(encoding="utf-8")) if watch_file.is_file() else {}
    j_min = watch["train_s"] / 60 if watch.get("train_s") else j_log["minutes"]
    joey = {
        "system": f"JoeyNMT {JOEYNMT_VERSION}",
        **score(_read(Path(args.joeynmt_hyps), "JoeyNMT hypotheses", n, n), refs),
        "minutes": j_min,
        "updates": j_log["updates"],
        "tok_s": j_log["tok_s"],
        "params": j_log.get("params"),
        "checkpoint": _joey_best(model_dir),
        "hyps": str(args.joeynmt_hyps),
        "run": str(model_dir),
        "stopped_by": watch.get("stopped_by"),
    }
    rows = [attnmt, joey]
    for row in rows:
        m, u = row["minutes"], row["updates"]
        row["updates_per_min"] = u / m if m and u else None
    assert attnmt["bleu_signature"] == joey["bleu_signature"]
    reported = attnmt["reported_test_bleu"]
    same_file = Path(args.attnmt_hyps).resolve() == (run / "hyps" / "test.txt").resolve()
    if n == n_all and same_file and reported is not None and abs(reported - attnmt["bleu"]) > 0.01:
        print(
            f"warning: attnmt's train.log reports test BLEU {reported:.2f}, rescoring its "
            f"hypotheses gives {attnmt['bleu']:.2f}",
            file=sys.stderr,
        )
    table = markdown_table(rows)
    budget = f"{args.budget_min:g}"
    subset = f"{n} sentences, " if n == n_all else f"the first {n} of {n_all} sentences only, "
    md = "\n".join(
        [
            f"# attnmt vs JoeyNMT {JOEYNMT_VERSION}: {budget}-minute wall-clock budget each",
            "",
            f"{Path(setup['corpus']).name} {setup['src_lang']}->{setup['tgt_lang']}, test split "
            f"({subset}reference `{ref_path}`), beam {setup['beam']}; "
            f"written {datetime.now():%Y-%m-%d %H:%M}.",
            "",
            table,
            "",
            f"sacrebleu (one call for both): BLEU `{attnmt['bleu_signature']}`, "
            f"chrF `{attnmt['chrf_signature']}`.",
            "",
            "*train min*: attnmt from its checkpoint's wall clock (the budget starts after "
            "data and model setup, final validation included); JoeyNMT from its first epoch "
            "to the SIGINT. *tgt tok/s*: median of the rates each toolkit logs (attnmt: "
            "update time only; JoeyNMT: the window's time without validation, batching "
            "included). *params*: tied weights counted once.",
            "",
            "Settings that still differ:",
            *[f"- {n}" for n in setup["differences"]],
            "",
        ]
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(md, encoding="utf-8")
    result = {"budget_min": args.budget_min, "setup": setup, "systems": rows}
    (out / "results.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(table)
    print(f"\nwritten {out / 'results.md'} and {out / 'results.json'}")
    return 0


# ---- main -------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="JoeyNMT data, vocabulary and config from an attnmt run")
    p.add_argument("--run", required=True, help="attnmt run directory")
    p.add_argument("--work", required=True, help="output directory for JoeyNMT")
    p.add_argument("--test-lines", type=int, default=0, help="first N test lines (0: all)")
    p.set_defaults(func=cmd_prepare)
    w = sub.add_parser("watch", help="run JoeyNMT training under a wall-clock budget")
    w.add_argument("--budget-min", type=float, required=True)
    w.add_argument("--log", required=True, help="JoeyNMT's train.log (the start marker)")
    w.add_argument("--out", required=True, help="JSON file for the measured training time")
    w.add_argument("--console", help="file for the command's stdout and stderr")
    w.add_argument("--startup-timeout", type=float, default=900.0)
    w.add_argument("--grace", type=float, default=300.0, help="seconds after SIGINT")
    w.add_argument("cmd", nargs=argparse.REMAINDER)
    w.set_defaults(func=cmd_watch)
    r = sub.add_parser("report", help="score both systems, write results.md / results.json")
    r.add_argument("--out", required=True)
    r.add_argument("--budget-min", type=float, required=True)
    r.add_argument("--attnmt-run", required=True)
    r.add_argument("--attnmt-hyps", required=True)
    r.add_argument("--joeynmt-work", required=True)
    r.add_argument("--joeynmt-hyps", required=True)
    r.set_defaults(func=cmd_report)
    args = ap.parse_args(argv)
    if args.command == "watch":
        args.cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not args.cmd:
            ap.error("watch: the command to run goes after --")
    try:
        from attnmt.errors import AttnmtError
    except ImportError:  # pragma: no cover - attnmt's venv always has it
        AttnmtError = CompareError
    try:
        return int(args.func(args))
    except (CompareError, AttnmtError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
