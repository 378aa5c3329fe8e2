"""The word links each validation scores the model's attention against
(``trainer.valid_alignments``), found and checked once, before training.

``auto`` (the default) takes the first of:

1. the corpus' own gold links of its valid split (``valid.<src>-<tgt>.align`` beside the
   prepared files: toy_align has them, :meth:`attnmt.data.corpora.PreparedCorpus.gold_alignments`);
2. silver links cached beside the corpus, ``<corpus>/valid.<src>-<tgt>.silver.align``: what
   ``python scripts/silver_alignments.py --split valid`` writes with the run's data settings;
3. none: validation scores no AER and costs nothing more.

``none`` turns it off; any other value is a Pharaoh file of the valid split (``i-j`` sure,
``i?j`` possible; e.g. the kept ``results/silver/ding_de_en.valid.de-en.silver.align``).
The file must have one line per valid pair and links within each pair's words (the gold
readers' checks: :func:`attnmt.decode.alignment_error.read_gold`, ``check_gold_ranges``;
DataError naming the file and line). When it has a links record beside it (``<file>.json``,
:class:`attnmt.data.silver.LinksRecord`), the record must describe this corpus' valid split
(its split, languages and the sha256 of the prepared files); links written the other way
round (``en-de`` for a ``de → en`` run) are read flipped. With ``trainer.val_subset`` the
first lines are kept with their pairs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from attnmt.data.corpora import PreparedCorpus
from attnmt.data.gold import Alignment
from attnmt.data.silver import LinksRecord, record_mismatch, record_path, silver_path
from attnmt.data.textio import read_lines
from attnmt.decode.alignment_error import check_gold_ranges, read_gold
from attnmt.errors import DataError

log = logging.getLogger(__name__)

SETTING = "trainer.valid_alignments"
AUTO = "auto"
OFF = "none"
SPLIT = "valid"


@dataclass(frozen=True)
class ValidLinks:
    """The links of the validation pairs (one :class:`Alignment` per pair, in split order,
    source word first) and the file they were read from."""

    path: Path
    links: list[Alignment]

    def __len__(self) -> int:
        return len(self.links)

    def first(self, n: int) -> ValidLinks:
        """The links of the first ``n`` pairs (``trainer.val_subset``); all for ``n`` <= 0."""
        return self if n <= 0 else ValidLinks(self.path, self.links[:n])


def silver_cache(corpus: PreparedCorpus) -> Path:
    """``<corpus>/valid.<src>-<tgt>.silver.align``: scripts/silver_alignments.py's default
    output for ``--split valid``."""
    return silver_path(corpus, SPLIT)


def links_file(corpus: PreparedCorpus, setting: str) -> Path | None:
    """The file ``setting`` names for this corpus (module docstring), or None."""
    if setting == OFF:
        return None
    if setting != AUTO:
        return Path(setting)
    gold = corpus.gold_alignments(SPLIT)
    if gold is not None:
        return gold
    cached = silver_cache(corpus)
    return cached if cached.is_file() else None


def _flipped(path: Path, corpus: PreparedCorpus) -> bool:
    """Whether the record beside ``path`` names the corpus' languages the other way round;
    False without a record. DataError when the record describes other sentences."""
    where = record_path(path)
    if not where.is_file():
        return False
    record = LinksRecord.read(where)
    reason = record_mismatch(record, corpus, SPLIT)
    if reason is not None:
        raise DataError(
            f"{where}: {reason}; make them for this corpus (python scripts/silver_alignments.py "
            f"--split {SPLIT} with the run's data settings) or set {SETTING}=none"
        )
    return record.src_lang != corpus.src_lang


def _flip(a: Alignment) -> Alignment:
    return Alignment(frozenset((j, i) for i, j in a.sure), frozenset((j, i) for i, j in a.possible))


def valid_links(
    corpus: PreparedCorpus, setting: str, sources: list[str], refs: list[str]
) -> ValidLinks | None:
    """The links of the whole valid split (``sources``, ``refs``) named by ``setting``,
    checked against its pairs, or None when there are none (module docstring)."""
    path = links_file(corpus, setting)
    if path is None:
        if setting == AUTO:
            log.info(
                "valid: no word links (no gold, no %s): no AER at validation; %s=FILE gives them",
                silver_cache(corpus).name,
                SETTING,
            )
        return None
    lines = read_lines(path, SETTING if setting != AUTO else None)
    if len(lines) != len(sources):
        raise DataError(
            f"{SETTING}: {path} has {len(lines)} lines but the valid split of "
            f"{corpus.directory} has {len(sources)} pairs; give the links of these pairs, "
            "one line per pair"
        )
    flipped = _flipped(path, corpus)
    links = [_flip(a) for a in read_gold(path)] if flipped else read_gold(path)
    check_gold_ranges(links, sources, refs, path)
    log.info(
        "valid: AER at each validation against %s (%d pairs%s)",
        path,
        len(links),
        ", read target-source" if flipped else "",
    )
    return ValidLinks(path, links)
