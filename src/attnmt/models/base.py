"""The one interface that training, search, evaluation and plotting use.

Every model is an encoder–decoder over the shared special ids (attnmt.PAD_ID …)
and implements:

* ``encode(src [B,S], src_pad_mask [B,S]) -> memory``  (a dict of batch-first tensors)
* ``init_state(memory, src_pad_mask) -> state``         (a dict; leaves are tensors
  whose dim 0 is the batch, or lists/tuples/dicts of such tensors)
* ``decode_step(state, prev_tokens [B]) -> (log_probs [B,V], state, attn [B,S])``
  ``attn`` is this step's cross-attention over the source (for a Transformer: the
  last layer's, averaged over heads); it is 0 on padding.
* ``forward(batch) -> logits [B,T,V]``                  (teacher forcing)
* ``attention(batch) -> dict[str, Tensor]``             teacher-forced attention maps:
  ``"cross"`` [B,T,S] always; Transformers add ``"cross/layer{i}"`` [B,H,T,S],
  ``"self/layer{i}"`` [B,H,T,T] (decoder) and ``"enc_self/layer{i}"`` [B,H,S,S].

Models whose training forward can also hand back one cross-attention map (the Transformer,
the RNNs) report its layout with :meth:`Seq2Seq.guidable_attention` and take a
:class:`CrossAttentionRequest`: ``forward(batch, request) -> (logits [B,T,V], attn
[B,T,S])``, row t being the step that predicts ``tgt_out[:, t]`` (guided alignment trains it;
without a request the forward computes no weights and stays on the fused path).

The searches reorder, expand or drop a state's rows with :meth:`Seq2Seq.reorder_state`:
by default :func:`select_state` (``index_select`` on dim 0 of every leaf), so models never
need their own reorder code. A model may name the entries that depend on the source sentence
alone (``source_state``: memory, its projected keys, the mask), which a reorder within each
sentence's beams leaves as they are instead of copying them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from torch import Tensor, nn

from attnmt.batch import Batch

State = dict[str, Any]

M = TypeVar("M", bound=nn.Module)


class TypedModuleList(nn.ModuleList, Generic[M]):
    """An ``nn.ModuleList`` of modules of one type ``M``, which iteration yields as ``M``
    (torch types every item as ``nn.Module``, whose attributes are ``Tensor | Module``).
    At run time it is ``nn.ModuleList`` unchanged: the two signatures below are for the
    type checker only."""

    if TYPE_CHECKING:

        def __init__(self, modules: Iterable[M] = ()) -> None: ...

        def __iter__(self) -> Iterator[M]: ...


def map_state(state: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """Apply ``fn`` to every tensor leaf of a nested dict/list/tuple state."""
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_state(v, fn) for k, v in state.items()}
    if isinstance(state, list):
        return [map_state(v, fn) for v in state]
    if isinstance(state, tuple):
        return tuple(map_state(v, fn) for v in state)
    return state


def select_state(state: Any, index: Tensor) -> Any:
    """Reorder/expand every leaf along the batch dim: ``leaf.index_select(0, index)``."""
    return map_state(state, lambda t: t.index_select(0, index))


@dataclass(frozen=True)
class CrossAttentionRequest:
    """Which cross-attention map a training forward returns beside its logits.

    layer: decoder layer, Python indexing (-1: the last); an RNN has one map (-1 or 0).
    heads: the heads averaged (None: all of them); an RNN's map is its one head (0).
    """

    layer: int = -1
    heads: tuple[int, ...] | None = None


MAX_DECODE_LENGTH = 1024
"""Hard cap on a hypothesis' length for models without a position table (RNNs): the
Transformer's default ``max_positions``, far beyond any sentence (``decode.max_src_len``
is 250 pieces), so an untrained model that never emits </s> stops in bounded time."""


class Seq2Seq(nn.Module, ABC):
    """Base class of every registered model (see module docstring for the contract)."""

    #: registry name, set by the registry; stored in checkpoints
    name: str = ""
    #: state entries that depend on the source sentence alone (equal in every beam of one
    #: sentence): :meth:`reorder_state` selects them with ``source_index`` only
    source_state: ClassVar[tuple[str, ...]] = ()

    def reorder_state(
        self, state: State, index: Tensor, source_index: Tensor | None = None
    ) -> State:
        """The state whose row i is row ``index[i]`` of ``state`` (reorder, expand, drop).

        ``source_index`` [B'] is a hint for the :attr:`source_state` entries: row
        ``index[i]`` belongs to the same sentence as row ``source_index[i]``; None means
        to the same sentence as row i (a reorder within each sentence's beams, row count
        unchanged), so those entries are kept as they are. Every other entry:
        :func:`select_state` with ``index``. The result equals ``select_state(state,
        index)`` whenever the hint is true.
        """
        out = {}
        for key, value in state.items():
            if key not in self.source_state:
                out[key] = select_state(value, index)
            elif source_index is not None:
                out[key] = select_state(value, source_index)
            else:
                out[key] = value
        return out

    def guidable_attention(self) -> tuple[int, int] | None:
        """(decoder layers, heads) of the cross-attention that ``forward(batch, request)``
        can return (:class:`CrossAttentionRequest`); None when the model's forward takes
        no request (it cannot be trained with guided alignment)."""
        return None

    def max_target_length(self) -> int:
        """The most target pieces a hypothesis may hold (EOS not counted): the hard cap on
        decoding, whatever ``decode.max_len_a/b`` ask for. Models without a position table
        (RNNs) get :data:`MAX_DECODE_LENGTH`."""
        return MAX_DECODE_LENGTH

    @abstractmethod
    def encode(self, src: Tensor, src_pad_mask: Tensor) -> State:
        """src [B,S] ids, src_pad_mask [B,S] (True = pad) -> memory dict."""

    @abstractmethod
    def init_state(self, memory: State, src_pad_mask: Tensor) -> State:
        """Decoder state before the first step (holds what decode_step needs of memory)."""

    @abstractmethod
    def decode_step(self, state: State, prev_tokens: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev_tokens [B] -> (log_probs [B,V], new state, cross-attention [B,S])."""

    @abstractmethod
    def attention(self, batch: Batch) -> dict[str, Tensor]:
        """Teacher-forced attention maps for ``batch`` (see module docstring)."""
