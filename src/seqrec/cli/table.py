"""Plain-text tables for the terminal (no extra dependency)."""

from __future__ import annotations

from typing import Any, Sequence


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 1000 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "" if value is None else str(value)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Numbers right-aligned (digits line up), text left-aligned (a long title or status reads
    from its start); the first column, the row's label, left-aligned whatever it holds."""
    cells = [[_fmt(v) for v in row] for row in rows]
    numeric = [
        [isinstance(v, (int, float)) and not isinstance(v, bool) for v in row] for row in rows
    ]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False))
    sep = "  ".join("-" * w for w in widths)
    body = [
        "  ".join(
            (c.rjust(w) if num and i else c.ljust(w))  # the first column labels the row
            for i, (c, w, num) in enumerate(zip(r, widths, nums, strict=False))
        ).rstrip()
        for r, nums in zip(cells, numeric, strict=True)
    ]
    return "\n".join([line.rstrip(), sep, *body])


def format_mapping(mapping: dict[str, Any]) -> str:
    """``key  value`` lines; a list value takes one line per element (aligned under the first),
    a dict value reads ``key value, key value`` (not Python's repr)."""
    width = max(len(k) for k in mapping)
    lines = []
    for k, v in mapping.items():
        if isinstance(v, dict):
            v = ", ".join(f"{kk} {_fmt(vv)}" for kk, vv in v.items())
        if isinstance(v, (list, tuple)) and v:
            lines.append(f"{k.ljust(width)}  {_fmt(v[0])}")
            lines += [f"{'':{width}}  {_fmt(x)}" for x in v[1:]]
        else:
            lines.append(f"{k.ljust(width)}  {_fmt(v)}")
    return "\n".join(lines)
