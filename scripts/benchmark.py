"""Speed and memory ratios of attnmt's code paths, measured in one run.

    python scripts/benchmark.py --out bench.json [--devices cpu cuda] [--quick]

(a) ``train``:  training step (forward + backward + clip + Adam) in fp32 vs bf16 autocast,
    tokens/s, for every model preset in --models at a --batch-tokens target batch;
(b) ``sdpa``:   fused ``F.scaled_dot_product_attention`` vs the explicit softmax path of
    attnmt.models.multihead, as a single op (forward + backward) and as a whole
    Transformer training step (explicit path forced by patching ``scaled_dot_attention``);
(c) ``decode``: greedy decoding with the incremental state (``decode_step``, K/V cache)
    vs re-running the teacher-forced decoder on the whole prefix each step;
(e) ``kernels``: attnmt's CPU dropout (4 masks per 64-bit random word) vs ``F.dropout``,
    and the closed-form-gradient smoothed cross-entropy vs ``F.cross_entropy``;
(f) ``ct2``:    greedy decoding of the same sentences by attnmt and by its CTranslate2 export
    (fp32, and int8 on CPU), sentences/s and the share of identical outputs; a random
    preset by default, ``--ct2-ckpt RUN`` for a trained model's test sentences (text to
    text). Needs ``pip install 'attnmt[ct2]'``; left out of the default benches without it;
(d) memory:     ``torch.cuda.max_memory_allocated`` on CUDA; on CPU the peak growth of
    the process RSS during a variant's first (untimed) calls, which allocate the optimizer
    state (sampled from /proc/self/statm; freed heap is returned with malloc_trim first;
    indicative only).

Variants of one comparison are timed interleaved and ``speedup`` is the median of the
per-round time ratios, so load from other processes mostly cancels out.

Synthetic batches (random ids, equal lengths) so no corpus is needed. Prints a table and
writes every figure as JSON. Ratios are the point: absolute times depend on the machine
and on what else runs on it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import importlib.util
import json
import math
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from attnmt import BOS_ID  # noqa: E402
from attnmt.data.batching import Batch, make_batch  # noqa: E402

Row = dict[str, Any]
PRECISIONS: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}


# ---------------------------------------------------------------- measuring


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


@contextlib.contextmanager
def peak_memory(device: torch.device, out: Row) -> Iterator[None]:
    """Put ``peak_mem_mb`` (and how it was measured) into ``out``."""
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
        yield
        out["peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        out["mem_kind"] = "cuda_max_allocated"
        return
    if not os.path.exists("/proc/self/statm"):
        yield
        return
    _trim()
    base, peak, stop = _rss_bytes(), [0], threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], _rss_bytes())
            time.sleep(0.002)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    out["peak_mem_mb"] = max(peak[0] - base, 0) / 2**20
    out["mem_kind"] = "cpu_rss_growth"


def compare(
    base: Row, variants: dict[str, Callable[[], Any]], device: torch.device, args: Any
) -> list[Row]:
    """Time the variants *interleaved* (A B A B ...), so load changes hit all alike.

    Each variant first runs ``max(warmup, 1)`` untimed calls under :func:`peak_memory`
    (the first training step allocates the optimizer state: that is the peak), then
    ``repeat`` timed calls in turns. A variant that raises RuntimeError (e.g. no bf16
    kernel) gets an ``error`` instead of times. Rows hold the median ``sec_per_step``.
    """
    rows = {v: {**base, "device": str(device), "variant": v} for v in variants}
    ready: dict[str, Callable[[], Any]] = {}
    for name, fn in variants.items():
        try:
            with peak_memory(device, rows[name]):
                for _ in range(max(args.warmup, 1)):
                    fn()
                sync(device)
            ready[name] = fn
        except RuntimeError as err:
            rows[name]["error"] = (str(err).splitlines() or [type(err).__name__])[0][:80]
    times: dict[str, list[float]] = {name: [] for name in ready}
    for _ in range(args.repeat):
        for name, fn in ready.items():
            t0 = time.perf_counter()
            fn()
            sync(device)
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        rows[name]["sec_per_step"] = statistics.median(ts)
        rows[name]["times"] = ts
    return [progress(rows[name]) for name in variants]


def progress(row: Row) -> Row:
    """Echo a finished measurement to stderr (the table comes at the end) and return it."""
    ms = f"{row['sec_per_step'] * 1e3:.1f} ms" if "sec_per_step" in row else row.get("error", "")
    name = f"{row['bench']} {row['model']} {row['device']} {row['variant']}"
    print(f"  {name}: {ms}", file=sys.stderr)
    return row


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


# ---------------------------------------------------------------- models and batches


def load_model(preset: str, vocab: int, device: torch.device) -> torch.nn.Module:
    from omegaconf import OmegaConf

    from attnmt.models.registry import build_model

    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "configs" / "model" / f"{preset}.yaml"))
    torch.manual_seed(0)
    return build_model(cfg, vocab, vocab, True).to(device)


def synthetic_batch(tokens: int, length: int, vocab: int, device: torch.device) -> Batch:
    """About ``tokens`` target tokens: ``tokens // (length + 1)`` pairs of ``length`` pieces."""
    n = max(tokens // (length + 1), 1)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (n, length), generator=g).tolist()
    tgt = torch.randint(4, vocab, (n, length), generator=g).tolist()
    return make_batch(src, tgt).to(device)


# ---------------------------------------------------------------- (a) + (b) training step


def train_step_fn(model: torch.nn.Module, batch: Batch, dtype: torch.dtype | None) -> Callable:
    from attnmt.train.loss import label_smoothed_nll

    device = batch.src.device
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()

    def step() -> None:
        with autocast(device, dtype):
            logits = model(batch)
        out = label_smoothed_nll(logits, batch.tgt_out, 0.1)
        (out.loss / batch.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def add_throughput(rows: list[Row], tokens: int) -> list[Row]:
    for row in rows:
        row["tokens"] = tokens
        if "sec_per_step" in row:
            row["tokens_per_sec"] = tokens / row["sec_per_step"]
    return rows


def bench_train(args: argparse.Namespace, device: torch.device) -> list[Row]:
    """(a) fp32 vs bf16 autocast: one model instance per variant, same init and batch."""
    rows: list[Row] = []
    batch = synthetic_batch(args.batch_tokens, args.length, args.vocab, device)
    for preset in args.models:
        variants = {
            name: train_step_fn(load_model(preset, args.vocab, device), batch, dtype)
            for name, dtype in PRECISIONS.items()
        }
        found = compare({"bench": "train", "model": preset}, variants, device, args)
        rows += add_throughput(found, batch.n_tokens)
    return rows


def explicit_attention() -> Any:
    """Patch the Transformer's attention to always take the explicit (weights) path."""
    from attnmt.models import multihead

    original = multihead.scaled_dot_attention

    def explicit(q, k, v, mask=None, causal=False, dropout=0.0, need_weights=False):
        ctx, _ = original(q, k, v, mask, causal, dropout, need_weights=True)
        return ctx, None

    return mock.patch.object(multihead, "scaled_dot_attention", explicit)


def bench_sdpa(args: argparse.Namespace, device: torch.device) -> list[Row]:
    """(b) fused SDPA vs explicit softmax: the op (fwd+bwd), then a Transformer train step."""
    from attnmt.models.multihead import scaled_dot_attention

    rows: list[Row] = []
    b, h, t, d = max(args.batch_tokens // (args.length + 1), 1), 4, args.length + 1, 64
    g = torch.Generator().manual_seed(0)
    qkv = [torch.randn(b, h, t, d, generator=g).to(device).requires_grad_() for _ in range(3)]
    pad = torch.ones(b, 1, 1, t, dtype=torch.bool, device=device)
    pad[::2, ..., -3:] = False  # every other sentence has 3 padding positions
    for case, mask, causal in (("padding_mask", pad, False), ("causal", None, True)):

        def op(weights: bool, mask: Any = mask, causal: bool = causal) -> None:
            ctx, _ = scaled_dot_attention(*qkv, mask, causal, 0.0, need_weights=weights)
            ctx.sum().backward()

        variants = {"sdpa": lambda op=op: op(False), "explicit": lambda op=op: op(True)}
        base = {"bench": "sdpa_op", "model": f"[{b},{h},{t},{d}] {case}"}
        rows += compare(base, variants, device, args)
    batch = synthetic_batch(args.batch_tokens, args.length, args.vocab, device)
    for preset in [m for m in args.models if m.startswith("transformer")]:
        fused = train_step_fn(load_model(preset, args.vocab, device), batch, None)
        slow = train_step_fn(load_model(preset, args.vocab, device), batch, None)

        def explicit_step(step: Callable = slow) -> None:
            with explicit_attention():
                step()

        variants = {"sdpa": fused, "explicit": explicit_step}
        found = compare({"bench": "sdpa_train", "model": preset}, variants, device, args)
        rows += add_throughput(found, batch.n_tokens)
    return rows


# ---------------------------------------------------------------- (c) decoding


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


def bench_decode(args: argparse.Namespace, device: torch.device) -> list[Row]:
    """(c) incremental ``decode_step`` vs re-running ``forward`` on the prefix."""
    rows: list[Row] = []
    n_tokens, steps = args.decode_sentences * (args.length + 1), args.length + 1
    batch = synthetic_batch(n_tokens, args.length, args.vocab, device)
    for preset in args.models:
        model = load_model(preset, args.vocab, device).eval()
        fns = {"cached": greedy_cached, "uncached": greedy_uncached}
        variants = {k: functools.partial(fn, model, batch, steps) for k, fn in fns.items()}
        found = compare({"bench": "decode", "model": preset}, variants, device, args)
        same = torch.equal(variants["cached"](), variants["uncached"]())
        for row in add_throughput(found, len(batch) * steps):
            row["same_tokens"] = same
        rows += found
    return rows


# ---------------------------------------------------------------- (e) dropout and loss kernels


def bench_kernels(args: argparse.Namespace, device: torch.device) -> list[Row]:
    """(e) forward + backward of attnmt's CPU dropout vs ``F.dropout`` on [tokens, 1024]
    (the FFN hidden size of the default Transformer), and of the closed-form-gradient
    smoothed cross-entropy vs ``F.cross_entropy(label_smoothing=0.1)`` on [tokens, V]."""
    import torch.nn.functional as F

    from attnmt.kernels import dropout
    from attnmt.train.loss import label_smoothed_nll

    g = torch.Generator().manual_seed(0)
    n = args.batch_tokens
    x = torch.randn(n, 1024, generator=g).to(device).requires_grad_()
    logits = torch.randn(1, n, args.vocab, generator=g).to(device).requires_grad_()
    target = torch.randint(4, args.vocab, (1, n), generator=g).to(device)

    def drop(fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        fn(x).sum().backward()

    def loss(fn: Callable[[], torch.Tensor]) -> None:
        fn().backward()

    def torch_ce() -> torch.Tensor:
        return F.cross_entropy(
            logits[0], target[0], ignore_index=0, label_smoothing=0.1, reduction="sum"
        )

    shape = f"{n}x1024 p=0.1"
    variants = {
        "torch": functools.partial(drop, lambda t: F.dropout(t, 0.1, True)),
        "attnmt": functools.partial(drop, lambda t: dropout(t, 0.1, True)),
    }
    rows = compare({"bench": "dropout", "model": shape}, variants, device, args)
    variants = {
        "torch": functools.partial(loss, torch_ce),
        "attnmt": functools.partial(loss, lambda: label_smoothed_nll(logits, target, 0.1).loss),
    }
    shape = f"{n}x{args.vocab} eps=0.1"
    return rows + compare({"bench": "loss", "model": shape}, variants, device, args)


# ---------------------------------------------------------------- (f) CTranslate2 export


def _ct2_variants(args: argparse.Namespace, device: torch.device) -> list[tuple[str, str]]:
    """(variant name, CTranslate2 compute_type): float32 always, int8 on CPU as well."""
    return [("ct2_fp32", "float32")] + ([("ct2_int8", "int8")] if device.type == "cpu" else [])


def bench_ct2(args: argparse.Namespace, device: torch.device) -> list[Row]:
    """(f) greedy decoding of the same sentences by attnmt (``greedy_search``, or the whole
    Translator with ``--ct2-ckpt``) and by the CTranslate2 export of the same model
    (src/attnmt/decode/ct2.py), as many threads each; ``speedup`` = t_attnmt / t_ct2.

    Synthetic: a randomly initialised preset, ``--decode-sentences`` random sentences of
    ``--length`` pieces, one batch, attnmt's length limit. ``--ct2-ckpt RUN``: a trained
    checkpoint and the first ``--decode-sentences`` lines of its test split, translated
    text to text through both translators (tokenisation, batching and all)."""
    import tempfile

    from attnmt.decode import ct2
    from attnmt.errors import ConfigError

    try:
        ctranslate2 = ct2.require_ctranslate2()
    except ConfigError as err:
        raise ImportError(str(err)) from None
    if device.type == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        raise ImportError("this CTranslate2 build has no CUDA support")
    threads = torch.get_num_threads()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-ct2-") as tmp:
        if args.ct2_ckpt:
            return _bench_ct2_checkpoint(args, device, Path(tmp), threads)
        for preset in [m for m in args.models if m.startswith("transformer")]:
            rows += _bench_ct2_preset(args, device, preset, Path(tmp) / preset, threads)
    return rows


def _bench_ct2_preset(
    args: argparse.Namespace, device: torch.device, preset: str, out: Path, threads: int
) -> list[Row]:
    """bench_ct2 on a randomly initialised preset and random sentences, piece ids in and out."""
    from attnmt.decode import ct2
    from attnmt.decode.search import greedy_search

    model = load_model(preset, args.vocab, device).eval()
    vocab = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, args.vocab)]
    index = {p: i for i, p in enumerate(vocab)}
    ct2.save_spec(ct2.build_spec(model, vocab, vocab), out)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, args.vocab, (args.decode_sentences, args.length), generator=g)
    batch = make_batch(src.tolist()).to(device)
    pieces = [[vocab[i] for i in s] for s in src.tolist()]
    limit = math.floor(1.5 * (args.length + 1) + 10)  # attnmt's default a·|x| + b

    def attnmt_fn() -> list[list[int]]:
        return [h.tokens for h in greedy_search(model, batch, 1.5, 10)]

    def ct2_fn(translator: Any) -> list[list[int]]:
        found = translator.translate_batch(
            pieces,
            beam_size=1,
            max_decoding_length=limit,
            min_decoding_length=0,
            max_input_length=0,
        )
        return [[index[p] for p in r.hypotheses[0]] for r in found]

    variants: dict[str, Callable[[], list[list[int]]]] = {"attnmt": attnmt_fn}
    for name, compute_type in _ct2_variants(args, device):
        translator = ct2.open_ct2(out, threads, device=device.type, compute_type=compute_type)
        variants[name] = functools.partial(ct2_fn, translator)
    base = {"bench": "ct2", "model": f"{preset} {len(pieces)}x{args.length}"}
    return _ct2_rows(compare(base, variants, device, args), variants, len(pieces))


def _bench_ct2_checkpoint(
    args: argparse.Namespace, device: torch.device, tmp: Path, threads: int
) -> list[Row]:
    """bench_ct2 on a trained checkpoint's test sentences, text to text."""
    from attnmt.data.corpora import prepare_corpus
    from attnmt.decode import ct2
    from attnmt.decode.config import DecodeConfig
    from attnmt.decode.translator import load_translator

    decode = DecodeConfig(beam=1)
    attnmt_tr = load_translator(args.ct2_ckpt, str(device), decode)
    lines = prepare_corpus(attnmt_tr.config["data"]).read("test")[0][: args.decode_sentences]
    ct2.export(args.ct2_ckpt, tmp / "model")
    variants: dict[str, Callable[[], list[str]]] = {"attnmt": lambda: attnmt_tr.translate(lines)}
    for name, compute_type in _ct2_variants(args, device):
        tr = ct2.load_ct2_translator(tmp / "model", str(device), decode, compute_type, threads)
        variants[name] = functools.partial(tr.translate, lines)
    base = {"bench": "ct2", "model": f"{Path(args.ct2_ckpt).name} test[:{len(lines)}]"}
    return _ct2_rows(compare(base, variants, device, args), variants, len(lines))


def _ct2_rows(rows: list[Row], variants: dict[str, Callable[[], list]], n: int) -> list[Row]:
    """Add sentences/s and the share of outputs equal to attnmt's to each row."""
    outputs = {name: fn() for name, fn in variants.items()}
    for row in rows:
        if "sec_per_step" in row:
            row["sentences"] = n
            row["sentences_per_sec"] = n / row["sec_per_step"]
        same = sum(a == b for a, b in zip(outputs["attnmt"], outputs[row["variant"]]))
        row["same_output"] = same / max(n, 1)
        row["note"] = f"{row.get('sentences_per_sec', 0):.1f} sent/s, {same}/{n} same as attnmt"
    return rows


# ---------------------------------------------------------------- driver

BASELINES = {
    "train": "fp32",
    "sdpa_op": "explicit",
    "sdpa_train": "explicit",
    "decode": "uncached",
    "dropout": "torch",
    "loss": "torch",
    "ct2": "attnmt",
}
"""The variant each bench's ``speedup`` is relative to."""

BENCHES: dict[str, Callable[[argparse.Namespace, torch.device], list[Row]]] = {
    "train": bench_train,
    "sdpa": bench_sdpa,
    "decode": bench_decode,
    "kernels": bench_kernels,
    "ct2": bench_ct2,  # needs attnmt[ct2]; left out of the default --benches without it
}


DEFAULT_BENCHES = [b for b in BENCHES if b != "ct2" or importlib.util.find_spec("ctranslate2")]


def add_ratios(rows: list[Row]) -> None:
    """``speedup`` of each row over its group's baseline variant.

    The median over the interleaved rounds of ``t_baseline[i] / t_variant[i]``: a load
    spike on the shared machine hits both calls of a round, so it mostly cancels.
    """
    for row in rows:
        ref = next(
            (
                r
                for r in rows
                if (r["bench"], r["model"], r["device"])
                == (row["bench"], row["model"], row["device"])
                and r["variant"] == BASELINES.get(row["bench"])
                and "times" in r
            ),
            None,
        )
        if ref is not None and "times" in row:
            pairs = zip(ref["times"], row["times"])
            row["speedup"] = statistics.median(a / b for a, b in pairs)


def _num(row: Row, key: str, fmt: str) -> str:
    v = row.get(key)
    return format(v, fmt) if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def print_table(rows: list[Row]) -> None:
    head = f"{'bench':<11} {'model / shape':<26} {'device':<7} {'variant':<9} "
    print(head + f"{'ms/step':>9} {'tok/s':>9} {'speedup':>8} {'peak MB':>8}  note")
    for r in rows:
        ms = {"ms": r["sec_per_step"] * 1e3} if "sec_per_step" in r else {}
        note = (
            r.get("error")
            or r.get("note")
            or ("" if r.get("same_tokens", True) else "tokens differ!")
        )
        print(
            f"{r['bench']:<11} {r['model']:<26} {r['device']:<7} {r['variant']:<9} "
            f"{_num(ms, 'ms', '9.1f'):>9} {_num(r, 'tokens_per_sec', '9.0f'):>9} "
            f"{_num(r, 'speedup', '8.2f'):>8} {_num(r, 'peak_mem_mb', '8.1f'):>8}  {note}"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, help="write every figure here as JSON")
    p.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda if present")
    p.add_argument("--benches", nargs="+", default=DEFAULT_BENCHES, choices=list(BENCHES))
    p.add_argument(
        "--models", nargs="+", help="presets in configs/model (default: transformer, both RNNs)"
    )
    p.add_argument("--batch-tokens", type=int, default=4000, help="target tokens per batch")
    p.add_argument("--length", type=int, default=24, help="pieces per synthetic sentence")
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--decode-sentences", type=int, default=32)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--ct2-ckpt", help="bench ct2: a trained Transformer run/checkpoint instead")
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test of the script")
    args = p.parse_args(argv)
    if args.models is None:
        quick = ["transformer_tiny", "rnn_luong"]
        args.models = quick if args.quick else ["transformer", "rnn_bahdanau", "rnn_luong"]
    if args.quick:
        args.batch_tokens, args.length, args.vocab = 200, 8, 64
        args.decode_sentences, args.warmup, args.repeat = 4, 0, 1
    return args


def main(argv: list[str] | None = None) -> list[Row]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = args.devices or ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    rows: list[Row] = []
    for name in devices:
        device = torch.device(name)
        for bench in args.benches:
            try:
                rows.extend(BENCHES[bench](args, device))
            except ImportError as err:  # a module of the model/search code is missing
                print(f"skip {bench} on {device}: {err}", file=sys.stderr)
                rows.append({"bench": bench, "model": "-", "device": str(device)})
                rows[-1].update(variant="-", error=f"skipped: {err}")
    add_ratios(rows)
    print_table(rows)
    if args.out:
        meta = {
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
            "cpu": platform.processor() or platform.machine(),
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
        print(f"wrote {args.out}")
    return rows


if __name__ == "__main__":
    main()
