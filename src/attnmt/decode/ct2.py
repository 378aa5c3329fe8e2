"""Export a Transformer checkpoint to CTranslate2 and translate with it (``attnmt[ct2]``).

    python scripts/export_ctranslate2.py ckpt=RUN_DIR_OR_FILE out=DIR [quantization=int8]
    echo "Das ist ein Test." | python translate.py ckpt=DIR backend=ctranslate2

:func:`export` fills CTranslate2's own ``TransformerSpec`` from the model's weights
(a ``ctranslate2.converters.Converter`` whose ``_load`` returns the spec) and writes

    DIR/model.bin, config.json, shared_vocabulary.json   (CTranslate2's model directory;
        source_/target_vocabulary.json for separate vocabularies)
    DIR/spm.model  or  DIR/src.model + DIR/tgt.model     (the checkpoint's SentencePiece)
    DIR/attnmt_export.json                               (where it came from, position limit)

How attnmt's Transformer maps onto the spec:

* **Vocabularies**: the SentencePiece pieces in id order, so CTranslate2's token ids are
  attnmt's (``<pad>`` 0, ``<unk>`` 1, ``<s>`` 2, ``</s>`` 3); unk/bos/eos tokens and the
  decoder start token are attnmt's, and ``add_source_eos`` makes CTranslate2 feed the
  encoder ``[x_1 .. x_m, </s>]`` as attnmt does.
* **Embeddings**: scaled by √d_model (``scale_embeddings``); shared/tied tables are written
  once each place and CTranslate2 aliases equal arrays on save.
* **Positions**: CTranslate2's built-in sinusoids are concatenated ``[sin | cos]`` with other
  frequencies, while attnmt interleaves ``sin, cos`` (positional.py). So the encodings are
  written explicitly as a table (``position_encodings.encodings``, rows = positions 0..N-1):
  attnmt's own sinusoids for N = ``max_positions`` positions (1024 by default), or the
  learned table as it is. :class:`CT2Translator` keeps inputs and outputs within N.
* **Attention**: self-attention ``linear[0]`` is the fused [W_Q; W_K; W_V] (3D × D, biases
  concatenated), ``linear[1]`` W_O; cross-attention ``linear[0]`` W_Q, ``linear[1]`` the
  fused [W_K; W_V], ``linear[2]`` W_O. Heads split the same way (D = H × d_k, head-major).
* **Norms**: pre-norm layers (each sub-layer's LayerNorm before it, a final LayerNorm per
  stack) and post-norm layers (after the residual sum, no final norm) are both CTranslate2
  variants (``pre_norm``); ε = 1e-5 as torch's LayerNorm. ReLU or exact (erf) GELU.
* **Output**: the output projection (the target embedding when tied) with a bias of
  -1e4 on ``<pad>`` and ``<s>``, which attnmt's search never produces; every other logit
  is the model's.

An option outside these (a model other than the Transformer, or a Transformer setting this
module does not know) fails with a ConfigError naming it. After writing, the export checks
itself: CTranslate2's ``score_batch`` log-probabilities of random sentence pairs must match
attnmt's teacher-forced ones (float32 exports).

Translating (:class:`CT2Translator`) mirrors :class:`~attnmt.decode.translator.Translator`:
the same whitespace normalisation, SentencePiece ids, ``max_src_len`` cut and length limit
floor(a·|x| + b) per sentence (|x| = pieces + EOS), and the same batches (at most
``batch_tokens`` padded source pieces × beam, longest first), one ``translate_batch`` call
each: CTranslate2 cannot be interrupted inside a call, so ``should_stop`` (Ctrl-C, a
server stopping) is checked between batches. Greedy search decodes each batch up to its
largest limit and cuts each output to its own limit, which gives the same tokens (each
step depends only on the tokens before it); beam search groups sentences by their limit
first. ``min_decoding_length=0``: EOS may come first (an empty translation), as
in attnmt (CTranslate2's default is 1). Greedy (beam=1) output equals attnmt's up to
floating-point near-ties. Beam search (beam > 1) is CTranslate2's own: its length penalty is
an exponent on the length, not attnmt's GNMT ((5 + |Y|) / 6)^alpha, and its stopping rule
differs, so beam outputs can differ from attnmt's (greedy is the exact path).

Without the package, CTranslate2 directly (pieces in, pieces out)::

    import ctranslate2, sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file="DIR/spm.model")   # src.model / tgt.model
    tr = ctranslate2.Translator("DIR", device="cpu")
    pieces = sp.encode(["Das ist ein Test."], out_type=str)
    out = tr.translate_batch(pieces, beam_size=1, max_decoding_length=256, min_decoding_length=0)
    print(sp.decode(out[0].hypotheses[0]))

(that snippet skips attnmt's whitespace normalisation and per-sentence length limit).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from attnmt import BOS_ID, PAD_ID
from attnmt.atomic import atomic_dir
from attnmt.data.batching import make_batch
from attnmt.data.tokenizer import Tokenizer
from attnmt.decode.config import DecodeConfig
from attnmt.decode.search import max_length
from attnmt.decode.translator import (
    decode_batches,
    detokenize_lines,
    encode_sources,
    load_translator,
)
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models.base import Seq2Seq
from attnmt.models.transformer import Transformer
from attnmt.models.transformer_layers import DecoderLayer, EncoderLayer
from attnmt.output_guard import OutputKind, check_output_dir
from attnmt.run_dir import BEST_JSON, CHECKPOINTS, LAST

log = logging.getLogger(__name__)

EXPORT_FILE = "attnmt_export.json"
EXPORT_FORMAT = "attnmt-ctranslate2-v1"
DEFAULT_MAX_POSITIONS = 1024
BANNED_LOGIT = -1e4  # bias of <pad> and <s>: never chosen, representable in float16
VERIFY_TOLERANCE = 1e-3  # max |Δ log p| of the self-check (float32 exports)
QUANTIZATIONS = (
    "int8",
    "int8_float32",
    "int8_float16",
    "int8_bfloat16",
    "int16",
    "float16",
    "bfloat16",
    "float32",
)

# Every Transformer setting the mapping knows, with the values it can express. A setting
# missing here (added to the model later) fails the export unless it has its default value.
_EXPRESSIBLE: dict[str, tuple[Any, ...] | None] = {
    "name": ("transformer",),
    "d_model": None,  # any value
    "n_heads": None,
    "enc_layers": None,
    "dec_layers": None,
    "d_ff": None,
    "dropout": None,  # training only
    "attention_dropout": None,
    "activation": ("relu", "gelu"),
    "norm": ("pre", "post"),
    "positions": ("sinusoidal", "learned"),
    "max_positions": None,
    "tie_embeddings": None,
    "share_embeddings": None,
}


def open_ct2(model_dir: str | Path, threads: int = 0, **kwargs: Any) -> Any:
    """``ctranslate2.Translator(model_dir, intra_threads=threads, **kwargs)`` that leaves
    torch's thread count as it was: CTranslate2 sets the process-wide OpenMP thread count
    when it starts (to every core for ``intra_threads=0``), and more threads than cores
    slow torch down many times over on a busy machine. ``threads`` 0: torch's count."""
    ct2 = require_ctranslate2()
    before = torch.get_num_threads()
    try:
        return ct2.Translator(str(model_dir), intra_threads=threads or before, **kwargs)
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def require_ctranslate2() -> Any:
    """The ``ctranslate2`` module; ConfigError saying how to install it when missing."""
    try:
        import ctranslate2
    except ImportError as err:
        raise ConfigError(
            f"CTranslate2 is not installed ({err}); pip install 'attnmt[ct2]' "
            "(or pip install ctranslate2)"
        ) from None
    return ctranslate2


