"""Incremental encoders of the neural models: one new event without re-encoding the history.

Each class implements the interface of :mod:`seqrec.models.incremental` (``start``,
``append``, ``scores``, ``kind``) for one model family; the models' ``incremental()`` builds
them (``None`` where a model's configuration has no incremental form, and the caller falls
back to :class:`seqrec.models.incremental.ReEncode`):

* :class:`SASRecCache`, :class:`HSTUCache`, :class:`LSANCache` (``kind = "kv-cache"``): per
  layer, the keys and values of every position of the window (LSAN's convolution branch also
  keeps its gated inputs, of which the causal kernel reads the last ``kernel_size``). A new
  event embeds one item, and in each layer computes one query, one key / value and that
  position's attention over the cache: ``O(L d)`` per layer instead of the ``O(L^2 d + L d^2)``
  of re-encoding ``L`` positions. This is exact only where a new event leaves every earlier
  position's computation unchanged: the causal models with positions counted from the start
  of the window (``positions="from_start"``, or no absolute positions). With the default
  ``positions="from_end"`` (the SASRec paper's left-padded indexing) every event moves every
  position's embedding, so those configurations return ``None`` (re-encode). So does HSTU's
  ``rab_time_query="next"`` (a new event changes the query time of the previous one).
* :class:`LRURecRecurrent`, :class:`GRU4RecRecurrent` (``kind = "recurrent"``): the
  per-layer recurrent state, ``O(d^2)`` per layer whatever the history length.

**The sliding window.** ``model.score`` reads the last ``max_len`` events. While a stream is
within ``max_len``, a new event only extends the window and every encoder above is exact.
Beyond it the window slides: the oldest event leaves and every position's keys change (its
position, and in the recurrent models the items its state has seen). ``slide`` chooses:

* ``"exact"`` (default): when the window slides, re-encode it (one batched pass over
  ``max_len`` positions, the cost of a re-encode). ``scores`` always equals ``model.score``
  on the full history.
* ``"periodic"``: when the window is full, re-encode only its newest ``max_len - stride``
  events and absorb the next ``stride`` events incrementally, so one event in ``stride + 1``
  pays a (shorter) re-encode. Scores then read a window of ``max_len - stride`` to
  ``max_len`` events instead of exactly ``max_len``: an approximation
  (``docs/decisions/live-sliding-window.md`` says what it costs and what it changes).

Every ``append`` advances the state in place and returns it. Item ids are the model's internal
ids (``1 .. n_items``); times are Unix seconds, required by models that read time.

An encoder reads the model's weights when it is built (the steps run on them in functional
calls, since an event costs a few dozen small ops whose call overhead is most of its time):
build it again after the weights change (training, ``load``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from seqrec.data.batching import SequenceBatch
from seqrec.errors import DataError
from seqrec.models.layers import causal_padding_mask

SLIDES = ("exact", "periodic")


class _Inference:
    """``torch.inference_mode()`` with the model's thread count (0 = leave it)."""

    def __init__(self, threads: int) -> None:
        self.threads, self.old, self.mode = threads, None, torch.inference_mode()

    def __enter__(self) -> None:
        if self.threads:
            self.old = torch.get_num_threads()
            if self.old != self.threads:
                torch.set_num_threads(self.threads)
        self.mode.__enter__()

    def __exit__(self, *exc: Any) -> None:
        self.mode.__exit__(*exc)
        if self.old is not None and self.old != self.threads:
            torch.set_num_threads(self.old)


def _ln(module: torch.nn.LayerNorm) -> tuple:
    """``torch.layer_norm``'s arguments after the input (weights detached: see ``_d``); the
    steps call ``torch.layer_norm``, not ``F.layer_norm``, whose Python wrapper costs about as
    much as the op on one position."""
    return (module.normalized_shape, _d(module.weight), _d(module.bias), module.eps)


def _d(t: torch.Tensor | None) -> torch.Tensor | None:
    """A parameter as the steps use it: detached (no autograd bookkeeping, a view: no copy)."""
    return None if t is None else t.detach()


