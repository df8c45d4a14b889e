"""``seqrec reproduce NAME``: run a table's runs (cached, resumable, in worker processes) and
write its report.

Workers are separate processes (``spawn``), each with its own torch thread budget, so N runs
train side by side without oversubscribing the cores. A time budget becomes a wall-clock
deadline: every run still training then checkpoints and writes a partial record; the same
command continues. Ctrl-C (or a kill) loses at most the steps since the last checkpoint
(every :data:`~seqrec.reproduce.runner.CHECKPOINT_EVERY` steps) and never leaves a
half-written file: records and reports are written atomically.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from seqrec.errors import ConfigError
from seqrec.reproduce import runner
from seqrec.reproduce.spec import RunSpec, Table

log = logging.getLogger(__name__)

RUNS_DIR = Path("runs") / "reproduce"
RESULTS_DIR = Path("docs") / "reproduce" / "runs"
REPORT_DIR = Path("docs") / "reproduce"
STATE_DIR = Path("reproduce-state")  # committed checkpoints of unfinished runs


@dataclass
class Planned:
    """A run with its identity, key and cached result (if any)."""

    spec: RunSpec
    ident: dict[str, Any]
    key: str
    cached: dict[str, Any] | None
    partial: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.cached is not None


@dataclass
class Outcome:
    """What ``reproduce`` did."""

    planned: list[Planned]
    trained: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    report: Path | None = None


def run_command(table: Table, spec: RunSpec) -> str:
    return f"seqrec reproduce {table.name} --runs {spec.run_id} --seeds {spec.seed}"


def plan(table: Table, runs: tuple[RunSpec, ...], runs_dir: Path, results_dir: Path) -> list[Planned]:
    """Identity, key and cached result of every run (loads each dataset once for its fingerprint)."""
    out = []
    for spec in runs:
        fp = runner.prepared_data(spec).prepared.fingerprint()
        ident = runner.identity(spec, fp)
        key = runner.find_key(runs_dir, results_dir, ident)
        cached = runner.find_result(results_dir, ident)
        partial_path = results_dir / f"{key}.partial.json"
        partial = None
        if cached is None and partial_path.exists():
            try:
                partial = json.loads(partial_path.read_text())
            except (OSError, ValueError):
                partial = None
        out.append(Planned(spec, ident, key, cached, partial))
    return out


def _worker_init(threads: int) -> None:
    import torch

    torch.set_num_threads(max(threads, 1))
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(processName)s %(name)s: %(message)s")
    logging.getLogger("seqrec.training.trainer").setLevel(logging.INFO)  # one line per validation


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
    state_dir: Path | None = STATE_DIR,
    on_event: Callable[[str], None] | None = None,
) -> Outcome:
    """Train every unfinished run of ``runs`` (default: all), then write the table's report."""
    if workers < 1 or threads < 1:
        raise ConfigError(f"workers and threads must be >= 1, got {workers} and {threads}")
    say = on_event or (lambda msg: log.info(msg))
    runs = table.runs if runs is None else runs
    runs_dir, results_dir = Path(runs_dir), Path(results_dir)
    deadline = None if not budget_seconds else time.time() + budget_seconds
    planned = plan(table, runs, runs_dir, results_dir)
    todo = [p for p in planned if not p.done]
    say(f"{table.name}: {len(planned)} run(s), {len(planned) - len(todo)} cached, {len(todo)} to train")
    outcome = Outcome(planned)

    def finished(p: Planned, record: dict[str, Any]) -> None:
        if record.get("partial"):
            p.partial = record
            say(f"  {p.spec.run_id} seed {p.spec.seed}: stopped by the time budget at epoch "
                f"{record.get('epochs')} (best valid {record.get('best_valid')}); rerun to continue")
        else:
            p.cached = record
            m = record["metrics"]["test"]
            shown = ", ".join(f"{k} {m[k]:.4f}" for k in table.metrics if k in m)
            say(f"  {p.spec.run_id} seed {p.spec.seed}: done ({record.get('stopped')}), test {shown}")
        outcome.trained.append(p.key)

    first = {p.key for p in todo[:workers]}  # these start at once: each trains at least a step
    args = lambda p: (p.spec, p.key, p.ident, runs_dir, results_dir, threads, deadline,  # noqa: E731
                      run_command(table, p.spec), None if state_dir is None else Path(state_dir),
                      p.key in first)
    try:
        if workers == 1 or len(todo) <= 1:
            for p in todo:
                say(f"  training {p.spec.run_id} seed {p.spec.seed} ({p.spec.model} on {p.spec.dataset}) -> {runs_dir / p.key}")
                try:
                    finished(p, runner.execute(*args(p)))
                except runner.BudgetSpent as exc:
                    say(f"  {exc}")
                except Exception as exc:  # noqa: BLE001 - one run's failure is reported, the rest go on
                    outcome.failed[p.spec.run_id] = f"{type(exc).__name__}: {exc}"
                    say(f"  {p.spec.run_id} seed {p.spec.seed} FAILED: {exc}")
        elif todo:
            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                                     initargs=(threads,)) as pool:
                futures = {}
                for p in todo:
                    say(f"  queued {p.spec.run_id} seed {p.spec.seed} ({p.spec.model} on {p.spec.dataset}) -> {runs_dir / p.key}")
                    futures[pool.submit(runner.execute, *args(p))] = p
                pending = set(futures)
                try:
                    while pending:
                        done, pending = wait(pending, return_when=FIRST_COMPLETED)
                        for fut in done:
                            p = futures[fut]
                            try:
                                finished(p, fut.result())
                            except runner.BudgetSpent as exc:
                                say(f"  {exc}")
                            except Exception as exc:  # noqa: BLE001 - one run's failure is reported, the rest go on
                                outcome.failed[p.spec.run_id] = f"{type(exc).__name__}: {exc}"
                                say(f"  {p.spec.run_id} seed {p.spec.seed} FAILED: {exc}")
                except KeyboardInterrupt:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    finally:
        if report_dir is not None:  # the report always shows the whole table
            from seqrec.reproduce.report import write_report

            whole = planned if len(runs) == len(table.runs) else plan(table, table.runs, runs_dir, results_dir)
            outcome.report = write_report(table, whole, Path(report_dir))
    return outcome
