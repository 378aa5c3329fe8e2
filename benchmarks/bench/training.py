"""(b) + (c) training steps on real batches: every preset in fp32 and bf16, and the
tutorial's ``torch.nn.Transformer`` (:mod:`.reference`) on the same batches.

A step is the trainer's update (attnmt.train.loop.Trainer.update with one batch): the
noam learning rate, word dropout, forward under autocast, label-smoothed loss, backward,
gradient clipping, Adam (attnmt.train.optim.build_optimizer), zero_grad. The variants
cycle through the same distinct batches in lockstep, so round ``r`` of every variant is the
same batch and per-round time ratios compare like with like. Each batch's first step (the
warm-up pass) is counted by ``torch.utils.flop_counter.FlopCounterMode`` and not timed. The
RNN presets' timed steps on CPU are also split into encoder, decoder loop, output layer +
loss, backward and optimizer (:mod:`.split`).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode

from attnmt.batch import Batch
from attnmt.schema import plain
from attnmt.train.config import TrainerConfig
from attnmt.train.loss import label_smoothed_nll
from attnmt.train.optim import build_optimizer, build_schedule
from attnmt.train.word_dropout import word_dropout

from .measure import PRECISIONS, Row, autocast, compare, skipped
from .reference import Seq2SeqTransformer, reference_step
from .split import NO_MARKS, StepMarks, WallMarks, marks_for, split_text
from .workload import is_transformer, padding

if TYPE_CHECKING:
    from .context import Context

aten = torch.ops.aten


def _register_cpu_attention_flops() -> None:
    """torch counts the CUDA fused attention kernels only; add the CPU flash kernel."""
    fwd = aten._scaled_dot_product_flash_attention_for_cpu
    bwd = aten._scaled_dot_product_flash_attention_for_cpu_backward
    if fwd in flop_counter.flop_registry or fwd.default in flop_counter.flop_registry:
        return

    @flop_counter.register_flop_formula(fwd)
    def _fwd(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
        return flop_counter.sdpa_flop_count(q, k, v)

    @flop_counter.register_flop_formula(bwd)
    def _bwd(g: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
        return flop_counter.sdpa_backward_flop_count(g, q, k, v)


class TrainCycle:
    """Training steps over ``batches`` in turn; a batch's first step is flop-counted."""

    def __init__(self, step: Callable[[Batch], None], batches: list[Batch]) -> None:
        self.step = step
        self.batches = batches
        self.flops: list[int | None] = [None] * len(batches)
        self.order: list[int] = []  # the batch of every call so far

    def __call__(self) -> None:
        i = len(self.order) % len(self.batches)
        self.order.append(i)
        if self.flops[i] is not None:
            self.step(self.batches[i])
            return
        with FlopCounterMode(display=False) as counter:
            self.step(self.batches[i])
        self.flops[i] = counter.get_total_flops()

    def timed(self, rounds: int) -> list[int]:
        """The batches of the last ``rounds`` calls (the timed ones)."""
        return self.order[len(self.order) - rounds :]


def attnmt_step(
    model: torch.nn.Module,
    tcfg: TrainerConfig,
    dtype: torch.dtype | None,
    device: torch.device,
    marks: StepMarks = NO_MARKS,
) -> Callable[[Batch], None]:
    """The trainer's update on one batch (no gradient accumulation, one process);
    ``marks`` times its sections (:mod:`.split`)."""
    optimizer = build_optimizer(model.parameters(), tcfg)
    schedule = build_schedule(optimizer, tcfg)
    updates = itertools.count(1)
    max_norm = tcfg.clip_grad_norm if tcfg.clip_grad_norm > 0 else math.inf
    model.train()

    def step(batch: Batch) -> None:
        marks.start()
        schedule.step(next(updates))
        batch = word_dropout(batch, tcfg.src_word_dropout, tcfg.tgt_word_dropout)
        marks.end("prepare")
        with autocast(device, dtype):
            logits = model(batch)
        out = label_smoothed_nll(logits, batch.target()[1], tcfg.label_smoothing)
        marks.end("output_loss")
        (out.loss / max(out.n_tokens, 1)).backward()
        marks.end("backward")
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        if math.isfinite(float(out.loss.detach())) and math.isfinite(float(grad_norm)):
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        marks.end("optimizer")
        marks.finish()

    return step