@dataclass
class WindowState:
    """A user's state in a cached / recurrent encoder.

    Attributes:
        items: the events the cache covers (internal ids, oldest first; at most ``max_len``).
        times: their times (``None``: the stream has no times).
        cache: the model's per-layer cache (keys / values, convolution inputs or recurrent
            states), covering ``items``.
        last: ``[1, D]`` encoder output at the newest event (``None`` for an empty history).
        n_events: events absorbed in all (``start`` included).
        reencodes: how many times the window was re-encoded after ``start`` (sliding).
    """

    items: list[int]
    times: list[int] | None
    cache: Any = None
    last: torch.Tensor | None = None
    n_events: int = 0
    reencodes: int = 0
    extra: dict = field(default_factory=dict)


class WindowedEncoder:
    """Shared part: input checks, the sliding window, scoring. Subclasses implement
    ``_prefill(items, times) -> (cache, last)`` over a window and ``_step(state, item, time)
    -> last`` (the cache covers ``state.items[:-1]`` and is extended by the last item)."""

    kind = "kv-cache"
    # windows of at most this many events are built by steps from an empty cache: a step is a
    # few dozen small ops, while a prefill over any length costs several steps' call overhead
    # (the first events of a new user are the common case in a live service)
    step_start = 4

    def __init__(self, model: Any, slide: str = "exact", stride: int = 0) -> None:
        if slide not in SLIDES:
            raise DataError(f"slide must be one of {SLIDES}, got {slide!r}")
        self.model, self.enc = model, model.encoder
        self.max_len = int(model.config.max_len)
        if slide == "periodic" and not 0 < stride < self.max_len:
            raise DataError(
                f"slide='periodic' needs 0 < stride < max_len = {self.max_len}, got {stride}"
            )
        self.slide, self.stride = slide, int(stride)
        self.enc.eval()
        with torch.no_grad():  # the prediction layer, read once (as the steps' weights)
            weight, bias = self.enc.output_embeddings()
            self._out = (_d(weight), _d(bias))

    # --- interface -----------------------------------------------------------------------
    def start(self, items: np.ndarray, times: np.ndarray | None = None) -> WindowState:
        items = [self._item(i) for i in np.asarray(items).ravel()]
        if times is None:
            if self.model.reads_time:
                raise DataError(
                    f"{self.model.name} reads time: start(items, times) needs the events' times"
                )
            tlist = None
        else:
            tlist = [int(t) for t in np.asarray(times).ravel()]
            if len(tlist) != len(items):
                raise DataError(f"{len(tlist)} times for {len(items)} items")
        state = WindowState(
            items[-self.max_len :], None if tlist is None else tlist[-self.max_len :]
        )
        state.n_events = len(items)
        if not (len(state.items) <= self.step_start and self._steps_from_empty(state)):
            self._reencode(state)
        return state

    def append(self, state: WindowState, item: int, time: int | None = None) -> WindowState:
        item = self._item(item)
        if state.times is not None:
            if time is None:
                raise DataError("this stream has times: each appended event needs one")
            state.times.append(int(time))
        state.items.append(item)
        state.n_events += 1
        if len(state.items) > self.max_len:  # the window slides
            keep = self.max_len if self.slide == "exact" else self.max_len - self.stride
            del state.items[:-keep]
            if state.times is not None:
                del state.times[:-keep]
            state.reencodes += 1
            self._reencode(state)
            return state
        if state.cache is None:  # the first event of an empty history
            if not self._steps_from_empty(state):
                self._reencode(state)
            return state
        with self._context():
            state.last = self._step(state, item, None if state.times is None else int(time))
        return state

    def scores(self, state: WindowState) -> np.ndarray:
        if state.last is None:  # empty history: model.score's popularity fallback
            out = np.asarray(self.model.popularity, dtype=np.float32).copy()
        else:
            with self._context():
                logits = F.linear(state.last, *self._out)[0]
                if logits.dtype == torch.float32 and logits.device.type == "cpu":
                    out = logits.numpy()
                else:
                    out = logits.float().cpu().numpy()
        out[0] = -np.inf
        return out

    # --- helpers -------------------------------------------------------------------------
    def _item(self, item: Any) -> int:
        i = int(item)
        if not 1 <= i <= self.model.n_items:
            raise DataError(f"item id {i} is not an internal id in 1..{self.model.n_items}")
        return i

    def _steps_from_empty(self, state: WindowState) -> bool:
        """Build ``state``'s cache by stepping through its items from an empty cache (False,
        nothing changed, where the encoder has no empty cache)."""
        if not state.items:
            return False
        cache = self._empty_cache(state)
        if cache is None:
            return False
        items, times = state.items, state.times
        state.items, state.times, state.cache = [], None if times is None else [], cache
        with self._context():
            for j, item in enumerate(items):
                state.items.append(item)
                time = None
                if times is not None:
                    time = times[j]
                    state.times.append(time)
                state.last = self._step(state, item, time)
        return True

    def _empty_cache(self, state: WindowState) -> Any:
        """The cache of an empty window, which ``_step`` extends (``None``: the encoder builds
        every window with ``_prefill``)."""
        return None

    def _context(self) -> _Inference:
        return _Inference(self.model.run_config.num_threads)

    def _reencode(self, state: WindowState) -> None:
        if not state.items:
            state.cache, state.last = None, None
            return
        device = self.model.device
        items = torch.tensor(state.items, dtype=torch.long, device=device)
        times = None
        if state.times is not None:
            times = torch.tensor(state.times, dtype=torch.long, device=device)
        with self._context():
            state.cache, state.last = self._prefill(items, times)

    def _batch(self, items: torch.Tensor, times: torch.Tensor | None) -> SequenceBatch:
        items = items[None]
        return SequenceBatch(
            items=items,
            mask=torch.ones_like(items, dtype=torch.bool),
            timestamps=None if times is None else times[None],
        )

    def _new_kv(self, heads: int, dk: int, dv: int) -> list[torch.Tensor]:
        p = next(self.enc.parameters())
        return [
            p.new_zeros(1, heads, self.max_len, dk),
            p.new_zeros(1, heads, self.max_len, dv),
        ]

    def _prefill(self, items: torch.Tensor, times: torch.Tensor | None):  # pragma: no cover
        raise NotImplementedError

    def _step(self, state: WindowState, item: int, time: int | None):  # pragma: no cover
        raise NotImplementedError


