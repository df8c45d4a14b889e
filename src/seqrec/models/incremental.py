"""How a model absorbs one new event of a user's stream: the incremental-encoder interface.

A live service (and ``model.session(user)`` in Python) keeps, per user, an opaque *state* and
asks the model's :class:`IncrementalEncoder` to

* ``start(items, times)`` — build the state of a whole history (internal item ids, oldest
  first; ``times`` aligned Unix seconds, an empty array for a new user of a model that
  reads time, or ``None`` for models that do not read time);
* ``append(state, item, time)`` — absorb one event and return the new state (it may update
  the given state in place and return it);
* ``scores(state)`` — the scores ``[n_items + 1]`` (float32, column 0 = ``-inf``) that
  ``model.score`` gives the same history, before any seen / allow / deny filter.

``kind`` says how: ``"recurrent"`` (a constant-size state, e.g. LRURec's hidden state),
``"kv-cache"`` (per-layer keys and values of the causal attention models) or ``"re-encode"``
(the state is the history itself and every ``scores`` runs the whole model: the models that
have no incremental form, and the fallback of every model). Whatever the kind, ``scores``
after any sequence of appends equals ``model.score`` on the full history (the conformance
suite checks it).

``incremental_encoder(model)`` returns the model's own encoder when it defines
``incremental()``, else :class:`ReEncode`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from seqrec.data.sequences import Sequences


class IncrementalEncoder(Protocol):
    kind: str

    def start(self, items: np.ndarray, times: np.ndarray | None = None) -> Any: ...

    def append(self, state: Any, item: int, time: int | None = None) -> Any: ...

    def scores(self, state: Any) -> np.ndarray: ...


@dataclass
class HistoryState:
    """The state of :class:`ReEncode`: the history itself (internal ids, and times if read)."""

    items: list[int] = field(default_factory=list)
    times: list[int] | None = None


class ReEncode:
    """The fallback for every model: keep the history, score it with ``model.score``."""

    kind = "re-encode"

    def __init__(self, model: Any) -> None:
        self.model = model

    def start(self, items: np.ndarray, times: np.ndarray | None = None) -> HistoryState:
        items = [int(i) for i in np.asarray(items).ravel()]
        if times is None:
            return HistoryState(items, None)
        times = [int(t) for t in np.asarray(times).ravel()]
        if len(times) != len(items):
            raise ValueError(f"{len(times)} times for {len(items)} items")
        return HistoryState(items, times)

    def append(self, state: HistoryState, item: int, time: int | None = None) -> HistoryState:
        if state.times is not None:  # a stream started with times (even none yet) keeps them
            if time is None:
                raise ValueError("this stream has times: each appended event needs one")
            state.times.append(int(time))
        state.items.append(int(item))
        return state

    def scores(self, state: HistoryState) -> np.ndarray:
        seqs = Sequences.from_lists(
            [state.items],
            n_items=self.model.n_items,
            timestamps=None if state.times is None else [state.times],
        )
        return self.model.score(seqs)[0]


def incremental_encoder(model: Any) -> IncrementalEncoder:
    """The model's incremental encoder (its ``incremental()``), else :class:`ReEncode`."""
    own = getattr(model, "incremental", None)
    encoder = own() if callable(own) else None
    return encoder if encoder is not None else ReEncode(model)
