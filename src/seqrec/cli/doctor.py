"""``seqrec doctor``: what this installation can do, in one screen (what to paste into a bug
report): versions, PyTorch's build and devices, threads, the optional extras installed, where
datasets and downloads are looked for, and whether the shipped dataset loads."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys
from typing import Any

from seqrec import __version__

# extra -> (module to import, what it enables)
EXTRAS = {
    "serve": ("fastapi", "seqrec serve (HTTP)"),
    "plot": ("matplotlib", "training curves, report plots"),
    "export": ("onnxruntime", "seqrec export --format onnx (+ parity)"),
    "tune": ("optuna", "seqrec tune"),
    "excel": ("openpyxl", ".xlsx logs and request files"),
    "live": ("redis", "seqrec serve --events redis://... (the Redis event store)"),
    "ann": ("faiss", "seqrec index (approximate top-k over large catalogues)"),
}


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def report() -> list[tuple[str, str]]:
    """(label, finding) rows; nothing here raises for a missing piece: it is a finding."""
    rows = [
        ("seqrec", f"{__version__} ({os.path.dirname(os.path.dirname(__file__))})"),
        ("python", f"{platform.python_version()} ({sys.executable})"),
        ("platform", f"{platform.platform()}, {os.cpu_count()} CPUs"),
    ]
    try:
        import torch

        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU build"
        gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
        devices = f"{gpus} GPU(s): {torch.cuda.get_device_name(0)}" if gpus else "no GPU in use"
        rows += [
            ("torch", f"{torch.__version__} ({build}; {devices})"),
            (
                "threads",
                f"torch uses {torch.get_num_threads()} (OMP_NUM_THREADS="
                f"{os.environ.get('OMP_NUM_THREADS', 'unset')}; train.num_threads sets it)",
            ),
        ]
    except ImportError:
        rows.append(
            ("torch", "MISSING: neural models cannot train (./scripts/bootstrap.sh installs it)")
        )
    from seqrec.allocator import describe

    rows.append(("allocator", describe()))
    for lib in ("numpy", "polars", "scipy"):
        rows.append((lib, _version(lib) or "MISSING"))
    for extra, (module, enables) in EXTRAS.items():
        try:
            importlib.import_module(module)
            rows.append(
                (
                    f"extra {extra}",
                    f"yes ({module} {_version(module) or ''}".rstrip() + f"): {enables}",
                )
            )
        except ImportError:
            rows.append((f"extra {extra}", f"no: pip install 'seqrec[{extra}]' for {enables}"))
    from seqrec.data.sources import data_dir, dataset_names
    from seqrec.data.sources.download import cache_dir

    shared = data_dir()
    found = sorted(p.name for p in shared.iterdir()) if shared.is_dir() else []
    rows.append(
        (
            "data dir",
            f"{shared} ({len(found)} files)"
            if found
            else f"{shared} (absent: named datasets other than the shipped one need "
            "SEQREC_DATA_DIR or seqrec data download NAME)",
        )
    )
    rows.append(("download cache", str(cache_dir())))
    rows.append(("datasets known", f"{len(dataset_names())} (seqrec data list)"))
    try:
        from seqrec.data.sources import load

        inter = load("ml-latest-small")
        rows.append(("shipped data", f"ml-latest-small loads ({len(inter):,} interactions)"))
    except Exception as exc:  # noqa: BLE001 - a broken install is a finding, not a crash
        rows.append(("shipped data", f"FAILS: {type(exc).__name__}: {exc}"))
    return rows


def cmd_doctor(args: Any) -> int:  # noqa: ARG001 - no options
    from seqrec.cli.table import format_mapping

    print(format_mapping(dict(report())))
    return 0
