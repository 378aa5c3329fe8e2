"""ding_de_en: sentence pairs from the Ding German-English dictionary (Debian trans-de-en).

File format (``usr/share/trans/de-en``): ``# comment`` lines, and entries
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

from attnmt.data import download
from attnmt.data.config import DataConfig
from attnmt.data.recipes.common import Built, Pair, dedupe, split_by_hash
from attnmt.data.textio import normalize_space, read_lines

LANGS = ("de", "en")
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


def dictionary_file(cfg: DataConfig, raw: Path, log: logging.Logger) -> Path:
    """The unpacked dictionary: reuse ``raw/<package>/``, else apt-get download + dpkg-deb."""
    unpacked = raw / cfg.apt_package
    if not (unpacked / DICT_PATH).is_file():
        deb = download.apt_download(cfg.apt_package, raw, log)
        download.deb_extract(deb, unpacked)
    return unpacked / DICT_PATH


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """Fetch, parse, filter and hash-split (by the English side) the Ding dictionary."""
    removed: Counter[str] = Counter()
    pairs = parse_ding(read_lines(dictionary_file(cfg, raw, log)), removed)
    return Built(split_by_hash(pairs, LANGS.index("en"), cfg.split), removed)
