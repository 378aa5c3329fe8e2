"""Write silver word alignments of a corpus' test split (eflomal, grow-diag-final-and).

    pip install -e ".[silver]"                                   # eflomal, once
    python scripts/silver_alignments.py data=ding_de_en  # -> <cache>/test.de-en.silver.align
    python scripts/silver_alignments.py data=ding_de_en --out FILE
    python evaluate.py ckpt=RUN split=test gold_alignments=FILE  # AER against them

Arguments other than ``--out`` are Hydra overrides of the ``data`` group, as for
scripts/prepare_data.py. The links are an aligner's, not a person's: report AER against
them as silver (see attnmt.data.silver).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from attnmt.cli.data_group import data_config
from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.data.silver import silver_links, write_pharaoh
from attnmt.errors import AttnmtError

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def default_out(corpus: PreparedCorpus, split: str = "test") -> Path:
    """``<cache>/<split>.<src>-<tgt>.silver.align``, beside the corpus' prepared files."""
    return corpus.directory / f"{split}.{corpus.src_lang}-{corpus.tgt_lang}.silver.align"


def main(argv: list[str] | None = None) -> int:
    """Align, write, print the file and its number of links. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the Pharaoh file to write")
    parser.add_argument("overrides", nargs="*", help="data=NAME, data.KEY=VALUE")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        corpus = prepare_corpus(data_config(args.overrides, CONFIGS))
        out = args.out or default_out(corpus)
        links = silver_links(corpus, "test")
        total = write_pharaoh(out, links)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {out}: {total} links over {len(links)} test pairs (silver: eflomal, gdfa)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
