"""``seqrec reproduce NAME``: run a table's runs (cached, resumable, in worker processes) and
write its report.

Workers are separate processes (``spawn``), each with its own torch thread budget, so N runs
train side by side without oversubscribing the cores. A time budget becomes a wall-clock
deadline: every run still training then checkpoints and writes a partial record; the same
command continues. SIGINT or SIGTERM to the main process (or to any worker) stops the table the
same way: every worker is asked to stop (a shared event, checked by the trainer between steps),
gets :data:`STOP_GRACE_SECONDS` to checkpoint and write its partial record, and is killed after
that; the report is written and ``reproduce`` raises :class:`~seqrec.stop.Interrupted`.
A second signal, or a ``kill -9``, loses at most the steps since the last checkpoint (every
:data:`~seqrec_lab.runner.CHECKPOINT_EVERY` steps) and never leaves a half-written file:
records and reports are written atomically.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from types import EllipsisType
from typing import Any, Callable

from seqrec import stop
from seqrec.errors import ConfigError, DataUnavailable
from seqrec_lab import runner
from seqrec_lab.index import RunIndex
from seqrec_lab.spec import RunSpec, Table

log = logging.getLogger(__name__)

RUNS_DIR = Path("runs") / "reproduce"
RESULTS_DIR = Path("docs") / "reproduce" / "runs"
REPORT_DIR = Path("docs") / "reproduce"
STATE_ENV = "SEQREC_STATE_DIR"
DEFAULT_STATE_DIR = Path(".seqrec-state")
"""Where unfinished runs keep their checkpoints by default: a local folder of the working
directory, ignored by git (checkpoints are never committed; a fresh clone restarts them)."""
# after a stop request, how long workers get to finish their step, checkpoint, evaluate the best
# weights so far and write the partial record before they are killed
STOP_GRACE_SECONDS = 60.0


@dataclass
class Planned:
    """A run with its identity, key and cached result (if any)."""

    spec: RunSpec
    ident: dict[str, Any]
    key: str
    cached: dict[str, Any] | None
    partial: dict[str, Any] | None = None
    unavailable: str | None = None
    """Why the run's dataset cannot be loaded here (its stored records still count)."""

    @property
    def done(self) -> bool:
        return self.cached is not None


@dataclass
class Outcome:
    """What ``reproduce`` did."""

    planned: list[Planned]
    trained: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    """Unfinished runs whose dataset is not on this machine: run id -> why."""
    report: Path | None = None


def default_state_dir() -> Path:
    """``$SEQREC_STATE_DIR`` when set, else :data:`DEFAULT_STATE_DIR` (relative to the working
    directory)."""
    return Path(os.environ.get(STATE_ENV) or DEFAULT_STATE_DIR)


def resume_source(p: Planned, runs_dir: Path, state_dir: Path | None) -> tuple[Path, int] | None:
    """The checkpoint a planned run would resume from here and its size (None: it restarts);
    a peer row keeps its worker's own layout."""
    from seqrec_lab import peers

    source = peers.resume_source if peers.is_peer(p.spec.model) else runner.resume_source
    return source(Path(runs_dir) / p.key, state_dir)


def restart_note(p: Planned, runs_dir: Path, state_dir: Path | None) -> str | None:
    """A line for a run that was started before (it has a partial record, e.g. made on another
    machine) but whose checkpoint is neither in its run directory nor in the state dir here."""
    if p.partial is None or resume_source(p, runs_dir, state_dir) is not None:
        return None
    where = "no state dir" if state_dir is None else f"nothing in {state_dir}"
    return (
        f"  no saved state for {p.spec.run_id} seed {p.spec.seed}: starting from epoch 0 "
        f"({where}; its partial record stopped at epoch {p.partial.get('epochs')})"
    )


def run_command(table: Table, spec: RunSpec) -> str:
    return f"seqrec reproduce {table.name} --runs {spec.run_id} --seeds {spec.seed}"


