"""Result tables and file names shared by ``seqrec train`` / ``evaluate`` (:mod:`.commands`)
and ``seqrec demo`` (:mod:`.demo`), apart so that neither command module imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seqrec.cli.table import format_table

TABLE_METRICS = ("HR@10", "NDCG@10", "HR@20", "NDCG@20", "MRR", "COV@10")


def table_metrics(ks: Any = (10, 20)) -> tuple[str, ...]:
    """The columns of a results table for the cut-offs evaluated (``eval.ks``):
    ``TABLE_METRICS`` when they include 10 and 20 (the default [5, 10, 20] does), else HR and
    NDCG at (up to three of) them, MRR and coverage at the smallest."""
    ks = sorted({int(k) for k in ks})
    if not ks or {10, 20} <= set(ks):
        return TABLE_METRICS
    shown = ks[:3]
    return (*(f"{m}@{k}" for k in shown for m in ("HR", "NDCG")), "MRR", f"COV@{shown[0]}")


def results_table(records: list[dict[str, Any]], split: str = "test") -> str:
    columns = table_metrics(records[0].get("ks") or ()) if records else TABLE_METRICS
    rows = []
    for rec in records:
        metrics = rec["metrics"][split]
        stopped = (rec.get("stopped") or "-").replace("_", " ")
        rows.append(
            [rec["model"] + (f" ({rec['variant']})" if rec.get("variant") else "")]
            + [metrics.get(m) for m in columns]
            + [rec.get("train_seconds"), stopped]
        )
    return format_table(["model", *columns, "fit s", "stopped by"], rows)


def write_records(records: list[dict[str, Any]], out_dir: Path, stem: str) -> None:
    from seqrec.evaluation.results import write_result

    for rec in records:
        write_result(rec, out_dir, f"{stem}-{rec['model']}")


def results_header(record: dict[str, Any]) -> str:
    return (
        f"{record['dataset']} | {record['protocol']} | {record.get('ranking', 'full')} ranking"
        f" | seen filter: {record.get('seen_filter')} | test metrics"
    )


def slug(name: str) -> str:
    return Path(name).stem.replace(".", "-") if "/" in name or "." in name else name
