"""(e) the data path in pairs/s: preparation (read the prepared split, clean the raw corpus,
encode the train split) and batching (a TokenBatchSampler epoch; a whole loader epoch with
collate), each through the code the trainer runs (attnmt.train.data.build_data's pieces)."""

from __future__ import annotations

import itertools
import logging
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from attnmt.data.corpora import get_recipe
from attnmt.data.dataset import make_loader
from attnmt.data.idcache import encode_file, encode_threads
from attnmt.data.sampler import TokenBatchSampler

from .measure import Row, add_rate, compare, skipped
from .workload import DownloadRefused, no_downloads

if TYPE_CHECKING:
    from .context import Context

QUIET = logging.getLogger("bench.datapath")
QUIET.setLevel(logging.ERROR)


def bench_data(ctx: Context) -> list[Row]:
    """Each stage timed ``--repeat`` times (interleaved); pairs/s is the median. On the
    first device only: the data path runs on the CPU whatever the model's device."""
    if not ctx.first_device:
        return []
    args, device, work = ctx.args, torch.device("cpu"), ctx.work
    corpus, train, tcfg = work.data.corpus, work.data.train, work.run.trainer
    src_file, tgt_file = corpus.files("train")
    tokenizer = work.data.tokenizer
    epochs = itertools.count(1)

    def sampler() -> TokenBatchSampler:
        return TokenBatchSampler(
            train.src_lengths,
            train.tgt_lengths,
            max_tokens=tcfg.max_tokens,
            seed=work.run.seed,
            bucket_size=tcfg.bucket_size or None,
        )

    def clean() -> int:
        cfg = work.run.data
        with no_downloads():
            built = get_recipe(cfg.name)(cfg, Path(cfg.root) / "raw", QUIET)
        return sum(len(pairs) for pairs in built.splits.values())

    def encode() -> None:
        with tempfile.TemporaryDirectory(prefix="bench-ids-") as tmp:
            for side, path in (("src", src_file), ("tgt", tgt_file)):
                out = Path(tmp) / side
                out.mkdir()
                encode_file(path, tokenizer, side, out, encode_threads())

    def loader_epoch() -> None:
        for _ in make_loader(train, sampler()):
            pass

    base: Row = {"bench": "data", "model": corpus.name}
    stages: dict[str, tuple[Callable[[], Any], int, str]] = {
        "read": (lambda: corpus.read("train"), corpus.counts["train"], "the train split, text"),
        "encode": (encode, corpus.counts["train"], "train ids, both sides (as idcache)"),
        "sampler": (lambda: sampler().epoch_batches(next(epochs)), len(train), "an epoch"),
        "loader": (loader_epoch, len(train), "an epoch, collated batches"),
    }
    rows: list[Row] = []
    try:
        stages["clean"] = (clean, clean(), "raw corpus to split pairs (the recipe)")
    except DownloadRefused as err:
        rows.append(skipped(base, device, "clean", f"skipped: {err}"))
    order = ["read", "clean", "encode", "sampler", "loader"]
    variants = {name: stages[name][0] for name in order if name in stages}
    for row in compare(base, variants, device, args):
        _, pairs, what = stages[row["variant"]]
        add_rate([row], "pairs_per_sec", "pairs/s", pairs)
        row.update(pairs=pairs, note=f"{pairs} pairs: {what}")
        rows.append(row)
    return sorted(rows, key=lambda r: order.index(r["variant"]))
