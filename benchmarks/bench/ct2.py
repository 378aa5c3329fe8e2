"""Greedy and beam-5 decoding of the same sentences, batched, by attnmt and by its
CTranslate2 export (fp32, and int8 on CPU): sentences/s and the share of outputs identical to
attnmt's; ``speedup`` = t_attnmt / t_variant per interleaved round (the ct2_fp32 row's is
the issue's ratio). A random model of the configured preset and random sentences by default,
with attnmt's two RNN decoders (rnn_luong, rnn_bahdanau at their presets, random weights, the
same sentences and vocabulary) timed in the same rounds beside them: CTranslate2 cannot run
them, so their ``speedup`` is over the Transformer's attnmt time. ``--ct2-ckpt RUN`` decodes a
trained model's test sentences instead (text to text, no RNN rows). Random weights rarely
emit EOS, so every system decodes to the length limit floor(1.5·|x| + 10) (|x| with EOS).
Beam search: attnmt's GNMT length penalty (alpha 0.6) and CTranslate2's own (an exponent on
the length) may rank beams differently, so beam outputs need not all agree (the note says
how many do). Needs ``pip install 'attnmt[ct2]'``; left out of the default benches
without it."""

from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from attnmt.data.batching import make_batch
from attnmt.models.registry import build_model
from attnmt.schema import plain

from .decoding import SEARCHES
from .measure import Row, compare, skipped
from .workload import is_transformer, run_config

if TYPE_CHECKING:
    from .context import Context


RNN_PRESETS = ("rnn_luong", "rnn_bahdanau")
"""attnmt's RNN decoders timed beside the Transformer (random weights, their presets)."""
ALPHA = 0.6
"""Beam search's length penalty: attnmt's default ``decode.alpha``, given to both systems."""


def _variants(device: torch.device) -> list[tuple[str, str]]:
    """(variant name, CTranslate2 compute_type): float32 always, int8 on CPU as well."""
    return [("ct2_fp32", "float32")] + ([("ct2_int8", "int8")] if device.type == "cpu" else [])


def bench_ct2(ctx: Context) -> list[Row]:
    """attnmt's ``greedy_search`` (or the whole Translator with ``--ct2-ckpt``) vs the
    CTranslate2 translator of the same model, as many threads each."""
    from attnmt.decode import ct2
    from attnmt.errors import ConfigError

    try:
        ctranslate2 = ct2.require_ctranslate2()
    except ConfigError as err:
        raise ImportError(str(err)) from None
    if ctx.device.type == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        raise ImportError("this CTranslate2 build has no CUDA support")
    with tempfile.TemporaryDirectory(prefix="bench-ct2-") as tmp:
        if ctx.args.ct2_ckpt:
            return _bench_checkpoint(ctx, Path(tmp))
        cfg, preset = run_config(ctx.args.overrides)
        if not is_transformer(cfg.model):
            base = {"bench": "ct2", "model": preset}
            return [skipped(base, ctx.device, "-", "skipped: not a Transformer preset")]
        return _bench_preset(ctx, plain(cfg.model), preset, Path(tmp) / preset)


