"""The two interfaces of seqrec.

* ``Recommender`` — what users and evaluation see: ``fit``, ``score``, ``recommend``, ``save``,
  ``load``. Factorization models implement it directly; one ``TorchRecommender`` wraps every
  torch ``SequenceEncoder`` with the trainer.
* ``SequenceEncoder`` (torch, in ``seqrec.models.encoder``) — ``forward(batch) -> [B, L, D]``,
  ``score(hidden) -> [B, I]``.

``score`` always returns a float32 NumPy array ``[B, n_items + 1]`` whose column 0 (PAD) is
``-inf``; evaluation and ``recommend`` apply the seen-item filter on top of it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from seqrec.config_fields import config_to_dict  # noqa: F401 - re-exported for models
from seqrec.data.raw_times import aligned_times
from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError, NotFittedError

log = logging.getLogger(__name__)


@dataclass
class Recommendation:
    """Top-k answer for one history, in raw item ids."""

    items: list[Any]
    scores: list[float]
    skipped_unknown: int = 0
    fallback: str | None = None
    skipped_ids: list[Any] = field(default_factory=list)
    """The skipped history ids themselves (``vocab.is_removed`` tells filtered from unseen)."""
    ranking: str = "exact"
    """``"index"`` when the artifact's item index answered, ``"exact"`` for full ranking."""


