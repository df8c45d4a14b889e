"""GA-SATF and LA-SATF: sequence-aware tensor factorization with positional attention
(Frolov & Oseledets, "Tensor-based Sequential Learning via Hankel Matrix Representation for
Next Item Recommendations", IEEE Access 11, 2023).

Equations rebuilt from the prose and the Tucker/HOOI literature (our copy lost the displays):

* (2) binary positional tensor ``X [M, N, K]``: the ``t``-th of a user's last ``n <= K`` items
  sits at position ``K - n + t`` (1-based), so the most recent item is always at ``K``.
* (9) ``A`` lower-triangular Toeplitz, ``a_k = k^(-f)`` on the ``k``-th diagonal (``a_1`` on
  the main one); ``X x3 A^T`` spreads an item at position ``k`` to earlier positions ``m <= k``
  with weight ``a_(k-m+1)``.
* (10, with Sec. VI-C) GA-SATF fits ``Y = X x2 D x3 A^T ~ G x1 U x2 V x3 W`` by HOOI: each
  factor is the top left singular subspace of ``Y`` compressed by the other factors (11). The
  core is never formed; iterations stop on the validation metric, not the core norm.
* (12) ``W_hat = A^(-T) W`` (banded triangular solve).
* (14-15) folding-in: ``R = V V^T P A W W_hat^T``; next-item scores use the history shifted one
  step left (shift matrix ``S``) and the last position: ``r = V V^T P S A W w_hat_K``, i.e. the
  item at shifted position ``k`` gets weight ``(A W w_hat_K)[k]``. ``V V^T`` may be replaced by
  ``D^-1 V V^T D`` (``rescaled``).
* (16-21) LA-SATF hankelizes positions into ``K_L x K_S`` (``K_S = K - K_L + 1``, see
  :mod:`.hankel`), fits ``X~ x2 D x3 A_L^T ~ G x1 U x2 V x3 W_L x4 W_S`` and scores with
  weights ``h = conv(A_L W_L w_hat_{K_L}, W_S w_{K_S})`` over shifted positions.

Deviations and choices (listed because the equations had to be rebuilt):

* the mode-3 update of GA-SATF uses the unfolding of ``Y`` (``A^T`` applied), as eq. 11 says;
* the user and item updates use ``solver``: 'auto' builds the compressed unfolding explicitly
  through sparse products when it has <= 2^26 entries and eigen-solves its Gram matrix exactly,
  else a seeded randomized range finder on the matrix-free ``LinearOperator``; 'svds' uses
  ARPACK on the operator. Position modes (size ``K``) are solved from their ``K x K`` Gram;
* random orthonormal start for items and positions (seeded); users are computed first.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import LinearOperator

from seqrec.config_fields import BUDGET, setting
from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError
from seqrec.models.factorization import hankel as hk
from seqrec.models.factorization import operators as ops
from seqrec.models.factorization.svd import (
    FoldInScores,
    grow_item_rows,
    scaling_weights,
)

log = logging.getLogger(__name__)

SOLVERS = ("auto", "gram", "randomized", "svds")

#: Hyperparameter grids of the paper's Sec. VII-D (Amazon / Steam values; ML-1M in ``_ml1m``).
#: ``attention_decay`` and ``rescaled`` are not listed in the paper text; their values are the
#: ones of the authors' grid files (recspert/SATF ``grids/``).
PAPER_GRID: dict[str, dict[str, tuple]] = {
    "puresvd": {
        "rank": (100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1500, 2000, 2500, 3000),
        "scaling": (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        "rescaled": (False, True),
    },
    "ga-satf": {
        "user_rank": tuple(range(100, 1001, 100)),
        "item_rank": tuple(range(100, 1001, 100)),
        "position_rank": (5, 10, 15, 20),
        "attention_decay": (0.0, 1.0),
        "scaling": (0.0, 0.2, 0.4, 0.6),
        "rescaled": (False, True),
    },
    "la-satf": {
        "user_rank": tuple(range(100, 1001, 100)),
        "item_rank": tuple(range(100, 1001, 100)),
        "attention_window": (1, 2, 5, 10),
        "attention_rank": (1, 2, 5, 10),
        "sequences_rank": (1, 2, 5, 10),
        "attention_decay": (0.0, 1.0),
        "scaling": (0.0, 0.2, 0.4, 0.6),
        "rescaled": (False, True),
    },
    "la-satf_ml1m": {
        "attention_window": (20, 40, 60, 80),
        "attention_rank": (5, 10, 15, 20),
        "sequences_rank": (5, 10, 15, 20),
    },
}


def _check_int(name: str, value, low: int) -> None:
    if isinstance(value, bool) or int(value) != value or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


@dataclass(frozen=True)
class _CommonConfig:
    max_len: int = 50
    """K: positions kept per history (most recent last)."""
    user_rank: int = 800
    """r1: user-mode rank."""
    item_rank: int = 600
    """r2: item-mode rank."""
    attention_decay: float = 1.0
    """f in a_k = k^(-f); 0 weighs all earlier positions equally."""
    attention_span: int = 0
    """Number of non-zero diagonals of A (0 = all)."""
    scaling: float = 0.2
    """Popularity scaling s of D (d_j = n_j^((s-1)/2)); 1.0 disables it."""
    rescaled: bool = False
    """Item projector: False = V V^T, True = D^-1 V V^T D."""
    max_iters: int = 10
    """HOOI iterations (exactly this many when fit gets no validation targets)."""
    patience: int = setting(3, role=BUDGET)
    """Stop after this many iterations without a better validation NDCG@10."""
    solver: str = "auto"
    """Truncated SVD of the user/item unfoldings: auto | gram | randomized | svds."""
    seed: int = 0
    """Seed of the random orthonormal start and randomized solvers."""
    clip_ranks: bool = True
    """Lower user_rank / item_rank to what the data allows (n_users, n_items and the product of
    the other ranks) with a warning, so the defaults run on small data; False raises instead."""

    def __post_init__(self) -> None:
        for name, low in (
            ("max_len", 2),
            ("user_rank", 1),
            ("item_rank", 1),
            ("max_iters", 1),
            ("patience", 1),
            ("attention_span", 0),
            ("seed", 0),
        ):
            _check_int(name, getattr(self, name), low)
        if not (np.isfinite(self.attention_decay) and self.attention_decay >= 0):
            raise ConfigError(f"attention_decay must be >= 0, got {self.attention_decay!r}")
        if not np.isfinite(self.scaling):
            raise ConfigError(f"scaling must be finite, got {self.scaling!r}")
        if self.solver not in SOLVERS:
            raise ConfigError(f"solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")


@dataclass(frozen=True)
class GASATFConfig(_CommonConfig):
    """GA-SATF hyperparameters; defaults are the authors' best Amazon Beauty configuration."""

    position_rank: int = 2
    """r3: position-mode rank (<= max_len)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_int("position_rank", self.position_rank, 1)
        if self.position_rank > self.max_len:
            raise ConfigError(
                f"position_rank must be <= max_len ({self.max_len}), got {self.position_rank}"
            )


@dataclass(frozen=True)
class LASATFConfig(_CommonConfig):
    """LA-SATF hyperparameters; defaults are the authors' best Amazon Beauty configuration."""

    user_rank: int = 700
    """r1: user-mode rank."""
    attention_decay: float = 0.0
    """f in a_k = k^(-f) of the local attention A_L."""
    attention_window: int = 2
    """K_L: local (attention) window; K_S = max_len - K_L + 1."""
    attention_rank: int = 1
    """r3: rank of the local-window mode (<= K_L)."""
    sequences_rank: int = 2
    """r4: rank of the sequence mode (<= K_S)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("attention_window", "attention_rank", "sequences_rank"):
            _check_int(name, getattr(self, name), 1)
        if self.attention_window > self.max_len:
            raise ConfigError(
                f"attention_window must be <= max_len ({self.max_len}), got {self.attention_window}"
            )
        if self.attention_rank > self.attention_window:
            raise ConfigError(
                f"attention_rank must be <= attention_window "
                f"({self.attention_window}), got {self.attention_rank}"
            )
        k_s = self.max_len - self.attention_window + 1
        if self.sequences_rank > k_s:
            raise ConfigError(
                f"sequences_rank must be <= max_len - attention_window + 1 "
                f"({k_s}), got {self.sequences_rank}"
            )


def _orthonormal(rng: np.random.Generator, rows: int, cols: int) -> np.ndarray:
    return np.linalg.qr(rng.standard_normal((rows, cols)))[0]


class _SATF(FoldInScores):
    """HOOI loop, validation-driven stopping, folding-in scores and persistence."""

    def __init__(self, config) -> None:
        super().__init__(config)
        self.item_factors: np.ndarray | None = None  # V [N, r2]
        self.scale: np.ndarray | None = None  # d [N]
        self.position_weights: np.ndarray | None = None  # [K] last-position weights
        self.factors: dict[str, np.ndarray] = {}  # raw HOOI factors (U only until saved)
        self.history_: list[dict] = []
        self.best_iteration: int | None = None
        self.fit_seconds: float | None = None

    # -- subclass hooks --------------------------------------------------------------------
    def _init_factors(self, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _step(self, it: int) -> None:
        raise NotImplementedError

    def _finalize(self) -> None:
        raise NotImplementedError

    def _position_factor(self) -> np.ndarray:
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------
    def _check_ranks(self, q: int) -> None:
        """Set ``ranks_ = (user rank, item rank)`` used by the fit: the configured ones, lowered
        to the largest the data allows when ``clip_ranks`` (else a ``ConfigError``)."""
        cfg, (m, n, _) = self.config, self.tensor.shape
        user, item = cfg.user_rank, cfg.item_rank
        if cfg.clip_ranks:
            user, item = min(user, m), min(item, n)
            user, item = min(user, item * q), min(item, user * q)
            if (user, item) != (cfg.user_rank, cfg.item_rank):
                log.warning(
                    "%s: ranks lowered to what the data allows: user_rank %d -> %d, "
                    "item_rank %d -> %d (%d users, %d items, position ranks product %d)",
                    self.name,
                    cfg.user_rank,
                    user,
                    cfg.item_rank,
                    item,
                    m,
                    n,
                    q,
                )
        checks = (
            ("user_rank", user, min(m, item * q), "min(n_users, item_rank * q)"),
            ("item_rank", item, min(n, user * q), "min(n_items, user_rank * q)"),
        )
        for name, value, limit, what in checks:
            if value > limit:
                raise ConfigError(
                    f"{name} must be <= {what} = {limit} (q = position ranks "
                    f"product {q}), got {value}; clip_ranks = true lowers it"
                )
        self.ranks_ = (user, item)

    def _entity_update(
        self, mode: int, other: np.ndarray, pos: np.ndarray, rank: int, it: int
    ) -> np.ndarray:
        scale = self.scale if mode == 1 else None
        op = ops.entity_unfolding(self.tensor, mode, other, pos, scale)
        explicit = lambda: ops.entity_unfolding_explicit(self.tensor, mode, other, pos, scale)  # noqa: E731
        return ops.left_singular(op, rank, self.config.solver, self.config.seed + it, explicit)

    def _update_users_items(self, it: int) -> None:
        pos = self._position_factor()
        dv = self.factors["V"] * self.scale[:, None]
        self.factors["U"] = self._entity_update(0, dv, pos, self.ranks_[0], it)
        self.factors["V"] = self._entity_update(1, self.factors["U"], pos, self.ranks_[1], it)

    def _position_gram(self) -> np.ndarray:
        """``C = T T^T [K, K]`` of the position unfolding compressed by ``U`` and ``D V``."""
        u, v = self.factors["U"], self.factors["V"]
        if self.config.solver in ("auto", "gram"):
            t = ops.position_unfolding_explicit(self.tensor, u, v, self.scale, np.float32)
            return (t @ t.T).astype(np.float64)
        op = ops.position_unfolding(self.tensor, u, v, self.scale)
        tt = np.stack([op.rmatvec(e) for e in np.eye(self.tensor.shape[2])], axis=1)
        return tt.T @ tt

    def fit(self, train: Sequences, valid: Targets | None = None) -> _SATF:
        self._remember_catalogue(train)
        cfg = self.config
        t0 = time.perf_counter()
        self.tensor = ops.positional_tensor(train, cfg.max_len)
        self.scale = scaling_weights(self.popularity[1:], cfg.scaling)
        self._init_factors(np.random.default_rng(cfg.seed))
        self.history_, best, best_state, stale = [], -np.inf, None, 0
        for it in range(cfg.max_iters):
            t_it = time.perf_counter()
            self._step(it)
            self._finalize()
            rec = {"iteration": it + 1, "seconds": time.perf_counter() - t_it}
            if valid is not None:
                rec["valid_ndcg@10"] = self._validate(valid)
                if rec["valid_ndcg@10"] > best:
                    best, best_state, stale = rec["valid_ndcg@10"], self._snapshot(), 0
                    self.best_iteration = it + 1
                else:
                    stale += 1
            self.history_.append(rec)
            log.info("%s iteration %s", self.name, rec)
            if valid is not None and stale >= cfg.patience:
                break
        if best_state is not None:
            self._restore(best_state)
        else:
            self.best_iteration = len(self.history_)
        self.fit_seconds = time.perf_counter() - t0
        del self.tensor
        return self

    def _validate(self, valid: Targets) -> float:
        from seqrec.evaluation import evaluate

        res = evaluate(
            self, valid, ks=(10,), seen_filter="history", average="interaction", chunk_size=2048
        )
        return float(res.metrics["NDCG@10"])

    def _snapshot(self) -> dict[str, np.ndarray]:
        snap = {k: v.copy() for k, v in self.factors.items() if k != "U"}
        snap["__weights__"] = self.position_weights.copy()
        return snap

    def _restore(self, snap: dict[str, np.ndarray]) -> None:
        self.position_weights = snap.pop("__weights__")
        self.factors.update(snap)
        self.item_factors = self.factors["V"]

    def _history_rows(self, histories: Sequences) -> sp.csr_matrix:
        return ops.positional_rows(histories, self.position_weights)

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """As PureSVD's: new items get zero item factors and ``d_j = 1`` (score 0) until a
        refit; users are folded in at scoring time."""
        v, self.scale = grow_item_rows(self.factors["V"], self.scale, n_items - self.n_items)
        self.factors["V"] = self.item_factors = v

    def _state(self) -> dict[str, np.ndarray]:
        state = {k: v for k, v in self.factors.items() if k != "U"}
        state.update(scale=self.scale, position_weights=self.position_weights)
        return state

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        state = dict(state)
        self.scale = state.pop("scale")
        self.position_weights = state.pop("position_weights")
        self.factors = state
        self.item_factors = state["V"]


class GASATF(_SATF):
    """Globally Attentive Sequence-Aware Tensor Factorization (GA-SATF, Algorithm 1).

    See the module docstring for the rebuilt equations and every deviation. ``factors`` holds
    ``U`` (dropped on save), ``V`` and ``W``; ``W_hat = A^-T W`` is recomputed on demand.
    """

    name = "ga-satf"

    def __init__(self, config: GASATFConfig = GASATFConfig()) -> None:
        super().__init__(config)

    @property
    def attention(self) -> np.ndarray:
        span = self.config.attention_span or None
        return ops.attention_weights(self.config.max_len, self.config.attention_decay, span)

    def _init_factors(self, rng: np.random.Generator) -> None:
        cfg = self.config
        self._check_ranks(cfg.position_rank)
        self.factors = {
            "V": _orthonormal(rng, self.tensor.shape[1], self.ranks_[1]),
            "W": _orthonormal(rng, cfg.max_len, cfg.position_rank),
        }

    def _position_factor(self) -> np.ndarray:
        return ops.attention_apply(self.attention, self.factors["W"])  # A W [K, r3]

    def _step(self, it: int) -> None:
        self._update_users_items(it)
        a, cfg = self.attention, self.config
        if cfg.solver in ("auto", "gram"):
            c = self._position_gram()
            gram = ops.attention_apply_t(a, ops.attention_apply_t(a, c).T)  # A^T C A
            self.factors["W"] = ops.top_eigvecs(gram, cfg.position_rank)[0]
        else:
            t_op = ops.position_unfolding(
                self.tensor, self.factors["U"], self.factors["V"], self.scale
            )
            op = LinearOperator(
                t_op.shape,
                dtype=np.float64,
                matvec=lambda z: ops.attention_apply_t(a, t_op.matvec(z)),
                rmatvec=lambda y: t_op.rmatvec(ops.attention_apply(a, np.ravel(y))),
            )
            self.factors["W"] = ops.left_singular(op, cfg.position_rank, cfg.solver, cfg.seed + it)

    def _finalize(self) -> None:
        a, w = self.attention, self.factors["W"]
        w_hat = ops.attention_solve_t(a, w)
        self.position_weights = ops.attention_apply(a, w) @ w_hat[-1]
        self.item_factors = self.factors["V"]


class LASATF(_SATF):
    """Locally Attentive Sequence-Aware Tensor Factorization (LA-SATF, Algorithm 2).

    Fourth-order HOOI over the hankelized positional tensor (never formed, see
    :mod:`.hankel`): users, items, local window ``W_L`` (with ``A_L``), sequence ``W_S``.
    """

    name = "la-satf"

    def __init__(self, config: LASATFConfig = LASATFConfig()) -> None:
        super().__init__(config)

    @property
    def attention(self) -> np.ndarray:
        span = self.config.attention_span or None
        return ops.attention_weights(
            self.config.attention_window, self.config.attention_decay, span
        )

    def _init_factors(self, rng: np.random.Generator) -> None:
        cfg = self.config
        self._check_ranks(cfg.attention_rank * cfg.sequences_rank)
        k_s = cfg.max_len - cfg.attention_window + 1
        self.factors = {
            "V": _orthonormal(rng, self.tensor.shape[1], self.ranks_[1]),
            "WL": _orthonormal(rng, cfg.attention_window, cfg.attention_rank),
            "WS": _orthonormal(rng, k_s, cfg.sequences_rank),
        }

    def _position_factor(self) -> np.ndarray:
        p_l = ops.attention_apply(self.attention, self.factors["WL"])  # A_L W_L
        return hk.hankel_compress(p_l, self.factors["WS"])  # [K, r3 r4]

    def _step(self, it: int) -> None:
        self._update_users_items(it)
        a, cfg = self.attention, self.config
        c = self._position_gram()
        g_l = hk.local_gram(c, self.factors["WS"], cfg.attention_window)
        g_l = ops.attention_apply_t(a, ops.attention_apply_t(a, g_l).T)  # A_L^T G A_L
        self.factors["WL"] = ops.top_eigvecs(g_l, cfg.attention_rank)[0]
        p_l = ops.attention_apply(a, self.factors["WL"])
        g_s = hk.series_gram(c, p_l, cfg.attention_window)
        self.factors["WS"] = ops.top_eigvecs(g_s, cfg.sequences_rank)[0]

    def _finalize(self) -> None:
        a, w_l, w_s = self.attention, self.factors["WL"], self.factors["WS"]
        alpha = ops.attention_apply(a, w_l) @ ops.attention_solve_t(a, w_l)[-1]
        self.position_weights = hk.last_position_weights(alpha, w_s @ w_s[-1])
        self.item_factors = self.factors["V"]
