"""What subword sampling costs per epoch: one epoch's sampled segmentation of a prepared
corpus' train split (both sides, ``attnmt.data.resample.sample_file``, one thread) against
encoding it once with the best segmentation (what the ids cache does once per tokenizer).

    python -m benchmarks.sampling_cost --corpus data/ding_de_en-<hash> [--langs de en]

``--corpus``: a prepared corpus folder (``train.<src>``, ``train.<tgt>`` and a ``spm-*``
tokenizer folder, as ``make data`` leaves under ``data/``; the first ``spm-*`` by name).
Prints seconds per epoch and microseconds per sentence for unigram sampling over every
segmentation (``nbest=-1``) and over the 64 best, the best of ``--repeats`` epochs each,
and the peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from attnmt.data.resample import SamplingSettings, sample_file
from attnmt.data.tokenizer import Tokenizer

SETTINGS = {
    "unigram alpha=0.1 nbest=-1": SamplingSettings("unigram", 0.1, -1),
    "unigram alpha=0.1 nbest=64": SamplingSettings("unigram", 0.1, 64),
}


def train_files(corpus: Path, langs: list[str]) -> tuple[Path, Path]:
    """(train.<src>, train.<tgt>) of a prepared corpus folder."""
    src, tgt = (corpus / f"train.{lang}" for lang in langs)
    for path in (src, tgt):
        if not path.is_file():
            raise SystemExit(f"{path}: not found; pass --langs SRC TGT")
    return src, tgt


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--langs", nargs=2, default=["de", "en"], metavar=("SRC", "TGT"))
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tok = Tokenizer.load(sorted(args.corpus.glob("spm-*"))[0])
    paths = dict(zip(("src", "tgt"), train_files(args.corpus, args.langs)))
    n = sum(1 for _ in paths["src"].open("rb"))
    print(f"{args.corpus}: {n} pairs, vocabulary {tok.src_vocab_size}")
    for name, settings in SETTINGS.items():
        best = min(
            _timed(
                lambda e=e, st=settings: [
                    sample_file(p, tok, s, st, 1, e) for s, p in paths.items()
                ]
            )
            for e in range(args.repeats)
        )
        print(f"  {name}: {best:.2f} s per epoch, {1e6 * best / (2 * n):.1f} us per sentence")
    texts = {s: p.read_text(encoding="utf-8").splitlines() for s, p in paths.items()}
    best = min(
        _timed(
            lambda: (
                tok.encode_src(texts["src"], num_threads=1),
                tok.encode_tgt(texts["tgt"], num_threads=1),
            )
        )
        for _ in range(args.repeats)
    )
    print(
        f"  best segmentation, 1 thread: {best:.2f} s, {1e6 * best / (2 * n):.1f} us per sentence"
    )
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def _timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
