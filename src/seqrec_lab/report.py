"""The report of a reproduction table: ``docs/reproduce/NAME.md`` and a self-contained
``NAME.html`` (plots embedded), built only from the run records, so the same records always
give the same report.

Contents: the test table (mean ± sd over seeds, 95% CI), the comparison with the published
numbers (gap in %), the runs (parameters, epochs, stop reason, step and wall time, command),
validation curves and accuracy against training time, and accuracy by user history length and
by target-item popularity (head / torso / tail = thirds of the training interactions).
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any

from seqrec.atomic import atomic_write
from seqrec_lab.spec import Table

Block = tuple  # ("h2", text) | ("p", text) | ("table", headers, rows) | ("img", name, png bytes)


def _mean_sd(values: list[float]) -> tuple[float, float | None]:
    m = sum(values) / len(values)
    if len(values) < 2:
        return m, None
    return m, math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _records(planned):
    """run_id -> (finished records, partial records), in table order."""
    rows: dict[str, tuple[list, list]] = {}
    for p in planned:
        done, part = rows.setdefault(p.spec.run_id, ([], []))
        if p.cached is not None:
            done.append(p.cached)
        elif p.partial is not None:
            part.append(p.partial)
    return rows


def _cell(recs: list[dict], metric: str, split: str = "test") -> str:
    if metric.startswith("valid:"):  # a table may list validation columns ("valid:NDCG@10")
        metric, split = metric[len("valid:") :], "valid"
    vals = [r["metrics"][split][metric] for r in recs if metric in r["metrics"].get(split, {})]
    if not vals:
        return "–"
    m, sd = _mean_sd(vals)
    cis = [r.get("ci95", {}).get(split, {}).get(metric) for r in recs]
    cis = [c for c in cis if c]
    text = f"{m:.4f}" + (f" ± {sd:.4f}" if sd is not None else "")
    if cis:
        lo = sum(c[0] for c in cis) / len(cis)
        hi = sum(c[1] for c in cis) / len(cis)
        text += f" [{lo:.4f}, {hi:.4f}]"
    return text


def _first(planned, run_id):
    return next(p for p in planned if p.spec.run_id == run_id)


def _rows(table: Table, planned, groups):
    """(run id, its first planned run, finished records, partial records) of each planned row,
    in table order."""
    for run_id in table.row_ids:
        if run_id in groups:
            yield run_id, _first(planned, run_id), *groups[run_id]


def build_blocks(table: Table, planned) -> list[Block]:
    groups = _records(planned)
    n_done = sum(p.cached is not None for p in planned)
    blocks: list[Block] = [("h1", table.title)]
    if table.description:
        blocks.append(("p", table.description))
    blocks.append(
        (
            "p",
            f"Reproduce: `seqrec reproduce {table.name}` (config `{table.path}`). "
            f"{n_done} of {len(planned)} runs finished. Cells: mean over seeds (± sd when "
            "several) and the 95% CI [lo, hi] of the mean over users (or interactions, as the table's "
            "averaging says), averaged over seeds.",
        )
    )
    # --- main table
    headers = ["run", "dataset", "model", "seeds", *table.metrics, "status"]
    rows = []
    for _, p, done, part in _rows(table, planned, groups):
        recs, status = (done, "finished") if done else (part, "unfinished")
        if not recs:
            rows.append(
                [
                    p.spec.label,
                    p.spec.dataset,
                    p.spec.model,
                    "–",
                    *["–"] * len(table.metrics),
                    "not run",
                ]
            )
            continue
        if done and part:
            status = f"{len(done)} finished, {len(part)} unfinished"
        elif not done:
            status = f"unfinished: epoch {max(r.get('epochs') or 0 for r in recs)}, best so far"
        seeds = ",".join(str(r["seed"]) for r in recs)
        rows.append(
            [
                p.spec.label,
                p.spec.dataset,
                p.spec.model,
                seeds,
                *[_cell(recs, m) for m in table.metrics],
                status,
            ]
        )
    blocks += [("h2", "Test results"), ("table", headers, rows)]
    notes = {}
    for _, p, _, _ in _rows(table, planned, groups):
        if p.spec.note:
            notes.setdefault(p.spec.label, p.spec.note)
    if notes:
        blocks.append(("p", "Notes: " + "; ".join(f"{k}: {v}" for k, v in notes.items()) + "."))
    from seqrec_lab.peers_report import peer_blocks  # other libraries' rows, if any

    blocks += peer_blocks(table, planned)
    denominators = sorted(
        {
            str(r.get("coverage_denominator", {}).get("test", "catalogue"))
            for p in planned
            for r in (p.cached, p.partial)
            if r
        }
    )
    if any(d != "catalogue" for d in denominators):
        blocks.append(
            (
                "p",
                "COV@k divides by the items of the data each model was fitted on "
                f"({', '.join(denominators)}), as the SATF code does.",
            )
        )
    # --- published
    pub_rows = []
    for _, p, done, part in _rows(table, planned, groups):
        recs = done or part
        for pub in p.spec.published:
            vals = [r["metrics"]["test"].get(pub.metric) for r in recs]
            vals = [v for v in vals if v is not None]
            ours = sum(vals) / len(vals) if vals else None
            gap = (
                "–"
                if ours is None or not pub.value
                else f"{100 * (ours - pub.value) / pub.value:+.1f}%"
            )
            note = "" if done else (" (unfinished)" if part else " (not run)")
            pub_rows.append(
                [
                    p.spec.label,
                    p.spec.dataset,
                    pub.metric,
                    f"{pub.value:.4f}",
                    pub.source,
                    "–" if ours is None else f"{ours:.4f}{note}",
                    gap,
                ]
            )
    if pub_rows:
        blocks += [
            ("h2", "Against the published numbers"),
            (
                "table",
                ["run", "dataset", "metric", "published", "source", "seqrec", "gap"],
                pub_rows,
            ),
        ]
    if table.findings:
        blocks.append(("h2", "Findings"))
        blocks += [("p", para.strip()) for para in table.findings.split("\n\n") if para.strip()]
    # --- pairs
    if table.pairs:
        pair_rows = []
        for label, a, b in table.pairs:
            ra = groups.get(a, ([], []))
            rb = groups.get(b, ([], []))
            ra, rb = ra[0] or ra[1], rb[0] or rb[1]
            for m in table.metrics:
                split, key = (
                    ("valid", m[len("valid:") :]) if m.startswith("valid:") else ("test", m)
                )
                va = [r["metrics"][split][key] for r in ra if key in r["metrics"].get(split, {})]
                vb = [r["metrics"][split][key] for r in rb if key in r["metrics"].get(split, {})]
                if not va or not vb:
                    pair_rows.append(
                        [
                            label,
                            m,
                            "–" if not va else f"{sum(va) / len(va):.4f}",
                            "–" if not vb else f"{sum(vb) / len(vb):.4f}",
                            "–",
                        ]
                    )
                    continue
                xa, xb = sum(va) / len(va), sum(vb) / len(vb)
                unfinished = [side for side, run in (("a", a), ("b", b)) if not groups[run][0]]
                if unfinished:  # a best-so-far value is no basis for a gap
                    gap = f"– ({' and '.join(unfinished)} unfinished)"
                else:
                    gap = "–" if not xa else f"{100 * (xb - xa) / xa:+.1f}%"
                pair_rows.append([label, m, f"{xa:.4f}", f"{xb:.4f}", gap])
        blocks += [
            ("h2", "Gaps"),
            (
                "p",
                "Each pair: the metric (test unless marked valid:) of run a, "
                "of run b, and b against a.",
            ),
            ("table", ["pair (a / b)", "metric", "a", "b", "b vs a"], pair_rows),
        ]
    # --- runs
    run_rows = []
    for p in planned:
        r = p.cached or p.partial
        if r is None:
            run_rows.append(
                [p.spec.run_id, p.spec.seed, "–", "–", "–", "not run", "–", "–", "–", p.key, ""]
            )
            continue
        step = r.get("step_seconds")
        run_rows.append(
            [
                p.spec.run_id,
                p.spec.seed,
                _int(r.get("params")),
                _int(r.get("epochs")),
                _int(r.get("best_epoch")),
                r.get("stopped") + (" (partial)" if r.get("partial") else ""),
                "–" if step is None else f"{step:.3f}",
                _num(r.get("train_seconds"), 0),
                _num(r.get("eval_seconds"), 1),
                p.key,
                f"`{r.get('command', '')}`",
            ]
        )
    blocks += [
        ("h2", "Runs"),
        (
            "p",
            "params: trainable parameters (neural) or stored factors; step s: training seconds per "
            "step, summed over resumes; train s: training seconds; eval s: valid + test "
            "evaluation. Hardware and versions are in each run's record "
            "(`docs/reproduce/runs/<key>.json`).",
        ),
        (
            "table",
            [
                "run",
                "seed",
                "params",
                "epochs",
                "best epoch",
                "stopped",
                "step s",
                "train s",
                "eval s",
                "key",
                "command",
            ],
            run_rows,
        ),
    ]
    # --- curves
    curves = [(p, p.cached or p.partial) for p in planned if (p.cached or p.partial)]
    curves = [(p, r) for p, r in curves if r.get("validation_history")]
    if curves:
        png = _plot_curves(table, curves)
        if png:
            blocks += [
                ("h2", "Validation curves and accuracy against training time"),
                ("img", f"{table.name}_curves.png", png),
            ]
    # --- breakdowns
    for kind, title in (
        ("history_length", "by user history length"),
        ("target_popularity", "by target-item popularity"),
    ):
        b_rows, b_headers = [], None
        for run_id in table.row_ids:
            done, part = groups.get(run_id, ([], []))
            recs = done or part
            if not recs or "breakdown" not in recs[0]:
                continue
            bd = recs[0]["breakdown"]
            k = bd.get("k", 10)
            groups_ = bd["test"][kind]
            if b_headers is None:
                b_headers = ["run", *[f"{g['group']}" for g in groups_]]
            cells = []
            for g in groups_:
                v = g.get(f"NDCG@{k}")
                cells.append("–" if v is None else f"{v:.4f} (n={g['n']})")
            b_rows.append([f"{_first(planned, run_id).spec.label} / {recs[0]['dataset']}", *cells])
        if b_rows:
            desc = (
                "history length = items in the test input"
                if kind == "history_length"
                else "head / torso / tail: the most popular items holding the first, second and last third "
                "of the training interactions"
            )
            blocks += [
                ("h2", f"Test NDCG@10 {title} (seed {_seed0(planned)})"),
                ("p", desc),
                ("table", b_headers, b_rows),
            ]
    return blocks


def _seed0(planned) -> str:
    seeds = sorted({p.spec.seed for p in planned})
    return str(seeds[0]) if seeds else "–"


def _int(v) -> str:
    return "–" if v is None else f"{int(v):,}"


def _num(v, d) -> str:
    return "–" if v is None else f"{v:.{d}f}"


def _plot_curves(table: Table, curves) -> bytes | None:
    """Validation metric against epochs and against training minutes: one row of panels per
    dataset, one colour per row label, one line style per seed, the legend beside the panels;
    the time axis is logarithmic when the runs' training times differ by more than 30x (a peer
    at 4 minutes per epoch beside seqrec at 4 seconds)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    datasets = list(dict.fromkeys(p.spec.dataset for p, _ in curves))
    labels = list(dict.fromkeys(p.spec.label for p, _ in curves))
    seeds = sorted({p.spec.seed for p, _ in curves})
    palette = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    styles = ["-", "--", ":", "-."]
    fig, axes = plt.subplots(len(datasets), 2, figsize=(15, 3.9 * len(datasets)), squeeze=False)
    metric = curves[0][1].get("val_metric") or "NDCG@10"
    for row, dataset in enumerate(datasets):
        ax1, ax2 = axes[row]
        times, shown = [], set()
        for p, r in curves:
            if p.spec.dataset != dataset:
                continue
            hist = r["validation_history"]
            m = r.get("val_metric") or "NDCG@10"
            xs = [h["epoch"] for h in hist]
            ts = [h["train_seconds"] / 60 for h in hist]
            ys = [h["metrics"].get(m) for h in hist]
            times += [t for t in ts if t > 0]
            style = dict(
                color=palette(labels.index(p.spec.label) % palette.N),
                lw=1.2,
                ls=styles[seeds.index(p.spec.seed) % len(styles)],
            )
            label = p.spec.label if len(p.spec.label) <= 48 else p.spec.label[:47] + "…"
            ax1.plot(
                xs, ys, label=None if p.spec.label in shown else label, **style
            )  # once per row
            shown.add(p.spec.label)
            ax2.plot(ts, ys, **style)
        if times and max(times) / min(times) > 30:
            from matplotlib.ticker import FuncFormatter, NullFormatter

            ax2.set_xscale("log")
            ax2.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            ax2.xaxis.set_minor_formatter(NullFormatter())  # 2x10^1 labels overlapped
        ax1.set(
            xlabel="epoch", ylabel=f"validation {metric}", title=f"{dataset}: validation curves"
        )
        ax2.set(
            xlabel="training minutes" + (" (log scale)" if ax2.get_xscale() == "log" else ""),
            ylabel=f"validation {metric}",
            title=f"{dataset}: accuracy against training time",
        )
        for ax in (ax1, ax2):
            ax.grid(alpha=0.3)
        title = "line style = seed" if len(seeds) > 1 else None
        ax2.legend(
            *ax1.get_legend_handles_labels(),
            fontsize=7,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            title=title,
            title_fontsize=7,
        )
    fig.tight_layout(rect=(0, 0, 0.8, 1))  # the right fifth holds the legends
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def to_markdown(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b[0] == "h1":
            out.append(f"# {b[1]}\n")
        elif b[0] == "h2":
            out.append(f"## {b[1]}\n")
        elif b[0] == "p":
            out.append(f"{b[1]}\n")
        elif b[0] == "table":
            _, headers, rows = b
            out.append("| " + " | ".join(headers) + " |")
            out.append("|" + "---|" * len(headers))
            out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
            out.append("")
        elif b[0] == "img":
            out.append(f"![{b[1]}]({b[1]})\n")
    return "\n".join(out)


def _inline(text: str) -> str:
    parts = html.escape(str(text)).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks: list[Block], title: str) -> str:
    out = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;"
        "padding:3px 7px;text-align:left}th{background:#f3f3f3}code{font-size:12px}</style></head><body>",
    ]
    for b in blocks:
        if b[0] in ("h1", "h2"):
            out.append(f"<{b[0]}>{html.escape(b[1])}</{b[0]}>")
        elif b[0] == "p":
            out.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "table":
            _, headers, rows = b
            out.append(
                "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"
            )
            out += [
                "<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>" for row in rows
            ]
            out.append("</table>")
        elif b[0] == "img":
            data = base64.b64encode(b[2]).decode()
            out.append(
                f"<img alt='{html.escape(b[1])}' src='data:image/png;base64,{data}' style='max-width:100%'>"
            )
    out.append("</body></html>")
    return "\n".join(out)


