"""ding_de_en: sentence pairs from the Ding German-English dictionary (Debian trans-de-en).

The cleaned pairs ship in the package (``attnmt/data/shipped/ding_de_en.tsv.xz``, GPL-2+,
see the README.md beside it): :func:`build` reads them, checks their sha256 and
hash-splits them, with no download. :func:`rebuild` makes that file again from the Debian
package (``apt-get download`` + ``dpkg-deb``; ``python scripts/rebuild_ding.py``).
``data.path=FILE`` makes :func:`build` read another pair file instead (not sha256-pinned),
e.g. the larger corpus of the loose filter (``rebuild_ding.py --filter loose --out FILE``).

Dictionary format (``usr/share/trans/de-en``): ``# comment`` lines, and entries
``de :: en`` whose sub-entries are separated by ``|``; the k-th German sub-entry
translates the k-th English one. Within a sub-entry ``;`` separates alternatives.

Cleaning, in order (each step's removals are counted):
1. skip entries whose sides have different numbers of ``|`` sub-entries;
2. strip annotations ``{m}``, ``[coll.]``, ``<Aalmolch>`` and collapse spaces;
3. keep the first ``;`` alternative of each side (one sentence per side);
4. keep pairs whose sides both have >= 3 words, start with a capital letter and end
   in ``.``, ``?`` or ``!``, and contain none of ``sb.``, ``sth.``, ``jdn.``, ``etw.``,
   ``/``, ``...``, ``…`` (the ``strict`` filter, the shipped file's; the ``loose`` filter
   drops the capital and the final-punctuation rules, so phrases are kept too);
5. remove duplicate pairs.

The loose corpus keeps the shipped corpus' valid and test splits exactly
(:func:`keep_held_out`): the shipped valid/test pairs, plus only those other pairs that
the hash split sends to train and that share no side with a valid/test pair.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from attnmt.data import download, pairfile
from attnmt.data.config import DataConfig, SplitConfig
from attnmt.data.recipes.common import Built, Pair, dedupe, hash_fraction, split_by_hash
from attnmt.data.textio import normalize_space, read_lines
from attnmt.errors import DataError

LANGS = ("de", "en")
SHIPPED = Path(__file__).resolve().parent.parent / "shipped" / "ding_de_en.tsv.xz"
# pinned also in tests/test_ding_shipped.py; scripts/rebuild_ding.py prints a new file's digest
SHIPPED_SHA256 = "8bbff425838e59556333d539aaf7ba60c6e73bd6d7b40be4931230f66e8fc5d1"
RESTORE = (
    "restore it (git checkout -- that file, or reinstall attnmt) or rebuild it with "
    "python scripts/rebuild_ding.py"
)
DICT_PATH = Path("usr/share/trans/de-en")
BANNED = ("sb.", "sth.", "jdn.", "etw.", "/", "...", "…")
ENDINGS = (".", "?", "!")
MIN_WORDS = 3
FILTERS = ("strict", "loose")  # strict: sentences (the shipped file); loose: phrases too
EN = LANGS.index("en")  # the side the hash split is keyed on
HELD_OUT = "pairs the hash split would put in valid/test that the shipped file's do not hold"
OVERLAP = "pairs sharing a side with a valid/test pair (case and final . ? ! ignored)"
_ANNOTATION = re.compile(r"\{[^}]*\}|\[[^\]]*\]|<[^>]*>")


def clean_side(text: str) -> str:
    """Strip ``{..}``/``[..]``/``<..>`` annotations, keep the first ``;`` alternative."""
    text = normalize_space(_ANNOTATION.sub(" ", text))
    return text.split(";")[0].strip()


def _rejection(text: str, loose: bool = False) -> str | None:
    """Why one side fails the strict (or ``loose``) filter, or None when it passes."""
    if len(text.split()) < MIN_WORDS:
        return f"fewer than {MIN_WORDS} words"
    if not loose and not text[0].isupper():
        return "not starting with a capital letter"
    if not loose and not text.endswith(ENDINGS):
        return "not ending in . ? or !"
    if any(b in text for b in BANNED):
        return "containing sb./sth./jdn./etw./ '/' or '...'"
    return None


def parse_ding(
    lines: Iterable[str], removed: Counter[str], sentence_filter: str = "strict"
) -> list[Pair]:
    """Pairs (de, en) from Ding dictionary lines by ``sentence_filter`` (one of
    :data:`FILTERS`); counts removals in ``removed``."""
    if sentence_filter not in FILTERS:
        raise ValueError(f"sentence_filter={sentence_filter!r}: use one of {FILTERS}")
    loose = sentence_filter == "loose"
    pairs: list[Pair] = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "::" not in line:
            removed["lines without ' :: '"] += 1
            continue
        de, en = line.split("::", 1)
        de_parts, en_parts = de.split("|"), en.split("|")
        if len(de_parts) != len(en_parts):
            removed["entries with unequal | sub-entry counts"] += 1
            continue
        for d, e in zip(de_parts, en_parts):
            d, e = clean_side(d), clean_side(e)
            reason = _rejection(d, loose) or _rejection(e, loose)
            if reason:
                removed[f"sub-entries {reason}"] += 1
            else:
                pairs.append((d, e))
    return dedupe(pairs, removed)


def _overlap_key(text: str) -> str:
    """A side as :func:`keep_held_out` compares it: casefolded, final ``. ? !`` and spaces
    dropped (the loose filter keeps phrases that differ from a sentence only so)."""
    return text.casefold().rstrip(" .?!")


def keep_held_out(
    pairs: Iterable[Pair],
    reference: Iterable[Pair],
    fractions: SplitConfig,
    removed: Counter[str],
) -> list[Pair]:
    """``pairs`` cut so that their hash split (``fractions``) has exactly the valid and test
    pairs of ``reference``'s, in the same order, and a train split sharing no side with them.

    Kept, in ``pairs``' order: the pairs of ``reference``'s valid/test, and the others whose
    English side hashes into train and neither of whose sides equals a valid/test side
    (:func:`_overlap_key`); ``removed`` counts the rest. DataError when a valid/test pair of
    ``reference`` is not in ``pairs`` (another dictionary version).
    """
    ref = split_by_hash(reference, EN, fractions)
    held = set(ref["valid"] + ref["test"])
    keys = [{_overlap_key(pair[side]) for pair in held} for side in range(2)]
    kept: list[Pair] = []
    for pair in pairs:
        if pair in held:
            kept.append(pair)
        elif hash_fraction(pair[EN]) < fractions.valid + fractions.test:
            removed[HELD_OUT] += 1
        elif any(_overlap_key(pair[side]) in keys[side] for side in range(2)):
            removed[OVERLAP] += 1
        else:
            kept.append(pair)
    missing = held - set(kept)
    if missing:
        raise DataError(
            f"{len(missing)} valid/test pairs of the shipped file are not among the loosely "
            f"filtered pairs (e.g. {sorted(missing)[0]!r}): is the dictionary another version "
            "than the shipped file's?"
        )
    got = split_by_hash(kept, EN, fractions)
    if got["valid"] != ref["valid"] or got["test"] != ref["test"]:  # pairs repeated in order
        raise DataError("the kept pairs' valid/test splits differ from the shipped file's")
    return kept


def source(cfg: DataConfig) -> tuple[Path, str | None, str]:
    """(pair file, its pinned sha256 or None, advice when unreadable): the shipped file, or
    ``data.path`` when set."""
    if not cfg.path:
        return SHIPPED, SHIPPED_SHA256, RESTORE
    path = Path(cfg.path).expanduser()
    advice = (
        f"data.path names a Ding pair file; build it with python scripts/rebuild_ding.py "
        f"--filter loose --out {path} (needs apt), or unset data.path for the shipped corpus"
    )
    return path, None, advice


def fingerprint(cfg: DataConfig) -> dict[str, str]:
    """Cache-key material: the shipped file's pinned sha256 (a rebuilt file re-prepares), or
    the sha256 of the ``data.path`` file."""
    path, pinned, advice = source(cfg)
    if pinned is not None:
        return {"shipped_sha256": pinned}
    if not path.is_file():
        raise DataError(f"{path}: file not found; {advice}")
    return {"path_sha256": download.sha256_file(path)}


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """The shipped pairs (sha256-checked), or those of ``data.path``, hash-split by the
    English side."""
    shipped = pairfile.load(*source(cfg))
    return Built(split_by_hash(shipped.pairs, EN, cfg.split), shipped.removed)


def fetch_package(package: str, raw: Path, log: logging.Logger) -> tuple[Path, str]:
    """(the dictionary file, the package version): ``apt-get download`` + ``dpkg-deb -x``
    into ``raw`` (both reused when there)."""
    deb = download.apt_download(package, raw, log)
    unpacked = download.deb_extract(deb, raw / deb.name.removesuffix(".deb"))
    return unpacked / DICT_PATH, deb.name.split("_")[1]


def _ding_version(lines: list[str]) -> str:
    """The dictionary's own ``# Version :: ...`` header value, or ``unknown``."""
    for line in lines[:20]:
        if line.startswith("# Version ::"):
            return line.split("::", 1)[1].strip()
    return "unknown"


