"""Start-up cost against corpus size: preparation (cold), start-up to the first update
(warm) and the training process' peak RSS, for data=custom corpora of N pairs.

    python -m benchmarks.corpus_scaling --sizes 30000 300000 3000000

Per size: writes the corpus with benchmarks/make_big_corpus.py (if absent), then runs
``train.py data=custom ... trainer.max_steps=10`` as a subprocess, first with an empty
``data.root`` (cold: corpus preparation, SentencePiece training, train ids encoded) and
then ``--warm-runs`` times on the caches it left (warm). Measured from outside:
``first update`` = the time from starting the process to step 1's event in the run record
(metrics.jsonl); ``data`` = build_data's seconds (the record's start event);
``peak RSS`` = the child's ``ru_maxrss`` (``os.wait4``; the updates' working set varies
with the batches drawn, so several are run), ``peak RSS to data ready`` = its VmHWM
(polled every 50 ms) when build_data is done. ``prep`` = cold minus the best warm
first-update time. Writes ``corpus_scaling.json`` and ``corpus_scaling.md`` in
``--out`` (default outputs/bench/).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from attnmt.atomic import write_json, write_text
from attnmt.machine import this_machine
from attnmt.run_record import RecordError, read_record
from benchmarks import make_big_corpus

ROOT = Path(__file__).resolve().parents[1]
OVERRIDES = [
    "model=transformer_tiny",
    "device=cpu",
    "trainer.max_steps=10",  # the peak RSS sees several batches, not one batch's luck
    "trainer.test=false",
    "trainer.val_subset=8",
    "trainer.num_heatmaps=0",
    "trainer.num_samples=0",
    "trainer.progress_bar=false",
    "trainer.time_budget_min=0",
    "trainer.precision=fp32",
]


def vm_hwm(pid: int) -> int | None:
    """The process' peak resident set so far (KiB), or None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def run_train(corpus: Path, data_root: Path, run_dir: Path, extra: list[str]) -> dict[str, Any]:
    """One ``train.py`` run; its wall time, time to the first update, peak RSS (MB)."""
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        "data=custom",
        f"data.path={corpus}",
        "data.src_lang=de",
        "data.tgt_lang=en",
        f"data.root={data_root}",
        f"hydra.run.dir={run_dir}",
        *OVERRIDES,
        *extra,
    ]
    run_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    hwm: list[tuple[float, int]] = []  # (seconds since start, VmHWM in KiB), every 50 ms
    with (run_dir / "stdout.txt").open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            kib = vm_hwm(proc.pid)
            if kib is not None:
                hwm.append((time.time() - t0, kib))
            time.sleep(0.05)
    wall = time.time() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = (run_dir / "stdout.txt").read_text(errors="replace")[-3000:]
        raise SystemExit(f"train.py failed (exit {code}):\n{tail}")
    try:
        record = read_record(run_dir)
        start, step1 = record.of("start")[0], record.train[0]
    except (RecordError, IndexError):
        raise SystemExit(f"{run_dir}: no run record with a first update") from None
    at = {"data": start["data_ready"] - t0, "step1": step1["time"] - t0}
    upto = [kib for t, kib in hwm if t <= at["data"] + 0.05]
    return {
        "wall_s": round(wall, 2),
        "first_update_s": round(at["step1"], 2),
        "data_s": round(start["data_seconds"], 2),  # build_data
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # Linux: KiB
        "data_peak_rss_mb": round(max(upto) / 1024, 1) if upto else None,
        "encode_s": round(start["ids_seconds"], 2),  # train ids: encoded (cold) or read
        "run_dir": str(run_dir),
    }


def bench_size(
    n: int, out: Path, warm_runs: int, extra: list[str], cold: bool = True
) -> dict[str, Any]:
    """Cold run then ``warm_runs`` warm runs on an N-pair corpus (``cold=False``: only the
    warm runs, on the caches an earlier cold run left)."""
    corpus = out / "corpora" / str(n)
    if not (corpus / "train.en").is_file():
        make_big_corpus.main(["--pairs", str(n), "--out", str(corpus)])
    data_root = out / "data" / str(n)
    stamp = time.strftime("%H%M%S")
    first: dict[str, Any] | None = None
    if cold:
        shutil.rmtree(data_root, ignore_errors=True)
        first = run_train(corpus, data_root, out / "runs" / f"{n}-{stamp}-cold", extra)
        print(f"{n}: cold {first}", file=sys.stderr)
    warm = []
    for k in range(warm_runs):
        warm.append(run_train(corpus, data_root, out / "runs" / f"{n}-{stamp}-warm{k}", extra))
        print(f"{n}: warm {warm[-1]}", file=sys.stderr)
    best = min(w["first_update_s"] for w in warm) if warm else 0.0
    prep = first["first_update_s"] - best if first else None
    size = sum(f.stat().st_size for f in corpus.glob("train.*"))
    return {
        "pairs": n,
        "train_bytes": size,
        "cold": first,
        "warm": warm,
        "prep_s": None if prep is None else round(prep, 2),
        "prep_pairs_per_s": round(n / prep) if prep else None,
        "warm_first_update_s": best,
        "warm_data_s": min(w["data_s"] for w in warm) if warm else None,
        "warm_peak_rss_mb": max(w["peak_rss_mb"] for w in warm) if warm else None,
        "warm_data_peak_rss_mb": max(w["data_peak_rss_mb"] or 0 for w in warm) if warm else None,
    }


def table(results: list[dict[str, Any]], cpu: str) -> str:
    """The markdown table of :func:`bench_size` results; ``cpu``: the machine's line."""
    lines = [
        f"Machine: {cpu} ({os.cpu_count()} cores visible)",
        "",
        "| pairs | train text | prep, cold (s) | prep pairs/s | ids encoded (s) "
        "| cold peak RSS | warm: start to 1st update (s) | warm: build_data (s) "
        "| warm: peak RSS to data ready | warm: peak RSS (10 updates) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        cold = r["cold"] or {}
        cells = [
            f"{r['pairs']:,}",
            f"{r['train_bytes'] / 2**20:.0f} MiB",
            _num(r["prep_s"], "{:.1f}"),
            _num(r["prep_pairs_per_s"], "{:,}"),
            _num(cold.get("encode_s"), "{:.1f}"),
            _num(cold.get("peak_rss_mb"), "{:.0f} MB"),
            _num(r["warm_first_update_s"], "{:.1f}"),
            _num(r["warm_data_s"], "{:.2f}"),
            _num(r["warm_data_peak_rss_mb"], "{:.0f} MB"),
            _num(r["warm_peak_rss_mb"], "{:.0f} MB"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[30_000, 300_000, 3_000_000])
    ap.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench")
    ap.add_argument("--warm-runs", type=int, default=2)
    ap.add_argument("--tag", default="corpus_scaling", help="output file name stem")
    ap.add_argument("--warm-only", action="store_true", help="reuse the caches of a cold run")
    ap.add_argument("extra", nargs="*", help="more train.py overrides (key=value)")
    args = ap.parse_args(argv)
    out = args.out.resolve()
    results = [
        bench_size(n, out, args.warm_runs, args.extra, cold=not args.warm_only) for n in args.sizes
    ]
    machine = this_machine()
    report = {
        "machine": machine.to_dict(),
        "cores": os.cpu_count(),
        "overrides": OVERRIDES + args.extra,
        "results": results,
    }
    write_json(out / f"{args.tag}.json", report)
    md = table(results, machine.short())
    write_text(out / f"{args.tag}.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
