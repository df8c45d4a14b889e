"""The header every timing report of the benchmarks starts with."""

from __future__ import annotations

from typing import Any, Mapping

from seqrec.evaluation.results import hardware_line


def timing_header(title: str, record: Mapping[str, Any]) -> list[str]:
    """Title, command, protocol, hardware and when it ran under which load (Markdown lines of
    a record from ``base_record(..., protocol=..., load_range=...)``)."""
    return [
        f"# {title}\n",
        f"Command: `{record['command']}`  ",
        f"Protocol: {record['protocol']}  ",
        f"Hardware: {hardware_line(record['hardware'])}  ",
        f"Measured {record['created']}; 1-minute load average {record['load_range']}\n",
    ]
