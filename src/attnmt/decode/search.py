"""Greedy and batched beam search over the one model interface (attnmt.models.base).

Both only call ``encode``, ``init_state`` and ``decode_step``, and reorder states with
:meth:`~attnmt.models.base.Seq2Seq.reorder_state` (by default ``select_state``), so every
registered model (Transformer with its key/value cache, RNNs with their hidden state) gets
them for free. Beam search tells it when rows only move within each sentence's beams, so the
entries that depend on the source alone (cross-attention keys/values, memory) are not copied.

Conventions shared by both searches:

* Call ``model.eval()`` first; the searches run under ``torch.no_grad()``.
* The source length ``|x|`` of a sentence counts its real (non-pad) tokens, EOS included.
  A hypothesis holds at most ``max_len = floor(a·|x| + b)`` target pieces, and never more
  than the model's hard cap ``model.max_target_length()`` (Transformer: its
  ``max_positions - 1``; RNNs: ``MAX_DECODE_LENGTH``); one that reaches the limit without
  EOS is kept as it is (``finished=False``).
* ``should_stop``: a callable checked before every decoder step; when it returns True the search
  raises KeyboardInterrupt (a signal during a long decode is honoured within one step).
* PAD and BOS are never produced.
* ``Hypothesis.attention`` has one row per decoder step: ``len(tokens) + 1`` rows when EOS
  was produced, ``len(tokens)`` otherwise; columns are the real source positions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnmt import BOS_ID, EOS_ID, PAD_ID
from attnmt.batch import Batch
from attnmt.errors import ConfigError
from attnmt.models.base import Seq2Seq


@dataclass
class Hypothesis:
    """One output sentence.

    tokens:    target piece ids, without BOS and EOS
    score:     greedy: Σ log p; beam: Σ log p / lp(|Y|), the score used for ranking
    attention: FloatTensor [steps, S_real] on CPU, cross-attention of each decoder step
    finished:  True when the hypothesis ended with EOS (False: stopped at max length)
    """

    tokens: list[int]
    score: float
    attention: Tensor
    finished: bool = True


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def max_length(src_len: int, max_len_a: float, max_len_b: int) -> int:
    """The target length limit floor(a·|x| + b), at least 1, for a source of ``src_len``
    = |x| real tokens (pieces + EOS)."""
    return max(1, math.floor(max_len_a * src_len + max_len_b))


def max_lengths(
    src_pad_mask: Tensor, max_len_a: float, max_len_b: int, cap: int | None = None
) -> list[int]:
    """Per-sentence :func:`max_length` from src_pad_mask [B,S], at most ``cap``."""
    src_lens = (~src_pad_mask).sum(dim=1).tolist()
    limit = cap if cap is not None else math.inf
    return [int(min(max_length(n, max_len_a, max_len_b), limit)) for n in src_lens]


def length_cap(model: Seq2Seq) -> int | None:
    """The model's hard cap on a hypothesis' length (``Seq2Seq.max_target_length``)."""
    cap = getattr(model, "max_target_length", None)
    return int(cap()) if callable(cap) else None


StopCheck = Callable[[], bool]
"""Called between decoder steps; True asks the search to stop (it raises KeyboardInterrupt)."""


def _check_stop(should_stop: StopCheck | None) -> None:
    if should_stop is not None and should_stop():
        raise KeyboardInterrupt


def _banned(log_probs: Tensor) -> Tensor:
    """log_probs [N,V] as float32 with PAD and BOS set to -inf."""
    log_probs = log_probs.float().clone()
    log_probs[:, PAD_ID] = -math.inf
    log_probs[:, BOS_ID] = -math.inf
    return log_probs


def _start(model: Seq2Seq, batch: Batch) -> tuple[Any, list[int], int]:
    """Encode and build the initial decoder state; also return real source lengths and S."""
    memory = model.encode(batch.src, batch.src_pad_mask)
    state = model.init_state(memory, batch.src_pad_mask)
    src_lens = (~batch.src_pad_mask).sum(dim=1).tolist()
    return state, src_lens, batch.src.size(1)


@torch.no_grad()
def greedy_search(
    model: Seq2Seq,
    batch: Batch,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    should_stop: StopCheck | None = None,
) -> list[Hypothesis]:
    """y_t = argmax_v log p(v | y_<t, x) until EOS or the length limit, batched.

    Finished sentences leave the batch (their state rows are dropped), so the cost
    follows the longest *unfinished* sentence. Returns one Hypothesis per sentence,
    in batch order; ``score`` is the sum of the chosen log-probs.
    """
    device = batch.src.device
    state, src_lens, _ = _start(model, batch)
    limits = max_lengths(batch.src_pad_mask, max_len_a, max_len_b, length_cap(model))
    n = len(batch)
    tokens: list[list[int]] = [[] for _ in range(n)]
    attns: list[list[Tensor]] = [[] for _ in range(n)]
    scores = [0.0] * n
    done: list[Hypothesis | None] = [None] * n
    alive = list(range(n))  # sentence ids of the state rows, in order
    prev = torch.full((n,), BOS_ID, dtype=torch.long, device=device)
    while alive:
        _check_stop(should_stop)
        log_probs, state, attn = model.decode_step(state, prev)
        best_lp, best = _banned(log_probs).max(dim=-1)  # [A]
        attn_cpu, best_cpu, lp_cpu = attn.float().cpu(), best.tolist(), best_lp.tolist()
        keep: list[int] = []
        for row, sent in enumerate(alive):
            tok = best_cpu[row]
            scores[sent] += lp_cpu[row]
            attns[sent].append(attn_cpu[row, : src_lens[sent]])
            if tok != EOS_ID:
                tokens[sent].append(tok)
            if tok == EOS_ID or len(tokens[sent]) >= limits[sent]:
                done[sent] = Hypothesis(
                    tokens[sent], scores[sent], torch.stack(attns[sent]), tok == EOS_ID
                )
            else:
                keep.append(row)
        if len(keep) < len(alive):
            alive = [alive[r] for r in keep]
            if not alive:
                break
            rows = torch.tensor(keep, dtype=torch.long, device=device)
            state, best = model.reorder_state(state, rows, rows), best.index_select(0, rows)
        prev = best
    return [h for h in done if h is not None]


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    batch: Batch,
    beam_size: int = 5,
    alpha: float = 0.6,
    max_len_a: float = 1.5,
    max_len_b: int = 10,
    n_best: int = 1,
    should_stop: StopCheck | None = None,
) -> list[list[Hypothesis]]:
    """Batched beam search with the GNMT length penalty; n-best lists per sentence.

    The state is expanded to [B·k] rows with ``model.reorder_state``. Each step scores every
    extension ``s(y_≤t) = s(y_<t) + log p(y_t | y_<t, x)`` and takes the top 2k over
    the k beams × V pieces of a sentence: EOS candidates ranked within the top k become
    finished hypotheses with score ``s / lp(|Y|)`` (|Y| = decoder steps, EOS included);
    the k best non-EOS candidates continue. A sentence is done once it has k finished
    hypotheses or its beams reach the length limit (they are then kept unfinished,
    scored ``s / lp(|Y|)`` too); done sentences leave the batch. The search stops when
    every sentence is done. Returns, per sentence, its n_best hypotheses, best first.
    """
    if beam_size < 1:
        raise ConfigError(f"beam size must be >= 1, got beam={beam_size}")
    if not 1 <= n_best <= beam_size:
        raise ConfigError(f"n_best must be between 1 and beam={beam_size}, got {n_best}")
    k, device = beam_size, batch.src.device
    state, src_lens, src_width = _start(model, batch)
    limits = max_lengths(batch.src_pad_mask, max_len_a, max_len_b, length_cap(model))
    n = len(batch)
    expand = torch.arange(n, device=device).repeat_interleave(k)
    state = model.reorder_state(state, expand, expand)
    alive = list(range(n))  # sentence of each group of k rows
    scores = torch.full((n, k), -math.inf, device=device)  # [A,k] cumulative log-prob
    scores[:, 0] = 0.0  # all beams start identical: expand only the first one
    tokens = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=device)  # [A·k, t+1]
    attn_hist = torch.zeros(n * k, 0, src_width, device=device)  # [A·k, t, S]
    finished: list[list[Hypothesis]] = [[] for _ in range(n)]
    ranks = torch.arange(2 * k, device=device)
    step = 0
    while alive:
        _check_stop(should_stop)
        a_size = len(alive)
        log_probs, state, attn = model.decode_step(state, tokens[:, -1])
        log_probs = _banned(log_probs)
        vocab = log_probs.size(-1)
        step += 1
        attn_hist = torch.cat([attn_hist, attn.float().unsqueeze(1)], dim=1)
        cand = scores.unsqueeze(-1) + log_probs.view(a_size, k, vocab)  # [A,k,V]
        top_scores, top_idx = cand.view(a_size, -1).topk(min(2 * k, k * vocab), dim=1)
        origin = top_idx // vocab  # [A,2k] beam of each candidate
        token = top_idx % vocab  # [A,2k]
        is_eos = token.eq(EOS_ID)
        dead = torch.isinf(top_scores)
        # EOS candidates within the top k ranks finish
        eos_hits = (is_eos & ~dead)[:, :k].nonzero().tolist()
        lp = length_penalty(step, alpha)
        for g, r in eos_hits:
            sent, row = alive[g], g * k + int(origin[g, r])
            hist = attn_hist[row, :, : src_lens[sent]].to("cpu", copy=True)
            finished[sent].append(
                Hypothesis(tokens[row, 1:].tolist(), float(top_scores[g, r]) / lp, hist)
            )
        # the k best non-EOS candidates continue: push EOS/dead ones to the back (stable);
        # when fewer than k are left (k close to V), the slots they fill stay dead (-inf)
        stop = is_eos | dead
        order = (stop.long() * 2 * k + ranks[: top_idx.size(1)]).argsort(dim=1)[:, :k]
        next_scores = top_scores.gather(1, order).masked_fill(stop.gather(1, order), -math.inf)
        rows = torch.arange(a_size, device=device).unsqueeze(1) * k + origin.gather(1, order)
        rows, next_tokens = rows.view(-1), token.gather(1, order).view(-1)  # [A·k]
        tokens = torch.cat([tokens.index_select(0, rows), next_tokens.unsqueeze(1)], dim=1)
        attn_hist = attn_hist.index_select(0, rows)
        keep: list[int] = []
        source_rows: Tensor | None = None  # None: every row stays with its sentence
        live = ~torch.isinf(next_scores).all(dim=1)  # [A] a sentence with a beam left
        live_cpu = live.tolist()
        for g, sent in enumerate(alive):
            if len(finished[sent]) >= k or not live_cpu[g]:
                continue
            if step >= limits[sent]:  # length limit: the live beams end here, unfinished
                for j in range(k):
                    if not math.isinf(float(next_scores[g, j])):
                        row = g * k + j
                        finished[sent].append(
                            Hypothesis(
                                tokens[row, 1:].tolist(),
                                float(next_scores[g, j]) / lp,
                                attn_hist[row, :, : src_lens[sent]].to("cpu", copy=True),
                                finished=False,
                            )
                        )
                continue
            keep.append(g)
        if len(keep) < a_size:
            alive = [alive[g] for g in keep]
            if not alive:
                break
            groups = torch.tensor(keep, dtype=torch.long, device=device)
            keep_rows = (groups.unsqueeze(1) * k + torch.arange(k, device=device)).view(-1)
            rows, source_rows = rows.index_select(0, keep_rows), keep_rows
            tokens, attn_hist = (
                tokens.index_select(0, keep_rows),
                attn_hist.index_select(0, keep_rows),
            )
            next_scores = next_scores.index_select(0, groups)
        state = model.reorder_state(state, rows, source_rows)
        scores = next_scores
    for sent, hyps in enumerate(finished):
        if not hyps:  # only if every continuation had probability 0
            hyps.append(Hypothesis([], -math.inf, torch.zeros(0, src_lens[sent]), False))
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]


def translate_batch(
    model: Seq2Seq, batch: Batch, beam_size: int = 1, **kw: Any
) -> list[Hypothesis]:
    """The 1-best hypothesis per sentence: greedy when beam_size == 1, else beam search.

    ``kw``: ``max_len_a``, ``max_len_b`` and, for beam search, ``alpha``.
    """
    if beam_size == 1:
        kw.pop("alpha", None)
        kw.pop("n_best", None)
        return greedy_search(model, batch, **kw)
    return [hyps[0] for hyps in beam_search(model, batch, beam_size=beam_size, **kw)]
