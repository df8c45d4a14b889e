"""Crash-resume on real data (issue 3, must-show 4): SIGKILL a training process mid-epoch,
resume it from its last checkpoint, and compare with an uninterrupted run of the same seed.

Data: ML-1M (``../shared/data/ml-1m.seq.tsv.xz``), iterative 5-core, leave-last-out, the
SASRec benchmark's split. Model: SASRec, reference layout, d 64, 2 blocks, max_len 200,
dropout 0.1, the paper's BCE loss (the cheapest real objective: the check is about the
trainer, which every loss shares), 4 epochs, validation (full ranking, history filter) after
every epoch, a checkpoint every 10 steps.

1. a child process trains in run directory ``killed/``; once epoch 2 is validated and the
   checkpoint file changes again (the end-of-epoch-2 or a mid-epoch-3 checkpoint), the parent
   waits 3 s (a few steps of epoch 3, which the kill loses) and sends SIGKILL;
2. the same command resumes from ``killed/last.pt`` and finishes;
3. an uninterrupted run trains in ``clean/``.
The validation logs (every metric and training loss of every epoch) and the test metrics of
the two runs are compared for equality.

    .venv/bin/python benchmarks/bench_resume_ml1m.py          # about 6 minutes at 1 thread

Writes docs/results/resume_ml1m.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _sasrec_common import ROOT, prepare

from seqrec.evaluation import evaluate
from seqrec.evaluation.results import base_record
from seqrec.models.sasrec import SASRec, SASRecConfig

OUT = ROOT / "docs" / "results"
CONFIG = dict(max_len=200, dim=64, n_blocks=2, n_heads=1, dropout=0.1, layout="reference",
              loss="bce", epochs=4, patience=0, eval_every=1, seed=0, num_threads=1,
              weight_decay=0.0)
CHECKPOINT_EVERY = 10


def train(run_dir: Path) -> dict:
    """Train (or resume) in ``run_dir``; return the validation log and test metrics."""
    prepared, split = prepare("ml-1m")
    model = SASRec(SASRecConfig(**CONFIG))
    t0 = time.perf_counter()
    model.fit(split.train, split.valid, checkpoint_dir=run_dir,
              checkpoint_every=CHECKPOINT_EVERY, progress=False)
    seconds = time.perf_counter() - t0
    lg = model.training_log
    history = [{k: h[k] for k in ("epoch", "step", "train_loss", "metrics")} for h in lg.history]
    test = evaluate(model, split.test, seen_filter="history").metrics
    return {"history": history, "test": test, "fit_seconds": seconds,
            "resumed_from_step": lg.resumed_from_step, "global_step": lg.global_step}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", default=str(ROOT / "benchmarks" / "logs" / "runs" / "resume_ml1m"))
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:  # the process that gets killed
        train(Path(args.child))
        return
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    killed_dir, clean_dir = work / "killed", work / "clean"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(killed_dir)], env=env)
    ckpt, log = killed_dir / "last.pt", killed_dir / "validation.jsonl"
    seen_after_epoch2 = None
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit("the child finished before it could be killed")
            if _lines(log) >= 2 and ckpt.exists():
                mtime = ckpt.stat().st_mtime_ns
                if seen_after_epoch2 is None:
                    seen_after_epoch2 = mtime
                elif mtime != seen_after_epoch2:  # a later checkpoint was written
                    time.sleep(3.0)  # and some further steps that the kill will lose
                    break
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        killed_at = time.strftime("%H:%M:%S")
    finally:
        proc.kill()
        proc.wait()
    print(f"SIGKILL at {killed_at}, validations logged before the kill: {_lines(log)}", flush=True)
    resumed = train(killed_dir)
    clean = train(clean_dir)
    same_history = resumed["history"] == clean["history"]
    same_test = resumed["test"] == clean["test"]
    record = base_record(
        benchmark="resume_ml1m", dataset="ml-1m", protocol="leave-last-out", config=CONFIG,
        checkpoint_every=CHECKPOINT_EVERY, killed_at=killed_at,
        resumed_from_step=resumed["resumed_from_step"], global_step=resumed["global_step"],
        identical_validation_log=same_history, identical_test_metrics=same_test,
        resumed=resumed, uninterrupted=clean, torch_threads=1,
    )
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "resume_ml1m.json").write_text(json.dumps(record, indent=2) + "\n")
    rows = ["| epoch | uninterrupted loss | resumed loss | uninterrupted NDCG@10 | resumed NDCG@10 |",
            "|---:|---:|---:|---:|---:|"]
    for a, b in zip(clean["history"], resumed["history"], strict=False):
        rows.append(f"| {a['epoch']} | {a['train_loss']:.6f} | {b['train_loss']:.6f} | "
                    f"{a['metrics']['NDCG@10']:.6f} | {b['metrics']['NDCG@10']:.6f} |")
    md = [
        "# Crash-resume on ML-1M (SIGKILL mid-epoch, then resume)\n",
        f"`{record['command']}`, created {record['created']}, 1 torch thread\n",
        f"SASRec (reference layout, BCE, seed 0), {CONFIG['epochs']} epochs, checkpoint every "
        f"{CHECKPOINT_EVERY} steps. The child was killed at {killed_at} during epoch 3 and resumed "
        f"from step {resumed['resumed_from_step']} (of {resumed['global_step']}).\n",
        *rows, "",
        f"Test metrics: uninterrupted {json.dumps(clean['test'])}; resumed "
        f"{json.dumps(resumed['test'])}.\n",
        f"**Identical validation log: {same_history}. Identical test metrics: {same_test}.**",
    ]
    (OUT / "resume_ml1m.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    if not (same_history and same_test):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