# ---------------------------------------------------------------- the spec


def check_expressible(model: Seq2Seq) -> None:
    """ConfigError naming the first setting of ``model`` that the CTranslate2 spec cannot
    express; nothing for a Transformer made only of supported options."""
    if not isinstance(model, Transformer):
        raise ConfigError(
            f"model {getattr(model, 'name', type(model).__name__)!r}: only Transformer "
            "checkpoints can be exported to CTranslate2 (RNN encoder-decoders have no "
            "CTranslate2 spec)"
        )
    config = model.config
    defaults = type(config)()
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name not in _EXPRESSIBLE:
            if value != getattr(defaults, f.name):
                raise ConfigError(
                    f"model.{f.name}={value!r} cannot be expressed in CTranslate2's "
                    "Transformer spec by this exporter; export a model trained without it"
                )
            continue
        allowed = _EXPRESSIBLE[f.name]
        if allowed is not None and value not in allowed:
            raise ConfigError(
                f"model.{f.name}={value!r} cannot be expressed in CTranslate2's Transformer "
                f"spec (supported: {', '.join(map(str, allowed))})"
            )


def _np(t: torch.Tensor) -> Any:
    return t.detach().to("cpu", torch.float32).numpy().copy()


def _linear(spec: Any, *layers: torch.nn.Linear) -> None:
    """spec.weight/bias = the layers' weights/biases stacked along the output dimension."""
    spec.weight = _np(torch.cat([m.weight for m in layers]))
    if layers[0].bias is not None:
        spec.bias = _np(torch.cat([m.bias for m in layers]))


