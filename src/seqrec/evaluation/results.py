"""Result records: one JSON object per run (the record) plus a Markdown table (for people).

The JSON schema is the one of DESIGN.md section 4::

    {"model", "variant", "dataset", "dataset_fingerprint", "protocol", "ranking", "seen_filter",
     "window", "average", "ties", "ks", "metrics": {split: {name: value}},
     "ci95": {split: {name: [lo, hi]}}, "n_targets": {split: n}, "seed", "config", "epochs",
     "train_seconds", "eval_seconds", "eval_seconds_by_split", "hardware", "versions",
     "command", "created", ...}

``hardware`` is an object (platform, processor, cpu_model, cpu_count, torch_threads,
torch_cpu_capability) rather than one
string, so tools can filter on it; :func:`hardware_line` renders it for people.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from seqrec.atomic import atomic_write
from seqrec.errors import ConfigError

_PACKAGES = ("numpy", "scipy", "torch", "polars", "seqrec")
DEFAULT_METRICS = ("HR@10", "NDCG@10", "MRR", "COV@10")


def _version(name: str) -> str | None:
    mod = sys.modules.get(name)
    if mod is not None and getattr(mod, "__version__", None):
        return str(mod.__version__)
    try:  # reads package metadata: never imports the package (torch stays unimported)
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    """Python and package versions, without importing anything not imported yet."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    out.update({name: _version(name) for name in _PACKAGES})
    return out


