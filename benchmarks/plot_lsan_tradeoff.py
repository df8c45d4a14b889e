"""LSAN's compression trade-off on Amazon Beauty (S3-Rec): accuracy against model size for
m1 in {2, 3, 4}, LSAN without compression (LSAN_full.emb) and SASRec at the same D = 128
(issue 15, must-show 2).

Nothing is trained here. Accuracy comes from the run records of the ``lsan`` reproduction
table (``configs/reproduce/lsan.toml``, ``docs/reproduce/runs/<key>.json``: finished records,
or the best-so-far record of an unfinished run, marked as such); size (parameters, item-embedding
memory, saved-model bytes) from ``docs/results/lsan_size.json`` (``benchmarks/bench_lsan_size.py``),
and the record's own parameter count where that file has no row for the model.

    PYTHONPATH=src .venv/bin/python benchmarks/plot_lsan_tradeoff.py

Writes docs/results/lsan_tradeoff.{json,md,png}.
"""

from __future__ import annotations

import json
from pathlib import Path

from seqrec.evaluation.results import base_record, hardware_line
from seqrec_lab.harness import RESULTS_DIR, RUNS_DIR, plan
from seqrec_lab.spec import load_table

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "results"
# table row -> the row of lsan_size.json with the same architecture (None: not measured there)
ROWS = {
    "lsan-beauty": "LSAN m1=2",
    "lsan-m1-3-beauty": "LSAN m1=3",
    "lsan-m1-4-beauty": "LSAN m1=4",
    "lsan-fullemb-beauty": None,
    "sasrec-d128-beauty": "SASRec (2 blocks)",
    "sasrec-bce-d128-beauty": "SASRec (2 blocks)",  # the same model, trained with BCE
}
METRICS = ("NDCG@10", "HR@10")


def collect() -> list[dict]:
    table = load_table("lsan", ROOT)
    size = json.loads((OUT / "lsan_size.json").read_text())["models"]
    specs = tuple(s for s in table.runs if s.run_id in ROWS and s.seed == 0)
    rows = []
    for p in plan(table, specs, ROOT / RUNS_DIR, ROOT / RESULTS_DIR):
        rec = p.cached or p.partial
        measured = size.get(ROWS[p.spec.run_id] or "", {}).get("size", {})
        row = {"run": p.spec.run_id, "label": p.spec.label, "key": p.key,
               "status": "finished" if p.cached else ("partial" if p.partial else "not run"),
               "params": (rec or {}).get("params") or measured.get("parameters"),
               "item_embedding_bytes": measured.get("item_embedding_bytes"),
               "saved_bytes": measured.get("saved_bytes")}
        if rec is not None:
            row.update({m: rec["metrics"]["test"].get(m) for m in METRICS})
            row.update(epochs=rec.get("epochs"), best_epoch=rec.get("best_epoch"),
                       best_valid=rec.get("best_valid"))
        rows.append(row)
    sasrec = next((r for r in rows if r["run"] == "sasrec-d128-beauty"), None)
    for r in rows:
        if sasrec and sasrec.get("params") and r.get("params"):
            r["params_share_of_sasrec"] = r["params"] / sasrec["params"]
        if sasrec and sasrec.get("NDCG@10") and r.get("NDCG@10"):
            r["ndcg10_vs_sasrec"] = r["NDCG@10"] / sasrec["NDCG@10"] - 1
    return rows


def plot(rows: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for r in rows:
        if r.get("NDCG@10") is None or not r.get("params"):
            continue
        partial = r["status"] == "partial"
        ax.scatter(r["params"] / 1e6, r["NDCG@10"], marker="o" if not partial else "s",
                   facecolors="none" if partial else "C0", edgecolors="C0", s=50)
        ax.annotate(r["label"] + (" (unfinished)" if partial else ""),
                    (r["params"] / 1e6, r["NDCG@10"]), fontsize=7,
                    xytext=(4, 4), textcoords="offset points")
    most = max((r["params"] for r in rows if r.get("params")), default=1) / 1e6
    ax.set_xlim(0, most * 1.6)  # room for the labels right of the points
    ax.set(xlabel="trainable parameters (millions)", ylabel="test NDCG@10",
           title="LSAN compression on Beauty (S3-Rec), D = 128")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata={"Software": None})
    plt.close(fig)
    return True


def _fmt(v, spec: str) -> str:
    return "–" if v is None else format(v, spec)


def main() -> None:
    rows = collect()
    command = "PYTHONPATH=src .venv/bin/python benchmarks/plot_lsan_tradeoff.py"
    record = base_record(benchmark="lsan_tradeoff", command=command, dataset="amazon-beauty-s3rec",
                         protocol="leave-last-out, full ranking, history filter (the lsan table)",
                         seed=0, rows=rows)
    (OUT / "lsan_tradeoff.json").write_text(json.dumps(record, indent=2) + "\n")
    has_plot = plot(rows, OUT / "lsan_tradeoff.png")
    lines = [
        "# LSAN: accuracy against size on Amazon Beauty (S3-Rec), D = 128",
        "",
        "Accuracy: test metrics of the `lsan` reproduction table's records, seed 0 (an unfinished "
        "run shows its best-so-far record). Size: `docs/results/lsan_size.md` (untrained models "
        "of the same shapes; saved model = `Recommender.save`).",
        "",
        "| run | status | params | % of SASRec | item-embedding MiB | saved MiB | test NDCG@10 | "
        "test HR@10 | NDCG@10 vs SASRec | epochs (best) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        share = r.get("params_share_of_sasrec")
        rel = r.get("ndcg10_vs_sasrec")
        mib = (lambda b: None if b is None else b / 2**20)
        lines.append(
            f"| {r['label']} | {r['status']} | {_fmt(r.get('params'), ',')} | "
            f"{_fmt(None if share is None else 100 * share, '.1f')} | "
            f"{_fmt(mib(r.get('item_embedding_bytes')), '.2f')} | {_fmt(mib(r.get('saved_bytes')), '.2f')} | "
            f"{_fmt(r.get('NDCG@10'), '.4f')} | {_fmt(r.get('HR@10'), '.4f')} | "
            f"{_fmt(None if rel is None else 100 * rel, '+.1f')}{'' if rel is None else '%'} | "
            f"{r.get('epochs', '–')} ({r.get('best_epoch', '–')}) |")
    if has_plot:
        lines += ["", "![lsan_tradeoff.png](lsan_tradeoff.png)"]
    lines += ["", f"Hardware of this script: {hardware_line(record['hardware'])}. The training "
              "hardware and load are in each run's record.", "", f"Command: `{command}`", ""]
    (OUT / "lsan_tradeoff.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
