"""GPU epochs of SASRec, LRURec and HSTU on ML-1M: s/epoch and accuracy parity with the CPU runs.

Prepared for a machine with NVIDIA GPUs (not run on the project's CPU machine):

    python benchmarks/device/bench_gpu.py                      # on the GPU machine, < 8 min
    python benchmarks/device/bench_gpu.py --dry-run            # tiny CPU version (CI checks it)

For each model it trains ``--epochs`` epochs (default 4, validating at epochs 2 and 4 like the
CPU runs) with the configuration of the recorded CPU run (``docs/results/<cpu>.json``: same
windows, length, width, batch, lr, seed and data order) in these variants, each a fresh model:

* ``fp32``: float32, eager;
* ``bf16``: ``torch.autocast(bfloat16)`` around the forward and the loss (AMP; the weights and
  AdamW stay float32);
* ``bf16+compile``: the same with the encoder under ``torch.compile`` (the loss's chunked
  cross-entropy stays eager); ``--compile-fp32`` adds ``fp32+compile``;
* ``ddpN``: with N > 1 visible GPUs, the ``bf16`` variant under ``torchrun --nproc-per-node N``
  (one process per GPU, NCCL, the same global batch).

It reports, per run: the first epoch's seconds (compilation included), the steady s/epoch (the
training seconds between the first and the last validation, per epoch, validation excluded),
the speed-up against the CPU run's s/epoch, and the validation NDCG@10 at each validated epoch
against the CPU run's curve at the same epoch (``docs/results/<cpu>.validation.jsonl``; GPU
dropout masks differ from the CPU's, so parity means ``|diff| <= max(0.005, 5% of the CPU
value)``). A run that fails (e.g. an op without a bf16 kernel) is recorded with its error; a
run that would start after ``--budget`` seconds is skipped and listed as such.

Data: ML-1M as the CPU runs read it (``seqrec.data.sources.load("ml-1m")``): put
``ml-1m.seq.tsv.xz`` in ``$SEQREC_DATA_DIR`` or pass ``--data-root`` (a device session can
carry it in an ignored folder such as ``runs/data``). Writes ``docs/results/gpu.{json,md}``
(``--out`` to change) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
# model -> the CPU run whose config and validation curve are the reference
CPU_RUNS = {
    "sasrec": "sasrec_ml1m_ce_windows",
    "lrurec": "lrurec_ml1m",
    "hstu": "hstu_ml1m_ce_hstu",
}
TINY = {"max_len": 12, "dim": 16, "n_blocks": 1, "batch_size": 16, "num_threads": 1}


# --- one run ----------------------------------------------------------------------------------
def model_class(name: str, amp: bool, compile_mode: str | None):
    """The registry's model with AMP and/or a compiled encoder in its training step."""
    import torch

    from seqrec.registry import get_model, settings_class

    _, base = get_model(name)
    config_cls = settings_class(name)  # the flat form: model, train and run fields together

    class Variant(base):
        _compiled = None

        def compute_loss(self, data):
            if compile_mode and self._net is not None and self._net is not self._compiled:
                self._compiled = torch.compile(self._net, backend=compile_mode)
                self._net = self._compiled
            if not amp:
                return super().compute_loss(data)
            with torch.autocast(self.device.type, dtype=torch.bfloat16):
                return super().compute_loss(data)

    Variant.name = name
    return config_cls, Variant


def reference(name: str, dry: bool) -> tuple[dict, dict[int, float], float | None]:
    """(config fields, CPU validation NDCG@10 by epoch, CPU s/epoch) of the reference run."""
    if dry:
        return dict(TINY), {}, None
    rec = json.loads((RESULTS / f"{CPU_RUNS[name]}.json").read_text())
    curve = {}
    log = RESULTS / f"{CPU_RUNS[name]}.validation.jsonl"
    if log.exists():
        for line in log.read_text().splitlines():
            row = json.loads(line)
            curve.setdefault(int(row["epoch"]), float(row["metrics"]["NDCG@10"]))
    per_epoch = rec.get("seconds_per_epoch") or (
        rec["train_seconds"] / rec["epochs"] if rec.get("epochs") else None
    )
    return dict(rec["config"]), curve, per_epoch


def data(dry: bool, root: str | None):
    if dry:
        from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

        train, valid, _ = leave_last_out_small(markov_sequences(n_users=96, n_items=40, seed=0))
        return train, valid
    from seqrec.data.preprocess import PreprocessConfig, preprocess
    from seqrec.data.sources import load
    from seqrec.data.splits import leave_last_out

    split = leave_last_out(
        preprocess(
            load("ml-1m", root=root), PreprocessConfig(filter="k_core", min_item=5)
        ).sequences()
    )
    return split.train, split.valid


