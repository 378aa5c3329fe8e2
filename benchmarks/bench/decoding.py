"""(d) decoding the test split with a randomly initialised model of the configured preset.

``translate``: text to text through :class:`attnmt.decode.translator.Translator` (the path
of validation, evaluate.py and translate.py), greedy and beam 5, batched as the decode
config says (``decode.batch_tokens``) vs one sentence at a time (``batch_tokens=1``).
``decode``: ``steps`` greedy tokens through the incremental state (``decode_step``, the K/V
cache) vs re-running the teacher-forced decoder on the whole prefix each step.

Random weights rarely produce EOS, so hypotheses mostly run to the decode config's length
limit ``floor(decode.max_len_a · |x| + decode.max_len_b)`` (|x| with EOS): decoding costs
about what a model that writes that much would cost; rows give the mean output length.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import TYPE_CHECKING, Any

import torch

from attnmt import BOS_ID
from attnmt.batch import Batch
from attnmt.data.batching import make_batch
from attnmt.decode.translator import Translator

from .measure import Row, add_rate, compare

if TYPE_CHECKING:
    from .context import Context

SEARCHES = {"greedy": 1, "beam5": 5}
"""Row label -> beam size."""


def bench_translate(ctx: Context) -> list[Row]:
    """Sentences/s of greedy and beam-5 search, batched vs one sentence at a time."""
    args, device, work = ctx.args, ctx.device, ctx.work
    model = work.model(work.preset, device).eval()
    translator = Translator(model, work.data.tokenizer, device, work.run.decode)
    sentences = work.test_sources(args.decode_sentences)
    dcfg = work.run.decode
    limit = f"max len {dcfg.max_len_a:g}·|x|+{dcfg.max_len_b}"
    rows: list[Row] = []
    for label, beam in SEARCHES.items():
        variants = {
            "batched": functools.partial(translator.hypotheses, sentences, beam=beam),
            "single": functools.partial(
                translator.hypotheses, sentences, beam=beam, batch_tokens=1
            ),
        }
        base = {"bench": "translate", "model": f"{work.preset} {label} test[:{len(sentences)}]"}
        found = add_rate(
            compare(base, variants, device, args), "sentences_per_sec", "sent/s", len(sentences)
        )
        hyps = [h for h in variants["batched"]() if h is not None]
        out_len = statistics.mean(len(h.tokens) for h in hyps) if hyps else 0.0
        finished = sum(h.finished for h in hyps) / max(len(hyps), 1)
        for row in found:
            row.update(sentences=len(sentences), beam=beam, mean_output_len=out_len)
            row["finished_share"] = finished
            row["note"] = f"random weights, {limit}: {out_len:.1f} pieces out, {finished:.0%} EOS"
        rows += found
    return rows


@torch.no_grad()
def greedy_cached(model: Any, batch: Batch, steps: int) -> torch.Tensor:
    """``steps`` greedy tokens per sentence through ``decode_step`` (no early stop)."""
    state = model.init_state(model.encode(batch.src, batch.src_pad_mask), batch.src_pad_mask)
    prev = torch.full((len(batch),), BOS_ID, dtype=torch.long, device=batch.src.device)
    out = []
    for _ in range(steps):
        log_probs, state, _ = model.decode_step(state, prev)
        prev = log_probs.argmax(-1)
        out.append(prev)
    return torch.stack(out, 1)


@torch.no_grad()
def greedy_uncached(model: Any, batch: Batch, steps: int) -> torch.Tensor:
    """The same tokens by re-running teacher-forced ``forward`` on the prefix each step."""
    prefix = torch.full((len(batch), 1), BOS_ID, dtype=torch.long, device=batch.src.device)
    for _ in range(steps):
        logits = model(Batch(batch.src, batch.src_pad_mask, tgt_input=prefix))
        prefix = torch.cat((prefix, logits[:, -1].argmax(-1, keepdim=True)), dim=1)
    return prefix[:, 1:]


def bench_decode(ctx: Context) -> list[Row]:
    """Incremental ``decode_step`` vs re-running ``forward`` on the prefix, one batch of
    the first ``--cache-sentences`` test sentences, the length limit of the mean one."""
    args, device, work = ctx.args, ctx.device, ctx.work
    ids = work.data.tokenizer.encode_src(work.test_sources(args.cache_sentences))
    batch = make_batch(ids).to(device)
    dcfg = work.run.decode
    mean_src = statistics.mean(len(x) + 1 for x in ids)
    steps = max(1, math.floor(dcfg.max_len_a * mean_src + dcfg.max_len_b))
    model = work.model(work.preset, device).eval()
    fns = {"cached": greedy_cached, "uncached": greedy_uncached}
    variants = {k: functools.partial(fn, model, batch, steps) for k, fn in fns.items()}
    base = {"bench": "decode", "model": f"{work.preset} {len(batch)}x{steps} steps"}
    found = add_rate(
        compare(base, variants, device, args), "tokens_per_sec", "tok/s", len(batch) * steps
    )
    same = torch.equal(variants["cached"](), variants["uncached"]())
    for row in found:
        row["same_tokens"] = same
        row["note"] = "" if same else "tokens differ!"
    return found
