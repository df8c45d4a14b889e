"""The "side by side" section of a report whose table holds peer rows (:mod:`.peers`).

Per dataset, one line per row: test NDCG@10 / Recall@10 (mean ± sd over the finished seeds),
seconds per epoch, the training seconds to the row's own best validation NDCG@10, the training
seconds seqrec's row (the dataset's first non-peer row, same seed) took to first reach that
best, the peak resident memory of the training process and the machine's load while it trained.
Everything is read from the run records (``validation_history`` holds every validation with its
training seconds), so the same records always give the same section.
"""

from __future__ import annotations

import math
from typing import Any

from seqrec_lab.peers import is_peer

METRIC = "NDCG@10"


def _mean_sd(vals: list[float]) -> str:
    if not vals:
        return "–"
    m = sum(vals) / len(vals)
    if len(vals) < 2:
        return f"{m:.4f}"
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return f"{m:.4f} ± {sd:.4f}"


def _avg(vals: list[float | None], digits: int) -> str:
    vals = [v for v in vals if v is not None]
    return "–" if not vals else f"{sum(vals) / len(vals):.{digits}f}"


def best_point(rec: dict[str, Any], metric: str = METRIC) -> dict[str, Any] | None:
    """The first validation with the run's best ``metric``."""
    hist = [h for h in rec.get("validation_history") or [] if metric in h.get("metrics", {})]
    return max(hist, key=lambda h: h["metrics"][metric]) if hist else None


def seconds_to_reach(rec: dict[str, Any], target: float, metric: str = METRIC) -> float | None:
    """Training seconds until ``metric`` first reached ``target`` (None: never)."""
    for h in rec.get("validation_history") or []:
        if h.get("metrics", {}).get(metric, -math.inf) >= target:
            return float(h["train_seconds"])
    return None


def seconds_per_epoch(rec: dict[str, Any]) -> float | None:
    if rec.get("seconds_per_epoch") is not None:
        return rec["seconds_per_epoch"]
    epochs, secs = rec.get("epochs"), rec.get("train_seconds")
    return secs / epochs if epochs and secs is not None else None


def library_of(rec: dict[str, Any]) -> str:
    if rec.get("library"):
        return f"{rec['library']} {rec.get('library_version') or ''}".strip()
    return f"seqrec {rec.get('versions', {}).get('seqrec', '')}".strip()


def peer_blocks(table, planned) -> list[tuple]:
    """Report blocks of the side-by-side comparison (empty when the table has no peer row)."""
    if not any(is_peer(p.spec.model) for p in planned):
        return []
    datasets = list(dict.fromkeys(p.spec.dataset for p in planned))
    headers = [
        "row",
        "library",
        "seeds",
        "test NDCG@10",
        "test Recall@10",
        "best valid NDCG@10",
        "epochs",
        "s/epoch",
        "s to own best valid",
        "seqrec s to reach it",
        "seqrec faster by",
        "peak RSS MB",
        "load",
        "status",
    ]
    blocks: list[tuple] = [
        ("h2", "Side by side"),
        (
            "p",
            (
                "Per row, over its seeds: test NDCG@10 / Recall@10 (mean ± sd), the best validation "
                "NDCG@10 (seqrec's evaluator), epochs, training seconds per epoch (each library's own epoch), "
                "training seconds to the row's own best validation NDCG@10, the training seconds seqrec's row "
                "took to first reach that value (same seed; 'never (n)' = n seeds where it never did), their "
                "ratio (seqrec faster by: the row's seconds over seqrec's, mean over seeds), the peak resident "
                "memory of the training process (seqrec: the harness's worker process, data loading included; a "
                "peer: its worker process in its venv, its own data loading included), and the machine's "
                "1-minute load average while it trained (mean of samples). Training seconds exclude "
                "validation. Unfinished (partial) runs are shown apart and are not converged."
            ),
        ),
    ]
    for ds in datasets:
        rows_of = [p for p in planned if p.spec.dataset == ds]
        ref_id = next((p.spec.run_id for p in rows_of if not is_peer(p.spec.model)), None)
        ref = {p.spec.seed: p.cached or p.partial for p in rows_of if p.spec.run_id == ref_id}
        lines = []
        for run_id in dict.fromkeys(p.spec.run_id for p in rows_of):
            ps = [p for p in rows_of if p.spec.run_id == run_id]
            done = [p.cached for p in ps if p.cached]
            part = [p.partial for p in ps if not p.cached and p.partial]
            for recs, status in ((done, "finished"), (part, "unfinished (best so far)")):
                if not recs:
                    continue
                bests = [best_point(r) for r in recs]
                reach, ratios, never = [], [], 0
                for r, b in zip(recs, bests, strict=True):
                    mine = ref.get(r["seed"])
                    if run_id == ref_id or b is None or mine is None:
                        continue
                    t = seconds_to_reach(mine, b["metrics"][METRIC])
                    if t is None:
                        never += 1
                    else:
                        reach.append(t)
                        ratios.append(b["train_seconds"] / t if t > 0 else None)
                reach_cell = (
                    "–"
                    if run_id == ref_id
                    else _avg(reach, 0) + (f", never ({never})" if never else "")
                )
                ratio_cell = (
                    "–"
                    if run_id == ref_id
                    else _avg(ratios, 1) + ("x" if _avg(ratios, 1) != "–" else "")
                )
                loads = [(r.get("load_average") or {}).get("mean") for r in recs]
                lines.append(
                    [
                        ps[0].spec.label,
                        library_of(recs[0]),
                        ",".join(str(r["seed"]) for r in recs),
                        _mean_sd(
                            [
                                r["metrics"]["test"]["NDCG@10"]
                                for r in recs
                                if "NDCG@10" in r["metrics"]["test"]
                            ]
                        ),
                        _mean_sd(
                            [
                                r["metrics"]["test"]["Recall@10"]
                                for r in recs
                                if "Recall@10" in r["metrics"]["test"]
                            ]
                        ),
                        _mean_sd([b["metrics"][METRIC] for b in bests if b]),
                        _avg([r.get("epochs") for r in recs], 0),
                        _avg([seconds_per_epoch(r) for r in recs], 2),
                        _avg([b["train_seconds"] for b in bests if b], 0),
                        reach_cell,
                        ratio_cell,
                        _avg([r.get("peak_rss_mb") for r in recs], 0),
                        _avg(loads, 2),
                        status,
                    ]
                )
            if not done and not part:
                lines.append([ps[0].spec.label, ps[0].spec.model, "–", *["–"] * 10, "not run"])
        blocks += [("p", f"**{ds}** (seqrec's row: `{ref_id}`)"), ("table", headers, lines)]
    return blocks
