"""Caser: Personalized Top-N Sequential Recommendation via Convolutional Sequence Embedding
(Tang & Wang, WSDM 2018), a baseline of the LSAN paper (Li et al., CIKM 2021).

The ``L`` most recent items form an ``L x d`` "image" ``E`` of their embeddings. Horizontal
filters of heights ``1..L`` (``n_h`` of each, full width ``d``) slide over it, each followed by
the activation and a max-pool over positions (union-level and point-level sequential patterns);
``n_v`` vertical filters of size ``L x 1`` take weighted sums of the rows. Their concatenation,
after dropout, goes through a fully connected layer ``z = phi_a(W [o; o~] + b)``; the user
embedding ``P_u`` is concatenated and the item scores are ``y = W' [z; P_u] + b'`` with a
separate output table ``W'`` (``2d`` wide) and bias ``b'``. The hidden state handed to the
shared losses is ``[z; P_u]``.

Following the authors' code (graytowne/caser_pytorch): defaults ``n_v=4``, ``n_h=16``,
dropout 0.5 and ReLU for both activations; the PAD item (left padding of windows shorter than
``L``) has a learned embedding like any other item; user and item embeddings are initialized
N(0, (1/d)^2), ``W'`` N(0, (1/2d)^2), ``b'`` zero, the convolutions and the FC layer with
PyTorch's defaults.

Scoring a history (held-out users): only its last ``L`` items and its user enter the score.
The user embedding is the learned ``P_u`` of the history's user id (``Sequences.users``; every
leave-last-out test user is a training user, as in the authors' evaluation, which scores each
training user's test items with its own ``P_u``). An unknown user (no id, or one not seen in
training) gets ``P_u = 0``, leaving the convolutional part alone.

Deviations:

* Objective: every position ``t`` of a user's sequence is an example whose window is the ``L``
  items ending at ``t`` and whose target is the next item (``T = 1``), trained with softmax
  cross-entropy over the whole catalogue (as the other models of the LRURec / LSAN comparisons);
  the paper predicts the next ``T = 3`` items with binary cross-entropy and 3 sampled negatives
  per target (``loss="bce"`` gives one negative per position).
* Optimizer AdamW with decoupled weight decay instead of Adam with L2 (``l2 = 1e-6``).
* The embedding size defaults to 64 (the code's default is 50).
* Training windows (default, ``docs/decisions/sliding-training-windows.md``): every
  transition once per epoch (``train_windows="sliding"``); ``"last"`` (each user's latest
  ``max_len`` transitions) is one option away (the LSAN table pins it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout
from seqrec.models.neural_config import NeuralConfig, check_choice, check_positive, check_range
from seqrec.models.user_table import UserEmbedding, UserTableRecommender

ACTIVATIONS = {
    "relu": torch.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "identity": lambda x: x,
}


@dataclass(frozen=True)
class CaserConfig(NeuralConfig):
    """Caser hyperparameters (training defaults: ``train_defaults``)."""

    train_defaults = {
        "train_windows": "sliding",  # every transition once per epoch; validated above 'last'
    }  # (docs/reproduce/defaults.md)

    dim: int = 64
    """Embedding size d of users and items (the code's default: 50)."""
    window: int = 5
    """L: the number of most recent items the convolutions see."""
    n_v: int = 4
    """Number of vertical filters (0 disables the vertical branch)."""
    n_h: int = 16
    """Number of horizontal filters of each height 1..L (0 disables the horizontal branch)."""
    dropout: float = 0.5
    """Dropout on the concatenated convolution outputs, before the FC layer."""
    ac_conv: str = "relu"
    """Activation of the horizontal convolutions: relu, tanh, sigmoid or identity."""
    ac_fc: str = "relu"
    """Activation of the FC layer: relu, tanh, sigmoid or identity."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "window")
        check_range(self, "dropout", 0.0, 0.99)
        check_choice(self, "ac_conv", tuple(ACTIVATIONS))
        check_choice(self, "ac_fc", tuple(ACTIVATIONS))
        for name in ("n_v", "n_h"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.n_v == 0 and self.n_h == 0:
            raise ConfigError("n_v and n_h cannot both be 0 (no convolution left)")


class CaserEncoder(SequenceEncoder):
    """Position ``t``: ``[z_t; P_u]`` from the window of the ``L`` items ending at ``t``."""

    def __init__(self, config: CaserConfig, n_items: int, n_users: int = 0) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d, win = config.dim, config.window
        self.user_emb = UserEmbedding(n_users, d)
        self.item_emb = nn.Embedding(n_items + 1, d)  # row 0 = PAD, learned (as the code)
        self.conv_v = nn.Conv2d(1, config.n_v, (win, 1)) if config.n_v else None
        self.conv_h = (
            nn.ModuleList(nn.Conv2d(1, config.n_h, (h, d)) for h in range(1, win + 1))
            if config.n_h
            else nn.ModuleList()
        )
        self.dropout = Dropout(config.dropout)
        self.fc1 = nn.Linear(config.n_v * d + config.n_h * win, d)
        self.out_emb = nn.Embedding(n_items + 1, 2 * d)  # W'
        self.out_bias = nn.Parameter(torch.zeros(n_items + 1))  # b'
        self.ac_conv, self.ac_fc = ACTIVATIONS[config.ac_conv], ACTIVATIONS[config.ac_fc]
        nn.init.normal_(self.user_emb.weight, 0.0, 1.0 / d)
        nn.init.normal_(self.item_emb.weight, 0.0, 1.0 / d)
        nn.init.normal_(self.out_emb.weight, 0.0, 1.0 / (2 * d))

    def _windows(self, items: torch.Tensor) -> torch.Tensor:
        """``[B, L]`` -> ``[B, L, window, d]``: the embeddings of the ``window`` items ending at
        each position, PAD-padded on the left."""
        win = self.config.window
        emb = self.item_emb(F.pad(items, (win - 1, 0)))  # [B, L + win - 1, d]
        return emb.unfold(1, win, 1).transpose(2, 3)  # [B, L, win, d]

    def _features(self, windows: torch.Tensor) -> torch.Tensor:
        """``[N, window, d]`` -> ``z [N, d]``.

        The convolutions are computed as matrix products over the unfolded window (the same
        sums as ``Conv2d`` with these weights, several times faster on CPU, forward and
        backward); ``_features_conv2d`` is the plain reference the tests compare with.
        """
        n, win, d = windows.shape
        parts = []
        if self.conv_v is not None:  # [n_v, 1, L, 1]: weighted sums of the L rows
            w = self.conv_v.weight.view(-1, win)
            parts.append((torch.matmul(w, windows) + self.conv_v.bias[:, None]).flatten(1))
        for h, conv in enumerate(self.conv_h, start=1):  # [n_h, 1, h, d] over h consecutive rows
            rows = windows.unfold(1, h, 1).transpose(2, 3).reshape(n, win - h + 1, h * d)
            out = self.ac_conv(
                F.linear(rows, conv.weight.view(conv.out_channels, h * d), conv.bias)
            )
            parts.append(out.amax(dim=1))  # max-pool over the positions
        return self.ac_fc(self.fc1(self.dropout(torch.cat(parts, dim=1))))

    def _features_conv2d(self, windows: torch.Tensor) -> torch.Tensor:
        """Reference of ``_features`` with ``Conv2d`` as the authors' code computes it."""
        x = windows[:, None]  # [N, 1, win, d]
        parts = []
        if self.conv_v is not None:
            parts.append(self.conv_v(x).flatten(1))  # [N, n_v * d]
        for conv in self.conv_h:
            out = self.ac_conv(conv(x).squeeze(3))  # [N, n_h, win - h + 1]
            parts.append(out.amax(dim=2))
        return self.ac_fc(self.fc1(self.dropout(torch.cat(parts, dim=1))))

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        items = batch.items
        b, length = items.shape
        if length > self.config.max_len:
            raise ConfigError(f"input length {length} exceeds max_len {self.config.max_len}")
        valid = batch.mask if batch.mask is not None else items.ne(0)
        if last_only:
            items, valid = items[:, -self.config.window :], valid[:, -1:]
        windows = self._windows(items)
        if last_only:
            windows = windows[:, -1:]
        q = windows.shape[1]
        z = self._features(windows.reshape(b * q, self.config.window, -1)).view(b, q, -1)
        user = self.user_emb(batch.users, b)[:, None, :].expand(-1, q, -1)
        return torch.cat([z, user], dim=-1) * valid[..., None].to(z.dtype)  # [B, Lq, 2d]

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:  # [B, 2d]
        return self.forward(batch, last_only=True)[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.out_emb.weight, self.out_bias

    def no_decay_names(self) -> set[str]:
        return super().no_decay_names() | {"out_bias"}


class Caser(UserTableRecommender):
    """Caser: convolutions over the last L items plus a user embedding (Tang & Wang, WSDM 2018);
    module docstring: deviations and how held-out histories are scored."""

    name = "caser"
    config_cls = CaserConfig
    encoder_cls = CaserEncoder
