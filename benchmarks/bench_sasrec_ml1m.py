"""SASRec on ML-1M (issue 3, must-show 1): iterative 5-core (3,416 items), leave-last-out, full
ranking, history filter, max_len 200, d 64, 2 blocks, dropout 0.2, lr 1e-3, batch 128, model
picked by validation NDCG@10 (early stopping, patience 10 validations).

    nohup nice -n 5 .venv/bin/python benchmarks/bench_sasrec_ml1m.py --loss ce \
        > benchmarks/logs/sasrec_ml1m_ce.log 2>&1 &
    .venv/bin/python benchmarks/bench_sasrec_ml1m.py --loss bce   # paper objective

Resumable: rerunning the same command continues from benchmarks/logs/runs/<stem>/last.pt.
Writes docs/results/sasrec_ml1m_<loss>.{json,md}; every validation is in
benchmarks/logs/runs/<stem>/validation.jsonl.
"""

from _sasrec_common import parser, run

if __name__ == "__main__":
    args = parser(__doc__, max_len=200).parse_args()
    stem = args.stem or f"sasrec_ml1m_{args.loss}"
    run("ml-1m", args, stem,
        notes="targets: CE test NDCG@10 >= 0.180 and Recall@10 >= 0.305; BCE within 10% of 0.134")
