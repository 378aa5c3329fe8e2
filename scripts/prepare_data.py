"""Prepare a corpus (download, clean, split, cache) and print its pairs per split.

    python scripts/prepare_data.py                          # data=ding_de_en (the default)
    python scripts/prepare_data.py data=bible_en_fr data.src_lang=fr data.tgt_lang=en
    python scripts/prepare_data.py data=custom data.path=DIR data.src_lang=xx data.tgt_lang=yy

Arguments are Hydra overrides of the ``data`` group of configs/train.yaml.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from attnmt.cli.data_group import data_config
from attnmt.data.corpora import prepare_corpus
from attnmt.errors import AttnmtError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def main(argv: list[str] | None = None) -> int:
    """Prepare the corpus; print ``split pairs`` lines. Returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        corpus = prepare_corpus(data_config(argv, CONFIGS))
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{corpus.name} {corpus.src_lang}->{corpus.tgt_lang} in {corpus.directory}")
    for split in corpus.splits:
        print(f"  {split:<6} {corpus.counts[split]:>8} pairs")
    print(f"  {'total':<6} {sum(corpus.counts.values()):>8} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
