"""Data-parallel training with ``torch.distributed`` (launched by ``torchrun``).

``torchrun --nproc-per-node N -m seqrec train ...`` starts N copies of the command with
``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` / ``MASTER_ADDR`` in their environment. Every copy
prepares the same data and builds the same model; :func:`init_from_env` then joins the process
group (gloo on CPU, NCCL on CUDA, ``cuda:LOCAL_RANK`` per process) and the trainer:

* splits each **global** batch (``config.batch_size`` rows of the epoch's seeded order) into
  ``WORLD_SIZE`` contiguous shards, one per rank (:func:`shard`), so each rank builds only
  its own windows;
* runs the model through :class:`torch.nn.parallel.DistributedDataParallel`, which averages
  gradients over the ranks, after scaling each rank's mean loss by its share of the global
  batch's target positions (:meth:`DistContext.loss_scale`): the update is then the gradient
  of the global batch's mean loss, whatever the number of ranks (only the floating-point
  summation order differs from one process);
* validates, checkpoints and writes results on rank 0 only; early stopping and the time budget
  are rank 0's decisions, broadcast to the others; a resumed run reads ``last.pt`` on rank 0
  and broadcasts it (no shared file system needed across nodes).

A rank whose shard is empty (a last global batch smaller than the number of ranks) still runs
a forward/backward on one row with weight 0, because every rank must join each gradient
all-reduce.

Not made equal to a one-process run: dropout masks and per-row negatives (``bce``, ``gbce``)
are drawn per rank from the step's seed, so those runs match a one-process run in distribution,
not bit for bit. Full cross-entropy without dropout matches up to summation order.
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch
    from torch import nn

log = logging.getLogger(__name__)


def _dist():
    # imported on use: the CLI asks is_main_process() for factorization models too, and those
    # never import torch
    import torch.distributed

    return torch.distributed


@dataclass(frozen=True)
class DistContext:
    """This process's place in the process group."""

    rank: int
    world_size: int
    local_rank: int
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def describe(self) -> dict[str, Any]:
        return {"world_size": self.world_size, "backend": self.backend}

    # --- collectives used by the trainer (tiny tensors; gloo and NCCL alike) ---------------
    def _tensor(self, values: list[float]) -> torch.Tensor:
        import torch

        device = (
            torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")
        )
        return torch.tensor(values, dtype=torch.float64, device=device)

    def loss_scale(self, local_weight: float) -> float:
        """Factor making DDP's gradient *average* equal the gradient of the weighted global
        mean: ``w_rank * world / sum(w)``."""
        t = self._tensor([local_weight])
        _dist().all_reduce(t)
        total = float(t[0])
        return local_weight * self.world_size / total if total > 0 else 0.0

    def step_summary(self, scaled_loss: float, *stops: bool) -> tuple[float, tuple[bool, ...]]:
        """Global mean loss (mean of the scaled losses) and rank 0's stop decisions (time
        budget, deadline: clocks differ between ranks, so all follow rank 0's)."""
        t = self._tensor([scaled_loss, *(float(s and self.is_main) for s in stops)])
        _dist().all_reduce(t)
        return float(t[0]) / self.world_size, tuple(bool(x > 0) for x in t[1:].tolist())

    def check_in_sync(self, module: nn.Module) -> None:
        """Raise unless every rank holds the same weights (after an update: a training forward
        that bypassed the DDP wrapper leaves gradients unsynchronized and the ranks drift)."""
        import torch

        with torch.no_grad():
            local = self._tensor([float(p.detach().double().sum()) for p in module.parameters()])
        mean = local.clone()
        _dist().all_reduce(mean)
        mean /= self.world_size
        if not torch.allclose(local, mean, rtol=1e-9, atol=1e-12):
            raise RuntimeError(
                "rank weights differ after a DDP step: the model's training forward bypassed "
                "DistributedDataParallel (a compute_loss override must call train_forward(), "
                "not self.encoder)"
            )

    def broadcast_flag(self, flag: bool) -> bool:
        t = self._tensor([float(flag)])
        _dist().broadcast(t, src=0)
        return bool(t[0] > 0)

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (pickled in memory between our own processes)."""
        box = [obj if self.is_main else None]
        _dist().broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        _dist().barrier()


def env_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def init_from_env(device: torch.device) -> DistContext | None:
    """Join the process group that ``torchrun`` describes in the environment (None when the
    process runs alone). Idempotent: a second call returns the same context."""
    world = env_world_size()
    if world <= 1:
        return None
    import torch

    dist = _dist()
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        if device.type == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group(backend=backend, timeout=timedelta(minutes=30))
        log.info("joined process group: rank %d of %d (%s)", rank, world, backend)
    return DistContext(rank, world, local, dist.get_backend())


def rank_device(device: torch.device) -> torch.device:
    """``cuda:LOCAL_RANK`` for a CUDA run under torchrun (one GPU per process)."""
    if device.type == "cuda" and env_world_size() > 1:
        import torch

        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def is_main_process() -> bool:
    """True outside torchrun and on rank 0 (who evaluates and writes results)."""
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return int(os.environ.get("RANK", "0")) == 0


def shard(rows: np.ndarray, ctx: DistContext | None) -> np.ndarray:
    """This rank's contiguous part of a global batch (sizes differ by at most one)."""
    if ctx is None:
        return rows
    return np.array_split(rows, ctx.world_size)[ctx.rank]


def wrap(module: nn.Module, ctx: DistContext | None) -> nn.Module:
    """``DistributedDataParallel(module)`` (rank 0's weights broadcast to all), or the module."""
    if ctx is None:
        return module
    from torch.nn.parallel import DistributedDataParallel

    ids = [ctx.local_rank] if ctx.backend == "nccl" else None
    return DistributedDataParallel(module, device_ids=ids)


def shutdown() -> None:
    """Leave the process group (end of a torchrun command): wait for every rank first, so that a
    rank done early (ranks > 0 skip the evaluation) does not tear its gloo connections down while
    rank 0 still uses the group; without the barrier that rank's exit aborted (SIGABRT) about
    one run in five."""
    global _left_group
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        try:
            dist.barrier()
        except Exception:  # noqa: BLE001 - a peer already gone: leave anyway
            pass
        dist.destroy_process_group()
        _left_group = True


_left_group = False


def exit_if_left_group(code: int) -> None:
    """End a process that has left a process group with ``os._exit(code)`` after flushing its
    output, skipping the interpreter's finalization: with gloo, a rank's C++ static destructors
    at exit still abort now and then ("terminate called without an active exception",
    SIGABRT, with no Python frame left, even after the barrier and destroy_process_group
    above), and torchrun then fails the whole job.
    Callers must have closed their files; a process that never joined a group returns."""
    if not _left_group:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream: nothing to flush
            pass
    os._exit(code)
