"""seqrec: sequential (next-item) recommendation.

``seqrec.train(data, "sasrec", epochs=20)`` fits and evaluates a model (a :class:`TrainedRun`:
``.metrics``, ``.recommend(user=...)``, ``.save(path)``); ``seqrec.load(path)`` reads a saved
one. See :mod:`seqrec.api`; the command line is ``seqrec --help``.
"""

__version__ = "0.1.0"
__all__ = ["TrainedRun", "load", "train"]


def __getattr__(name: str):  # the API imports torch-free modules only when it is used
    if name in __all__:
        from seqrec import api

        return getattr(api, name)
    raise AttributeError(f"module 'seqrec' has no attribute {name!r}")
