"""Approximate top-k retrieval: an HNSW graph or an inverted file over a model's item table
(faiss).

A model whose score is an inner product with an item table provides two arrays
(:meth:`seqrec.models.base.Recommender.item_vectors` and ``query_vectors``) such that
``score(histories)[:, 1:] == query_vectors(histories) @ item_vectors()[1:].T``; an item bias is
folded in exactly as one extra dimension (item ``[w_i, b_i]``, query ``[h, 1]``). The index is
either a graph over those item vectors (``kind = "hnsw"``: faiss ``IndexHNSWFlat``) or an
inverted file (``kind = "ivf"``: faiss ``IndexIVFFlat``, the items grouped into ``nlist``
k-means cells of which a query scans the ``nprobe`` nearest); both keep the vectors. The
default ``kind = "auto"`` chooses by the catalogue's size (:data:`IVF_FROM_ITEMS`, measured in
docs/decisions/ann-library.md). By default
(``space = "l2"``) the inner product is reduced to Euclidean search by one more coordinate
(item ``[x, sqrt(M^2 - |x|^2)]`` with ``M`` the largest item norm, query ``[q, 0]``: the nearest
items are the ones of largest inner product), which navigates trained tables far better than a
graph built on the inner product itself (``space = "ip"``); the scores returned are the inner
products, computed again from the stored vectors for every candidate (an exact re-ranking of
what the index returns, so the order of the answer never depends on the index's arithmetic).
A graph's build also searches every item's own vector: the few items no search reaches are
kept apart and scored exactly in every search (``ItemIndex.always``).

The search effort (``ef_search`` of a graph, ``nprobe`` of an inverted file) can be chosen at
build time by :func:`calibrate`: on a sample of real queries it compares the index's top-k with
exact ranking and raises the effort until the recall reaches a target; the chosen value and the
recall measured are stored with the index (``ItemIndex.calibration``).

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
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

LIBRARY = "faiss"
#: how to install the library the index needs
INSTALL_HINT = "pip install 'seqrec[ann]' (faiss-cpu)"


#: ``kind = "auto"`` builds an inverted file from this many items up, a graph below
IVF_FROM_ITEMS = 100_000
KINDS = ("auto", "hnsw", "ivf")


def auto_nlist(n_items: int) -> int:
    """The inverted file's cells for ``n_items`` items: ``4 * sqrt(n)`` rounded to a power of
    two, at least 1 and at most ``n / 32`` (cells of a few dozen items at least)."""
    want = 4 * np.sqrt(max(n_items, 1))
    nlist = int(2 ** np.round(np.log2(want)))
    return int(max(1, min(nlist, n_items // 32)))


@dataclass(frozen=True)
class IndexParams:
    """Parameters of the index (defaults: docs/decisions/ann-library.md)."""

    kind: str = "auto"
    """``"hnsw"`` (a graph), ``"ivf"`` (an inverted file) or ``"auto"``: ``"ivf"`` from
    :data:`IVF_FROM_ITEMS` items up, else ``"hnsw"`` (an index stores the kind it was built
    with)."""
    m: int = 32
    """Graph: neighbours per node (faiss ``M``): more gives higher recall, a larger and slower
    index."""
    ef_construction: int = 200
    """Graph: candidate list while building: more gives a better graph and a slower build."""
    ef_search: int = 256
    """Graph: candidate list while searching (at least the number of items fetched)."""
    nlist: int = 0
    """Inverted file: k-means cells (0: :func:`auto_nlist` of the catalogue's size)."""
    nprobe: int = 0
    """Inverted file: cells scanned per query (0: ``nlist / 32``; at most ``nlist``, which
    scans every item)."""
    space: str = "l2"
    """``"l2"``: Euclidean search over the inner product reduced by one coordinate; ``"ip"``:
    the inner product itself."""
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
        for name in ("nlist", "nprobe"):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise ConfigError(f"index {name} must be an integer >= 0, got {value!r}")
        if self.kind not in KINDS:
            raise ConfigError(f"index kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.space not in ("l2", "ip"):
            raise ConfigError(f"index space must be 'l2' or 'ip', got {self.space!r}")
        if not 0.0 <= self.small_allow <= 1.0:
            raise ConfigError(f"index small_allow must be in [0, 1], got {self.small_allow!r}")

    def resolved(self, n_items: int) -> IndexParams:
        """These parameters for a catalogue of ``n_items``: ``kind``, ``nlist`` and ``nprobe``
        made concrete, ``nprobe`` at most ``nlist``."""
        kind = self.kind
        if kind == "auto":
            kind = "ivf" if n_items >= IVF_FROM_ITEMS else "hnsw"
        if kind == "hnsw":
            return replace(self, kind=kind)
        nlist = self.nlist or auto_nlist(n_items)
        nprobe = self.nprobe or max(1, nlist // 32)
        return replace(self, kind=kind, nlist=nlist, nprobe=min(nprobe, nlist))

    @property
    def effort_name(self) -> str:
        """The parameter that trades time for recall: ``ef_search`` or ``nprobe``."""
        return "nprobe" if self.kind == "ivf" else "ef_search"

    @property
    def effort(self) -> int:
        return int(getattr(self, self.effort_name))

    def with_effort(self, value: int) -> IndexParams:
        return replace(self, **{self.effort_name: int(value)})

    def describe(self) -> str:
        """One line: the family and its parameters."""
        if self.kind == "ivf":
            return f"IVF ({self.space}) nlist={self.nlist}, nprobe={self.nprobe}"
        return (
            f"HNSW ({self.space}) M={self.m}, ef_construction={self.ef_construction}, "
            f"ef_search={self.ef_search}"
        )


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
    """An index over items ``1..n_items`` (faiss id ``j`` = item ``j + 1``): a graph or an
    inverted file, with the parameters it was built with (``params.kind`` concrete)."""

    def __init__(
        self,
        index: Any,
        n_items: int,
        dim: int,
        params: IndexParams,
        max_sq_norm: float = 0.0,
        calibration: dict[str, Any] | None = None,
    ) -> None:
        self.index, self.n_items, self.dim = index, n_items, dim
        self.params = params.resolved(n_items)
        self.max_sq_norm = float(max_sq_norm)  # M^2 of the "l2" reduction
        self.build_seconds: float | None = None
        self.calibration = calibration  # what calibrate() chose and measured, if it ran
        # internal ids the graph cannot reach (see _unreachable): every search scores them
        self.always = np.zeros(0, dtype=np.int64)

    @classmethod
    def build(
        cls, vectors: np.ndarray, params: IndexParams | None = None, threads: int = 0
    ) -> ItemIndex:
        """Build over ``vectors [n_items + 1, D]`` (row 0, PAD, is left out); ``threads`` 0 keeps
        faiss's default (every core)."""
        import time

        faiss = require_faiss()
        vectors = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32)[1:])
        if vectors.ndim != 2 or len(vectors) < 1:
            raise DataError(f"an item index needs a [n_items + 1, D] table, got {vectors.shape}")
        if not np.isfinite(vectors).all():
            raise DataError("the item table holds NaN or infinite values: nothing to index")
        params = (params or IndexParams()).resolved(len(vectors))
        t0 = time.perf_counter()
        dim, max_sq = vectors.shape[1], 0.0
        if params.space == "l2":
            sq = np.einsum("ij,ij->i", vectors, vectors, dtype=np.float64)
            max_sq = float(sq.max())
            extra = np.sqrt(np.maximum(max_sq - sq, 0.0)).astype(np.float32)
            vectors = np.ascontiguousarray(np.hstack([vectors, extra[:, None]]))
        d = vectors.shape[1]
        metric = faiss.METRIC_L2 if params.space == "l2" else faiss.METRIC_INNER_PRODUCT
        with _faiss_threads(faiss, threads):
            if params.kind == "hnsw":
                index = faiss.IndexHNSWFlat(d, params.m, metric)
                index.hnsw.efConstruction = params.ef_construction
                index.add(vectors)
            else:
                index = _build_ivf(faiss, vectors, params.nlist, metric)
        out = cls(index, len(vectors), dim, params, max_sq)
        if params.kind == "hnsw":
            with _faiss_threads(faiss, threads):
                out.always = _unreachable(faiss, index, vectors, params)
        out.build_seconds = time.perf_counter() - t0
        return out

    def search(self, queries: np.ndarray, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """``(items [B, fetch], scores [B, fetch])`` best first by the exact inner product of
        each candidate (re-ranked from the stored vectors); item 0 / ``-inf`` where the index
        found fewer."""
        fetch = min(int(fetch), self.n_items)
        queries = np.ascontiguousarray(queries, dtype=np.float32)
        q = queries
        if self.params.space == "l2":
            q = np.ascontiguousarray(np.hstack([q, np.zeros((len(q), 1), np.float32)]))
        # per call, not on the shared index: concurrent requests (the HTTP service) may differ
        faiss = require_faiss()
        if self.params.kind == "ivf":
            params = faiss.SearchParametersIVF(nprobe=self.params.nprobe)
        else:
            params = faiss.SearchParametersHNSW(efSearch=max(self.params.ef_search, fetch))
        _, ids = self.index.search(q, fetch, params=params)
        found = ids >= 0
        items = np.where(found, ids + 1, 0)
        if len(self.always):  # items the graph cannot reach: candidates of every query
            found &= ~np.isin(items, self.always)
            items = np.where(found, items, 0)
            extra = np.broadcast_to(self.always, (len(items), len(self.always)))
            items = np.hstack([items, extra])
            found = np.hstack([found, np.ones(extra.shape, dtype=bool)])
            fetch = items.shape[1]
        scores = np.full(items.shape, -np.inf, dtype=np.float32)
        step = max(1, (1 << 20) // max(fetch, 1))  # rows re-ranked at a time: ~1M vectors
        for s in range(0, len(items), step):
            blk, ok = items[s : s + step], found[s : s + step]
            vecs = np.zeros((*blk.shape, self.dim), dtype=np.float32)
            vecs[ok] = self.vectors(blk[ok])
            exact = np.einsum("bfd,bd->bf", vecs, queries[s : s + step])
            scores[s : s + step] = np.where(ok, exact, -np.inf)
        order = np.lexsort((items, -scores), axis=1)
        return np.take_along_axis(items, order, 1), np.take_along_axis(scores, order, 1)

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
            "calibration": self.calibration,
            "state_sha256": state_sha256,
        }
        return {
            "index": self.serialized(),
            "always": np.asarray(self.always, dtype=np.int64),
            "meta": np.array(json.dumps(meta)),
        }


def _unreachable(faiss: Any, index: Any, vectors: np.ndarray, params: IndexParams) -> np.ndarray:
    """Internal ids of the items a graph search for their own vector does not find first.

    An HNSW graph can leave a few nodes that no search reaches (no other node links to them
    in the layers a search walks); such an item is never a candidate, however high its score,
    and when it is some users' clear first choice the loss in accuracy is far larger than its
    share of the catalogue. Searching every item's own indexed vector (its nearest neighbour
    under ``space = "l2"``; under ``"ip"`` one of its own best 10) finds them; they are then
    scored exactly in every search. Costs one search per item at the index's ``ef_search``."""
    step = 65_536
    k = 1 if params.space == "l2" else 10
    search = faiss.SearchParametersHNSW(efSearch=max(params.ef_search, k))
    missed = []
    for s in range(0, len(vectors), step):
        _, ids = index.search(vectors[s : s + step], k, params=search)
        own = np.arange(s, s + len(ids))[:, None]
        missed.append(np.flatnonzero(~(ids == own).any(1)) + s)
    return np.concatenate(missed).astype(np.int64) + 1


def _build_ivf(faiss: Any, vectors: np.ndarray, nlist: int, metric: int) -> Any:
    """An ``IndexIVFFlat`` of ``nlist`` cells: k-means (10 rounds) on at most 64 items per
    cell, then every item added to its nearest cell; the direct map kept (re-ranking reads
    the vectors back)."""
    d = vectors.shape[1]
    quantizer = faiss.IndexFlat(d, metric)
    index = faiss.IndexIVFFlat(quantizer, d, nlist, metric)
    index.own_fields = True
    quantizer.this.disown()
    index.cp.niter = 10
    index.cp.max_points_per_centroid = 64
    index.cp.seed = 0
    n_train = min(len(vectors), 64 * nlist)
    if n_train < len(vectors):
        pick = np.random.default_rng(0).choice(len(vectors), n_train, replace=False)
        train = np.ascontiguousarray(vectors[np.sort(pick)])
    else:
        train = vectors
    index.train(train)
    index.add(vectors)
    index.make_direct_map()
    return index


def index_meta(arrays: dict[str, np.ndarray], where: str) -> dict[str, Any]:
    """The validated metadata of an ``index.npz``'s arrays."""
    try:
        meta = json.loads(str(arrays["meta"]))
        # files before "space" are "ip" graphs, files before "kind" graphs
        params = IndexParams(**{"space": "ip", "kind": "hnsw", **meta["params"]})
        if params.kind == "auto" or (params.kind == "ivf" and min(params.nlist, params.nprobe) < 1):
            raise ValueError(f"kind {params.kind!r} with nlist {params.nlist}")
        if meta.get("calibration") is not None and not isinstance(meta["calibration"], dict):
            raise ValueError("calibration is not a mapping")
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
    want = faiss.IndexIVF if meta["params"].kind == "ivf" else faiss.IndexHNSW
    if not isinstance(faiss.downcast_index(index), want):
        raise DataError(f"{where}: the index is not the {meta['params'].kind} its metadata says")
    out = ItemIndex(
        index,
        meta["n_items"],
        meta["dim"],
        meta["params"],
        float(meta.get("max_sq_norm", 0.0)),
        meta.get("calibration"),
    )
    always = np.asarray(arrays.get("always", np.zeros(0)), dtype=np.int64)  # older: absent
    if always.ndim != 1 or (len(always) and (always.min() < 1 or always.max() > out.n_items)):
        raise DataError(f"{where}: its list of unreachable items is not item ids 1..n_items")
    out.always = always
    return out


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


def exact_top_k(
    vectors: np.ndarray,
    queries: np.ndarray,
    k: int,
    excluded: tuple[np.ndarray, np.ndarray],
    chunk_cells: int = 1 << 24,
) -> np.ndarray:
    """Exact top-``k`` internal ids ``[B, k]`` of ``queries @ vectors[1:].T`` with each row's
    ``excluded`` cells removed (what :func:`index_top_k` answers without filters but the seen
    items): the reference :func:`calibrate` measures against."""
    table = np.asarray(vectors, dtype=np.float32)[1:]
    n = len(table)
    k = min(int(k), n)
    ex_rows, ex_items = (np.asarray(a, dtype=np.int64) for a in excluded)
    out = np.zeros((len(queries), k), dtype=np.int64)
    step = max(1, chunk_cells // max(n, 1))
    for s in range(0, len(queries), step):
        scores = np.asarray(queries[s : s + step], dtype=np.float32) @ table.T
        sel = (ex_rows >= s) & (ex_rows < s + len(scores))
        scores[ex_rows[sel] - s, ex_items[sel] - 1] = -np.inf
        part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        vals = np.take_along_axis(scores, part, 1)
        order = np.lexsort((part, -vals), axis=1)
        top = np.take_along_axis(part, order, 1) + 1
        out[s : s + len(scores)] = np.where(np.take_along_axis(vals, order, 1) > -np.inf, top, 0)
    return out


def recall_at_k(found: np.ndarray, exact: np.ndarray) -> float:
    """Mean share of each row's exact top-k (its nonzero ids) that ``found`` holds."""
    shares = [
        len(np.intersect1d(f[f > 0], e[e > 0])) / (e > 0).sum()
        for f, e in zip(found, exact, strict=True)
        if (e > 0).any()
    ]
    return float(np.mean(shares)) if shares else 1.0


def calibrate(
    index: ItemIndex,
    vectors: np.ndarray,
    queries: np.ndarray,
    excluded: tuple[np.ndarray, np.ndarray],
    k: int = 10,
    target: float = 0.995,
) -> dict[str, Any]:
    """Raise the index's search effort until recall@k on ``queries`` reaches ``target``.

    The exact top-``k`` of each query (:func:`exact_top_k` over ``vectors``, the table the
    index was built from, with the ``excluded`` cells removed) is compared with
    :func:`index_top_k`'s; starting from the index's effort (``ef_search`` or ``nprobe``, never
    lowered), the effort is doubled until the target is met or the most useful value is
    reached (``nlist``: every cell, exact; a graph: the catalogue's size), then bisected back
    down to the smallest value that still meets it. The index keeps the chosen effort, and
    ``index.calibration`` (also returned) records it: ``{"target", "k", "queries",
    "parameter", "value", "recall", "reached", "tried": [[value, recall], ...]}``.
    """
    if not 0.0 < target <= 1.0:
        raise ConfigError(f"the recall target must be in (0, 1], got {target!r}")
    queries = np.asarray(queries, dtype=np.float32)
    if len(queries) == 0:
        raise DataError("calibrating the item index needs at least one query")
    exact = exact_top_k(vectors, queries, k, excluded)
    base = index.params
    cap = base.nlist if base.kind == "ivf" else max(index.n_items, base.effort)
    tried: dict[int, float] = {}

    def measure(effort: int) -> float:
        if effort not in tried:
            index.params = base.with_effort(effort)
            ids, _, short = index_top_k(index, queries, k, excluded)
            ids[short] = exact[short]  # rows the index does not answer are ranked exactly
            tried[effort] = recall_at_k(ids, exact)
        return tried[effort]

    low, high = None, base.effort
    while measure(high) < target and high < cap:
        low, high = high, min(2 * high, cap)
    reached = tried[high] >= target
    if reached and low is not None:  # the smallest effort in (low, high] that meets it
        while high - low > max(1, low // 8):
            mid = (low + high) // 2
            if measure(mid) >= target:
                high = mid
            else:
                low = mid
    index.params = base.with_effort(high)
    index.calibration = {
        "target": float(target),
        "k": int(k),
        "queries": len(queries),
        "parameter": base.effort_name,
        "value": int(high),
        "recall": tried[high],
        "reached": bool(reached),
        "tried": [[e, round(r, 6)] for e, r in sorted(tried.items())],
    }
    return index.calibration
