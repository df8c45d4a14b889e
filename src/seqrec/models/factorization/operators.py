"""Sparse building blocks of the tensor models (NumPy/SciPy only, no torch).

* the banded lower-triangular Toeplitz attention matrix ``A`` (``a_k = k^(-f)`` on the
  ``k``-th diagonal) applied as a band product and inverted (transposed) by a banded
  triangular solve — never a dense ``K x K`` matrix per user;
* the positional tensor ``X`` (users x items x K) kept as a list of non-zero entries;
* the compressed unfoldings of ``Y = X x2 D x3 H`` that HOOI needs, as SciPy
  ``LinearOperator`` s (matrix-free: every product is a sparse product) and, when they are small,
  built explicitly from the same sparse products;
* a truncated SVD of those unfoldings (``svds``, a seeded randomized range finder, or an exact
  Gram eigen-solve of the explicit compressed unfolding).

Shapes: ``M`` users, ``N`` items (internal id ``j`` is row ``j - 1``), ``K`` positions
(0-based here; position ``K - 1`` holds the most recent item).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_banded
from scipy.sparse.linalg import LinearOperator, svds

from seqrec.data.sequences import Sequences

# ---------------------------------------------------------------- attention matrix A


def attention_weights(size: int, decay: float, span: int | None = None) -> np.ndarray:
    """Diagonal values ``a_k = k^(-decay)``, ``k = 1..span`` (``span`` defaults to ``size``)."""
    span = size if span is None else min(span, size)
    return np.arange(1, span + 1, dtype=np.float64) ** (-float(decay))


def attention_dense(size: int, decay: float, span: int | None = None) -> np.ndarray:
    """The dense ``A`` (tests and documentation only)."""
    a = attention_weights(size, decay, span)
    out = np.zeros((size, size))
    for d, w in enumerate(a):
        out[np.arange(d, size), np.arange(size - d)] = w
    return out


def attention_apply(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``A @ m`` for ``m`` of shape ``[K, ...]``: ``(A m)[k] = sum_d a[d] m[k - d]``."""
    out = np.zeros_like(m, dtype=np.float64)
    size = m.shape[0]
    for d in range(min(len(a), size)):
        out[d:] += a[d] * m[: size - d]
    return out


