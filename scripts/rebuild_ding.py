"""Rebuild the shipped Ding pairs (src/attnmt/data/shipped/ding_de_en.tsv.xz) from Debian.

    python scripts/rebuild_ding.py            # apt-get download trans-de-en, clean, write the file
    python scripts/rebuild_ding.py --check    # compare with the shipped file; exit 1 if not equal
    python scripts/rebuild_ding.py --raw DIR --package trans-de-en --out FILE
    python scripts/rebuild_ding.py --filter loose   # the larger corpus, to LOOSE_OUT below

``--filter loose`` keeps phrases too (>= 3 words a side; no capital or final . ? ! needed)
and the shipped file's valid/test splits exactly (``ding.keep_held_out``); train on it with
``python train.py data.path=FILE``. The shipped file is the ``strict`` filter's.

Needs apt-get, dpkg-deb and a reachable apt mirror (the downloaded .deb and its unpacked
tree are kept in --raw and reused). ``make train`` never runs this: it reads the shipped
file. A shipped file with a new sha256 must be pinned in
``attnmt.data.recipes.ding.SHIPPED_SHA256`` and tests/test_ding_shipped.py (the script prints
the digest).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

from attnmt.atomic import write_bytes
from attnmt.data.config import DataConfig
from attnmt.data.corpora import prepare_corpus
from attnmt.data.pairfile import sha256_bytes
from attnmt.data.recipes import ding
from attnmt.errors import AttnmtError
from attnmt.output_guard import OutputKind, check_output

log = logging.getLogger("rebuild_ding")
LOOSE_OUT = Path("data/ding_loose/ding_de_en.tsv.xz")  # --filter loose: not the shipped file
PAIR_FILE = OutputKind(
    "a Ding pair file",
    "--out",
    "ding_de_en.tsv.xz",
    own=lambda path: path.name.endswith((".tsv.xz", ".tsv")),
)
"""What --out may name (attnmt.output_guard): no run's or prepared corpus' file, no other
existing file than a pair file (``.tsv``/``.tsv.xz``: the shipped one is rebuilt in place)."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default=DataConfig().apt_package, help="Debian package")
    parser.add_argument("--raw", type=Path, default=Path("data/raw"), help="download dir")
    parser.add_argument(
        "--out", type=Path, help=f"file to write (default {ding.SHIPPED}; loose: {LOOSE_OUT})"
    )
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    parser.add_argument(
        "--filter", choices=ding.FILTERS, default="strict", help="strict: the shipped file's"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = ding.SHIPPED if args.filter == "strict" else LOOSE_OUT
    return args


def same_held_out_splits(path: Path) -> bool:
    """Prepare the shipped corpus and ``data.path=path`` (default settings, in a temporary
    data root) and print, per split, both pair counts and whether the prepared valid/test
    files are byte-identical; True when they all are."""
    with tempfile.TemporaryDirectory() as root:
        old = prepare_corpus({"root": root})
        new = prepare_corpus({"root": root, "path": str(path.resolve())})
        same = True
        for split in old.splits:
            files = list(zip(old.files(split), new.files(split)))
            print(f"{split}: {old.counts[split]} pairs shipped, {new.counts[split]} in {path}")
            if split != "train":
                equal = all(a.read_bytes() == b.read_bytes() for a, b in files)
                print(f"  {split}.de, {split}.en: {'identical' if equal else 'DIFFERENT'}")
                same = same and equal
    return same


def main(argv: list[str] | None = None) -> int:
    """Rebuild (and write or compare); returns the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if not args.check:
            check_output(args.out, PAIR_FILE)  # before the download
        data = ding.rebuild(args.package, args.raw, log, args.filter)
        digest = sha256_bytes(data)
        print(f"rebuilt: {len(data)} bytes, sha256 {digest}")
        if args.check:
            same = args.out.is_file() and args.out.read_bytes() == data
            print(f"{args.out}: {'identical' if same else 'DIFFERS from the rebuild'}")
            return 0 if same else 1
        write_bytes(args.out, data)
        args.out.chmod(0o644)  # a package data file, readable by all like the rest of the tree
        print(f"wrote {args.out}")
        if args.filter != "strict":
            if not same_held_out_splits(args.out):
                print("error: valid/test differ from the shipped corpus'", file=sys.stderr)
                return 1
            print(f"train on it: python train.py data.path={args.out}")
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.filter == "strict" and digest != ding.SHIPPED_SHA256:
        print(f"new sha256: pin {digest} in ding.SHIPPED_SHA256 and tests/test_ding_shipped.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
