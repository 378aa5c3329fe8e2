"""Decoding speed: attnmt's greedy and beam search against JoeyNMT 2.3.0's decoding.

    python -m benchmarks.compare_decoding OUT [--rounds 3] [--beams 1 5]

``OUT`` is a finished ``python -m benchmarks.compare_joeynmt`` folder: both toolkits decode
its test split with the models it trained (same size, same data). Each round runs every
variant once, in rotated order, so drifting machine load hits all alike. The time is what
each toolkit clocks around generation (JoeyNMT's ``Generation took X[sec]``, attnmt's
scores.json ``speed.decode_seconds``), start-up left out. The models are not the same
weights (a weaker one may run to the length limit), so words/s stands beside sentences/s.
Writes the table (medians over rounds) to ``OUT/decoding/decoding.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attnmt.atomic import write_json, write_text
from attnmt.data.textio import read_lines
from attnmt.errors import AttnmtError
from benchmarks.compare_joeynmt import ROOT, CompareError, system_row

_JOEY_TIME = re.compile(r"Generation took ([\d.]+)\s*\[sec\]")


def joeynmt_seconds(log: str) -> float:
    """The last ``Generation took X[sec]`` of a JoeyNMT translate log."""
    found = _JOEY_TIME.findall(log)
    if not found:
        raise CompareError("JoeyNMT's log has no 'Generation took X[sec]' line")
    return float(found[-1])


def attnmt_seconds(scores: Mapping[str, Any]) -> float:
    """``speed.decode_seconds`` of the one entry of an evaluate.py scores.json."""
    entries = [e for e in scores.values() if isinstance(e, Mapping) and "speed" in e]
    if len(entries) != 1:
        raise CompareError(f"expected one scores.json entry with 'speed', found {len(entries)}")
    return float(entries[0]["speed"]["decode_seconds"])


def summarise(name: str, seconds: Sequence[float], hyps: Sequence[str]) -> dict[str, Any]:
    """One variant's figures: median decoding time over the rounds, rates from it."""
    sec, words = statistics.median(seconds), sum(len(h.split()) for h in hyps)
    return {"variant": name, "sentences": len(hyps), "decode_s": sec, "min_s": min(seconds),
            "max_s": max(seconds), "sent_per_s": len(hyps) / sec,
            "words_per_hyp": words / max(len(hyps), 1), "words_per_s": words / sec}  # fmt: skip


def markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The table; ``× <first row>`` = the first row's decoding time over each row's."""
    base = rows[0]
    lines = [f"| system | decode s (median, min–max) | sentences/s | words/hyp | words/s | "
             f"× {base['variant']} | BLEU |", "|---|" + "---:|" * 6]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['decode_s']:.1f} ({r['min_s']:.1f}–{r['max_s']:.1f}) | "
            f"{r['sent_per_s']:.1f} | {r['words_per_hyp']:.1f} | {r['words_per_s']:,.0f} | "
            f"{base['decode_s'] / r['decode_s']:.2f} | {r.get('bleu', float('nan')):.2f} |"
        )
    return "\n".join(lines)


def decode_once(name: str, cmd: list[str], out: Path, stdin: Path | None) -> tuple[float, Path]:
    """Run one variant; (its decoding seconds, its hypotheses file). JoeyNMT reads the
    sources on stdin and writes hypotheses to stdout; attnmt writes under ``out/name/``."""
    log = out / f"{name}.log"
    hyps, scores = (
        (out / f"{name}.txt", None)
        if stdin
        else (out / name / "hyps.txt", out / name / "scores.json")
    )
    if scores:
        scores.unlink(missing_ok=True)  # evaluate.py adds to an existing one
    with log.open("w") as err:
        if stdin:
            with stdin.open() as src, hyps.open("w") as stdout:
                done = subprocess.run(cmd, stdin=src, stdout=stdout, stderr=err, cwd=ROOT)
        else:
            done = subprocess.run(cmd, stdout=err, stderr=err, cwd=ROOT)
    if done.returncode != 0:
        raise CompareError(f"{name} failed (exit {done.returncode}); see {log}")
    if scores:
        return attnmt_seconds(json.loads(scores.read_text(encoding="utf-8"))), hyps
    return joeynmt_seconds(log.read_text(encoding="utf-8")), hyps


def compare(folder: Path, rounds: int, beams: Sequence[int], joey_py: Path) -> str:
    setup_file = folder / "joeynmt" / "setup.json"
    if not setup_file.is_file() or not joey_py.is_file():
        raise CompareError(f"{folder}: no joeynmt/setup.json or {joey_py}: give the folder of "
                           "a finished `python -m benchmarks.compare_joeynmt`")  # fmt: skip
    setup = json.loads(setup_file.read_text(encoding="utf-8"))
    out = folder / "decoding"
    out.mkdir(exist_ok=True)
    evaluate = [sys.executable, "evaluate.py", f"ckpt={setup['attnmt_run']}", "split=test"]
    variants: list[tuple[str, list[str], Path | None]]
    variants = [(f"joeynmt-beam{setup['beam']}", [str(joey_py), "-m", "joeynmt", "translate",
                 setup["config"]], Path(setup["test_src"]))]  # fmt: skip
    variants += [(f"attnmt-beam{k}", [*evaluate, f"beam={k}", f"out_dir={out / f'attnmt-beam{k}'}",
                  "metrics=[bleu]"], None) for k in beams]  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name, _, _ in variants}
    hyps: dict[str, Path] = {}
    for r in range(rounds):
        for name, cmd, stdin in variants[r % len(variants) :] + variants[: r % len(variants)]:
            sec, hyps[name] = decode_once(name, cmd, out, stdin)
            times[name].append(sec)
            print(f"round {r + 1}: {name}: {sec:.1f} s", file=sys.stderr)
    n = setup["test_pairs"]
    refs = read_lines(setup["reference"])[:n]
    rows = []
    for name, secs in times.items():
        lines = read_lines(hyps[name])[:n]
        rows.append({**summarise(name, secs, lines), "bleu": system_row(name, lines, refs)["bleu"]})
    write_json(out / "decoding.json", rows)
    write_text(out / "decoding.md", markdown(rows) + "\n")
    return markdown(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a python -m benchmarks.compare_joeynmt output")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--joeynmt-python", type=Path, default=ROOT / ".venv-joeynmt/bin/python")
    args = ap.parse_args(argv)
    try:
        print(compare(args.folder, args.rounds, args.beams, args.joeynmt_python))
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