def _params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def add_step_figures(
    ctx: Context, rows: list[Row], cycles: dict[str, TrainCycle], precisions: dict[str, str]
) -> None:
    """Per-round target tokens/s, achieved GFLOP/s and its share of the matmul peak of the
    variant's precision (``precisions``: variant -> fp32 | bf16)."""
    for row in rows:
        cycle = cycles.get(row["variant"])
        if cycle is None or "times" not in row:
            continue
        order = cycle.timed(len(row["times"]))
        tokens = [cycle.batches[i].n_tokens for i in order]
        flops = [cycle.flops[i] or 0 for i in order]
        pairs = list(zip(tokens, flops, row["times"]))
        row["tokens_per_sec"] = statistics.median(n / t for n, _, t in pairs)
        row["rate"], row["unit"] = row["tokens_per_sec"], "tok/s"
        row["gflops"] = statistics.median(f / t / 1e9 for _, f, t in pairs)
        row["flops_per_token"] = sum(f for _, f, _ in pairs) / max(sum(tokens), 1)
        peak = ctx.peak(precisions[row["variant"]])
        row["peak_gflops"] = peak["gflops"]
        row["peak_fraction"] = row["gflops"] / peak["gflops"]


def _add_split(row: Row, marks: WallMarks | None) -> None:
    """``split_ms`` (mean ms of each section over the timed steps) and ``split`` (the
    table's percentages) of a row whose step was marked."""
    if marks is None or "times" not in row:
        return
    split = marks.split(len(row["times"]))
    if split:
        row["split_ms"] = {section: 1e3 * sec for section, sec in split.items()}
        row["split"] = split_text(split)


def bench_train(ctx: Context) -> list[Row]:
    """(b) every preset of ``--models`` in each precision, with the reference beside each
    Transformer preset and the same preset without input feeding (``nofeed_<precision>``)
    beside a Luong preset; ``speedup`` = bf16 over fp32 (nofeed: over the preset, same
    precision), ``vs_reference`` = attnmt over ``torch.nn.Transformer`` in the same precision
    (tokens/s ratios, per-round medians)."""
    _register_cpu_attention_flops()
    args, device, work = ctx.args, ctx.device, ctx.work
    tcfg, tok = work.run.trainer, work.data.tokenizer
    batches = [b.to(device) for b in work.batches]
    rows: list[Row] = []
    for preset in args.models:
        mcfg = work.model_config(preset)
        base: Row = {"bench": "train", "model": preset, **padding(work.batches)}
        cycles: dict[str, TrainCycle] = {}
        params: dict[str, int] = {}
        marks: dict[str, WallMarks | None] = {}
        found: list[Row] = []
        feeds = bool(plain(mcfg).get("input_feeding"))  # Luong: time-parallel variant beside
        for precision, why in ctx.precisions().items():
            names = [precision] + ([f"ref_{precision}"] if is_transformer(mcfg) else [])
            names += [f"nofeed_{precision}"] if feeds else []
            if why:
                found += [skipped(base, device, name, why) for name in names]
                continue
            dtype = PRECISIONS[precision]
            model = work.model(preset, device)
            params[precision] = _params(model)
            marks[precision] = marks_for(model, device)
            step = attnmt_step(model, tcfg, dtype, device, marks[precision] or NO_MARKS)
            cycles[precision] = TrainCycle(step, batches)
            if is_transformer(mcfg):
                torch.manual_seed(0)
                ref = Seq2SeqTransformer(mcfg, tok.src_vocab_size, tok.tgt_vocab_size)
                params[f"ref_{precision}"] = _params(ref)
                step = reference_step(ref.to(device), dtype, device)
                cycles[f"ref_{precision}"] = TrainCycle(step, batches)
            if feeds:
                model = work.model(preset, device, input_feeding=False)
                nofeed = f"nofeed_{precision}"
                params[nofeed] = _params(model)
                marks[nofeed] = marks_for(model, device)
                step = attnmt_step(model, tcfg, dtype, device, marks[nofeed] or NO_MARKS)
                cycles[nofeed] = TrainCycle(step, batches)
        n, rounds = len(batches), len(batches) * args.passes
        found = compare(base, dict(cycles), device, args, warmup=n, rounds=rounds) + found
        add_step_figures(ctx, found, cycles, {v: v[-4:] for v in cycles})
        for row in found:
            variant = row["variant"]
            row["params"] = params.get(variant)
            _add_split(row, marks.get(variant))
            if variant.startswith("nofeed_"):  # over input feeding, same precision
                row["baselines"] = {"speedup": variant.removeprefix("nofeed_")}
                row["note"] = "input_feeding=false: one RNN + attention call over all positions"
            elif not variant.startswith("ref_"):
                row["baselines"] = {"speedup": "fp32", "vs_reference": f"ref_{variant}"}
        rows += sorted(found, key=lambda r: list(PRECISIONS).index(r["variant"][-4:]))
    return rows
