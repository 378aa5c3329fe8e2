"""A model the server serves: decoding through the one Translator (or a CTranslate2 export),
and each line's JSON result (translations, scores, pieces, attention, alignments)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attnmt.checkpoint import load_checkpoint
from attnmt.data.textio import normalize_space
from attnmt.decode.attention_maps import AttentionMaps, attention_maps
from attnmt.decode.config import DecodeConfig
from attnmt.decode.ct2 import CT2Translator, is_export_dir, load_ct2_translator, read_export_info
from attnmt.decode.search import Hypothesis
from attnmt.decode.translator import Translator, detokenize_lines, load_translator
from attnmt.decode.word_alignment import pharaoh, word_alignment
from attnmt.errors import ConfigError

NO_ATTENTION = (
    "CTranslate2 backend: no attention, scores or alignments (serve the checkpoint for them)"
)
MAPS_PER_BATCH = 64  # hypotheses teacher-forced at once for their attention maps


@dataclass(frozen=True)
class Options:
    """One request's decoding options (already checked)."""

    beam: int
    alpha: float
    n_best: int = 1
    attention: bool = False
    alignments: bool = False

    def batch_key(self) -> tuple[int, float]:
        """Requests with equal keys decode as one batch (``n_best`` only cuts the list)."""
        return self.beam, self.alpha


@dataclass
class ServedModel:
    """A loaded model with what ``GET /info`` says about it."""

    label: str
    translator: Translator | CT2Translator
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def has_attention(self) -> bool:
        return isinstance(self.translator, Translator)

    @property
    def decode(self) -> DecodeConfig:
        return self.translator.decode

    def source_limit(self) -> int:
        """The most source pieces decoded per line (longer lines are cut)."""
        if isinstance(self.translator, CT2Translator):
            return min(self.decode.max_src_len, self.translator.max_positions - 1)
        return self.decode.max_src_len

    def search(
        self, lines: Sequence[str], options: Options, n: int
    ) -> list[list[Hypothesis]] | list[list[list[int]]]:
        """The ``n`` best per line (attnmt: Hypothesis lists; CTranslate2: one piece-id
        list per line), decoded as the Translator batches them."""
        overrides = {"beam": options.beam, "alpha": options.alpha}
        if isinstance(self.translator, Translator):
            return self.translator.n_best(lines, n, **overrides)
        found = self.translator.piece_ids(lines, **overrides)
        return [[ids] if ids is not None else [] for ids in found]

    def results(
        self, lines: Sequence[str], found: Sequence[Sequence[Any]], options: Options
    ) -> list[dict[str, Any]]:
        """The JSON result of each line from its ``found`` hypotheses."""
        tok = self.translator.tokenizer
        limit = self.source_limit()
        src_ids = tok.encode_src([normalize_space(s) for s in lines])
        found = [list(hyps)[: options.n_best] for hyps in found]
        maps = self._maps(src_ids, found, limit) if options.attention or options.alignments else {}
        out = []
        for i, (line, ids) in enumerate(zip(lines, src_ids)):
            warnings = []
            if len(ids) > limit:
                warnings.append(
                    f"line {i + 1}: {len(ids)} source pieces; translated from its first {limit} "
                    f"(decode.max_src_len={self.decode.max_src_len})"
                )
            translations = [
                self._translation(hyp, maps.get((i, j)), options) for j, hyp in enumerate(found[i])
            ]
            out.append(
                {
                    "source": line,
                    "source_pieces": [*tok.src_pieces(ids[:limit]), "</s>"],
                    "translations": translations,
                    "warnings": warnings,
                }
            )
        return out

    def _maps(
        self, src_ids: list[list[int]], found: list[list[Any]], limit: int
    ) -> dict[tuple[int, int], AttentionMaps]:
        if not isinstance(self.translator, Translator):
            return {}
        keys = [(i, j) for i, hyps in enumerate(found) for j in range(len(hyps))]
        maps: dict[tuple[int, int], AttentionMaps] = {}
        for start in range(0, len(keys), MAPS_PER_BATCH):
            part = keys[start : start + MAPS_PER_BATCH]
            got = attention_maps(
                self.translator.model,
                self.translator.tokenizer,
                self.translator.device,
                [src_ids[i][:limit] for i, _ in part],
                [(found[i][j].tokens, found[i][j].finished) for i, j in part],
            )
            maps.update(zip(part, got))
        return maps

    def _translation(
        self, hyp: Hypothesis | list[int], maps: AttentionMaps | None, options: Options
    ) -> dict[str, Any]:
        tok = self.translator.tokenizer
        if not isinstance(hyp, Hypothesis):  # CTranslate2: piece ids only
            return {
                "text": detokenize_lines(tok, [hyp])[0],
                "score": None,
                "target_pieces": tok.tgt_pieces(hyp),
                "finished": None,
            }
        assert isinstance(self.translator, Translator)
        pieces = tok.tgt_pieces(hyp.tokens) + (["</s>"] if hyp.finished else [])
        out: dict[str, Any] = {
            "text": self.translator.text(hyp),
            "score": hyp.score if math.isfinite(hyp.score) else None,
            "target_pieces": pieces,
            "finished": hyp.finished,
        }
        if maps is not None and options.alignments:
            weights = maps.mean_last_cross()
            out["alignment"] = pharaoh(
                word_alignment(weights, maps.source_pieces, maps.target_pieces)
            )
        if maps is not None and options.attention:
            pieces_in = maps.decoder_input_pieces
            out["attention"] = {**maps.to_lists(), "decoder_input_pieces": pieces_in}
        return out


