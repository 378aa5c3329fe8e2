"""One step of the decoder RNN, written out over the parameters of its ``nn.GRU``/``nn.LSTM``.

The first layer's input at step t is x_t = [E y_{t-1}; e_t], where e_t is what the decoder
adds per step (Luong's h̃_{t-1} with input feeding, Bahdanau's context c_t, or nothing).
Its input projection splits by columns of W_ih:

    W_ih x_t + b_ih = (W_ih[:, :E] E y_{t-1} + b_ih) + W_ih[:, E:] e_t

The first term depends on the target embeddings only, which teacher forcing knows for every
t, so :meth:`DecoderCell.project` computes it for all steps in one matmul [B,T,E] ->
[B,T,G·H] before the loop; :meth:`DecoderCell.step` adds the per-step term and the
recurrent one. Incremental decoding projects its one token with the same call, so both
paths run the same equations. The parameters stay the module's own (``weight_ih_l0``,
``weight_hh_l0``, ``bias_ih_l0``, ``bias_hh_l0``, … of ``model.decoder``): state dicts and
checkpoints are unchanged. With g = W_ih x + b_ih and the gates of PyTorch's nn.GRU/nn.LSTM:

    GRU   r = σ(g_r + W_hr h + b_hr),  z = σ(g_z + W_hz h + b_hz)
          n = tanh(g_n + r ⊙ (W_hn h + b_hn)),  h' = (1 − z) ⊙ n + z ⊙ h
    LSTM  i, f, o = σ(·), g̃ = tanh(·) of the chunks of g + W_hh h + b_hh
          c' = f ⊙ c + i ⊙ g̃,  h' = o ⊙ tanh(c')

(for an LSTM, b_hh joins the projected term). Layers above the first take the output of
the layer below, through dropout p = ``rnn.dropout`` in training as ``nn.GRU`` applies it.
Shapes: G = 3 (GRU) or 4 (LSTM) gate blocks of H = ``hidden_size``; the state is stored
layer-second as everywhere in the decoder: hidden [B,L,H], cell [B,L,H] (LSTM).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class DecoderCell:
    """A decoder RNN's weights, viewed once per forward pass, and its step function.

    rnn: the decoder's ``nn.GRU``/``nn.LSTM`` (unidirectional, no projection);
    emb_dim: E, the leading input columns that :meth:`project` covers. The views are made
    once per teacher-forced pass, so each step's backward accumulates into them and the
    slicing's backward runs once, not once per step.
    """

    def __init__(self, rnn: nn.RNNBase, emb_dim: int) -> None:
        self.lstm = isinstance(rnn, nn.LSTM)
        self.dropout = rnn.dropout if rnn.training else 0.0
        self.layers = range(rnn.num_layers)
        weights: dict[str, Tensor] = dict(rnn.named_parameters())
        w_ih0 = weights["weight_ih_l0"]
        self.w_emb = w_ih0[:, :emb_dim]  # [G·H, E]
        self.w_extra = w_ih0[:, emb_dim:].t() if w_ih0.size(1) > emb_dim else None  # [I-E, G·H]
        self.w_ih = [weights[f"weight_ih_l{k}"].t() for k in self.layers]  # [I, G·H], k >= 1
        self.w_hh = [weights[f"weight_hh_l{k}"].t() for k in self.layers]  # [H, G·H]
        self.b_hh = [weights.get(f"bias_hh_l{k}") for k in self.layers]
        self.b_in = [self._input_bias(weights, k) for k in self.layers]

    def _input_bias(self, weights: dict[str, Tensor], layer: int) -> Tensor | None:
        """b_ih, plus b_hh for an LSTM (whose gates add the two): the input term's bias."""
        b_ih, b_hh = weights.get(f"bias_ih_l{layer}"), weights.get(f"bias_hh_l{layer}")
        if b_ih is None or b_hh is None or not self.lstm:
            return b_ih
        return b_ih + b_hh

    def project(self, embedded: Tensor) -> Tensor:
        """embedded [..., E] -> W_ih[:, :E] E y + b_ih (+ b_hh: LSTM)  [..., G·H], layer 0."""
        return F.linear(embedded, self.w_emb, self.b_in[0])

    def step(
        self, projected: Tensor, extra: Tensor | None, state: dict[str, Tensor]
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """One step: projected [B,G·H] (:meth:`project` of E y_{t-1}), extra [B,I-E] (e_t, or
        None when the input is the embedding alone), state {"hidden": [B,L,H], "cell"?:
        [B,L,H]} -> (top layer's output [B,H], {"hidden": [B,L,H], "cell"?: [B,L,H]})."""
        gates_in = projected
        if extra is not None:
            assert self.w_extra is not None, "this RNN's input is the embedding alone"
            gates_in = torch.addmm(projected, extra, self.w_extra)
        hidden = layer_states(state["hidden"])
        cells = layer_states(state["cell"]) if self.lstm else ()
        new_h: list[Tensor] = []
        new_c: list[Tensor] = []
        for layer in self.layers:
            if layer > 0:
                below = F.dropout(new_h[-1], self.dropout, True) if self.dropout else new_h[-1]
                gates_in = _linear(below, self.w_ih[layer], self.b_in[layer])
            if self.lstm:
                h, c = _lstm(gates_in, hidden[layer], cells[layer], self.w_hh[layer])
                new_c.append(c)
            else:
                h = _gru(gates_in, hidden[layer], self.w_hh[layer], self.b_hh[layer])
            new_h.append(h)
        out = {"hidden": _stack(new_h)}
        if self.lstm:
            out["cell"] = _stack(new_c)
        return new_h[-1], out


def _linear(x: Tensor, weight_t: Tensor, bias: Tensor | None) -> Tensor:
    """x [B,I] @ weight_t [I,N] (+ bias [N])."""
    return x @ weight_t if bias is None else torch.addmm(bias, x, weight_t)


def layer_states(states: Tensor) -> tuple[Tensor, ...]:
    """[B,L,H] -> L tensors [B,H]. Views whose backward writes no zero-filled [B,L,H]
    (as indexing [:, l] would at every step): a squeeze for one layer, else ``unbind``."""
    return (states.squeeze(1),) if states.size(1) == 1 else states.unbind(1)


def _stack(states: list[Tensor]) -> Tensor:
    """L tensors [B,H] -> [B,L,H] (the inverse of :func:`layer_states`)."""
    return states[0].unsqueeze(1) if len(states) == 1 else torch.stack(states, dim=1)


def _gru(gates_in: Tensor, h: Tensor, w_hh_t: Tensor, b_hh: Tensor | None) -> Tensor:
    """g [B,3H] (input side, with b_ih), h [B,H] -> h' [B,H] (nn.GRU's equations)."""
    size = h.size(-1)
    # split, not slicing: its backward concatenates the parts' gradients in one copy
    in_rz, in_n = gates_in.split([2 * size, size], dim=1)
    rec_rz, rec_n = _linear(h, w_hh_t, b_hh).split([2 * size, size], dim=1)  # W_hh h + b_hh
    reset, update = torch.sigmoid(in_rz + rec_rz).chunk(2, dim=1)
    new = torch.tanh(torch.addcmul(in_n, reset, rec_n))
    return torch.lerp(new, h, update)  # n + z ⊙ (h − n)


def _lstm(gates_in: Tensor, h: Tensor, c: Tensor, w_hh_t: Tensor) -> tuple[Tensor, Tensor]:
    """g [B,4H] (input side, with b_ih + b_hh), h, c [B,H] -> (h', c') (nn.LSTM's equations)."""
    size = h.size(-1)
    in_forget, candidate, out_gate = torch.addmm(gates_in, h, w_hh_t).split(
        [2 * size, size, size], dim=1
    )  # [B,4H]: i, f | g | o
    in_gate, forget = torch.sigmoid(in_forget).chunk(2, dim=1)
    c = torch.addcmul(forget * c, in_gate, torch.tanh(candidate))
    return torch.sigmoid(out_gate) * torch.tanh(c), c
