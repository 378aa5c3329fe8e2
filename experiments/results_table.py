"""docs/results.md's generated blocks from the runs of configs/study/results_*.yaml: both
tables with their analyses, the main table's length protocol, validation BLEU curves (a PNG
per corpus), the machines, the missing runs.

    python -m experiments.results_table docs       # = make results-docs
"""

from __future__ import annotations

import argparse
import functools
import math
import statistics
import sys
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attnmt.atomic import write_text
from attnmt.run_curves import Curve, validation_figure
from experiments import (
    attention_measures,
    attention_table,
    main_table_analysis,
    page_blocks,
    protocol,
)
from experiments.comparison_stats import mean_std
from experiments.runs import RESULTS, ROOT, Cell, Run, config, corpus_split, study_cells
from experiments.study import load_study

PAGE = ROOT / "docs" / "results.md"
MAIN = "results_main"
ATTENTION = ("results_attention", "results_attention_reference", "results_attention_transformer")
PRESET = "results_attention_preset"
"""The check at the preset's size: its section is a frozen record (docs/results.md), its runs
still count among the machines' and the missing."""


def span(values: Iterable[float], unit: str = "", digits: int = 2) -> str:
    """One value, or 'lo–hi' when they differ."""
    found = sorted({round(v, digits) for v in values if not math.isnan(v)})
    if len(found) > 1:
        return f"{found[0]:.{digits}f}–{found[-1]:.{digits}f}{unit}"
    return f"{found[0]:.{digits}f}{unit}" if found else "–"


def cells(results: Path, *studies: str) -> list[Cell]:
    """The rows of ``studies`` (configs/study/NAME.yaml) with their runs under ``results``."""
    specs = [load_study(ROOT / "configs" / "study" / f"{s}.yaml") for s in studies]
    return [c for spec in specs for c in study_cells(results, spec)]


def machine_labels(runs: Iterable[Run]) -> dict[str, str]:
    """Machine line -> 'M1', 'M2', ... in the order the runs first name them (by date)."""
    labels: dict[str, str] = {}
    for run in sorted(runs, key=lambda r: r.summary.updated or 0.0):
        labels.setdefault(run.machine_line, f"M{len(labels) + 1}")
    return labels


def machines(runs: list[Run], labels: dict[str, str]) -> list[str]:
    """A row per machine: its runs, the first and last day (UTC) they ended, their commits."""
    rows = []
    for line, label in labels.items():
        mine = [r for r in runs if r.machine_line == line]
        ends = [datetime.fromtimestamp(r.summary.updated or 0, timezone.utc) for r in mine]
        days = sorted(end.date().isoformat() for end in ends)
        commits = ", ".join(sorted({r.summary.commit for r in mine if r.summary.commit}))
        when = " – ".join(dict.fromkeys([days[0], days[-1]]))
        rows.append([label, line, str(len(mine)), when, commits])
    head = ["machine", "CPU, torch, threads", "runs", "recorded", "commits"]
    return page_blocks.table(head, "llrll", rows)


def corpora(main: list[Cell]) -> dict[str, dict[str, Any]]:
    """Corpus -> the data settings its runs had ({} without runs), in grid order."""
    found: dict[str, dict[str, Any]] = {}
    for cell in main:
        if not found.get(name := cell.overrides["data"]):
            found[name] = config(cell.runs[0])["data"] if cell.runs else {}
    return found


def lengths(main: list[Cell]) -> dict[str, int]:
    """Corpus -> the main table's updates there (configs/table_length/)."""
    return {c: OmegaConf.load(ROOT / protocol.length_config(c)).max_steps for c in corpora(main)}


def capped(main: list[Cell], runs: list[Run], every: int) -> frozenset[str]:
    """The corpora where a main-table probe (one of ``runs``) ran and has not flattened."""
    own = {c: [r for r in runs if r.overrides.get("data") == c] for c in corpora(main)}
    return frozenset(c for c, rs in own.items() if rs and protocol.table_updates(rs, every) is None)


def main_table(
    main: list[Cell], labels: dict[str, str], capped: frozenset[str] = frozenset()
) -> list[str]:
    """The lengths and seeds, then a row per corpus and preset; the updates of a corpus in
    ``capped`` (its probes have not flattened) are labelled "capped, not flat"."""
    data, seeds = corpora(main), sorted({s for c in main for s in c.seeds})
    rows = []
    for cell in main:
        got, d = cell.runs, data[cell.overrides["data"]]
        minutes = [m for r in got if (m := r.summary.minutes) is not None]
        rows.append([
            f"{cell.overrides['data']} ({d.get('src_lang', '?')}→{d.get('tgt_lang', '?')})",
            cell.overrides["model"],
            cell.seeds_text,
            mean_std([r.test_score("bleu") for r in got]),
            mean_std([r.test_score("chrf") for r in got]),
            span([(r.summary.params or math.nan) / 1e6 for r in got], "M"),
            span([r.summary.step or math.nan for r in got], digits=0)
            + (" (capped, not flat)" if got and cell.overrides["data"] in capped else ""),
            f"{statistics.median(minutes):.1f}" if minutes else "–",
            ", ".join(sorted({labels[r.machine_line] for r in got})) or "not yet run",
        ])  # fmt: skip
    head = ["corpus", "model", "seeds", "test BLEU", "test chrF", "parameters", "updates",
            "minutes (median)", "machines"]  # fmt: skip
    return [
        f"`experiment=results_main`: {', '.join(map(str, sorted(set(lengths(main).values()))))} "
        f"updates per run, seeds {', '.join(map(str, seeds))}."
        + "".join(
            f" On {c} the length is capped, not flat: its probes have not flattened "
            "(Protocol, below), so its rows compare presets at a fixed, unfinished length."
            for c in sorted(capped)
        ),
        "",
        *page_blocks.table(head, "lllrrrrrl", rows),
    ]


