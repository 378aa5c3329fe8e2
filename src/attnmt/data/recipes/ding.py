"""ding_de_en: sentence pairs from the Ding German-English dictionary (Debian trans-de-en).

The cleaned pairs ship in the package (``attnmt/data/shipped/ding_de_en.tsv.xz``, GPL-2+,
see the README.md beside it): :func:`build` reads them, checks their sha256 and
hash-splits them, with no download. :func:`rebuild` makes that file again from the Debian
package (``apt-get download`` + ``dpkg-deb``; ``python scripts/rebuild_ding.py``).

Dictionary format (``usr/share/trans/de-en``): ``# comment`` lines, and entries
``de :: en`` whose sub-entries are separated by ``|``; the k-th German sub-entry
translates the k-th English one. Within a sub-entry ``;`` separates alternatives.

Cleaning, in order (each step's removals are counted):
1. skip entries whose sides have different numbers of ``|`` sub-entries;
2. strip annotations ``{m}``, ``[coll.]``, ``<Aalmolch>`` and collapse spaces;
3. keep the first ``;`` alternative of each side (one sentence per side);
4. keep pairs whose sides both have >= 3 words, start with a capital letter and end
   in ``.``, ``?`` or ``!``, and contain none of ``sb.``, ``sth.``, ``jdn.``, ``etw.``,
   ``/``, ``...``, ``…``;
5. remove duplicate pairs.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from attnmt.data import download, pairfile
from attnmt.data.config import DataConfig
from attnmt.data.recipes.common import Built, Pair, dedupe, split_by_hash
from attnmt.data.textio import normalize_space, read_lines

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
_ANNOTATION = re.compile(r"\{[^}]*\}|\[[^\]]*\]|<[^>]*>")


def clean_side(text: str) -> str:
    """Strip ``{..}``/``[..]``/``<..>`` annotations, keep the first ``;`` alternative."""
    text = normalize_space(_ANNOTATION.sub(" ", text))
    return text.split(";")[0].strip()


def _rejection(text: str) -> str | None:
    """Why one side fails the sentence filter, or None when it passes."""
    if len(text.split()) < MIN_WORDS:
        return f"fewer than {MIN_WORDS} words"
    if not text[0].isupper():
        return "not starting with a capital letter"
    if not text.endswith(ENDINGS):
        return "not ending in . ? or !"
    if any(b in text for b in BANNED):
        return "containing sb./sth./jdn./etw./ '/' or '...'"
    return None


def parse_ding(lines: Iterable[str], removed: Counter[str]) -> list[Pair]:
    """Sentence pairs (de, en) from Ding dictionary lines; counts removals in ``removed``."""
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
            reason = _rejection(d) or _rejection(e)
            if reason:
                removed[f"sub-entries {reason}"] += 1
            else:
                pairs.append((d, e))
    return dedupe(pairs, removed)


def fingerprint(cfg: DataConfig) -> dict[str, str]:
    """Cache-key material: the shipped file's pinned sha256 (a rebuilt file re-prepares)."""
    return {"shipped_sha256": SHIPPED_SHA256}


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """The shipped pairs (sha256-checked), hash-split by the English side."""
    shipped = pairfile.load(SHIPPED, SHIPPED_SHA256, RESTORE)
    return Built(split_by_hash(shipped.pairs, LANGS.index("en"), cfg.split), shipped.removed)


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


def rebuild(package: str, raw: Path, log: logging.Logger) -> bytes:
    """The shipped file's bytes, made again from the Debian package ``package``."""
    dict_file, version = fetch_package(package, raw, log)
    lines = read_lines(dict_file)
    removed: Counter[str] = Counter()
    pairs = parse_ding(lines, removed)
    comments = [
        "Ding German-English example sentence pairs (de<TAB>en), cleaned by attnmt's "
        "ding_de_en recipe",
        f"from the Debian package {package} {version} (Ding {_ding_version(lines)}), "
        "https://dict.tu-chemnitz.de/",
        "Copyright (c) Frank Richter, TU Chemnitz; licence GPL-2+ (README.md, GPL-2.txt)",
        "rebuild: python scripts/rebuild_ding.py",
    ]
    log.info("%s %s: %d pairs", package, version, len(pairs))
    return pairfile.dumps(pairs, removed, comments)