def run_one(name: str, variant: str, args) -> dict:
    """Train one variant in this process; returns its figures."""
    import dataclasses

    import torch

    amp = variant.startswith("bf16")
    compile_mode = ("eager" if args.dry_run else "inductor") if "compile" in variant else None
    config_cls, cls = model_class(name, amp, compile_mode)
    fields, curve, cpu_epoch = reference(name, args.dry_run)
    valid_names = {f.name for f in dataclasses.fields(config_cls)}
    fields = {
        k: (tuple(v) if isinstance(v, list) else v) for k, v in fields.items() if k in valid_names
    }
    device = "cpu" if args.dry_run else "cuda"
    cfg = config_cls(
        **{
            **fields,
            "epochs": args.epochs,
            "eval_every": 2,
            "patience": 0,
            "device": device,
            "num_threads": fields.get("num_threads", 0) if args.dry_run else 0,
            "max_train_seconds": 0.0,
        }
    )
    train, valid = data(args.dry_run, args.data_root)
    t0 = time.perf_counter()
    model = cls(cfg).fit(train, valid, progress=False)
    wall = time.perf_counter() - t0
    lg = model.training_log
    if lg.world_size > 1 and int(os.environ.get("RANK", "0")) != 0:
        return {}
    hist = lg.history
    first = hist[0]["train_seconds"] / hist[0]["epoch"] if hist else None
    steady = (
        (hist[-1]["train_seconds"] - hist[0]["train_seconds"])
        / (hist[-1]["epoch"] - hist[0]["epoch"])
        if len(hist) > 1
        else first
    )
    parity = []
    for h in hist:
        gpu, cpu = h["metrics"]["NDCG@10"], curve.get(h["epoch"])
        ok = None if cpu is None else abs(gpu - cpu) <= max(0.005, 0.05 * cpu)
        parity.append(
            {
                "epoch": h["epoch"],
                "ndcg10": gpu,
                "cpu_ndcg10": cpu,
                "ok": ok,
                "train_loss": h.get("train_loss"),
            }
        )
    return {
        "model": name,
        "variant": variant,
        "world_size": lg.world_size,
        "first_epochs_s_per_epoch": first,
        "steady_s_per_epoch": steady,
        "cpu_s_per_epoch": cpu_epoch,
        "speedup_vs_cpu": (cpu_epoch / steady) if (cpu_epoch and steady) else None,
        "wall_s": wall,
        "parity": parity,
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (dry run)",
        "peak_gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None,
    }


