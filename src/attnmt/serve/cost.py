"""A request's decode work, counted from its tokenized lines before it is decoded, and the
server's limit on it (``max_decode_work``).

The unit is the **decoder position**: one target position computed for one row of the
decoder. A request's work is the sum over its lines that are decoded (not blank) of

    beam × T_i          the search: ``beam`` rows, each for at most T_i steps
  + n_best × T_i        with attention or alignments: each kept translation is
                        teacher-forced once for its maps (at most T_i pieces + </s>)
  + |r_i| + 1           with a reference: its target pieces and </s>, teacher-forced once

where T_i = min(floor(a·(|x_i| + 1) + b), the model's cap) is the line's length limit
(``max_len_a``, ``max_len_b``; |x_i| its source pieces after the ``max_src_len`` cut), the
most steps the search may take: a model that never ends a hypothesis (an untrained one)
takes all of them, so the count is what the request may cost, not what a trained model
usually spends. ``n_best`` only adds work through the maps (the search keeps ``beam``
rows whatever the n-best list's length); a CTranslate2 model has neither maps nor
references. A decoder position of a longer line costs more time (its attention reads
more source and target positions), so the limit is set with lines at ``max_src_len``:
:mod:`benchmarks.serve_cost` and docs/serve.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnmt.decode.translator import cut_sources
from attnmt.serve.api import ApiError
from attnmt.serve.backend import Options, ServedModel
from attnmt.serve.references import Reference


@dataclass(frozen=True)
class DecodeWork:
    """A request's decode work in decoder positions, by part, and per line (the running
    sums let a refusal say how many of its first lines fit)."""

    search: int  # Σ beam × T_i
    maps: int  # Σ n_best × T_i with attention or alignments, else 0
    references: int  # Σ (|r_i| + 1) over the lines with a reference
    lines: int  # lines decoded (blank ones cost nothing)
    longest: int  # the largest T_i
    per_line: tuple[int, ...]  # each line's work, in order (0 for a blank line)

    @property
    def total(self) -> int:
        return self.search + self.maps + self.references

    def lines_within(self, limit: int) -> int:
        """How many of the request's first lines cost at most ``limit`` together."""
        used = 0
        for n, cost in enumerate(self.per_line):
            used += cost
            if used > limit:
                return n
        return len(self.per_line)


def decode_work(
    model: ServedModel,
    lines: Sequence[str],
    options: Options,
    references: Sequence[Reference | None] | None = None,
) -> DecodeWork:
    """The :class:`DecodeWork` of decoding ``lines`` with ``options`` (and ``references``)
    on ``model``, from the lines' source pieces as the model will cut them."""
    tok = model.translator.tokenizer
    ids, _ = cut_sources(tok, lines, model.source_limit())
    maps_per_step = options.n_best if (options.attention or options.alignments) else 0
    if not model.has_attention:
        maps_per_step = 0
    ref_pieces: dict[int, int] = {}
    if references is not None and model.has_attention:
        given = [(i, r.text) for i, r in enumerate(references) if r is not None]
        encoded = tok.encode_tgt([text for _, text in given])
        ref_pieces = {i: len(x) + 1 for (i, _), x in zip(given, encoded)}
    search = maps = refs = decoded = longest = 0
    per_line = []
    for i, (line, x) in enumerate(zip(lines, ids)):
        if not (line.strip() and x):
            per_line.append(0)
            continue
        steps = model.length_limit(len(x))
        decoded, longest = decoded + 1, max(longest, steps)
        line_search, line_maps = options.beam * steps, maps_per_step * steps
        line_ref = ref_pieces.get(i, 0)
        search, maps, refs = search + line_search, maps + line_maps, refs + line_ref
        per_line.append(line_search + line_maps + line_ref)
    return DecodeWork(search, maps, refs, decoded, longest, tuple(per_line))


def check_work(work: DecodeWork, limit: int, options: Options) -> None:
    """ApiError 413 naming the work, its parts, the limit and what to lower when
    ``work.total`` is over ``limit``."""
    if work.total <= limit:
        return
    parts = [f"search {work.search:,} (beam {options.beam} × length limits up to {work.longest})"]
    if work.maps:
        parts.append(f"maps {work.maps:,} (n_best {options.n_best} with attention/alignments)")
    if work.references:
        parts.append(f"references {work.references:,}")
    fit = work.lines_within(limit)
    room = f"its first {fit} lines fit" if fit else "not even its first line fits"
    raise ApiError(
        413,
        "text",
        f"text: this request's decode work is {work.total:,} decoder positions, over this "
        f"server's limit of {limit:,} (max_decode_work): {', '.join(parts)} over "
        f"{work.lines} lines; {room}: send fewer or shorter lines, a smaller beam, or a "
        "smaller n_best (with attention or alignments) or fewer references",
    )
