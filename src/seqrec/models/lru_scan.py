"""The linear recurrence of LRURec and its parallel scan.

The recurrence (Yue et al., "Linear Recurrent Units for Sequential Recommendation", WSDM 2024,
Sec. 3.2, after Orvieto et al. 2023, "Resurrecting Recurrent Neural Networks for Long
Sequences") is diagonal and complex::

    h_t = lam * h_{t-1} + u_t          h_{-1} = h0 (zero unless given)

with ``lam`` a complex vector ``[N]`` (``|lam| < 1``) and ``u`` the already projected and
normalised input ``gamma * (B x_t)``, shape ``[..., L, N]``.

:func:`lru_parallel_scan` computes all states with a two-level (blocked) parallel scan: the
sequence is cut into blocks of about ``sqrt(L)`` steps; every block is scanned at once (one
vectorised step per position in a block, over all blocks and rows), then the blocks' last
states are carried across blocks (one step per block, on ``[..., N]`` only), and one broadcast
update adds ``lam**(j + 1) * carry`` to element ``j`` of every block. Work is ``O(L)`` (about
three passes over the data), in ``~2 sqrt(L)`` vectorised steps; the powers ``lam**1 ..
lam**c`` are built by doubling (``P_{2b} = [P_b, lam**b * P_b]``), exact products without
complex logarithms. The states are the recurrence's own, in another order of the same
additions.

The paper's parallelisation (Sec. 3.3) is the recursive one: ``log2 L`` passes over the whole
(left-padded to a power of two) sequence, pass ``i`` adding ``lam**j * (last element of the
left block)`` to the right block of every pair of ``2**(i-1)``-long blocks. Its depth is
``O(log L)`` but its work ``O(L log L)``; on a CPU, where the work is what costs, the blocked
scan is faster and needs no padding (``docs/decisions/lrurec-training-speed.md``).

:func:`blocked_scan` is that scan without autograd (into a given tensor, in place, or with
powers shared across calls: LRURec's fused layer scans its chunks with it).
:func:`lru_sequential_scan` is the plain loop used as the reference in tests and benchmarks;
:func:`lru_step` is one step of the recurrence (incremental inference).
"""

from __future__ import annotations

import math

import torch

from seqrec.errors import DataError

__all__ = [
    "blocked_scan",
    "block_powers",
    "lru_parallel_scan",
    "lru_sequential_scan",
    "lru_step",
    "next_power_of_two",
]


