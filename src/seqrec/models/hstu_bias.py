"""HSTU's relative attention bias ``rab^{p,t}`` (Zhai et al., ICML'24, Eq. 3).

``rab^{p,t}(i, j) = w_p[h, i - j] + w_t[h, bucket(dt(i, j))]``, added to the attention scores
``Q K^T / sqrt(d_qk)`` of every head ``h`` before the pointwise SiLU.

Time differences follow the anchor-delta form of the torch-rechub write-up: every event carries
``time_diffs[i] = anchor - timestamp[i]`` and the bias looks only at pairwise differences
``|time_diffs[i] - time_diffs[j]|``, so the anchor cancels. Two choices of the *query* side:

* ``"self"`` (the write-up's Eq. 3 as stated): query ``i`` uses its own event time, so
  ``dt(i, j) = |t_i - t_j|``. The prediction time is never used.
* ``"next"`` (Meta's reference code, "ts(next item) - ts(current item)"): query ``i`` uses the
  time of the event it predicts, ``dt(i, j) = t_{i+1} - t_j``. During training ``t_{i+1}`` is
  the next input's timestamp; the last position uses ``query_times`` (the target time at
  evaluation) when given, else its own timestamp.

Bucketing (write-up §3.1): ``dt / 60`` (minutes), mapped by ``sqrt`` or ``log`` (``log`` of values
below one minute is taken as 0), divided by ``time_bucket_divisor``, floored and clamped to
``[0, num_time_buckets]`` (so the table has ``num_time_buckets + 1`` rows).

Deviation from Meta's reference: the tables are per head (the reference shares one bias over
heads); the write-up and the issue ask for per-head tables.
"""

from __future__ import annotations

import torch
from torch import nn

TIME_BUCKET_FNS = ("sqrt", "log")
TIME_QUERIES = ("self", "next")


def time_buckets(
    query_diffs: torch.Tensor,  # [B, L] anchor - query time of each position
    key_diffs: torch.Tensor,  # [B, L] anchor - timestamp of each position
    num_buckets: int,
    fn: str,
    divisor: float,
) -> torch.Tensor:  # [B, L, L] int64 in [0, num_buckets]
    """Bucket index of ``|query_diffs[i] - key_diffs[j]|`` seconds, for every pair ``(i, j)``.

    The difference is taken in int64 (Unix seconds do not fit float32 exactly), then converted.
    """
    dt = query_diffs[:, :, None] - key_diffs[:, None, :]  # [B, L, L] int64 seconds
    return bucketize(dt, num_buckets, fn, divisor)


def bucketize(dt: torch.Tensor, num_buckets: int, fn: str, divisor: float) -> torch.Tensor:
    """Bucket index in ``[0, num_buckets]`` of time differences ``dt`` (int64 seconds, any
    shape): ``clamp(floor(fn(|dt| / 60) / divisor), 0, num_buckets)``."""
    minutes = dt.abs().to(torch.float32).div_(60.0)
    if fn == "sqrt":
        value = minutes.sqrt_()
    elif fn == "log":
        value = minutes.clamp_(min=1.0).log_()
    else:  # guarded by the config; internal invariant
        raise AssertionError(f"unknown time bucket fn {fn!r}")
    return value.div_(divisor).floor_().clamp_(0, num_buckets).to(torch.int64)


def query_time_diffs(
    timestamps: torch.Tensor,  # [B, L] int64, left-padded (PAD slots hold anything)
    mask: torch.Tensor,  # [B, L] bool
    query_times: torch.Tensor | None,  # [B] int64 or None
    mode: str,
) -> tuple[torch.Tensor, torch.Tensor]:  # (query_diffs [B, L], key_diffs [B, L])
    """Anchor-delta time features of the keys and of the queries.

    The anchor is ``query_times`` when given, else the last timestamp of each row (the write-up's
    "timestamp of the last behaviour"); it cancels in every pairwise difference.
    """
    ts = torch.where(mask, timestamps, timestamps[:, -1:])  # PAD slots copy the last time
    anchor = ts[:, -1] if query_times is None else query_times.to(ts.dtype)
    key = anchor[:, None] - ts  # time_diffs[i] = query_time - timestamp[i]
    if mode == "self":
        return key, key
    # "next": query i is anchored at the time of event i + 1; the last at the query time
    nxt = torch.cat([ts[:, 1:], anchor[:, None]], dim=1)  # anchor = last time if no query
    return anchor[:, None] - nxt, key


