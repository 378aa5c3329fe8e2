"""RNN encoder over packed sequences, the encoder→decoder bridge, and the decoder RNN call.

Hidden states are stored layer-second, [B, L, H], so that dim 0 is the batch in every
decoder-state leaf (beam search reorders states with ``index_select(0, …)``); PyTorch's
RNNs want [L, B, H], so :func:`rnn_run` transposes on the way in and out.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

#: ``model.cell`` -> recurrent layer class (both take input_size, hidden_size, num_layers, …)
CELLS: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


class RNNEncoder(nn.Module):
    """Multi-layer (bi)directional GRU/LSTM over packed, right-padded sequences.

    forward(embedded [B,S,E], src_pad_mask [B,S] True=pad) ->
      outputs [B,S,dirs·H] (0 at padding), final {"h": [B,dirs·H], "c": [B,dirs·H] (LSTM)}
    where final holds the top layer's last states, forward ⊕ backward.
    Packing (``enforce_sorted=False``) makes every output independent of padding.
    """

    def __init__(
        self,
        cell: str,
        emb_dim: int,
        hidden_size: int,
        num_layers: int,
        bidirectional: bool,
        dropout: float,
    ) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.num_dirs = 2 if bidirectional else 1
        self.rnn = CELLS[cell](
            emb_dim,
            hidden_size,
            num_layers,
            batch_first=True,
            bidirectional=bidirectional,
            dropout=dropout if num_layers > 1 else 0.0,
        )
        self.output_dim = self.num_dirs * hidden_size

    def _top(self, state: Tensor) -> Tensor:
        """[L·dirs, B, H] -> top layer, directions concatenated: [B, dirs·H]."""
        _, batch, hidden = state.shape
        top = state.view(self.num_layers, self.num_dirs, batch, hidden)[-1]  # [dirs,B,H]
        return top.transpose(0, 1).reshape(batch, self.num_dirs * hidden)

    def forward(self, embedded: Tensor, src_pad_mask: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
        lengths = (~src_pad_mask).sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=embedded.size(1))
        if isinstance(final, tuple):  # LSTM: (h_n, c_n)
            return outputs, {"h": self._top(final[0]), "c": self._top(final[1])}
        return outputs, {"h": self._top(final)}


class Bridge(nn.Module):
    """Initial decoder state per layer l: s₀⁽ˡ⁾ = tanh(W_l h_enc + b_l).

    final [B, Din] -> [B, L, H] (layer-second).
    """

    def __init__(self, in_dim: int, out_dim: int, num_layers: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(in_dim, out_dim) for _ in range(num_layers))

    def forward(self, final: Tensor) -> Tensor:
        return torch.stack([layer(final).tanh() for layer in self.layers], dim=1)


def rnn_run(rnn: nn.RNNBase, x: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict]:
    """The decoder RNN over T steps: x [B,T,I] with state {"hidden": [B,L,H], "cell"?:
    [B,L,H]} -> (top-layer outputs [B,T,H], {"hidden": [B,L,H], "cell"?: [B,L,H]})."""
    h = state["hidden"].transpose(0, 1).contiguous()  # [L,B,H]
    if "cell" in state:
        c = state["cell"].transpose(0, 1).contiguous()
        out, (h, c) = rnn(x, (h, c))
        return out, {"hidden": h.transpose(0, 1), "cell": c.transpose(0, 1)}
    out, h = rnn(x, h)
    return out, {"hidden": h.transpose(0, 1)}


def rnn_step(rnn: nn.RNNBase, x: Tensor, state: dict[str, Tensor]) -> tuple[Tensor, dict]:
    """One decoder step: x [B,I] -> (top-layer output [B,H], new state); see :func:`rnn_run`."""
    out, new_state = rnn_run(rnn, x.unsqueeze(1), state)
    return out[:, 0], new_state
