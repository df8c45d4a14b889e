"""PureSVD and PureSVD-N (Cremonesi et al. 2010; normalized variant as in Frolov & Oseledets 2023,
Sec. VI-B, eqs. 26-28, after Nikolakopoulos et al. 2019).

Rebuilt equations (the displayed ones are missing from our copy of the paper):

* (26) ``X_D = X D`` with ``D = diag(d)``, ``d_j = (sum_i x_ij)^((s - 1) / 2)``: ``s = 1`` gives
  ``D = I`` (plain PureSVD); ``s < 1`` lifts rare items, ``s > 1`` popular ones.
* ``X_D ~ U S V^T`` truncated at rank ``r``; only ``V [N, r]`` is kept.
* (27) scores ``r = V V^T p`` for the binary history vector ``p`` (folding-in, no refit);
* (28) scores ``r = D^(-1) V V^T D p`` (the "original space" restored, like eq. 12 of the
  tensor models). The switch is the ``rescaled`` flag.

In seqrec "PureSVD-N" is ``puresvd`` with ``scaling != 1``; ``puresvd`` with ``scaling = 1``
is the classic PureSVD (``rescaled`` is then a no-op).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError
from seqrec.models.base import Recommender
from seqrec.models.factorization.operators import _fix_signs, randomized_left

log = logging.getLogger(__name__)

SOLVERS = ("svds", "randomized")


def scaling_weights(counts: np.ndarray, scaling: float) -> np.ndarray:
    """``d_j = n_j^((s - 1) / 2)`` for item counts ``n_j``; items unseen in training get
    ``d_j = 1`` (their column of ``X`` is empty, so the value only keeps ``D`` invertible)."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.where(counts > 0, np.maximum(counts, 1.0) ** (0.5 * (scaling - 1.0)), 1.0)


