"""``seqrec runs``: every trained run under a folder in one table, best first by the
validation metric (the number a model is chosen by; the test column is for reporting).

Runs are compared only within one group of identical data and protocol (the dataset's
fingerprint after preprocessing, the split protocol and the seen-item filter): a table that
mixed them would rank numbers that do not measure the same thing. Runs started but not
finished (a checkpoint and no result yet) are listed with how to resume them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from seqrec.cli.table import format_table
from seqrec.errors import ConfigError, did_you_mean

RESULT = "result.json"


def find_results(root: Path) -> list[Path]:
    """``root/result.json`` or the results one and two levels below (``runs/<run>`` of
    ``seqrec train``, ``runs/demo/<model>`` of ``seqrec demo``)."""
    if (root / RESULT).is_file():
        return [root / RESULT]
    return sorted(root.glob(f"*/{RESULT}")) + sorted(root.glob(f"*/*/{RESULT}"))


def find_unfinished(root: Path) -> list[Path]:
    """Run directories with a checkpoint and no result: stopped before the end."""
    candidates = [root] + sorted(p for p in root.glob("*") if p.is_dir())
    return [
        p
        for p in candidates
        if (p / "checkpoint" / "last.pt").is_file() and not (p / RESULT).is_file()
    ]


def _group(record: dict[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(record.get("dataset")),
        str(record.get("dataset_fingerprint")),
        str(record.get("protocol")),
        str(record.get("seen_filter")),
    )


def _row(run: Path, record: dict[str, Any], metric: str) -> list[Any]:
    metrics = record.get("metrics", {})
    variant = record.get("variant")
    model = f"{record.get('model')} ({variant})" if variant else str(record.get("model"))
    stopped = (record.get("stopped") or "-").replace("_", " ")
    return [
        str(run),
        model,
        metrics.get("valid", {}).get(metric),
        metrics.get("test", {}).get(metric),
        metrics.get("test", {}).get("HR@10"),
        record.get("epochs"),
        stopped,
        record.get("train_seconds"),
    ]


def _rank_key(record: dict[str, Any], metric: str) -> tuple[float, float]:
    """Validation first (test breaks ties; a run without validation goes after those with)."""
    metrics = record["metrics"]
    valid, test = metrics.get("valid", {}).get(metric), metrics.get("test", {}).get(metric)
    return (
        -valid if valid is not None else float("inf"),
        -test if test is not None else float("inf"),
    )


def _resume_command(run: Path) -> str:
    try:
        return json.loads((run / "experiment.json").read_text())["command"]
    except (OSError, ValueError, KeyError, TypeError):
        return "its seqrec train command"


def leaderboard(roots: list[Path], metric: str = "NDCG@10") -> tuple[str, int]:
    """The text of the tables and the number of finished runs in them."""
    groups: dict[tuple[str, str, str, str], list[tuple[Path, dict[str, Any]]]] = {}
    unreadable, unfinished = [], []
    for root in roots:
        if not root.is_dir():
            raise ConfigError(
                f"{root} is not a folder (seqrec train writes runs under ./runs; pass "
                "the folder you gave as output or --out)"
            )
        for path in find_results(root):
            try:
                record = json.loads(path.read_text())
                if not isinstance(record.get("metrics"), dict):
                    raise ValueError("no metrics")
            except (OSError, ValueError):
                unreadable.append(path)
                continue
            groups.setdefault(_group(record), []).append((path.parent, record))
        unfinished += find_unfinished(root)
    known = {m for runs in groups.values() for _, r in runs for m in r["metrics"].get("test", {})}
    metric = next((m for m in known if m.lower() == metric.lower()), metric)  # ndcg@10 = NDCG@10
    if groups and metric not in known:
        raise ConfigError(
            f"no run reports {metric!r}{did_you_mean(metric, known)}; the results "
            f"hold {', '.join(sorted(known))}"
        )
    parts = []
    headers = [
        "run",
        "model",
        f"valid {metric}",
        f"test {metric}",
        "test HR@10",
        "epochs",
        "stopped by",
        "train s",
    ]
    for (dataset, fingerprint, protocol, seen), runs in sorted(groups.items()):
        runs.sort(key=lambda rr: _rank_key(rr[1], metric))
        parts.append(f"{dataset} | {protocol} | seen filter: {seen} | data {fingerprint}")
        parts.append(format_table(headers, [_row(run, rec, metric) for run, rec in runs]))
        parts.append("")
    for path in unreadable:
        parts.append(f"note: {path} is not a readable result file (skipped)")
    for run in unfinished:
        parts.append(
            f"unfinished: {run} (a checkpoint, no result yet); to resume, rerun: "
            f"{_resume_command(run)}"
        )
    n = sum(len(runs) for runs in groups.values())
    if not n and not unfinished:
        parts.append(
            f"no trained runs under {', '.join(map(str, roots))} (seqrec train writes "
            "RUN/result.json)"
        )
    return "\n".join(parts).rstrip(), n


def cmd_runs(args: argparse.Namespace) -> int:
    roots = [Path(p) for p in (args.dirs or ["runs"])]
    if not args.dirs and not roots[0].is_dir() and find_results(Path(".")):
        # runs trained with --out DIR next to the data, no ./runs: show those
        print("note: no ./runs folder here; showing the runs found in the current folder")
        roots = [Path(".")]
    text, _ = leaderboard(roots, args.metric)
    print(text)
    return 0
