"""Updating a trained model with new interactions: the vocabularies grow, training continues.

:func:`update_model` takes a fitted model that carries its users' histories (an artifact of
``seqrec train``: ``users.npz``) and a log of new interactions (an ``Interactions`` read with the
run's data settings, :func:`read_new_log`). It

* appends the new items to the item vocabulary and the new users to the stored histories (old
  ids keep their internal ids), and each user's new events to their history;
* builds the training sequences: every user with new events (their whole history, old and new:
  the old events are the context the new ones follow), plus the users without new events that
  ``replay`` asks for ('all', 'none', or a share drawn with the seed);
* continues training with :meth:`Recommender.fit_partial` (neural models from their weights,
  factorization models by a refit on those sequences);
* adds the new events to the item popularity (the empty-history fallback).

The preprocessing filters of the run (k-core, minimum counts) are not applied to the new log:
an item with one event is exactly what an update is for; its implicit-feedback threshold
(``min_rating``) and de-duplication are. Nothing here writes files: ``seqrec update`` saves the
result as a new artifact version (:mod:`seqrec.serving.versions`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seqrec.data.interactions import Interactions
from seqrec.data.sequences import Sequences
from seqrec.errors import ConfigError, DataError

REPLAY_CHOICES = ("all", "none")


@dataclass
class UpdateReport:
    """What an update used and ignored, and what it did."""

    events: int = 0
    """New events used (after the implicit threshold and de-duplication)."""
    known_users: int = 0
    """Users of the new log the model already had."""
    new_users: int = 0
    new_items: int = 0
    new_item_ids: list[Any] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)
    """Rows of the new log not used, by reason."""
    replay: str = "all"
    replayed_users: int = 0
    """Users without new events whose histories were trained on again."""
    training_users: int = 0
    seconds: float = 0.0
    stopped: str | None = None
    """Why training stopped (the neural models' ``training_log.stopped``)."""
    attribute_lines: list[str] = field(default_factory=list)
    """What the new items' categories gave (and which names were left out)."""

    def lines(self) -> list[str]:
        """The report as a few lines of text (what ``seqrec update`` prints)."""
        shown = ", ".join(map(str, self.new_item_ids[:5])) + (
            " ..." if len(self.new_item_ids) > 5 else ""
        )
        out = [
            f"used {self.events:,} new event(s): {self.known_users:,} known user(s), "
            f"{self.new_users:,} new user(s), {self.new_items:,} new item(s)"
            + (f" ({shown})" if shown else "")
        ]
        if self.ignored:
            out.append("ignored " + ", ".join(f"{n:,} {why}" for why, n in self.ignored.items()))
        out.extend(self.attribute_lines)
        out.append(
            f"trained on {self.training_users:,} user histories (replay={self.replay}: "
            f"{self.replayed_users:,} user(s) without new events replayed) in "
            f"{self.seconds:.1f} s" + (f", stopped by {self.stopped}" if self.stopped else "")
        )
        return out


def parse_replay(value: Any) -> str | float:
    """'all', 'none' or a share in (0, 1] (text is accepted: the command line's)."""
    if isinstance(value, str) and value in REPLAY_CHOICES:
        return value
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = float("nan")
    if not 0.0 < share <= 1.0:
        raise ConfigError(
            f"replay must be 'all', 'none' or a share of the other users in (0, 1], got {value!r}"
        )
    return "all" if share == 1.0 else share


def read_new_log(source: Any, read_options: dict[str, Any] | None = None) -> Interactions:
    """The new interactions, read as the run read its data (``DataSection.read_options()``):
    a file path or an in-memory table."""
    from seqrec.data.sources import load

    return load(source, **(read_options or {}))


def update_model(
    model: Any,
    new: Interactions,
    *,
    replay: Any = "all",
    min_rating: float | None = None,
    dedup: bool = False,
    seed: int = 0,
    fit_options: dict[str, Any] | None = None,
) -> UpdateReport:
    """Grow ``model`` with the users and items of ``new`` and continue training on them (see
    the module doc). ``fit_options`` go to ``fit_partial`` (``epochs``, ``lr``, ``progress``,
    ``on_epoch``, ``deadline`` for the neural models).

    Raises:
        DataError: the model has no stored user histories or vocabulary, the model reads
            time and the new log has none, or nothing of the log is left to train on.
        seqrec.stop.Interrupted: training was stopped (a signal or the deadline) before its
            epochs were done: the model in memory is partly updated, do not save it.
    """
    from seqrec import stop
    from seqrec.serving.histories import UserHistories

    t0 = time.perf_counter()
    replay = parse_replay(replay)
    hist: UserHistories | None = getattr(model, "user_histories", None)
    if hist is None or model.vocab is None:
        raise DataError(
            f"{model.name}: updating needs the model's item vocabulary and its users' "
            "histories (users.npz), which `seqrec train` saves with the artifact"
        )
    report = UpdateReport(replay=str(replay))
    users, items, times, keep = _raw_columns(new)
    if min_rating is not None and new.rating is not None:
        low = new.rating < min_rating
        report.ignored[f"below min_rating {min_rating}"] = int((low & keep).sum())
        keep &= ~low
    order = np.lexsort((new.timestamp, users))  # by user, then time; ties keep file order
    order = order[keep[order]]
    users, items, times = users[order], items[order], times[order]
    if model.reads_time and not new.has_time:
        raise DataError(
            f"{model.name} reads timestamps and the new log has none (only an order): "
            "give it a timestamp column"
        )
    categories = _categories(new)
    attributes = _new_item_attributes(model, items.tolist(), categories, report)
    vocab = model.vocab.extend(
        items.tolist(),
        titles=_titles(new),
        attributes=attributes,
        categories=categories,
        vectors=_vectors(new, model, report),
    )
    item_ids = vocab.encode(items.tolist())
    index = {str(u): i for i, u in enumerate(hist.raw.tolist())}
    new_user_raw = list(dict.fromkeys(u for u in users.tolist() if u not in index))
    for u in new_user_raw:
        index[u] = len(index)
    user_ids = np.asarray([index[u] for u in users.tolist()], np.int64)
    n_old_users, n_users = len(hist), len(index)
    # per user: stored history + new events (oldest first); de-duplicated as the run was
    old_rows = [
        hist.items[hist.offsets[p] : hist.offsets[p + 1]].astype(np.int64)
        for p in range(n_old_users)
    ]
    old_times = (
        [hist.times[hist.offsets[p] : hist.offsets[p + 1]] for p in range(n_old_users)]
        if hist.times is not None
        else None
    )
    rows = old_rows + [np.zeros(0, np.int64)] * len(new_user_raw)
    row_times = None
    if old_times is not None and new.has_time:
        row_times = old_times + [np.zeros(0, np.int64)] * len(new_user_raw)
    starts = np.flatnonzero(np.r_[True, user_ids[1:] != user_ids[:-1]]) if len(user_ids) else []
    ends = np.r_[starts[1:], len(user_ids)] if len(user_ids) else []
    duplicates = 0
    touched = []
    for s, e in zip(starts, ends, strict=True):
        u = int(user_ids[s])
        add, add_t = item_ids[s:e], times[s:e]
        if dedup:
            seen = set(rows[u].tolist())
            mask = []
            for i in add.tolist():
                mask.append(i not in seen)
                seen.add(i)
            mask = np.asarray(mask, bool)
            duplicates += int((~mask).sum())
            add, add_t = add[mask], add_t[mask]
        if not len(add):
            continue
        touched.append(u)
        rows[u] = np.concatenate([rows[u], add])
        if row_times is not None:
            row_times[u] = np.concatenate([row_times[u], add_t])
        report.events += len(add)
    if duplicates:
        report.ignored["repeated (user, item) pairs (the run de-duplicates)"] = duplicates
    if not touched:
        raise DataError("the new log has no event left to train on")
    touched_set = set(touched)
    report.known_users = sum(1 for u in touched if u < n_old_users)
    report.new_users = sum(1 for u in touched if u >= n_old_users)
    report.new_items = len(vocab) - len(model.vocab)
    report.new_item_ids = vocab.raw[len(model.vocab) :].tolist()
    others = np.asarray([u for u in range(n_old_users) if u not in touched_set], np.int64)
    if replay == "all":
        replayed = others
    elif replay == "none":
        replayed = others[:0]
    else:
        rng = np.random.default_rng([seed, 0x9E7])
        replayed = np.sort(rng.choice(others, size=int(round(replay * len(others))), replace=False))
    report.replayed_users = len(replayed)
    chosen = np.sort(np.concatenate([np.asarray(touched, np.int64), replayed]))
    chosen = chosen[[len(rows[u]) > 0 for u in chosen]]
    report.training_users = len(chosen)
    has_time = row_times is not None
    train = Sequences.from_lists(
        [rows[u] for u in chosen],
        n_items=len(vocab),
        timestamps=[row_times[u] for u in chosen]
        if has_time
        else [np.arange(len(rows[u])) for u in chosen],
        users=chosen,
        vocab=vocab,
        has_time=has_time,
    )
    popularity = np.concatenate(
        [np.asarray(model.popularity, np.float32), np.zeros(report.new_items, np.float32)]
    )
    popularity += np.bincount(
        np.concatenate([rows[u][len(old_rows[u]) if u < n_old_users else 0 :] for u in touched]),
        minlength=len(vocab) + 1,
    ).astype(np.float32)
    if _steps(model):
        model.fit_partial(train, n_users=n_users, **(fit_options or {}))
    else:
        model.fit_partial(train, **(fit_options or {}))
    log = getattr(model, "training_log", None)
    report.stopped = getattr(log, "stopped", None) if _steps(model) else None
    if report.stopped is None and stop.requested():  # asked during a refit, which cannot stop
        report.stopped = "interrupted"
    if report.stopped in ("interrupted", "deadline"):
        raise stop.Interrupted(
            f"the update of {model.name} was stopped ({report.stopped}) before its epochs were "
            "done: nothing was saved",
            stop.signal_number(),
        )
    popularity[0] = 0.0
    model.popularity = popularity
    model.user_histories = _histories(hist, new_user_raw, rows, row_times, new.has_time)
    report.seconds = time.perf_counter() - t0
    return report


def _steps(model: Any) -> bool:
    """Whether the model trains step by step (``fit_partial`` takes epochs, users ...)."""
    return hasattr(model, "train_config")


def _raw_columns(new: Interactions) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Raw user ids (as text, how stored histories key them), raw item ids (the text of
    string ids, else the integers), timestamps, and an all-True keep mask."""
    users = (
        np.asarray(new.user_raw, dtype=object)[new.user] if new.user_raw is not None else new.user
    )
    users = np.asarray([str(u) for u in users.tolist()], dtype=object)
    items: np.ndarray = new.item
    if new.items is not None and "raw_id" in new.items:
        items = np.asarray(new.items["raw_id"], dtype=object)[new.item]
    return users, items, np.asarray(new.timestamp, np.int64), np.ones(len(new.user), bool)


def _side_ids(side: dict[str, Any]) -> list[Any]:
    """Raw item ids of the rows of a log's item table (the text of string ids)."""
    return np.asarray(side["raw_id"] if "raw_id" in side else side["item"]).tolist()


def _side_text(new: Interactions, keys: tuple[str, ...]) -> dict[Any, Any] | None:
    """Raw item id -> the non-empty values of the first of ``keys`` the log's item table has
    (None without one)."""
    side = new.items
    key = next((k for k in keys if side is not None and k in side), None)
    if key is None:
        return None
    return {i: v for i, v in zip(_side_ids(side), side[key], strict=True) if v}


def _titles(new: Interactions) -> dict[Any, Any] | None:
    """Raw item id -> title of the new log's item table (None without one)."""
    return _side_text(new, ("title",))


def _categories(new: Interactions) -> dict[Any, Any] | None:
    """Raw item id -> category text (``|``-joined names) of the new log's item table."""
    return _side_text(new, ("categories", "genres"))


def _vectors(new: Interactions, model: Any, report: UpdateReport) -> dict[Any, Any] | None:
    """Raw item id -> numeric vector of the new log's item table (its ``vector`` column)."""
    from seqrec.data.item_vectors import vectors_from_texts

    side = new.items
    if side is None or "vector" not in side:
        return None
    ids = _side_ids(side)
    table = vectors_from_texts(side["vector"], ids)
    if table is None:
        return None
    width = getattr(model, "item_vector_width", None)
    if width is not None and table.shape[1] != width:
        raise DataError(
            f"the item file's vectors have {table.shape[1]} values, the model was trained "
            f"with {width}"
        )
    out = {i: v for i, v in zip(ids, table, strict=True) if not np.isnan(v[0])}
    report.attribute_lines.append(
        f"item vectors: {len(out):,} in the item file ({table.shape[1]} values)"
        + ("" if width else "; this model does not read vectors (kept with the vocabulary)")
    )
    return out


def _new_item_attributes(
    model: Any, raw_items: list[Any], categories: dict[Any, Any] | None, report: UpdateReport
) -> dict[Any, list[tuple[str, int]]] | None:
    """The category attributes of the items new to the model's vocabulary, in the ids the
    model trained with (matched by name: another file numbers its categories its own way).
    Names the model never trained with have no embedding and are left out, and the report
    says so."""
    from seqrec.data.attributes import genre_names

    trained = getattr(model, "trained_category_ids", None)
    known = trained() if trained is not None and categories else {}
    if not known:
        return None  # the model reads no attributes: the categories are kept as text only
    vocab = model.vocab
    by_key = {str(k): v for k, v in categories.items()}
    new_items = [str(r) for r in vocab.unknown_ids(raw_items)]
    out: dict[Any, list[tuple[str, int]]] = {}
    unknown: dict[str, int] = {}
    without = 0
    for r in new_items:
        names = genre_names(by_key.get(r))
        ids = [("category", known[n]) for n in names if n in known]
        for n in names:
            if n not in known:
                unknown[n] = unknown.get(n, 0) + 1
        if ids:
            out[r] = ids
        else:
            without += 1
    if new_items:
        line = (
            f"attributes: {len(out):,} of {len(new_items):,} new item(s) scored from their "
            "categories as well as their ids"
        )
        if without:
            line += f"; {without:,} without a category the model knows (id only)"
        report.attribute_lines.append(line)
    if unknown:
        shown = ", ".join(sorted(unknown)[:5]) + (" ..." if len(unknown) > 5 else "")
        report.attribute_lines.append(
            f"left out {len(unknown):,} category name(s) the model never trained with "
            f"({shown}): it has no embedding for them"
        )
    return out or None


def _histories(hist: Any, new_users: list[str], rows, row_times, has_time: bool):
    """The stored histories extended: new users appended (their raw ids as the log wrote them,
    as text), every row its new events; a user the run had removed is no longer removed."""
    from seqrec.serving.histories import UserHistories

    raw_old = hist.raw.tolist()
    raw = raw_old + new_users
    if hist.raw.dtype.kind in "iu":
        try:
            raw_arr = np.asarray([int(u) for u in raw], dtype=np.int64)
        except ValueError:
            raw_arr = np.asarray([str(u) for u in raw])
    else:
        raw_arr = np.asarray([str(u) for u in raw])
    lengths = np.asarray([len(r) for r in rows], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    items = np.concatenate(rows).astype(np.int32) if len(rows) else np.zeros(0, np.int32)
    times = None
    if row_times is not None and has_time:
        times = np.concatenate(row_times).astype(np.int64)
    added = set(new_users)
    removed = np.asarray([r for r in hist.removed.tolist() if str(r) not in added], str)
    return UserHistories(raw_arr, offsets, items, removed, times)
