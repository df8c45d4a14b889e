"""The training fields every neural model shares (:class:`NeuralConfig`), the recipe of the
baselines that took the measured defaults (:data:`SLIDING_RECIPE`), the checks model
configs validate with them. Each field declares its role in a run (``seqrec.config_fields``): budget
and placement fields may change when a run resumes; the others make it another run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from seqrec.config_fields import BUDGET, PLACEMENT, setting
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


def _no_growth(config: dict[str, Any]) -> bool:
    """``auto_batch_max`` acts only through ``min_epoch_steps`` on an automatic batch."""
    return _batch_given(config) or not config.get("min_epoch_steps", 0)


@dataclass(frozen=True)
class NeuralConfig:
    """Training and run fields shared by every neural model; model configs inherit from it and
    add their hyperparameters (section ``model``). A model's own defaults for the shared fields
    are data on its config class, :attr:`train_defaults`, not redeclared fields."""

    train_defaults: ClassVar[dict[str, Any]] = {}
    """This model's defaults of shared fields (``{"lr": 3e-3, "patience": 30}``); a subclass
    that sets it gets them as its field defaults (the field's type, role, legacy value and doc
    stay those declared here)."""

    max_len: int = setting(50, section="train")
    """Maximum input length n (most recent items kept)."""
    loss: str = setting("ce", section="train")
    """'bce' (paper, 1 negative/position), 'ce' (full softmax), 'sampled_softmax' or 'gbce'."""
    n_negatives: int = setting(256, section="train")
    """Negatives per batch (sampled_softmax) or per sequence (gbce)."""
    gbce_t: float = setting(0.75, section="train")
    """gBCE calibration parameter t in [0, 1]."""
    logq: bool = setting(False, section="train")
    """sampled_softmax: draw negatives by popularity and apply the log-Q correction."""
    ce_chunk: int = setting(256, role=PLACEMENT, section="run")
    """Positions per chunk in the full cross-entropy (memory chunk x I; small is cache-friendly)."""
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
    device: str = setting("cpu", role=PLACEMENT, section="run")
    """'cpu', 'cuda', 'cuda:N' or 'auto' (cuda when available)."""
    num_threads: int = setting(0, role=PLACEMENT, section="run")
    """torch intra-op threads during fit/score (0 leaves the global setting alone)."""
    max_train_seconds: float = setting(0.0, role=BUDGET, section="run")
    """Stop training after this many seconds of steps (0 = no budget)."""
    eval_batch_size: int = setting(1024, role=PLACEMENT, section="run")
    """Histories per scoring chunk."""
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("train_defaults")
        if not own:
            return
        shared = NeuralConfig.__dataclass_fields__
        unknown = sorted(set(own) - set(shared))
        if unknown:
            raise TypeError(
                f"{cls.__name__}.train_defaults: {', '.join(unknown)} are not shared "
                "fields (declare a model's own hyperparameters as fields)"
            )
        annotations = dict(cls.__dict__.get("__annotations__", {}))
        twice = sorted(set(own) & set(annotations))
        if twice:
            raise TypeError(
                f"{cls.__name__}: {', '.join(twice)} set both as a field and in "
                "train_defaults; set each once"
            )
        for name, value in own.items():  # picked up by @dataclass as the subclass's defaults
            setattr(cls, name, value)
            annotations[name] = shared[name].type
        cls.__annotations__ = annotations

    def __post_init__(self) -> None:
        check_positive(
            self,
            "max_len",
            "n_negatives",
            "ce_chunk",
            "lr",
            "epochs",
            "eval_every",
            "eval_batch_size",
        )
        check_choice(self, "loss", LOSSES)
        check_choice(self, "train_windows", ("last", "sliding"))
        if not 0 <= self.window_stride <= self.max_len:
            raise ConfigError(
                f"window_stride must be in [0, max_len={self.max_len}] (0 = max_len), "
                f"got {self.window_stride!r}"
            )
        if self.window_stride and self.train_windows != "sliding":
            raise ConfigError("window_stride needs train_windows = 'sliding'")
        check_choice(self, "precision", ("fp32", "bf16"))
        check_choice(self, "lr_rule", ("fixed", "linear", "sqrt"))
        if self.lr_base_batch < 0:
            raise ConfigError(f"lr_base_batch must be >= 0, got {self.lr_base_batch!r}")
        check_range(self, "gbce_t", 0.0, 1.0)
        for name in (
            "weight_decay",
            "patience",
            "eval_every_steps",
            "grad_clip",
            "num_threads",
            "max_train_seconds",
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
        if not (self.device in ("cpu", "cuda", "auto") or self.device.startswith("cuda:")):
            raise ConfigError(
                f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}"
            )


SLIDING_RECIPE: dict[str, Any] = {"train_windows": "sliding", "lr": 3e-3, "patience": 30}
"""The training recipe the defaults study chose for the baselines that validated best with it
(GRU4Rec, NARM, FPMC: their ``train_defaults``; ``docs/reproduce/defaults.md``)."""
