"""RNN encoder over right-padded sequences, the encoder→decoder bridge, and the decoder RNN
call.

Hidden states are stored layer-second, [B, L, H], so that dim 0 is the batch in every
decoder-state leaf (beam search reorders states with ``index_select(0, …)``); PyTorch's
RNNs want [L, B, H], so :func:`rnn_run` transposes on the way in and out.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

#: ``model.cell`` -> recurrent layer class (both take input_size, hidden_size, num_layers, …)
CELLS: dict[str, type[nn.GRU] | type[nn.LSTM]] = {"gru": nn.GRU, "lstm": nn.LSTM}


class RNNEncoder(nn.Module):
    """Multi-layer (bi)directional GRU/LSTM over right-padded sequences.

    forward(embedded [B,S,E], src_pad_mask [B,S] True=pad) ->
      outputs [B,S,dirs·H] (0 at padding), final {"h": [B,dirs·H], "c": [B,dirs·H] (LSTM)}
    where final holds the top layer's last states, forward ⊕ backward. Every output is
    independent of padding, computed one of two ways:

    * GRU on CPU: each layer and direction is one ``torch.gru`` call on the padded batch. The
      forward direction meets the padding only after a row's last token; the backward one
      runs on each row reversed within its length (x'_t = x_{n-1-t} for t < n, padding left
      in place), so it too reaches the padding last, and its outputs are reversed back.
      The final states are read from the outputs (a GRU's output is its state): forward at
      t = n-1, backward at t = 0. Same values as packing, without the packed backward's
      per-time-step zero-filled gradients of the whole sequence (the largest cost of the
      encoder's backward on CPU, profiled); the price is the recurrence over the padding.
    * LSTM, and any cell on an accelerator (cuDNN runs packed sequences in one fused call):
      ``pack_padded_sequence`` (``enforce_sorted=False``) through the module. An LSTM's
      final cell state is not among its outputs, so it cannot take the padded path.
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
        if isinstance(self.rnn, nn.GRU) and embedded.device.type == "cpu":
            return self._gru_padded(embedded, src_pad_mask)
        lengths = (~src_pad_mask).sum(dim=1).clamp(min=1).cpu()
        packed = pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
        out, final = self.rnn(packed)
        outputs, _ = pad_packed_sequence(out, batch_first=True, total_length=embedded.size(1))
        if isinstance(final, tuple):  # LSTM: (h_n, c_n)
            return outputs, {"h": self._top(final[0]), "c": self._top(final[1])}
        return outputs, {"h": self._top(final)}

    def _gru_padded(
        self, embedded: Tensor, src_pad_mask: Tensor
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The GRU path of :meth:`forward` (see the class docstring)."""
        batch, steps = src_pad_mask.shape
        lengths = (~src_pad_mask).sum(dim=1).clamp(min=1)  # n [B]
        positions = torch.arange(steps, device=src_pad_mask.device)
        # t -> n-1-t on real positions, t -> t on padding: reverses each row in place
        flip = torch.where(src_pad_mask, positions, lengths.unsqueeze(1) - 1 - positions)
        weights = dict(self.rnn.named_parameters())
        x, outs = embedded, []
        for layer in range(self.num_layers):
            if layer > 0 and self.training and self.rnn.dropout > 0:  # as nn.GRU: between layers
                x = F.dropout(x, self.rnn.dropout, training=True)
            outs = [self._direction(x, weights, f"_l{layer}")]
            if self.num_dirs == 2:
                reverse = self._direction(_take(x, flip), weights, f"_l{layer}_reverse")
                outs.append(_take(reverse, flip))
            x = torch.cat(outs, dim=-1) if len(outs) > 1 else outs[0]
        last = (lengths - 1).view(batch, 1, 1).expand(batch, 1, outs[0].size(-1))
        finals = [outs[0].gather(1, last).squeeze(1)]  # forward: state after token n-1
        if self.num_dirs == 2:
            finals.append(outs[1][:, 0])  # backward: state after token 0
        outputs = x.masked_fill(src_pad_mask.unsqueeze(-1), 0.0)
        return outputs, {"h": torch.cat(finals, dim=-1)}

    def _direction(self, x: Tensor, weights: Mapping[str, Tensor], suffix: str) -> Tensor:
        """One layer and direction of the GRU over x [B,S,I] from a zero state -> [B,S,H]."""
        names = ("weight_ih", "weight_hh", "bias_ih", "bias_hh")[: 4 if self.rnn.bias else 2]
        params = [weights[name + suffix] for name in names]
        h0 = x.new_zeros(1, x.size(0), self.rnn.hidden_size)
        out, _ = torch.gru(x, h0, params, self.rnn.bias, 1, 0.0, self.training, False, True)
        return out


def _take(x: Tensor, index: Tensor) -> Tensor:
    """x [B,S,D] reordered along time per row: out[b, t] = x[b, index[b, t]]."""
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.size(-1)))


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
