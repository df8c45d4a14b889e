"""Evaluation: full (chunked) and sampled ranking, metrics with CIs, result records.

See DESIGN.md section 4 and the module docstrings of :mod:`.ranking` (seen filter, ties) and
:mod:`.sampled` (why sampled metrics are labelled).
"""

from seqrec.evaluation.metrics import coverage, hit_rate, mean_ci, mrr, ndcg, recall
from seqrec.evaluation.protocols import EvalResult, evaluate
from seqrec.evaluation.results import base_record, markdown_table, result_record, write_result
from seqrec.evaluation.sampled import (
    SampledCandidates,
    draw_candidates,
    evaluate_sampled,
    load_candidates,
    save_candidates,
)

__all__ = [
    "EvalResult",
    "SampledCandidates",
    "base_record",
    "coverage",
    "draw_candidates",
    "evaluate",
    "evaluate_sampled",
    "hit_rate",
    "load_candidates",
    "markdown_table",
    "mean_ci",
    "mrr",
    "ndcg",
    "recall",
    "result_record",
    "save_candidates",
    "write_result",
]
