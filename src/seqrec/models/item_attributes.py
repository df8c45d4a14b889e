"""Items represented by their ID and their attributes, so that an item nobody has interacted
with yet can be scored (``model.item_attributes = "ids+attributes"``).

Any encoder on the shared trainer whose item table is an ``nn.Embedding`` named ``item_emb``
of ``n_items + 1`` rows, used both for the input and as the output table (SASRec, HSTU,
FMLP-Rec, BSARec, NARM ...), gets it through :class:`AttributeItemEmbedding`, which replaces
that table after the encoder is built (so the ID-only configuration builds and draws exactly
what it did before). An item's vector is

    e_i = id_i + W · mean(a_v for the attribute values v of item i) + b

* ``id_i``: the item's ID embedding where the item occurs in the training data, else one
  learned **default** vector (an item the training data never shows has an ID row that CE only
  ever pushed down as a negative: it carries no information, so it is replaced);
* ``a_v``: one embedding per attribute value (a category, a brand, a tag: each ``(kind, value)``
  of ``ItemAttributes`` is one token); ``W, b`` a learned projection, started at the identity;
* the PAD row 0 stays zero;
* a per-item output bias (HSTU's, MF's) of an item the training data never shows is likewise
  replaced by one learned default bias;
* with numeric item vectors in the data (``ItemVocab.vectors``, an item file's ``vector``
  column: text embeddings computed elsewhere, say) a further term ``V x_i``: ``x_i`` the
  item's vector divided by one scale for the whole table (the root mean square of the
  training items' values, so that ``V`` starts at the ID rows' size whatever units the vectors
  come in), ``V`` learned from a small random start; an item without a vector adds nothing.
  The choice of a linear map (no hidden layer) and of one global scale is ours: the issue asks
  only that a vector a user supplies can score an item.

The same table is the input embedding and the output item table: a cold item with attributes
gets a score from what it is, and as a history item it is read the same way.

**ID dropout** (``model.id_dropout``, default 0.25). Trained as is, the ID part alone can fit
every training item, and the attribute path learns only what the IDs leave over: a cold item,
which has nothing but the attribute path, then gets a weak vector. So at every training step
each item's ID part is replaced by the default vector with probability ``id_dropout``; one draw
per step for the whole catalogue, so an item dropped at a step is attribute-only both where it
is read (input) and where it is scored (output), exactly the situation of a cold item. The
item-cold split alone would not do it: its held-out items never occur in training at all, so
nothing would teach the attribute path to stand alone. Evaluation never drops. Set 0 to train
with IDs always present.

The attribute vocabulary (``(kind, value)`` of every token) and each item's token list are
buffers of the module, so they travel in the artifact: a model that grows to new items
(:meth:`seqrec.models.base.Recommender.grow`) reads the new items' attributes from the grown
vocabulary's ``attributes`` and maps them through the stored vocabulary (values it has never
seen are left out: they have no trained embedding).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from seqrec.data.attributes import ItemAttributes
from seqrec.errors import ConfigError, DataError

log = logging.getLogger(__name__)

MODES = ("none", "ids+attributes")
"""Values of ``model.item_attributes``."""

MAX_PER_ITEM = 32
"""At most this many attribute tokens per item are kept (in the item's source order)."""


@dataclass
class AttributeSpec:
    """What an :class:`AttributeItemEmbedding` is built from (numpy, internal item ids).

    Attributes:
        tokens: int64 ``[n_items + 1, A]`` token ids per item (0 = none), row 0 empty.
        token_kind: int64 ``[T + 1]`` index into ``kinds`` of each token (0 unused for PAD).
        token_value: int64 ``[T + 1]`` the attribute id of each token.
        kinds: the attribute kinds, in the order ``token_kind`` counts them.
        known: bool ``[n_items + 1]``: items that occur in the training data.
        vectors: float32 ``[n_items + 1, k]`` scaled numeric item vectors (zero rows: none),
            or None.
        vector_scale: what the raw vectors were divided by (new items' are divided by it too).
    """

    tokens: np.ndarray
    token_kind: np.ndarray
    token_value: np.ndarray
    kinds: list[str]
    known: np.ndarray
    vectors: np.ndarray | None = None
    vector_scale: float = 1.0

    @property
    def n_tokens(self) -> int:
        return len(self.token_value) - 1


def _token_lists(
    attrs: ItemAttributes, n_items: int, lookup: dict[tuple[str, int], int], first: int = 1
) -> tuple[list[list[int]], int]:
    """Per item ``first..n_items``: its token ids (``lookup`` of ``(kind, value)``), in source
    order, each once; and how many entries had no token in ``lookup``."""
    rows = (attrs.item >= first) & (attrs.item <= n_items)
    order = np.lexsort((attrs.position[rows], attrs.item[rows]))
    items = attrs.item[rows][order]
    values = attrs.attribute[rows][order]
    kinds = attrs.kind[rows][order]
    out: list[list[int]] = [[] for _ in range(n_items + 1 - first)]
    missing = 0
    for item, kind, value in zip(items.tolist(), kinds.tolist(), values.tolist(), strict=True):
        tok = lookup.get((kind, value))
        if tok is None:
            missing += 1
            continue
        lst = out[item - first]
        if tok not in lst:
            lst.append(tok)
    return out, missing


def _pad(lists: list[list[int]], width: int) -> np.ndarray:
    table = np.zeros((len(lists), max(1, width)), np.int64)
    for i, lst in enumerate(lists):
        lst = lst[:width]
        table[i, : len(lst)] = lst
    return table


def _scaled_rows(raw: np.ndarray, scale: float) -> np.ndarray:
    """Raw vectors (NaN rows: none) divided by ``scale``, NaN rows as zeros."""
    out = np.nan_to_num(np.asarray(raw, np.float32) / np.float32(scale), nan=0.0)
    return out.astype(np.float32)


def _vector_table(
    vectors: np.ndarray | None, n_items: int, item_counts: np.ndarray
) -> tuple[np.ndarray | None, float]:
    """The ``[n_items + 1, k]`` scaled vector table and its scale (module docstring)."""
    if vectors is None:
        return None, 1.0
    vectors = np.asarray(vectors, np.float32)[:n_items]
    present = ~np.isnan(vectors[:, 0])
    trained = present & (np.asarray(item_counts[1 : n_items + 1]) > 0)
    basis = vectors[trained] if trained.any() else vectors[present]
    scale = float(np.sqrt(np.mean(np.square(basis)))) if len(basis) else 1.0
    scale = scale if scale > 0 else 1.0
    table = np.zeros((n_items + 1, vectors.shape[1]), np.float32)
    table[1:] = _scaled_rows(vectors, scale)
    log.info(
        "item vectors: %d of %d items have one (%d values, scale %.3g)",
        int(present.sum()),
        n_items,
        vectors.shape[1],
        scale,
    )
    return table, scale


def build_spec(
    attrs: ItemAttributes | None,
    n_items: int,
    item_counts: np.ndarray,
    vectors: np.ndarray | None = None,
) -> AttributeSpec:
    """The spec of a new model: one token per distinct ``(kind, value)`` of ``attrs`` carried by
    an item of the catalogue; ``item_counts`` (``[n_items + 1]`` training counts) marks the
    items whose ID part is trained; ``vectors`` (``ItemVocab.vectors``) the numeric vectors.

    Raises:
        DataError: the data carries neither item attributes nor item vectors.
    """
    vector_table, scale = _vector_table(vectors, n_items, item_counts)
    if (attrs is None or len(attrs) == 0) and vector_table is None:
        raise DataError(
            "model.item_attributes='ids+attributes' needs item attributes; this data has none: "
            "give an item file with categories / brands / tags or a vector column "
            "(--set data.item_file=items.csv) or set model.item_attributes=none"
        )
    if attrs is None:  # vectors alone: an empty token table
        none = np.zeros(0, np.int64)
        attrs = ItemAttributes(none, none, np.zeros(0, str), none)
    rows = (attrs.item >= 1) & (attrs.item <= n_items)
    kinds = sorted(set(np.unique(attrs.kind[rows]).tolist()))
    kind_code = {k: i for i, k in enumerate(kinds)}
    pairs = sorted(
        {(str(k), int(v)) for k, v in zip(attrs.kind[rows], attrs.attribute[rows], strict=True)}
    )
    lookup = {p: i + 1 for i, p in enumerate(pairs)}
    lists, _ = _token_lists(attrs, n_items, lookup)
    width = min(MAX_PER_ITEM, max((len(x) for x in lists), default=1))
    cut = sum(len(x) > width for x in lists)
    if cut:
        log.info("item attributes: %d items keep their first %d attribute values", cut, width)
    tokens = np.concatenate([np.zeros((1, max(1, width)), np.int64), _pad(lists, width)])
    token_kind = np.asarray([0] + [kind_code[k] for k, _ in pairs], np.int64)
    token_value = np.asarray([0] + [v for _, v in pairs], np.int64)
    known = np.asarray(item_counts[: n_items + 1] > 0, bool).copy()
    known[0] = False
    log.info(
        "item attributes: %d values of kinds %s; %d of %d items without any, %d not in the "
        "training data (scored by their attributes alone)",
        len(pairs),
        kinds,
        int((tokens[1:, 0] == 0).sum()),
        n_items,
        int((~known[1:]).sum()),
    )
    return AttributeSpec(tokens, token_kind, token_value, kinds, known, vector_table, scale)


def grown_spec(
    spec: AttributeSpec,
    attrs: ItemAttributes | None,
    n_items: int,
    vectors: np.ndarray | None = None,
) -> AttributeSpec:
    """``spec`` grown to ``n_items`` items: the old items keep their tokens; a new item's
    attributes (rows of ``attrs`` for ids beyond the old catalogue) map through the stored
    vocabulary (values never seen in training are left out), and its vector (row of
    ``vectors``, the grown ``ItemVocab.vectors``) is scaled as the training ones were; new
    items are not known (their ID part is the default vector until they train).

    Raises:
        DataError: the new vectors' length is not the model's.
    """
    old_n = len(spec.tokens) - 1
    added = n_items - old_n
    width = spec.tokens.shape[1]
    new_tokens = np.zeros((added, width), np.int64)
    if attrs is not None and added > 0:
        lookup = {
            (spec.kinds[int(k)], int(v)): t
            for t, (k, v) in enumerate(zip(spec.token_kind, spec.token_value, strict=True))
            if t > 0
        }
        lists, missing = _token_lists(attrs, n_items, lookup, first=old_n + 1)
        new_tokens = _pad(lists, width)
        if missing:
            log.warning(
                "item attributes: %d attribute entries of the new items have values the model "
                "never saw; they are left out",
                missing,
            )
    table = spec.vectors
    if table is not None:
        rows = np.zeros((max(added, 0), table.shape[1]), np.float32)
        if vectors is not None and added > 0:
            if vectors.shape[1] != table.shape[1]:
                raise DataError(
                    f"the new items' vectors have {vectors.shape[1]} values, the model's "
                    f"{table.shape[1]}"
                )
            rows = _scaled_rows(vectors[old_n:n_items], spec.vector_scale)
        table = np.concatenate([table, rows])
    return AttributeSpec(
        np.concatenate([spec.tokens, new_tokens]),
        spec.token_kind,
        spec.token_value,
        spec.kinds,
        np.concatenate([spec.known, np.zeros(added, bool)]),
        table,
        spec.vector_scale,
    )


def category_ids(spec: AttributeSpec, categories: np.ndarray | None) -> dict[str, int]:
    """Category name -> the attribute id the model trained with, read back from each item's
    category text (``ItemVocab.categories``, ``|``-joined names) and its ``category`` tokens:
    both are in the item file's order (``seqrec.data.attributes.from_genres``). An item file
    read later numbers its names its own way; this lets its items be given the trained ids.
    Items whose names and tokens disagree in number are skipped."""
    from seqrec.data.attributes import genre_names

    if categories is None or "category" not in spec.kinds:
        return {}
    code = spec.kinds.index("category")
    out: dict[str, int] = {}
    for item in range(1, min(len(spec.tokens), len(categories) + 1)):
        tokens = [t for t in spec.tokens[item].tolist() if t and spec.token_kind[t] == code]
        names = list(dict.fromkeys(genre_names(categories[item - 1])))
        if tokens and len(names) == len(tokens):
            for name, t in zip(names, tokens, strict=True):
                out.setdefault(name, int(spec.token_value[t]))
    return out


def _kinds_bytes(kinds: list[str]) -> torch.Tensor:
    return torch.tensor(list("\n".join(kinds).encode()), dtype=torch.uint8)


def spec_from_state(state: dict[str, np.ndarray], prefix: str = "item_emb.") -> AttributeSpec:
    """The spec stored in an encoder's state dict (an artifact)."""
    try:
        raw = bytes(np.asarray(state[prefix + "kind_names"], np.uint8).tolist()).decode()
        vectors = state.get(prefix + "vectors")
        return AttributeSpec(
            np.asarray(state[prefix + "tokens"], np.int64),
            np.asarray(state[prefix + "token_kind"], np.int64),
            np.asarray(state[prefix + "token_value"], np.int64),
            raw.split("\n") if raw else [],
            np.asarray(state[prefix + "known"], bool),
            None if vectors is None else np.asarray(vectors, np.float32),
            float(np.asarray(state.get(prefix + "vector_scale", 1.0))),
        )
    except KeyError as exc:
        raise DataError(
            f"the stored weights have no item attribute table ({exc.args[0]} missing) though "
            "the config says item_attributes='ids+attributes'"
        ) from None


class AttributeItemEmbedding(nn.Module):
    """An item table ``e_i = id-or-default_i + W mean(a_v) + b`` (module docstring).

    Called on ids ``[...]`` it returns ``[..., D]``; ``weight`` is the full table
    ``[n_items + 1, D]`` (row 0 zero), so encoders that read ``item_emb(items)`` and
    ``item_emb.weight`` use it unchanged.
    """

    def __init__(self, id_emb: nn.Embedding, spec: AttributeSpec, id_dropout: float) -> None:
        super().__init__()
        n_rows, d = id_emb.weight.shape
        if spec.tokens.shape[0] != n_rows:
            raise ConfigError(
                f"item attributes cover {spec.tokens.shape[0] - 1} items, the item table "
                f"{n_rows - 1}"
            )
        self.id = id_emb
        self.embedding_dim = d
        self.id_dropout = float(id_dropout)
        std = float(id_emb.weight[1:].detach().std()) if n_rows > 2 else 0.02
        self.default = nn.Parameter(torch.zeros(d))
        self.default_bias = nn.Parameter(torch.zeros(()))
        self.attr = nn.Embedding(spec.n_tokens + 1, d, padding_idx=0)
        self.proj = nn.Linear(d, d)
        with torch.no_grad():
            nn.init.normal_(self.attr.weight, 0.0, std or 0.02)
            self.attr.weight[0].zero_()
            self.proj.weight.copy_(torch.eye(d))
            self.proj.bias.zero_()
        self.register_buffer("tokens", torch.from_numpy(spec.tokens.copy()))
        self.register_buffer("known", torch.from_numpy(spec.known.copy()))
        self.register_buffer("token_kind", torch.from_numpy(spec.token_kind.copy()))
        self.register_buffer("token_value", torch.from_numpy(spec.token_value.copy()))
        self.register_buffer("kind_names", _kinds_bytes(spec.kinds))
        self.vec: nn.Linear | None = None
        if spec.vectors is not None:
            k = spec.vectors.shape[1]
            self.register_buffer("vectors", torch.from_numpy(spec.vectors.copy()))
            self.register_buffer("vector_scale", torch.tensor(spec.vector_scale))
            self.vec = nn.Linear(k, d, bias=False)
            with torch.no_grad():  # V x starts at the ID rows' size (x has unit RMS values)
                nn.init.normal_(self.vec.weight, 0.0, (std or 0.02) / max(k, 1) ** 0.5)
        self._step_known: torch.Tensor | None = None
        self._cache: tuple[tuple, torch.Tensor] | None = None

    def spec(self) -> AttributeSpec:
        return spec_from_state({k: v.cpu().numpy() for k, v in self.state_dict().items()}, "")

    # --- pieces ------------------------------------------------------------------------
    def new_step(self) -> None:
        """Draw this training step's ID dropout: the model's ``train_forward`` calls it once
        per step, so every lookup of the step (an encoder may look items up more than once, or
        only read the whole table, as MF) and the output table share one draw."""
        self._known(draw=True)  # no draw outside training (see _known)

    def _known(self, draw: bool) -> torch.Tensor:
        """Items whose ID part is used ``[n_items + 1]`` (bool): the known items, less a fresh
        ``id_dropout`` draw per training step (``draw``)."""
        if not self.training or self.id_dropout == 0.0:
            return self.known
        if draw or self._step_known is None or len(self._step_known) != len(self.known):
            keep = torch.rand(len(self.known), device=self.known.device) >= self.id_dropout
            self._step_known = self.known & keep
        return self._step_known

    def _rows(self, ids: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
        use_id = known[ids][..., None]
        base = torch.where(use_id, self.id(ids), self.default.to(self.id.weight.dtype))
        toks = self.tokens[ids]  # [..., A]
        present = toks.ne(0)
        summed = (self.attr(toks) * present[..., None]).sum(-2)
        mean = summed / present.sum(-1, keepdim=True).clamp_(min=1)
        rows = base + self.proj(mean)
        if self.vec is not None:
            rows = rows + self.vec(self.vectors[ids])
        return rows * ids.ne(0)[..., None]

    def output_bias(self, bias: torch.Tensor) -> torch.Tensor:
        """An encoder's per-item output bias ``[n_items + 1]`` with the items whose ID part is
        not used (unknown, or dropped at this step) at one learned default bias: the bias of
        an item never seen in training is, like its ID row, only ever pushed down."""
        known = self._known(draw=False)
        known = known.clone()
        known[0] = True  # PAD keeps its own
        return torch.where(known, bias, self.default_bias.to(bias.dtype))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``[...]`` item ids -> ``[..., D]`` (in training with the step's ID dropout, as
        :meth:`new_step` drew it)."""
        return self._rows(ids, self._known(draw=False))

    @property
    def weight(self) -> torch.Tensor:
        """The whole table ``[n_items + 1, D]`` (in training with the step's ID dropout, as
        drawn by :meth:`new_step`); cached in evaluation until a parameter or buffer changes."""
        ids = torch.arange(len(self.known), device=self.known.device)
        if self.training or torch.is_grad_enabled():
            return self._rows(ids, self._known(draw=False))
        tensors = [*self.parameters(), *self.buffers()]
        versions = tuple((id(t), t._version) for t in tensors)
        if self._cache is None or self._cache[0] != versions:
            self._cache = (versions, self._rows(ids, self.known))
        return self._cache[1]


def supports(encoder: nn.Module, n_items: int) -> str | None:
    """None if ``encoder`` can take an attribute item table, else why not."""
    emb = getattr(encoder, "item_emb", None)
    if not isinstance(emb, nn.Embedding):
        return "its item table is not an nn.Embedding named item_emb"
    if emb.weight.shape[0] != n_items + 1:
        return (
            f"its item table has {emb.weight.shape[0]} rows, not n_items + 1 = {n_items + 1} "
            "(extra token rows)"
        )
    with torch.enable_grad():  # the output table must be this table (not a separate one)
        weight, _ = encoder.output_embeddings()
        reads = weight.requires_grad and (
            torch.autograd.grad(weight.sum(), emb.weight, allow_unused=True)[0] is not None
        )
    if not reads:
        return "its output item table is not item_emb (a cold item would get no score from it)"
    return None


def attach(encoder: nn.Module, spec: AttributeSpec, id_dropout: float, model: str) -> nn.Module:
    """``encoder`` with its ``item_emb`` replaced by an :class:`AttributeItemEmbedding` over
    the same ID table (its weights as initialised or loaded)."""
    why = supports(encoder, encoder.n_items)
    if why is not None:
        raise ConfigError(f"{model} cannot use model.item_attributes='ids+attributes': {why}")
    emb = AttributeItemEmbedding(encoder.item_emb, spec, id_dropout)
    encoder.item_emb = emb
    table = encoder.output_embeddings  # the class's method, bound

    def output_embeddings() -> tuple[torch.Tensor, torch.Tensor | None]:
        weight, bias = table()
        return weight, None if bias is None else emb.output_bias(bias)

    encoder.output_embeddings = output_embeddings  # per-item biases: unknown items' default
    return encoder