def item_projector(
    factors: np.ndarray, scale: np.ndarray, rescaled: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``(left, right)`` with scores ``= left @ (right^T p)``: ``(V, V)`` for ``V V^T`` or
    ``(D^-1 V, D V)`` for ``D^-1 V V^T D``."""
    if rescaled:
        return factors / scale[:, None], factors * scale[:, None]
    return factors, factors


def fold_in(rows: sp.csr_matrix, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``[B, n_items + 1]`` float32 scores ``left @ right^T @ p`` for the weighted history rows
    ``rows [B, N]`` (column 0 = PAD is set by ``Recommender.score``)."""
    if rows.shape[1] < right.shape[0]:  # histories of a smaller catalogue (before growth)
        rows = sp.csr_matrix((rows.data, rows.indices, rows.indptr), (rows.shape[0], len(right)))
    latent = (rows @ right).astype(np.float32)  # [B, r]
    out = np.empty((rows.shape[0], left.shape[0] + 1), dtype=np.float32)
    out[:, 1:] = latent @ left.T.astype(np.float32)
    out[:, 0] = -np.inf
    return out


def binary_rows(histories: Sequences) -> sp.csr_matrix:
    """Binary ``[B, N]`` history matrix (item ``j`` -> column ``j - 1``)."""
    mat = sp.csr_matrix(
        (np.ones(len(histories.items)), (histories.row_ids, histories.items - 1)),
        shape=(len(histories), histories.n_items),
    )
    mat.sum_duplicates()
    mat.data[:] = 1.0
    return mat


@dataclass(frozen=True)
class PureSVDConfig:
    """PureSVD / PureSVD-N hyperparameters (paper grid: rank 100..3000, scaling 0..1 step 0.2)."""

    rank: int = 500
    """Truncation rank ``r`` of the SVD."""
    scaling: float = 1.0
    """Popularity scaling factor ``s`` of ``d_j = n_j^((s-1)/2)``; 1.0 = plain PureSVD."""
    rescaled: bool = False
    """Prediction rule: False = eq. 27 (``V V^T``), True = eq. 28 (``D^-1 V V^T D``)."""
    solver: str = "randomized"
    """Truncated SVD: 'randomized' (seeded range finder, 4 power iterations) or 'svds' (ARPACK)."""
    seed: int = 0
    """Seed of the random start (deterministic refits)."""

    def __post_init__(self) -> None:
        if int(self.rank) != self.rank or self.rank < 1:
            raise ConfigError(f"rank must be an integer >= 1, got {self.rank!r}")
        if not np.isfinite(self.scaling):
            raise ConfigError(f"scaling must be finite, got {self.scaling!r}")
        if self.solver not in SOLVERS:
            raise ConfigError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")


class FoldInScores(Recommender):
    """The scores of the folding-in models (PureSVD, the SATF models):
    ``fold_in(_history_rows(h), left, right)`` of :func:`item_projector`, an inner product of a
    query with the item table ``left``, hence indexable (``seqrec index``). Subclasses give
    ``item_factors``, ``scale``, ``config.rescaled`` and ``_history_rows``."""

    index_unsupported = None

    def _history_rows(self, histories: Sequences) -> sp.csr_matrix:
        raise NotImplementedError

    def _score(self, histories: Sequences, query_times: np.ndarray | None) -> np.ndarray:
        left, right = item_projector(self.item_factors, self.scale, self.config.rescaled)
        return fold_in(self._history_rows(histories), left, right)

    def item_vectors(self) -> np.ndarray:
        """``left`` of :func:`item_projector` with a zero PAD row: scores are ``query @ left^T``."""
        self._check_fitted()
        left, _ = item_projector(self.item_factors, self.scale, self.config.rescaled)
        return np.vstack([np.zeros((1, left.shape[1])), left]).astype(np.float32)

    def query_vectors(
        self, histories: Sequences, query_times: np.ndarray | None = None
    ) -> np.ndarray:
        self._check_histories(histories)
        _, right = item_projector(self.item_factors, self.scale, self.config.rescaled)
        return np.asarray(self._history_rows(histories) @ right, dtype=np.float32)


class PureSVD(FoldInScores):
    """PureSVD (Cremonesi et al., RecSys 2010) with the popularity-normalized input of
    PureSVD-N (Frolov & Oseledets, IEEE Access 2023, eqs. 26-28).

    Deviations: the randomized solver (default) is a seeded Halko range finder rather than the
    paper's ``sklearn.randomized_svd``; a rank at or above ``min(M, N)`` is clipped to
    ``min(M, N) - 1`` (ARPACK's limit) with a warning. Duplicate items in a history count once.
    """

    name = "puresvd"

    def __init__(self, config: PureSVDConfig = PureSVDConfig()) -> None:
        super().__init__(config)
        self.item_factors: np.ndarray | None = None  # V [N, r]
        self.scale: np.ndarray | None = None  # d [N]
        self.fit_seconds: float | None = None

    def fit(self, train: Sequences, valid: Targets | None = None) -> PureSVD:
        self._remember_catalogue(train)
        t0 = time.perf_counter()
        self.scale = scaling_weights(self.popularity[1:], self.config.scaling)
        x = binary_rows(train) @ sp.diags(self.scale)
        self.item_factors = svd_item_factors(
            x, self.config.rank, self.config.solver, self.config.seed
        )
        self.fit_seconds = time.perf_counter() - t0
        return self

    def _history_rows(self, histories: Sequences) -> sp.csr_matrix:
        return binary_rows(histories)

    def truncated(self, rank: int, rescaled: bool | None = None) -> PureSVD:
        """A copy using the first ``rank`` factors (the rank grid needs one SVD only)."""
        from dataclasses import replace

        self._check_fitted()
        cfg = replace(
            self.config, rank=rank, rescaled=self.config.rescaled if rescaled is None else rescaled
        )
        out = PureSVD(cfg)
        out.n_items, out.vocab, out.popularity = self.n_items, self.vocab, self.popularity
        out.scale, out.item_factors = self.scale, self.item_factors[:, :rank]
        return out

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """New items get zero factors (and ``d_j = 1``): the folding-in score of an item with no
        interactions, 0, until a refit (``fit_partial``) gives them factors. Users are folded
        in at scoring time: there are no user rows to grow."""
        self.item_factors, self.scale = grow_item_rows(
            self.item_factors, self.scale, n_items - self.n_items
        )

    def _state(self) -> dict[str, np.ndarray]:
        return {"item_factors": self.item_factors, "scale": self.scale}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self.item_factors = state["item_factors"]
        self.scale = state["scale"]


def grow_item_rows(
    factors: np.ndarray, scale: np.ndarray, added: int
) -> tuple[np.ndarray, np.ndarray]:
    """``factors [N, r]`` and ``scale [N]`` with ``added`` items appended: zero factor rows and
    scale 1 (the weight :func:`scaling_weights` gives an item without interactions)."""
    zeros = np.zeros((added, factors.shape[1]), dtype=factors.dtype)
    return np.concatenate([factors, zeros]), np.concatenate([scale, np.ones(added, scale.dtype)])


def svd_item_factors(x: sp.spmatrix, rank: int, solver: str, seed: int) -> np.ndarray:
    """Top-``rank`` right singular vectors ``V [N, r]`` of the sparse ``x [M, N]``."""
    from scipy.sparse.linalg import svds

    limit = min(x.shape) - 1
    if rank > limit:
        log.warning("rank %d clipped to %d (matrix is %s)", rank, limit, x.shape)
        rank = limit
    x = sp.csr_matrix(x, dtype=np.float64)
    if solver == "svds":
        v0 = np.random.default_rng(seed).standard_normal(min(x.shape))
        _, s, vt = svds(x, k=rank, v0=v0, solver="arpack")
        return _fix_signs(vt[np.argsort(s)[::-1]].T)
    return randomized_left(x.T.tocsr(), rank, seed)
