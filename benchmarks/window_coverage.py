"""How much of a dataset's training data one epoch of ``train_windows = "last"`` sees.

``last`` trains each user's latest ``max_len`` transitions per epoch; ``sliding`` trains every
transition once. Where users' histories are short (the Amazon and Yelp 5-cores) the two are
nearly the same data, and the choice cannot matter much; where they are long (MovieLens) "last"
leaves most transitions unseen. This is the data-side reading of the training-window rows of
``docs/reproduce/defaults.md``.

Counts the leave-last-out training split of each dataset exactly as the tables prepare it (the
table's filter; a training sequence of n items holds n - 1 transitions, the first item has no
target), with max_len 50 (every table that compares windows uses it).

    python benchmarks/window_coverage.py      # writes docs/results/window_coverage.{json,md}
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sources import DataUnavailable, load
from seqrec.data.splits import leave_last_out
from seqrec.evaluation.results import base_record, hardware_line

OUT = Path(__file__).resolve().parents[1] / "docs" / "results"
# the filters of the tables that train on each (defaults.toml, lsan.toml, peers.toml, sasrec.toml)
DATASETS = {
    "ml-latest-small": "k_core", "ml-100k": "none", "ml-1m-sasrec": "none",
    "amazon-beauty-s3rec": "none", "amazon-toys-s3rec": "none", "amazon-sports-s3rec": "none",
    "yelp2020-s3rec-time": "none",
}


def coverage(name: str, filt: str, max_len: int) -> dict:
    prepared = preprocess(load(name), PreprocessConfig(filter=filt, min_item=5, min_user=5))
    train = leave_last_out(prepared.sequences()).train
    transitions = np.maximum(np.diff(np.asarray(train.offsets)) - 1, 0)
    last = np.minimum(transitions, max_len)
    return {"filter": filt, "users": int(len(transitions)),
            "mean_train_length": float(np.mean(transitions + 1)),
            "transitions": int(transitions.sum()), "last_windows_see": int(last.sum()),
            "share": float(last.sum() / transitions.sum()),
            "users_longer_than_max_len": float(np.mean(transitions > max_len))}


def markdown(record: dict) -> str:
    lines = ["# Training windows: what one epoch of `last` sees", "",
             f"Each user's latest {record['max_len']} transitions (`train_windows = \"last\"`) "
             "against every transition (`\"sliding\"`), on the leave-last-out training split.", "",
             "| dataset | filter | users | mean training length | transitions | seen by `last` | share | users over max_len |",
             "|---|---|---|---|---|---|---|---|"]
    for name, r in record["datasets"].items():
        if "missing" in r:
            lines.append(f"| {name} | | | | | | not on this machine | |")
            continue
        lines.append(f"| {name} | {r['filter']} | {r['users']:,} | {r['mean_train_length']:.1f} | "
                     f"{r['transitions']:,} | {r['last_windows_see']:,} | {r['share']:.1%} | "
                     f"{r['users_longer_than_max_len']:.1%} |")
    lines += ["", f"Command: `{record['command']}`. Hardware: {hardware_line(record['hardware'])}. "
              "Deterministic (no training, no seed).", ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-len", type=int, default=50)
    args = p.parse_args()
    out = {}
    for name, filt in DATASETS.items():
        try:
            out[name] = coverage(name, filt, args.max_len)
        except DataUnavailable as exc:
            out[name] = {"missing": str(exc)}
        print(name, out[name].get("share", out[name].get("missing")), flush=True)
    record = base_record(benchmark="window_coverage", max_len=args.max_len, datasets=out)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "window_coverage.json").write_text(json.dumps(record, indent=2) + "\n")
    (OUT / "window_coverage.md").write_text(markdown(record))


if __name__ == "__main__":
    main()
