"""The (blocked) parallel scan equals the sequential recurrence (outputs and gradients)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from seqrec.errors import DataError
from seqrec.models.lru_scan import (
    block_powers,
    blocked_scan,
    lru_parallel_scan,
    lru_sequential_scan,
    lru_step,
    next_power_of_two,
)

DTYPES = {torch.complex64: 2e-5, torch.complex128: 1e-11}


def _lam(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    # the LRU ring: radius in [0.8, 0.99], any phase
    r = 0.8 + 0.19 * torch.rand(n, generator=gen, dtype=torch.float64)
    theta = 2 * math.pi * torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.polar(r, theta).to(dtype)


def _inputs(batch, length, n, pad, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    u = torch.complex(
        torch.randn(batch, length, n, generator=gen, dtype=torch.float64),
        torch.randn(batch, length, n, generator=gen, dtype=torch.float64),
    ).to(dtype)
    # left padding: the first pad[b] positions of row b are PAD (zero input)
    pos = torch.arange(length)
    keep = pos[None, :] >= torch.as_tensor(pad)[:, None]
    u = u * keep[..., None].to(real)
    return u, _lam(n, dtype, gen), keep


def test_next_power_of_two():
    assert [next_power_of_two(n) for n in (0, 1, 2, 3, 4, 5, 200, 256, 257)] == [
        1,
        1,
        2,
        4,
        4,
        8,
        256,
        256,
        512,
    ]


@settings(max_examples=40, deadline=None)
@given(
    length=st.integers(1, 70),
    n=st.integers(1, 5),
    batch=st.integers(1, 3),
    complex128=st.booleans(),
    data=st.data(),
)
def test_parallel_equals_sequential_outputs(length, n, batch, complex128, data):
    dtype = torch.complex128 if complex128 else torch.complex64
    pad = data.draw(st.lists(st.integers(0, length), min_size=batch, max_size=batch))
    u, lam, keep = _inputs(batch, length, n, pad, dtype, seed=data.draw(st.integers(0, 999)))
    par = lru_parallel_scan(u, lam)
    seq = lru_sequential_scan(u, lam)
    assert par.dtype == dtype and par.shape == u.shape
    torch.testing.assert_close(par, seq, rtol=DTYPES[dtype], atol=DTYPES[dtype] * 10)
    # an all-PAD prefix keeps the state exactly zero (left padding changes nothing)
    assert torch.all(par[~keep] == 0)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("length,pad", [(1, [0]), (7, [3]), (16, [0]), (33, [33]), (50, [49])])
def test_parallel_equals_sequential_gradients(dtype, length, pad):
    u, lam, _ = _inputs(1, length, 4, pad, dtype, seed=length)
    h0 = torch.randn(1, 4, dtype=dtype)
    weights = torch.randn(1, length, 4, dtype=dtype)
    grads = []
    for scan in (lru_parallel_scan, lru_sequential_scan):
        uu = u.clone().requires_grad_(True)
        ll = lam.clone().requires_grad_(True)
        hh = h0.clone().requires_grad_(True)
        out = scan(uu, ll, hh)
        # a real loss touching real and imaginary parts of every output
        loss = (out * weights).real.sum() + (out.abs() ** 2).sum() * 0.01
        grads.append(torch.autograd.grad(loss, (uu, ll, hh)))
    tol = DTYPES[dtype] * 50
    for g_par, g_seq in zip(*grads, strict=True):
        torch.testing.assert_close(g_par, g_seq, rtol=tol, atol=tol)


def test_gradients_through_the_parametrisation():
    """d loss / d (nu_log, theta_log, gamma_log) agree: the path LRURec trains."""
    gen = torch.Generator().manual_seed(3)
    nu_log = torch.randn(6, generator=gen, dtype=torch.float64)
    theta_log = torch.randn(6, generator=gen, dtype=torch.float64)
    x = torch.randn(2, 11, 6, generator=gen, dtype=torch.float64)
    grads = []
    for scan in (lru_parallel_scan, lru_sequential_scan):
        nl = nu_log.clone().requires_grad_(True)
        tl = theta_log.clone().requires_grad_(True)
        lam = torch.exp(torch.complex(-torch.exp(nl), torch.exp(tl)))
        out = scan(x.to(torch.complex128), lam)
        grads.append(torch.autograd.grad(out.real.sum() - out.imag.pow(2).sum(), (nl, tl)))
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_gradcheck_complex128():
    u, lam, _ = _inputs(2, 6, 3, [0, 2], torch.complex128, seed=1)
    assert torch.autograd.gradcheck(
        lambda uu, ll: lru_parallel_scan(uu, ll),
        (u.requires_grad_(True), lam.requires_grad_(True)),
    )


def test_initial_state_and_step_continue_the_scan():
    u, lam, _ = _inputs(2, 13, 4, [0, 5], torch.complex128, seed=7)
    full = lru_parallel_scan(u, lam)
    head = lru_parallel_scan(u[:, :9], lam)
    tail = lru_parallel_scan(u[:, 9:], lam, h0=head[:, -1])
    torch.testing.assert_close(torch.cat((head, tail), dim=1), full)
    h = head[:, -1]
    for t in range(9, 13):
        h = lru_step(h, u[:, t], lam)
        torch.testing.assert_close(h, full[:, t])


def test_empty_and_bad_input():
    u = torch.zeros(2, 0, 3, dtype=torch.complex64)
    lam = torch.full((3,), 0.9, dtype=torch.complex64)
    assert lru_parallel_scan(u, lam).shape == (2, 0, 3)
    with pytest.raises(DataError, match="complex"):
        lru_parallel_scan(torch.zeros(2, 4, 3), lam)
    with pytest.raises(DataError, match="lam must be"):
        lru_parallel_scan(torch.zeros(2, 4, 5, dtype=torch.complex64), lam)


@pytest.mark.parametrize("length", [1, 2, 5, 16, 37, 200])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_in_place_equals_out_of_place(length, reverse):
    """The fused LRU layer scans its chunks in place (``out=u``) with precomputed powers:
    the same states as a scan into a new tensor, and the sequential recurrence."""
    u, lam, _ = _inputs(3, length, 4, [0, 1, length], torch.complex128, seed=length)
    want = blocked_scan(u, lam, reverse=reverse)
    seq = lru_sequential_scan(u.flip(-2), lam).flip(-2) if reverse else lru_sequential_scan(u, lam)
    torch.testing.assert_close(want, seq, rtol=1e-10, atol=1e-10)
    got = u.clone()
    blocked_scan(got, lam, reverse=reverse, out=got, powers=block_powers(lam, length))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
