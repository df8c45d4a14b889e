"""A table may list validation columns (``valid:NDCG@10``) beside its test metrics."""

from seqrec_lab.report import _cell


def test_valid_prefix_reads_the_validation_metrics():
    recs = [
        {"metrics": {"valid": {"NDCG@10": 0.25}, "test": {"NDCG@10": 0.5}}},
        {"metrics": {"valid": {"NDCG@10": 0.35}, "test": {"NDCG@10": 0.7}}},
    ]
    assert _cell(recs, "valid:NDCG@10").startswith("0.3000 ± ")
    assert _cell(recs, "NDCG@10").startswith("0.6000 ± ")
    assert _cell(recs, "valid:HR@10") == "–"
