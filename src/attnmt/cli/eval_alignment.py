"""evaluate.py's alignment error: the gold file checked against the pairs, the references
forced through the model (:mod:`attnmt.decode.forced_alignment`), AER, precision and
recall (:mod:`attnmt.decode.alignment_error`) of the chosen map, and the same for every
map of the model (:mod:`attnmt.decode.alignment_table`), for scores.json and the terminal."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from attnmt.data.gold import Alignment
from attnmt.data.textio import read_lines, write_lines
from attnmt.decode.alignment_error import (
    AlignmentScores,
    alignment_error,
    check_gold_ranges,
    read_gold,
)
from attnmt.decode.alignment_table import AerTable, aer_table
from attnmt.decode.forced_alignment import (
    MapChoice,
    cross_layout,
    forced_links,
    members,
    table_choices,
)
from attnmt.decode.translator import Translator
from attnmt.decode.word_alignment import Extraction, pharaoh
from attnmt.errors import DataError

log = logging.getLogger(__name__)

ALIGNMENTS_FILE = "forced-alignments.txt"


@dataclass(frozen=True)
class Gold:
    """A gold alignment file read for the pairs it scores."""

    path: Path
    links: list[Alignment]
    sha256: str  # of its lines, as the evaluation key records it


def load_gold(
    path: Path, sources: list[str], refs: list[str], pairs: str, setting: str | None = None
) -> Gold:
    """The gold file ``path`` for these pairs (``pairs`` names them: the files or the
    split; ``setting``: the key that named ``path``, if one did); DataError naming the
    file (and line) when it is missing or no regular file, is malformed, has another
    line count or names words beyond its pair."""
    lines = read_lines(path, setting)
    if len(lines) != len(sources):
        raise DataError(
            f"gold_alignments {path} has {len(lines)} lines but {pairs} has {len(sources)} "
            "pairs; give the gold file written for these pairs, one line per pair"
        )
    links = read_gold(path)
    check_gold_ranges(links, sources, refs, path)
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
    return Gold(path, links, digest.hexdigest())


def key_record(gold: Gold, choice: MapChoice, extraction: Extraction) -> dict[str, Any]:
    """What the evaluation key hashes of an alignment evaluation."""
    return {
        "gold_file": str(gold.path.resolve()),
        "gold_sha256": gold.sha256,
        "align_layer": choice.layer,
        "align_head": choice.head,
        "align_words": extraction.words,
        "align_eos": extraction.eos,
        "align_step": extraction.step,
    }


@dataclass(frozen=True)
class AlignmentResult:
    """The scores of one forced alignment, the table of every map, and where the chosen
    map's links were written."""

    scores: AlignmentScores
    choice: MapChoice
    extraction: Extraction
    table: AerTable
    gold: Path
    written: Path

    def fields(self) -> dict[str, Any]:
        """scores.json's keys: ``aer``, ``aer_precision``, ``aer_recall``, ``align_layer``,
        ``align_head`` (null: the heads' mean), ``align_words``, ``align_eos``,
        ``align_step``, ``alignment`` (counts and files) and ``aer_table`` (every map:
        :meth:`attnmt.decode.alignment_table.AerTable.to_dict`)."""
        s = self.scores
        return {
            "aer": s.aer,
            "aer_precision": s.precision,
            "aer_recall": s.recall,
            "align_layer": self.choice.layer,
            "align_head": self.choice.head,
            **{f"align_{k}": v for k, v in asdict(self.extraction).items()},
            "alignment": {
                **s.to_dict(),
                "map": self.choice.describe(),
                "gold_file": str(self.gold),
                "alignment_file": str(self.written),
            },
            "aer_table": self.table.to_dict(),
        }

    def line(self) -> str:
        """The terminal line, in the form of the metric lines (name|settings = score)."""
        s, x = self.scores, self.extraction
        head = "mean" if self.choice.head is None else str(self.choice.head)
        return (
            f"AER|layer:{self.choice.layer}|head:{head}|words:{x.words}|eos:{x.eos}|"
            f"step:{x.step}|gold:{self.gold.name} = {_num(s.aer)} "
            f"(precision {_num(s.precision)}, recall {_num(s.recall)}; {s.links} links, "
            f"{s.sure} sure, {s.possible} possible)"
        )

    def lines(self) -> list[str]:
        """The AER line, then the table of every map when the model has more than one."""
        return [self.line(), *(self.table.lines() if len(self.table.rows) > 1 else [])]


def _num(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


def score_alignments(
    translator: Translator,
    sources: list[str],
    refs: list[str],
    gold: Gold,
    choice: MapChoice,
    extraction: Extraction,
    out_dir: Path,
) -> AlignmentResult:
    """Force the references through the model, write the links of ``choice`` (Pharaoh,
    one line per pair) to ``out_dir``/forced-alignments.txt and score them against
    ``gold``, and every map of the model beside them (an ensemble: the chosen map only)."""
    if len(members(translator.model)) > 1:
        rows = [choice]
    else:
        rows = table_choices(*cross_layout(translator.model, translator.device))
    every = [choice, *rows]
    found = forced_links(translator, sources, refs, every, extraction)
    links = found[0]
    written = out_dir / ALIGNMENTS_FILE
    write_lines(written, [pharaoh(x) for x in links])
    scores = alignment_error(links, gold.links)
    if scores.sure == 0:
        log.warning(
            "%s holds no sure links (i-j), only possible ones (i?j): recall is undefined "
            "and AER = 1 - precision",
            gold.path,
        )
    table = aer_table(rows, found[1:], gold.links, extraction)
    return AlignmentResult(scores, choice, extraction, table, gold.path, written)
