"""Rebuild docs/results/README.md: one line per result file, newest first.

.venv/bin/python benchmarks/make_index.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"


def parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import json

SHOW = ("HR@10", "NDCG@10", "Recall@10", "COV@10")


def summarize(record: dict) -> str:
    test = (record.get("metrics") or {}).get("test") or {}
    shown = ", ".join(f"{k} {test[k]:.4f}" for k in SHOW if isinstance(test.get(k), (int, float)))
    what = record.get("benchmark") or record.get("model") or ""
    if record.get("variant"):
        what += f" ({record['variant']})"
    bits = [
        what,
        str(record.get("dataset", "")),
        str(record.get("protocol", "")),
        str(record.get("ranking", "")),
        shown,
    ]
    return " | ".join(b for b in bits if b and b != "None")


def main() -> None:
    rows = []
    for path in sorted(OUT.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except json.JSONDecodeError:
            continue
        records = record if isinstance(record, list) else [record]
        for rec in records:
            if isinstance(rec, dict):
                md = path.with_suffix(".md")
                link = f"[{md.name}]({md.name})" if md.exists() else path.name
                rows.append((rec.get("created", ""), f"| {link} | {summarize(rec)} |"))
    rows.sort(reverse=True)
    text = [
        "# Measured results",
        "",
        "Every file here was written by a script in `benchmarks/`; each JSON names the "
        "command, data fingerprint, protocol, seed, hardware and versions. Accuracy tables (papers, "
        "defaults, and the comparison with RecTools and RecBole: [peers](../reproduce/peers.md)) are "
        "reports of the reproduction harness in [docs/reproduce/](../reproduce/).",
        "",
        "| file | summary |",
        "|---|---|",
        *[r for _, r in rows],
        "",
    ]
    (OUT / "README.md").write_text("\n".join(text))
    print(f"indexed {len(rows)} results")


if __name__ == "__main__":
    main()
