"""Test helpers shipped with the library: the neural-model conformance suite and tiny
synthetic datasets (``seqrec.testing.conformance``, ``seqrec.testing.synthetic``)."""

from seqrec.testing.synthetic import leave_last_out_small, markov_sequences

__all__ = ["leave_last_out_small", "markov_sequences"]