class Recommender(ABC):
    """Base class of every model users and evaluation talk to.

    Subclasses set ``name`` and implement ``fit``, ``_score`` and ``_state`` / ``_load_state``.
    A recommender is built from one frozen config dataclass (``self.config``).
    """

    name: ClassVar[str] = "base"
    index_unsupported: ClassVar[str | None] = (
        "its scores are not an inner product with an item table"
    )
    """Why the model cannot be indexed (None where ``item_vectors`` / ``query_vectors`` exist)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.n_items: int | None = None
        self.vocab = None
        self.popularity: np.ndarray | None = None  # [n_items + 1], for the empty-history fallback
        # raw user id -> stored history (seqrec.serving.histories.UserHistories), set by
        # `seqrec train` and saved as users.npz, so that recommend/serve can answer for a user
        self.user_histories = None
        # the artifact version this model was loaded from / will be saved as (``model.json``
        # "version"; ``seqrec update`` counts it up, seqrec.serving.versions)
        self.artifact_version = 1
        # whether scores read the histories' timestamps: set at fit (the config asks for time
        # and the data had real times) and stored in the artifact; such a model refuses
        # histories without times instead of silently scoring by positions alone
        self.reads_time = False
        # an approximate item index (seqrec.models.ann.ItemIndex) that recommend uses when set
        self.index = None

    @property
    def settings(self) -> Any:
        """Every setting of the model as one flat config (what ``model.json`` stores): the
        config itself; neural models add their training and run configs."""
        return self.config

    def _config_reads_time(self) -> bool:
        """Whether the config makes scores depend on timestamps (models that read time say so)."""
        return False

    # --- to implement ---------------------------------------------------------------------
    @abstractmethod
    def fit(self, train: Sequences, valid: Targets | None = None) -> Recommender:
        """Fit on ``train``; ``valid`` (if given) drives model selection / early stopping."""

    @abstractmethod
    def _score(self, histories: Sequences, query_times: np.ndarray | None) -> np.ndarray:
        """Raw scores ``[B, n_items + 1]`` for non-empty histories."""

    @abstractmethod
    def _state(self) -> dict[str, np.ndarray]:
        """Arrays that, with the config, restore the fitted model."""

    @abstractmethod
    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        """Inverse of ``_state``."""

    # --- shared behaviour -----------------------------------------------------------------
    # --- approximate retrieval (seqrec.models.ann) ------------------------------------------
    def item_vectors(self) -> np.ndarray:
        """Item table ``[n_items + 1, D]`` (row 0 = PAD) with ``score(h)[:, i] ==
        query_vectors(h) @ item_vectors()[i]`` for every item; a bias is one extra column."""
        from seqrec.errors import ConfigError

        raise ConfigError(f"{self.name} cannot be indexed: {self.index_unsupported}")

    def query_vectors(
        self, histories: Sequences, query_times: np.ndarray | None = None
    ) -> np.ndarray:
        """Query vectors ``[B, D]`` of non-empty histories (see :meth:`item_vectors`)."""
        from seqrec.errors import ConfigError

        raise ConfigError(f"{self.name} cannot be indexed: {self.index_unsupported}")

    def _remember_catalogue(self, train: Sequences) -> None:
        self.n_items = train.n_items
        self.vocab = train.vocab
        self.reads_time = bool(
            self._config_reads_time() and train.timestamps is not None and train.has_time
        )
        self.popularity = train.item_counts().astype(np.float32)

    def _check_fitted(self) -> None:
        if self.n_items is None:
            raise NotFittedError(f"{self.name} is not fitted: call fit() or load() first")

    def score(self, histories: Sequences, query_times: np.ndarray | None = None) -> np.ndarray:
        """Scores ``[B, n_items + 1]`` (column 0 = -inf) for each history row.

        An empty history gets the popularity ranking (documented fallback).
        """
        self._check_histories(histories)
        lengths = histories.lengths
        nonempty = np.flatnonzero(lengths > 0)
        if len(nonempty) == len(histories):  # no copy of a [B, I] block that may be large
            out = np.asarray(self._score(histories, query_times), dtype=np.float32)
            if not out.flags.writeable:
                out = out.copy()
        else:
            out = np.empty((len(histories), self.n_items + 1), dtype=np.float32)
            if len(nonempty):
                qt = None if query_times is None else np.asarray(query_times)[nonempty]
                out[nonempty] = self._score(histories.select(nonempty), qt)
            empty = np.flatnonzero(lengths == 0)
            out[empty] = self.popularity[None, :]
        out[:, 0] = -np.inf
        return out

    def _check_histories(self, histories: Sequences) -> None:
        """Refuse histories the model cannot score (unknown items, missing times)."""
        self._check_fitted()
        if histories.n_items > self.n_items:
            raise DataError(
                f"histories use {histories.n_items} items, the model knows {self.n_items}"
            )
        if self.reads_time and histories.timestamps is None and len(histories.items):
            raise DataError(
                f"{self.name} was trained with timestamps and reads them when it scores: give each "
                'history\'s times (Sequences with timestamps; recommend(..., times=...); "times" '
                "over HTTP; --times on the command line); without them it would score by "
                "positions alone, and worse"
            )

    def top_k(
        self,
        histories: Sequences,
        k: int,
        seen_filter: str = "history",
        window: int | None = None,
        query_times: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` best internal item ids ``[B, k]`` of each history and their scores.

        Best first; ties by ascending id; the seen filter is the evaluation's
        (``seqrec.evaluation.ranking``). Where fewer than ``k`` items are eligible the row
        ends with id 0 and score ``-inf``. Models may override this with a path that never
        materializes the ``[B, n_items + 1]`` NumPy block (the torch models do).
        """
        from seqrec.evaluation.ranking import apply_seen_filter, topk_items

        scores = self.score(histories, query_times)
        apply_seen_filter(scores, histories, seen_filter, window)
        ids = topk_items(scores, k)
        return ids, np.where(ids > 0, np.take_along_axis(scores, ids, 1), -np.inf)

    def recommend(
        self,
        histories: Sequence[Sequence[Any]],
        k: int = 10,
        exclude_seen: bool = True,
        allow: Sequence[Any] | None = None,
        deny: Sequence[Any] | None = None,
        times: Sequence[Sequence[Any] | None] | None = None,
        exact: bool = False,
    ) -> list[Recommendation]:
        """Top-``k`` raw item ids for each history of raw item ids.

        With an item index (``self.index``, :mod:`seqrec.models.ann`) the answer comes from
        it, with the filters applied exactly; ``exact=True`` ranks the whole catalogue instead
        (``Recommendation.ranking`` says which answered each history).

        ``times`` (one list per history, aligned with its items: Unix seconds or ISO dates) is
        what a model that reads time (``reads_time``) needs; it refuses histories without.

        Unknown ids are skipped and counted (a warning, not a crash); an empty history (after
        skipping) falls back to the most popular items. ``allow`` restricts the answer to
        those raw ids, ``deny`` removes those; an id of either list that the model never saw
        raises ``DataError`` naming it (ids removed by preprocessing cannot be recommended
        anyway and are ignored). Fewer than ``k`` items come back when fewer are eligible.
        """
        self._check_fitted()
        if k < 1:
            raise DataError(f"k must be >= 1, got {k}")
        if self.vocab is None:
            raise NotFittedError("this model has no item vocabulary: fit it on prepared data")
        histories = [histories] if isinstance(histories, (str, bytes)) else list(histories)
        if any(isinstance(h, (str, bytes)) or not hasattr(h, "__iter__") for h in histories):
            # recommend(["sku1", "sku2"]) read each id as a history of its characters, or failed
            raise DataError(
                "recommend takes a list of histories, each a list of item ids: "
                'recommend([["sku1", "sku2"]]) for one history'
            )
        if times is not None and len(times) != len(histories):
            raise DataError(f"times: {len(times)} lists for {len(histories)} histories")
        rows, skipped, row_times = [], [], []
        for r, hist in enumerate(histories):
            hist = list(hist)
            ids, unknown = self.vocab.encode_known(hist)
            rows.append(ids)
            # which ids are known, once: their times are kept, the others skipped and shown
            known = (
                [self.vocab.encode_known([h])[1] == 0 for h in hist]
                if unknown
                else [True] * len(hist)
            )
            skipped.append([h for h, k in zip(hist, known, strict=True) if not k])
            if unknown:  # the ids travel in Recommendation.skipped_ids for the caller to show
                log.info("skipped %d unknown item id(s) in a history", unknown)
            if times is not None and times[r] is not None:
                row_times.append(aligned_times(known, times[r], r))
            elif times is not None and hist:
                raise DataError(f"times: history {r} has no times")
        seqs = Sequences.from_lists(
            rows, n_items=self.n_items, timestamps=row_times if times is not None else None
        )
        allow_ids = None if allow is None else self._list_ids(allow, "allow")
        deny_ids = None if deny is None else self._list_ids(deny, "deny")
        top, top_scores, ranking = self._ranked(
            seqs, min(k, self.n_items), exclude_seen, allow_ids, deny_ids, exact
        )
        return self._answers(top, top_scores, ranking, seqs.lengths, skipped)

    def rank(
        self,
        scores: np.ndarray,
        seen: Sequence[np.ndarray],
        k: int = 10,
        exclude_seen: bool = True,
        allow: Sequence[Any] | None = None,
        deny: Sequence[Any] | None = None,
        skipped: Sequence[list[Any]] | None = None,
    ) -> list[Recommendation]:
        """The answers of :meth:`recommend` from scores ``[B, n_items + 1]`` (modified in
        place): ``seen`` internal ids of each row (excluded with ``exclude_seen``; an empty row
        is the popularity fallback), the same allow / deny rule; ``skipped`` raw ids per row.
        Also what a live session (``seqrec.live``) answers with (exact ranking)."""
        if k < 1:
            raise DataError(f"k must be >= 1, got {k}")
        skipped = [[] for _ in seen] if skipped is None else skipped
        allow_ids = None if allow is None else self._list_ids(allow, "allow")
        deny_ids = None if deny is None else self._list_ids(deny, "deny")
        top, vals = self._top_of_scores(
            scores, seen if exclude_seen else None, min(k, self.n_items), allow_ids, deny_ids
        )
        ranking = np.full(len(seen), "exact", dtype=object)
        return self._answers(top, vals, ranking, [len(ids) for ids in seen], skipped)

    def _top_of_scores(
        self,
        scores: np.ndarray,
        seen: Sequence[np.ndarray] | None,
        k: int,
        allow_ids: np.ndarray | None,
        deny_ids: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Exact top-``k`` ``(items, scores)`` of each row of ``scores`` (modified in place)
        without the ``seen`` ids of each row (None: none removed), outside ``allow_ids`` or in
        ``deny_ids``; 0 / -inf after the eligible ones."""
        from seqrec.evaluation.ranking import topk_items

        if seen is not None:
            for r, ids in enumerate(seen):
                scores[r, ids] = -np.inf
        if allow_ids is not None:
            keep = np.zeros(self.n_items + 1, dtype=bool)
            keep[allow_ids] = True
            scores[:, ~keep] = -np.inf
        if deny_ids is not None:
            scores[:, deny_ids] = -np.inf
        top = topk_items(scores, k)
        return top, np.where(top > 0, np.take_along_axis(scores, top, 1), -np.inf)

    def _answers(
        self,
        top: np.ndarray,
        top_scores: np.ndarray,
        ranking: np.ndarray,
        lengths: Sequence[int],
        skipped: Sequence[list[Any]],
    ) -> list[Recommendation]:
        out = []
        for r in range(len(top)):
            found = top[r] > 0  # best first, 0 after the eligible ones
            out.append(
                Recommendation(
                    items=self.vocab.decode(top[r][found]).tolist(),  # plain ints / strs
                    scores=[float(s) for s in top_scores[r][found]],
                    skipped_unknown=len(skipped[r]),
                    fallback="popularity" if lengths[r] == 0 else None,
                    skipped_ids=list(skipped[r]),
                    ranking=str(ranking[r]),
                )
            )
        return out

    def _ranked(
        self,
        seqs: Sequences,
        k: int,
        exclude_seen: bool,
        allow_ids: np.ndarray | None,
        deny_ids: np.ndarray | None,
        exact: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(items [B, k], scores [B, k], ranking [B])`` of internal ids, best first, 0 after
        the eligible ones: from the index where there is one (and ``exact`` is off) and it
        answers completely, else by scoring every item."""
        from seqrec.evaluation.ranking import seen_positions

        n_rows = len(seqs)
        top = np.zeros((n_rows, k), dtype=np.int64)
        vals = np.full((n_rows, k), -np.inf, dtype=np.float32)
        ranking = np.full(n_rows, "exact", dtype=object)
        todo = np.arange(n_rows)
        if self.index is not None and not exact:
            from seqrec.models.ann import index_top_k

            rows = np.flatnonzero(seqs.lengths > 0)  # empty: the popularity fallback below
            sub = seqs.select(rows)
            excluded = seen_positions(sub, "history" if exclude_seen else "none")
            ids, v, short = index_top_k(
                self.index, self.query_vectors(sub), k, excluded, allow_ids, deny_ids
            )
            done = rows[~short]
            top[done], vals[done], ranking[done] = ids[~short], v[~short], "index"
            todo = np.setdiff1d(todo, done)
            if short.any():
                log.warning(
                    "%d of %d histories ranked exactly: after the filters the item index left "
                    "fewer than k=%d of its candidates",
                    int(short.sum()),
                    len(rows),
                    k,
                )
        if len(todo):
            part = seqs if len(todo) == n_rows else seqs.select(todo)
            seen = [part.items[part.offsets[r] : part.offsets[r + 1]] for r in range(len(part))]
            top[todo], vals[todo] = self._top_of_scores(
                self.score(part), seen if exclude_seen else None, k, allow_ids, deny_ids
            )
        return top, vals, ranking

    def _list_ids(self, raw_ids: Sequence[Any], what: str) -> np.ndarray:
        """Internal ids of an allow/deny list; never-seen ids raise naming them."""
        raw_ids = list(raw_ids)
        ids, _ = self.vocab.encode_known(raw_ids)
        unseen = [
            r for r in raw_ids if self.vocab.encode_known([r])[1] and not self.vocab.is_removed(r)
        ]
        if unseen:
            shown = ", ".join(repr(r) for r in unseen[:10]) + (" ..." if len(unseen) > 10 else "")
            raise DataError(f"{what} list: {len(unseen)} item id(s) the model never saw: {shown}")
        return ids

    # --- catalogue growth -----------------------------------------------------------------
    def grow(self, vocab: Any, n_users: int | None = None) -> int:
        """Extend the fitted model to the item vocabulary ``vocab``, which must extend the
        model's own (``ItemVocab.extend``: every old raw id at its old internal id, the new ids
        after them), and, for a model with one row per user, to ``n_users`` users (ids
        ``0..n_users-1``, the old ones first). Old items and users keep their parameters, so
        every old item's score of a history of old items is unchanged: the new items only add
        candidates (their initial rows are the model's choice, :meth:`_grow`); their
        popularity is 0 until counted. Returns how many items were added.

        Raises:
            ConfigError: the model cannot grow (one line saying why).
            DataError: ``vocab`` does not extend the model's vocabulary, or ``n_users``
                shrinks the user table.
        """
        self._check_fitted()
        if type(self)._grow is Recommender._grow:
            raise ConfigError(f"{self.name} cannot grow its catalogue: {self.growth_refusal}")
        if self.vocab is None or vocab is None:
            raise DataError(f"{self.name}: growing needs item vocabularies (fit on prepared data)")
        old = self.n_items
        if len(vocab) < old or not np.array_equal(
            np.asarray(self.vocab.raw).astype(str), np.asarray(vocab.raw[:old]).astype(str)
        ):
            raise DataError(
                f"{self.name}: the new item vocabulary does not extend the model's "
                f"({old} items): build it with model.vocab.extend(new_ids)"
            )
        added = len(vocab) - old
        if self.index is not None:  # it indexes the old catalogue: fit_partial rebuilds it
            self._index_params, self.index = self.index.params, None
            log.warning(
                "%s: the item index was dropped (it indexes the old catalogue); fit_partial "
                "rebuilds it, or run seqrec index",
                self.name,
            )
        self._grow(len(vocab), n_users)
        self.popularity = np.concatenate(
            [np.asarray(self.popularity, np.float32), np.zeros(added, np.float32)]
        )
        self.n_items, self.vocab = len(vocab), vocab
        return added

    growth_refusal: ClassVar[str] = (
        "it does not implement Recommender._grow (the built-in models all do)"
    )
    """Why a model without :meth:`_grow` cannot grow (the one line ``grow`` refuses with)."""

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """Resize the fitted parameters to ``n_items`` items (and ``n_users`` users where the
        model has user rows), keeping the old rows; ``self.n_items`` is still the old size."""
        raise NotImplementedError

    def fit_partial(self, train: Sequences, valid: Targets | None = None, **options: Any):
        """Continue the fitted model on ``train``, whose vocabulary extends the model's (new
        items appended, :meth:`grow`). This default is a full refit on ``train``: right for
        models whose fit is one closed-form solve (Pop, PureSVD, the SATF tensor models), which
        fold new users in at scoring time anyway; give them the old data too
        (``seqrec.update``'s ``replay='all'``), since a refit learns only from what it is
        given. Models trained step by step (the neural ones) continue from their weights.
        ``options`` are the step-by-step models' (epochs, progress ...); a refit has no use for
        them and logs that it ignores them."""
        self._check_fitted()
        if train.vocab is not None:
            self.grow(train.vocab)  # refuses a vocabulary that renumbers the old items
        if options:
            log.info("%s: full refit; ignoring %s", self.name, ", ".join(sorted(options)))
        self.fit(train, valid)
        self._rebuild_index()  # an item index of the old weights would answer for them
        return self

    def _rebuild_index(self) -> None:
        """After the weights changed: rebuild the item index the model had (with its
        parameters) over the new item table; without faiss it is dropped (exact ranking),
        with a warning."""
        params = getattr(self, "_index_params", None)
        if self.index is not None:
            params = self.index.params
        self._index_params, self.index = None, None
        if params is None:
            return
        from seqrec.models.ann import ItemIndex, faiss_module

        if faiss_module() is None:
            log.warning("%s: the item index was dropped (faiss is not installed)", self.name)
            return
        self.index = ItemIndex.build(self.item_vectors(), params)
        log.info("%s: item index rebuilt over %d items", self.name, self.n_items)

    # --- persistence ----------------------------------------------------------------------
    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """Write ``model.json`` (config, checksums) + ``state.npz`` (+ ``vocab.npz``), no pickle,
        into directory ``path``, all or nothing; another model's artifact there is replaced only
        with ``overwrite`` (:func:`seqrec.serving.artifact.save_recommender`)."""
        from seqrec.serving.artifact import save_recommender

        return save_recommender(self, Path(path), overwrite)

    @classmethod
    def load(cls, path: str | Path) -> Recommender:
        from seqrec.serving.artifact import load_recommender

        return load_recommender(Path(path))
