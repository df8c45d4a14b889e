"""LRURec vs SASRec on ML-1M (issue 4, must-show 1), trained in the same run on the same split.

Data ``ml-1m`` (``../shared/data/ml-1m.seq.tsv.xz``), iterative 5-core (3,416 items),
leave-last-out, full ranking, history filter, max_len 200, d 64, 2 blocks, dropout 0.2, full
cross-entropy, AdamW lr 1e-3 (LRURec: weight decay 1e-2; SASRec: the SASRec benchmark's
settings), batch 128, model picked by validation NDCG@10 (patience 10 validations).
Targets: LRURec test NDCG@10 >= 0.185 and Recall@10 >= 0.315 (paper 0.193 / 0.326).

    nohup nice -n 5 .venv/bin/python benchmarks/bench_lrurec_ml1m.py \
        > benchmarks/logs/lrurec_ml1m.log 2>&1 &

Resumable (benchmarks/logs/runs/lrurec_ml1m*/last.pt); writes docs/results/lrurec_ml1m.{json,md},
lrurec_ml1m_sasrec.{json,md} and the side-by-side lrurec_ml1m_vs_sasrec.md (with the training
time to the best validation of each model).
"""

from bench_lrurec_video import parser, run

if __name__ == "__main__":
    cli = parser(__doc__, max_len=200, dropout=0.2, stem="lrurec_ml1m", with_sasrec=True,
                 filter="k_core")
    run("ml-1m", cli.parse_args(),
        notes="targets: LRURec test NDCG@10 >= 0.185 and Recall@10 >= 0.315 (paper 0.193 / 0.326)")
