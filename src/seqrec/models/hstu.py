"""HSTU: Hierarchical Sequential Transduction Units (Zhai et al., "Actions Speak Louder than
Words: Trillion-Parameter Sequential Transducers for Generative Recommendations", ICML 2024).

One layer (Eqs. 2-4), with the residual outside the layer (``x = x + layer(x)``)::

    U, V, Q, K = split(SiLU(f1(LayerNorm(x))))                       # Eq. 2, SiLU on all four
    A(x) V     = (SiLU(Q K^T / sqrt(d_qk) + rab^{p,t}) / N) * mask @ V   # Eq. 3, no softmax
    layer(x)   = f2(LayerNorm(A(x) V) * U)                           # Eq. 4, no FFN

``N`` is ``max_len`` (the padded length, as in the write-up and Meta's reference), not the
number of valid keys, so the weights do not depend on how much padding a row carries. ``mask``
is causal and hides PAD keys. ``rab^{p,t}`` lives in ``seqrec.models.hstu_bias``.

Model wrapper (torch-rechub write-up §4): item embeddings scaled by ``sqrt(D)`` (Meta's
reference) plus an absolute position embedding (``position_embedding=False`` drops it), an
optional input-side time embedding, dropout, the HSTU stack, PAD rows zeroed after the input
embedding and after the stack, and a tied output projection with a bias. With ``l2_norm`` the
encoder output and the item table are L2-normalised and logits are cosine / ``temperature``
(the released sampled-softmax configurations: 128 negatives, temperature 0.05).

Choices and deviations (the write-up leaves them open or differs from the paper):

* Absolute positions are counted from the right (the most recent item always has position
  ``max_len - 1``); Meta's reference counts from the oldest item of the window
  (``positions="from_start"``, which live sessions can serve from a key/value cache).
* The input-side time embedding (off by default) embeds the bucketed gap ``t_i - t_{i-1}`` to
  the previous event; the write-up's ``query_time - t_i`` would let position ``i`` see the time
  of the last event during training (a causal leak), so it is not used.
* ``rab`` tables are per head (Meta's reference shares one over heads); ``rab_shared=True``
  uses one ``rab`` for all layers (cheaper; the paper has one per layer, the default).
* Time buckets of the pairwise |dt| are computed once per forward and shared by all layers.
* Label smoothing (deviation by default): the full cross-entropy trains against ``0.9`` on the
  target plus ``0.1 / I`` on every item (``label_smoothing=0.1``); ``label_smoothing=0`` is the
  write-up's loss, and the sampled softmax ignores the setting. It validated higher on both
  datasets the defaults are chosen on (``docs/decisions/label-smoothing.md``).
* Dropout: on the input embeddings and on the gated input of ``f2`` (Meta's reference).
* Sampled softmax draws ``n_negatives`` uniform negatives shared by the whole batch (one
  ``[positions, N]`` logit block); Meta's reference draws them per position, which on CPU
  would mean gathering a ``[positions, N, D]`` tensor every step.
* In training on CPU, a batch with PAD runs the position-wise work of each layer (norms,
  projections, gate, dropout, ``f2``) at its real positions only and the attention over the
  whole window with queries, keys and values 0 at PAD (``HSTULayer.forward_rows``): the same
  outputs, the same dropout masks (drawn over the whole window, then cut), gradients equal up
  to the order of float additions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqrec.config_fields import setting
from seqrec.data.batching import SequenceBatch, _shift_view, left_pad
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.hstu_bias import (
    TIME_BUCKET_FNS,
    TIME_QUERIES,
    RelativeBucketedTimeAndPositionBias,
    bucketize,
    query_time_diffs,
    time_buckets,
)
from seqrec.models.layers import Dropout, dropout_rows, tracing
from seqrec.models.neural_config import NeuralConfig, check_choice, check_positive, check_range
from seqrec.models.torch_recommender import TorchRecommender


@dataclass(frozen=True)
class HSTUConfig(NeuralConfig):
    """HSTU hyperparameters (training defaults: ``train_defaults``).

    The paper's released ML-1M setting is ``dim=50, n_blocks=2, n_heads=1, dropout=0.2,
    max_len=200`` with ``loss="sampled_softmax", n_negatives=128, l2_norm=True,
    temperature=0.05``; the torch-rechub write-up trains with full cross-entropy (``loss="ce"``).
    ``lr`` and ``patience`` are the best recipe measured (``docs/reproduce/defaults.md``):
    ``lr=3e-3`` (the released configuration's is ``lr=1e-3``) and ``patience=30``;
    ``train_windows="sliding"`` trains every transition once per epoch (``"last"``: each user's
    most recent ``max_len`` transitions). Why: ``docs/decisions/learning-rate-and-patience.md`` and
    ``docs/decisions/sliding-training-windows.md``. The cross-entropy is label-smoothed (0.1;
    ``label_smoothing=0`` is the plain one, ``docs/decisions/label-smoothing.md``).
    """

    train_defaults = {
        "lr": 3e-3,  # the release's 1e-3 validated lower
        "patience": 30,
        "train_windows": "sliding",  # every transition once per epoch; validated above 'last'
        "label_smoothing": 0.1,  # validated above the one-hot target (0 = the write-up's loss)
    }
    dim: int = 50
    """Embedding / residual width D."""
    n_blocks: int = 2
    """Number of HSTU layers."""
    n_heads: int = 1
    """Attention heads H."""
    d_qk: int = 0
    """Per-head query/key size (0 = dim // n_heads)."""
    d_v: int = 0
    """Per-head value/gate size (0 = dim // n_heads)."""
    dropout: float = 0.2
    """Dropout on the input embeddings and on the gated input of f2."""
    rab: bool = True
    """Add the relative attention bias rab^{p,t} to the scores (False = no bias at all)."""
    rab_time: bool = True
    """Include the bucketed relative-time part of rab. On data without a time column
    (``timestamp=none``: the file order is the time order) the row number in the file is the
    clock, so differences count the events logged in between; ``False`` keeps positions only."""
    rab_shared: bool = False
    """One rab for all layers (cheaper) instead of one per layer (paper)."""
    rab_time_query: str = "self"
    """Query time of position i in rab: 'self' (|t_i - t_j|, write-up) or 'next' (t_{i+1} - t_j,
    Meta's reference). 'next' LEAKS under offline evaluation: the last position's scores read
    the target's own timestamp, so the answer's time is in the question (changing it moves the
    scores). It is refused unless ``allow_target_time`` says so, and every record of such a run
    carries both fields. Online, the query time is the request's own time and nothing leaks."""
    allow_target_time: bool = False
    """Allow ``rab_time_query='next'`` although it reads each target's timestamp (see there)."""
    num_time_buckets: int = 128
    """Number of time buckets (the table has one more row)."""
    time_bucket_fn: str = "log"
    """Map of |dt| in minutes before the divisor: 'log' or 'sqrt'."""
    time_bucket_divisor: float = 0.301
    """Bucket width after the map (0.301: each log bucket spans a factor of 1.35)."""
    position_embedding: bool = True
    """Add the absolute position embedding to the input (write-up §4)."""
    positions: str = setting("from_end", legacy="from_end")
    """Absolute positions: 'from_end' (the most recent item always has position ``max_len - 1``)
    or 'from_start' (counted from the oldest item of the window, as Meta's reference; a new
    event then leaves every earlier position unchanged, so live sessions can cache keys and
    values: ``seqrec.models.kv_cache``)."""
    time_embedding: bool = False
    """Add an input-side embedding of the bucketed gap to the previous event."""
    l2_norm: bool = False
    """L2-normalise the encoder output and the item table (sampled-softmax configuration)."""
    temperature: float = 1.0
    """Logits are divided by this (0.05 in the paper's sampled-softmax configuration)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(
            self,
            "dim",
            "n_blocks",
            "n_heads",
            "num_time_buckets",
            "time_bucket_divisor",
            "temperature",
        )
        check_range(self, "dropout", 0.0, 0.99)
        check_choice(self, "rab_time_query", TIME_QUERIES)
        if (
            self.rab
            and self.rab_time
            and self.rab_time_query == "next"
            and not self.allow_target_time
        ):
            raise ConfigError(
                "rab_time_query='next' feeds each target's own timestamp into its "
                "score, which leaks the answer under offline evaluation; use 'self', "
                "or set allow_target_time=true to run it anyway (recorded with the run)"
            )
        check_choice(self, "time_bucket_fn", TIME_BUCKET_FNS)
        check_choice(self, "positions", ("from_end", "from_start"))
        for name in ("d_qk", "d_v"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if (self.d_qk == 0 or self.d_v == 0) and self.dim < self.n_heads:
            raise ConfigError(
                f"dim must be >= n_heads when d_qk or d_v is 0, got dim={self.dim}, "
                f"n_heads={self.n_heads}"
            )


def _attend(q, k, v, rab, weight_mask) -> torch.Tensor:
    """``(SiLU(q k^T + rab) * weight_mask) @ v`` ``[B, H, Lq, dv]``."""
    scores = q @ k.transpose(-2, -1)  # [B, H, Lq, L]
    if rab is not None:
        scores = scores.add_(rab)  # in place: matmul's backward keeps q and k, not scores
    return F.silu(scores).mul_(weight_mask) @ v  # silu's backward keeps its input only


class HSTULayer(nn.Module):
    """One sequential transduction unit (Eqs. 2-4) without the residual."""

    def __init__(self, d_model: int, n_heads: int, d_qk: int, d_v: int, dropout: float):
        super().__init__()
        self.n_heads, self.d_qk, self.d_v = n_heads, d_qk, d_v
        self.norm_in = nn.LayerNorm(d_model)
        self.proj1 = nn.Linear(d_model, n_heads * (2 * d_v + 2 * d_qk))  # U, V, Q, K jointly
        self.norm_attn = nn.LayerNorm(n_heads * d_v)
        self.proj2 = nn.Linear(n_heads * d_v, d_model)
        self.dropout = Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,  # [B, L, D]
        weight_mask: torch.Tensor,  # [B or 1, 1, L, L] float: causal (* key-valid) / N
        rab: torch.Tensor | None,  # [1 or B, H, L, L]
        last_only: bool = False,
        valid: torch.Tensor | None = None,  # [B, L]: zero the values of PAD keys
    ) -> torch.Tensor:  # [B, L, D] ([B, 1, D] with last_only: the last query only)
        """With ``valid``, PAD keys are removed by zeroing their values (there is no softmax:
        a key's weight acts on its value only), so ``weight_mask`` can be the causal ``[1, 1, L,
        L]`` shared by the batch instead of a ``[B, 1, L, L]`` one."""
        b, n, _ = x.shape
        h, dqk, dv = self.n_heads, self.d_qk, self.d_v
        z = self.norm_in(x)
        if last_only:  # keys and values at every position, the query (and U) at the last one
            # proj1's rows are [U, V, Q, K]: V and K are projected at every position, U and Q
            # at the last one only
            w, bias = self.proj1.weight, self.proj1.bias
            vk = torch.cat(
                (torch.arange(h * dv, 2 * h * dv), torch.arange(2 * h * dv + h * dqk, w.shape[0]))
            )
            uq = torch.cat((torch.arange(h * dv), torch.arange(2 * h * dv, 2 * h * dv + h * dqk)))
            vk, uq = vk.to(w.device), uq.to(w.device)
            v, k = F.silu(F.linear(z, w[vk], bias[vk])).split([h * dv, h * dqk], dim=-1)
            u, q = F.silu(F.linear(z[:, -1:], w[uq], bias[uq])).split([h * dv, h * dqk], dim=-1)
            weight_mask = weight_mask[..., -1:, :]
            rab = None if rab is None else rab[..., -1:, :]
        else:
            uvqk = F.silu(self.proj1(z))
            u, v, q, k = torch.split(uvqk, [h * dv, h * dv, h * dqk, h * dqk], dim=-1)
        if valid is not None:
            v = v * valid[..., None].to(v.dtype)
        nq = q.shape[1]
        q = q.reshape(b, nq, h, dqk).transpose(1, 2) * (1.0 / math.sqrt(dqk))  # [B, H, Lq, dqk]
        k = k.view(b, n, h, dqk).transpose(1, 2)
        v = v.view(b, n, h, dv).transpose(1, 2)  # [B, H, L, dv]
        av = _attend(q, k, v, rab, weight_mask).transpose(1, 2).reshape(b, nq, h * dv)
        return self.proj2(self.dropout(self.norm_attn(av) * u))

    def forward_rows(
        self,
        x: torch.Tensor,  # [n, D]: the layer's input at the real positions ``rows``
        rows: torch.Tensor,  # [n]: real positions of the ``[B, L]`` batch, flattened
        shape: tuple[int, int, int],  # (B, L, D)
        weight_mask: torch.Tensor,
        rab: torch.Tensor | None,
    ) -> torch.Tensor:  # [n, D]
        """``forward`` (with ``valid``) at the real positions only: the same outputs there
        and the same dropout draws. Norms, projections, gate and dropout run on ``rows``; the
        attention over the whole ``[B, L]`` layout, with queries, keys and values 0 at PAD
        positions. Exact: a PAD key's value is 0 in ``forward`` too (so its weight, whatever it
        is, multiplies 0), and a PAD query's output is never read."""
        b, n, _ = shape
        h, dqk, dv = self.n_heads, self.d_qk, self.d_v
        uvqk = F.silu(self.proj1(self.norm_in(x)))
        u, vqk = uvqk.split([h * dv, uvqk.shape[-1] - h * dv], dim=-1)
        full = vqk.new_zeros(b * n, vqk.shape[-1]).index_copy_(0, rows, vqk)
        v, q, k = full.split([h * dv, h * dqk, h * dqk], dim=-1)
        q = q.reshape(b, n, h, dqk).transpose(1, 2) * (1.0 / math.sqrt(dqk))
        k = k.reshape(b, n, h, dqk).transpose(1, 2)
        v = v.reshape(b, n, h, dv).transpose(1, 2)
        av = _attend(q, k, v, rab, weight_mask)
        av = av.transpose(1, 2).reshape(b * n, h * dv).index_select(0, rows)
        gated = self.norm_attn(av) * u
        return self.proj2(dropout_rows(self.dropout, gated, (b, n, h * dv), rows))


class HSTUEncoder(SequenceEncoder):
    """Item/position/time embeddings -> ``n_blocks`` HSTU layers -> ``[B, L, D]``.

    Built as ``HSTUEncoder(config, n_items)`` with an ``HSTUConfig``.
    """

    def __init__(self, config: HSTUConfig, n_items: int):
        super().__init__()
        c = config
        self.config = c
        self.n_items = n_items
        d, h = c.dim, c.n_heads
        d_qk = c.d_qk or max(1, d // h)
        d_v = c.d_v or max(1, d // h)
        self.max_len = c.max_len
        self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
        nn.init.normal_(self.item_emb.weight, 0.0, 0.02)
        with torch.no_grad():
            self.item_emb.weight[0].zero_()
        self.pos_emb = nn.Embedding(c.max_len, d) if c.position_embedding else None
        if self.pos_emb is not None:
            nn.init.uniform_(self.pos_emb.weight, -math.sqrt(1.0 / d), math.sqrt(1.0 / d))
        self.time_emb = nn.Embedding(c.num_time_buckets + 1, d) if c.time_embedding else None
        if self.time_emb is not None:
            nn.init.normal_(self.time_emb.weight, 0.0, 0.02)
        self.emb_dropout = Dropout(c.dropout)
        self.layers = nn.ModuleList(
            HSTULayer(d, h, d_qk, d_v, c.dropout) for _ in range(c.n_blocks)
        )
        n_rab = 0 if not c.rab else (1 if c.rab_shared else c.n_blocks)
        self.rabs = nn.ModuleList(
            RelativeBucketedTimeAndPositionBias(c.max_len, h, c.num_time_buckets, c.rab_time)
            for _ in range(n_rab)
        )
        self.out_bias = None if c.l2_norm else nn.Parameter(torch.zeros(n_items + 1))

    # --- pieces -------------------------------------------------------------------------
    def _buckets(self, batch: SequenceBatch, n: int) -> torch.Tensor | None:
        """Pairwise time buckets ``[B, L, L]`` (None = position-only or no timestamps)."""
        c = self.config
        if not (c.rab and c.rab_time) or batch.timestamps is None:
            return None
        ts = batch.timestamps[:, -n:]
        q, k = query_time_diffs(ts, batch.mask[:, -n:], batch.query_times, c.rab_time_query)
        return time_buckets(q, k, c.num_time_buckets, c.time_bucket_fn, c.time_bucket_divisor)

    def _gap_buckets(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L]
        c = self.config
        ts = batch.timestamps
        prev = torch.cat([ts[:, :1], ts[:, :-1]], dim=1)
        prev_valid = torch.cat([torch.zeros_like(batch.mask[:, :1]), batch.mask[:, :-1]], dim=1)
        first = batch.mask & ~prev_valid
        gap = torch.where(first, torch.zeros_like(ts), ts - prev)  # first event: gap 0
        return bucketize(gap, c.num_time_buckets, c.time_bucket_fn, c.time_bucket_divisor)

    def embed(self, batch: SequenceBatch) -> torch.Tensor:  # [B, L, D]
        items = batch.items
        b, n = items.shape
        if n > self.max_len:
            raise ValueError(f"batch length {n} exceeds max_len {self.max_len}")
        x = self.item_emb(items) * math.sqrt(self.item_emb.embedding_dim)
        if self.pos_emb is not None and self.config.positions == "from_start":
            # number of earlier real items in the window; independent of left padding
            x = x + self.pos_emb((batch.mask.long().cumsum(1) - 1).clamp_(min=0))
        elif self.pos_emb is not None:
            x = x + self.pos_emb.weight[self.max_len - n :]  # right-anchored positions
        if self.time_emb is not None and batch.timestamps is not None:
            x = x + self.time_emb(self._gap_buckets(batch))
        return self.emb_dropout(x) * batch.mask[..., None]

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:  # [B, L, D]
        """Hidden states ``[B, L, D]`` (``[B, 1, D]`` with ``last_only``: the last layer
        computes the last position only)."""
        mask = batch.mask
        b, n = batch.items.shape
        x = self.embed(batch)
        # causal / N, shared by the batch, every layer and every head: [1, 1, L, L]; PAD keys
        # are removed by zeroing their values in each layer (valid=mask)
        weight_mask = torch.ones(n, n, dtype=x.dtype, device=x.device).tril_()
        weight_mask = weight_mask.div_(self.max_len)[None, None]
        buckets = self._buckets(batch, n)
        shared = None
        if len(self.rabs) == 1 and self.config.rab_shared:
            shared = self.rabs[0](n, buckets=buckets) if buckets is not None else self.rabs[0](n)
        rows = None
        if not last_only and self._rows_path(x, mask):
            # training on CPU: the position-wise work at the real positions only (a window of a
            # short history is mostly PAD); the attention over the whole layout
            rows = mask.reshape(-1).nonzero().squeeze(1)
            xr = x.reshape(-1, x.shape[-1]).index_select(0, rows)
        for i, layer in enumerate(self.layers):
            if shared is not None or not self.rabs:
                rab = shared
            elif buckets is not None:
                rab = self.rabs[i](n, buckets=buckets)
            else:
                rab = self.rabs[i](n)
            if rows is not None:
                xr = xr + layer.forward_rows(xr, rows, x.shape, weight_mask, rab)
            elif last_only and i == len(self.layers) - 1:
                x = x[:, -1:] + layer(x, weight_mask, rab, last_only=True, valid=mask)
                mask = mask[:, -1:]
            else:
                x = x + layer(x, weight_mask, rab, valid=mask)
        if rows is not None:
            xr = F.normalize(xr, dim=-1) if self.config.l2_norm else xr
            return xr.new_zeros(x.shape).view(-1, x.shape[-1]).index_copy(0, rows, xr).view(x.shape)
        x = x * mask[..., None]
        if self.config.l2_norm:
            x = F.normalize(x, dim=-1)
        return x

    def _rows_path(self, x: torch.Tensor, mask: torch.Tensor) -> bool:
        """Whether ``forward`` runs its layers at the real positions only: in training, on
        CPU, on a batch with PAD, with every dropout of the layers a ``layers.Dropout`` (whose
        random stream ``dropout_rows`` keeps), outside traces."""
        if not self.training or x.device.type != "cpu" or tracing() or bool(mask.all()):
            return False
        return all(
            type(m) is Dropout and not m.inplace
            for m in self.layers.modules()
            if isinstance(m, nn.Dropout)
        )

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:
        """Hidden state of the last position ``[B, D]``; the last layer computes only it."""
        return self.forward(batch, last_only=True)[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = self.item_emb.weight
        if self.config.l2_norm:
            w = F.normalize(w, dim=-1)
        if self.config.temperature != 1.0:
            w = w / self.config.temperature
        return w, self.out_bias


class HSTU(TorchRecommender):
    """HSTU next-item recommender (Zhai et al., ICML 2024); see the module docstring."""

    name = "hstu"
    config_cls = HSTUConfig
    encoder_cls = HSTUEncoder

    def incremental(self, slide: str = "exact", stride: int = 0):
        """The live-session encoder: a key/value cache per layer (:mod:`seqrec.models.kv_cache`);
        ``None`` (re-encode) with absolute positions counted from the end, where every new event
        moves every position, and with ``rab_time_query="next"``, where it changes the time of the
        previous query.

        ``slide`` / ``stride``: what happens beyond ``max_len`` (see there)."""
        from seqrec.models.kv_cache import HSTUCache, cached_encoder

        c = self.config
        if c.position_embedding and c.positions != "from_start":
            return None
        if c.rab and c.rab_time and c.rab_time_query == "next":
            return None
        return cached_encoder(self, HSTUCache, slide=slide, stride=stride)

    def _config_reads_time(self) -> bool:
        c = self.config
        return bool((c.rab and c.rab_time) or c.time_embedding)

    def make_batch(self, train: Sequences, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """The shared batch, plus (for ``rab_time_query='next'``) the time of each row's last
        target as ``query_times``, so the last position sees its next-event time as in Meta's
        reference."""
        out = super().make_batch(train, rows, rng)
        cfg = self.config
        if (
            cfg.rab
            and cfg.rab_time
            and cfg.rab_time_query == "next"
            and train.timestamps is not None
        ):
            _, target_times = left_pad(_shift_view(train), rows, cfg.max_len)
            out["batch"].query_times = torch.from_numpy(target_times[:, -1].copy())
        return out
