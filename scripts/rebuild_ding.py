"""Rebuild the shipped Ding pairs (src/attnmt/data/shipped/ding_de_en.tsv.xz) from Debian.

    python scripts/rebuild_ding.py            # apt-get download trans-de-en, clean, write the file
    python scripts/rebuild_ding.py --check    # compare with the shipped file; exit 1 if not equal
    python scripts/rebuild_ding.py --raw DIR --package trans-de-en --out FILE

Needs apt-get, dpkg-deb and a reachable apt mirror (the downloaded .deb and its unpacked
tree are kept in --raw and reused). ``make train`` never runs this: it reads the shipped
file. A file with a new sha256 must be pinned in ``attnmt.data.recipes.ding.SHIPPED_SHA256``
and tests/test_ding_shipped.py (the script prints the digest).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from attnmt.atomic import write_bytes
from attnmt.data.config import DataConfig
from attnmt.data.pairfile import sha256_bytes
from attnmt.data.recipes import ding
from attnmt.errors import AttnmtError

log = logging.getLogger("rebuild_ding")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", default=DataConfig().apt_package, help="Debian package")
    parser.add_argument("--raw", type=Path, default=Path("data/raw"), help="download dir")
    parser.add_argument("--out", type=Path, default=ding.SHIPPED, help="file to write")
    parser.add_argument("--check", action="store_true", help="compare with --out, write nothing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Rebuild (and write or compare); returns the exit status."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        data = ding.rebuild(args.package, args.raw, log)
        digest = sha256_bytes(data)
        print(f"rebuilt: {len(data)} bytes, sha256 {digest}")
        if args.check:
            same = args.out.is_file() and args.out.read_bytes() == data
            print(f"{args.out}: {'identical' if same else 'DIFFERS from the rebuild'}")
            return 0 if same else 1
        write_bytes(args.out, data)
        args.out.chmod(0o644)  # a package data file, readable by all like the rest of the tree
    except AttnmtError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out}")
    if digest != ding.SHIPPED_SHA256:
        print(f"new sha256: pin {digest} in ding.SHIPPED_SHA256 and tests/test_ding_shipped.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
