"""What subword sampling costs per epoch: every train pair of a prepared corpus resampled
from its best segmentation (``attnmt.data.resample.sample_array``, both sides, one
thread), against encoding the text once with the best segmentation (what the ids cache
does once per tokenizer).

    python -m benchmarks.sampling_cost --corpus data/ding_de_en-<hash> [--langs de en]

``--corpus``: a prepared corpus folder (``train.<src>``, ``train.<tgt>`` and a ``spm-*``
tokenizer folder, as ``make data`` leaves under ``data/``; the first ``spm-*`` by name).
``--pairs N`` keeps the first N pairs. Prints, for each sampling setting, seconds per epoch,
microseconds per sentence and the sampled/best piece ratio (mean and the 95% quantile that
bounds batches of large corpora), the best of ``--repeats`` epochs; then the best
segmentation's time and the peak RSS.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from attnmt.data.indexed import TokenArray, token_dtype
from attnmt.data.resample import BOUND_QUANTILE, SamplingSettings, sample_array
from attnmt.data.tokenizer import Tokenizer

SETTINGS = {
    "unigram alpha=0.1 nbest=-1": SamplingSettings("unigram", 0.1, -1),
    "unigram alpha=0.1 nbest=64": SamplingSettings("unigram", 0.1, 64),
    "unigram alpha=0.5 nbest=-1": SamplingSettings("unigram", 0.5, -1),
}


def train_files(corpus: Path, langs: list[str]) -> tuple[Path, Path]:
    """(train.<src>, train.<tgt>) of a prepared corpus folder."""
    src, tgt = (corpus / f"train.{lang}" for lang in langs)
    for path in (src, tgt):
        if not path.is_file():
            raise SystemExit(f"{path}: not found; pass --langs SRC TGT")
    return src, tgt


def read_lines(path: Path, pairs: int) -> list[str]:
    with path.open(encoding="utf-8") as f:
        lines = f if pairs <= 0 else itertools.islice(f, pairs)
        return [line.rstrip("\n") for line in lines]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--langs", nargs=2, default=["de", "en"], metavar=("SRC", "TGT"))
    parser.add_argument("--pairs", type=int, default=0, help="the first N pairs; 0: all")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    tok = Tokenizer.load(sorted(args.corpus.glob("spm-*"))[0])
    texts = {
        side: read_lines(path, args.pairs)
        for side, path in zip(("src", "tgt"), train_files(args.corpus, args.langs))
    }
    n = len(texts["src"])
    print(f"{args.corpus}: {n} pairs, vocabulary {tok.src_vocab_size}")
    encode = {"src": tok.encode_src, "tgt": tok.encode_tgt}
    seconds = min(
        _timed(lambda: [encode[s](lines, num_threads=1) for s, lines in texts.items()])
        for _ in range(args.repeats)
    )
    best = {s: _array(tok, s, encode[s](lines, num_threads=1)) for s, lines in texts.items()}
    texts.clear()
    for name, settings in SETTINGS.items():
        took, sampled = min(
            (_timed_epoch(best, tok, settings, e) for e in range(args.repeats)),
            key=lambda pair: pair[0],
        )
        ratio = np.concatenate(
            [sampled[s].lengths() / np.maximum(best[s].lengths(), 1) for s in best]
        )
        print(
            f"  {name}: {took:.2f} s per epoch, {1e6 * took / (2 * n):.1f} us per sentence; "
            f"pieces x{ratio.mean():.2f} (mean), x{np.quantile(ratio, BOUND_QUANTILE):.2f} "
            f"({100 * BOUND_QUANTILE:.0f}% quantile)"
        )
    print(
        f"  best segmentation, 1 thread: {seconds:.2f} s, "
        f"{1e6 * seconds / (2 * n):.1f} us per sentence"
    )
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


def _array(tok: Tokenizer, side: str, rows: list[list[int]]) -> TokenArray:
    return TokenArray.from_lists(rows, token_dtype(tok.processor(side).get_piece_size()))


def _timed_epoch(
    best: dict[str, TokenArray], tok: Tokenizer, settings: SamplingSettings, epoch: int
) -> tuple[float, dict[str, TokenArray]]:
    """(seconds, both sides) of one epoch's sampling."""
    started = time.perf_counter()
    sampled = {s: sample_array(a, tok.processor(s), s, settings, 1, epoch) for s, a in best.items()}
    return time.perf_counter() - started, sampled


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
