"""Write an N-pair data=custom corpus by recombining a prepared corpus' sentences.

    python -m benchmarks.make_big_corpus --pairs 300000 --out outputs/bench/corpora/300k
    python train.py data=custom data.path=outputs/bench/corpora/300k \
        data.src_lang=de data.tgt_lang=en

Each generated train pair joins 1-3 random train pairs of the source corpus (default: the
prepared ding_de_en under data/, ``make data``): their sources with a space, and the
same pairs' targets in the same order, so the result stays parallel and its sentences
realistic. valid and test are the source corpus' own splits, unchanged, so a run's
validation costs the same at every N. Seeded: the same arguments write the same bytes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from attnmt.atomic import atomic_path, write_text

ROOT = Path(__file__).resolve().parents[1]
LANGS = ("de", "en")
CHUNK = 100_000  # generated pairs per write


def find_source(data_root: Path, name: str = "ding_de_en") -> Path:
    """The prepared ``<name>-<hash>/`` directory under ``data_root`` holding train files."""
    found = sorted(p for p in data_root.glob(f"{name}-*") if (p / f"train.{LANGS[0]}").is_file())
    if not found:
        raise SystemExit(f"no prepared {name} under {data_root}/; run `make data` first")
    return found[-1]


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write_train(src: list[str], tgt: list[str], n: int, out: Path, seed: int) -> None:
    """``n`` pairs of 1-3 joined source pairs each, into ``out/train.{de,en}``."""
    rng = np.random.default_rng(seed)
    with (  # both files replaced only once both are complete
        atomic_path(out / f"train.{LANGS[0]}") as src_tmp,
        atomic_path(out / f"train.{LANGS[1]}") as tgt_tmp,
        src_tmp.open("w", encoding="utf-8") as fs,
        tgt_tmp.open("w", encoding="utf-8") as ft,
    ):
        for start in range(0, n, CHUNK):
            m = min(CHUNK, n - start)
            k = rng.integers(1, 4, m)  # [m] pairs joined per generated pair
            picks = rng.integers(0, len(src), int(k.sum()))  # [sum k] source pair ids
            ends = np.cumsum(k)
            rows = [picks[e - j : e].tolist() for e, j in zip(ends.tolist(), k.tolist())]
            fs.write("".join(" ".join(src[i] for i in r) + "\n" for r in rows))
            ft.write("".join(" ".join(tgt[i] for i in r) + "\n" for r in rows))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, required=True, help="train pairs to write")
    ap.add_argument("--out", type=Path, required=True, help="directory for the corpus")
    ap.add_argument("--source", type=Path, default=None, help="prepared corpus directory")
    ap.add_argument("--data-root", type=Path, default=ROOT / "data")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be positive")
    source = args.source or find_source(args.data_root)
    args.out.mkdir(parents=True, exist_ok=True)
    src, tgt = (read(source / f"train.{lang}") for lang in LANGS)
    if len(src) != len(tgt) or not src:
        raise SystemExit(f"{source}: train files are empty or not aligned")
    write_train(src, tgt, args.pairs, args.out, args.seed)
    for split in ("valid", "test"):
        for lang in LANGS:
            text = (source / f"{split}.{lang}").read_text(encoding="utf-8")
            write_text(args.out / f"{split}.{lang}", text)
    print(f"{args.out}: {args.pairs} train pairs from {source}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
