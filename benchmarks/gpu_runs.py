"""The table of ``scripts/gpu_check.sh``'s training runs: one row per run folder.

    python -m benchmarks.gpu_runs DIR

``DIR``: a folder of run folders (``runs.tgz`` unpacked) or the ``.tgz`` itself. Each row:
preset, the precision the run resolved, device, updates, training minutes, the median
``tokens_per_sec`` of the logged windows after the first (step 1 holds start-up and
compilation), the run's status (a run stopped by the check's time limit is
``interrupted``), validation BLEU at the last validation and test BLEU (with its beam).
"""

from __future__ import annotations

import argparse
import statistics
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from attnmt.run_record import RecordError, RunRecord, read_record
from attnmt.run_summary import Summary


@dataclass
class GpuRow:
    """One training run of the GPU check."""

    name: str
    model: str
    precision: str
    device: str
    steps: int
    minutes: float
    tokens_per_sec: float | None
    valid_bleu: float | None
    test_bleu: float | None
    test_beam: int | None
    status: str


def row_of(name: str, record: RunRecord) -> GpuRow:
    """The row of one run record; ``tokens_per_sec`` is the median over train events after
    step 1 (None when only step 1 was logged)."""
    summary = record.summary or Summary()
    speeds = [e["tokens_per_sec"] for e in record.train if e["step"] > 1]
    valid = record.valid
    test = record.test
    return GpuRow(
        name=name,
        model=summary.model or "?",
        precision=summary.precision or "?",
        device=summary.device or "?",
        steps=summary.step or 0,
        minutes=summary.minutes or 0.0,
        tokens_per_sec=statistics.median(speeds) if speeds else None,
        valid_bleu=valid[-1]["bleu"] if valid else None,
        test_bleu=test["bleu"] if test else None,
        test_beam=test.get("beam") if test else None,
        status=str(record.status),
    )


def read_rows(folder: Path) -> list[GpuRow]:
    """Every run folder directly under ``folder``, by name; folders without a record are
    skipped."""
    rows = []
    for run in sorted(p for p in folder.iterdir() if p.is_dir()):
        try:
            rows.append(row_of(run.name, read_record(run)))
        except RecordError:
            continue
    return rows


def _num(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(rows: list[GpuRow]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| run | precision | device | updates | status | minutes | tokens/s | valid BLEU | "
        "test BLEU |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        beam = f" (beam {r.test_beam})" if r.test_beam else ""
        lines.append(
            f"| {r.name} | {r.precision} | {r.device} | {r.steps} | {r.status} | {r.minutes:.2f} | "
            f"{_num(r.tokens_per_sec, 0)} | {_num(r.valid_bleu, 2)} | "
            f"{_num(r.test_bleu, 2)}{beam} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", type=Path, help="folder of run folders, or runs.tgz")
    args = parser.parse_args(argv)
    if args.path.is_file():
        with tempfile.TemporaryDirectory() as tmp, tarfile.open(args.path) as tar:
            if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12: no paths outside tmp
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)  # the archive is the check's own
            print(markdown(read_rows(Path(tmp))))
    else:
        print(markdown(read_rows(args.path)))


if __name__ == "__main__":
    main()