def next_power_of_two(n: int) -> int:
    """Smallest power of two ``>= n`` (1 for ``n <= 1``)."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def _check(u: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None) -> None:
    if not (u.is_complex() and lam.is_complex()):
        raise DataError(f"u and lam must be complex tensors, got {u.dtype} and {lam.dtype}")
    if u.dim() < 2:
        raise DataError(f"u must be [..., L, N], got shape {tuple(u.shape)}")
    if lam.dim() != 1 or lam.shape[0] != u.shape[-1]:
        raise DataError(
            f"lam must be [N] with N = u.shape[-1] = {u.shape[-1]}, got {tuple(lam.shape)}"
        )
    if h0 is not None and h0.shape[-1] != u.shape[-1]:
        raise DataError(f"h0 must end in N = {u.shape[-1]}, got {tuple(h0.shape)}")


def _powers(lam: torch.Tensor, count: int) -> torch.Tensor:
    """``[lam**1, ..., lam**m]`` ``[m, N]`` with ``m >= count`` (a power of two), by doubling."""
    powers = lam.unsqueeze(0)
    while powers.shape[0] < count:
        powers = torch.cat((powers, powers[-1:] * powers), dim=0)
    return powers


def _chunk_size(length: int) -> int:
    """Block length of the two-level scan: about ``sqrt(L)`` balances its two loops."""
    return max(1, math.isqrt(max(length - 1, 0)) + 1)


def block_powers(lam: torch.Tensor, length: int) -> torch.Tensor:
    """The powers :func:`blocked_scan` needs at ``length`` (``lam**1 ..``, at least the block
    length): pass them as ``powers=`` when scanning many tensors with one ``lam``."""
    return _powers(lam, _chunk_size(length))


def blocked_scan(
    u: torch.Tensor,
    lam: torch.Tensor,
    reverse: bool = False,
    out: torch.Tensor | None = None,
    powers: torch.Tensor | None = None,
) -> torch.Tensor:
    """The two-level (blocked) scan of ``u`` ``[..., L, N]`` (no autograd).

    Into ``out`` if given (contiguous, ``u``'s shape; it may be ``u`` itself: the scan then
    runs in place), else into a new tensor. ``powers``: :func:`block_powers` of ``lam`` and this
    length, when the caller scans many tensors with one ``lam``.

    ``L = r + K * c`` with block length ``c ~ sqrt(L)``: a partial block of ``r < c`` steps at
    the start (at the end if ``reverse``) and ``K`` full blocks.

    1. within every block, all ``K`` blocks at once: ``c - 1`` steps of
       ``h_j = lam * h_{j-1} + u_j`` (the partial block: ``r - 1`` steps of the same);
    2. across blocks: ``K`` steps of ``end_k += lam**c * end_{k-1}`` on the blocks' last states
       only (``end_{-1}``: the partial block's last state, or none);
    3. one broadcast update: element ``j`` of block ``k`` gets ``lam**(j + 1) * end_{k-1}``.

    ``reverse`` scans backwards in time (``h_t = lam * h_{t+1} + u_t``): the same three steps
    mirrored, element ``j`` of block ``k`` getting ``lam**(c - j) * start_{k+1}``. Work is
    ``O(L)`` (about three passes over the data) in ``c + L / c`` vectorised steps.
    """
    *batch, length, n = u.shape
    h = torch.empty_like(u) if out is None else out
    in_place = h.data_ptr() == u.data_ptr()
    if length == 0:
        return h
    chunk = _chunk_size(length)
    blocks = length // chunk
    rem = length - blocks * chunk
    body = slice(rem, length) if not reverse else slice(0, blocks * chunk)
    hv = h[..., body, :].view(*batch, blocks, chunk, n)
    uv = u[..., body, :].reshape(*batch, blocks, chunk, n)
    # 1. within the blocks (and the partial block, one row at a time); views made once by
    # unbind (indexing per step costs more than a small step's work)
    order = range(chunk - 1, -1, -1) if reverse else range(chunk)
    edge = slice(length - rem, length) if reverse else slice(0, rem)
    part = range(rem - 1, -1, -1) if reverse else range(rem)
    for view_h, view_u, steps in ((hv, uv, order), (h[..., edge, :], u[..., edge, :], part)):
        if not steps:
            continue
        hs = view_h.unbind(-2)
        us = hs if in_place else view_u.unbind(-2)
        prev = None
        for j in steps:
            if prev is None:
                if not in_place:
                    hs[j].copy_(us[j])
            else:
                torch.addcmul(us[j], hs[prev], lam, out=hs[j])
            prev = j
    powers = (_powers(lam, chunk) if powers is None else powers)[:chunk]  # [c, N]: lam**1..c
    lam_c = powers[-1]
    carry = None if rem == 0 else h[..., (blocks * chunk if reverse else rem - 1), :]
    if reverse:  # 2. across blocks, from the last
        starts = hv[..., 0, :].clone()  # [..., K, N]
        rows = starts.unbind(-2)
        if carry is not None:
            rows[-1].addcmul_(carry, lam_c)
        for k in range(blocks - 2, -1, -1):
            rows[k].addcmul_(rows[k + 1], lam_c)
        nxt = starts[..., 1:, :]
        if carry is not None:
            nxt = torch.cat((nxt, carry.unsqueeze(-2)), dim=-2)
        if nxt.shape[-2]:  # 3.
            hv[..., : nxt.shape[-2], :, :].addcmul_(nxt.unsqueeze(-2), powers.flip(0))
    else:
        ends = hv[..., -1, :].clone()  # [..., K, N]
        rows = ends.unbind(-2)
        if carry is not None:
            rows[0].addcmul_(carry, lam_c)
        for k in range(1, blocks):
            rows[k].addcmul_(rows[k - 1], lam_c)
        prev = ends[..., :-1, :]
        if carry is not None:
            prev = torch.cat((carry.unsqueeze(-2), prev), dim=-2)
        if prev.shape[-2]:  # 3.
            hv[..., blocks - prev.shape[-2] :, :, :].addcmul_(prev.unsqueeze(-2), powers)
    return h


def _scan_forward(
    u: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None, reverse: bool = False
) -> torch.Tensor:
    h = blocked_scan(u, lam, reverse)
    if h0 is not None:
        length = u.shape[-2]
        h = h + _powers(lam, length)[:length] * h0.unsqueeze(-2)
    return h


class _ParallelScan(torch.autograd.Function):
    """Forward: the blocked scan. Backward: the same scan run backwards in time.

    With ``G_t = dL/dh_t`` accumulated over later steps (``G_t = g_t + conj(lam) G_{t+1}``,
    itself a linear recurrence, so the reverse-time parallel scan of ``g`` with
    ``conj(lam)``), PyTorch's complex-gradient convention gives ``grad u_t = G_t``,
    ``grad lam = sum_t G_t conj(h_{t-1})`` and ``grad h0 = conj(lam) G_0``.
    """

    @staticmethod
    def forward(ctx, u, lam, h0):  # noqa: D401
        h = _scan_forward(u, lam, h0)
        ctx.save_for_backward(h, lam, h0)
        ctx.h0_is_none = h0 is None
        return h

    @staticmethod
    def backward(ctx, grad):
        h, lam, h0 = ctx.saved_tensors
        # resolve_conj: with a lazily conjugated lam every multiply of the reverse scan would
        # resolve it again
        lam_c = lam.conj().resolve_conj()
        G = _scan_forward(grad.resolve_conj(), lam_c, None, reverse=True)
        n = h.shape[-1]
        # grad lam = sum_t G_t conj(h_{t-1}), h_{-1} = h0 (or 0); the lazily conjugated view
        # is read by the product, not materialised
        grad_lam = (G[..., 1:, :] * h[..., :-1, :].conj()).reshape(-1, n).sum(0)
        if not ctx.h0_is_none:
            grad_lam = grad_lam + (G[..., 0, :] * h0.conj()).reshape(-1, n).sum(0)
        grad_h0 = None if ctx.h0_is_none else lam_c * G[..., 0, :]
        return G, grad_lam, grad_h0


def lru_parallel_scan(
    u: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None = None
) -> torch.Tensor:
    """All states ``h`` ``[..., L, N]`` of ``h_t = lam * h_{t-1} + u_t`` by the blocked scan.

    Args:
        u: complex ``[..., L, N]`` inputs (complex64 or complex128); PAD positions must be 0.
        lam: complex ``[N]`` diagonal of the recurrence.
        h0: optional complex ``[..., N]`` state before the first input (default zero); it adds
            ``lam**(t+1) * h0`` at step ``t``.

    Returns:
        complex ``[..., L, N]`` states, same dtype as ``u``; differentiable (first order) in
        ``u``, ``lam`` and ``h0`` through a backward pass that is itself a parallel scan.
    """
    _check(u, lam, h0)
    lam = lam.to(u.dtype)
    if h0 is not None:
        h0 = h0.to(u.dtype).expand(*u.shape[:-2], u.shape[-1])
    if u.shape[-2] == 0:
        return u.clone()
    return _ParallelScan.apply(u, lam, h0)


def lru_sequential_scan(
    u: torch.Tensor, lam: torch.Tensor, h0: torch.Tensor | None = None
) -> torch.Tensor:
    """Reference: the same recurrence as a Python loop over time (slow, obviously correct)."""
    _check(u, lam, h0)
    lam = lam.to(u.dtype)
    state = u.new_zeros(*u.shape[:-2], u.shape[-1]) if h0 is None else h0.to(u.dtype)
    out = []
    # unbind (not u[..., t, :]): its backward is one stack, not L full-size zero fills
    for u_t in u.unbind(-2):
        state = lam * state + u_t
        out.append(state)
    if not out:
        return u.clone()
    return torch.stack(out, dim=-2)


def lru_step(h: torch.Tensor, u: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """One step ``lam * h + u`` for states ``h`` and inputs ``u`` ``[..., N]`` (O(N))."""
    return lam.to(u.dtype) * h + u