def plan(
    table: Table, runs: tuple[RunSpec, ...], runs_dir: Path, results_dir: Path
) -> list[Planned]:
    """Identity, key and cached result of every run (loads each dataset once for its fingerprint,
    reads each stored record at most once). A run whose dataset is not on this machine is
    matched to its stored records by everything but the data fingerprint and marked
    ``unavailable``: the report still shows what was measured, and the other runs go on."""
    index = RunIndex(runs_dir, results_dir)
    out = []
    for spec in runs:
        try:
            fp, missing = runner.prepared_data(spec).prepared.fingerprint(), None
        except DataUnavailable as exc:
            fp, missing = None, str(exc)
        ident = runner.identity(spec, fp)
        key = index.key(ident)
        cached = index.result(ident)
        out.append(
            Planned(
                spec,
                ident,
                key,
                cached,
                None if cached is not None else index.partial(key),
                missing,
            )
        )
    return out


def _worker_init(threads: int, stop_event: Any) -> None:
    import torch

    from seqrec.allocator import retain_freed_memory

    retain_freed_memory()  # as the seqrec command does for its own process
    torch.set_num_threads(max(threads, 1))
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(processName)s %(name)s: %(message)s"
    )
    logging.getLogger("seqrec.training.trainer").setLevel(logging.INFO)  # one line per validation
    # a signal to any worker stops the whole table (the pool would otherwise keep handing runs
    # to a worker that was told to stop); the main process's stop reaches workers the same way
    stop.watch(stop_event)
    stop.install()


def reproduce(
    table: Table,
    runs: tuple[RunSpec, ...] | None = None,
    *,
    workers: int = 1,
    threads: int = 1,
    budget_seconds: float | None = None,
    runs_dir: Path = RUNS_DIR,
    results_dir: Path = RESULTS_DIR,
    report_dir: Path | None = REPORT_DIR,
    state_dir: Path | None | EllipsisType = ...,
    on_event: Callable[[str], None] | None = None,
) -> Outcome:
    """Train every unfinished run of ``runs`` (default: all), then write the table's report.

    ``state_dir``: where unfinished runs keep their checkpoints (default
    :func:`default_state_dir`; None keeps none beyond the run directories)."""
    if state_dir is ...:
        state_dir = default_state_dir()
    if workers < 1 or threads < 1:
        raise ConfigError(f"workers and threads must be >= 1, got {workers} and {threads}")
    say = on_event or (lambda msg: log.info(msg))
    runs = table.runs if runs is None else runs
    runs_dir, results_dir = Path(runs_dir), Path(results_dir)
    deadline = None if not budget_seconds else time.time() + budget_seconds
    planned = plan(table, runs, runs_dir, results_dir)
    outcome = Outcome(planned)
    for p in planned:
        if not p.done and p.unavailable:
            outcome.skipped[p.spec.run_id] = p.unavailable
    todo = [p for p in planned if not p.done and not p.unavailable]
    say(
        f"{table.name}: {len(planned)} run(s), {len(planned) - len(todo) - len(outcome.skipped)} cached, "
        f"{len(todo)} to train"
        + (f", {len(outcome.skipped)} skipped (dataset not here)" if outcome.skipped else "")
    )
    for run_id, why in outcome.skipped.items():
        say(f"  skipped {run_id}: {why}")
    for p in todo:
        note = restart_note(p, runs_dir, None if state_dir is None else Path(state_dir))
        if note:
            say(note)

    def finished(p: Planned, record: dict[str, Any]) -> None:
        if record.get("partial"):
            p.partial = record
            why = "a signal" if record.get("stopped") == "interrupted" else "the time budget"
            say(
                f"  {p.spec.run_id} seed {p.spec.seed}: stopped by {why} at epoch "
                f"{record.get('epochs')} (best valid {record.get('best_valid')}); rerun to continue"
            )
        else:
            p.cached = record
            m = record["metrics"]["test"]
            shown = ", ".join(f"{k} {m[k]:.4f}" for k in table.metrics if k in m)
            say(
                f"  {p.spec.run_id} seed {p.spec.seed}: done ({record.get('stopped')}), test {shown}"
            )
        outcome.trained.append(p.key)

    first = {p.key for p in todo[:workers]}  # these start at once: each trains at least a step

    def args(p: Planned) -> tuple:
        return (
            p.spec,
            p.key,
            p.ident,
            runs_dir,
            results_dir,
            threads,
            deadline,
            run_command(table, p.spec),
            None if state_dir is None else Path(state_dir),
            p.key in first,
        )

    def collect(p: Planned, result: Callable[[], dict[str, Any]]) -> None:
        try:
            finished(p, result())
        except (runner.BudgetSpent, stop.Interrupted) as exc:
            say(f"  {exc}")
        except Exception as exc:  # noqa: BLE001 - one run's failure is reported, the rest go on
            outcome.failed[p.spec.run_id] = f"{type(exc).__name__}: {exc}"
            say(f"  {p.spec.run_id} seed {p.spec.seed} FAILED: {exc}")

    with stop.on_signals():
        try:
            if workers == 1 or len(todo) <= 1:
                for p in todo:
                    if stop.requested():
                        break
                    say(
                        f"  training {p.spec.run_id} seed {p.spec.seed} ({p.spec.model} on {p.spec.dataset}) -> {runs_dir / p.key}"
                    )
                    collect(p, lambda p=p: runner.execute(*args(p)))
            elif todo:
                _run_pool(todo, args, workers, threads, collect, say, runs_dir)
        finally:
            if report_dir is not None:  # the report always shows the whole table
                from seqrec_lab.report import write_report

                whole = (
                    planned
                    if len(runs) == len(table.runs)
                    else plan(table, table.runs, runs_dir, results_dir)
                )
                outcome.report = write_report(table, whole, Path(report_dir))
        if stop.requested():
            signum = stop.signal_number()
            name = signal.Signals(signum).name if signum else "a stop request"
            unfinished = sum(1 for p in planned if not p.done)
            raise stop.Interrupted(
                f"{table.name} stopped by {name}: {unfinished} unfinished run(s) kept their checkpoint "
                "(partial record where training had started); rerun the same command to continue",
                signum,
            )
    return outcome