def rebuild(package: str, raw: Path, log: logging.Logger, sentence_filter: str = "strict") -> bytes:
    """The shipped file's bytes, made again from the Debian package ``package``; with
    ``sentence_filter="loose"`` the larger corpus that keeps the shipped valid/test splits
    (:func:`keep_held_out`, at the default split fractions)."""
    dict_file, version = fetch_package(package, raw, log)
    lines = read_lines(dict_file)
    removed: Counter[str] = Counter()
    pairs = parse_ding(lines, removed, sentence_filter)
    comments = [
        "Ding German-English example sentence pairs (de<TAB>en), cleaned by attnmt's "
        "ding_de_en recipe",
        f"from the Debian package {package} {version} (Ding {_ding_version(lines)}), "
        "https://dict.tu-chemnitz.de/",
        "Copyright (c) Frank Richter, TU Chemnitz; licence GPL-2+ (README.md, GPL-2.txt)",
        "rebuild: python scripts/rebuild_ding.py",
    ]
    if sentence_filter == "loose":
        reference = pairfile.load(SHIPPED, SHIPPED_SHA256, RESTORE).pairs
        pairs = keep_held_out(pairs, reference, SplitConfig(), removed)
        comments[0] = comments[0].replace("example sentence pairs", "example pairs")
        comments[-1] = "rebuild: python scripts/rebuild_ding.py --filter loose --out FILE"
        comments.append(
            "loose filter (phrases too); valid/test: the shipped file's (data.split 0.05/0.05)"
        )
    log.info("%s %s: %d pairs", package, version, len(pairs))
    return pairfile.dumps(pairs, removed, comments)
