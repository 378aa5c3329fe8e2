"""CTranslate2 export (attnmt[ct2]): greedy output equal to attnmt's, the translate.py
backend, and clear errors for what CTranslate2's Transformer spec cannot express."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

pytest.importorskip("ctranslate2")

from helpers import tiny_checkpoint as tc

from attnmt.checkpoint import save_checkpoint
from attnmt.cli.translate import run as translate_run
from attnmt.data.corpora import prepare_corpus
from attnmt.data.tokenizer import Tokenizer, load_or_train_tokenizer
from attnmt.decode import ct2
from attnmt.decode.config import DecodeConfig
from attnmt.decode.search import max_length
from attnmt.decode.translator import load_translator
from attnmt.errors import CheckpointError, ConfigError
from attnmt.models.registry import build_model
from attnmt.models.transformer import TransformerConfig

GREEDY = DecodeConfig(beam=1)
TEST_SENTENCES = 300  # the toy test split, larger than the helper's 12


def _data_config(root: Path) -> dict[str, Any]:
    """The helpers' toy_reverse with a 300-sentence test split (train split unchanged)."""
    cfg = tc.data_config(root)
    cfg["toy"] = {**cfg["toy"], "test": TEST_SENTENCES}
    return cfg


def _checkpoint(root: Path, name: str, over: dict[str, Any], tok: Tokenizer, steps: int) -> Path:
    """A Transformer with ``over`` on top of the helpers' tiny config, briefly trained."""
    cfg = {**tc.MODEL_CONFIGS["transformer"], **over}
    torch.manual_seed(0)
    model = build_model(cfg, tok.src_vocab_size, tok.tgt_vocab_size, tok.joint)
    tc.train_briefly(model, tok, root, steps)
    checkpoint = tc.checkpoint(model, tok, root, step=steps)
    checkpoint.model_config = dict(cfg)
    checkpoint.config = {"data": _data_config(root), "model": dict(cfg)}
    return save_checkpoint(checkpoint, root / f"{name}.pt")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The trained toy checkpoint, its export and its test split."""
    root = tmp_path_factory.mktemp("ct2")
    tok = tc.toy_tokenizer(root)
    ckpt = _checkpoint(root, "pre", {}, tok, steps=150)
    info = ct2.export(ckpt, root / "ct2-pre")
    src, ref = prepare_corpus(_data_config(root)).read("test")
    out = root / "ct2-pre"
    return {
        "root": root,
        "tok": tok,
        "ckpt": ckpt,
        "out": out,
        "info": info,
        "src": src,
        "ref": ref,
    }


def _agreement(ckpt: Path, out: Path, sentences: list[str], decode: DecodeConfig) -> float:
    """Share of identical outputs of attnmt and the CTranslate2 export; prints differences."""
    ours = load_translator(ckpt, "cpu", decode).translate(sentences)
    theirs = ct2.load_ct2_translator(out, "cpu", decode).translate(sentences)
    assert len(ours) == len(theirs) == len(sentences)
    differ = [(s, a, b) for s, a, b in zip(sentences, ours, theirs) if a != b]
    for s, a, b in differ:  # expected: none; a float near-tie would show here
        print(f"differs: {s!r}: attnmt {a!r}, ctranslate2 {b!r}")
    return 1 - len(differ) / len(sentences)


def test_greedy_output_equals_attnmt_on_the_test_split(toy: dict[str, Any]) -> None:
    info = toy["info"]
    assert info["verify_max_abs_logprob_diff"] < 1e-4  # score_batch vs teacher forcing
    assert {"model.bin", "config.json", "spm.model", ct2.EXPORT_FILE} <= set(info["files"])
    config = json.loads((toy["out"] / "config.json").read_text())
    assert (config["add_source_eos"], config["decoder_start_token"]) == (True, "<s>")
    vocab = json.loads((toy["out"] / "shared_vocabulary.json").read_text())
    assert vocab[:4] == ["<pad>", "<unk>", "<s>", "</s>"]  # attnmt's ids
    hyps = load_translator(toy["ckpt"], "cpu", GREEDY).translate(toy["src"])
    assert sum(h == r for h, r in zip(hyps, toy["ref"])) > 0.2 * len(hyps)  # non-trivial
    assert len(set(hyps)) > 50
    assert _agreement(toy["ckpt"], toy["out"], toy["src"], GREEDY) >= 0.99


def test_length_limits_match_per_sentence(toy: dict[str, Any]) -> None:
    """floor(a·|x| + b) per sentence, |x| = pieces + EOS: hypotheses cut at the same place."""
    for a, b in ((0.0, 2), (0.5, 0), (0.0, 1)):
        decode = DecodeConfig(beam=1, max_len_a=a, max_len_b=b)
        assert _agreement(toy["ckpt"], toy["out"], toy["src"][:100], decode) == 1.0


def test_the_limit_and_the_line_joining_are_the_translators(
    toy: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """CT2Translator calls search.max_length and translator.detokenize_lines, as the
    Translator does, rather than copies of them (its only addition: the position table)."""
    tr = ct2.load_ct2_translator(toy["out"], "cpu", GREEDY)
    decode = DecodeConfig(beam=1, max_len_a=2.0, max_len_b=3)
    assert tr.max_length(4, decode) == max_length(5, 2.0, 3) == 13  # |x| = 4 pieces + EOS
    assert tr.max_length(10_000, decode) == tr.max_positions
    calls: list[int] = []

    def joined(tokenizer: Tokenizer, hyps: list[list[int] | None]) -> list[str]:
        calls.append(len(hyps))
        return ["x"] * len(hyps)

    monkeypatch.setattr(ct2, "detokenize_lines", joined)
    assert tr.translate(["a b", ""]) == ["x", "x"] and calls == [2]


def test_variants_post_norm_learned_positions_gelu_untied(toy: dict[str, Any]) -> None:
    """Every option of the Transformer maps onto the spec: post-norm (no final norm),
    learned positions, GELU, separate source/target/output tables, deeper stacks."""
    root = toy["root"]
    src_file, tgt_file = prepare_corpus(tc.data_config(root)).files("train")
    settings = {"model_type": "unigram", "vocab_size": 16, "joint": False}
    tok = load_or_train_tokenizer(src_file, tgt_file, settings, root / "spm-separate")
    over = {
        **{"norm": "post", "positions": "learned", "max_positions": 40, "activation": "gelu"},
        **{"tie_embeddings": False, "share_embeddings": False, "enc_layers": 2, "n_heads": 4},
    }
    ckpt = _checkpoint(root, "variant", over, tok, steps=80)
    info = ct2.export(ckpt, root / "ct2-variant")
    assert info["max_positions"] == 40 and {"src.model", "tgt.model"} <= set(info["files"])
    assert _agreement(ckpt, root / "ct2-variant", toy["src"], GREEDY) >= 0.99


def test_an_immediate_eos_gives_an_empty_translation_in_both(toy: dict[str, Any]) -> None:
    """A model rigged to put EOS first (constant final hidden state e, W_out[EOS] = 10 e):
    attnmt returns "" for every line, and so must CTranslate2 (min_decoding_length=0)."""
    root, tok = toy["root"], toy["tok"]
    model = tc.tiny_model("transformer", tok)
    model.out_proj = torch.nn.Linear(32, tok.tgt_vocab_size, bias=False)
    e = torch.linspace(-1, 1, 32)
    with torch.no_grad():
        model.dec_norm.weight.zero_()
        model.dec_norm.bias.copy_(e)
        model.out_proj.weight.normal_(0, 0.01)
        model.out_proj.weight[3] = 10 * e
    checkpoint = tc.checkpoint(model, tok, root)
    checkpoint.model_config["tie_embeddings"] = False
    ckpt = save_checkpoint(checkpoint, root / "eos.pt")
    ct2.export(ckpt, root / "ct2-eos")
    sentences = toy["src"][:5]
    assert load_translator(ckpt, "cpu", GREEDY).translate(sentences) == [""] * 5
    assert ct2.load_ct2_translator(root / "ct2-eos", "cpu", GREEDY).translate(sentences) == [""] * 5


def test_translate_backend_keeps_one_line_per_input_line(toy: dict[str, Any]) -> None:
    lines = ["f e c d a", "", "   ", "  b   a c d  ", "e d a", ""]
    stdin = "\n".join(lines).encode() + b"\n"
    outs = {}
    for backend, ckpt in (("attnmt", toy["ckpt"]), ("ctranslate2", toy["out"])):
        out = io.BytesIO()
        cfg = {"ckpt": str(ckpt), "backend": backend, "beam": 1, "device": "cpu"}
        translate_run({**cfg, "interactive": False}, io.BytesIO(stdin), out)
        outs[backend] = out.getvalue().decode().split("\n")
    assert outs["ctranslate2"] == outs["attnmt"]
    assert torch.get_num_threads() == 1  # conftest's; CTranslate2 must not raise it
    assert len(outs["ctranslate2"]) == len(lines) + 1  # + the final newline
    assert [t == "" for t in outs["ctranslate2"][:-1]] == [False, True, True, False, False, True]


def test_translate_backend_errors(toy: dict[str, Any]) -> None:
    base = {"beam": 1, "device": "cpu", "interactive": False}
    with pytest.raises(ConfigError, match="is a CTranslate2 export; add backend=ctranslate2"):
        translate_run({**base, "ckpt": str(toy["out"])}, io.BytesIO(b"a\n"), io.BytesIO())
    with pytest.raises(CheckpointError, match="is an attnmt checkpoint, not a CTranslate2"):
        cfg = {**base, "ckpt": str(toy["ckpt"]), "backend": "ctranslate2"}
        translate_run(cfg, io.BytesIO(b"a\n"), io.BytesIO())
    with pytest.raises(CheckpointError, match="not a CTranslate2 model exported by attnmt"):
        cfg = {**base, "ckpt": str(toy["root"] / "spm"), "backend": "ctranslate2"}
        translate_run(cfg, io.BytesIO(b"a\n"), io.BytesIO())
    with pytest.raises(ConfigError, match="backend: 'ct2' is not one of: attnmt, ctranslate2"):
        cfg = {**base, "ckpt": str(toy["out"]), "backend": "ct2"}
        translate_run(cfg, io.BytesIO(b"a\n"), io.BytesIO())


def test_long_lines_are_cut_to_the_position_table(toy: dict[str, Any], caplog) -> None:  # type: ignore[no-untyped-def]
    out = toy["root"] / "ct2-short"
    ct2.export(toy["ckpt"], out, max_positions=6, verify=False)
    translator = ct2.load_ct2_translator(out, "cpu", GREEDY)
    with caplog.at_level(logging.WARNING):
        texts = translator.translate(["a b c d e f a b c d e f", "a b"])
    assert len(texts) == 2 and "translated from their first 5 pieces" in caplog.text


def test_export_script(toy: dict[str, Any], monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    out = toy["root"] / "ct2-int8"
    args = [f"ckpt={toy['ckpt']}", f"out={out}", "quantization=int8"]
    code, stdout, _ = tc.run_entry_point("scripts/export_ctranslate2", args, monkeypatch, capsys)
    assert code == 0 and f"{out}/model.bin" in stdout and "backend=ctranslate2" in stdout
    assert json.loads((out / ct2.EXPORT_FILE).read_text())["quantization"] == "int8"
    hyps = ct2.load_ct2_translator(out, "cpu", GREEDY).translate(toy["src"][:20])
    assert len(hyps) == 20 and any(hyps)
    code, _, err = tc.run_entry_point("scripts/export_ctranslate2", args, monkeypatch, capsys)
    assert code == 2 and err.startswith("error: out=") and "force=true" in err
    again = [*args[:2], "force=true"]  # a previous export is replaced: float32 now
    code, _, err = tc.run_entry_point("scripts/export_ctranslate2", again, monkeypatch, capsys)
    assert code == 0, err
    assert json.loads((out / ct2.EXPORT_FILE).read_text())["quantization"] == "float32"
    code, _, err = tc.run_entry_point(
        "scripts/export_ctranslate2", [*args, "quantisation=int8"], monkeypatch, capsys
    )
    assert code == 2 and "did you mean quantization" in err


def test_rnn_checkpoints_are_refused(toy: dict[str, Any]) -> None:
    model = tc.tiny_model("rnn_luong", toy["tok"])
    ckpt = save_checkpoint(tc.checkpoint(model, toy["tok"], toy["root"]), toy["root"] / "rnn.pt")
    with pytest.raises(ConfigError, match="only Transformer checkpoints can be exported"):
        ct2.export(ckpt, toy["root"] / "ct2-rnn")
    assert not (toy["root"] / "ct2-rnn").exists()


@dataclasses.dataclass
class _FutureConfig(TransformerConfig):
    relative_positions: int = 0  # an option the exporter does not know


def test_an_option_the_spec_cannot_express_is_named(toy: dict[str, Any]) -> None:
    model = tc.tiny_model("transformer", toy["tok"])
    ct2.check_expressible(model)  # every current option is expressible
    model.config = dataclasses.replace(model.config, activation="swish")
    with pytest.raises(ConfigError, match=r"model.activation='swish' cannot be expressed"):
        ct2.check_expressible(model)
    model.config = _FutureConfig(**tc.MODEL_CONFIGS["transformer"], relative_positions=16)
    with pytest.raises(ConfigError, match=r"model.relative_positions=16 cannot be expressed"):
        ct2.check_expressible(model)
    model.config = _FutureConfig(**tc.MODEL_CONFIGS["transformer"])  # its default: fine
    ct2.check_expressible(model)


def test_a_missing_ctranslate2_says_how_to_install_it(toy: dict[str, Any], monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    with pytest.raises(ConfigError, match=r"pip install 'attnmt\[ct2\]'"):
        ct2.export(toy["ckpt"], toy["root"] / "never")
    with pytest.raises(ConfigError, match=r"pip install 'attnmt\[ct2\]'"):
        ct2.load_ct2_translator(toy["out"])


def test_a_decode_stops_between_its_batches(toy: dict[str, Any]) -> None:
    """CTranslate2 cannot stop inside a call: the export decodes the Translator's batches
    one call each and checks ``should_stop`` before each (Ctrl-C, serve.py stopping)."""
    translator = ct2.load_ct2_translator(toy["out"], "cpu", DecodeConfig(beam=2, batch_tokens=1))
    real, calls = translator.translator, []

    class Counting:
        def translate_batch(self, *args: Any, **kw: Any) -> Any:
            calls.append(len(args[0]))
            return real.translate_batch(*args, **kw)

    translator.translator = Counting()
    translator.should_stop = lambda: len(calls) >= 2
    with pytest.raises(KeyboardInterrupt):
        translator.piece_ids(toy["src"][:10])
    assert calls == [1, 1]