class _BucketGather(torch.autograd.Function):
    """``table[buckets]`` as ``[B, H, L, L]`` with a bincount backward.

    ``F.embedding``'s CPU backward over ``B * L * L`` indices sorts them and dominated a training
    step; with only ``num_time_buckets + 1`` rows, one weighted bincount per head is much faster.
    """

    @staticmethod
    def forward(ctx, table, buckets):  # table [T, H], buckets [B, L, L] int64
        b, n, _ = buckets.shape
        flat = buckets.reshape(-1)
        ctx.save_for_backward(flat)
        ctx.rows = table.shape[0]
        return table.index_select(0, flat).view(b, n, n, -1).permute(0, 3, 1, 2)

    @staticmethod
    def backward(ctx, grad):  # grad [B, H, L, L]
        (flat,) = ctx.saved_tensors
        g = grad.permute(0, 2, 3, 1).reshape(-1, grad.shape[1])  # [B*L*L, H]
        cols = [
            torch.bincount(flat, weights=g[:, h], minlength=ctx.rows) for h in range(g.shape[1])
        ]
        return torch.stack(cols, dim=1).to(grad.dtype), None


class RelativeBucketedTimeAndPositionBias(nn.Module):
    """Learnable per-head ``rab^{p,t}``: relative position table ``[H, 2N - 1]`` plus bucketed
    relative time table ``[H, num_time_buckets + 1]``.

    Args:
        max_len: ``N``, the longest sequence the model sees.
        n_heads: ``H``.
        num_time_buckets: number of time buckets (the table has one more row).
        use_time: whether the time table exists (False = position-only bias).
    """

    def __init__(self, max_len: int, n_heads: int, num_time_buckets: int, use_time: bool):
        super().__init__()
        self.max_len = max_len
        self.n_heads = n_heads
        self.num_time_buckets = num_time_buckets
        self.pos_w = nn.Parameter(torch.empty(n_heads, 2 * max_len - 1).normal_(0.0, 0.02))
        self.ts_w = (
            nn.Parameter(torch.empty(num_time_buckets + 1, n_heads).normal_(0.0, 0.02))
            if use_time
            else None
        )

    def position_bias(self, seq_len: int) -> torch.Tensor:  # [1, H, L, L]
        """``w_p[h, i - j]`` for the last ``seq_len`` positions (shift-invariant)."""
        if seq_len > self.max_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_len {self.max_len}")
        idx = torch.arange(seq_len, device=self.pos_w.device)
        rel = idx[:, None] - idx[None, :] + (self.max_len - 1)  # [L, L] in [0, 2N - 2]
        return self.pos_w[:, rel].unsqueeze(0)

    def time_bias(self, buckets: torch.Tensor) -> torch.Tensor:  # [B, H, L, L]
        """``w_t[h, buckets]`` for precomputed bucket indices ``[B, L, L]``."""
        assert self.ts_w is not None
        if torch.jit.is_tracing():  # TorchScript export cannot trace a Python autograd.Function
            b, n, _ = buckets.shape
            return (
                self.ts_w.index_select(0, buckets.reshape(-1)).view(b, n, n, -1).permute(0, 3, 1, 2)
            )
        return _BucketGather.apply(self.ts_w, buckets)

    def forward(
        self,
        seq_len: int,
        time_diffs: torch.Tensor | None = None,
        query_diffs: torch.Tensor | None = None,
        *,
        fn: str = "log",
        divisor: float = 0.301,
        buckets: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``rab^{p,t}``: ``(1, H, L, L)`` without time, ``(B, H, L, L)`` with time.

        Args:
            seq_len: ``L``.
            time_diffs: ``[B, L]`` int64 ``anchor - timestamp`` of the keys, or None
                (position-only).
            query_diffs: ``[B, L]`` of the queries (defaults to ``time_diffs``).
            fn, divisor: the bucketing (see the module docstring).
            buckets: precomputed ``[B, L, L]`` bucket indices (shared across layers); overrides
                ``time_diffs``.
        """
        pos = self.position_bias(seq_len)
        if self.ts_w is None or (buckets is None and time_diffs is None):
            return pos
        if buckets is None:
            q = time_diffs if query_diffs is None else query_diffs
            buckets = time_buckets(q, time_diffs, self.num_time_buckets, fn, divisor)
        return self.time_bias(buckets) + pos
