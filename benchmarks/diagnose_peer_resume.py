"""Does a resumed RecTools peer run continue where it stopped?

The peers table trains RecTools' SASRec in pieces (a budget stop saves a Lightning checkpoint; the
next call resumes it). This runs one peers row's worker three ways on the row's own split, as the
harness launches it: uninterrupted for ``--epochs``; stopped by a deadline after about
``--stop-after`` seconds and resumed with the worker as it is; and the same with the fix turned
off (``keep_weights_on_resume = False``: RecTools' start-of-training initialization then
overwrote the restored weights); and killed outright (SIGKILL) after about ``--stop-after``
seconds, then resumed from the last epoch the worker saved (it saves every epoch). Validation HR@10 / NDCG@10 of the worker's per-epoch lists, by
seqrec's evaluator as the harness scores them (full ranking, the history filtered).

Found 2026-12-05 on ML-1M seed 0 (validation NDCG@10 0.178 at epoch 59, 0.020 after the first
resumed epoch); this is the small, fast version of that check.

    python benchmarks/diagnose_peer_resume.py      # writes docs/results/peer_resume_rectools.{json,md}
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

import numpy as np

from seqrec.evaluation.results import base_record, hardware_line
from seqrec_lab import load_table, peers, runner

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"


def curve(work: Path, score, epochs: int) -> list[dict]:
    """HR@10 and NDCG@10 of each epoch's validation lists, by seqrec's evaluator as the harness
    scores a peer row (``peers.TopKLists``)."""
    out = []
    for e in range(1, epochs + 1):
        metrics = score(np.load(work / f"valid_topk_epoch{e:03d}.npy")).metrics
        out.append({"epoch": e, "HR@10": float(metrics["HR@10"]), "NDCG@10": float(metrics["NDCG@10"])})
    return out


def kill_after(cfg, python: Path, work: Path, seconds: float) -> int:
    """Start the worker as the harness does, SIGKILL it after ``seconds`` (no chance to save:
    a machine lost, ``kill -9``), and return the last epoch its per-epoch state had saved."""
    import os
    import signal
    import subprocess

    worker = peers.worker_dir() / f"peer_{cfg.library}.py"
    args = {**dataclasses.asdict(cfg), "deadline": None}
    env = dict(os.environ, OMP_NUM_THREADS=str(cfg.num_threads))
    env.pop("PYTHONPATH", None)
    with open(work / "worker.log", "w") as logf:
        proc = subprocess.Popen([str(python), str(worker), str(work), str(work), json.dumps(args)],
                                env=env, stdout=logf, stderr=subprocess.STDOUT, cwd=work)
        time.sleep(seconds)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    state = work / "worker_state.json"
    return json.loads(state.read_text())["clock"]["epoch"] if state.exists() else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", default="rectools-ml100k", help="a RecTools row of configs/reproduce/peers.toml")
    ap.add_argument("--epochs", type=int, default=12)
    ap.add_argument("--stop-after", type=float, default=22.0, help="seconds before the deadline stop")
    ap.add_argument("--work", default=str(ROOT / "runs" / "diagnose-peer-resume"))
    ap.add_argument("--variants", default="", help="comma-separated subset of the variants (default: all)")
    args = ap.parse_args()

    (spec,) = load_table(ROOT / "configs" / "reproduce" / "peers.toml").select(run_ids={args.run}, seeds={0})
    exp = spec.experiment
    cfg = dataclasses.replace(peers.peer_config(exp.model, exp.model_params, exp.seed), epochs=args.epochs)
    if cfg.library != "rectools":
        raise SystemExit(f"{args.run} is not a RecTools row")
    python = peers.ensure_venv("rectools", ROOT / "runs" / "peers")
    from seqrec.experiment import evaluate_model

    split = runner.prepared_data(spec).split
    users = np.asarray(split.valid.rows)

    def score(lists: np.ndarray):
        model = peers.TopKLists(split.train, users, lists, split.train.n_items, cfg.max_len)
        return evaluate_model(model, exp, split.valid, fit_data=split.train)

    variants = {"uninterrupted": None, "resumed": True, "resumed, fix off": False, "killed (SIGKILL)": "kill"}
    results = {}
    for name, keep in variants.items():
        if args.variants and name not in args.variants.split(","):
            continue
        work = (Path(args.work) / name.replace(", ", "-").replace(" ", "-").replace("(", "").replace(")", "")).resolve()
        shutil.rmtree(work, ignore_errors=True)
        peers.export_split(split, work)
        stopped_after = None
        if keep is None:
            info = peers.run_worker(cfg, python, work, None)
        elif keep == "kill":
            stopped_after = kill_after(cfg, python, work, args.stop_after)
            info = peers.run_worker(cfg, python, work, None)
        else:
            stopped_after = peers.run_worker(cfg, python, work, time.time() + args.stop_after,
                                             extra={"keep_weights_on_resume": keep})["epochs"]
            info = peers.run_worker(cfg, python, work, None, extra={"keep_weights_on_resume": keep})
        results[name] = {"stopped_after_epoch": stopped_after,
                         "resumed_from_epoch": info.get("resumed_from_epoch"),
                         "curve": curve(work, score, args.epochs)}
        print(name, "resumed from", info.get("resumed_from_epoch"),
              [round(c["NDCG@10"], 4) for c in results[name]["curve"]], flush=True)
    previous = OUT / "peer_resume_rectools.json"
    earlier: list[str] = []
    if args.variants and previous.exists():  # a subset rerun keeps the other variants' rows
        old = json.loads(previous.read_text())
        kept = old["results"]
        earlier = [c for c in old.get("earlier_commands", []) + [old["command"]]
                   if any(name not in results for name in kept)]
        results = {name: results.get(name, kept.get(name)) for name in variants
                   if name in results or name in kept}
    record = base_record(benchmark="peer_resume_rectools", run=args.run, dataset=spec.dataset,
                         peer_config=dataclasses.asdict(cfg), results=results)
    if earlier:  # the commands that measured the rows kept from earlier runs
        record["earlier_commands"] = earlier
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "peer_resume_rectools.json").write_text(json.dumps(record, indent=2) + "\n")
    (OUT / "peer_resume_rectools.md").write_text(markdown(record))


def markdown(record: dict) -> str:
    results = record["results"]
    epochs = [c["epoch"] for c in next(iter(results.values()))["curve"]]
    lines = [f"# A resumed RecTools peer run: {record['run']} ({record['dataset']}), seed 0", "",
             "Validation NDCG@10 after each epoch (the worker's lists, by seqrec's evaluator as "
             "the peers table scores them). The resumed runs stopped on a deadline after the epoch "
             "shown and were restarted in the same directory; the killed run got SIGKILL (no chance to "
             "save) and restarted from the last epoch its worker had saved.", "",
             "| variant | stopped after | " + " | ".join(f"ep {e}" for e in epochs) + " |",
             "|---|---|" + "---|" * len(epochs)]
    for name, r in results.items():
        cells = " | ".join(f"{c['NDCG@10']:.4f}" for c in r["curve"])
        lines.append(f"| {name} | {r['stopped_after_epoch'] or '-'} | {cells} |")
    lines += ["", "With the fix off, the first resumed epoch falls back to the first epoch's level "
              "(RecTools' on_train_start draws fresh weights unless the module is marked fitted); "
              "with the fix, the run continues from its checkpoint (not bit-exact: resumed epochs "
              "reseed the shuffle).", "",
              f"Command: `{record['command']}`"
              + "".join(f" (earlier rows: `{c}`)" for c in record.get("earlier_commands", []))
              + ". Hardware: "
              f"{hardware_line(dict(record['hardware'], torch_threads=None))}; the worker's torch "
              f"threads: {record['peer_config']['num_threads']}. Seed 0.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
