"""LSAN's sequence layers: the twin-attention block and the plain self-attention ablation.

Twin attention (LSAN §3.3) pairs a causal self-attention branch (global preference) with a
causal convolution branch (local preference). Following the Lite Transformer's long-short range
attention that LSAN cites for the motivation (Wu et al. 2020), the input channels are split in
half, one half per branch, and the two outputs are concatenated (``combine="split"``); with
``combine="sum"`` both branches see all channels and their outputs are added. The convolution
branch is the Lite Transformer's: ``Linear -> GLU -> lightweight depthwise convolution ->
Linear``, where the lightweight convolution (Wu et al. 2019) has ``H`` heads, each a kernel of
width ``K`` softmax-normalised over its taps and shared by ``D_c / H`` channels. The convolution
is causal (left padding of ``K - 1``), so position ``t`` sees items ``t - K + 1 .. t`` only.
Each block ends with the Transformer's position-wise feed-forward network; both sub-layers are
``LayerNorm(x + Dropout(f(x)))`` (post-LN, as the Transformer and Lite Transformer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from seqrec.models.layers import Dropout, PointWiseFFN, causal_padding_mask


class CausalAttentionBranch(nn.Module):
    """Multi-head causal self-attention with input and output projections, ``[B, L, d]``."""

    def __init__(self, dim: int, n_heads: int, dropout: float) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        """``x [B, L, d]``, ``mask [B, L, L]`` -> ``[B, L, d]`` (``[B, 1, d]`` if ``last_only``)."""
        b, length, dim = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).view(b, length, 3, h, dim // h).permute(2, 0, 3, 1, 4)
        if last_only:
            q, mask = q[:, :, -1:], mask[:, -1:]
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask[:, None], dropout_p=self.dropout if self.training else 0.0
        )
        return self.out(out.transpose(1, 2).reshape(b, q.shape[2], dim))


class CausalLightConv(nn.Module):
    """Lightweight depthwise convolution (Wu et al. 2019), causal: ``[B, L, d] -> [B, L, d]``.

    ``H`` kernels of width ``K``, softmax-normalised over the taps; channel ``c`` uses kernel
    ``c // (d / H)``. The last tap multiplies the current position.
    """

    def __init__(self, dim: int, n_heads: int, kernel_size: int) -> None:
        super().__init__()
        self.dim, self.n_heads, self.kernel_size = dim, n_heads, kernel_size
        self.weight = nn.Parameter(torch.zeros(n_heads, kernel_size))  # uniform after softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = torch.softmax(self.weight, dim=-1)  # [H, K]
        w = w.repeat_interleave(self.dim // self.n_heads, dim=0)[:, None]  # [d, 1, K]
        y = F.pad(x.transpose(1, 2), (self.kernel_size - 1, 0))  # left only: causal
        return F.conv1d(y, w, groups=self.dim).transpose(1, 2)


class ConvBranch(nn.Module):
    """``Linear(d, 2d) -> GLU -> CausalLightConv -> Linear(d, d)`` (Lite Transformer)."""

    def __init__(self, dim: int, n_heads: int, kernel_size: int) -> None:
        super().__init__()
        self.inp = nn.Linear(dim, 2 * dim)
        self.conv = CausalLightConv(dim, n_heads, kernel_size)
        self.out = nn.Linear(dim, dim)

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor, last_only: bool = False
    ) -> torch.Tensor:
        if last_only:  # the last output reads only the last K positions
            x, valid = x[:, -self.conv.kernel_size :], valid[:, -self.conv.kernel_size :]
        # PAD positions must enter the convolution as zeros (the GLU bias would make them
        # non-zero), so that extra left padding leaves real outputs unchanged
        g = F.glu(self.inp(x), dim=-1) * valid[..., None]
        y = self.conv(g)
        return self.out(y[:, -1:] if last_only else y)


class TwinAttentionBlock(nn.Module):
    """Twin attention + FFN, post-LN; ``[B, L, D] -> [B, L, D]`` with PAD rows zero."""

    def __init__(
        self,
        dim: int,
        n_heads: int,
        kernel_size: int,
        ffn_dim: int,
        dropout: float,
        combine: str = "split",
    ) -> None:
        super().__init__()
        self.combine = combine
        branch = dim // 2 if combine == "split" else dim
        self.attn = CausalAttentionBranch(branch, n_heads, 0.0)  # no attention-weight dropout
        self.conv = ConvBranch(branch, n_heads, kernel_size)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = PointWiseFFN(dim, ffn_dim, dropout, activation="gelu")
        self.dropout = Dropout(dropout)

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor, last_only: bool = False
    ) -> torch.Tensor:
        """``[B, L, D] -> [B, L, D]`` (``[B, 1, D]``, the last position, if ``last_only``)."""
        mask = causal_padding_mask(valid)
        if self.combine == "split":
            half = x.shape[-1] // 2
            y = torch.cat(
                [
                    self.attn(x[..., :half], mask, last_only),
                    self.conv(x[..., half:], valid, last_only),
                ],
                -1,
            )
        else:
            y = self.attn(x, mask, last_only) + self.conv(x, valid, last_only)
        if last_only:
            x, valid = x[:, -1:], valid[:, -1:]
        x = self.norm1(x + self.dropout(y)) * valid[..., None]
        return self.norm2(x + self.ffn(x)) * valid[..., None]


class SelfAttentionBlock(nn.Module):
    """The ``twin=False`` ablation (LSAN_plain.attn): causal multi-head self-attention over all
    ``D`` channels in place of twin attention; the same FFN and post-LN."""

    def __init__(self, dim: int, n_heads: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.attn = CausalAttentionBranch(dim, n_heads, 0.0)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.ffn = PointWiseFFN(dim, ffn_dim, dropout, activation="gelu")
        self.dropout = Dropout(dropout)

    def forward(
        self, x: torch.Tensor, valid: torch.Tensor, last_only: bool = False
    ) -> torch.Tensor:
        y = self.attn(x, causal_padding_mask(valid), last_only)
        if last_only:
            x, valid = x[:, -1:], valid[:, -1:]
        x = self.norm1(x + self.dropout(y)) * valid[..., None]
        return self.norm2(x + self.ffn(x)) * valid[..., None]