def hardware() -> dict[str, Any]:
    """Platform, processor, CPU model, CPU count and (if torch is already imported) its thread
    count and the instruction set its CPU kernels use. The last two matter for exact
    reproduction: the same seed gives the same numbers for the same thread count and kernels,
    while AVX2 and AVX-512 kernels round differently and training then drifts apart."""
    torch = sys.modules.get("torch")
    out = {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads() if torch is not None else None,
    }
    if torch is not None:
        out["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    return out


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def hardware_line(hw: Mapping[str, Any] | str) -> str:
    if isinstance(hw, str):
        return hw
    line = f"{hw.get('platform')}, {hw.get('processor')}, {hw.get('cpu_count')} CPUs"
    if hw.get("cpu_model"):
        line += f" ({hw['cpu_model']})"
    if hw.get("torch_threads") is not None:
        line += f", torch threads {hw['torch_threads']}"
    if hw.get("torch_cpu_capability"):
        line += f", {hw['torch_cpu_capability']} kernels"
    return line


def base_record(**fields: Any) -> dict[str, Any]:
    """A record with ``hardware``, ``versions``, ``command`` and ``created`` (UTC) filled in;
    ``fields`` are added (and override the defaults)."""
    record: dict[str, Any] = {
        "hardware": hardware(),
        "versions": versions(),
        "command": " ".join(sys.argv),
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    record.update(fields)
    return record


def _config_dict(config: Any) -> Any:
    from dataclasses import asdict, is_dataclass

    if is_dataclass(config) and not isinstance(config, type):
        return json.loads(json.dumps(asdict(config), default=str))
    return config


def _common(results: Mapping[str, Any], attr: str) -> Any:
    values = {json.dumps(getattr(r, attr), default=str) for r in results.values()}
    if len(values) > 1:
        raise ConfigError(
            f"splits were evaluated with different {attr}: "
            + ", ".join(f"{s}={getattr(r, attr)!r}" for s, r in results.items())
        )
    return getattr(next(iter(results.values())), attr)


def result_record(
    model: str,
    variant: str | None,
    dataset: str,
    fingerprint: str,
    protocol: str,
    results: Mapping[str, Any],
    seed: int,
    config: Any = None,
    epochs: int | None = None,
    train_seconds: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The JSON record of one run (DESIGN.md section 4).

    Args:
        model / variant / dataset / fingerprint / protocol / seed: what was run on what.
        results: split name (``"valid"``, ``"test"``) -> :class:`EvalResult`. All splits must
            share ranking, seen filter, averaging and tie policy (else :class:`ConfigError`).
        config: the full config (dataclass or dict).
        epochs / train_seconds: training summary.
        extra: any further fields (e.g. ``"tuned": {...}``), stored as given.
    """
    if not results:
        raise ConfigError("results must hold at least one split")
    rec = base_record(
        model=model,
        variant=variant,
        dataset=dataset,
        dataset_fingerprint=fingerprint,
        protocol=protocol,
        ranking=_common(results, "ranking"),
        seen_filter=_common(results, "seen_filter"),
        window=_common(results, "window"),
        average=_common(results, "average"),
        ties=_common(results, "ties"),
        ks=list(_common(results, "ks")),
        metrics={s: {k: float(v) for k, v in r.metrics.items()} for s, r in results.items()},
        ci95={
            s: {k: [float(lo), float(hi)] for k, (lo, hi) in r.ci95.items()}
            for s, r in results.items()
        },
        n_targets={s: int(r.n_targets) for s, r in results.items()},
        n_users={s: int(r.n_users) for s, r in results.items()},
        seed=seed,
        config=_config_dict(config) if config is not None else {},
        epochs=epochs,
        train_seconds=train_seconds,
        eval_seconds=float(sum(r.seconds for r in results.values())),
        eval_seconds_by_split={s: float(r.seconds) for s, r in results.items()},
    )
    rec.update(extra)
    return rec


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _stem(record: Mapping[str, Any]) -> str:
    parts = [record.get(k) for k in ("dataset", "model", "variant", "protocol")]
    raw = "-".join(str(p) for p in parts if p)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw) or "result"


def _fmt(value: Any, ci: Any = None) -> str:
    if value is None:
        return "–"
    if ci is not None:
        return f"{value:.4f} ±{(ci[1] - ci[0]) / 2:.4f}"
    return f"{value:.4f}"


def _describe(records: list[Mapping[str, Any]], key: str, render=str) -> str:
    values = []
    for r in records:
        v = render(r.get(key)) if r.get(key) is not None else "–"
        if v not in values:
            values.append(v)
    return ", ".join(values)


def markdown_table(
    records: Iterable[Mapping[str, Any]],
    metrics: Iterable[str] | None = None,
    split: str = "test",
    title: str | None = None,
) -> str:
    """A Markdown table of ``split`` metrics (mean ±CI half-width), one row per record.

    The header names dataset, protocol, ranking (a sampled ranking is flagged in bold), seen
    filter, averaging, seed, hardware and command; the ranking is also a column of the table.
    """
    records = list(records)
    if not records:
        raise ConfigError("markdown_table needs at least one record")
    if metrics is None:
        have = records[0].get("metrics", {}).get(split, {})
        metrics = [m for m in DEFAULT_METRICS if m in have] or list(have)[:6]
    metrics = list(metrics)
    rankings = [str(r.get("ranking", "full")) for r in records]
    ranking_note = _describe(records, "ranking")
    if any(x.startswith("sampled") for x in rankings):
        ranking_note += " — **sampled ranking: not comparable with full-ranking numbers**"
    lines = [
        f"### {title or _describe(records, 'dataset')} — {_describe(records, 'protocol')} ({split})",
        "",
        f"- dataset: {_describe(records, 'dataset')} (fingerprint {_describe(records, 'dataset_fingerprint')})",
        f"- protocol: {_describe(records, 'protocol')}; ranking: {ranking_note}",
        f"- seen filter: {_describe(records, 'seen_filter')}; averaging: per {_describe(records, 'average')}; "
        f"ties: {_describe(records, 'ties')}",
        f"- seed: {_describe(records, 'seed')}",
        f"- hardware: {_describe(records, 'hardware', hardware_line)}",
        f"- command: `{_describe(records, 'command')}`",
        f"- created: {_describe(records, 'created')}",
        "",
        "| model | variant | ranking | " + " | ".join(metrics) + " | targets | train s | eval s |",
        "|" + "---|" * (len(metrics) + 6),
    ]
    for r, ranking in zip(records, rankings, strict=True):
        vals = r.get("metrics", {}).get(split, {})
        cis = r.get("ci95", {}).get(split, {})
        cells = [_fmt(vals.get(m), cis.get(m)) for m in metrics]
        train = r.get("train_seconds")
        ev = r.get("eval_seconds_by_split", {}).get(split, r.get("eval_seconds"))
        lines.append(
            f"| {r.get('model')} | {r.get('variant') or '–'} | {ranking} | "
            + " | ".join(cells)
            + f" | {r.get('n_targets', {}).get(split, '–')}"
            + f" | {'–' if train is None else f'{train:.1f}'} | {'–' if ev is None else f'{ev:.2f}'} |"
        )
    return "\n".join(lines) + "\n"


def write_report(out_dir: str | Path, stem: str, record: Mapping[str, Any], md: str) -> str:
    """Write a benchmark's ``<stem>.json`` (the record, indent 2) and ``<stem>.md`` (its
    report) atomically; returns the report (to print)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record, indent=2, default=_json_default) + "\n"
    atomic_write(out / f"{stem}.json", lambda fh: fh.write(text.encode()))
    atomic_write(out / f"{stem}.md", lambda fh: fh.write(md.encode()))
    return md


def write_result(
    record: Mapping[str, Any],
    out_dir: str | Path = "docs/results",
    stem: str | None = None,
    candidates: Any = None,
    metrics: Iterable[str] | None = None,
) -> tuple[Path, Path]:
    """Write ``<stem>.json`` (the record, indent 2) and ``<stem>.md`` (one table per split).

    With ``candidates`` (sampled ranking) the candidate sets are saved beside them as
    ``<stem>.candidates.npz`` and the record names that file.

    Returns:
        ``(json_path, md_path)``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or _stem(record)
    record = dict(record)
    if candidates is not None:
        from seqrec.evaluation.sampled import save_candidates

        cand_path = save_candidates(candidates, out / f"{stem}.candidates.npz")
        record["candidates_file"] = cand_path.name
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    text = json.dumps(record, indent=2, default=_json_default) + "\n"
    splits = list(record.get("metrics", {})) or ["test"]
    md = "\n".join(markdown_table([record], metrics, split=s) for s in splits)
    # atomic: an interrupted run leaves the previous files or the new ones, never half of one
    atomic_write(json_path, lambda fh: fh.write(text.encode()))
    atomic_write(md_path, lambda fh: fh.write(md.encode()))
    return json_path, md_path
