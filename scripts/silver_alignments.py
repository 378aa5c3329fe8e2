"""Write silver word alignments of a corpus split (eflomal, grow-diag-final-and).

    pip install -e ".[silver]"                                   # eflomal, once
    python scripts/silver_alignments.py data=ding_de_en  # -> <cache>/test.de-en.silver.align
    python scripts/silver_alignments.py data=ding_de_en --out FILE
    python evaluate.py ckpt=RUN split=test gold_alignments=FILE  # AER against them
    python scripts/silver_alignments.py data=custom data.path=DIR --split train
        # -> <cache>/train.<src>-<tgt>.silver.align: what guided alignment trains towards
        #    (trainer.guided_alignment.links=null finds it there)

Arguments other than ``--out`` and ``--split`` are Hydra overrides of the ``data`` group, as
for scripts/prepare_data.py. Each file gets its record beside it (``FILE.json``: split,
languages, counts, aligner and the sha256 of the files it aligns). The links are an
aligner's, not a person's: report AER against them as silver (see attnmt.data.silver).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import attnmt.data.silver as silver
from attnmt.cli.data_group import data_config
from attnmt.data.corpora import PreparedCorpus, prepare_corpus
from attnmt.data.recipes.common import SPLITS
from attnmt.data.silver import write_silver
from attnmt.errors import AttnmtError
from attnmt.output_guard import OutputKind, check_output

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
SILVER = OutputKind(
    "silver alignments",
    "--out",
    "test.silver.align",
    own=lambda path: path.name.endswith(".silver.align"),
)
"""What --out may name (attnmt.output_guard): no file of a run or of a prepared corpus (its
gold), no other existing file than a previous ``*.silver.align``."""


def is_record(path: Path) -> bool:
    """Whether ``path`` is a links record (:class:`attnmt.data.silver.LinksRecord`)."""
    try:
        silver.LinksRecord.read(path)
    except AttnmtError:
        return False
    return True


RECORD = OutputKind("a links record", "--out", "test.silver.align", own=is_record)
"""The record written beside --out (``<out>.json``): no file of a run or a prepared corpus,
no existing file but a previous record."""


def default_out(corpus: PreparedCorpus, split: str = "test") -> Path:
    """``<cache>/<split>.<src>-<tgt>.silver.align``, beside the corpus' prepared files."""
    return silver.silver_path(corpus, split)


def main(argv: list[str] | None = None) -> int:
    """Align, write, print the file and its number of links. Returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="the Pharaoh file to write")
    parser.add_argument(
        "--split", choices=SPLITS, default="test", help="the split to align (default: test)"
    )
    parser.add_argument("overrides", nargs="*", help="data=NAME, data.KEY=VALUE")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.out is not None:
            check_output(args.out, SILVER)  # before minutes of preparing and aligning
            check_output(silver.record_path(args.out), RECORD)
        silver.require_eflomal()  # likewise
        corpus = prepare_corpus(data_config(args.overrides, CONFIGS))
        out = args.out or default_out(corpus, args.split)
        record = write_silver(corpus, args.split, out)
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"wrote {out}: {record.links} links over {record.pairs} {args.split} pairs "
        "(silver: eflomal, gdfa)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
