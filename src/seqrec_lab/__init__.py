"""The reproduction harness: ``seqrec reproduce NAME`` runs ``configs/reproduce/NAME.toml``.

:mod:`.spec` reads a table into concrete runs, :mod:`.runner` trains and caches one run,
:mod:`.harness` schedules them over worker processes, :mod:`.report` writes the report.
"""

from seqrec.reproduce.harness import reproduce
from seqrec.reproduce.spec import Table, load_table

__all__ = ["Table", "load_table", "reproduce"]
