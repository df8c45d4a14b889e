"""Training engine shared by every neural model: one plain loop (``trainer``), losses as plain
functions (``losses``), pickle-free atomic checkpoints (``checkpoint``) and vectorized negative
sampling (``negatives``)."""

from seqrec.training.trainer import Trainer, TrainingLog

__all__ = ["Trainer", "TrainingLog"]
