"""The rolling-window (continual) protocol: at each step, update the previous step's model on
the newest window (``seqrec.update.update_model``) against a full retrain, both tested on the
window after it, over several steps and seeds.

The log (real timestamps, unfiltered) is cut by global time into an initial block holding the
first ``--first`` share of the events and ``--steps + 1`` windows of equal event counts after
it (boundaries b0 < b1 < ... at quantiles of time). Step s (1..steps):

* **retrain**: the model trained from scratch on every event before b_s, to convergence: the
  validation targets are carved from its own training data (the last event of every user whose
  last event falls in the newest window, held out of training), early stopping on their
  NDCG@10 with ``--patience``, the best epoch's weights kept. Its CPU time is the whole run
  (validations and the patience epochs included); the time to its best epoch is reported too;
* **update**: the previous step's updated model (step 1: the *base*, trained on the events
  before b0 by the retrain rule, its cost not counted) updated on the events of window
  [b_(s-1), b_s): new items and users appended, ``epochs`` epochs on the histories of the users
  with new events plus a ``replay`` share of the others, no validation;
* **test**: every event of window [b_s, b_(s+1)) whose item both models know, with the user's
  whole history before it as input (histories grow by the earlier test events, as a served
  model's do); full ranking, history seen-filter. Targets that are items first seen in the
  newest window (*new items*) are also reported apart.

The update's settings (epochs, replay) are chosen once, on step 1 of the first seed, by
validation only: each candidate (``--grid``) updates the base on the newest window without the
retrain's validation targets and is scored on those targets; the cheapest candidate (CPU
time) whose validation NDCG@10 reaches ``--select-share`` of the step-1 retrain's validation
NDCG@10 is chosen; when none reaches it, ``--fallback one-se`` (the default) takes the cheapest
whose validation NDCG@10 is within one standard error of the best candidate's (the one-standard-
error rule: validation sets of a few hundred targets cannot tell such candidates apart, so the
cheaper one is the honest pick), ``--fallback best`` the best one. The test window is never
looked at to choose anything.

Partial results are written after every step (JSON + Markdown), and a rerun resumes: seeds
already finished in the JSON are kept, an unfinished seed restarts.

Usage: ``OMP_NUM_THREADS=1 python benchmarks/bench_continual.py --data ml-100k
[--seeds 0 1 2]``; writes ``docs/results/continual_<data>.{json,md}``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GRID = [
    "1:none",
    "1:all",
    "2:none",
    "2:all",
    "4:all",
    "8:all",
    "2:none:1e-3",
    "4:all:1e-3",
    "8:all:1e-3",
    "6:all",
    "8:0.5",
    "8:0.25",
]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="ml-100k", help="dataset name or file (with timestamps)")
    ap.add_argument("--model", default="sasrec")
    ap.add_argument("--first", type=float, default=0.6, help="share of events in the base block")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--patience", type=int, default=5, help="early stopping of every retrain")
    ap.add_argument("--max-epochs", type=int, default=100, help="cap of every retrain")
    ap.add_argument(
        "--grid",
        nargs="+",
        default=DEFAULT_GRID,
        metavar="EPOCHS:REPLAY[:LR]",
        help="update candidates chosen among on step 1's validation (replay 'all', 'none' or "
        "a share; LR: the update's learning rate, default the run's)",
    )
    ap.add_argument(
        "--update",
        default=None,
        metavar="EPOCHS:REPLAY",
        help="skip the selection and use this update setting",
    )
    ap.add_argument("--select-share", type=float, default=0.97)
    ap.add_argument(
        "--fallback",
        choices=("one-se", "best"),
        default="one-se",
        help="when no candidate reaches --select-share: the cheapest within one standard error "
        "of the best validation NDCG@10 (one-se), or the best (best)",
    )
    ap.add_argument(
        "--selection-from",
        default=None,
        metavar="JSON",
        help="take the update setting chosen by another run of the same protocol (its JSON, "
        "waited for): seeds run in parallel processes, the first one choosing",
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="JSON",
        help="only combine the seeds of these records (same protocol) into --out",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a model setting (dim=64); repeatable",
    )
    ap.add_argument(
        "--out", default=None, help="output stem (default docs/results/continual_<data>)"
    )
    ap.add_argument("--note", default=None, help="a note the report shows (with --merge)")
    return ap


if __name__ == "__main__":
    parser().parse_args()  # --help (and a wrong argument) before the heavy imports below

import copy
import json
import statistics
import time

import numpy as np
import torch

from seqrec.config import parse_value
from seqrec.data.preprocess import PreprocessConfig, preprocess
from seqrec.data.sequences import Sequences, Targets
from seqrec.data.sources import load
from seqrec.evaluation.results import base_record, hardware_line
from seqrec.models.neural_config import settings
from seqrec.registry import get_model
from seqrec.serving.histories import UserHistories
from seqrec.update import parse_replay, update_model

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _update_common import metrics, raw_columns  # noqa: E402

MODEL_DEFAULTS = {"dim": 64, "n_blocks": 2, "max_len": 50, "loss": "ce", "num_threads": 1}


def local_paths_out(command: str) -> str:
    """A command line with absolute paths cut to their last part (a record names no machine's
    folders)."""
    return " ".join(Path(t).name if t.startswith("/") else t for t in command.split(" "))


def suffixed(out: Path, ext: str) -> Path:
    """``out`` + ``ext`` (an output stem may hold dots: ``continual_ml-100k.seed1``)."""
    return out.with_name(out.name + ext)


def parse_candidate(text: str) -> tuple[int, str | float, float | None]:
    """``EPOCHS[:REPLAY[:LR]]`` -> (epochs, replay, learning rate or None: the run's)."""
    parts = text.split(":")
    try:
        if len(parts) > 3 or not parts[0].strip().isdigit():
            raise ValueError
        lr = float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise SystemExit(
            f"update setting {text!r}: expected EPOCHS[:REPLAY[:LR]], e.g. 4:all:1e-3"
        ) from None
    return int(parts[0]), parse_replay(parts[1] if len(parts) > 1 else "all"), lr


def carve(prepared, recent_from: float):
    """Training sequences without the last event of every user whose last event is at or after
    ``recent_from``, and those events as validation targets (history = the rest)."""
    seqs = prepared.sequences()
    rows, times, held = [], [], []
    for r in range(len(seqs.lengths)):
        items = seqs.row(r)
        ts = seqs.timestamps[seqs.offsets[r] : seqs.offsets[r + 1]]
        if len(items) >= 2 and ts[-1] >= recent_from:
            held.append(r)
            items, ts = items[:-1], ts[:-1]
        rows.append(items)
        times.append(ts)
    train = Sequences.from_lists(
        rows,
        n_items=seqs.n_items,
        timestamps=times,
        users=seqs.users,
        vocab=seqs.vocab,
        has_time=seqs.has_time,
    )
    held = np.asarray(held, np.int64)
    valid = Targets(seqs, held, seqs.lengths[held] - 1, seqs.items[seqs.offsets[held + 1] - 1])
    return train, valid


def retrain(model_name, flat, inter, recent_from, seed):
    """A model trained from scratch on ``inter`` by the retrain rule; CPU seconds (total, to the
    best epoch), its validation NDCG@10 and epochs, and the held-out (user, item) pairs."""
    config_cls, model_cls = get_model(model_name)
    prepared = preprocess(inter, PreprocessConfig(filter="none"))
    train, valid = carve(prepared, recent_from)
    model = model_cls(settings(config_cls, **{**flat, "seed": seed}))
    marks = []
    t0 = time.process_time()
    model.fit(
        train, valid, progress=False, on_epoch=lambda rec: marks.append(time.process_time() - t0)
    )
    seconds = time.process_time() - t0
    log = model.training_log
    best = int(log.best_epoch or log.epochs_run)
    model.user_histories = UserHistories.from_prepared(prepared)
    users_raw = np.asarray(prepared.user_raw)
    vocab_raw = [str(x) for x in train.vocab.raw.tolist()]
    held_pairs = {
        (str(users_raw[valid.sequences.users[r]]), vocab_raw[item - 1])
        for r, item in zip(valid.rows.tolist(), valid.items.tolist(), strict=True)
    }
    return (
        model,
        {
            "cpu_seconds": seconds,
            "cpu_seconds_to_best": marks[best - 1] if 0 < best <= len(marks) else seconds,
            "epochs_run": int(log.epochs_run),
            "best_epoch": best,
            "valid_ndcg10": float(log.best_metric) if log.best_metric is not None else float("nan"),
            "valid_targets": len(valid),
        },
        held_pairs,
    )


def targets_for(model, users, items, times, mask_hist, mask_target):
    """Targets in the model's ids: every ``mask_target`` event whose item the model knows, its
    input the user's earlier events (``mask_hist`` or earlier targets) the model knows."""
    rows, cut, tgt, meta = [], [], [], []
    order = np.lexsort((times, users))
    by_user: dict[str, list[int]] = {}
    for i in order.tolist():
        if mask_hist[i] or mask_target[i]:
            by_user.setdefault(users[i], []).append(i)
    lookup = {str(r): k + 1 for k, r in enumerate(model.vocab.raw.tolist())}
    for events in by_user.values():
        seq, positions = [], []
        for i in events:
            item = lookup.get(items[i], 0)
            if not item:
                continue
            if mask_target[i] and seq:
                positions.append((len(seq), item, i))
            seq.append(item)
        if positions:
            r = len(rows)
            rows.append(seq)
            for c, _item, i in positions:
                cut.append(c)
                tgt.append(r)
                meta.append(i)
    seqs = Sequences.from_lists(rows, n_items=model.n_items)
    cut = np.asarray(cut, np.int64)
    tgt = np.asarray(tgt, np.int64)
    target_items = seqs.items[seqs.offsets[tgt] + cut]
    return Targets(seqs, tgt, cut, target_items), meta


def timed_update(model, new, replay, epochs, seed, lr=None):
    t0 = time.process_time()
    report = update_model(
        model,
        new,
        replay=replay,
        seed=seed,
        fit_options={"epochs": epochs, "lr": lr, "progress": False},
    )
    return time.process_time() - t0, report


def recent(bounds, s, ts):
    """Start of the newest window of the data before ``bounds[s]`` (the base block: a slice as
    long as one window)."""
    if s > 0:
        return bounds[s - 1]
    return bounds[0] - (bounds[1] - bounds[0]) if len(bounds) > 1 else bounds[0]


def main() -> None:
    args = parser().parse_args()
    torch.set_num_threads(1)
    flat = {**MODEL_DEFAULTS, "epochs": args.max_epochs, "patience": args.patience}
    for item in args.set:
        key, _, value = item.partition("=")
        flat[key.strip()] = parse_value(value.strip())
    out = (
        Path(args.out)
        if args.out
        else ROOT / "docs" / "results" / f"continual_{Path(args.data).stem}"
    )
    if args.merge:
        merge(args, flat, out)
        return
    inter = load(args.data)
    if not inter.has_time:
        raise SystemExit(f"{args.data} has no timestamps: the rolling-window protocol needs them")
    users, items = raw_columns(inter)
    ts = np.asarray(inter.timestamp)
    qs = [args.first + (1 - args.first) * k / (args.steps + 1) for k in range(args.steps + 1)]
    bounds = [float(b) for b in np.quantile(ts, qs)] + [float(ts.max()) + 1]
    # equal timestamps at a boundary all fall on its right
    state = (
        json.loads(suffixed(out, ".json").read_text()) if suffixed(out, ".json").exists() else {}
    )
    same = state.get("protocol_args") == protocol_args(args, flat)
    runs = [r for r in state.get("runs", []) if same and r.get("finished")]
    selection = state.get("selection") if same else None
    done = {r["seed"] for r in runs}
    print(f"boundaries (quantiles {qs}): {bounds}; finished seeds {sorted(done)}", flush=True)
    for seed in args.seeds:
        if seed in done:
            continue
        run = {"seed": seed, "steps": [], "finished": False}
        runs.append(run)
        base, base_info, held = retrain(
            args.model, flat, inter.take(ts < bounds[0], "base block"), recent(bounds, 0, ts), seed
        )
        run["base"] = base_info
        print(f"seed {seed}: base {base_info}", flush=True)
        model = base
        for s in range(1, args.steps + 1):
            old, new = ts < bounds[s - 1], (ts >= bounds[s - 1]) & (ts < bounds[s])
            test = (ts >= bounds[s]) & (ts < bounds[s + 1])
            re_model, re_info, held = retrain(
                args.model, flat, inter.take(ts < bounds[s], f"before b{s}"), bounds[s - 1], seed
            )
            print(f"seed {seed} step {s}: retrain {re_info}", flush=True)
            if s == 1 and selection is None:
                if args.update:
                    parse_candidate(args.update)  # a wrong one fails here
                    selection = {"chosen": args.update, "by": "--update", "candidates": []}
                elif args.selection_from:
                    selection = wait_for_selection(Path(args.selection_from), args, flat)
                else:
                    selection = choose(args, model, inter, users, items, new, held, re_info, seed)
                print(f"selection: {selection}", flush=True)
            epochs, replay, lr = parse_candidate(selection["chosen"])
            upd_s, report = timed_update(
                model, inter.take(new, f"window {s}"), replay, epochs, seed, lr
            )
            print(f"seed {seed} step {s}: update {upd_s:.1f} CPU s", flush=True)
            t_upd, meta_u = targets_for(model, users, items, ts, old | new, test)
            t_re, meta_r = targets_for(re_model, users, items, ts, old | new, test)
            assert meta_u == meta_r, "the updated and the retrained model know the same items"
            known_before = set(items[old].tolist())
            new_sub = [k for k, i in enumerate(meta_u) if items[i] not in known_before]
            step = {
                "step": s,
                "events": {"train": int(old.sum()), "new": int(new.sum()), "test": int(test.sum())},
                "retrain": {
                    **re_info,
                    "all": metrics(re_model, t_re),
                    "new_items": metrics(re_model, t_re, new_sub),
                },
                "update": {
                    "cpu_seconds": upd_s,
                    "all": metrics(model, t_upd),
                    "new_items": metrics(model, t_upd, new_sub),
                    "report": report.lines(),
                },
            }
            step["update_over_retrain_cpu"] = upd_s / re_info["cpu_seconds"]
            step["update_over_retrain_cpu_to_best"] = upd_s / re_info["cpu_seconds_to_best"]
            step["ndcg_kept"] = step["update"]["all"]["NDCG@10"] / step["retrain"]["all"]["NDCG@10"]
            run["steps"].append(step)
            print(
                f"seed {seed} step {s}: cpu {step['update_over_retrain_cpu']:.1%} "
                f"ndcg kept {step['ndcg_kept']:.1%}",
                flush=True,
            )
            write(out, args, flat, bounds, qs, runs, selection)
        run["finished"] = True
        write(out, args, flat, bounds, qs, runs, selection)


def wait_for_selection(path: Path, args, flat, every: float = 30.0):
    """The selection of another run of the same protocol, once its JSON has one."""
    while True:
        if path.exists():
            record = json.loads(path.read_text())
            other = dict(record["protocol_args"], selection_from=args.selection_from)
            if other != protocol_args(args, flat):
                raise SystemExit(f"{path} is another protocol: {record['protocol_args']}")
            if record.get("selection"):
                return record["selection"]
        time.sleep(every)


def merge(args, flat, out):
    """One record of the seeds of several (each seed once, finished runs first; an unfinished
    one's steps are kept and marked), the selection shared."""
    runs, selection, first, commands = {}, None, None, []
    for name in args.merge:
        record = json.loads(Path(name).read_text())
        commands.append(local_paths_out(record["command"]))
        bounds, qs = record["boundaries"], record["quantiles"]
        proto = {k: v for k, v in record["protocol_args"].items() if k != "selection_from"}
        first = first or proto
        if proto != first:
            raise SystemExit(f"{name} is another protocol: {proto} != {first}")
        if record.get("selection") and record["selection"].get("candidates"):
            selection = record["selection"]
        for r in record["runs"]:  # a finished run of a seed first, else its longest one
            have = runs.get(r["seed"])
            rank = (bool(r.get("finished")), len(r["steps"]))
            if r["steps"] and (
                have is None or rank > (bool(have.get("finished")), len(have["steps"]))
            ):
                runs[r["seed"]] = r
    first["data"] = local_paths_out(first["data"])  # a file's name, not its folder
    args.data, args.model = first["data"], first["model"]
    for key in ("first", "steps", "patience", "max_epochs", "grid", "update", "select_share"):
        setattr(args, key, first[key])
    write(out, args, first["settings"], bounds, qs, [runs[k] for k in sorted(runs)], selection)
    record = json.loads(suffixed(out, ".json").read_text())
    record["merged_from"] = commands
    if args.note:
        record["note"] = args.note
    record["command"] = local_paths_out(record["command"])
    suffixed(out, ".json").write_text(json.dumps(record, indent=2, default=float))
    suffixed(out, ".md").write_text(markdown(record))
    print(f"merged seeds {sorted(runs)} into {out}")


def choose(args, base, inter, users, items, new, held, re_info, seed):
    """Each candidate updates a copy of the base on the newest window less the retrain's
    validation targets, scored on those targets."""
    ts = np.asarray(inter.timestamp)
    pairs = np.asarray(
        [(u, i) in held for u, i in zip(users.tolist(), items.tolist(), strict=True)]
    )
    last_new = np.zeros(len(ts), bool)
    # the held-out event of a user is their last event before b1 (in the newest window)
    idx = np.flatnonzero(new & pairs)
    latest: dict[str, int] = {}
    for i in idx.tolist():
        if users[i] not in latest or ts[i] >= ts[latest[users[i]]]:
            latest[users[i]] = i
    last_new[list(latest.values())] = True
    train_part = new & ~last_new
    hist = ts < ts[new].min()
    out = []
    for cand in args.grid:
        epochs, replay, lr = parse_candidate(cand)
        model = copy.deepcopy(base)
        upd_s, _ = timed_update(
            model, inter.take(train_part, "window 1 less validation"), replay, epochs, seed, lr
        )
        t, _ = targets_for(model, users, items, ts, hist | train_part, last_new)
        m = metrics(model, t)
        out.append(
            {
                "candidate": cand,
                "cpu_seconds": upd_s,
                "valid_ndcg10": m["NDCG@10"],
                "valid_ndcg10_se": m["NDCG@10_se"],
                "targets": m["targets"],
            }
        )
        print(f"candidate {out[-1]}", flush=True)
    chosen, how = select_update(out, args.select_share * re_info["valid_ndcg10"], args.fallback)
    return {
        "chosen": chosen["candidate"],
        "by": f"cheapest with validation NDCG@10 >= {args.select_share} x the retrain's" + how,
        "retrain_valid_ndcg10": re_info["valid_ndcg10"],
        "candidates": out,
    }


def select_update(candidates, bar, fallback="one-se"):
    """The cheapest candidate validating at ``bar`` or above; when none does, by ``fallback``:
    ``one-se`` the cheapest within one standard error of the best, ``best`` the best. Returns
    the candidate and how it was chosen (empty when the bar was reached)."""
    cheapest = lambda cs: min(cs, key=lambda c: c["cpu_seconds"])  # noqa: E731
    good = [c for c in candidates if c["valid_ndcg10"] >= bar]
    if good:
        return cheapest(good), ""
    best = max(candidates, key=lambda c: c["valid_ndcg10"])
    if fallback == "best":
        return best, " (none reached it: the best validated)"
    if fallback != "one-se":
        raise ValueError(f"unknown fallback {fallback!r}: 'one-se' or 'best'")
    floor = best["valid_ndcg10"] - best["valid_ndcg10_se"]
    pick = cheapest([c for c in candidates if c["valid_ndcg10"] >= floor])
    return pick, (
        f" (none reached it: the cheapest within one standard error of the best,"
        f" {best['candidate']} {best['valid_ndcg10']:.4f} +- {best['valid_ndcg10_se']:.4f})"
    )


def protocol_args(args, flat):
    return {
        "data": args.data,
        "model": args.model,
        "first": args.first,
        "steps": args.steps,
        "patience": args.patience,
        "max_epochs": args.max_epochs,
        "grid": args.grid,
        "update": args.update,
        "select_share": args.select_share,
        "fallback": args.fallback,
        "settings": flat,
        **({"selection_from": args.selection_from} if args.selection_from else {}),
    }


def write(out, args, flat, bounds, qs, runs, selection):
    steps = [s for r in runs for s in r["steps"]]
    mean = {}
    if steps:
        mean = {
            "update_over_retrain_cpu": statistics.mean(s["update_over_retrain_cpu"] for s in steps),
            "max_update_over_retrain_cpu": max(s["update_over_retrain_cpu"] for s in steps),
            "update_over_retrain_cpu_to_best": statistics.mean(
                s["update_over_retrain_cpu_to_best"] for s in steps
            ),
            "ndcg_kept": statistics.mean(s["ndcg_kept"] for s in steps),
            "ndcg_update": statistics.mean(s["update"]["all"]["NDCG@10"] for s in steps),
            "ndcg_retrain": statistics.mean(s["retrain"]["all"]["NDCG@10"] for s in steps),
        }
        mean["ndcg_ratio_of_means"] = mean["ndcg_update"] / mean["ndcg_retrain"]
    record = base_record(
        benchmark="continual",
        data=args.data,
        model=args.model,
        protocol_args=protocol_args(args, flat),
        quantiles=qs,
        boundaries=bounds,
        selection=selection,
        runs=runs,
        mean=mean,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = suffixed(out, ".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=float))
    tmp.replace(suffixed(out, ".json"))
    suffixed(out, ".md").write_text(markdown(record))


def markdown(record):
    p = record["protocol_args"]
    sel = record["selection"] or {}
    lines = [
        f"# Rolling-window updates against full retrains: {p['model']} on {p['data']}",
        "",
        f"Command: `{record['command']}`  ",
        *[f"Seeds run by: `{c}`  " for c in record.get("merged_from", [])],
        f"Hardware: {hardware_line(record['hardware'])}; one thread; the machine was shared "
        "with other jobs, so CPU times are noisy (each ratio is within one run).  ",
        f"Protocol (`benchmarks/bench_continual.py`, docs/decisions/continual-protocol.md): base "
        f"block = the first {p['first']:.0%} of events by time, then {p['steps'] + 1} windows "
        f"of equal event counts; step s updates the previous step's model on window s and "
        f"retrains from scratch on everything before its end, both tested on window s+1 (every "
        f"event, full ranking, history filter). Retrain: early stopping on its own carved "
        f"validation (patience {p['patience']}, at most {p['max_epochs']} epochs), CPU time of "
        f"the whole run. Settings {p['settings']}.  ",
        f"Update setting (epochs:replay) `{sel.get('chosen')}`, chosen by {sel.get('by')} on "
        "step 1 of the first seed (validation only).",
        "",
    ]
    if record.get("note"):
        lines += [f"Note: {record['note']}", ""]
    if sel.get("candidates"):
        lines += [
            f"Step-1 validation (retrain's validation NDCG@10 "
            f"{sel.get('retrain_valid_ndcg10', float('nan')):.4f}):",
            "",
            "| candidate | CPU s | validation NDCG@10 (+- one standard error) |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {c['candidate']} | {c['cpu_seconds']:.1f} | {c['valid_ndcg10']:.4f}"
            + (f" +- {c['valid_ndcg10_se']:.4f} |" if "valid_ndcg10_se" in c else " |")
            for c in sel["candidates"]
        ]
        lines.append("")
    lines += [
        "| seed | step | update CPU s | retrain CPU s (to best epoch; epochs run) | update / "
        "retrain | NDCG@10 update | NDCG@10 retrain | kept | new-item targets: HR@10 update / "
        "retrain |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---|",
    ]
    for r in record["runs"]:
        for s in r["steps"]:
            re, up = s["retrain"], s["update"]
            lines.append(
                f"| {r['seed']} | {s['step']} | {up['cpu_seconds']:.1f} | "
                f"{re['cpu_seconds']:.1f} ({re['cpu_seconds_to_best']:.1f}; {re['epochs_run']}) | "
                f"{s['update_over_retrain_cpu']:.1%} | {up['all']['NDCG@10']:.4f} | "
                f"{re['all']['NDCG@10']:.4f} | {s['ndcg_kept']:.1%} | "
                f"{up['new_items']['HR@10']:.4f} / {re['new_items']['HR@10']:.4f} "
                f"({up['new_items']['targets']}) |"
            )
    m = record["mean"]
    if m:
        lines += [
            "",
            f"Mean over steps and seeds: update / retrain CPU {m['update_over_retrain_cpu']:.1%} "
            f"(largest step {m['max_update_over_retrain_cpu']:.1%}; against the retrain's time "
            f"to its best epoch {m['update_over_retrain_cpu_to_best']:.1%}); NDCG@10 kept "
            f"{m['ndcg_kept']:.1%} (ratio of the mean NDCGs {m['ndcg_ratio_of_means']:.1%}). "
            f"Bars (issue: update CPU <= 15% at every step, NDCG@10 >= 97% on the mean): "
            f"CPU {'met' if m['max_update_over_retrain_cpu'] <= 0.15 else 'NOT met'}, NDCG "
            f"{'met' if m['ndcg_kept'] >= 0.97 else 'NOT met'}.",
        ]
    unfinished = [r["seed"] for r in record["runs"] if not r.get("finished")]
    if unfinished:
        lines += ["", f"Partial: seed(s) {unfinished} unfinished."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
