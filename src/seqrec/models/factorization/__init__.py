"""Factorization and tensor models (NumPy/SciPy only — this package never imports torch).

* :class:`Pop` — most popular items.
* :class:`PureSVD` — PureSVD and PureSVD-N (``scaling != 1``), eqs. 26-28 of Frolov &
  Oseledets (2023).
* :class:`GASATF`, :class:`LASATF` — sequence-aware tensor factorization with global / local
  (Hankel) positional attention, fitted by HOOI over sparse matrix-free unfoldings.
"""

from seqrec.models.factorization.pop import Pop, PopConfig
from seqrec.models.factorization.satf import GASATF, LASATF, PAPER_GRID, GASATFConfig, LASATFConfig
from seqrec.models.factorization.svd import PureSVD, PureSVDConfig

__all__ = [
    "GASATF",
    "GASATFConfig",
    "LASATF",
    "LASATFConfig",
    "PAPER_GRID",
    "Pop",
    "PopConfig",
    "PureSVD",
    "PureSVDConfig",
]
