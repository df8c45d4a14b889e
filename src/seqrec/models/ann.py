"""Approximate top-k retrieval: an HNSW graph over a model's item table (faiss).

A model whose score is an inner product with an item table provides two arrays
(:meth:`seqrec.models.base.Recommender.item_vectors` and ``query_vectors``) such that
``score(histories)[:, 1:] == query_vectors(histories) @ item_vectors()[1:].T``; an item bias is
folded in exactly as one extra dimension (item ``[w_i, b_i]``, query ``[h, 1]``). The index is
a graph over those item vectors (faiss ``IndexHNSWFlat``, which keeps the vectors). By default
(``space = "l2"``) the inner product is reduced to Euclidean search by one more coordinate
(item ``[x, sqrt(M^2 - |x|^2)]`` with ``M`` the largest item norm, query ``[q, 0]``: the nearest
items are the ones of largest inner product), which navigates trained tables far better than a
graph built on the inner product itself (``space = "ip"``); the scores returned are the inner
products, recovered exactly from the distances.

Filters stay exact: :func:`index_top_k` over-fetches ``k`` plus the number of items a row
excludes (its seen items, the deny list), so that after filtering ``k`` remain whenever the
graph returns what was asked; an allow list small enough is ranked exactly over its own items
(no graph search at all), a larger one multiplies the over-fetch by ``items / allowed``. A row
whose filtered candidates still fall short of ``k`` (or whose over-fetch would exceed
``max_fetch``) is ranked exactly, and the caller says so.

faiss is the optional extra ``seqrec[ann]``; without it an artifact that holds an index is
ranked exactly (said once, in the log).
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

LIBRARY = "faiss"
#: how to install the library the index needs
INSTALL_HINT = "pip install 'seqrec[ann]' (faiss-cpu)"


@dataclass(frozen=True)
class IndexParams:
    """Parameters of the HNSW graph (defaults: docs/decisions/ann-library.md)."""

    m: int = 32
    """Neighbours per node (faiss ``M``): more gives higher recall, a larger and slower index."""
    ef_construction: int = 200
    """Candidate list while building: more gives a better graph and a slower build."""
    ef_search: int = 256
    """Candidate list while searching (at least the number of items fetched)."""
    space: str = "l2"
    """``"l2"``: Euclidean graph over the inner product reduced by one coordinate; ``"ip"``:
    a graph built on the inner product itself."""
    small_allow: float = 0.125
    """An allow list of at most this fraction of the catalogue is ranked exactly over its own
    items; a larger one is over-fetched and filtered."""
    max_fetch: int = 4096
    """The largest over-fetch per row; a row that needs more is ranked exactly."""

    def __post_init__(self) -> None:
        for name in ("m", "ef_construction", "ef_search", "max_fetch"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"index {name} must be an integer >= 1, got {value!r}")
        if self.space not in ("l2", "ip"):
            raise ConfigError(f"index space must be 'l2' or 'ip', got {self.space!r}")
        if not 0.0 <= self.small_allow <= 1.0:
            raise ConfigError(f"index small_allow must be in [0, 1], got {self.small_allow!r}")


def faiss_module() -> Any:
    """The faiss module, or ``None`` when the ``ann`` extra is not installed."""
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def require_faiss() -> Any:
    faiss = faiss_module()
    if faiss is None:
        raise ConfigError(f"building an item index needs faiss: {INSTALL_HINT}")
    return faiss


class ItemIndex:
    """An HNSW inner-product graph over items ``1..n_items`` (faiss id ``j`` = item ``j + 1``)."""

    def __init__(
        self, index: Any, n_items: int, dim: int, params: IndexParams, max_sq_norm: float = 0.0
    ) -> None:
        self.index, self.n_items, self.dim, self.params = index, n_items, dim, params
        self.max_sq_norm = float(max_sq_norm)  # M^2 of the "l2" reduction
        self.build_seconds: float | None = None

    @classmethod
    def build(
        cls, vectors: np.ndarray, params: IndexParams | None = None, threads: int = 0
    ) -> ItemIndex:
        """Build over ``vectors [n_items + 1, D]`` (row 0, PAD, is left out); ``threads`` 0 keeps
        faiss's default (every core)."""
        import time

        faiss = require_faiss()
        params = params or IndexParams()
        vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[1:])
        if vectors.ndim != 2 or len(vectors) < 1:
            raise DataError(f"an item index needs a [n_items + 1, D] table, got {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise DataError("the item table holds NaN or infinite values: nothing to index")
        t0 = time.perf_counter()
        dim, max_sq = vectors.shape[1], 0.0
        if params.space == "l2":
            sq = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
            max_sq = float(sq.max())
            extra = np.sqrt(np.maximum(max_sq - sq, 0.0)).astype(np.float32)
            vectors = np.ascontiguousarray(np.hstack([vectors, extra[:, None]]))
        with _faiss_threads(faiss, threads):
            if params.space == "l2":
                index = faiss.IndexHNSWFlat(dim + 1, params.m)
            else:
                index = faiss.IndexHNSWFlat(dim, params.m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = params.ef_construction
            index.add(vectors)
        out = cls(index, len(vectors), dim, params, max_sq)
        out.build_seconds = time.perf_counter() - t0
        return out

    def search(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(items [B, fetch], scores [B, fetch])`` best first; item 0 / ``-inf`` where the
        graph found fewer."""
        fetch = min(int(fetch), self.n_items)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        if self.params.space == "l2":
            q = np.hstack([queries, np.zeros((len(queries), 1), np.float32)])
            queries = np.ascontiguousarray(q)
        # per call, not on the shared index: concurrent requests (the HTTP service) may differ
        params = require_faiss().SearchParametersHNSW(efSearch=max(self.params.ef_search, fetch))
        scores, ids = self.index.search(queries, fetch, params=params)
        if self.params.space == "l2":  # |q - x|^2 = |q|^2 + M^2 - 2 q.x
            qq = np.einsum("ij,ij->i", queries, queries, dtype=np.float64)[:, None]
            scores = (qq + self.max_sq_norm - scores) / 2
        found = ids >= 0
        return np.where(found, ids + 1, 0), np.where(found, scores, -np.inf).astype(np.float32)

    def vectors(self, items: np.ndarray) -> np.ndarray:
        """The indexed vectors of internal ids ``items`` (1..n_items)."""
        out = self.index.reconstruct_batch(np.asarray(items, dtype=np.int64) - 1)
        return out[:, : self.dim]

    def nbytes(self) -> int:
        return int(self.serialized().nbytes)

    def serialized(self) -> np.ndarray:
        return require_faiss().serialize_index(self.index)

    def to_arrays(self, state_sha256: str) -> dict[str, np.ndarray]:
        """What ``index.npz`` holds: the library's bytes, the parameters, and the sha256 of the
        ``state.npz`` whose weights it was built from."""
        meta = {
            "library": LIBRARY,
            "n_items": self.n_items,
            "dim": self.dim,
            "max_sq_norm": self.max_sq_norm,
            "params": asdict(self.params),
            "state_sha256": state_sha256,
        }
        return {"index": self.serialized(), "meta": np.array(json.dumps(meta))}


def index_meta(arrays: dict[str, np.ndarray], where: str) -> dict[str, Any]:
    """The validated metadata of an ``index.npz``'s arrays."""
    try:
        meta = json.loads(str(arrays["meta"]))
        params = IndexParams(**{"space": "ip", **meta["params"]})  # files before "space": ip
        ok = (
            meta["library"] == LIBRARY
            and type(meta["n_items"]) is int
            and type(meta["dim"]) is int
            and isinstance(meta["state_sha256"], str)
        )
    except (KeyError, TypeError, ValueError, ConfigError) as exc:
        raise DataError(f"{where}: not a seqrec item index ({exc})") from None
    if not ok or "index" not in arrays:
        raise DataError(f"{where}: not a seqrec item index (library {meta.get('library')!r})")
    meta["params"] = params
    return meta


def load_index(arrays: dict[str, np.ndarray], meta: dict[str, Any], where: str) -> ItemIndex:
    faiss = require_faiss()
    try:
        index = faiss.deserialize_index(np.ascontiguousarray(arrays["index"], dtype=np.uint8))
    except Exception as exc:  # faiss raises RuntimeError with a C++ message
        msg = " ".join(str(exc).split())[:160]
        raise DataError(f"{where}: faiss cannot read the index ({msg})") from None
    extra = 1 if meta["params"].space == "l2" else 0
    if index.ntotal != meta["n_items"] or index.d != meta["dim"] + extra:
        raise DataError(
            f"{where}: the index holds {index.ntotal} vectors of {index.d} dimensions, its "
            f"metadata says {meta['n_items']} of {meta['dim']}"
        )
    return ItemIndex(
        index, meta["n_items"], meta["dim"], meta["params"], float(meta.get("max_sq_norm", 0.0))
    )


class _faiss_threads:
    def __init__(self, faiss: Any, n: int) -> None:
        self.faiss, self.n, self.old = faiss, n, None

    def __enter__(self):
        if self.n:
            self.old = self.faiss.omp_get_max_threads()
            self.faiss.omp_set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.old is not None:
            self.faiss.omp_set_num_threads(self.old)


def index_top_k(
    index: ItemIndex,
    queries: np.ndarray,
    k: int,
    excluded: tuple[np.ndarray, np.ndarray],
    allow: np.ndarray | None = None,
    deny: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Top-``k`` of each query row from the index, with filters applied exactly.

    Args:
        queries: ``[B, D]`` query vectors.
        excluded: ``(rows, items)`` cells each row excludes (its seen items).
        allow: internal ids the answer is restricted to (None: every item).
        deny: internal ids never recommended.

    Returns:
        ``(items [B, k], scores [B, k], short [B])``: best first, ties by ascending id, 0 /
        ``-inf`` after the eligible ones; ``short`` marks the rows the index could not answer
        completely (the caller ranks them exactly).
    """
    n_rows, n = len(queries), index.n_items
    k = min(int(k), n)
    bad = np.zeros(n + 1, dtype=bool)  # what no row may get
    bad[0] = True
    if deny is not None:
        bad[np.asarray(deny, dtype=np.int64)] = True
    if allow is not None:
        keep = np.zeros(n + 1, dtype=bool)
        keep[np.asarray(allow, dtype=np.int64)] = True
        bad |= ~keep
    n_eligible = n - int(bad[1:].sum())
    ex_rows, ex_items = (np.asarray(a, dtype=np.int64) for a in excluded)
    out_ids = np.zeros((n_rows, k), dtype=np.int64)
    out_vals = np.full((n_rows, k), -np.inf, dtype=np.float32)
    short = np.zeros(n_rows, dtype=bool)
    if n_rows == 0 or n_eligible == 0:
        return out_ids, out_vals, short
    if allow is not None and n_eligible <= index.params.small_allow * n:
        # few allowed items: score them all exactly (no graph search)
        cand = np.flatnonzero(~bad)
        scores = np.asarray(queries, dtype=np.float32) @ index.vectors(cand).T
        cand = np.broadcast_to(cand, scores.shape)
        return (*_filtered(cand, scores, k, ex_rows, ex_items, bad), short)
    n_excluded = np.bincount(ex_rows, minlength=n_rows) if len(ex_rows) else np.zeros(n_rows, int)
    n_excluded = n_excluded + int(bad[1:].sum() if allow is None else 0)
    factor = n / n_eligible if allow is not None else 1.0
    fetch = np.ceil((k + n_excluded) * factor).astype(np.int64)
    fetch = np.minimum(np.maximum(fetch, k), n)
    # rows grouped by their over-fetch rounded up to a power of two: one search per group
    bucket = np.power(2, np.ceil(np.log2(np.maximum(fetch, 1)))).astype(np.int64)
    bucket = np.minimum(bucket, n)
    short |= bucket > index.params.max_fetch
    for size in np.unique(bucket[~short]):
        rows = np.flatnonzero((bucket == size) & ~short)
        cand, scores = index.search(queries[rows], int(size))
        sel = np.isin(ex_rows, rows)
        local = np.searchsorted(rows, ex_rows[sel])
        ids, vals = _filtered(cand, scores, k, local, ex_items[sel], bad)
        out_ids[rows], out_vals[rows] = ids, vals
        # fewer than k left: complete only if the graph returned every item it was asked for
        # and the filters removed the rest of the catalogue
        got = (ids > 0).sum(1)
        row_eligible = n_eligible - _excluded_eligible(rows, ex_rows, ex_items, bad)
        short[rows] |= got < np.minimum(k, row_eligible)
    return out_ids, out_vals, short


def _excluded_eligible(
    rows: np.ndarray, ex_rows: np.ndarray, ex_items: np.ndarray, bad: np.ndarray
) -> np.ndarray:
    """How many otherwise eligible items each of ``rows`` excludes (distinct)."""
    sel = np.isin(ex_rows, rows)
    r, i = ex_rows[sel], ex_items[sel]
    keep = ~bad[i]
    pairs = np.unique(np.stack([r[keep], i[keep]]), axis=1) if keep.any() else np.zeros((2, 0))
    local = np.searchsorted(rows, pairs[0].astype(np.int64))
    return np.bincount(local, minlength=len(rows))


def _filtered(
    cand: np.ndarray,
    scores: np.ndarray,
    k: int,
    ex_rows: np.ndarray,
    ex_items: np.ndarray,
    bad: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best of candidates ``cand [B, F]`` after removing ``bad`` items and each row's
    excluded items; sorted by descending score, then ascending id."""
    scores = np.array(scores, dtype=np.float32)
    scores[bad[cand]] = -np.inf
    if len(ex_rows):
        # a candidate is excluded where (row, item) is one of the excluded cells
        n_cols = int(max(cand.max(initial=0), ex_items.max(initial=0))) + 1
        ex_keys = np.unique(ex_rows * n_cols + ex_items)
        keys = np.arange(len(cand))[:, None] * n_cols + cand
        scores[np.isin(keys, ex_keys)] = -np.inf
    scores[np.isnan(scores)] = -np.inf
    order = np.lexsort((cand, -scores), axis=1)[:, :k]
    ids = np.take_along_axis(cand, order, 1)
    vals = np.take_along_axis(scores, order, 1)
    ids = np.where(vals > -np.inf, ids, 0)
    if ids.shape[1] < k:  # fewer candidates than k (a tiny allow list)
        pad = k - ids.shape[1]
        ids = np.pad(ids, ((0, 0), (0, pad)))
        vals = np.pad(vals, ((0, 0), (0, pad)), constant_values=-np.inf)
    return ids, np.where(ids > 0, vals, -np.inf).astype(np.float32)
