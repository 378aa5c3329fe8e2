"""The word links that guided alignment trains towards: which file, checked against the corpus.

``trainer.guided_alignment.links`` names a Pharaoh file of the train split; null takes the
split's silver links (attnmt.data.silver), the first of:

1. the cache beside the prepared corpus, ``<corpus>/train.<src>-<tgt>.silver.align`` (what
   ``scripts/silver_alignments.py --split train`` writes), or the other direction's;
2. a kept copy shipped with attnmt (``src/attnmt/data/shipped/*.train.*.silver.align.xz``,
   ding_de_en's): eflomal takes no seed, so a guided run on the shipped corpus reproduces
   without the ``[silver]`` extra;
3. eflomal, when installed: the train split is aligned once and cached as in 1.

Every file's record (``<file>.json``, :class:`attnmt.data.silver.LinksRecord`) names the
sha256 of the prepared files it aligns: the links are used only for those sentences (the
record of another corpus is refused; a kept copy is only picked when it matches). Links
written in the other direction (``en-de`` for a ``de → en`` run) are read flipped.
"""

from __future__ import annotations

import logging
from pathlib import Path

from attnmt.data.corpora import PreparedCorpus
from attnmt.data.silver import (
    LinksRecord,
    record_mismatch,
    record_path,
    require_eflomal,
    silver_path,
    write_silver,
)
from attnmt.data.word_links import WordLinks, read_word_links
from attnmt.errors import ConfigError, DataError

log = logging.getLogger(__name__)

SHIPPED = Path(__file__).resolve().parent / "shipped"
"""Where the kept silver links of shipped corpora lie."""

SPLIT = "train"


def silver_cache(corpus: PreparedCorpus, flipped: bool = False) -> Path:
    """``<corpus>/train.<src>-<tgt>.silver.align`` (``flipped``: ``<tgt>-<src>``)."""
    return silver_path(corpus, SPLIT, flipped)


def record_direction(record: LinksRecord, corpus: PreparedCorpus) -> bool | None:
    """Whether ``record``'s links are flipped against ``corpus``'s direction (True: they
    were written target → source), or None when it aligns other sentences than the
    corpus' train split (another split, other languages or other file hashes)."""
    if record_mismatch(record, corpus, SPLIT) is not None:
        return None
    return record.src_lang != corpus.src_lang


def _refusal(record: LinksRecord, where: Path, corpus: PreparedCorpus) -> DataError:
    """Why ``record`` (at ``where``) does not describe the corpus' train split."""
    remake = (
        "they align other sentences: remake them for this corpus (python "
        "scripts/silver_alignments.py --split train with the run's data settings; a stale "
        "cache beside the corpus: delete it and its record) or set "
        "trainer.guided_alignment.links"
    )
    return DataError(f"{where}: {record_mismatch(record, corpus, SPLIT)}; {remake}")


def checked_direction(links: Path, corpus: PreparedCorpus) -> bool:
    """Whether ``links`` are flipped against the corpus; DataError when its record
    (if it has one) describes other sentences. A file without a record is taken as
    written in the corpus' direction (its lines and links are still checked)."""
    where = record_path(links)
    if not where.is_file():
        log.info("guided alignment: %s has no record (%s): its hash is not checked", links, where)
        return False
    record = LinksRecord.read(where)
    flipped = record_direction(record, corpus)
    if flipped is None:
        raise _refusal(record, where, corpus)
    return flipped


def shipped_links(corpus: PreparedCorpus, shipped: Path = SHIPPED) -> tuple[Path, bool] | None:
    """A kept copy whose record matches the corpus' train split (and its direction)."""
    for where in sorted(shipped.glob(f"*.{SPLIT}.*.silver.align.json")):
        flipped = record_direction(LinksRecord.read(where), corpus)
        links = where.with_name(where.name.removesuffix(".json") + ".xz")
        if flipped is not None and links.is_file():
            return links, flipped
    return None


def silver_file(corpus: PreparedCorpus, shipped: Path = SHIPPED) -> tuple[Path, bool]:
    """(links file, flipped) of the train split's silver links: cached, kept, or made now
    with eflomal (module docstring); ConfigError naming the command when none exists and
    eflomal is not installed."""
    for flipped in (False, True):
        cached = silver_cache(corpus, flipped)
        if cached.is_file():
            return cached, checked_direction(cached, corpus)
    kept = shipped_links(corpus, shipped)
    if kept is not None:
        return kept
    out = silver_cache(corpus)
    try:
        require_eflomal()
    except ConfigError as err:
        raise ConfigError(
            f"trainer.guided_alignment: the train split of {corpus.directory} has no silver "
            f"links yet, and {err}. Or write them elsewhere: python "
            "scripts/silver_alignments.py --split train (with the run's data settings), or "
            "give a Pharaoh file: trainer.guided_alignment.links=FILE"
        ) from None
    log.info("guided alignment: aligning the train split with eflomal (once) -> %s", out)
    record = write_silver(corpus, SPLIT, out)
    log.info("guided alignment: %d silver links over %d pairs", record.links, record.pairs)
    return out, False


def train_links(corpus: PreparedCorpus, links: str | None, shipped: Path = SHIPPED) -> WordLinks:
    """The sure word links of every train pair, in the corpus' direction, checked against
    its sentences (:func:`attnmt.data.word_links.read_word_links`) and, where the file
    has a record, against the train files' sha256. ``links``: a Pharaoh file, or None
    for the silver links (:func:`silver_file`). Every refusal: DataError (one line)."""
    if links:
        path = Path(links)
        flipped = checked_direction(path, corpus) if path.is_file() else False
    else:
        path, flipped = silver_file(corpus, shipped)
    src_file, tgt_file = corpus.files(SPLIT)
    if flipped:
        read = read_word_links(path, tgt_file, src_file, corpus.counts[SPLIT]).flipped()
    else:
        read = read_word_links(path, src_file, tgt_file, corpus.counts[SPLIT])
    log.info(
        "guided alignment: %d links over %d train pairs from %s%s",
        read.n_links,
        len(read),
        path,
        " (read target-source)" if flipped else "",
    )
    return read
