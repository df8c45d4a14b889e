"""The sections of a neural model's settings: its own config (a :class:`NeuralConfig`
subclass: model hyperparameters), :class:`TrainConfig` (section ``train``) and
:class:`RunConfig` (section ``run``); the flat form the three take together in experiment files,
stored artifacts and run identities (:func:`settings_class`, :func:`split_settings`); the recipe
of the baselines that took the measured defaults (:data:`SLIDING_RECIPE`) and the checks
configs validate with. Each field declares its role in a run (``seqrec.config_fields``): budget
and placement fields may change when a run resumes; the others make it another run."""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from seqrec.config_fields import BUDGET, PLACEMENT, field_info, setting
from seqrec.errors import ConfigError

LOSSES = ("bce", "ce", "sampled_softmax", "gbce")


def check_positive(config: Any, *names: str) -> None:
    """Raise ``ConfigError`` unless every named field is > 0."""
    for name in names:
        value = getattr(config, name)
        if not value > 0:
            raise ConfigError(f"{name} must be > 0, got {value!r}")


def check_range(config: Any, name: str, lo: float, hi: float) -> None:
    """Raise ``ConfigError`` unless ``lo <= field <= hi``."""
    value = getattr(config, name)
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be in [{lo}, {hi}], got {value!r}")


def check_choice(config: Any, name: str, choices: tuple[str, ...]) -> None:
    """Raise ``ConfigError`` unless the field is one of ``choices``."""
    value = getattr(config, name)
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _batch_given(config: dict[str, Any]) -> bool:
    """The automatic batch's fields cannot change training while ``batch_size`` is given."""
    return bool(config.get("batch_size", 0))


def _no_attributes(config: dict[str, Any]) -> bool:
    """``id_dropout`` acts only on an attribute item table."""
    return config.get("item_attributes", "none") == "none"


def _not_ce(config: dict[str, Any]) -> bool:
    """``label_smoothing`` acts only on the full cross-entropy."""
    return config.get("loss", "ce") != "ce"


def _no_growth(config: dict[str, Any]) -> bool:
    """``auto_batch_max`` acts only through ``min_epoch_steps`` on an automatic batch."""
    return _batch_given(config) or not config.get("min_epoch_steps", 0)


