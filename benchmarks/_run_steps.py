"""A reproduction run's training batches and a training step, for the step benchmarks: the
run's data and recipe, untrained weights (seed 0), AdamW at lr 1e-3."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from seqrec.experiment import build_model, prepare_data
from seqrec.models.torch_recommender import resolved_batch
from seqrec_lab.spec import load_table


@dataclass
class RunSteps:
    experiment: Any
    split: Any
    model: Any
    batch_size: int
    batches: list
    step: Callable[[dict], None]


def run_steps(root: Path, table_run: str, n_batches: int) -> RunSteps:
    """``table:run`` (its lowest seed) -> its model in training mode, ``n_batches`` batches of
    the run's own batch size in a seeded order, and ``step(batch)``: forward, loss, backward
    and an AdamW update."""
    table, run_id = table_run.split(":")
    spec = min(
        (r for r in load_table(table, root).runs if r.run_id == run_id), key=lambda r: r.seed
    )
    exp = spec.experiment
    split = prepare_data(exp).split
    model = build_model(exp)
    train = split.train
    model._remember_catalogue(train)
    windows, model._row_source, rows = model.training_rows(train)
    batch_size = resolved_batch(model.train_config, windows, rows, model.config.max_len).batch_size
    torch.manual_seed(0)
    model.encoder = model.build_encoder(train.n_items)
    model.encoder.train()
    opt = torch.optim.AdamW(model.encoder.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    order = rng.permutation(rows)
    batches = [
        model.make_batch(windows, order[i * batch_size : (i + 1) * batch_size], rng)
        for i in range(n_batches)
    ]

    def step(data: dict) -> None:
        loss = model.compute_loss(data)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return RunSteps(exp, split, model, batch_size, batches, step)
