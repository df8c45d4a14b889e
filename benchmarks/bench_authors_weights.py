"""A model's authors' released weights through seqrec's model and evaluator: where a
reproduction row misses the authors' log, this separates the model and the protocol (same
weights, same numbers) from training (seeds, the training loop).

Loads the authors' checkpoint into the seqrec model of a reproduction run (the table's data,
split, sizes and evaluation settings), maps every parameter by name (an unmapped or missing
one is an error), and evaluates validation and test as the harness does; the report puts the
authors' logged numbers (the table's ``published``) beside them.

Supported: TV-Rec (``yehjin-shin/TV-Rec``, ``output/TVRec_<data>_best.pt``; the checkpoint is
not shipped: take it from that repository). Usage::

    python benchmarks/bench_authors_weights.py --checkpoint TVRec_Beauty_best.pt \\
        --table frequency --run tvrec-beauty

writes ``docs/results/authors_weights_<run>.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tvrec_names(n_blocks: int) -> dict[str, str]:
    """The TV-Rec repository's parameter names -> seqrec's ``tvrec`` encoder's."""
    names = {
        "item_embeddings.weight": "item_emb.weight",
        "LayerNorm.weight": "emb_norm.weight",
        "LayerNorm.bias": "emb_norm.bias",
    }
    pairs = {
        "layer.basis": "filter.basis",
        "layer.c_t": "filter.coef",
        "layer.LayerNorm.weight": "filter.norm.weight",
        "layer.LayerNorm.bias": "filter.norm.bias",
        "feed_forward.dense_1.weight": "fc1.weight",
        "feed_forward.dense_1.bias": "fc1.bias",
        "feed_forward.dense_2.weight": "fc2.weight",
        "feed_forward.dense_2.bias": "fc2.bias",
        "feed_forward.LayerNorm.weight": "ffn_norm.weight",
        "feed_forward.LayerNorm.bias": "ffn_norm.bias",
    }
    for b in range(n_blocks):
        names |= {f"item_encoder.blocks.{b}.{k}": f"blocks.{b}.{v}" for k, v in pairs.items()}
    return names


NAMES = {"tvrec": tvrec_names}


def mapped_state(model_name: str, theirs: dict, n_blocks: int) -> dict:
    """The authors' state dict under seqrec's names.

    Raises:
        SystemExit: a model without a mapping, or a parameter the mapping does not name.
    """
    if model_name not in NAMES:
        raise SystemExit(f"no parameter mapping for {model_name!r} (known: {', '.join(NAMES)})")
    names = NAMES[model_name](n_blocks)
    unknown = sorted(set(theirs) - set(names))
    if unknown:
        raise SystemExit(f"checkpoint parameters without a mapping: {', '.join(unknown)}")
    return {names[k]: v for k, v in theirs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="the authors' state dict (.pt)")
    ap.add_argument("--table", default="frequency", help="reproduction table of the run")
    ap.add_argument("--run", default="tvrec-beauty", help="run id in that table")
    ap.add_argument("--out", default=None, help="output stem (default docs/results/...)")
    args = ap.parse_args()

    import torch

    from seqrec.evaluation.results import base_record, hardware_line
    from seqrec.experiment import evaluate_model, prepare_data
    from seqrec.registry import get_model
    from seqrec_lab.spec import load_table

    table = load_table(args.table, ROOT)
    spec = min((r for r in table.runs if r.run_id == args.run), key=lambda r: r.seed)
    exp = spec.experiment
    split = prepare_data(exp).split
    _, model_cls = get_model(exp.model)
    model = model_cls(exp.model_config())
    model._remember_catalogue(split.train)
    model.encoder = model.build_encoder(split.train.n_items)
    theirs = torch.load(args.checkpoint, map_location="cpu", weights_only=True)
    state = mapped_state(exp.model, theirs, model.config.n_blocks)
    model.encoder.load_state_dict(state, strict=True)  # every parameter, every shape
    model.encoder.eval()
    results = {}
    for name, targets in (("valid", split.valid), ("test", split.test)):
        res = evaluate_model(model, exp, targets)
        results[name] = {k: float(v) for k, v in res.metrics.items() if not k.startswith("COV")}
        print(name, json.dumps({k: round(v, 4) for k, v in results[name].items()}), flush=True)
    published = [{"metric": p.metric, "value": p.value, "source": p.source} for p in spec.published]
    record = base_record(
        benchmark="authors_weights",
        table=args.table,
        run=args.run,
        model=exp.model,
        dataset=exp.data.name,
        checkpoint=Path(args.checkpoint).name,
        parameters=len(state),
        protocol=f"{exp.split.protocol}, full ranking, seen filter {exp.eval.seen_filter}",
        results=results,
        published=published,
    )
    # the checkpoint by its name: where it was saved on this machine is nobody's business
    record["command"] = record["command"].replace(args.checkpoint, Path(args.checkpoint).name)
    out = Path(args.out) if args.out else ROOT / "docs" / "results" / f"authors_weights_{args.run}"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    rows = [
        f"| {p['metric']} | {p['value']:.4f} | {results['test'].get(p['metric'], float('nan')):.4f} |"
        for p in published
    ]
    md = [
        f"# The authors' {exp.model} weights through seqrec: {args.run} ({exp.data.name})",
        "",
        f"Command: `{record['command']}`  ",
        f"Checkpoint: `{record['checkpoint']}` ({len(state)} tensors, every one mapped by name and "
        "loaded strictly into seqrec's model of this run).  ",
        f"Protocol: the `{args.table}` table's run `{args.run}`: {record['protocol']}; seqrec's "
        "evaluator.  ",
        f"Hardware: {hardware_line(record['hardware'])}.",
        "",
        "| metric | authors' log (test) | seqrec, authors' weights (test) |",
        "|---|---:|---:|",
        *rows,
        "",
        "Validation, seqrec, authors' weights: "
        + ", ".join(f"{k} {v:.4f}" for k, v in results["valid"].items() if "@10" in k),
        "",
    ]
    out.with_suffix(".md").write_text("\n".join(md))
    print(f"wrote {out}.{{json,md}}")


if __name__ == "__main__":
    sys.exit(main())