def _bench_preset(ctx: Context, mcfg: dict[str, Any], preset: str, out: Path) -> list[Row]:
    """A randomly initialised preset and random sentences, piece ids in and out; greedy and
    beam 5, with the RNN presets' attnmt decoding in the same rounds."""
    from attnmt.decode import ct2
    from attnmt.decode.search import translate_batch

    args, device = ctx.args, ctx.device
    torch.manual_seed(0)
    model = build_model(mcfg, args.vocab, args.vocab, True).to(device).eval()
    models = {"attnmt": model}
    for name in RNN_PRESETS:
        torch.manual_seed(0)
        rnn_cfg = plain(run_config([f"model={name}"])[0].model)
        rnn = build_model(rnn_cfg, args.vocab, args.vocab, True)
        models[f"attnmt {name}"] = rnn.to(device).eval()
    vocab = ["<pad>", "<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(4, args.vocab)]
    index = {p: i for i, p in enumerate(vocab)}
    ct2.save_spec(ct2.build_spec(model, vocab, vocab), out)
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, args.vocab, (args.ct2_sentences, args.length), generator=g)
    batch = make_batch(src.tolist()).to(device)
    pieces = [[vocab[i] for i in s] for s in src.tolist()]
    limit = math.floor(1.5 * (args.length + 1) + 10)  # attnmt's default a·|x| + b

    def attnmt_fn(net: Any, beam: int) -> list[list[int]]:
        hyps = translate_batch(net, batch, beam, alpha=ALPHA, max_len_a=1.5, max_len_b=10)
        return [h.tokens for h in hyps]

    def ct2_fn(translator: Any, beam: int) -> list[list[int]]:
        found = translator.translate_batch(
            pieces,
            beam_size=beam,
            length_penalty=ALPHA if beam > 1 else 0.0,
            max_decoding_length=limit,
            min_decoding_length=0,
            max_input_length=0,
        )
        return [[index[p] for p in r.hypotheses[0]] for r in found]

    threads = torch.get_num_threads()
    translators = {
        name: ct2.open_ct2(out, threads, device=device.type, compute_type=compute_type)
        for name, compute_type in _variants(device)
    }

    def variants(beam: int) -> dict[str, Callable[[], list]]:
        out: dict[str, Callable[[], list]] = {"attnmt": functools.partial(attnmt_fn, model, beam)}
        out.update({n: functools.partial(ct2_fn, tr, beam) for n, tr in translators.items()})
        for name, net in models.items():
            out.setdefault(name, functools.partial(attnmt_fn, net, beam))
        return out

    return _each_search(
        ctx, f"{preset} {{search}} {len(pieces)}x{args.length}", variants, len(pieces)
    )


def _bench_checkpoint(ctx: Context, tmp: Path) -> list[Row]:
    """A trained checkpoint's test sentences, text to text."""
    from attnmt.data.corpora import prepare_corpus
    from attnmt.decode import ct2
    from attnmt.decode.config import DecodeConfig
    from attnmt.decode.translator import load_translator

    args, device = ctx.args, ctx.device
    decode = DecodeConfig(beam=1, alpha=ALPHA)
    attnmt_tr = load_translator(args.ct2_ckpt, str(device), decode)
    lines = prepare_corpus(attnmt_tr.config["data"]).read("test")[0][: args.ct2_sentences]
    ct2.export(args.ct2_ckpt, tmp / "model")
    threads = torch.get_num_threads()
    ct2_trs = {
        name: ct2.load_ct2_translator(tmp / "model", str(device), decode, compute_type, threads)
        for name, compute_type in _variants(device)
    }

    def variants(beam: int) -> dict[str, Callable[[], list]]:
        out: dict[str, Callable[[], list]] = {
            "attnmt": functools.partial(attnmt_tr.translate, lines, beam=beam)
        }
        out.update(
            {n: functools.partial(tr.translate, lines, beam=beam) for n, tr in ct2_trs.items()}
        )
        return out

    label = f"{Path(args.ct2_ckpt).name} {{search}} test[:{len(lines)}]"
    return _each_search(ctx, label, variants, len(lines))


def _each_search(
    ctx: Context, label: str, variants_of: Callable[[int], dict[str, Callable[[], list]]], n: int
) -> list[Row]:
    """The rows of every search of :data:`SEARCHES` (``label`` with ``{search}`` filled in):
    the variants ``variants_of(beam)`` compared over ``n`` sentences, each row with its beam."""
    rows: list[Row] = []
    for search, beam in SEARCHES.items():
        variants = variants_of(beam)
        base = {"bench": "ct2", "model": label.format(search=search)}
        found = _rows(compare(base, variants, ctx.device, ctx.args), variants, n)
        for row in found:
            row["beam"] = beam
        rows += found
    return rows


def _rows(rows: list[Row], variants: dict[str, Callable[[], list]], n: int) -> list[Row]:
    """Add sentences/s and the share of outputs equal to attnmt's to each row (the RNN
    rows, another model, say so instead)."""
    outputs = {name: fn() for name, fn in variants.items() if not name.startswith("attnmt ")}
    for row in rows:
        if "sec_per_step" in row:
            row["sentences"] = n
            row["sentences_per_sec"] = n / row["sec_per_step"]
            row["rate"], row["unit"] = row["sentences_per_sec"], "sent/s"
        if row["variant"] not in outputs:
            row["note"] = "attnmt's RNN decoder (no CTranslate2 export); speedup: over attnmt"
            continue
        same = sum(a == b for a, b in zip(outputs["attnmt"], outputs[row["variant"]]))
        row["same_output"] = same / max(n, 1)
        row["note"] = f"{same}/{n} outputs same as attnmt"
    return rows
