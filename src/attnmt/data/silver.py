"""Silver word alignments of a corpus split, from eflomal (optional: ``attnmt[silver]``).

A corpus without human (gold) alignments can still score attention with AER against the
links of a statistical word aligner. eflomal (Östling & Tiedemann, 2016; a Bayesian IBM
model with HMM and fertility, fitted by Gibbs sampling) aligns the train split together
with the test split, so that the test pairs borrow the statistics of the whole corpus, in
both directions (source→target and target→source); the two directional alignments are
symmetrised with grow-diag-final-and (Koehn et al., 2003):

    A  = F ∩ B                                    (intersection: precise)
    grow: while some link (i, j) ∈ F ∪ B, not in A, neighbours a link of A (the 8 cells
          around it, diagonals included) and i or j is still unaligned in A: add it
    final-and: each (i, j) of F, then of B, with both i and j unaligned in A: add it

Words are the corpus' whitespace words, each stripped of leading and trailing punctuation
for the aligner only (:func:`aligner_words`), so link indices are those of the corpus.
The test split's links are written in Pharaoh format (:mod:`attnmt.data.gold`), all of
them sure. They are silver, not gold: an aligner's guesses, good enough to rank models by
AER, not a human reference. eflomal takes no seed: two runs differ (on ding_de_en's test
split about 10% of the links), so write the file once and score every model against it.

The train split's links guide attention in training (attnmt.train.guided_alignment). Each
links file gets a record beside it (:class:`LinksRecord`, ``<file>.json``): the split, the
languages, counts, the aligner and the sha256 of the two prepared files it aligns, so that
links are never used with another corpus' sentences (attnmt.data.train_links checks it).
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import string
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from attnmt.atomic import write_json, write_text
from attnmt.data.corpora import PreparedCorpus, file_info
from attnmt.data.gold import Link, format_links, parse_links
from attnmt.errors import ConfigError, DataError

INSTALL = 'pip install -e ".[silver]"'
"""The command that installs eflomal, as the error message names it."""

_PUNCTUATION = string.punctuation + "“”„‘’«»‹›–—…¿¡"

# (Δsource, Δtarget): the 4 edge neighbours, then the 4 diagonal ones (Koehn's order)
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def require_eflomal() -> ModuleType:
    """The ``eflomal`` module; ConfigError naming the install command when it is missing."""
    try:
        import eflomal
    except ImportError as err:
        raise ConfigError(
            f"eflomal is not installed ({err}); silver alignments need it: {INSTALL} "
            "(eflomal builds from source with the machine's C compiler)"
        ) from None
    return eflomal


def grow_diag_final_and(forward: Iterable[Link], backward: Iterable[Link]) -> set[Link]:
    """Symmetrise one sentence pair's directional alignments (see the module docstring).

    ``forward`` and ``backward`` are (source word, target word) links, 0-based, both in
    source-first order. Deterministic: links are visited in sorted order.
    """
    fwd, bwd = set(forward), set(backward)
    union = fwd | bwd
    links = fwd & bwd
    src_aligned = {i for i, _ in links}
    tgt_aligned = {j for _, j in links}

    def add(link: Link) -> None:
        links.add(link)
        src_aligned.add(link[0])
        tgt_aligned.add(link[1])

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                cand = (i + di, j + dj)
                if (
                    cand in union
                    and cand not in links
                    and (cand[0] not in src_aligned or cand[1] not in tgt_aligned)
                ):
                    add(cand)
                    grown = True
    for directional in (fwd, bwd):
        for i, j in sorted(directional):
            if i not in src_aligned and j not in tgt_aligned:
                add((i, j))
    return links


def aligner_words(line: str) -> str:
    """``line`` as eflomal sees it: the same whitespace words, each stripped of leading and
    trailing punctuation (``Ablauf?`` and ``Ablauf`` are one type; eflomal lowercases),
    a word of punctuation only kept as it is, so word indices are unchanged."""
    return " ".join(w.strip(_PUNCTUATION) or w for w in line.split())


def align_directions(
    sources: Sequence[str], targets: Sequence[str]
) -> tuple[list[set[Link]], list[set[Link]]]:
    """(forward, backward) links of every pair, from eflomal with its default settings;
    both in (source word, target word) order. ConfigError when eflomal is missing."""
    eflomal = require_eflomal()
    if len(sources) != len(targets):
        raise ValueError(f"{len(sources)} source lines but {len(targets)} target lines")
    with tempfile.TemporaryDirectory(prefix="attnmt-eflomal-") as tmp:
        fwd_file, bwd_file = Path(tmp) / "forward", Path(tmp) / "backward"
        eflomal.Aligner().align(
            list(sources),
            list(targets),
            links_filename_fwd=str(fwd_file),
            links_filename_rev=str(bwd_file),
            quiet=True,
        )
        fwd_lines = fwd_file.read_text(encoding="utf-8").split("\n")[: len(sources)]
        bwd_lines = bwd_file.read_text(encoding="utf-8").split("\n")[: len(sources)]
    if len(fwd_lines) != len(sources) or len(bwd_lines) != len(sources):
        raise RuntimeError(
            f"eflomal wrote {len(fwd_lines)}/{len(bwd_lines)} lines for {len(sources)} pairs"
        )
    return _links(fwd_lines, "forward"), _links(bwd_lines, "backward")


def _links(lines: Sequence[str], direction: str) -> list[set[Link]]:
    """The ``i-j`` links of each line of eflomal's output (attnmt.data.gold's reader)."""
    return [
        set(parse_links(x, f"eflomal {direction} line {k + 1}").sure) for k, x in enumerate(lines)
    ]


def silver_links(corpus: PreparedCorpus, split: str = "test") -> list[set[Link]]:
    """Symmetrised eflomal links of every pair of ``split``, aligned together with the
    train split (for ``split="train"``, the train split alone); words as
    :func:`aligner_words` gives them."""
    sources, targets = corpus.read(split)
    n = len(sources)
    if n == 0:
        return []
    if split != "train":
        train_src, train_tgt = corpus.read("train")
        sources, targets = train_src + sources, train_tgt + targets
    fwd, bwd = align_directions(
        [aligner_words(x) for x in sources], [aligner_words(x) for x in targets]
    )
    return [grow_diag_final_and(f, b) for f, b in zip(fwd[-n:], bwd[-n:])]


def write_pharaoh(path: str | Path, alignments: Iterable[Iterable[Link]]) -> int:
    """Write one Pharaoh line per pair (all links sure) to ``path`` atomically; returns the
    number of links written."""
    lines, total = [], 0
    for links in alignments:
        kept = set(links)
        total += len(kept)
        lines.append(format_links(kept) + "\n")
    write_text(path, "".join(lines))
    return total


@dataclass(frozen=True)
class LinksRecord:
    """What a links file aligns (written beside it as ``<file>.json``, see
    :func:`record_path`): ``files`` maps each prepared file's name (``train.de``) to its
    sha256, source first."""

    split: str
    src_lang: str
    tgt_lang: str
    pairs: int
    links: int
    files: dict[str, str]
    aligner: str

    @classmethod
    def read(cls, path: Path) -> LinksRecord:
        """The record at ``path``; DataError naming it when it is not one."""
        try:
            raw: Any = json.loads(path.read_text(encoding="utf-8"))
            return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls)})
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise DataError(
                f"{path}: not a links record ({type(err).__name__}: {err}); remove it, or "
                "write the links again with scripts/silver_alignments.py"
            ) from None


def record_mismatch(record: LinksRecord, corpus: PreparedCorpus, split: str) -> str | None:
    """Why ``record`` does not describe ``corpus``'s ``split`` (another split, other
    languages, a file of other sentences), None when it does in either direction."""
    if record.split != split:
        return f"links of the {record.split} split, not {split}"
    if {record.src_lang, record.tgt_lang} != {corpus.src_lang, corpus.tgt_lang}:
        return (
            f"links of {record.src_lang}-{record.tgt_lang}, but the corpus is "
            f"{corpus.src_lang}-{corpus.tgt_lang}"
        )
    mine = split_hashes(corpus, split)
    for name, digest in record.files.items():
        if mine.get(name) != digest:
            here = mine.get(name, "(no such file)")
            return (
                f"made for another corpus: its {name} had sha256 {digest[:12]}…, "
                f"{corpus.directory / name} has {here[:12]}…"
            )
    if record.files.keys() != mine.keys():
        return f"does not describe {corpus.directory}'s {split} split"
    return None


def silver_path(corpus: PreparedCorpus, split: str, flipped: bool = False) -> Path:
    """``<corpus>/<split>.<src>-<tgt>.silver.align`` beside the prepared files (``flipped``:
    ``<tgt>-<src>``): where scripts/silver_alignments.py writes by default and training
    looks for cached links."""
    a, b = (corpus.tgt_lang, corpus.src_lang) if flipped else (corpus.src_lang, corpus.tgt_lang)
    return corpus.directory / f"{split}.{a}-{b}.silver.align"


def record_path(links: Path) -> Path:
    """``<links>.json`` beside a links file (a compressed ``X.align.xz`` has ``X.align.json``)."""
    return links.with_name(links.name.removesuffix(".xz") + ".json")


def split_hashes(corpus: PreparedCorpus, split: str) -> dict[str, str]:
    """{file name: sha256} of ``split``'s two prepared files, source first (as prepared;
    hashed now for a cache older than that record)."""
    hashes = {}
    for path in corpus.files(split):
        info = corpus.file_info.get(path.name) or file_info(path)
        hashes[path.name] = str(info["sha256"])
    return hashes


def aligner_name() -> str:
    """``eflomal <version>`` and the symmetrisation, as records name the aligner."""
    try:
        version = importlib.metadata.version("eflomal")
    except importlib.metadata.PackageNotFoundError:
        version = "(version unknown)"
    return f"eflomal {version}, both directions, grow-diag-final-and"


def write_silver(corpus: PreparedCorpus, split: str, out: Path) -> LinksRecord:
    """Align ``split`` with eflomal (:func:`silver_links`), write its Pharaoh file to
    ``out`` and the record beside it (:func:`record_path`); returns the record."""
    links = silver_links(corpus, split)
    total = write_pharaoh(out, links)
    record = LinksRecord(
        split,
        corpus.src_lang,
        corpus.tgt_lang,
        len(links),
        total,
        split_hashes(corpus, split),
        aligner_name(),
    )
    write_json(record_path(out), dataclasses.asdict(record))
    return record