def attention_apply_t(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``A.T @ m``: ``(A^T m)[k] = sum_d a[d] m[k + d]`` (spreads weight to earlier positions)."""
    out = np.zeros_like(m, dtype=np.float64)
    size = m.shape[0]
    for d in range(min(len(a), size)):
        out[: size - d] += a[d] * m[d:]
    return out


def attention_solve_t(a: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``A^(-T) m`` by a banded upper-triangular solve (paper eq. 12: ``W_hat = A^(-T) W``)."""
    size = m.shape[0]
    band = min(len(a), size)
    # solve_banded upper form: ab[u + i - j, j] = M[i, j] with u = band - 1; A^T[i, j] = a[j - i].
    ab = np.zeros((band, size))
    for d in range(band):
        ab[band - 1 - d, d:] = a[d]
    return solve_banded((0, band - 1), ab, m)


# ---------------------------------------------------------------- positional tensor


@dataclass(frozen=True)
class PositionalTensor:
    """Non-zero entries ``(user, item, position)`` of the binary positional tensor.

    Built from the most recent ``K`` items of each row; the last item sits at position
    ``K - 1`` (paper: position ``K``, 1-based), shorter rows are zero-padded on the left.
    """

    users: np.ndarray
    items: np.ndarray
    positions: np.ndarray
    shape: tuple[int, int, int]

    @property
    def nnz(self) -> int:
        return len(self.users)

    def slices(self, weights: np.ndarray, scale: np.ndarray | None = None) -> list[sp.csr_matrix]:
        """One ``M x N`` sparse matrix per column ``c`` of ``weights [K, q]``: entry value
        ``weights[position, c]`` (times ``scale[item]``) — the tensor contracted on mode 3."""
        m, n, _ = self.shape
        vals = weights[self.positions]
        if scale is not None:
            vals = vals * scale[self.items][:, None]
        return [
            sp.csr_matrix((vals[:, c], (self.users, self.items)), shape=(m, n))
            for c in range(weights.shape[1])
        ]

    def dense(self) -> np.ndarray:
        """The dense ``[M, N, K]`` tensor (tests on tiny data only)."""
        out = np.zeros(self.shape)
        np.add.at(out, (self.users, self.items, self.positions), 1.0)
        return out


def positional_tensor(seqs: Sequences, max_len: int) -> PositionalTensor:
    """Truncate each row to its ``max_len`` most recent items and index them by position."""
    lengths = seqs.lengths
    keep = np.minimum(lengths, max_len)
    starts = lengths - keep
    cut = seqs.slice_rows(np.arange(len(seqs)), starts, lengths)
    users = cut.row_ids
    # position of the t-th kept item of a row of length n: max_len - n + t
    within = np.arange(len(cut.items)) - np.repeat(cut.offsets[:-1], keep)
    positions = max_len - np.repeat(keep, keep) + within
    return PositionalTensor(
        users.astype(np.int64),
        (cut.items - 1).astype(np.int64),
        positions.astype(np.int64),
        (len(seqs), seqs.n_items, max_len),
    )


def positional_rows(histories: Sequences, weights: np.ndarray):
    """Shifted, weighted history matrix ``[B, N]``: the last ``K - 1`` items move one step left
    (the last to position ``K - 1``, 1-based) and item ``j`` at position ``k`` adds ``weights[k]``
    to column ``j - 1`` — ``P S (A W w_hat_K)`` of eq. 15 as a sparse matrix."""
    size = len(weights)
    lengths = histories.lengths
    keep = np.minimum(lengths, size - 1)
    cut = histories.slice_rows(np.arange(len(histories)), lengths - keep, lengths)
    within = np.arange(len(cut.items)) - np.repeat(cut.offsets[:-1], keep)
    pos = (size - 1) - np.repeat(keep, keep) + within
    return sp.csr_matrix(
        (weights[pos], (cut.row_ids, cut.items - 1)), shape=(len(histories), histories.n_items)
    )


# ---------------------------------------------------------------- compressed unfoldings


def entity_unfolding(
    tensor: PositionalTensor,
    mode: int,
    other: np.ndarray,
    pos: np.ndarray,
    scale: np.ndarray | None = None,
) -> LinearOperator:
    """Mode-``mode`` (0 = users, 1 = items) unfolding of ``X x2 D`` compressed by ``other`` on
    the other entity mode and by ``pos [K, q]`` on the position mode, as a matrix-free operator
    of shape ``[n_mode, r_other * q]`` (column index ``o * q + c``).

    ``scale`` is the item scaling ``D`` (diagonal): it multiplies the item coordinate of each
    entry. Every product is a sparse product over the non-zero entries.
    """
    slices = tensor.slices(pos, scale)
    if mode == 1:
        slices = [s.T.tocsr() for s in slices]
    n_mode = tensor.shape[mode]
    r_o, q = other.shape[1], pos.shape[1]

    def matmat(z: np.ndarray) -> np.ndarray:
        z = np.asarray(z, dtype=np.float64).reshape(r_o, q, -1)
        out = np.zeros((n_mode, z.shape[2]))
        for c, s in enumerate(slices):
            out += s @ (other @ z[:, c, :])
        return out

    def rmatmat(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).reshape(n_mode, -1)
        out = np.empty((r_o, q, y.shape[1]))
        for c, s in enumerate(slices):
            out[:, c, :] = other.T @ (s.T @ y)
        return out.reshape(r_o * q, -1)

    return LinearOperator(
        (n_mode, r_o * q),
        matvec=lambda v: matmat(v).ravel(),
        rmatvec=lambda v: rmatmat(v).ravel(),
        matmat=matmat,
        rmatmat=rmatmat,
        dtype=np.float64,
    )


def entity_unfolding_explicit(
    tensor: PositionalTensor,
    mode: int,
    other: np.ndarray,
    pos: np.ndarray,
    scale: np.ndarray | None = None,
) -> np.ndarray:
    """The same compressed unfolding built explicitly by ``q`` sparse x dense products."""
    slices = tensor.slices(pos, scale)
    n_mode, r_o, q = tensor.shape[mode], other.shape[1], pos.shape[1]
    out = np.empty((n_mode, r_o, q))
    for c, s in enumerate(slices):
        out[:, :, c] = (s if mode == 0 else s.T) @ other
    return out.reshape(n_mode, r_o * q)


def position_unfolding(
    tensor: PositionalTensor, users: np.ndarray, items: np.ndarray, scale: np.ndarray | None
) -> LinearOperator:
    """Mode-3 unfolding of ``X x2 D`` compressed by ``U`` and ``D V``: ``[K, r1 * r2]``
    (column index ``a * r2 + b``), matrix-free over the non-zero entries."""
    k = tensor.shape[2]
    dv = items if scale is None else items * scale[:, None]
    r1, r2 = users.shape[1], dv.shape[1]

    def matvec(z: np.ndarray) -> np.ndarray:
        uz = users @ np.asarray(z, dtype=np.float64).reshape(r1, r2)  # [M, r2]
        vals = np.einsum("er,er->e", uz[tensor.users], dv[tensor.items])
        return np.bincount(tensor.positions, weights=vals, minlength=k)

    def rmatvec(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64).ravel()
        s = sp.csr_matrix(
            (y[tensor.positions], (tensor.users, tensor.items)), shape=tensor.shape[:2]
        )
        return (users.T @ (s @ dv)).ravel()

    return LinearOperator((k, r1 * r2), matvec=matvec, rmatvec=rmatvec, dtype=np.float64)


def position_unfolding_explicit(
    tensor: PositionalTensor,
    users: np.ndarray,
    items: np.ndarray,
    scale: np.ndarray | None,
    dtype: type = np.float64,
) -> np.ndarray:
    """``T [K, r1 * r2]`` explicitly: row ``k`` is ``U[S_k]^T (D V)[J_k]`` (one GEMM over the
    entries at position ``k``), so the cost is ``2 nnz r1 r2`` and no ``M x N`` slice exists.
    ``dtype=np.float32`` halves time and memory (used for the ``K x K`` Gram in HOOI)."""
    k = tensor.shape[2]
    dv = (items if scale is None else items * scale[:, None]).astype(dtype, copy=False)
    users = users.astype(dtype, copy=False)
    out = np.zeros((k, users.shape[1], dv.shape[1]), dtype=dtype)
    order = np.argsort(tensor.positions, kind="stable")
    bounds = np.searchsorted(tensor.positions[order], np.arange(k + 1))
    for p in range(k):
        idx = order[bounds[p] : bounds[p + 1]]
        if len(idx):
            out[p] = users[tensor.users[idx]].T @ dv[tensor.items[idx]]
    return out.reshape(k, -1)


# ---------------------------------------------------------------- truncated SVD


def top_eigvecs(gram: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``rank`` eigenvectors (descending) of a symmetric PSD matrix, sign-fixed."""
    vals, vecs = np.linalg.eigh((gram + gram.T) / 2)
    order = np.argsort(vals)[::-1][:rank]
    vecs = vecs[:, order]
    return _fix_signs(vecs), np.sqrt(np.clip(vals[order], 0, None))


def _fix_signs(u: np.ndarray) -> np.ndarray:
    """Deterministic sign: the largest-magnitude entry of each column is positive."""
    idx = np.argmax(np.abs(u), axis=0)
    signs = np.sign(u[idx, np.arange(u.shape[1])])
    signs[signs == 0] = 1.0
    return u * signs


def _reorthonormalize(u: np.ndarray) -> np.ndarray:
    """Cholesky-QR (``u R^-1`` with ``R^T R = u^T u``): one small Gram instead of a tall
    Householder QR, keeping column directions; falls back to QR when ``u`` is rank deficient
    (a zero singular value inside the requested rank)."""
    from scipy.linalg import cho_factor, solve_triangular

    try:
        r, _ = cho_factor(u.T @ u, lower=False, check_finite=False)
        if np.min(np.abs(np.diag(r))) < 1e-6:
            raise np.linalg.LinAlgError
        return solve_triangular(r, u.T, trans="T", lower=False, check_finite=False).T
    except np.linalg.LinAlgError:
        q, r = np.linalg.qr(u)
        return q * np.sign(np.where(np.diag(r) == 0, 1, np.diag(r)))


def randomized_left(
    op: LinearOperator | np.ndarray,
    rank: int,
    seed: int,
    oversample: int = 10,
    n_iter: int = 4,
) -> np.ndarray:
    """Top-``rank`` left singular vectors by a seeded randomized range finder (Halko et al.
    2011, Alg. 4.4 with QR re-orthonormalisation between power iterations)."""
    from scipy.linalg import lu

    m, n = op.shape
    b = min(rank + oversample, n, m)
    rng = np.random.default_rng(seed)
    q = op @ rng.standard_normal((n, b))
    for _ in range(n_iter):
        # LU normalisation between power steps (as in scikit-learn), QR only at the end
        q = lu(q, permute_l=True, check_finite=False)[0]
        q = op @ lu(op.T @ q, permute_l=True, check_finite=False)[0]
    q, _ = np.linalg.qr(q)
    small = op.T @ q  # [n, b] = (Q^T op)^T
    vecs, _ = top_eigvecs(small.T @ small, rank)  # left singular vectors of Q^T op
    return _fix_signs(q @ vecs)


def left_singular(
    op: LinearOperator,
    rank: int,
    solver: str,
    seed: int,
    explicit: callable | None = None,
    max_entries: int = 2**26,
) -> np.ndarray:
    """Top-``rank`` left singular vectors of ``op``.

    ``solver``: ``"svds"`` (ARPACK Lanczos on the operator), ``"randomized"`` (range finder on
    the operator) or ``"gram"`` (build the compressed unfolding with ``explicit()`` through
    sparse products and eigen-solve its small Gram matrix exactly); ``"auto"`` picks
    ``"gram"`` when the unfolding has at most ``max_entries`` entries, else ``"randomized"``.
    """
    m, n = op.shape
    if solver == "auto":
        solver = "gram" if (explicit is not None and m * n <= max_entries) else "randomized"
    if solver == "gram":
        y = explicit() if explicit is not None else op @ np.eye(n)
        if n <= m:
            vecs, sig = top_eigvecs(y.T @ y, rank)
            u = y @ (vecs / np.where(sig > 1e-12 * max(sig[0], 1e-300), sig, np.inf))
            return _fix_signs(_reorthonormalize(u))
        return top_eigvecs(y @ y.T, rank)[0]
    if solver == "randomized":
        return randomized_left(op, rank, seed)
    if solver == "svds":
        v0 = np.random.default_rng(seed).standard_normal(min(m, n))
        u, s, _ = svds(op, k=rank, v0=v0, return_singular_vectors="u", solver="arpack")
        return _fix_signs(u[:, np.argsort(s)[::-1]])
    raise ValueError(f"unknown solver {solver!r}")