def _heads(x: torch.Tensor, h: int) -> torch.Tensor:
    """``[1, n, h * d]`` -> ``[1, h, n, d]``."""
    return x.view(1, x.shape[1], h, -1).transpose(1, 2)


# --- SASRec ----------------------------------------------------------------------------------
class SASRecCache(WindowedEncoder):
    """SASRec with ``positions="from_start"``: per block, the keys and values of the window
    (``[1, H, max_len, D / H]`` each).

    The step computes what ``SASRecEncoder.forward`` computes at one position, in functional
    calls on the parameters gathered once when the encoder is built (an event costs a few
    dozen small ops, whose call overhead is most of its time; eval mode: dropout is the
    identity). Build the encoder again after the weights change."""

    def __init__(self, model: Any, slide: str = "exact", stride: int = 0) -> None:
        super().__init__(model, slide, stride)
        enc = self.enc
        self._dim = enc.item_emb.weight.shape[1]
        self._items, self._positions = _d(enc.item_emb.weight), _d(enc.pos_emb.weight)
        self._scale, self._final_norm = enc.scale, _ln(enc.final_norm)
        self._blocks = []
        for b in enc.blocks:
            a, f = b.attn, b.ffn
            out = (None, None) if a.out is None else (_d(a.out.weight).t(), _d(a.out.bias))
            self._blocks.append(
                (
                    b.layout == "pre_ln",
                    a.n_heads,
                    _ln(b.attn_norm),
                    _d(a.kv.bias)[: self._dim],
                    _d(a.kv.weight)[: self._dim].t(),
                    _d(a.kv.bias)[self._dim :],
                    _d(a.kv.weight)[self._dim :].t(),
                    _d(a.q.bias),
                    _d(a.q.weight).t(),
                    *out,
                    _ln(b.ffn_norm),
                    _d(f.fc1.bias),
                    _d(f.fc1.weight).t(),
                    _d(f.fc2.bias),
                    _d(f.fc2.weight).t(),
                )
            )

    def _empty_cache(self, state):
        return [
            self._new_kv(b.attn.n_heads, self._dim // b.attn.n_heads, self._dim // b.attn.n_heads)
            for b in self.enc.blocks
        ]

    def _embed(self, items: torch.Tensor, first: int) -> torch.Tensor:  # [1, n, D]
        enc = self.enc
        pos = torch.arange(first, first + len(items), device=items.device)
        return (enc.item_emb(items) * enc.scale + enc.pos_emb(pos))[None]

    def _prefill(self, items, times):
        enc = self.enc
        n = len(items)
        x = self._embed(items, 0)
        valid = torch.ones(1, n, dtype=torch.bool, device=x.device)
        mask = causal_padding_mask(valid)
        cache = []
        for block in enc.blocks:
            keys_in = block.attn_norm(x) if block.layout == "pre_ln" else x
            h = block.attn.n_heads
            k, v = block.attn.kv(keys_in).chunk(2, dim=-1)
            kv = self._new_kv(h, self._dim // h, self._dim // h)
            kv[0][:, :, :n], kv[1][:, :, :n] = _heads(k, h), _heads(v, h)
            cache.append(kv)
            x = block(x, mask, valid)
        return cache, self._output(x[:, -1])

    def _output(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.layer_norm(x, *self._final_norm)
        return F.normalize(x, dim=-1) if self.enc.config.l2_norm else x

    def _step(self, state, item, time):
        d = self._dim
        p = len(state.items) - 1  # the new event's position in the window
        # item * scale + position, [1, D]
        x = torch.add(self._positions[p : p + 1], self._items[item : item + 1], alpha=self._scale)
        for weights, (keys, values) in zip(self._blocks, state.cache, strict=True):
            pre, h, norm1, k_b, k_w, v_b, v_w, q_b, q_w, o_w, o_b, norm2, b1, w1, b2, w2 = weights
            z = torch.layer_norm(x, *norm1)
            kv_in = z if pre else x
            if h == 1:  # this position's key and value, written in place
                torch.addmm(k_b, kv_in, k_w, out=keys[0, 0, p : p + 1])
                torch.addmm(v_b, kv_in, v_w, out=values[0, 0, p : p + 1])
            else:
                keys[0, :, p] = torch.addmm(k_b, kv_in, k_w).view(h, -1)
                values[0, :, p] = torch.addmm(v_b, kv_in, v_w).view(h, -1)
            q = torch.addmm(q_b, z, q_w).view(1, h, 1, -1)
            out = F.scaled_dot_product_attention(
                q, keys.narrow(2, 0, p + 1), values.narrow(2, 0, p + 1)
            ).view(1, d)
            if o_w is not None:
                out = torch.addmm(o_b, out, o_w)
            if pre:
                x = x + out
                y = torch.layer_norm(x, *norm2)
            else:
                x = y = torch.layer_norm(z + out, *norm2)
            x = torch.addmm(b2, torch.addmm(b1, y, w1).relu_(), w2).add_(x)
        return self._output(x)


# --- HSTU ------------------------------------------------------------------------------------
class HSTUCache(WindowedEncoder):
    """HSTU with positions from the start (or none) and ``rab_time_query="self"``: per layer,
    the keys / values of the window; the relative bias of the new query is gathered for it."""

    def __init__(self, model: Any, slide: str = "exact", stride: int = 0) -> None:
        super().__init__(model, slide, stride)
        enc = self.enc
        with torch.no_grad():
            # w_p[h, i - j] read backwards: the row of query p is one slice of the flipped table
            self._flipped = {id(m): m.pos_w.detach().flip(-1) for m in enc.rabs}
        self._items = _d(enc.item_emb.weight)
        self._scale = math.sqrt(enc.item_emb.embedding_dim)
        self._positions = None if enc.pos_emb is None else _d(enc.pos_emb.weight)
        self._time_emb = None if enc.time_emb is None else _d(enc.time_emb.weight)
        self._layers = []
        for i, layer in enumerate(enc.layers):
            rab = self._rab(i)
            self._layers.append(
                (
                    _ln(layer.norm_in),
                    _d(layer.proj1.bias),
                    _d(layer.proj1.weight).t(),
                    _ln(layer.norm_attn),
                    _d(layer.proj2.bias),
                    _d(layer.proj2.weight).t(),
                    (layer.n_heads, layer.d_qk, layer.d_v),
                    None if rab is None else id(rab),
                    None if rab is None or rab.ts_w is None else _d(rab.ts_w),
                )
            )

    def _rab(self, i: int):
        enc = self.enc
        if not enc.rabs:
            return None
        return enc.rabs[0] if enc.config.rab_shared else enc.rabs[i]

    def _prefill(self, items, times):
        enc = self.enc
        batch = self._batch(items, times)
        n = len(items)
        x = enc.embed(batch)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril_()
        weight_mask = (causal[None] & batch.mask[:, None, :]).to(x.dtype).div_(enc.max_len)[:, None]
        buckets = enc._buckets(batch, n)
        cache = []
        for i, layer in enumerate(enc.layers):
            h, dqk, dv = layer.n_heads, layer.d_qk, layer.d_v
            uvqk = F.silu(layer.proj1(layer.norm_in(x)))
            _, v, _, k = torch.split(uvqk, [h * dv, h * dv, h * dqk, h * dqk], dim=-1)
            kv = self._new_kv(h, dqk, dv)
            kv[0][:, :, :n], kv[1][:, :, :n] = _heads(k, h), _heads(v, h)
            cache.append(kv)
            module = self._rab(i)
            rab = None
            if module is not None:
                rab = module(n) if buckets is None else module(n, buckets=buckets)
            x = x + layer(x, weight_mask, rab)
        return cache, self._output(x[:, -1])

    def _reencode(self, state: WindowState) -> None:
        super()._reencode(state)
        if state.times is not None:  # the window's times, as a tensor the steps extend
            times = torch.zeros(self.max_len, dtype=torch.long, device=self.model.device)
            times[: len(state.times)] = torch.tensor(state.times, dtype=torch.long)
            state.extra["times"] = times

    def _empty_cache(self, state):
        if state.times is not None:  # the window's times, as _reencode keeps them
            state.extra["times"] = torch.zeros(
                self.max_len, dtype=torch.long, device=self.model.device
            )
        return [self._new_kv(layer.n_heads, layer.d_qk, layer.d_v) for layer in self.enc.layers]

    def _output(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, dim=-1) if self.enc.config.l2_norm else x

    def _step(self, state, item, time):
        from seqrec.models.hstu_bias import bucketize

        c = self.enc.config
        p = len(state.items) - 1
        x = self._items[item] * self._scale
        if self._positions is not None:
            x = x + self._positions[p]
        times = state.extra.get("times")  # int64 [max_len], the window's times
        if times is not None:
            times[p] = time
        if self._time_emb is not None and times is not None:
            gap = times[p] - times[p - 1] if p > 0 else torch.zeros((), dtype=torch.long)
            bucket = bucketize(gap, c.num_time_buckets, c.time_bucket_fn, c.time_bucket_divisor)
            x = x + self._time_emb[bucket]
        x = x[None]  # [1, D]
        time_buckets = None
        if c.rab and c.rab_time and times is not None:
            dt = times[: p + 1] - times[p]  # |t_i - t_j|: the anchor cancels
            time_buckets = bucketize(
                dt, c.num_time_buckets, c.time_bucket_fn, c.time_bucket_divisor
            )
        first = self.max_len - 1 - p  # w_p[h, p - j] for j = 0 .. p, from the flipped table
        biases: dict[int, torch.Tensor] = {}
        for weights, (keys, values) in zip(self._layers, state.cache, strict=True):
            norm_in, b1, w1, norm_attn, b2, w2, (h, dqk, dv), rab, ts_w = weights
            uvqk = F.silu(torch.addmm(b1, torch.layer_norm(x, *norm_in), w1))
            u, v, q, k = torch.split(uvqk, [h * dv, h * dv, h * dqk, h * dqk], dim=-1)
            keys[0, :, p] = k.view(h, dqk)
            values[0, :, p] = v.view(h, dv)
            q = q.view(h, 1, dqk) * (1.0 / math.sqrt(dqk))
            scores = q @ keys[0, :, : p + 1].transpose(-2, -1)  # [H, 1, p + 1]
            if rab is not None:
                if rab not in biases:
                    bias = self._flipped[rab][:, first : first + p + 1]
                    if time_buckets is not None and ts_w is not None:
                        bias = bias + ts_w[time_buckets].T
                    biases[rab] = bias[:, None]
                scores = scores + biases[rab]
            attn = F.silu(scores).mul_(1.0 / self.max_len)
            av = (attn @ values[0, :, : p + 1]).view(1, h * dv)
            x = torch.addmm(b2, torch.layer_norm(av, *norm_attn) * u, w2).add_(x)
        return self._output(x)


# --- LSAN ------------------------------------------------------------------------------------
class LSANCache(WindowedEncoder):
    """LSAN with positions from the start (or none): per layer, the attention branch's keys /
    values and the convolution branch's gated inputs of the window."""

    def _branches(self, layer, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The attention branch's and the convolution branch's inputs of ``x``."""
        from seqrec.models.lsan_blocks import TwinAttentionBlock

        if not isinstance(layer, TwinAttentionBlock):
            return x, None
        if layer.combine == "split":
            half = x.shape[-1] // 2
            return x[..., :half], x[..., half:]
        return x, x

    def _prefill(self, items, times):
        enc = self.enc
        batch = self._batch(items, times)
        n = len(items)
        x = enc.input_embeddings(batch)
        if enc.pos_emb is not None:
            x = x + enc.pos_emb(torch.arange(n, device=x.device))[None]
        valid = batch.mask
        cache = []
        for layer in enc.layers:
            xa, xc = self._branches(layer, x)
            attn = layer.attn
            q, k, v = attn.qkv(xa).chunk(3, dim=-1)
            d = xa.shape[-1]
            kv = self._new_kv(attn.n_heads, d // attn.n_heads, d // attn.n_heads)
            kv[0][:, :, :n], kv[1][:, :, :n] = _heads(k, attn.n_heads), _heads(v, attn.n_heads)
            gated = None
            if xc is not None:  # the gated inputs, K - 1 zeros before the window
                width = layer.conv.conv.kernel_size
                gated = xc.new_zeros(self.max_len + width - 1, xc.shape[-1])
                gated[width - 1 : width - 1 + n] = F.glu(layer.conv.inp(xc[0]), dim=-1)
            cache.append((kv, gated))
            x = layer(x, valid)
        return cache, x[:, -1]

    def _step(self, state, item, time):
        enc = self.enc
        p = len(state.items) - 1
        device = self.model.device
        # the context of the new event, as the encoder computes it: the last of the window's
        # last two events (one at the window's start: its previous category is the padding)
        recent = torch.tensor([state.items[max(0, p - 1) :]], device=device)
        times = None
        if state.times is not None:
            times = torch.tensor([state.times[max(0, p - 1) :]], device=device)
        ctx = enc.context_vectors(recent, times)[0, -1:]  # [1, D]
        x = enc.compose(enc.base_embeddings(recent[0, -1:]), ctx)  # [1, D]
        if enc.pos_emb is not None:
            x = x + enc.pos_emb.weight[p]
        x = x[None]  # [1, 1, D]
        for layer, (kv, gated) in zip(enc.layers, state.cache, strict=True):
            keys, values = kv
            xa, xc = self._branches(layer, x)
            attn, h = layer.attn, layer.attn.n_heads
            q, k, v = attn.qkv(xa).chunk(3, dim=-1)
            keys[:, :, p : p + 1], values[:, :, p : p + 1] = _heads(k, h), _heads(v, h)
            out = F.scaled_dot_product_attention(
                _heads(q, h), keys[:, :, : p + 1], values[:, :, : p + 1]
            )
            y = attn.out(out.transpose(1, 2).reshape(1, 1, -1))
            if gated is not None:
                conv = layer.conv
                width = conv.conv.kernel_size
                gated[width - 1 + p] = F.glu(conv.inp(xc[0, 0]), dim=-1)
                w = torch.softmax(conv.conv.weight, dim=-1)  # [H, K]
                w = w.repeat_interleave(conv.conv.dim // conv.conv.n_heads, dim=0)  # [d, K]
                window = gated[p : p + width]  # [K, d]: positions p - K + 1 .. p
                yc = conv.out((w * window.T).sum(-1))[None, None]
                y = torch.cat([y, yc], -1) if layer.combine == "split" else y + yc
            x = layer.norm1(x + layer.dropout(y))
            x = layer.norm2(x + layer.ffn(x))
        return x[:, -1]


# --- recurrent models ------------------------------------------------------------------------
class LRURecRecurrent(WindowedEncoder):
    """LRURec: the per-layer complex LRU states (``LRUEncoder.prefill``, then one step of the
    recurrence per event, as ``LRUEncoder.step`` computes it, on weights gathered once)."""

    kind = "recurrent"

    def __init__(self, model: Any, slide: str = "exact", stride: int = 0) -> None:
        super().__init__(model, slide, stride)
        self._layers = []
        with torch.no_grad():  # the step's weights (read once: rebuild the encoder after training)
            for block in self.enc.blocks:
                lru = block.lru
                gamma = torch.exp(lru.gamma_log).repeat_interleave(2)
                # gamma * (B x + b) as one linear map (rounding differs by an ulp or so)
                w_in = torch.stack((lru.B_re, lru.B_im), dim=1).reshape(2 * lru.n, lru.d)
                b_in = torch.stack((lru.b_re, lru.b_im), dim=1).reshape(2 * lru.n)
                w_out = torch.stack((lru.C_re, -lru.C_im), dim=-1).reshape(lru.d, 2 * lru.n)
                ffn = block.ffn
                self._layers.append(
                    (
                        lru.lam(),
                        (b_in * gamma).detach(),
                        (w_in * gamma[:, None]).t().detach(),
                        _d(lru.c),
                        w_out.t().detach(),
                        lru.n,
                        _ln(lru.norm),
                        _d(ffn.w1.bias),
                        _d(ffn.w1.weight).t(),
                        _d(ffn.w2.bias),
                        _d(ffn.w2.weight).t(),
                        _ln(ffn.norm),
                    )
                )
        self._embedding, self._embed_norm = _d(self.enc.embedding.weight), _ln(self.enc.embed_norm)
        double = self._embedding.dtype == torch.float64
        self._complex = torch.complex128 if double else torch.complex64

    def _empty_cache(self, state):
        return list(self.enc.init_state(1).h)

    def _prefill(self, items, times):
        state = self.enc.prefill(items[None])
        return list(state.h), state.last

    def _step(self, state, item, time):
        x = torch.layer_norm(self._embedding[item][None], *self._embed_norm)  # [1, D]
        hs = state.cache
        for i, weights in enumerate(self._layers):
            lam, b_in, w_in, c, w_out, n, norm1, b1, w1, b2, w2, norm2 = weights
            u = torch.addmm(b_in, x, w_in).view(self._complex)  # (re, im) pairs, [1, N]
            h = hs[i] = torch.addcmul(u, lam, hs[i])  # lam * h + u
            x = torch.layer_norm(torch.addmm(c, h.view(x.dtype), w_out).add_(x), *norm1)
            y = torch.addmm(b2, F.gelu(torch.addmm(b1, x, w1)), w2)
            x = torch.layer_norm(y.add_(x), *norm2)
        return x


class GRU4RecRecurrent(WindowedEncoder):
    """GRU4Rec: the hidden state of every GRU layer."""

    kind = "recurrent"

    def _table(self):
        enc = self.enc
        return enc.in_emb if enc.in_emb is not None else enc.out_emb

    def _empty_cache(self, state):
        return [None] * len(self.enc.grus)  # a GRU's hidden state starts at zeros

    def _prefill(self, items, times):
        x = self._table()(items)[None]  # [1, n, D]
        hidden = []
        for gru in self.enc.grus:
            x, h = gru(x)
            hidden.append(h)
        return hidden, x[:, -1]

    def _step(self, state, item, time):
        x = self._table()(torch.tensor([[item]], device=self.model.device))  # [1, 1, D]
        for i, gru in enumerate(self.enc.grus):
            x, state.cache[i] = gru(x, state.cache[i])
        return x[:, -1]


def cached_encoder(model: Any, cls: type, **options: Any) -> WindowedEncoder | None:
    """``cls(model, **options)`` for a fitted model (``None`` before fitting: the caller's
    ``ReEncode`` then raises the usual not-fitted error when it scores)."""
    if getattr(model, "encoder", None) is None or model.n_items is None:
        return None
    return cls(model, **options)
