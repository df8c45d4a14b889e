"""SASRec: Self-Attentive Sequential Recommendation (Kang & McAuley, ICDM 2018).

Item embedding ``M`` plus a learnable position embedding ``P``, ``n_blocks`` causal
self-attention blocks (attention + point-wise FFN), and inner-product scores ``h_t^T M_i`` with
the item embedding shared between input and prediction. Training predicts the next item at
every position; inference scores the last position.

Deviations from the paper (all deliberate, all switchable where noted):

* Block layout. ``layout="reference"`` (default) follows the authors'
  TensorFlow code: embeddings scaled by sqrt(d), the attention query taken from the normalized
  input while keys/values use the raw input, the residual added to the normalized query, the FFN
  applied to ``LN(x)`` with its residual on ``LN(x)``, and a final LayerNorm.
  ``layout="pre_ln"`` is the guide's Pre-LN form ``x + Dropout(g(LN(x)))``
  with a final LayerNorm and no embedding scaling; it learns more slowly
  (``docs/decisions/sasrec-reference-layout.md``). ``layout="post_ln"`` is the block of the
  BERT / FMLP-Rec / BSARec line of code: ``Dropout(LN(E[item] + P[position]))`` embeddings (no
  scaling), ``LN(x + Dropout(Attn(x)))`` and ``LN(x + Dropout(FFN(x)))`` with a GELU FFN
  (dropout on its output only, none after the activation), no final LayerNorm, LayerNorm eps
  1e-12; with ``ffn_dim=4 * dim``, ``init="normal"``, ``attn_out_proj=True`` and
  ``attn_dropout=dropout`` its layers are those of BSARec's self-attention branch alone
  (``alpha = 0``; PAD queries and the training samples differ, see ``seqrec.models.bsarec``).
* Positions are counted from the right (the most recent item always has the same position
  embedding). With inputs always padded to ``max_len`` this is the paper's absolute position
  scheme relabelled; it additionally makes outputs independent of extra left padding.
  ``positions="from_start"`` numbers the items of the window from its oldest one (0, 1, ...),
  which is what right-padded implementations such as the Dross SASRec+ code compute; the
  position of the last item then tells the model how long a short history is (on ML-1M it
  tracks the default closely: ``docs/decisions/sasrec-positions.md``).
* PAD queries attend to themselves (never to other keys) to avoid NaN on fully masked rows;
  their outputs are zeroed, so real positions are unaffected.
* Multi-head attention (``n_heads > 1``) splits d into h heads scaled by sqrt(d/h); like the
  paper there is no output projection after concatenating heads. The Q/K/V projections have
  biases (as the TF reference's dense layers; the guide's code omits them).
* The FFN applies dropout after the ReLU as well as on its output (as the TF reference).
* Initialization: Xavier-normal for every matrix (as the PyTorch port of the reference), PAD
  embedding zero; ``init="normal"`` draws N(0, 0.02) as RecBole and the Dross SASRec+ code.
* ``attn_out_proj`` (off) adds the attention output projection of ``nn.MultiheadAttention``
  used by the PyTorch port and the Dross code; the paper has none.
* Losses: ``loss="bce"`` is the paper's objective (one negative per position drawn from items
  the user never interacted with in training, redrawn every step). ``"ce"`` (full softmax,
  the "SASRec+" variant), ``"sampled_softmax"`` and ``"gbce"`` (gSASRec) are extensions.
* Attention-weight dropout is a separate option (``attn_dropout``, default 0 as in the guide's
  block; the TF reference applies ``dropout`` there, set ``attn_dropout=dropout`` to match).
  Both layouts also apply ``dropout`` to the attention output before its residual (the guide's
  block); the TF reference and the PyTorch port drop only the attention weights.
* ``l2_norm`` / ``temperature`` (off by default) give the cosine-similarity output of the HSTU
  paper's sampled-softmax SASRec baseline; the paper itself uses raw inner products.
* Training windows (deviation by default): ``train_windows="sliding"`` trains every transition
  once per epoch (long histories cut into windows of ``max_len``, as the LRURec code does for all
  its models); the paper's loader, each user's most recent ``max_len`` transitions per epoch, is
  ``train_windows="last"``. Sliding validates better where histories are longer than
  ``max_len``, since ``"last"`` never trains on their older part, and it trains on every
  transition as RecBole's SASRec does (``docs/decisions/sliding-training-windows.md``). Where
  histories are shorter than ``max_len`` the two are the same windows.
* Batch size (deviation by default): ``batch_size=0`` sizes the batch automatically: about
  ``batch_targets=1024`` training targets, or more, up to 128 sequences, where the data leave an
  epoch at least ``min_epoch_steps=100`` steps. Why: a fixed 128 sequences is a very different
  step on different data (128 windows of 50 on MovieLens hold about 5,000 targets and leave a
  small dataset's epoch a handful of steps; 128 short Amazon histories hold about 750), and
  what matters is the number of steps an epoch gives. On each dataset measured the rule picks
  the batch that validated best (``docs/decisions/automatic-batch-size.md``). The paper's 128
  is ``batch_size=128``.
* Label smoothing (deviation by default): the full cross-entropy trains against ``0.9`` on the
  target plus ``0.1 / I`` on every item (``label_smoothing=0.1``); ``label_smoothing=0`` is the
  plain cross-entropy, and the paper's BCE ignores the setting. It validated higher on both
  datasets the defaults are chosen on (``docs/decisions/label-smoothing.md``).
* Optimizer is AdamW (``weight_decay=0`` equals the paper's Adam); the paper's L2 on
  embeddings is not applied.
* Defaults are the best recipe measured on validation NDCG@10 (``docs/decisions/``): the
  reference layout, ``lr=3e-3``, ``patience=30``, sliding training windows, batches of about
  1,024 targets and label smoothing 0.1. The paper-faithful variant is ``lr=1e-3, loss="bce",
  batch_size=128`` (its learning rate, objective and batch; with 1e-3 the model takes far longer
  to get past the popularity ranking on small data, and a short patience stops it in the dip
  that follows;
  ``docs/decisions/learning-rate-and-patience.md``).

**Computation.** In training on CPU every layout runs its position-wise work (projections,
LayerNorms, FFN, residuals) at the real positions of a padded batch only and the
attention over the padded ``[B, L]`` layout with its mask: PAD positions are never read by a
real one, so the outputs are the same, and every dropout mask is drawn over the whole padded
tensor first, so the random stream is the same too (a test compares both paths).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from seqrec.data.batching import SequenceBatch
from seqrec.errors import ConfigError
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.layers import (
    Dropout,
    PointWiseFFN,
    causal_padding_mask,
    dropout_rows,
    roll_rows,
    tracing,
)
from seqrec.models.neural_config import NeuralConfig, check_choice, check_positive, check_range
from seqrec.models.torch_recommender import TorchRecommender


@dataclass(frozen=True)
class SASRecConfig(NeuralConfig):
    """SASRec hyperparameters (training defaults: ``train_defaults``)."""

    dim: int = 64
    """Embedding / hidden size d."""
    n_blocks: int = 2
    """Number of self-attention blocks."""
    n_heads: int = 1
    """Attention heads (d must be divisible by it)."""
    dropout: float = 0.2
    """Dropout on embeddings, FFN and residual branches."""
    attn_dropout: float = 0.0
    """Dropout on attention weights (the TF reference uses ``dropout``; costly on CPU)."""
    layout: str = "reference"
    """'reference' (authors' TensorFlow code, with sqrt(d) scaling), 'pre_ln' (guide) or
    'post_ln' (the BERT / FMLP-Rec line's block: LN after each residual, GELU FFN)."""
    train_defaults = {
        "lr": 3e-3,  # the paper's 1e-3 validated lower (docs/reproduce/defaults.md)
        "patience": 30,
        "train_windows": "sliding",  # every transition once per epoch; validated above 'last'
        "batch_size": 0,  # sized per dataset: about batch_targets targets per step ...
        "min_epoch_steps": 100,  # ... grown up to auto_batch_max while an epoch keeps 100 steps
        "label_smoothing": 0.1,  # validated above the one-hot target (0 = the paper's loss)
    }
    ffn_dim: int = 0
    """FFN inner size (0 = d, as in the paper)."""
    attn_out_proj: bool = False
    """Project the attention output with a D x D linear layer (``nn.MultiheadAttention``, so the
    PyTorch port and the Dross code have it; the paper and its TF code do not)."""
    init: str = "xavier"
    """'xavier' (Xavier-normal matrices, the PyTorch port of the reference) or 'normal'
    (N(0, 0.02) matrices and zero biases, as RecBole and the Dross SASRec+ code)."""
    positions: str = "from_end"
    """'from_end' (the paper's left-padded absolute positions: the last item always has the
    same one) or 'from_start' (counted from the oldest item of the window, as right-padded
    implementations such as the Dross code)."""
    l2_norm: bool = False
    """L2-normalise the encoder output and the item table (the HSTU paper's sampled-softmax
    SASRec baseline); scores become cosine similarities."""
    temperature: float = 1.0
    """Logits are divided by this (0.05 in the HSTU paper's sampled-softmax configurations)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "dim", "n_blocks", "n_heads", "temperature")
        check_range(self, "dropout", 0.0, 0.99)
        check_range(self, "attn_dropout", 0.0, 0.99)
        check_choice(self, "layout", ("pre_ln", "reference", "post_ln"))
        check_choice(self, "init", ("xavier", "normal"))
        check_choice(self, "positions", ("from_end", "from_start"))
        if self.dim % self.n_heads:
            raise ConfigError(
                f"dim must be divisible by n_heads, got dim={self.dim}, n_heads={self.n_heads}"
            )
        if self.ffn_dim < 0:
            raise ConfigError(f"ffn_dim must be >= 0, got {self.ffn_dim}")


class CausalSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention without output projection (SASRec eq. 2)."""

    def __init__(self, dim: int, n_heads: int, dropout: float, out_proj: bool = False) -> None:
        super().__init__()
        self.n_heads, self.dropout = n_heads, dropout
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim) if out_proj else None

    def forward(
        self, query: torch.Tensor, keys: torch.Tensor, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """``query [B, Lq, D]``, ``keys [B, L, D]``, ``mask [B, Lq, L]`` -> ``[B, Lq, D]``.

        ``mask=None``: no PAD key in the batch, plain causal attention; the queries are then
        every position (``Lq = L``) or the last one (``Lq = 1``, which sees every key)."""
        b, lq, dim = query.shape
        h = self.n_heads
        q = self.q(query).view(b, lq, h, dim // h).transpose(1, 2)  # [B, H, Lq, D/H]
        k, v = self.kv(keys).view(b, keys.shape[1], 2, h, dim // h).permute(2, 0, 3, 1, 4)
        if mask is None and lq not in (1, keys.shape[1]):
            raise ValueError(f"without a mask the queries are all {keys.shape[1]} or the last")
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None if mask is None else mask[:, None],
            dropout_p=self.dropout if self.training else 0.0,
            # no [B, L, L] mask to build and read, and the kernel skips the blocks above the
            # diagonal
            is_causal=mask is None and lq > 1,
        )  # scale defaults to 1/sqrt(D/H)
        out = out.transpose(1, 2).reshape(b, lq, dim)
        return out if self.out is None else self.out(out)

    def forward_rows(
        self, query: torch.Tensor, keys: torch.Tensor, rows: torch.Tensor, shape, mask
    ) -> torch.Tensor:
        """``forward`` over all positions of a ``shape`` ``[B, L, D]`` batch with PAD, given
        its real positions ``rows`` only (``query``, ``keys`` ``[n, D]``); returns the outputs
        there ``[n, D]``. The projections run on those rows; the attention over the whole
        ``[B, L]`` layout with ``mask`` (PAD queries, keys and values are 0: PAD keys are
        masked out of every real query, and PAD queries' outputs are never read), so its
        dropout draws what ``forward``'s draws."""
        b, length, dim = shape
        h = self.n_heads
        q, kv = self.q(query), self.kv(keys)  # under autocast in its dtype
        q = q.new_zeros(b * length, dim).index_copy_(0, rows, q)
        kv = kv.new_zeros(b * length, 2 * dim).index_copy_(0, rows, kv)
        q = q.view(b, length, h, dim // h).transpose(1, 2)
        k, v = kv.view(b, length, 2, h, dim // h).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask[:, None], dropout_p=self.dropout if self.training else 0.0
        )
        out = out.transpose(1, 2).reshape(b * length, dim).index_select(0, rows)
        return out if self.out is None else self.out(out)


class SASRecBlock(nn.Module):
    def __init__(self, cfg: SASRecConfig) -> None:
        super().__init__()
        self.layout = cfg.layout
        eps = 1e-12 if cfg.layout == "post_ln" else 1e-5  # the BERT / FMLP-Rec line's eps
        self.attn_norm = nn.LayerNorm(cfg.dim, eps=eps)
        self.ffn_norm = nn.LayerNorm(cfg.dim, eps=eps)
        self.attn = CausalSelfAttention(cfg.dim, cfg.n_heads, cfg.attn_dropout, cfg.attn_out_proj)
        if cfg.layout == "post_ln":  # GELU, dropout on the output only (applied below)
            self.ffn = PointWiseFFN(cfg.dim, cfg.ffn_dim or cfg.dim, 0.0, "gelu")
        else:
            self.ffn = PointWiseFFN(cfg.dim, cfg.ffn_dim or cfg.dim, cfg.dropout)
        self.dropout = Dropout(cfg.dropout)

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None,
        valid: torch.Tensor,
        last_only: bool = False,
    ) -> torch.Tensor:
        """``[B, L, D]`` -> ``[B, L, D]`` (``[B, 1, D]`` for the last position only); ``mask``
        None: no PAD in the batch (see :class:`CausalSelfAttention`)."""
        q_slice = slice(-1, None) if last_only else slice(None)
        mask = None if mask is None else mask[:, q_slice]
        valid = valid[:, q_slice]
        if self.layout == "pre_ln":
            z = self.attn_norm(x)
            x = x[:, q_slice] + self.dropout(self.attn(z[:, q_slice], z, mask))
            x = x + self.ffn(self.ffn_norm(x))
        elif self.layout == "post_ln":
            x = self.attn_norm(x[:, q_slice] + self.dropout(self.attn(x[:, q_slice], x, mask)))
            x = self.ffn_norm(x + self.dropout(self.ffn(x)))
        else:  # reference: Q = LN(x), K = V = x; residual on the normalized query
            q = self.attn_norm(x)[:, q_slice]
            x = q + self.dropout(self.attn(q, x, mask))
            x = self.ffn_norm(x)
            x = x + self.ffn(x)
        return x * valid[..., None]

    def forward_rows(self, x: torch.Tensor, rows: torch.Tensor, shape, mask) -> torch.Tensor:
        """``forward`` at the real positions ``rows`` only: ``x`` ``[n, D]`` the block's input
        there, the same outputs there (``[n, D]``) and the same dropout draws
        (:func:`~seqrec.models.layers.dropout_rows`), in every layout."""

        def drop(z: torch.Tensor) -> torch.Tensor:
            return dropout_rows(self.dropout, z, shape, rows)

        if self.layout == "pre_ln":
            z = self.attn_norm(x)
            x = x + drop(self.attn.forward_rows(z, z, rows, shape, mask))
            return x + self.ffn.forward_rows(self.ffn_norm(x), rows, shape[:2])
        if self.layout == "post_ln":
            x = self.attn_norm(x + drop(self.attn.forward_rows(x, x, rows, shape, mask)))
            return self.ffn_norm(x + drop(self.ffn.forward_rows(x, rows, shape[:2])))
        q = self.attn_norm(x)  # reference
        x = q + drop(self.attn.forward_rows(q, x, rows, shape, mask))
        x = self.ffn_norm(x)
        return x + self.ffn.forward_rows(x, rows, shape[:2])


class SASRecEncoder(SequenceEncoder):
    """``[B, L]`` left-padded items -> ``[B, L, D]`` hidden states (PAD positions are 0)."""

    def __init__(self, config: SASRecConfig, n_items: int) -> None:
        super().__init__()
        self.config, self.n_items = config, n_items
        d = config.dim
        self.item_emb = nn.Embedding(n_items + 1, d, padding_idx=0)
        self.pos_emb = nn.Embedding(config.max_len, d)
        self.emb_dropout = Dropout(config.dropout)
        self.blocks = nn.ModuleList(SASRecBlock(config) for _ in range(config.n_blocks))
        post_ln = config.layout == "post_ln"
        # post_ln normalises the embeddings instead of the output (other layouts keep their
        # state dicts)
        self.emb_norm = nn.LayerNorm(d, eps=1e-12) if post_ln else None
        self.final_norm = nn.Identity() if post_ln else nn.LayerNorm(d)
        self.scale = math.sqrt(d) if config.layout == "reference" else 1.0
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.config.init == "normal":  # N(0, 0.02) weights, zero biases (RecBole, Dross)
            for name, p in self.named_parameters():
                if "norm" in name:
                    continue  # LayerNorms keep weight 1, bias 0
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                else:
                    nn.init.zeros_(p)
        else:
            for p in self.parameters():
                if p.dim() >= 2:
                    nn.init.xavier_normal_(p)  # as the reference implementation
        with torch.no_grad():
            self.item_emb.weight[0].zero_()

    def _embed(self, items: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """Input of the first block ``[B, L, D]`` (PAD positions 0)."""
        length = items.shape[1]
        if length > self.config.max_len:
            raise ConfigError(f"input length {length} exceeds max_len {self.config.max_len}")
        if self.config.positions == "from_start":
            # number of earlier real items in the window; independent of left padding
            pos = self.pos_emb((valid.cumsum(1) - 1).clamp_(min=0))  # [B, L, D]
        else:
            positions = torch.arange(
                self.config.max_len - length, self.config.max_len, device=items.device
            )
            pos = self.pos_emb(positions)[None]
        x = self.item_emb(items) * self.scale + pos
        if self.emb_norm is not None:
            x = self.emb_norm(x)
        return self.emb_dropout(x) * valid[..., None]

    def _output(self, x: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        x = self.final_norm(x) * valid[..., None]
        return F.normalize(x, dim=-1) if self.config.l2_norm else x

    def forward(self, batch: SequenceBatch, last_only: bool = False) -> torch.Tensor:
        items = batch.items
        valid = batch.mask if batch.mask is not None else items.ne(0)
        x = self._embed(items, valid)
        # a batch without PAD (full windows; evaluation batches of the longest histories) needs
        # no [B, L, L] mask: plain causal attention is the same
        mask = None if not tracing() and bool(valid.all()) else causal_padding_mask(valid)
        if mask is not None and not last_only and self._rows_path(x):
            # training on CPU: the position-wise work (projections, norms, FFN) at the real
            # positions only; a left-padded batch of short histories is mostly PAD
            rows = valid.reshape(-1).nonzero().squeeze(1)
            xr = x.reshape(-1, x.shape[-1]).index_select(0, rows)
            for block in self.blocks:
                xr = block.forward_rows(xr, rows, x.shape, mask)
            xr = self.final_norm(xr)
            xr = F.normalize(xr, dim=-1) if self.config.l2_norm else xr
            return xr.new_zeros(x.shape).view(-1, x.shape[-1]).index_copy(0, rows, xr).view(x.shape)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, valid, last_only and i == len(self.blocks) - 1)
        if last_only:
            valid = valid[:, -1:]
        return self._output(x, valid)  # [B, L, D] ([B, 1, D] if last_only)

    def _rows_path(self, x: torch.Tensor) -> bool:
        """Whether ``forward`` runs the blocks at the real positions only: in training, on CPU,
        with every dropout a ``layers.Dropout`` (whose random stream ``dropout_rows`` keeps),
        outside traces."""
        if not self.training or x.device.type != "cpu" or tracing():
            return False
        return all(
            type(m) is Dropout and not m.inplace
            for m in self.blocks.modules()
            if isinstance(m, nn.Dropout)
        )

    def encode_last(self, batch: SequenceBatch) -> torch.Tensor:
        """Hidden state of the last position ``[B, D]``; the last block computes only it.

        Out of training, a left-padded batch with PAD runs its blocks but the last on the rows
        turned right-padded (each row's items first): a real query then sees only real keys
        under plain causal attention, so no ``[B, L, L]`` mask is built or read and the kernel
        skips the blocks above the diagonal; the rows are turned back for the last block, whose
        one query per row needs only a ``[B, 1, L]`` mask. The same values up to the order of
        float additions (``forward`` is the reference)."""
        items = batch.items
        if tracing():  # exports trace one path for every input: the masked forward
            return self.forward(batch, last_only=True)[:, -1]
        valid = batch.mask if batch.mask is not None else items.ne(0)
        b, width = items.shape
        n = valid.sum(1)
        shift = width - n  # PAD columns at the left of each row
        cols = torch.arange(width, device=items.device)
        left_padded = bool((valid == (cols[None] >= shift[:, None])).all())
        if self.training or bool(valid.all()) or not left_padded or len(self.blocks) < 2:
            return self.forward(batch, last_only=True)[:, -1]
        x = roll_rows(self._embed(items, valid), shift)
        right_valid = cols[None] < n[:, None]
        for block in self.blocks[:-1]:
            x = block(x, None, right_valid)
        x = roll_rows(x, -shift)
        # the last query's row of causal_padding_mask: the real keys, and itself
        last_mask = (valid | (cols == width - 1)[None])[:, None, :]
        x = self.blocks[-1](x, last_mask, valid, True)
        return self._output(x, valid[:, -1:])[:, -1]

    def output_embeddings(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        w = self.item_emb.weight
        if self.config.l2_norm:
            w = F.normalize(w, dim=-1)
        if self.config.temperature != 1.0:
            w = w / self.config.temperature
        return w, None


class SASRec(TorchRecommender):
    """SASRec recommender (see the module docstring for the paper and deviations)."""

    name = "sasrec"
    config_cls = SASRecConfig
    encoder_cls = SASRecEncoder

    def incremental(self, slide: str = "exact", stride: int = 0):
        """The live-session encoder: a key/value cache per block (:mod:`seqrec.models.kv_cache`);
        ``None`` (re-encode) with ``positions="from_end"``, where every new event moves every
        position.

        ``slide`` / ``stride``: what happens beyond ``max_len`` (see there)."""
        from seqrec.models.kv_cache import SASRecCache, cached_encoder

        if self.config.positions != "from_start":
            return None
        return cached_encoder(self, SASRecCache, slide=slide, stride=stride)
