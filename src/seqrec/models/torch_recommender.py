"""``TorchRecommender``: any ``SequenceEncoder`` becomes a ``Recommender``.

A neural model is three small pieces::

    @dataclass(frozen=True)
    class MyConfig(NeuralConfig):       # model hyperparameters only (max_len from the base)
        dim: int = 64
        \"\"\"Hidden size.\"\"\"

        def __post_init__(self):
            super().__post_init__()
            check_positive(self, "dim")

    class MyEncoder(SequenceEncoder):   # MyEncoder(config, n_items); forward(batch) -> [B, L, D]
        ...

    class My(TorchRecommender):
        name = "my"
        config_cls = MyConfig
        encoder_cls = MyEncoder

It is built from three configs: ``My(MyConfig(dim=32), TrainConfig(epochs=5), RunConfig())``
(training and run default to ``TrainConfig.for_model(MyConfig)`` and ``RunConfig()``), or from
the flat settings of the three (``seqrec.models.neural_config.settings``), which it splits.

``fit(train, valid)`` trains with :class:`seqrec.training.trainer.Trainer` (next-item targets at
every position via ``training_batch``, the loss chosen by ``train_config.loss``), validates on
``valid`` with full ranking and the history filter, early-stops on ``train_config.val_metric`` and
keeps the best weights. ``_score`` encodes ``inference_batch(histories, max_len)`` and scores the
last position. Models with another training objective (e.g. masked items) override
``make_batch`` / ``compute_loss``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from seqrec.data.batching import SequenceBatch, inference_batch, training_batch
from seqrec.data.sequences import Sequences, Targets
from seqrec.errors import ConfigError, DataError
from seqrec.models.base import Recommender
from seqrec.models.encoder import SequenceEncoder
from seqrec.models.neural_config import NeuralConfig, RunConfig, TrainConfig, flat_settings
from seqrec.training.checkpoint import claim_run_dir
from seqrec.training.losses import next_item_loss
from seqrec.training.negatives import negatives_for_loss
from seqrec.training.rows import (  # noqa: F401 - the batch sizing is re-exported for scripts
    context_only,
    resolved_batch,
    steps_per_epoch,
    target_positions,
    targets_per_row,
    training_rows,
)

log = logging.getLogger(__name__)


def _cpu_has_native_bf16() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN: assume not
        return False


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"device {name!r} requested but CUDA is not available: {_no_cuda_reason()}"
        )
    index = name[5:] if name.startswith("cuda:") else ""
    if index.isdigit() and int(index) >= torch.cuda.device_count():
        raise ConfigError(
            f"device {name!r} requested but this machine shows "
            f"{torch.cuda.device_count()} GPU(s) (cuda:0 .. "
            f"cuda:{torch.cuda.device_count() - 1})"
        )
    return torch.device(name)


def _no_cuda_reason() -> str:
    """Why ``torch.cuda.is_available()`` is False, as far as PyTorch tells, and what to do."""
    if torch.version.cuda is None:
        return (
            f"this PyTorch ({torch.__version__}) is a CPU-only build; train with device='cpu' "
            "(or 'auto': the GPU where there is one), or on a GPU machine install the CUDA "
            "build (./scripts/bootstrap.sh picks it where nvidia-smi works)"
        )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    hidden = f" (CUDA_VISIBLE_DEVICES={visible!r} hides the GPUs)" if visible in ("", "-1") else ""
    return (
        f"PyTorch is built for CUDA {torch.version.cuda} but sees no GPU{hidden}; check the "
        "driver with nvidia-smi, `seqrec doctor` shows what PyTorch sees, or use device='cpu'"
    )


EVAL_TOKENS = 1 << 14
"""Scoring batches hold at most this many ``rows x width`` positions (beyond their first row):
histories sorted by length are cut into batches of similar length, so a chunk of mostly short
histories is not padded to its longest one."""


def length_batches(sorted_lengths: np.ndarray, max_rows: int, max_tokens: int) -> list[slice]:
    """Consecutive slices of ascending ``sorted_lengths``, each of at most ``max_rows`` rows
    and, beyond its first row, at most ``max_tokens`` = rows x its longest length."""
    out, start, n = [], 0, len(sorted_lengths)
    while start < n:
        end = start + 1
        while (
            end < n
            and end - start < max_rows
            and (end - start + 1) * max(1, int(sorted_lengths[end])) <= max_tokens
        ):
            end += 1
        out.append(slice(start, end))
        start = end
    return out


class _Threads:
    """Temporarily set torch's intra-op thread count (0 = leave it)."""

    def __init__(self, n: int) -> None:
        self.n, self.old = n, None

    def __enter__(self):
        if self.n:
            self.old = torch.get_num_threads()
            torch.set_num_threads(self.n)

    def __exit__(self, *exc):
        if self.old is not None:
            torch.set_num_threads(self.old)


