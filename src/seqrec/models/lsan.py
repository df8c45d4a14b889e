"""LSAN: Lightweight Self-Attentive Sequential Recommendation (Li, Chen, Zhang, Yin, CIKM 2021,
arXiv 2108.11333).

The paper's displayed equations are missing from the text we hold; the model below is rebuilt
from its prose and from the quotient-remainder (QR) compositional embeddings it cites (Shi et
al., "Compositional Embeddings Using Complementary Partitions", KDD 2020). Every choice the
prose leaves open is listed here.

**Compositional item embeddings.** ``N = n_tables`` base tables ``E_n`` of ``m_n`` rows, with
``m_1 = ... = m_{N-1} = m1`` and ``m_N = ceil(|V| / m1^(N-1))`` (the paper: N = 2, m2 = |V| / m1).
Item ``v`` (internal id ``1..|V|``, shifted to ``j = v - 1``) takes row ``(j // m1^(n-1)) mod
m_n`` of table ``n`` (the quotient-remainder trick: ``j mod m1`` and ``j // m1`` for N = 2), so
every item gets a distinct combination and no index is stored. ``n_tables = 1`` is the full
table (the paper's LSAN_full.emb).

**Context.** ``r_i = (c_{i-1}, c_i, slot(i))``: the categories of the previous and the current
item and the hour of day of interaction ``i`` (``(t // 3600) mod 24``, UTC). The previous category
of the first item of the input window is a padding label (0). Categories come from the dataset's
item attributes (:meth:`seqrec.data.attributes.ItemAttributes.primary_category`: the item's most
widespread category, skipping roots carried by more than half the catalogue, i.e. the coarsest
informative level; ``max_categories`` folds rare ones into an "other" class).
``context_embedding="tuple"`` (default) gives every possible tuple its own learned vector (one
table of ``(C + 1) * C * S`` rows, the paper's "one-hot per tuple, mapped to a dense
vector"); ``"sum"`` sums three per-field embeddings instead (``2C + 1 + S`` rows, for large
category sets, and better where the slot is real: on Yelp, 24 hour slots make the tuple table
1,728 rows, most rarely seen; ``docs/decisions/lsan-candidates-and-context.md``). Fallbacks,
recorded in the config: ``categories="none"`` puts every item in one category,
``time_slots="none"`` uses one slot (the S3-Rec Amazon files have no timestamps; the
original Amazon ones have days only, so their hour is constant anyway). A model trained with
hour slots on real times refuses histories without timestamps (``Recommender.reads_time``); one
trained on a file order averages the context over the hour slots.

**Dynamic weighting.** The prose names SiLU and "an attention weight for each base embedding"
under context ``r_i``; we use additive attention with the context as query:
``a_i^n = softmax_n(w^T SiLU(W_r r_i + W_e e_i^n))``, ``h_i = sum_n a_i^n e_i^n``.
``dynamic=False`` is LSAN_w/o.dynamic: ``h_i = sum_n e_i^n`` (Shi et al.'s QR with addition).
``composition="product"`` (with ``dynamic=False``; not in LSAN) is Shi et al.'s element-wise
product ``h_i = prod_n e_i^n``, the QR operation their paper found best: with m1 = 2 it lets the
two items of a pair read different channels of their shared row (all tables but the last start
near 1, so the product starts as the last table's row).
**Fusion**: ``h~_i = MLP([h_i; r_i])`` with MLP = ``Linear(2D, D) -> SiLU -> Linear(D, D)`` (the
paper: "a multi-layer perceptron 2D -> D", "a non-linear operation").

**Positions.** The prose does not mention position embeddings; we add SASRec's learned absolute
positions (counted from the most recent item) to ``h~_i``, since the self-attention branch is
otherwise order-blind beyond its causal mask. ``position_embedding=False`` drops them;
``positions="from_start"`` counts them from the oldest item of the window instead.

**Twin attention** (:mod:`seqrec.models.lsan_blocks`): Lite-Transformer-style split of the
channels between a causal self-attention branch and a causal lightweight depthwise convolution
branch (kernel 5), ``H = 2`` heads each, outputs concatenated; then the position-wise FFN (GELU,
inner size ``D`` unless ``ffn_dim``), each sub-layer ``LayerNorm(x + Dropout(f(x)))``.
``twin=False`` is LSAN_plain.attn (self-attention over all D channels).

**Scoring.** The paper does not say how a candidate is composed when the whole catalogue is
ranked (its context is then unknown). Default, ``candidates="input"``: each candidate goes
through the input pipeline -- dynamic weighting and fusion MLP -- under the part of its context
that is known when ranking (its own category, the padding label as previous category, the hour
slot averaged), so scoring uses the same item representation as the input side and QR partners
do not differ by one fixed offset (the MLP is non-linear). ``candidates="mean"`` is the
context-free alternative: ``w_v = mean_n e_v^n``, the composition the dynamic weighting gives
under uniform weights (``sum_n`` when ``dynamic=False``); with it the ``m1`` items that share a
row of the last table differ by the same offsets for every user. "input" scored clearly
better on Beauty, hence the default (``docs/decisions/lsan-candidates-and-context.md``).
Score ``= f_T . w_v``, full-softmax cross-entropy over all items. Only the base tables are
stored; scoring composes the candidate table and, by default, keeps it until the weights change
(``cache_candidates``; off, every call recomposes it and no full-size table is ever held).

**Training.** Adam (``betas = (0.9, 0.999)``, ``weight_decay = 0``), lr 1e-3, batch 256, and the
paper's L2 term ``lambda ||Psi||^2`` on every parameter, added to the loss as
``(l2 / 2) * sum ||theta||^2`` (the gradient of ``torch.optim.Adam(weight_decay=l2)``), l2 = 1e-5.
Dropout (0.2 on the input embedding and residual branches) and ``max_len`` = 50 are not given in
the paper. Training windows (not in the paper; default): every transition
once per epoch (``train_windows="sliding"``), better on MovieLens data and nearly
the same data as the latest 50 on the Amazon / Yelp sets
(``docs/decisions/sliding-training-windows.md``);
``"last"`` is one option away (the LSAN table pins it). Initialisation: N(0, 0.02) for every
embedding table, Xavier-normal weights and zero biases for linear layers, uniform convolution
kernels.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from seqrec.config_fields import setting
from seqrec.data.attributes import OTHER
from seqrec.data.batching import SequenceBatch
from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import Dropout
from seqrec.models.lsan_blocks import SelfAttentionBlock, TwinAttentionBlock
from seqrec.models.neural_config import NeuralConfig, check_choice, check_positive, check_range
from seqrec.models.torch_recommender import TorchRecommender

log = logging.getLogger(__name__)
MAX_CONTEXT_ROWS = 1 << 20
HOURS = 24


@dataclass(frozen=True)
class LSANConfig(NeuralConfig):
    """LSAN hyperparameters (training defaults: ``train_defaults``; the paper's
    batch 256 and Adam betas are the defaults here)."""

    train_defaults = {
        "train_windows": "sliding",  # every transition once per epoch; validated above the
        # paper's 'last' (docs/reproduce/defaults.md)
        "batch_size": 256,  # the paper's
        "betas": (0.9, 0.999),  # the paper gives none: PyTorch's defaults
    }

    dim: int = 128
    """Embedding / hidden size D."""
    m1: int = 2
    """Rows of each base table but the last (the compression knob; m_N = ceil(|V| / m1^(N-1)))."""
    n_tables: int = 2
    """Number N of base embedding tables (1 = a full embedding table, LSAN_full.emb)."""
    n_heads: int = 2
    """Heads H of each twin-attention branch (and of the plain self-attention ablation)."""
    kernel_size: int = 5
    """Width L of the causal convolution kernel."""
    n_layers: int = 1
    """Stacked twin-attention layers."""
    ffn_dim: int = 0
    """Inner size of the position-wise FFN (0 = D)."""
    dropout: float = 0.2
    """Dropout on the input embedding, residual branches and FFN."""
    dynamic: bool = True
    """Context-aware weighting of the base embeddings; False = plain sum (LSAN_w/o.dynamic)."""
    composition: str = setting("sum", legacy="sum")
    """'sum': the paper's (context-weighted) sum of the base embeddings; 'product': Shi et
    al.'s element-wise product (not LSAN; unweighted, so it needs ``dynamic=False``)."""
    twin: bool = True
    """Twin attention; False = plain self-attention (LSAN_plain.attn)."""
    twin_combine: str = "split"
    """'split': half the channels per branch, concatenated (Lite Transformer); 'sum': both
    branches on all channels, outputs added."""
    categories: str = "category"
    """'category': item categories from the data's item attributes; 'none': one category for
    every item (fallback for data without attributes)."""
    category_kind: str = "category"
    """Attribute kind read as the category (e.g. 'category', 'tag')."""
    max_categories: int = 0
    """Keep the most widespread categories up to this many classes, 'other' included (0 = all)."""
    time_slots: str = "hour"
    """'hour': the hour of day of each interaction (needs real timestamps); 'none': one slot."""
    candidates: str = "input"
    """How candidate items are composed for scoring: 'input' (default, the best measured: the
    input pipeline -- dynamic weighting and fusion MLP -- under the candidate's own category,
    the padding label as previous category and the hour slot averaged) or 'mean' (context-free
    mean of the base embeddings; the sum when ``dynamic=False``)."""
    context_embedding: str = "tuple"
    """'tuple': one learned vector per (prev category, category, slot) tuple; 'sum': the sum of
    three per-field embeddings."""
    position_embedding: bool = True
    """Add learned absolute position embeddings (not in the paper's prose; see the docstring)."""
    positions: str = setting("from_end", legacy="from_end")
    """'from_end' (the most recent item always has the same position) or 'from_start' (counted
    from the oldest item of the window: a new event leaves earlier positions unchanged, so live
    sessions can cache keys and values, ``seqrec.models.kv_cache``)."""
    cache_candidates: bool = True
    """Keep the composed candidate table between scoring calls (faster scoring; False recomposes
    it at every call and holds no full-size table)."""
    l2: float = 1e-5
    """L2 coefficient lambda on all parameters (added to the loss as lambda / 2 * ||theta||^2)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "m1", "n_tables", "n_heads", "kernel_size", "n_layers")
        check_range(self, "dropout", 0.0, 0.99)
        check_choice(self, "twin_combine", ("split", "sum"))
        check_choice(self, "categories", ("category", "none"))
        check_choice(self, "time_slots", ("hour", "none"))
        check_choice(self, "context_embedding", ("tuple", "sum"))
        check_choice(self, "candidates", ("mean", "input"))
        check_choice(self, "composition", ("sum", "product"))
        check_choice(self, "positions", ("from_end", "from_start"))
        if self.composition == "product" and self.dynamic:
            raise ConfigError(
                "composition='product' has no weights to make dynamic: set dynamic=False"
            )
        for name in ("ffn_dim", "max_categories", "l2"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.max_categories == 1:
            raise ConfigError(
                "max_categories must be 0 (all) or >= 2 ('other' is one class), got 1"
            )
        branch = self.dim // 2 if (self.twin and self.twin_combine == "split") else self.dim
        if self.twin and self.twin_combine == "split" and self.dim % 2:
            raise ConfigError(f"twin_combine='split' needs an even dim, got dim={self.dim}")
        if branch % self.n_heads:
            raise ConfigError(
                f"the branch width {branch} (dim={self.dim}) must be divisible by "
                f"n_heads, got n_heads={self.n_heads}"
            )


def qr_sizes(n_items: int, m1: int, n_tables: int) -> list[int]:
    """Rows of each base table: ``m1`` for all but the last, which covers the rest."""
    return [m1] * (n_tables - 1) + [max(1, math.ceil(n_items / m1 ** (n_tables - 1)))]


def qr_indices(items: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """Row of each base table for internal ids ``items`` (``>= 1``; PAD maps to row 0)."""
    j = (items - 1).clamp(min=0)
    out, div = [], 1
    for n, m in enumerate(sizes):
        q = j // div
        out.append(q if n == len(sizes) - 1 else q % m)
        div *= m
    return out


class LSANEncoder(SequenceEncoder):
    """``[B, L]`` items (+ timestamps) -> ``[B, L, D]``; ``category_of`` is a buffer
    ``[n_items + 1]`` of category classes (``1..C``, 0 = PAD). Built without ``categories``
    (or with ``config.categories='none'``) every item is in class 1; ``LSAN.fit`` supplies them."""

    def __init__(
        self, config: LSANConfig, n_items: int, categories: np.ndarray | None = None
    ) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d = config.dim
        cats = np.ones(n_items + 1, np.int64)
        if categories is not None and config.categories == "category":
            cats = np.asarray(categories, np.int64)
            if cats.shape != (n_items + 1,) or cats[1:].min() < 1:
                raise DataError(
                    f"categories must be [n_items + 1] = [{n_items + 1}] classes >= 1, "
                    f"got shape {cats.shape}"
                )
        cats[0] = 0
        self.register_buffer("category_of", torch.from_numpy(cats))
        self.n_classes = int(cats.max())
        self.n_slots = HOURS if config.time_slots == "hour" else 1
        self.sizes = qr_sizes(n_items, config.m1, config.n_tables)
        self.tables = nn.ModuleList(nn.Embedding(m, d) for m in self.sizes)
        c, s = self.n_classes, self.n_slots
        if config.context_embedding == "tuple":
            rows = (c + 1) * c * s
            if rows > MAX_CONTEXT_ROWS:
                raise DataError(
                    f"{c} category classes x {s} slots need {rows:,} context rows "
                    f"(> {MAX_CONTEXT_ROWS:,}); set max_categories or "
                    "context_embedding='sum'"
                )
            self.context = nn.Embedding(rows, d)
        else:
            self.prev_emb, self.cur_emb = nn.Embedding(c + 1, d), nn.Embedding(c + 1, d)
            self.slot_emb = nn.Embedding(s, d)
        if config.dynamic:
            self.att_ctx = nn.Linear(d, d)
            self.att_emb = nn.Linear(d, d, bias=False)
            self.att_v = nn.Linear(d, 1, bias=False)
        self.fuse = nn.Sequential(nn.Linear(2 * d, d), nn.SiLU(), nn.Linear(d, d))
        self.pos_emb = nn.Embedding(config.max_len, d) if config.position_embedding else None
        self.emb_dropout = Dropout(config.dropout)
        ffn = config.ffn_dim or d
        self._candidates: tuple | None = None  # (base-table versions, composed table)
        self.layers = nn.ModuleList(
            TwinAttentionBlock(
                d, config.n_heads, config.kernel_size, ffn, config.dropout, config.twin_combine
            )
            if config.twin
            else SelfAttentionBlock(d, config.n_heads, ffn, config.dropout)
            for _ in range(config.n_layers)
        )
        for module in self.modules():
            if isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)
            elif isinstance(module, nn.Linear):
                # Xavier weights and zero biases: with PyTorch's default biases the input MLP
                # starts as a near-constant vector that drowns the item signal (slow start)
                nn.init.xavier_normal_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        if config.composition == "product":  # all but the last table start near 1, so that
            for table in self.tables[:-1]:  # a product starts as the last table's row
                nn.init.normal_(table.weight, 1.0, 0.02)

    # --- embeddings ------------------------------------------------------------------------
    def base_embeddings(self, items: torch.Tensor) -> torch.Tensor:
        """``[...]`` internal ids -> ``[..., N, D]`` selected base embeddings."""
        idx = qr_indices(items, self.sizes)
        return torch.stack([t(i) for t, i in zip(self.tables, idx, strict=True)], dim=-2)

    def context_vectors(self, items: torch.Tensor, timestamps: torch.Tensor | None) -> torch.Tensor:
        """``r_i`` for every position, ``[B, L, D]``."""
        cur = self.category_of[items]  # [B, L], 0 at PAD
        prev = F.pad(cur[:, :-1], (1, 0))  # the window's first item gets the padding label
        slot = (timestamps // 3600) % HOURS if timestamps is not None else None
        return self.tuple_context(prev, cur, slot)

    def tuple_context(
        self, prev: torch.Tensor, cur: torch.Tensor, slot: torch.Tensor | None
    ) -> torch.Tensor:
        """Context vector of (previous category, category, hour slot) tuples, ``[..., D]``;
        ``slot=None`` (no times) averages over the slots."""
        s = self.n_slots
        average = s > 1 and slot is None  # no times: average over the slots
        if s == 1 or slot is None:
            slot = torch.zeros_like(cur)
        if self.config.context_embedding == "sum":
            slot_vec = self.slot_emb.weight.mean(0) if average else self.slot_emb(slot)
            return self.prev_emb(prev) + self.cur_emb(cur) + slot_vec
        index = (prev * self.n_classes + (cur - 1).clamp(min=0)) * s + slot
        if average:
            return self.context(index[..., None] + torch.arange(s, device=cur.device)).mean(-2)
        return self.context(index)

    def input_embeddings(self, batch: SequenceBatch) -> torch.Tensor:
        """``h~_i = MLP([h_i; r_i])`` for every position, ``[B, L, D]``."""
        items = batch.items
        return self.compose(
            self.base_embeddings(items), self.context_vectors(items, batch.timestamps)
        )

    def compose(self, base: torch.Tensor, ctx: torch.Tensor) -> torch.Tensor:
        """Base embeddings ``[..., N, D]`` under contexts ``[..., D]`` -> ``h~ [..., D]``."""
        if self.config.dynamic:
            logits = self.att_v(F.silu(self.att_ctx(ctx)[..., None, :] + self.att_emb(base)))
            h = (torch.softmax(logits, dim=-2) * base).sum(-2)
        else:
            h = self.static_composition(base)
        return self.fuse(torch.cat([h, ctx], dim=-1))

    def static_composition(self, base: torch.Tensor) -> torch.Tensor:
        """Unweighted composition ``[..., N, D] -> [..., D]``: sum or element-wise product."""
        return base.prod(-2) if self.config.composition == "product" else base.sum(-2)

    def candidate_embeddings(self, ids: torch.Tensor) -> torch.Tensor:
        """Scoring vectors ``[I, D]`` of items ``ids`` (see ``LSANConfig.candidates``)."""
        base = self.base_embeddings(ids)  # [I, N, D]
        if self.config.candidates == "mean":
            return base.mean(-2) if self.config.dynamic else self.static_composition(base)
        # "input": the input pipeline under the part of the context known for a candidate:
        # its own category, the padding label as previous category, the slot averaged
        cur = self.category_of[ids]
        ctx = self.tuple_context(torch.zeros_like(cur), cur, None)
        return self.compose(base, ctx)

    # --- SequenceEncoder -------------------------------------------------------------------
    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        items = batch.items
        length = items.shape[1]
        if length > self.config.max_len:
            raise ConfigError(f"input length {length} exceeds max_len {self.config.max_len}")
        valid = batch.mask if batch.mask is not None else items.ne(0)
        x = self.input_embeddings(batch)
        if self.pos_emb is not None and self.config.positions == "from_start":
            x = x + self.pos_emb((valid.long().cumsum(1) - 1).clamp_(min=0))
        elif self.pos_emb is not None:  # counted from the most recent item: padding-invariant
            x = (
                x
                + self.pos_emb(
                    torch.arange(
                        self.config.max_len - length, self.config.max_len, device=items.device
                    )
                )[None]
            )
        x = self.emb_dropout(x) * valid[..., None]
        for i, layer in enumerate(self.layers):
            x = layer(x, valid, last_only and i == len(self.layers) - 1)
        return x

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:
        """Hidden state of the last position ``[B, D]``; the last layer computes only it."""
        return self.forward(batch, last_only=True)[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        # Outside training (no grad) the composed table is kept until a parameter or buffer changes
        # (an optimizer step or load_state_dict bumps the tensor versions): scoring then costs
        # what a full table costs, at the price of holding the composed table in memory while
        # scoring. ``cache_candidates=False`` recomposes it at every call instead.
        # (never while torch.export traces: its fake tensors have no data pointer)
        cacheable = (
            self.config.cache_candidates
            and not torch.is_grad_enabled()
            and not torch.compiler.is_exporting()
        )
        key = (
            tuple((t._version, t.data_ptr()) for t in (*self.parameters(), *self.buffers()))
            if cacheable
            else None
        )
        if cacheable and self._candidates is not None and self._candidates[0] == key:
            return self._candidates[1], None
        ids = torch.arange(self.n_items + 1, device=self.category_of.device)
        w = self.candidate_embeddings(ids) * ids.ne(0)[:, None]  # PAD row 0
        if cacheable:
            self._candidates = (key, w)
        return w, None


class LSAN(TorchRecommender):
    """LSAN recommender (see the module docstring for the paper and every choice made)."""

    name = "lsan"
    config_cls = LSANConfig
    encoder_cls = LSANEncoder

    def incremental(self, slide: str = "exact", stride: int = 0):
        """The live-session encoder: per layer, a key/value cache and the convolution's inputs
        (:mod:`seqrec.models.kv_cache`); ``None`` (re-encode) with positions counted from the end,
        where every new event moves every position.

        ``slide`` / ``stride``: what happens beyond ``max_len`` (see there)."""
        from seqrec.models.kv_cache import LSANCache, cached_encoder

        if self.config.position_embedding and self.config.positions != "from_start":
            return None
        return cached_encoder(self, LSANCache, slide=slide, stride=stride)

    def _config_reads_time(self) -> bool:
        return self.config.time_slots == "hour"

    def __init__(self, config: LSANConfig | None = None) -> None:
        super().__init__(config)
        self._categories: np.ndarray | None = None

    def fit(self, train: Sequences, valid: Targets | None = None, **kwargs) -> LSAN:
        """Read the side information the config asks for, then train (see ``TorchRecommender``).

        Raises:
            DataError: ``categories='category'`` on data without item attributes of
                ``category_kind``, or ``time_slots='hour'`` on data without real timestamps.
        """
        self._categories = side_information(train, self.config)
        return super().fit(train, valid, **kwargs)

    def build_encoder(self, n_items: int) -> LSANEncoder:
        return LSANEncoder(self.config, n_items, self._categories)

    def compute_loss(self, data: dict) -> torch.Tensor:
        loss = super().compute_loss(data)
        if self.config.l2 > 0:
            squares = sum(p.pow(2).sum() for p in self.encoder.parameters())
            loss = loss + 0.5 * self.config.l2 * squares
        return loss

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """New items are composed from the quotient-remainder tables like the old ones (the
        remainder rows they share with old items are trained; a quotient table that needs new
        rows starts them at the mean of its old rows) and are in the category class 'other'
        (an item outside the training catalogue has no class of its own)."""
        if self._categories is not None:
            extra = np.full(n_items - self.n_items, OTHER, np.int64)
            self._categories = np.concatenate([self._categories, extra])
        super()._grow(n_items, n_users)

    def _grow_rows(
        self, key: str, old: torch.Tensor, target: torch.Tensor, old_n: int, n_items: int
    ) -> torch.Tensor | None:
        return target if key == "category_of" else None  # built from the grown classes

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        self._categories = np.asarray(state["category_of"], np.int64)
        super()._load_state(state)


def side_information(train: Sequences, cfg: LSANConfig) -> np.ndarray | None:
    """Category class of every item (None with ``categories='none'``), checking that the data
    carries what the config asks for: no silent fallback."""
    if cfg.time_slots == "hour" and (train.timestamps is None or not train.has_time):
        raise DataError(
            "LSAN time_slots='hour' needs real timestamps; this data has only an "
            "order: set time_slots='none' for one time slot (--set model.time_slots=none)"
        )
    if cfg.categories == "none":
        return None
    attrs = None if train.vocab is None else train.vocab.attributes
    if attrs is None or cfg.category_kind not in attrs.kinds():
        have = "no item attributes" if attrs is None else f"attribute kinds {attrs.kinds()}"
        raise DataError(
            f"LSAN categories='category' needs item attributes of kind "
            f"{cfg.category_kind!r}; the data has {have}: give an item file with a "
            "categories column (--set data.item_file=products.csv), or set "
            "categories='none' for one category (--set model.categories=none), or "
            "category_kind"
        )
    classes, n_classes = attrs.primary_category(
        train.n_items, cfg.category_kind, max_classes=cfg.max_categories
    )
    log.info(
        "LSAN: %d category classes ('other' included), %d items in 'other'",
        n_classes,
        int((classes[1:] == 1).sum()),
    )
    return classes
