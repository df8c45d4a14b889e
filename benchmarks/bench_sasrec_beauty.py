"""SASRec on Amazon Beauty 5-core, S3-Rec version (issue 3, must-show 2): leave-last-out, full
ranking, history filter, max_len 50, d 64, 2 blocks, full cross-entropy, model picked by
validation NDCG@10.

    nohup nice -n 5 .venv/bin/python benchmarks/bench_sasrec_beauty.py \
        > benchmarks/logs/sasrec_beauty_ce.log 2>&1 &

Resumable via benchmarks/logs/runs/<stem>/last.pt; writes docs/results/sasrec_beauty_<loss>.{json,md}.
"""

from _sasrec_common import parser, run

if __name__ == "__main__":
    args = parser(__doc__, max_len=50, dropout=0.5).parse_args()
    stem = args.stem or f"sasrec_beauty_{args.loss}"
    run("amazon-beauty-s3rec", args, stem, notes="target: CE test NDCG@10 >= 0.045")