class TorchRecommender(Recommender):
    """``Recommender`` over a torch ``SequenceEncoder`` trained with the shared trainer."""

    name: ClassVar[str] = "torch"
    config_cls: ClassVar[type] = NeuralConfig
    encoder_cls: ClassVar[type[SequenceEncoder]]
    causal: ClassVar[bool] = True
    """Output at position t depends only on inputs <= t. Bidirectional models (BERT4Rec,
    FMLP-Rec) set False; the conformance suite then skips its causal-leakage check."""

    def __init__(self, config: Any = None, train: Any = None, run: Any = None) -> None:
        if config is None:
            config = self.config_cls()
        parts = getattr(config, "parts", None)  # flat settings: the three configs in one
        if parts is not None:
            if train is not None or run is not None:
                raise ConfigError(
                    f"{type(self).__name__}: flat settings already hold the training and run "
                    "settings; pass either them or a model config with train / run"
                )
            config, train, run = parts
        if not isinstance(config, NeuralConfig):
            raise ConfigError(
                f"{type(self).__name__} needs a NeuralConfig subclass, got {type(config).__name__}"
            )
        train = TrainConfig.for_model(type(config)) if train is None else train
        run = RunConfig() if run is None else run
        if not isinstance(train, TrainConfig) or not isinstance(run, RunConfig):
            raise ConfigError(
                f"{type(self).__name__} needs a TrainConfig and a RunConfig, got "
                f"{type(train).__name__} and {type(run).__name__}"
            )
        config.check_training(train, run)
        super().__init__(config)
        self.train_config: TrainConfig = train
        self.run_config: RunConfig = run
        self.encoder: SequenceEncoder | None = None
        self.training_log = None
        self.device = resolve_device(run.device)
        self._sampler = None
        self._row_source: np.ndarray | None = None  # window -> user row (sliding windows)
        self._net: torch.nn.Module | None = None  # what training runs forward (DDP wrapper)
        self.train_batch_size: int | None = None  # the global batch the last fit used
        self._attribute_spec = None  # item_attributes: the attribute table (item_attributes.py)
        self._growing_vocab = None

    @property
    def settings(self) -> Any:
        """The model, training and run configs as one flat settings object (stored in
        ``model.json`` and checkpoints, and the run identity's ``model_config``)."""
        return flat_settings(self.config, self.train_config, self.run_config)

    @property
    def epochs_trained(self) -> int | None:
        """Epochs completed by the last ``fit`` (None before fitting)."""
        return None if self.training_log is None else self.training_log.epochs_run

    # --- hooks models may override -------------------------------------------------------
    def build_encoder(self, n_items: int) -> SequenceEncoder:
        return self.encoder_cls(self.config, n_items)

    def _new_encoder(self, n_items: int) -> SequenceEncoder:
        """:meth:`build_encoder`, its item table given attributes with
        ``item_attributes = 'ids+attributes'`` (:mod:`seqrec.models.item_attributes`)."""
        encoder = self.build_encoder(n_items)
        if getattr(self.config, "item_attributes", "none") != "none":
            from seqrec.models.item_attributes import attach

            encoder = attach(encoder, self._attribute_spec, self.config.id_dropout, self.name)
        return encoder.to(self.device)

    def make_batch(self, train: Sequences, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """Inputs/targets for ``rows`` plus the negatives the configured loss needs."""
        max_len = self.config.max_len
        batch = context_only(training_batch(train, rows, max_len), self.train_config, max_len)
        return {"batch": batch, **self.negatives(rows, rng)}

    def negatives(self, rows: np.ndarray, rng: np.random.Generator) -> dict:
        """The negatives the configured loss needs for training ``rows`` (none for 'ce'):
        ``[B, max_len]`` (bce), ``[B, n_negatives]`` (gbce) or ``[n_negatives]`` shared."""
        # negatives avoid the whole user's history, not only the window's
        users = rows if self._row_source is None else self._row_source[rows]
        return negatives_for_loss(self._sampler, self.train_config, users, rng, self.config.max_len)

    def compute_loss(self, data: dict) -> torch.Tensor:
        batch: SequenceBatch = data["batch"].to(self.device)
        return self.loss_at(self.train_forward(batch), batch.targets, data)

    def train_forward(self, batch: SequenceBatch, **kwargs: Any) -> torch.Tensor:
        """The encoder's forward in a training step: through DistributedDataParallel under
        torchrun. A ``compute_loss`` override must call this, not ``self.encoder``: a forward
        that bypasses DDP leaves the ranks' gradients unsynchronized (the trainer checks).
        Called once per step, it also draws the step's ID dropout of an attribute item table."""
        new_step = getattr(getattr(self.encoder, "item_emb", None), "new_step", None)
        if new_step is not None:
            new_step()
        return (self.encoder if self._net is None else self._net)(batch, **kwargs)

    def loss_at(self, hidden: torch.Tensor, targets: torch.Tensor, data: dict) -> torch.Tensor:
        """The configured loss of hidden states ``[B, L, D]`` against ``targets [B, L]``
        (0 = no target) with the negatives in ``data``."""
        weight, bias = self.encoder.output_embeddings()
        return next_item_loss(
            self.train_config,
            hidden,
            targets,
            data,
            weight,
            bias,
            self.device,
            self.run_config.ce_chunk,
        )

    def training_rows(self, train: Sequences) -> tuple[Sequences, np.ndarray | None, np.ndarray]:
        """What one epoch iterates over (see the module function :func:`training_rows`)."""
        return training_rows(train, self.train_config, self.config.max_len)

    def scoring_batch(
        self, histories: Sequences, width: int, query_times: np.ndarray | None
    ) -> SequenceBatch:
        """Inputs whose last position scores the next item (BERT4Rec appends its mask)."""
        return inference_batch(histories, width, query_times)

    # --- Recommender ---------------------------------------------------------------------
    def fit(
        self,
        train: Sequences,
        valid: Targets | None = None,
        *,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 0,
        log_path: str | Path | None = None,
        progress: bool = True,
        tensorboard_dir: str | Path | None = None,
        resume: bool = True,
        deadline: float | None = None,
        on_epoch: Any = None,
    ) -> TorchRecommender:
        """Train on ``train``; ``valid`` drives early stopping / model selection.

        With ``checkpoint_dir`` the run checkpoints there and, if ``resume``, continues from
        an existing ``last.pt`` (a run that already finished returns its best weights).
        ``deadline`` (``time.time()`` value) checkpoints and stops an unfinished run there
        (``training_log.stopped == "deadline"``), as a stop request does (``"interrupted"``,
        :mod:`seqrec.stop`); fitting again resumes it.
        ``on_epoch`` receives one record per completed epoch (see ``Trainer``).
        """
        self._remember_catalogue(train)
        self._train(
            train,
            valid,
            self.train_config,
            build=True,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            log_path=log_path,
            progress=progress,
            tensorboard_dir=tensorboard_dir,
            resume=resume,
            deadline=deadline,
            on_epoch=on_epoch,
        )
        return self

    def fit_partial(
        self,
        train: Sequences,
        valid: Targets | None = None,
        *,
        epochs: int = 5,
        lr: float | None = None,
        progress: bool = True,
        deadline: float | None = None,
        on_epoch: Any = None,
        n_users: int | None = None,
    ) -> TorchRecommender:
        """Continue training the fitted model on ``train`` (new interactions, with whatever old
        ones are replayed: ``seqrec.update``), whose vocabulary extends the model's.

        The model first grows (:meth:`grow`: new item rows start at the mean of the old rows,
        new user rows likewise; ``n_users`` defaults to the users ``train`` names), then trains
        from its current weights for ``epochs`` epochs at ``lr`` (default: the configured
        one) with a fresh AdamW: an artifact keeps no optimizer state, and moments estimated
        on the old catalogue have no entries for the new rows. With ``valid`` the best
        validated weights are kept (early stopping on the configured patience). Nothing is
        checkpointed; a stop request (SIGINT / SIGTERM) or ``deadline`` ends training early
        with ``training_log.stopped`` saying so (the caller decides whether to keep it). An
        item index (``seqrec index``) is rebuilt over the new weights with its parameters.
        """
        from dataclasses import replace

        self._check_fitted()
        if self.encoder is None:
            from seqrec.errors import NotFittedError

            raise NotFittedError(f"{self.name} has no encoder: call fit() or load() first")
        if epochs < 1:
            raise ConfigError(f"epochs must be >= 1, got {epochs}")
        if train.vocab is None:
            raise DataError("fit_partial needs Sequences with the (extended) item vocabulary")
        if n_users is None and train.users is not None and len(train.users):
            n_users = int(train.users.max()) + 1
        self.grow(train.vocab, n_users)
        emb = getattr(self.encoder, "item_emb", None)
        if hasattr(emb, "known"):  # attribute items: ids the new data shows train their rows
            with torch.no_grad():
                seen = torch.from_numpy(train.item_counts()[: len(emb.known)] > 0)
                emb.known |= seen.to(emb.known.device)
                emb.known[0] = False
        cfg = replace(self.train_config, epochs=int(epochs))
        if lr is not None:
            cfg = replace(cfg, lr=float(lr))
        self._train(
            train,
            valid,
            cfg,
            build=False,
            progress=progress,
            resume=False,
            deadline=deadline,
            on_epoch=on_epoch,
        )
        self._rebuild_index()  # an item index of the old weights would answer for them
        return self

    def _train(
        self,
        train: Sequences,
        valid: Targets | None,
        cfg: TrainConfig,
        build: bool,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = 0,
        log_path: str | Path | None = None,
        progress: bool = True,
        tensorboard_dir: str | Path | None = None,
        resume: bool = True,
        deadline: float | None = None,
        on_epoch: Any = None,
    ) -> None:
        """The training loop of :meth:`fit` (``build``: a new encoder) and :meth:`fit_partial`
        (the current encoder, already grown)."""
        from seqrec.training import distributed
        from seqrec.training.negatives import NegativeSampler
        from seqrec.training.trainer import Trainer

        run = self.run_config
        windows, self._row_source, rows = self.training_rows(train)
        train_cfg = resolved_batch(cfg, windows, rows, self.config.max_len)
        self.train_batch_size = train_cfg.batch_size
        self.device = distributed.rank_device(self.device)
        ctx = distributed.init_from_env(self.device)  # None unless launched by torchrun
        with _Threads(run.num_threads):
            torch.manual_seed(cfg.seed)
            if build:
                if getattr(self.config, "item_attributes", "none") != "none":
                    from seqrec.models.item_attributes import build_spec

                    attrs = None if train.vocab is None else train.vocab.attributes
                    vectors = None if train.vocab is None else train.vocab.vectors
                    counts = train.item_counts()
                    self._attribute_spec = build_spec(attrs, train.n_items, counts, vectors)
                self.encoder = self._new_encoder(train.n_items)
            self._net = distributed.wrap(self.encoder, ctx)
            if cfg.loss in ("bce", "gbce", "sampled_softmax"):
                pop = train.item_counts() if (cfg.loss == "sampled_softmax" and cfg.logq) else None
                self._sampler = NegativeSampler(train, pop)
            if checkpoint_dir is not None and (ctx is None or ctx.is_main):
                claim_run_dir(Path(checkpoint_dir), self.settings, type(self).name, train.n_items)
            trainer = Trainer(
                self.encoder,
                train_cfg,
                rows,
                make_batch=lambda r, rng: self.make_batch(windows, r, rng),
                compute_loss=self._with_precision(self.compute_loss),
                validate=None if valid is None else (lambda: self.validation_metrics(valid)),
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=checkpoint_every,
                log_path=log_path,
                progress=progress,
                tensorboard_dir=tensorboard_dir,
                deadline=deadline,
                on_epoch=on_epoch,
                dist=ctx,
                batch_weight=target_positions,
                run=run,
            )
            self.training_log = trainer.fit(resume=resume)
        self.encoder.eval()
        self._sampler, self._net = None, None

    # --- catalogue growth ------------------------------------------------------------------
    def grow(self, vocab: Any, n_users: int | None = None) -> int:
        self._growing_vocab = vocab  # _grow reads the new items' attributes from it
        try:
            return super().grow(vocab, n_users)
        finally:
            self._growing_vocab = None

    grow.__doc__ = Recommender.grow.__doc__

    @property
    def item_vector_width(self) -> int | None:
        """Length of the numeric item vectors this model reads (None: it reads none)."""
        spec = self._attribute_spec
        return None if spec is None or spec.vectors is None else int(spec.vectors.shape[1])

    def trained_category_ids(self) -> dict[str, int]:
        """Category name -> the attribute id this model trained with (empty unless it reads
        attributes, ``item_attributes = 'ids+attributes'``): what an update gives the new
        items of another item file, whose own numbering of the names differs."""
        if self._attribute_spec is None or self.vocab is None:
            return {}
        from seqrec.models.item_attributes import category_ids

        return category_ids(self._attribute_spec, self.vocab.categories)

    def _grow(self, n_items: int, n_users: int | None) -> None:
        """A new encoder for ``n_items`` items holding the old weights: every tensor of the
        same shape is copied; a tensor that gains rows (item tables and output biases, user
        tables) keeps its old rows and its new rows start at the mean of the old ones (the
        PAD row 0 of an item table left out of the mean); anything else a model handles in
        :meth:`_grow_rows` or the growth is refused naming the tensor."""
        old_n = self.n_items
        old = {k: v.detach().clone() for k, v in self.encoder.state_dict().items()}
        attribute_keys: set[str] = set()
        if self._attribute_spec is not None:  # new items' attribute tokens; not known yet
            from seqrec.models.item_attributes import grown_spec

            vocab = self._growing_vocab
            attrs = None if vocab is None else vocab.attributes
            vectors = None if vocab is None else vocab.vectors
            self._attribute_spec = grown_spec(self._attribute_spec, attrs, n_items, vectors)
            attribute_keys = {f"item_emb.{b}" for b in ("tokens", "known", "vectors")}
        fresh = self._new_encoder(n_items)
        user_keys = {
            f"{name}.weight"
            for name, module in fresh.named_modules()
            if getattr(module, "grows_with_users", False)
        }
        state = {}
        for key, target in fresh.state_dict().items():
            was = old[key]
            if key in attribute_keys:
                state[key] = target  # built from the grown attribute table
                continue
            grown = self._grow_rows(key, was, target, old_n, n_items)
            if grown is None:
                if was.shape == target.shape:
                    grown = was
                elif (
                    was.shape[1:] == target.shape[1:]
                    and target.shape[0] > was.shape[0]
                    and was.is_floating_point()
                ):
                    first = 1 if key not in user_keys and was.shape[0] == old_n + 1 else 0
                    grown = append_mean_rows(was, target.shape[0] - was.shape[0], first)
                else:
                    raise ConfigError(
                        f"{self.name} cannot grow its catalogue: {key} goes from "
                        f"{tuple(was.shape)} to {tuple(target.shape)}, a change it does not "
                        "know how to make (override _grow_rows)"
                    )
            state[key] = grown
        fresh.load_state_dict(state)
        fresh.eval()
        self.encoder = fresh

    def _grow_rows(
        self, key: str, old: torch.Tensor, target: torch.Tensor, old_n: int, n_items: int
    ) -> torch.Tensor | None:
        """The grown value of state entry ``key`` (``target``: the new encoder's freshly
        initialised one), or None for the generic rule of :meth:`_grow`."""
        return None

    def _with_precision(self, compute_loss: Any) -> Any:
        """``compute_loss`` under bfloat16 autocast when ``precision = 'bf16'`` (the
        backward, which the trainer runs outside it, follows the forward's dtypes)."""
        if self.train_config.precision != "bf16":
            return compute_loss
        if self.device.type == "cpu" and not _cpu_has_native_bf16():
            log.warning(
                "precision='bf16' on a CPU without native bfloat16 (AVX512-BF16 / AMX): "
                "training will be slower than with 'fp32'"
            )

        def autocast_loss(data: dict) -> torch.Tensor:
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                return compute_loss(data)

        return autocast_loss

    def validation_metrics(self, valid: Targets) -> dict[str, float]:
        """Full-ranking metrics on ``valid`` with the history filter (the evaluation package's
        metrics, as every reported number), at k = 10 and at the k of ``val_metric``
        (``NDCG@20``: also at 20)."""
        from seqrec.evaluation import evaluate

        ks = {10}
        name = self.train_config.val_metric
        if "@" in name and name.rsplit("@", 1)[1].isdigit():
            ks.add(int(name.rsplit("@", 1)[1]))
        return dict(evaluate(self, valid, ks=tuple(sorted(ks)), seen_filter="history").metrics)

    def _score(self, histories: Sequences, query_times: np.ndarray | None) -> np.ndarray:
        out = np.empty((len(histories), self.n_items + 1), dtype=np.float32)
        for idx, logits in self._score_chunks(histories, query_times):
            out[idx] = (
                logits.numpy() if logits.device.type == "cpu" else logits.float().cpu().numpy()
            )
        return out

    index_unsupported = None  # every encoder scores by an inner product with its output table

    def item_vectors(self) -> np.ndarray:
        """The output embeddings ``[n_items + 1, D]``, the bias (if any) as one more column."""
        if self.encoder is None:
            from seqrec.errors import NotFittedError

            raise NotFittedError(f"{self.name} has no encoder: call fit() or load() first")
        with torch.inference_mode():
            weight, bias = self.encoder.output_embeddings()
            table = weight if bias is None else torch.cat([weight, bias[:, None]], 1)
            return table.float().cpu().numpy().astype(np.float32, copy=True)

    def query_vectors(
        self, histories: Sequences, query_times: np.ndarray | None = None
    ) -> np.ndarray:
        """The last hidden state ``[B, D]`` of each history (a 1 appended for the bias)."""
        self._check_histories(histories)
        with torch.inference_mode():
            _, bias = self.encoder.output_embeddings()
        out = None
        for idx, hidden in self._hidden_chunks(histories, query_times):
            if out is None:
                out = np.ones((len(histories), hidden.shape[1] + (bias is not None)), np.float32)
            out[idx, : hidden.shape[1]] = hidden.float().cpu().numpy()
        return out if out is not None else np.zeros((0, 0), np.float32)

    def _hidden_chunks(self, histories: Sequences, query_times: np.ndarray | None):
        """Yield ``(rows, hidden [len(rows), D])``: the state that scores the next item."""
        if self.encoder is None:
            from seqrec.errors import NotFittedError

            raise NotFittedError(f"{self.name} has no encoder: call fit() or load() first")
        cfg, run = self.config, self.run_config
        self.encoder.eval()
        # Chunks of similar length, each cut to its longest history: short histories are not
        # run through max_len positions of padding (encoders are left-padding invariant,
        # which the conformance suite checks). A chunk holds at most eval_batch_size rows and
        # EVAL_TOKENS positions, so histories of mixed lengths are split by length too.
        lengths = np.minimum(histories.lengths, cfg.max_len)
        order = np.argsort(lengths, kind="stable")
        # an encoder that pads every batch to max_len runs max_len positions a row
        cost = (
            np.full(len(lengths), cfg.max_len)
            if getattr(self.encoder, "pads_to_max_len", False)
            else lengths[order]
        )
        with _Threads(run.num_threads), torch.inference_mode():
            for rows in length_batches(cost, run.eval_batch_size, EVAL_TOKENS):
                idx = order[rows]
                qt = None if query_times is None else np.asarray(query_times)[idx]
                width = max(1, int(lengths[idx].max()))
                batch = self.scoring_batch(histories.select(idx), width, qt).to(self.device)
                # [B, D] last (most recent) position; encoders may compute only that one
                last = getattr(self.encoder, "encode_last", None)
                yield idx, last(batch) if last is not None else self.encoder(batch)[:, -1]

    def _score_chunks(self, histories: Sequences, query_times: np.ndarray | None):
        """Yield ``(rows, logits [len(rows), I + 1])`` chunk by chunk; on CPU the logits live
        in one reused buffer, valid until the next chunk (consume or copy them first)."""
        buf = None
        run = self.run_config
        with _Threads(run.num_threads), torch.inference_mode():
            for idx, hidden in self._hidden_chunks(histories, query_times):
                if self.device.type == "cpu" and hidden.dtype == torch.float32:
                    if buf is None:  # one reused block: fresh ones cost page faults
                        buf = hidden.new_empty(
                            min(run.eval_batch_size, len(histories)), self.n_items + 1
                        )
                    yield idx, self.encoder.score(hidden, out=buf[: len(idx)])
                else:
                    yield idx, self.encoder.score(hidden)

    def top_k(
        self,
        histories: Sequences,
        k: int,
        seen_filter: str = "history",
        window: int | None = None,
        query_times: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`Recommender.top_k` without the ``[B, n_items + 1]`` NumPy block: each chunk's
        logits are filtered and cut to ``k`` in place (torch), so a million-item catalogue
        costs one reused ``eval_batch_size x items`` buffer and no copy of it."""
        from seqrec.evaluation.ranking import seen_positions

        self._check_fitted()
        if histories.n_items > self.n_items:
            raise DataError(
                f"histories use {histories.n_items} items, the model knows {self.n_items}"
            )
        if not (histories.lengths > 0).all():  # popularity fallback rows: the generic path
            return super().top_k(histories, k, seen_filter, window, query_times)
        k = min(int(k), self.n_items)
        ids = np.zeros((len(histories), k), dtype=np.int64)
        vals = np.full((len(histories), k), -np.inf, dtype=np.float32)
        with torch.inference_mode():
            for idx, logits in self._score_chunks(histories, query_times):
                logits[:, 0] = float("-inf")
                # as check_scores: NaN is never recommended (infinities stay as they are)
                logits.nan_to_num_(nan=float("-inf"), posinf=float("inf"), neginf=float("-inf"))
                rows, items = seen_positions(histories.select(idx), seen_filter, window)
                logits[torch.from_numpy(rows), torch.from_numpy(items)] = float("-inf")
                v, i = torch.topk(logits, k, dim=1, sorted=False)
                v, i = v.float().cpu().numpy(), i.cpu().numpy()
                order = np.lexsort((i, -v), axis=1)  # descending score, then ascending id
                v, i = np.take_along_axis(v, order, 1), np.take_along_axis(i, order, 1)
                i[~np.isfinite(v)] = 0
                ids[idx], vals[idx] = i, np.where(i > 0, v, -np.inf)
        return ids, vals

    def _state(self) -> dict[str, np.ndarray]:
        if self.encoder is None:
            raise DataError("nothing to save: the model has no encoder")
        return {k: v.detach().cpu().numpy() for k, v in self.encoder.state_dict().items()}

    def _load_state(self, state: dict[str, np.ndarray]) -> None:
        if getattr(self.config, "item_attributes", "none") != "none":
            from seqrec.models.item_attributes import spec_from_state

            self._attribute_spec = spec_from_state(state)
        self.encoder = self._new_encoder(self.n_items)
        self.encoder.load_state_dict({k: torch.from_numpy(np.asarray(v)) for k, v in state.items()})
        self.encoder.eval()


def append_mean_rows(table: torch.Tensor, added: int, first: int = 0) -> torch.Tensor:
    """``table`` with ``added`` rows appended, each the mean of rows ``first..`` (the old
    trained rows; ``first = 1`` leaves out an item table's PAD row)."""
    rows = table[first:] if len(table) > first else table
    mean = rows.mean(dim=0, keepdim=True)
    return torch.cat([table, mean.expand(added, *table.shape[1:]).clone()])


def _check_same_config(directory: Path, cfg: Any, name: str, n_items: int) -> None:
    """:func:`seqrec.training.checkpoint.claim_run_dir` (the name the tests and scripts use)."""
    flat = cfg if hasattr(cfg, "parts") else flat_settings(cfg)
    claim_run_dir(directory, flat, name, n_items)