def load_model(
    label: str, path: str, backend: str, device: str, decode: DecodeConfig
) -> ServedModel:
    """Load ``path`` (a run, a .pt file or, with backend auto/ctranslate2, an export)."""
    use_ct2 = backend == "ctranslate2" or (backend == "auto" and is_export_dir(path))
    if use_ct2:
        ct2 = load_ct2_translator(path, device, decode)
        return ServedModel(label, ct2, ct2_info(ct2, path))
    if is_export_dir(path):
        raise ConfigError(
            f"{label}={path} is a CTranslate2 export; use backend=auto or backend=ctranslate2"
        )
    translator = load_translator(path, device, decode)
    return ServedModel(label, translator, attnmt_info(translator, path))


def attnmt_info(translator: Translator, path: str) -> dict[str, Any]:
    """What ``GET /info`` says about an attnmt checkpoint."""
    model = translator.model
    ckpt = translator.checkpoint_path
    payload = load_checkpoint(ckpt, map_location="cpu") if ckpt is not None else {}
    config = translator.config or payload.get("config", {})
    data = config.get("data", {}) if isinstance(config, dict) else {}
    metrics = payload.get("metrics", {}) or {}
    model_config = dict(payload.get("model_config", {}))
    return {
        "backend": "attnmt",
        "given": path,
        "checkpoint": str(ckpt) if ckpt else None,
        "model": payload.get("model_name", model.name),
        "model_config": model_config,
        "corpus": data.get("name"),
        "direction": _direction(data),
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocabulary": translator.tokenizer.vocab_info(),
        "step": payload.get("step"),
        "valid_bleu": metrics.get("val_bleu"),
        "valid_chrf": metrics.get("val_chrf"),
        "attention": _attention_shape(model_config, payload.get("model_name", model.name)),
        "decode": dataclasses.asdict(translator.decode),
    }


def ct2_info(translator: CT2Translator, path: str) -> dict[str, Any]:
    """What ``GET /info`` says about a CTranslate2 export (from its attnmt_export.json and,
    when it is still there, the checkpoint it was exported from)."""
    export = read_export_info(path)
    source = export.get("checkpoint")
    payload: dict[str, Any] = {}
    if source and Path(source).is_file():
        try:
            payload = load_checkpoint(source, map_location="cpu")
        except Exception:  # the export still serves; /info just knows less
            payload = {}
    data = payload.get("config", {}).get("data", {}) if payload else {}
    return {
        "backend": "ctranslate2",
        "given": path,
        "checkpoint": source,
        "model": "transformer",
        "model_config": export.get("model_config", {}),
        "quantization": export.get("quantization"),
        "corpus": data.get("name"),
        "direction": _direction(data),
        "parameters": None,
        "vocabulary": translator.tokenizer.vocab_info(),
        "step": payload.get("step"),
        "valid_bleu": (payload.get("metrics") or {}).get("val_bleu"),
        "valid_chrf": (payload.get("metrics") or {}).get("val_chrf"),
        "attention": None,
        "note": NO_ATTENTION,
        "decode": dataclasses.asdict(translator.decode),
    }


def _direction(data: dict[str, Any]) -> str | None:
    src, tgt = data.get("src_lang"), data.get("tgt_lang")
    return f"{src}→{tgt}" if src and tgt else None


def _attention_shape(model_config: dict[str, Any], name: str) -> dict[str, Any]:
    """Which maps the API returns and how many layers and heads they have."""
    if "n_heads" in model_config:
        return {
            "kinds": ["cross", "encoder_self", "decoder_self"],
            "decoder_layers": model_config.get("dec_layers"),
            "encoder_layers": model_config.get("enc_layers"),
            "heads": model_config.get("n_heads"),
        }
    return {"kinds": ["cross"], "decoder_layers": 1, "encoder_layers": 0, "heads": 1, "rnn": name}
