"""Training engine shared by every neural model: one plain loop (``trainer``), losses as plain
functions and their choice by config (``losses``), pickle-free atomic checkpoints
(``checkpoint``), vectorized negative sampling (``negatives``) and what an epoch iterates over
with the batch it is cut into (``rows``)."""

from seqrec.training.trainer import Trainer, TrainingLog

__all__ = ["Trainer", "TrainingLog"]
