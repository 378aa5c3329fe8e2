"""Decoding speed: attnmt's greedy and beam search against JoeyNMT 2.3.0's greedy decoding.

    python scripts/compare_decoding.py --compare-dir outputs/compare_joeynmt/<time>
        [--rounds 3] [--beams 1 5] [--out DIR]

Uses what ``scripts/compare_joeynmt.sh`` left in ``--compare-dir``: attnmt's run
(``attnmt/``) and JoeyNMT's trained model, config and test sources (``joeynmt/``), so both
toolkits decode the same test split with models of the same size trained on the same data.
Each round runs every variant once, in a rotated order (interleaved, so drifting machine
load hits all alike): ``python -m joeynmt translate`` (its config's beam, 1 = greedy) and
``evaluate.py beam=k`` for each ``--beams`` k. Decoding time is what each toolkit itself
times around generation (JoeyNMT: its ``Generation took X[sec]`` log line; attnmt:
scores.json ``speed.decode_seconds``), so loading Python, the model and the data is left
out of both; the whole process's wall time is reported beside it. The table (median over
rounds) goes to ``<out>/decoding.md`` and the figures to ``<out>/decoding.json``.

The two models are not the same weights: outputs differ in length (a weaker model can run
to the length limit), so output words/s is reported beside sentences/s.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_JOEY_GENERATION = re.compile(r"Generation took ([\d.]+)\s*\[sec\]")


class CompareError(RuntimeError):
    """A missing input or a failed decoding, with what to do about it."""


@dataclass
class Variant:
    """One decoding command and where its timing and hypotheses are read from."""

    name: str
    command: list[str]
    hyps: Path
    stdin: Path | None = None  # JoeyNMT reads the sources from stdin, writes hyps to stdout
    scores: Path | None = None  # attnmt: scores.json with speed.decode_seconds


def joeynmt_generation_seconds(log_text: str) -> float:
    """The last ``Generation took X[sec]`` of a JoeyNMT translate log."""
    found = _JOEY_GENERATION.findall(log_text)
    if not found:
        raise CompareError("JoeyNMT's log has no 'Generation took X[sec]' line")
    return float(found[-1])


def attnmt_decode_seconds(scores: Mapping[str, Any]) -> float:
    """``speed.decode_seconds`` of the single entry of an evaluate.py scores.json."""
    entries = [e for e in scores.values() if isinstance(e, Mapping) and "speed" in e]
    if len(entries) != 1:
        raise CompareError(f"expected one scores.json entry with 'speed', found {len(entries)}")
    return float(entries[0]["speed"]["decode_seconds"])


def summarise(
    name: str, seconds: Sequence[float], wall: Sequence[float], hyps: Sequence[str]
) -> dict:
    """Median figures of one variant over its rounds."""
    sec = statistics.median(seconds)
    words = sum(len(h.split()) for h in hyps)
    return {
        "variant": name,
        "rounds": len(seconds),
        "sentences": len(hyps),
        "decode_s": sec,
        "decode_s_min": min(seconds),
        "decode_s_max": max(seconds),
        "process_s": statistics.median(wall),
        "sent_per_s": len(hyps) / sec,
        "words_per_hyp": words / max(len(hyps), 1),
        "words_per_s": words / sec,
    }


def markdown(rows: Sequence[Mapping[str, Any]], baseline: str) -> str:
    """The table; ``× <baseline>`` = the baseline's decoding time over the row's."""
    base = next(r for r in rows if r["variant"] == baseline)
    head = (
        "| system | sentences | decode s (median, min–max) | sentences/s | words/hyp | "
        f"words/s | × {baseline} | BLEU | process s |"
    )
    lines = [head, "|---|" + "---:|" * 8]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['sentences']} | {r['decode_s']:.1f} "
            f"({r['decode_s_min']:.1f}–{r['decode_s_max']:.1f}) | {r['sent_per_s']:.1f} | "
            f"{r['words_per_hyp']:.1f} | {r['words_per_s']:.0f} | "
            f"{base['decode_s'] / r['decode_s']:.2f} | {r.get('bleu', float('nan')):.2f} | "
            f"{r['process_s']:.1f} |"
        )
    return "\n".join(lines)


def _variants(compare_dir: Path, out: Path, beams: Sequence[int], joey_py: Path) -> list[Variant]:
    setup_file = compare_dir / "joeynmt" / "setup.json"
    run = compare_dir / "attnmt"
    if not setup_file.is_file() or not run.is_dir():
        raise CompareError(
            f"{compare_dir}: no joeynmt/setup.json or attnmt/ run: point --compare-dir at "
            "a finished scripts/compare_joeynmt.sh output folder"
        )
    if not joey_py.is_file():
        raise CompareError(f"{joey_py}: JoeyNMT's venv is missing (run compare_joeynmt.sh first)")
    setup = json.loads(setup_file.read_text(encoding="utf-8"))
    joey_beam = int(setup["beam"])
    variants = [
        Variant(
            f"JoeyNMT 2.3.0 beam {joey_beam}",
            [str(joey_py), "-m", "joeynmt", "translate", setup["config"]],
            out / "joeynmt-hyps.txt",
            stdin=Path(setup["test_src"]),
        )
    ]
    for k in beams:
        folder = out / f"attnmt-beam{k}"
        variants.append(
            Variant(
                f"attnmt beam {k}",
                [
                    sys.executable,
                    str(ROOT / "evaluate.py"),
                    f"ckpt={run}",
                    "split=test",
                    f"beam={k}",
                    f"out_dir={folder}",
                    "metrics=[bleu]",
                ],
                folder / "hyps.txt",
                scores=folder / "scores.json",
            )
        )
    return variants


def run_once(v: Variant, log_file: Path) -> tuple[float, float]:
    """(decoding seconds as the toolkit timed them, process wall seconds)."""
    if v.scores is not None:
        v.scores.unlink(missing_ok=True)
    start = time.perf_counter()
    with log_file.open("w") as err:
        if v.stdin is not None:
            with v.stdin.open() as src, v.hyps.open("w") as hyps:
                proc = subprocess.run(v.command, stdin=src, stdout=hyps, stderr=err, cwd=ROOT)
        else:
            proc = subprocess.run(v.command, stdout=err, stderr=err, cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise CompareError(f"{v.name} failed (exit {proc.returncode}); see {log_file}")
    if v.scores is not None:
        return attnmt_decode_seconds(json.loads(v.scores.read_text(encoding="utf-8"))), wall
    return joeynmt_generation_seconds(log_file.read_text(encoding="utf-8")), wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare-dir", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--out", type=Path, default=None, help="default: <compare-dir>/decoding")
    ap.add_argument("--joeynmt-python", type=Path, default=ROOT / ".venv-joeynmt/bin/python")
    args = ap.parse_args(argv)
    out = args.out or args.compare_dir / "decoding"
    out.mkdir(parents=True, exist_ok=True)
    try:
        variants = _variants(args.compare_dir, out, args.beams, args.joeynmt_python)
        times: dict[str, list[tuple[float, float]]] = {v.name: [] for v in variants}
        for r in range(args.rounds):
            for v in variants[r % len(variants) :] + variants[: r % len(variants)]:
                sec, wall = run_once(v, out / f"{v.hyps.stem}-{r}.log")
                times[v.name].append((sec, wall))
                print(f"round {r + 1}: {v.name}: {sec:.1f} s decoding, {wall:.1f} s process")
        sys.path.insert(0, str(ROOT / "scripts"))
        from compare_joeynmt import score

        setup = json.loads((args.compare_dir / "joeynmt" / "setup.json").read_text())
        refs = Path(setup["reference"]).read_text(encoding="utf-8").splitlines()
        rows = []
        for v in variants:
            hyps = v.hyps.read_text(encoding="utf-8").splitlines()
            secs, walls = zip(*times[v.name])
            row = summarise(v.name, secs, walls, hyps)
            row.update(bleu=score(hyps, refs)["bleu"])
            rows.append(row)
    except CompareError as e:
        print(f"compare_decoding: error: {e}", file=sys.stderr)
        return 1
    table = markdown(rows, variants[0].name)
    (out / "decoding.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    (out / "decoding.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