@dataclass(frozen=True)
class TrainConfig:
    """How a neural model is trained (section ``train``): objective, optimizer, batch, windows,
    epochs and patience. A model's own defaults are its config class's ``train_defaults``
    (:meth:`for_model`)."""

    loss: str = setting("ce", section="train")
    """'bce' (paper, 1 negative/position), 'ce' (full softmax), 'sampled_softmax' or 'gbce'."""
    n_negatives: int = setting(256, section="train")
    """Negatives per batch (sampled_softmax) or per sequence (gbce)."""
    gbce_t: float = setting(0.75, section="train")
    """gBCE calibration parameter t in [0, 1]."""
    logq: bool = setting(False, section="train")
    """sampled_softmax: draw negatives by popularity and apply the log-Q correction."""
    lr: float = setting(1e-3, section="train")
    """AdamW learning rate."""
    weight_decay: float = setting(0.0, section="train")
    """AdamW decoupled weight decay."""
    decay_biases_and_norms: bool = setting(True, section="train")
    """Decay biases and LayerNorm parameters too; False decays only the other parameters (the
    grouping of the BERT4Rec / LRURec code, ``SequenceEncoder.no_decay_names``)."""
    betas: tuple[float, float] = setting((0.9, 0.98), section="train")
    """AdamW betas (the SASRec paper uses beta2 = 0.98)."""
    batch_size: int = setting(128, section="train")
    """Sequences per optimizer step over all processes: the global batch (under torchrun each
    of N ranks takes a contiguous 1/N of it). 0: sized by ``batch_targets`` at fit time."""
    batch_targets: int = setting(1024, inert_when=_batch_given, section="train")
    """With ``batch_size = 0``: the batch in sequences is set at fit time so that it holds about
    this many training targets, ``round(batch_targets / mean targets per training row)``, at
    least 1 (a ``batch_size`` > 0 is used as given and this is ignored). One size in sequences
    does not suit every dataset: 128 windows of 50 on MovieLens hold about 5,000 targets, 128
    short Amazon histories about 750 (``docs/reproduce/defaults.md`` measures both). The size
    used is in the run's result (``training.global_batch``)."""
    min_epoch_steps: int = setting(0, legacy=0, inert_when=_batch_given, section="train")
    """With ``batch_size = 0``: where the data are large enough, the batch grows beyond
    ``batch_targets``' size, up to ``auto_batch_max`` sequences, as long as an epoch keeps this
    many optimizer steps: ``max(targets batch, min(auto_batch_max, floor(training rows /
    min_epoch_steps)))``. Small data keep small batches (many updates per epoch), large data
    get less noisy ones: with 100, ML-100K's 2,412 windows of 50 train in batches of 25 (the
    1,024-target size), ML-1M's 22,532 in batches of 128, which validated higher there
    (``docs/reproduce/defaults.md``). 0 = off. Ignored when ``batch_size`` > 0."""
    auto_batch_max: int = setting(128, inert_when=_no_growth, section="train")
    """The largest batch (sequences) ``min_epoch_steps`` may raise an automatic batch to."""
    lr_rule: str = setting("fixed", legacy="fixed", section="train")
    """How ``lr`` follows the global batch: 'fixed' (``lr`` as given), 'linear' or 'sqrt'
    (``lr`` times ``batch_size / lr_base_batch``, or its square root)."""
    lr_base_batch: int = setting(0, legacy=0, section="train")
    """The global batch at which ``lr`` was tuned ('linear' / 'sqrt'; 0 = ``batch_size``)."""
    epochs: int = setting(200, role=BUDGET, section="train")
    """Maximum number of epochs."""
    patience: int = setting(10, role=BUDGET, section="train")
    """Stop after this many validations without improvement (0 disables early stopping)."""
    eval_every: int = setting(1, section="train")
    """Validate every this many epochs."""
    eval_every_steps: int = setting(0, section="train")
    """If > 0, validate every this many steps instead of per epoch."""
    val_metric: str = setting("NDCG@10", section="train")
    """Validation metric for early stopping and model selection (higher is better)."""
    grad_clip: float = setting(0.0, section="train")
    """Clip the global gradient norm to this value (0 disables clipping)."""
    seed: int = setting(0, section="train")
    """Seed of initialization, data order, negatives and dropout."""
    train_windows: str = setting("last", section="train")
    """'last': each user's most recent ``max_len`` transitions (the SASRec paper); 'sliding':
    every transition once, long histories cut into windows (the LRURec code's loader)."""
    window_stride: int = setting(0, legacy=0, section="train")
    """With 'sliding': a new window every ``window_stride`` transitions (0 = ``max_len``:
    windows that do not overlap). A window trains only its newest ``window_stride`` targets,
    the older positions being context, so every transition is still a target once per epoch
    and each has at least ``max_len - window_stride`` items before it (without overlap the
    first target of an older window sees none). Costs ``max_len / window_stride`` times the
    encoder work per epoch; 1 is RecBole's one-sequence-per-transition data."""
    precision: str = setting("fp32", legacy="fp32", section="train")
    """Training arithmetic. 'fp32': float32 throughout. 'bf16': the training forward and loss
    under ``torch.autocast(bfloat16)``, the full cross-entropy's matmuls in bfloat16 (softmax
    and sums in float32); weights, optimizer state, validation and scoring stay float32. Faster
    only where bfloat16 is native (CPUs with AVX512-BF16 or AMX, recent GPUs);
    ``docs/results/precision.md`` measures speed and accuracy against 'fp32'."""
    label_smoothing: float = setting(0.0, legacy=0.0, inert_when=_not_ce, section="train")
    """With ``loss = 'ce'``: train against ``1 - label_smoothing`` on the target item plus
    ``label_smoothing / I`` on each of the ``I`` items (0 = the plain cross-entropy). Other
    losses ignore a model's default smoothing (it belongs to its cross-entropy); set to another
    value beside them it is an error."""

    def __post_init__(self) -> None:
        check_positive(self, "n_negatives", "lr", "epochs", "eval_every")
        check_choice(self, "loss", LOSSES)
        check_choice(self, "train_windows", ("last", "sliding"))
        if self.window_stride < 0:
            raise ConfigError(
                f"window_stride must be >= 0 (0 = max_len), got {self.window_stride!r}"
            )
        if self.window_stride and self.train_windows != "sliding":
            raise ConfigError("window_stride needs train_windows = 'sliding'")
        check_choice(self, "precision", ("fp32", "bf16"))
        check_choice(self, "lr_rule", ("fixed", "linear", "sqrt"))
        if self.lr_base_batch < 0:
            raise ConfigError(f"lr_base_batch must be >= 0, got {self.lr_base_batch!r}")
        check_range(self, "gbce_t", 0.0, 1.0)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ConfigError(f"label_smoothing must be in [0, 1), got {self.label_smoothing!r}")
        for name in (
            "weight_decay",
            "patience",
            "eval_every_steps",
            "grad_clip",
            "batch_size",
            "batch_targets",
            "min_epoch_steps",
            "auto_batch_max",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.batch_size == 0 and self.batch_targets == 0:
            raise ConfigError(
                "batch_size = 0 sizes the batch by batch_targets, which must then be > 0"
            )
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise ConfigError(f"betas must be two values in [0, 1), got {self.betas!r}")

    @classmethod
    def for_model(cls, config_cls: type, **overrides: Any) -> TrainConfig:
        """The training config of model config class ``config_cls``: its ``train_defaults``
        over the shared defaults, then ``overrides``."""
        return cls(**{**getattr(config_cls, "train_defaults", {}), **overrides})


@dataclass(frozen=True)
class RunConfig:
    """Where and how fast a neural model runs (section ``run``): placement and the time
    budget. None of it changes what a run computes but ``max_train_seconds``, which bounds
    it."""

    ce_chunk: int = setting(256, role=PLACEMENT, section="run")
    """Positions per chunk in the full cross-entropy (memory chunk x I; small is cache-friendly)."""
    device: str = setting("cpu", role=PLACEMENT, section="run")
    """'cpu', 'cuda', 'cuda:N' or 'auto' (cuda when available)."""
    num_threads: int = setting(0, role=PLACEMENT, section="run")
    """torch intra-op threads during fit/score (0 leaves the global setting alone)."""
    max_train_seconds: float = setting(0.0, role=BUDGET, section="run")
    """Stop training after this many seconds of steps (0 = no budget)."""
    eval_batch_size: int = setting(1024, role=PLACEMENT, section="run")
    """Histories per scoring chunk."""

    def __post_init__(self) -> None:
        check_positive(self, "ce_chunk", "eval_batch_size")
        for name in ("num_threads", "max_train_seconds"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise ConfigError(
                f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}"
            )


@dataclass(frozen=True)
class NeuralConfig:
    """Base of every neural model's config: model hyperparameters only (section ``model``).
    Training and run settings are :class:`TrainConfig` and :class:`RunConfig`; a model's own
    defaults for training are data on its config class, :attr:`train_defaults`, and its
    checks that need both sides are :meth:`check_training`."""

    train_defaults: ClassVar[dict[str, Any]] = {}
    """This model's defaults of training fields (``{"lr": 3e-3, "patience": 30}``), applied by
    :meth:`TrainConfig.for_model` (the field's type, role, legacy value and doc stay those
    declared on :class:`TrainConfig`)."""

    max_len: int = setting(50)
    """Maximum input length n (most recent items kept): the encoder's positions, and the
    length of the training windows."""
    item_attributes: str = setting("none", legacy="none")
    """'none': items are their ID embeddings. 'ids+attributes': an item's vector is its ID
    embedding (a learned default for items the training data never shows) plus a projection of
    the mean embedding of its attribute values (categories, brands, tags of the data's item
    attributes), as input and as output table, so an item with attributes and no interactions
    gets a score (``seqrec.models.item_attributes``; models whose item table is ``item_emb``)."""
    id_dropout: float = setting(0.25, inert_when=_no_attributes)
    """With ``item_attributes = 'ids+attributes'``: the probability, drawn per item and training
    step, that an item's ID part is replaced by the default vector, so that the attribute path
    learns to stand alone as it must for a cold item (ignored otherwise)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("train_defaults") or {}
        annotations = set(cls.__dict__.get("__annotations__", {}))
        unknown = sorted(set(own) - set(TrainConfig.__dataclass_fields__))
        if unknown:
            raise TypeError(
                f"{cls.__name__}.train_defaults: {', '.join(unknown)} are not training "
                "fields (declare a model's own hyperparameters as fields)"
            )
        twice = sorted(set(own) & annotations)
        if twice:
            raise TypeError(
                f"{cls.__name__}: {', '.join(twice)} set both as a field and in "
                "train_defaults; set each once"
            )
        elsewhere = sorted(
            annotations
            & (set(TrainConfig.__dataclass_fields__) | set(RunConfig.__dataclass_fields__))
        )
        if elsewhere:
            raise TypeError(
                f"{cls.__name__}: {', '.join(elsewhere)} are training / run fields, not model "
                "hyperparameters (give a model's training defaults in train_defaults)"
            )

    def __post_init__(self) -> None:
        check_positive(self, "max_len")
        check_choice(self, "item_attributes", ("none", "ids+attributes"))
        check_range(self, "id_dropout", 0.0, 1.0)

    def check_training(self, train: TrainConfig, run: RunConfig) -> None:
        """Refuse training settings this model cannot train with (``ConfigError``); models
        extend it (call ``super()``)."""
        if not 0 <= train.window_stride <= self.max_len:
            raise ConfigError(
                f"window_stride must be in [0, max_len={self.max_len}] (0 = max_len), "
                f"got {train.window_stride!r}"
            )
        default_smoothing = type(self).train_defaults.get("label_smoothing", 0.0)
        if train.loss != "ce" and train.label_smoothing not in (0.0, default_smoothing):
            raise ConfigError(
                f"label_smoothing applies to loss = 'ce' only, got loss = {train.loss!r} "
                f"with label_smoothing = {train.label_smoothing!r}"
            )


SECTION_CLASSES: dict[str, type] = {"train": TrainConfig, "run": RunConfig}
"""The section objects a neural model is built from besides its own config."""


def split_settings(config_cls: type, flat: dict[str, Any]) -> tuple[dict, dict, dict]:
    """A flat dict of settings (model, training and run keys together: experiment files,
    ``--set``, stored ``model.json`` / ``run.json`` configs) split into the keyword arguments
    of ``config_cls``, :class:`TrainConfig` and :class:`RunConfig`; a key of none of them stays
    with the model's, whose constructor refuses it."""
    train_names = set(TrainConfig.__dataclass_fields__)
    run_names = set(RunConfig.__dataclass_fields__)
    own = set(config_cls.__dataclass_fields__)
    model: dict[str, Any] = {}
    train: dict[str, Any] = {}
    run: dict[str, Any] = {}
    for key, value in flat.items():
        if key not in own and key in train_names:
            train[key] = value
        elif key not in own and key in run_names:
            run[key] = value
        else:
            model[key] = value
    return model, train, run


def build_parts(config_cls: type, flat: dict[str, Any]) -> tuple[Any, TrainConfig, RunConfig]:
    """The model config, :class:`TrainConfig` (with the model's ``train_defaults``) and
    :class:`RunConfig` of a flat dict of settings, checked together."""
    model, train, run = split_settings(config_cls, flat)
    parts = (config_cls(**model), TrainConfig.for_model(config_cls, **train), RunConfig(**run))
    parts[0].check_training(parts[1], parts[2])
    return parts


def _settings_post_init(self: Any) -> None:
    flat = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
    object.__setattr__(self, "_parts", build_parts(type(self).config_cls, flat))


@functools.lru_cache(maxsize=None)
def settings_class(config_cls: type) -> type:
    """The flat settings class of a neural model config class: one frozen dataclass with the
    fields of ``config_cls``, :class:`TrainConfig` (defaults: the model's ``train_defaults``)
    and :class:`RunConfig`, each with its declared role, section and legacy value. It is the
    form experiment files, ``--set``, stored artifacts and run identities use; ``.parts`` are
    the three objects a model is built from. Any other config class is its own settings."""
    if not (isinstance(config_cls, type) and issubclass(config_cls, NeuralConfig)):
        return config_cls
    specs = []
    for part, defaults in (
        (config_cls, {}),
        (TrainConfig, config_cls.train_defaults),
        (RunConfig, {}),
    ):
        hints = typing.get_type_hints(part)
        for f in dataclasses.fields(part):
            meta = field_info(part, f.name)
            if f.name in defaults:
                spec = dataclasses.field(default=defaults[f.name], metadata=meta)
            elif f.default_factory is not dataclasses.MISSING:
                spec = dataclasses.field(default_factory=f.default_factory, metadata=meta)
            else:
                spec = dataclasses.field(default=f.default, metadata=meta)
            specs.append((f.name, hints[f.name], spec))
    cls = dataclasses.make_dataclass(
        f"{config_cls.__name__}Settings",
        specs,
        frozen=True,
        namespace={
            "config_cls": config_cls,
            "part_classes": (config_cls, TrainConfig, RunConfig),
            "__post_init__": _settings_post_init,
            "parts": property(lambda self: self._parts),
            "__doc__": f"{config_cls.__name__}, TrainConfig and RunConfig as one flat set.",
        },
    )
    cls.__module__ = __name__
    return cls


def settings(config_cls: type, **flat: Any) -> Any:
    """A flat settings instance of ``config_cls`` (:func:`settings_class`) from keywords of any
    of the three sections: ``settings(SASRecConfig, dim=8, epochs=2)``."""
    return settings_class(config_cls)(**flat)


def flat_settings(config: Any, train: Any = None, run: Any = None) -> Any:
    """The flat settings instance of a model config with its training and run configs."""
    cls = settings_class(type(config))
    if cls is type(config):
        return config
    train = TrainConfig.for_model(type(config)) if train is None else train
    run = RunConfig() if run is None else run
    values = {}
    for part in (config, train, run):
        values.update({f.name: getattr(part, f.name) for f in dataclasses.fields(part)})
    return cls(**values)


SLIDING_RECIPE: dict[str, Any] = {"train_windows": "sliding", "lr": 3e-3, "patience": 30}
"""The training recipe the defaults study chose for the baselines that validated best with it
(GRU4Rec, NARM, FPMC: their ``train_defaults``; ``docs/reproduce/defaults.md``)."""
