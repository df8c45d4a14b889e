"""seqrec's research layer: the reproduction harness behind ``seqrec reproduce NAME``, which runs
``configs/reproduce/NAME.toml``, its peer rows (other libraries' models) and its reports.

It sits on top of the library: ``seqrec_lab`` imports ``seqrec``, never the other way round
(``tests/test_layering.py``); the ``seqrec reproduce`` command reaches the ``seqrec`` CLI
through the ``seqrec.commands`` entry point (:mod:`seqrec.cli.plugins`).

:mod:`.spec` reads a table into concrete runs, :mod:`.runner` trains and caches one run,
:mod:`.harness` schedules them over worker processes, :mod:`.report` writes the report,
:mod:`.readme` the results overview ``docs/reproduce/README.md``, :mod:`.peers` runs the
worker scripts of :mod:`.workers`, :mod:`.cli` is the command.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Table", "load_table", "reproduce"]


def __getattr__(name: str) -> Any:
    # lazy, so that loading the CLI command (``seqrec_lab.cli``) for every ``seqrec`` call does
    # not import the harness, torch and the models
    if name == "reproduce":
        from seqrec_lab.harness import reproduce

        return reproduce
    if name in ("Table", "load_table"):
        from seqrec_lab import spec

        return getattr(spec, name)
    raise AttributeError(f"module 'seqrec_lab' has no attribute {name!r}")