# --- driver -----------------------------------------------------------------------------------
def child(args, name: str, variant: str, nproc: int = 1) -> dict:
    out = Path(args.tmp) / f"{name}-{variant}.json"
    base = [
        __file__,
        "--child",
        name,
        variant,
        "--child-out",
        str(out),
        "--epochs",
        str(args.epochs),
    ]
    base += ["--dry-run"] if args.dry_run else []
    base += ["--data-root", args.data_root] if args.data_root else []
    if nproc > 1:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc-per-node={nproc}",
            *base,
        ]
    else:
        cmd = [sys.executable, *base]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not out.exists():
        lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
        return {
            "model": name,
            "variant": variant,
            "error": (lines or ["no output"])[-1][:300],
            "wall_s": time.perf_counter() - t0,
        }
    return json.loads(out.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dry-run", action="store_true", help="tiny CPU version (no GPU, no ML-1M)")
    ap.add_argument("--models", default="sasrec,lrurec,hstu")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument(
        "--budget",
        type=float,
        default=360.0,
        help="start no run after this many s (a compiled run can take ~90 s more)",
    )
    ap.add_argument("--compile-fp32", action="store_true", help="also fp32 + torch.compile")
    ap.add_argument(
        "--gpus", type=int, default=None, help="processes of the DDP run (default: all)"
    )
    ap.add_argument("--data-root", default=None, help="folder holding ml-1m.seq.tsv.xz")
    ap.add_argument("--out", default=None, help="result stem (default docs/results/gpu)")
    ap.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--child-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    if args.child:
        result = run_one(*args.child, args)
        if result:
            Path(args.child_out).write_text(json.dumps(result))
        from seqrec.training import distributed

        distributed.shutdown()  # under torchrun: every rank leaves the group together
        distributed.exit_if_left_group(0)  # and skips the finalization where gloo may abort
        return

    import tempfile

    import torch

    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run with --dry-run for the CPU check")
    gpus = args.gpus or (2 if args.dry_run else torch.cuda.device_count())
    variants = ["fp32", "bf16", "bf16+compile"] + (["fp32+compile"] if args.compile_fp32 else [])
    t_start = time.perf_counter()
    runs, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        args.tmp = tmp
        plan = [(m, v, 1) for m in args.models.split(",") for v in variants]
        if gpus > 1:
            plan += [(m, f"ddp{gpus}", gpus) for m in args.models.split(",")]
        for name, variant, nproc in plan:
            if time.perf_counter() - t_start > args.budget:
                skipped.append(f"{name}/{variant}")
                continue
            if args.dry_run and nproc == 1:  # in-process: the CPU check stays quick
                try:
                    res = run_one(name, variant, args)
                except Exception as exc:  # noqa: BLE001 - recorded like a child's failure
                    res = {
                        "model": name,
                        "variant": variant,
                        "error": f"{type(exc).__name__}: {exc}"[:300],
                    }
            else:
                res = child(args, name, variant if nproc == 1 else "bf16", nproc)
            res["variant"] = variant
            runs.append(res)
            print(line(res), flush=True)
    from seqrec.evaluation.results import base_record

    record = base_record(
        benchmark="gpu_epochs",
        dry_run=args.dry_run,
        epochs=args.epochs,
        gpus=gpus,
        runs=runs,
        skipped=skipped,
        total_seconds=time.perf_counter() - t_start,
        cuda=torch.version.cuda,
        reference_runs=CPU_RUNS,
    )
    md = render(record)
    print(md)
    stem = Path(args.out) if args.out else RESULTS / ("gpu_dry_run" if args.dry_run else "gpu")
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    stem.with_suffix(".md").write_text(md)


def _f(x, fmt="{:.2f}") -> str:
    return "–" if x is None else fmt.format(x)


def line(r: dict) -> str:
    if "error" in r:
        return f"{r['model']:7s} {r['variant']:13s} ERROR {r['error']}"
    par = ", ".join(
        f"ep{p['epoch']} {p['ndcg10']:.4f}/{_f(p['cpu_ndcg10'], '{:.4f}')}" for p in r["parity"]
    )
    return (
        f"{r['model']:7s} {r['variant']:13s} first {_f(r['first_epochs_s_per_epoch'])} s/ep, "
        f"steady {_f(r['steady_s_per_epoch'])} s/ep, x{_f(r['speedup_vs_cpu'], '{:.1f}')} vs CPU; "
        f"NDCG@10 gpu/cpu {par}"
    )


def render(r: dict) -> str:
    from seqrec.evaluation.results import hardware_line

    dev = next((x.get("device") for x in r["runs"] if x.get("device")), "?")
    md = [
        f"# GPU epochs on ML-1M{' (DRY RUN: tiny CPU data, numbers meaningless)' if r['dry_run'] else ''}",
        "",
        f"Command: `{r['command']}`  ",
        f"Device: {dev}, {r['gpus']} GPU(s), CUDA {r['cuda']}  ",
        f"Host: {hardware_line(r['hardware'])}  ",
        f"Created: {r['created']}",
        "",
        "Configs and CPU curves: "
        + ", ".join(f"{m} = `{s}`" for m, s in r["reference_runs"].items()),
        "",
        "| model | variant | s/epoch (first) | s/epoch (steady) | CPU s/epoch | speed-up | "
        "validation NDCG@10 GPU / CPU (epoch) | parity |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for x in r["runs"]:
        if "error" in x:
            md.append(f"| {x['model']} | {x['variant']} | error: {x['error']} |  |  |  |  |  |")
            continue
        par = "; ".join(
            f"{p['ndcg10']:.4f} / {_f(p['cpu_ndcg10'], '{:.4f}')} ({p['epoch']})"
            for p in x["parity"]
        )
        oks = [p["ok"] for p in x["parity"] if p["ok"] is not None]
        verdict = "no CPU curve" if not oks else ("yes" if all(oks) else "NO")
        md.append(
            f"| {x['model']} | {x['variant']} | {_f(x['first_epochs_s_per_epoch'])} | "
            f"{_f(x['steady_s_per_epoch'])} | {_f(x['cpu_s_per_epoch'], '{:.0f}')} | "
            f"{_f(x['speedup_vs_cpu'], '{:.1f}x')} | {par} | {verdict} |"
        )
    if r["skipped"]:
        md += ["", f"Skipped (time budget): {', '.join(r['skipped'])}"]
    md += ["", f"Total: {r['total_seconds']:.0f} s.", ""]
    return "\n".join(md)


if __name__ == "__main__":
    main()