def _norm(spec: Any, norm: torch.nn.Module) -> None:
    """spec.gamma/beta = a LayerNorm's weight/bias (every norm a pre-norm model holds)."""
    assert isinstance(norm, torch.nn.LayerNorm), norm
    spec.gamma = _np(norm.weight)
    spec.beta = _np(norm.bias)


def _position_table(model: Transformer, max_positions: int) -> Any:
    """[N, D] encodings of positions 0..N-1 exactly as the model adds them."""
    n = model.config.max_positions if model.config.positions == "learned" else max_positions
    with torch.no_grad():
        return _np(model.positions(torch.arange(n)))


def position_limit(model: Transformer, max_positions: int) -> int:
    """How many positions the exported table holds."""
    return model.config.max_positions if model.config.positions == "learned" else max_positions


def build_spec(
    model: Seq2Seq,
    src_vocab: Sequence[str],
    tgt_vocab: Sequence[str],
    max_positions: int = DEFAULT_MAX_POSITIONS,
) -> Any:
    """A filled ``ctranslate2.specs.TransformerSpec`` for ``model`` (see the module doc)."""
    require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec

    check_expressible(model)
    assert isinstance(model, Transformer)
    if max_positions < 2:
        raise ConfigError(f"max_positions={max_positions} must be >= 2")
    config = model.config
    activation = {
        "relu": common_spec.Activation.RELU,
        "gelu": common_spec.Activation.GELU,  # erf form, as torch.nn.GELU()
    }[config.activation]
    spec = transformer_spec.TransformerSpec.from_config(
        (config.enc_layers, config.dec_layers),
        config.n_heads,
        pre_norm=config.norm == "pre",
        activation=activation,
    )
    positions = _position_table(model, max_positions)
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = _np(model.src_embed.weight)
    dec.embeddings.weight = _np(model.tgt_embed.weight)
    for stack in (enc, dec):
        stack.scale_embeddings = True  # × √d_model
        stack.position_encodings.encodings = positions.copy()
    if config.norm == "pre":
        _norm(enc.layer_norm, model.enc_norm)
        _norm(dec.layer_norm, model.dec_norm)
    for layer_spec, layer in zip(enc.layer, model.encoder):
        attn = layer.self_attn
        _linear(layer_spec.self_attention.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
        _linear(layer_spec.self_attention.linear[1], attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, layer.self_norm)
        _ffn(layer_spec.ffn, layer)
    for layer_spec, dec_layer in zip(dec.layer, model.decoder):
        attn, cross = dec_layer.self_attn, dec_layer.cross_attn
        _linear(layer_spec.self_attention.linear[0], attn.q_proj, attn.k_proj, attn.v_proj)
        _linear(layer_spec.self_attention.linear[1], attn.out_proj)
        _norm(layer_spec.self_attention.layer_norm, dec_layer.self_norm)
        _linear(layer_spec.attention.linear[0], cross.q_proj)
        _linear(layer_spec.attention.linear[1], cross.k_proj, cross.v_proj)
        _linear(layer_spec.attention.linear[2], cross.out_proj)
        _norm(layer_spec.attention.layer_norm, dec_layer.cross_norm)
        _ffn(layer_spec.ffn, dec_layer)
    dec.projection.weight = _np(model.out_proj.weight)
    bias = torch.zeros(model.out_proj.weight.size(0))
    bias[[PAD_ID, BOS_ID]] = BANNED_LOGIT
    dec.projection.bias = _np(bias)
    spec.register_source_vocabulary(list(src_vocab))
    spec.register_target_vocabulary(list(tgt_vocab))
    spec.config.unk_token = src_vocab[1]
    spec.config.bos_token = tgt_vocab[BOS_ID]
    spec.config.eos_token = tgt_vocab[3]
    spec.config.decoder_start_token = tgt_vocab[BOS_ID]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = 1e-5
    return spec


def _ffn(spec: Any, layer: EncoderLayer | DecoderLayer) -> None:
    first, _, _, last = layer.ffn.net  # Linear, activation, Dropout, Linear
    assert isinstance(first, torch.nn.Linear) and isinstance(last, torch.nn.Linear)
    _linear(spec.linear_0, first)
    _linear(spec.linear_1, last)
    _norm(spec.layer_norm, layer.ffn_norm)


def save_spec(spec: Any, out_dir: str | Path, quantization: str | None = None) -> Path:
    """Write ``spec`` as a CTranslate2 model directory through a ``Converter``."""
    Converter: Any = require_ctranslate2().converters.Converter  # ctranslate2 has no types

    class _SpecConverter(Converter):
        def _load(self) -> Any:
            return spec

    return Path(_SpecConverter().convert(str(out_dir), quantization=quantization, force=True))


def vocabularies(tokenizer: Tokenizer) -> tuple[list[str], list[str]]:
    """(source pieces, target pieces) in id order."""
    src = tokenizer.src_pieces(range(tokenizer.src_vocab_size))
    tgt = tokenizer.tgt_pieces(range(tokenizer.tgt_vocab_size))
    return src, tgt


# ---------------------------------------------------------------- export


EXPORT = OutputKind("a CTranslate2 export", "out=", "ct2-model")
"""What ``out=`` may name (attnmt.output_guard); which existing export ``force=true`` may
replace is :func:`check_replaceable`'s."""


def refuse_run_output(out: Path) -> None:
    """ConfigError when writing ``out`` could destroy a training run, a checkpoint or a
    prepared corpus: ``out`` is a file, a run directory or inside one, in a corpus cache, or
    holds a run or a checkpoint (``force=true`` included, since an export replaces ``out``
    whole): :func:`attnmt.output_guard.check_output_dir`."""
    check_output_dir(out, EXPORT, replaces_whole=True)


EXPORT_NAMES = re.compile(
    r"model\.bin|config\.json|\w*vocabulary\w*\.(?:json|txt)|(?:spm|src|tgt)\.model"
    rf"|{re.escape(EXPORT_FILE)}"
)
"""The files an export writes: CTranslate2's model, config and vocabularies, the
SentencePiece model(s), attnmt_export.json."""


def _listing(paths: Sequence[Path], most: int = 6) -> str:
    """``a, b/, c and 4 more`` (a folder with a trailing slash)."""
    names = [p.name + ("/" if p.is_dir() and not p.is_symlink() else "") for p in paths]
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def check_replaceable(out: Path, force: bool) -> None:
    """ConfigError unless :func:`export` may write ``out``: absent, an empty folder, or with
    ``force`` a previous export (attnmt_export.json and only files an export writes); the
    error lists what replacing anything else would delete."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not force:
        raise ConfigError(
            f"out={out} already exists; choose another directory or pass force=true "
            "(which replaces a previous export only)"
        )
    if out.is_dir() and not out.is_symlink():
        entries = sorted(out.iterdir())
        foreign = [p for p in entries if not (p.is_file() and EXPORT_NAMES.fullmatch(p.name))]
        if is_export_dir(out) and not foreign:
            return
        held = (
            f"it holds {_listing(foreign)}"
            if is_export_dir(out)
            else (f"no {EXPORT_FILE}; it holds {_listing(entries)}")
        )
    else:
        held = "it is a file"
    raise ConfigError(
        f"out={out} is not a previous export ({held}), and force=true replaces only "
        "a folder an export wrote; choose a new directory, e.g. out=ct2-model (nothing was "
        "deleted)"
    )


def export(
    checkpoint_path: str | Path,
    out_dir: str | Path,
    quantization: str | None = None,
    max_positions: int = DEFAULT_MAX_POSITIONS,
    force: bool = False,
    verify: bool = True,
) -> dict[str, Any]:
    """Convert a Transformer checkpoint (a file, or a run directory: its best checkpoint)
    into the CTranslate2 model directory ``out_dir``; returns what was written (the
    content of ``attnmt_export.json``, with ``files``). ConfigError for a model or option
    CTranslate2 cannot express, an existing ``out_dir`` (with ``force``, unless it is a
    previous export: :func:`check_replaceable`), an ``out_dir`` that is, holds or lies in
    a run directory or is a checkpoint (even with ``force``: :func:`refuse_run_output`), a
    bad ``quantization``; written to a temporary directory first, renamed into place."""
    refuse_run_output(Path(out_dir))
    check_replaceable(Path(out_dir), force)
    ct2 = require_ctranslate2()
    if quantization in ("", "none", "None"):
        quantization = None
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(
            f"quantization={quantization!r} is not one of: none, {', '.join(QUANTIZATIONS)}"
        )
    out = Path(out_dir)
    translator = load_translator(checkpoint_path, device="cpu")
    model, tokenizer = translator.model, translator.tokenizer
    check_expressible(model)
    assert isinstance(model, Transformer)
    src_vocab, tgt_vocab = vocabularies(tokenizer)
    spec = build_spec(model, src_vocab, tgt_vocab, max_positions)
    with atomic_dir(out) as tmp:  # replaces an existing ``out`` (force, checked above)
        save_spec(spec, tmp, quantization)
        tokenizer.save(tmp)
        info = {
            "format": EXPORT_FORMAT,
            "checkpoint": str(translator.checkpoint_path),
            "model_config": dataclasses.asdict(model.config),
            "max_positions": position_limit(model, max_positions),
            "quantization": quantization or "float32",
            "ctranslate2": ct2.__version__,
        }
        if verify:
            info["verify_max_abs_logprob_diff"] = verify_export(model, tokenizer, tmp, quantization)
        (tmp / EXPORT_FILE).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    info["files"] = sorted(p.name for p in out.iterdir())
    return info


def verify_export(
    model: Transformer, tokenizer: Tokenizer, model_dir: Path, quantization: str | None
) -> float | None:
    """Max |log p| difference between CTranslate2's ``score_batch`` and attnmt's
    teacher-forced log-probabilities on three random sentence pairs; ConfigError above
    :data:`VERIFY_TOLERANCE` (float32 exports; other quantizations: None, not checked)."""
    if quantization not in (None, "float32"):
        return None
    g = torch.Generator().manual_seed(0)
    cap = position_limit(model, DEFAULT_MAX_POSITIONS) - 1  # + EOS within the table
    src = [
        torch.randint(4, tokenizer.src_vocab_size, (min(n, cap),), generator=g).tolist()
        for n in (3, 7, 12)
    ]
    tgt = [
        torch.randint(4, tokenizer.tgt_vocab_size, (min(n, cap),), generator=g).tolist()
        for n in (5, 2, 9)
    ]
    batch = make_batch(src, tgt)
    with torch.no_grad():
        logits = model(batch).float()
        logits[..., [PAD_ID, BOS_ID]] = -math.inf
        ref = logits.log_softmax(-1).gather(-1, batch.target()[1][..., None])[..., 0]
    src_vocab, tgt_vocab = vocabularies(tokenizer)
    scorer = open_ct2(model_dir, device="cpu", compute_type="float32")
    results = scorer.score_batch(
        [[src_vocab[i] for i in s] for s in src], [[tgt_vocab[i] for i in t] for t in tgt]
    )
    diff = 0.0
    for row, result in enumerate(results):
        n = len(tgt[row]) + 1  # the pieces and EOS
        got = torch.tensor(result.log_probs, dtype=torch.float32)
        if got.numel() != n:
            raise ConfigError(
                f"CTranslate2 scored {got.numel()} target tokens of a pair, attnmt {n}; the "
                "export does not reproduce the model"
            )
        diff = max(diff, float((got - ref[row, :n]).abs().max()))
    if not diff <= VERIFY_TOLERANCE:
        raise ConfigError(
            f"the CTranslate2 export does not reproduce the model: log-probabilities differ "
            f"by up to {diff:.3g} (> {VERIFY_TOLERANCE}); this model variant is not supported"
        )
    return diff


# ---------------------------------------------------------------- translating


def read_export_info(model_dir: str | Path) -> dict[str, Any]:
    """``attnmt_export.json`` of an exported directory; CheckpointError when it is not one."""
    path = Path(model_dir)
    hint = "export a checkpoint with: python scripts/export_ctranslate2.py ckpt=RUN out=DIR"
    if path.is_file() or any((path / n).exists() for n in (CHECKPOINTS, BEST_JSON, LAST)):
        raise CheckpointError(
            f"{path} is an attnmt checkpoint, not a CTranslate2 export: translate it without "
            f"backend=ctranslate2, or {hint.replace('RUN', str(path))}"
        )
    if not path.is_dir():
        raise CheckpointError(f"CTranslate2 model directory not found: {path}; {hint}")
    info_file = path / EXPORT_FILE
    if not (path / "model.bin").is_file() or not info_file.is_file():
        raise CheckpointError(
            f"{path} is not a CTranslate2 model exported by attnmt (expected model.bin and "
            f"{EXPORT_FILE}); {hint}"
        )
    try:
        info = json.loads(info_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{info_file} is unreadable ({err}); export again") from None
    if not isinstance(info, dict) or info.get("format") != EXPORT_FORMAT:
        raise CheckpointError(f"{info_file}: not format {EXPORT_FORMAT}; export again")
    return info


def is_export_dir(path: str | Path) -> bool:
    """Does ``path`` look like a directory :func:`export` wrote?"""
    p = Path(path)
    return p.is_dir() and (p / EXPORT_FILE).is_file()


def ct2_device(device: str) -> tuple[str, int]:
    """attnmt's ``device`` setting (auto | cpu | cuda | cuda:N) -> (CTranslate2 device, index)."""
    ct2 = require_ctranslate2()
    if device == "auto":
        return ("cuda", 0) if ct2.get_cuda_device_count() > 0 else ("cpu", 0)
    if device == "cpu":
        return "cpu", 0
    name, _, index = device.partition(":")
    if name == "cuda" and (not index or index.isdigit()):
        return "cuda", int(index or 0)
    raise ConfigError(f"device={device!r}: CTranslate2 runs on auto, cpu, cuda or cuda:N")


@dataclass
class CT2Translator:
    """A CTranslate2 model with attnmt's tokenizer and decoding settings; the same
    ``translate`` contract as :class:`~attnmt.decode.translator.Translator`."""

    translator: Any  # ctranslate2.Translator
    tokenizer: Tokenizer
    max_positions: int
    decode: DecodeConfig = field(default_factory=DecodeConfig)
    model_dir: Path | None = None
    #: checked before each batch; True stops decoding (KeyboardInterrupt), as
    #: :attr:`Translator.should_stop <attnmt.decode.translator.Translator.should_stop>`
    should_stop: Callable[[], bool] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.src_vocab, tgt_vocab = vocabularies(self.tokenizer)
        self.tgt_index = {piece: i for i, piece in enumerate(tgt_vocab)}

    def encode(self, sentences: Sequence[str], first_line: int = 1) -> list[list[int]]:
        """Source piece ids as :meth:`Translator.encode` makes them: whitespace normalised,
        cut to ``decode.max_src_len`` pieces (and to the position table) with one warning."""
        limit = min(self.decode.max_src_len, self.max_positions - 1)  # + EOS
        reason = (
            f"{limit} (decode.max_src_len={self.decode.max_src_len}, positions of the "
            f"export: {self.max_positions})"
        )
        return encode_sources(self.tokenizer, sentences, limit, first_line, reason)

    def max_length(self, n_pieces: int, decode: DecodeConfig) -> int:
        """attnmt's limit (:func:`~attnmt.decode.search.max_length` of pieces + EOS),
        within the position table."""
        limit = max_length(n_pieces + 1, decode.max_len_a, decode.max_len_b)
        return min(limit, self.max_positions)

    def piece_ids(
        self, sentences: Sequence[str], first_line: int = 1, **overrides: Any
    ) -> list[list[int] | None]:
        """Target piece ids per sentence (no BOS/EOS), None for blank lines; decoded in
        the Translator's batches (:func:`~attnmt.decode.translator.decode_batches`), one
        CTranslate2 call each, ``should_stop`` checked before each."""
        decode = dataclasses.replace(self.decode, **overrides) if overrides else self.decode
        ids = self.encode(sentences, first_line)
        todo = [i for i, s in enumerate(sentences) if s.strip() and ids[i]]
        limits = {i: self.max_length(len(ids[i]), decode) for i in todo}
        groups: dict[int, list[int]] = {}
        for i in todo:  # greedy: one group, each output cut to its limit (the same tokens)
            groups.setdefault(limits[i] if decode.beam > 1 else 0, []).append(i)
        out: list[list[int] | None] = [None] * len(sentences)
        for key, group in sorted(groups.items(), reverse=True):
            for batch in decode_batches([len(ids[i]) for i in group], decode):
                if self.should_stop is not None and self.should_stop():
                    raise KeyboardInterrupt
                chosen = [group[j] for j in batch]
                results = self.translator.translate_batch(
                    [[self.src_vocab[t] for t in ids[i]] for i in chosen],
                    beam_size=decode.beam,
                    length_penalty=decode.alpha if decode.beam > 1 else 0.0,
                    max_decoding_length=key or max(limits[i] for i in chosen),
                    min_decoding_length=0,  # attnmt allows EOS first
                    max_input_length=0,  # cut above, as attnmt does
                )
                for i, result in zip(chosen, results):
                    out[i] = [self.tgt_index[p] for p in result.hypotheses[0][: limits[i]]]
        return out

    def translate(
        self, sentences: Sequence[str], first_line: int = 1, **overrides: Any
    ) -> list[str]:
        """One translation per sentence, in order; blank lines give "" without the model."""
        return detokenize_lines(self.tokenizer, self.piece_ids(sentences, first_line, **overrides))


def load_ct2_translator(
    model_dir: str | Path,
    device: str = "auto",
    decode: DecodeConfig | None = None,
    compute_type: str = "default",
    threads: int = 0,
) -> CT2Translator:
    """CT2Translator for a directory :func:`export` wrote. ``threads``: CTranslate2's
    ``intra_threads`` (0: as many as torch uses, see :func:`open_ct2`)."""
    require_ctranslate2()
    info = read_export_info(model_dir)
    try:
        tokenizer = Tokenizer.load(Path(model_dir))
    except Exception as err:  # DataError, or a missing file
        raise CheckpointError(f"{model_dir}: {err}") from None
    name, index = ct2_device(device)
    try:
        translator = open_ct2(
            model_dir, threads, device=name, device_index=index, compute_type=compute_type
        )
    except (RuntimeError, ValueError) as err:
        raise CheckpointError(f"CTranslate2 cannot load {model_dir}: {err}") from None
    log.info("loaded CTranslate2 model %s (from %s) on %s", model_dir, info.get("checkpoint"), name)
    return CT2Translator(
        translator, tokenizer, int(info["max_positions"]), decode or DecodeConfig(), Path(model_dir)
    )