def summary(table: Table, planned) -> dict[str, Any]:
    """Machine-readable summary of the table (for the README and other tools)."""
    groups = _records(planned)
    rows = []
    for run_id, p, done, part in _rows(table, planned, groups):
        recs = done or part
        row = {
            "run": run_id,
            "label": p.spec.label,
            "dataset": p.spec.dataset,
            "model": p.spec.model,
            "finished": bool(done),
            "seeds": [r["seed"] for r in recs],
            "seeds_finished": len(done),
            "seeds_planned": sum(q.spec.run_id == run_id for q in planned),
            "test": {
                m: _mean_sd([r["metrics"]["test"][m] for r in recs])[0]
                for m in table.metrics
                if recs and all(m in r["metrics"]["test"] for r in recs)
            },
            "published": [
                {"metric": x.metric, "value": x.value, "source": x.source} for x in p.spec.published
            ],
        }
        rows.append(row)
    return {"table": table.name, "title": table.title, "rows": rows}


def write_report(table: Table, planned, report_dir: Path) -> Path:
    """Write ``NAME.md``, ``NAME.html``, ``NAME.json`` (summary) and the plot; returns the .md."""
    report_dir.mkdir(parents=True, exist_ok=True)
    blocks = build_blocks(table, planned)
    for b in blocks:
        if b[0] == "img":
            png = b[2]
            atomic_write(report_dir / b[1], lambda fh, png=png: fh.write(png))
    md = to_markdown(blocks)
    page = to_html(blocks, table.title)
    summ = json.dumps(summary(table, planned), indent=1) + "\n"
    atomic_write(report_dir / f"{table.name}.html", lambda fh: fh.write(page.encode()))
    atomic_write(report_dir / f"{table.name}.json", lambda fh: fh.write(summ.encode()))
    path = report_dir / f"{table.name}.md"
    atomic_write(path, lambda fh: fh.write(md.encode()))
    return path