def _run_pool(
    todo: list[Planned],
    args: Callable,
    workers: int,
    threads: int,
    collect: Callable[[Planned, Callable], None],
    say: Callable[[str], None],
    runs_dir: Path,
) -> None:
    """Train ``todo`` over ``workers`` spawned processes; on a stop request, let the running
    ones checkpoint (bounded by :data:`STOP_GRACE_SECONDS`), then make sure none is left."""
    ctx = mp.get_context("spawn")
    event = ctx.Event()
    stop.watch(event)  # a worker's signal sets it: the main process sees it too
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, initializer=_worker_init, initargs=(threads, event)
    )
    futures: dict[Future, Planned] = {}
    clean = False
    try:
        for p in todo:
            say(
                f"  queued {p.spec.run_id} seed {p.spec.seed} ({p.spec.model} on {p.spec.dataset}) -> {runs_dir / p.key}"
            )
            futures[pool.submit(runner.execute, *args(p))] = p
        pending = set(futures)
        while pending and not stop.requested():
            # a timeout, so that a signal (which only sets a flag) is acted on within a second
            done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                collect(futures[fut], fut.result)
        if pending:
            stop.request()  # reaches every worker through the event
            running = {f for f in pending if not f.cancel()}
            say(
                f"  stopping: waiting up to {STOP_GRACE_SECONDS:.0f} s for {len(running)} run(s) "
                "to checkpoint and write a partial record"
            )
            done, late = wait(running, timeout=STOP_GRACE_SECONDS)
            for fut in done:
                collect(futures[fut], fut.result)
            for fut in late:
                p = futures[fut]
                say(
                    f"  {p.spec.run_id} seed {p.spec.seed}: did not stop within {STOP_GRACE_SECONDS:.0f} s; "
                    "killed (it resumes from its last checkpoint)"
                )
            clean = not late
        else:
            clean = True
    finally:
        # pids of the live workers (private, but the pool has no public handle on them)
        procs = list((getattr(pool, "_processes", None) or {}).values())
        if not clean:  # a second signal, an error here, or a worker past its grace: no orphans
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        for proc in procs:
            proc.join(timeout=10)
