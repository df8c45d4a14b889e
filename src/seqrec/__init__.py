"""seqrec: sequential (next-item) recommendation."""

__version__ = "0.1.0"
