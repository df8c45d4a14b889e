"""Small torch blocks shared unchanged by several models."""

from __future__ import annotations

import torch
from torch import nn


class Dropout(nn.Dropout):
    """``nn.Dropout`` with a faster training path on CPU; the same module otherwise (no
    parameters, the same state dict, the identity in eval mode, ``F.dropout`` on GPUs).

    Why: PyTorch's CPU dropout draws its mask with ``bernoulli_``, one locked generator call per
    element, a large share of a training step on CPU (``docs/decisions/cpu-dropout.md``). Here
    the mask is ``uniform_() >= p`` in float32 (the same torch generator, vectorized): an element
    is kept with probability ``1 - p`` (to 2^-24) and scaled by ``1 / (1 - p)``, exactly
    dropout's distribution, but not its random stream: a run is deterministic under its seed,
    with other masks than ``nn.Dropout`` would draw.
    ``benchmarks/bench_dropout.py`` measures both (``docs/results/dropout_speed.md``).
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0 or x.device.type != "cpu" or self.inplace:
            return super().forward(x)
        return cpu_dropout(x, self.p)


def tracing() -> bool:
    """Whether a trace, export or compile is recording: it fixes data-dependent branches, so
    the paths that choose by the batch's contents (PAD or not, lengths) take the general one."""
    return (
        torch.jit.is_tracing()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()  # torch.export outside dynamo (ONNX's exporter)
    )


def cpu_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout of ``x`` with a mask from ``uniform_`` (see :class:`Dropout`)."""
    if p >= 1.0:
        return x * 0.0
    with torch.no_grad():  # the mask is a constant of the step: grad = grad_out * mask
        mask = torch.empty(x.shape, dtype=torch.float32).uniform_().ge_(p).mul_(1.0 / (1.0 - p))
    return x * (mask if mask.dtype == x.dtype else mask.to(x.dtype))


def dropout_rows(module: Dropout, z: torch.Tensor, shape: tuple[int, ...], rows: torch.Tensor):
    """``module`` applied to the rows ``rows`` of a ``shape`` tensor flattened to
    ``[-1, shape[-1]]``, given only those rows ``z``: on CPU in training the mask is drawn over
    the whole ``shape`` first, as :class:`Dropout` would draw it for the whole tensor (the same
    random stream and the same mask on those rows), then cut to them."""
    if not module.training or module.p == 0.0:
        return z
    if z.device.type != "cpu" or module.inplace or type(module) is not Dropout:
        raise ValueError("dropout_rows keeps layers.Dropout's CPU stream only")
    if module.p >= 1.0:
        return z * 0.0
    with torch.no_grad():
        mask = torch.empty(shape, dtype=torch.float32).uniform_().ge_(module.p)
        mask = mask.view(-1, shape[-1]).index_select(0, rows).mul_(1.0 / (1.0 - module.p))
    return z * (mask if mask.dtype == z.dtype else mask.to(z.dtype))


class PointWiseFFN(nn.Module):
    """Position-wise feed-forward ``W2 act(W1 x + b1) + b2`` with dropout after each layer
    (SASRec eq. 4; the same block in BERT4Rec/LRURec-style encoders).

    Args:
        dim: input/output size D.
        hidden: inner size (SASRec: D).
        dropout: dropout probability after the activation and after the output layer.
        activation: 'relu' (SASRec) or 'gelu' (BERT4Rec, LSAN).
    """

    def __init__(
        self, dim: int, hidden: int, dropout: float = 0.0, activation: str = "relu"
    ) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.dropout = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        return self.dropout(self.fc2(self.dropout(self.act(self.fc1(x)))))

    def forward_rows(self, x: torch.Tensor, rows: torch.Tensor, lead: tuple[int, ...]):
        """``forward`` of the rows ``rows`` ``x`` ``[n, D]`` of a ``[*lead, D]`` input, the
        dropout masks drawn as ``forward`` draws them for the whole input
        (:func:`dropout_rows`)."""
        a = self.act(self.fc1(x))
        a = dropout_rows(self.dropout, a, (*lead, a.shape[-1]), rows)
        y = self.fc2(a)
        return dropout_rows(self.dropout, y, (*lead, y.shape[-1]), rows)


def causal_padding_mask(valid: torch.Tensor) -> torch.Tensor:
    """Boolean attention mask ``[B, 1, L, L]`` (True = may attend) for left-padded inputs.

    Query ``i`` sees key ``j`` iff ``j <= i`` and key ``j`` is a real item. The diagonal is
    always allowed so that PAD queries (whose keys are all PAD) still have one visible key:
    softmax over an all-masked row would give NaN. PAD query outputs are zeroed afterwards and
    a real query never sees a PAD key, so this changes nothing for real positions.

    Args:
        valid: ``[B, L]`` True at real positions.
    """
    length = valid.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=valid.device).tril()
    eye = torch.eye(length, dtype=torch.bool, device=valid.device)
    return (causal[None] & valid[:, None, :]) | eye[None]  # [B, L, L]


def roll_rows(x: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
    """Each row of ``x [B, L, ...]`` rotated along its positions by its own ``offset [B]``:
    ``y[b, j] = x[b, (j + offset[b]) % L]`` (left-padded rows turned right-padded with
    ``offset`` = their PAD count, and back with ``-offset``).

    One ``index_select`` of whole positions from the flattened ``[B L, ...]`` tensor: on CPU far
    cheaper than ``gather`` with an index expanded over the feature dimension, which reads an
    int64 index per element. Differentiable (its backward scatters the gradient back)."""
    b, length = x.shape[:2]
    pos = torch.arange(length, device=x.device)
    rows = torch.arange(b, device=x.device)[:, None] * length
    idx = ((pos[None] + offset[:, None]) % length + rows).reshape(-1)
    return x.reshape(b * length, *x.shape[2:]).index_select(0, idx).view(x.shape)