def curves(main: list[Cell], folder: Path) -> list[str]:
    """A PNG per corpus with runs (validation BLEU against updates and minutes), linked."""
    links = []
    for corpus in corpora(main):
        own = [(c, r) for c in main if c.overrides["data"] == corpus for r in c.runs]
        if not own:
            continue
        fig = validation_figure([
            Curve(f"{c.overrides['model']} seed {r.seed}",
                  [(v.step, v.minutes or 0.0, v.bleu or 0.0, v.chrf or 0.0) for v in r.valid])
            for c, r in own
        ])  # fmt: skip
        fig.set_size_inches(9, fig.get_size_inches()[1] * 0.8)
        fig.suptitle(f"validation BLEU on {corpus}", fontsize=10)
        fig.subplots_adjust(top=0.9)  # room for the title above the panels
        page_blocks.save_png(fig, folder / f"results_{corpus}.png", dpi=70)
        links += [f"![validation BLEU on {corpus} against updates and minutes]"
                  f"(results_{corpus}.png)", ""]  # fmt: skip
    return links[:-1] or ["No run recorded yet."]


def blocks(results: Path, probes: Path) -> dict[str, list[str]]:
    """Every block but the curves' (``probes``: where the main table's probes' and the
    synthetic task's run folders are)."""
    main, table, check = cells(results, MAIN), cells(results, *ATTENTION), cells(results, PRESET)
    runs = [r for c in [*main, *table, *check] for r in c.runs]
    labels = machine_labels(runs)
    tests = [t for r in runs if (t := r.summary.test) is not None]
    signatures = sorted({s for t in tests for s in (t.bleu_signature, t.chrf_signature) if s})
    beams = sorted({str(t.beam) for t in tests if t.beam is not None})
    main_runs = [r for c in main for r in c.runs]
    data = corpora(main)
    refs = functools.cache(lambda corpus: corpus_split(data.get(corpus) or None)[1])
    every = {config(r)["trainer"].get("val_every_steps") for r in main_runs}
    step = every.pop() if len(every) == 1 else None
    main_probes = protocol.probes(probes)
    seeds = max((len(c.seeds) for c in main), default=1)
    measured = attention_table.measures(table, attention_table.toy_records(probes))
    corpus, sources, test_refs = attention_table.test_split(measured)
    diagonal = attention_measures.silver_diagonal(corpus, sources, test_refs)
    trained = OmegaConf.load(ROOT / "configs" / "experiment" / "results_attention.yaml").trainer
    return {
        "signatures": [
            f"sacrebleu: {'; '.join(f'`{s}`' for s in signatures) or 'none yet'}; "
            f"beam {', '.join(beams) or '1'}."
        ],
        "main": main_table(main, labels, capped(main, main_probes, step) if step else frozenset()),
        "main analysis": main_table_analysis.analysis(main_runs, refs),
        "main length": protocol.main_section(main_probes, lengths(main), step, seeds)
        if step
        else ["No one validation interval among the runs: no length to judge yet."],
        "attention": [
            f"`experiment=results_attention` on ding_de_en: {trained.max_steps} updates per run, "
            f"seeds {', '.join(map(str, sorted({s for c in table for s in c.seeds})))} for every "
            "cell (fixed in advance).",
            "",
            *attention_table.table(measured, labels),
        ],
        "attention analysis": attention_table.analysis(measured, test_refs, diagonal),
        "machines": machines(runs, labels) if runs else ["No run recorded yet."],
        "missing": [f"- {c.study}: {n}" for c in [*main, *table, *check] for n in c.missing]
        or ["Nothing: every run of the results studies is recorded."],
    }


def write_docs(results: Path, out: Path, probes: Path | None = None, page: Path = PAGE) -> Path:
    """``page`` with its blocks filled from the run folders under ``results`` (the probes'
    and the synthetic task's under ``probes``, default ``results``), written to ``out``, the
    curves' PNGs beside it (after all that can fail)."""
    found = blocks(results, probes or results)
    text = page_blocks.fill(page.read_text(encoding="utf-8"), {**found, "curves": []}, page)
    found["curves"] = curves(cells(results, MAIN), out.parent)
    write_text(out, page_blocks.fill(text, found, page))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["docs"])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    return page_blocks.report(lambda: [write_docs(args.results, args.out)])


if __name__ == "__main__":
    sys.exit(main())
