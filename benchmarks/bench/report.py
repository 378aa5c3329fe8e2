"""Ratios between variants, the markdown report and the JSON file."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from .measure import Row

BASELINES = {
    "sdpa_op": "explicit",
    "sdpa_train": "explicit",
    "decode": "uncached",
    "translate": "single",
    "dropout": "torch",
    "loss": "torch",
    "ct2": "attnmt",
}
"""The variant each bench's ``speedup`` is relative to, unless a row names its own
``baselines`` ({ratio name: variant})."""

LABELS = {"speedup": "speedup", "vs_reference": "vs ref"}


def add_ratios(rows: list[Row]) -> None:
    """Each row's ratios over the baseline variants of its group (bench, model, device).

    A ratio is the median over the interleaved rounds of ``t_baseline[i] / t_variant[i]``:
    a load spike on the shared machine hits both calls of a round, so it mostly cancels.
    """
    groups: dict[tuple[str, str, str], dict[str, Row]] = {}
    for row in rows:
        key = (row["bench"], row["model"], row["device"])
        groups.setdefault(key, {})[row["variant"]] = row
    for row in rows:
        if "times" not in row:
            continue
        group = groups[(row["bench"], row["model"], row["device"])]
        wanted = row.get("baselines") or {"speedup": BASELINES.get(row["bench"])}
        for ratio, variant in wanted.items():
            ref = group.get(variant) if variant != row["variant"] else None
            if ref is not None and "times" in ref:
                pairs = zip(ref["times"], row["times"])
                row[ratio] = statistics.median(a / b for a, b in pairs)


def _num(value: Any, fmt: str) -> str:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return format(value, fmt) if ok else ""


def _rate(row: Row) -> str:
    rate = row.get("rate")
    if not isinstance(rate, (int, float)):
        return ""
    fmt = ",.0f" if rate >= 100 else ".2f" if rate < 10 else ".1f"
    return f"{format(rate, fmt)} {row.get('unit', '')}"


COLUMNS = (
    ("bench", lambda r: r["bench"]),
    ("model / shape", lambda r: r["model"]),
    ("device", lambda r: r["device"]),
    ("variant", lambda r: r["variant"]),
    ("ms/call", lambda r: _num(r.get("sec_per_step", math.nan) * 1e3, ",.1f")),
    ("rate", _rate),
    ("GFLOP/s", lambda r: _num(r.get("gflops") if r["bench"] != "matmul" else None, ".1f")),
    ("% of peak", lambda r: _num(100 * r.get("peak_fraction", math.nan), ".0f")),
    ("speedup", lambda r: _num(r.get("speedup"), ".2f")),
    ("vs ref", lambda r: _num(r.get("vs_reference"), ".2f")),
    ("peak MB", lambda r: _num(r.get("peak_mem_mb"), ",.0f")),
    ("time split", lambda r: r.get("split", "")),
    ("note", lambda r: r.get("error") or r.get("note") or ""),
)


def markdown(meta: dict[str, Any], rows: Iterable[Row]) -> str:
    """The report: a header on the machine and the data, then one table row per figure."""
    m, w = meta["machine"], meta.get("workload") or {}
    lines = [
        f"# attnmt benchmark {meta['started']}",
        "",
        f"- machine: {m['summary']} ({m['cores']} cores; torch kernels "
        f"{m['kernels']}; native bf16: {'yes' if m['bf16_native_cpu'] else 'no'})",
        f"- load average at start: {_loads(m.get('load_avg_start'))}, "
        f"at end: {_loads(meta.get('load_avg_end'))}; the run took {meta['seconds']:.0f} s",
    ]
    if meta.get("attnmt_source"):
        lines.append(f"- code measured: attnmt imported from {meta['attnmt_source']}")
    if w:
        lines.append(
            f"- data: {w['corpus']}; {w['batches']} training batches of max_tokens="
            f"{w['max_tokens']}: {w['pairs']} pairs, {w['target_tokens']} target tokens, "
            f"padding {100 * w['padding']:.1f}% of positions (source "
            f"{100 * w['padding_src']:.1f}%, target {100 * w['padding_tgt']:.1f}%)"
        )
        if w.get("note"):
            lines.append(f"- **note**: {w['note']}")
    lines += ["", *(f"- {n}" for n in meta.get("notes", []))]
    lines += ["", "| " + " | ".join(name for name, _ in COLUMNS) + " |"]
    lines.append("|" + "|".join("---" for _ in COLUMNS) + "|")
    for row in rows:
        cells = (str(fn(row)).replace("|", "\\|") for _, fn in COLUMNS)
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _loads(values: Any) -> str:
    return " ".join(f"{v:.2f}" for v in values) if values else "-"
