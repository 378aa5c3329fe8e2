"""What the attention table measures of a run beyond BLEU and NLL, and how a new run gets it:

    python -m experiments.attention_measures outputs/STUDY/RUN [...]   # after sweep --record

writes into the run's record results/STUDY/RUN/ eval/silver/scores.json (evaluate.py's test
AER against the kept silver links of its corpus, results/silver/: an aligner's, not gold) and
attention_map.json (:func:`capture`). The table reads them, the last validation's entropy
(runs.Run.entropy) and each map's :func:`collapse_share`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from attnmt.atomic import write_json
from attnmt.decode.alignment_error import read_gold
from attnmt.decode.attention_maps import AttentionMaps, attention_maps
from attnmt.decode.translator import Translator, load_translator
from attnmt.errors import DataError
from attnmt.machine import usable_cores
from experiments.alignment_baselines import ScoredBaseline, aer_with_interval, diagonal_links
from experiments.page_blocks import report
from experiments.runs import ROOT, scores_entry

SILVER = {"ding_de_en": ROOT / "results" / "silver" / "ding_de_en.test.de-en.silver.align"}
"""Corpus -> its kept silver alignments of the test split."""
COLLAPSED = 0.8
"""A map is flagged collapsed when more than this share of its rows peak on one column."""
FIXED_CORPUS = "ding_de_en"
FIXED_SOURCE = "Tieffliegende Flugzeuge sind ein ständiges Ärgernis für die Anrainer."
FIXED_REFERENCE = "Low flying aircraft are a constant irritant to neighbouring residents."
"""Ding's test pair #2 (the end-of-run block prints it for every run): attention_map.json's."""
DIGITS = 3  # keeps a Transformer's maps of one sentence under ~80 kB


def forced_maps(
    translator: Translator, source: str, target: str | None = None
) -> tuple[AttentionMaps, str]:
    """The maps of ``source`` teacher-forced on ``target`` (None: on the greedy translation),
    and the target they were forced on."""
    if target is None:
        (hyp,) = translator.hypotheses([source], beam=1)
        tokens, target = (hyp.tokens, translator.text(hyp)) if hyp is not None else ([], "")
    else:
        (tokens,) = translator.tokenizer.encode_tgt([target])
    (maps,) = attention_maps(
        translator.model, translator.tokenizer, translator.device,
        translator.encode([source]), [(tokens, True)],
    )  # fmt: skip
    return maps, target


def _rounded(weights: torch.Tensor) -> list[Any]:
    """[..., R, C] -> nested lists of ``DIGITS``-rounded floats."""
    return [[round(x, DIGITS) for x in row] for row in weights.flatten(0, -2).tolist()]


def capture(run: Path, source: str = FIXED_SOURCE, reference: str = FIXED_REFERENCE) -> dict:
    """attention_map.json: the maps of ``source`` forced on ``run``'s greedy translation (its
    best checkpoint): an RNN's cross map [T][S], or each head of a Transformer's last layer,
    encoder self [H][S][S], decoder self [H][T][T] and cross [H][T][S]."""
    maps, hypothesis = forced_maps(load_translator(run, device="cpu"), source)
    enc, dec = maps.encoder_self, maps.decoder_self
    layer: int | None = None
    kept: dict[str, Any] = {"cross": _rounded(maps.cross[0, 0])}  # an RNN's one map
    if enc is not None and dec is not None:
        layer = maps.cross.size(0) - 1
        last = {"enc_self": enc[-1], "self": dec[-1], "cross": maps.cross[-1]}
        kept = {name: [_rounded(head) for head in w] for name, w in last.items()}
    return {
        "source": source,
        "reference": reference,
        "hypothesis": hypothesis,
        "src_pieces": maps.source_pieces,
        "tgt_input": maps.decoder_input_pieces,
        "tgt_out": maps.target_pieces,
        "layer": layer,
        "maps": kept,
    }


def collapse_share(rows: Sequence[Sequence[float]]) -> float:
    """Share of the map's rows [T][S] whose argmax is the most common argmax column."""
    peaks = [max(range(len(r)), key=r.__getitem__) for r in rows if len(r)]
    if not peaks:
        return float("nan")
    return Counter(peaks).most_common(1)[0][1] / len(peaks)


def cross_map(maps: dict[str, Any]) -> list[list[float]]:
    """The fixed sentence's cross-attention [T][S] from an attention_map.json: an RNN's map,
    or the mean over heads of a Transformer's last layer."""
    cross = np.asarray(maps["maps"]["cross"], dtype=float)  # [T][S], or [H][T][S]
    return (cross if maps.get("layer") is None else cross.mean(axis=0)).tolist()


def silver_diagonal(
    corpus: str, sources: Sequence[str], refs: Sequence[str]
) -> ScoredBaseline | None:
    """The diagonal alignment (alignment_baselines ``diagonal_links``) scored against the
    corpus' silver links, with its AER's bootstrap interval over the sentences; None without
    silver links or pairs."""
    gold = SILVER.get(corpus)
    if gold is None or not gold.is_file() or not sources:
        return None
    return aer_with_interval(diagonal_links(sources, refs), read_gold(gold))


def silver_scores(run: Path, gold: Path, threads: int) -> dict[str, Any]:
    """The entry of the newest eval/*-test-beam1-*/scores.json of ``python evaluate.py ckpt=RUN
    split=test beam=1 gold_alignments=GOLD`` on ``threads`` threads (its output on stderr);
    DataError when it gives no AER."""
    args = ["evaluate.py", f"ckpt={run}", "split=test", "beam=1", f"gold_alignments={gold}"]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, stdout=sys.stderr, stderr=sys.stderr
    )
    found = sorted((run / "eval").glob("*-test-beam1-*/scores.json"), key=os.path.getmtime)
    entry = scores_entry(found[-1]) if done.returncode == 0 and found else None
    if entry is None or entry.get("aer") is None:
        raise DataError(f"{run}: evaluate.py gave no AER against {gold} (its output above)")
    return entry


def measure(run: Path, record: Path, threads: int) -> list[Path]:
    """Write what ``run``'s corpus has of the measures into ``record``; the files written.
    DataError without the record or the run's config, or when evaluate.py fails."""
    config = run / ".hydra" / "config.yaml"
    if not (record / "summary.json").is_file() or not config.is_file():
        raise DataError(
            f"{run}: needs its .hydra/config.yaml and a record {record}/summary.json "
            "(python -m experiments.sweep STUDY --record keeps it)"
        )
    corpus = str(yaml.safe_load(config.read_text(encoding="utf-8"))["data"]["name"])
    written = []
    if (gold := SILVER.get(corpus)) is not None:
        entry = silver_scores(run, gold, threads)
        written.append(
            write_json(record / "eval" / "silver" / "scores.json", {"test-beam1": entry})
        )
    if corpus == FIXED_CORPUS:
        written.append(write_json(record / "attention_map.json", capture(run), indent=None))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="trained runs: outputs/STUDY/RUN")
    parser.add_argument("--results", type=Path, default=ROOT / "results", help="the records' root")
    parser.add_argument("--threads", type=int, default=usable_cores(), help="evaluate.py's")
    args = parser.parse_args(argv)

    def write() -> Iterator[Path]:
        for run in args.runs:
            yield from measure(run, args.results / run.parent.name / run.name, args.threads)

    return report(write)


if __name__ == "__main__":
    sys.exit(main())
