"""LRURec vs SASRec on ML-1M (issue 4, must-show 1), trained in the same run on the same split.

Data ``ml-1m`` (``../shared/data/ml-1m.seq.tsv.xz``), iterative 5-core (3,416 items),
leave-last-out, full ranking, history filter, max_len 200, d 64, 2 blocks, full cross-entropy,
batch 128, sliding training windows (every transition once, as the LRURec code's loader),
validation every 2 epochs, model picked by validation NDCG@10 (patience 5 validations).
LRURec: dropout 0.2, AdamW lr 1e-3, weight decay 1e-2, gradient clipping 5 (the LRURec code).
SASRec: the SASRec benchmark's run ``sasrec_ml1m_ce_windows`` (reference layout, dropout 0.1, no
weight decay, same windows): both scripts share its checkpoint, so it is trained once.
Targets: LRURec test NDCG@10 >= 0.185 and Recall@10 >= 0.315 (paper 0.193 / 0.326).

    nohup .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models lrurec \
        > benchmarks/logs/lrurec_ml1m.log 2>&1 &
    .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models sasrec   # or the SASRec benchmark

The run ``lrurec_ml1m`` (and its grid variants below) started before 2026-11-30 with seqrec's
earlier LRURec (embedding dropout after its LayerNorm, weight decay on every parameter): resume
them with ``--legacy``. Without it the model is that of the authors' code.

First measured (2026-11-30) with patience 5 (10 epochs): LRURec test NDCG@10 0.1802 / Recall@10
0.3121 (stopped at epoch 70, best validation at 60) vs SASRec 0.1686 / 0.2960. The paper
validates every 500 iterations and stops after 10 validations without improvement, i.e. 5,000
steps; here a validation is 136 steps (2 epochs), so the same patience is 37 validations.
The run continues with it (patience is run control, the checkpoint resumes):

    .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models lrurec --patience 37 --legacy --threads 1
    .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models sasrec --patience 37 --threads 1

Measured (2026-11-30, both runs under patience 37 and the 200-epoch cap, one 1-thread process
each, side by side): LRURec stopped at the cap (epoch 200), best validation 0.1842 at epoch 170,
test NDCG@10 0.1856 / Recall@10 0.3222; SASRec stopped on its patience at epoch 170, best
validation 0.1782 at epoch 96, test NDCG@10 0.1714 / Recall@10 0.3005. LRURec reached SASRec's
best validation at epoch 58 (step 3,944; SASRec's best was at step 6,528). Rerunning either
command once both have finished rebuilds the side-by-side table.

Variants from the paper's grid (dropout {0.2, 0.4, 0.6, 0.8}, weight decay {0, 1e-6, 1e-4,
1e-2}) were started after the first run, unfinished:

    .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models lrurec --legacy --dropout 0.4 --stem lrurec_ml1m_d04
    .venv/bin/python benchmarks/bench_lrurec_ml1m.py --models lrurec --legacy --weight-decay 0 --stem lrurec_ml1m_wd0

Resumable (benchmarks/logs/runs/lrurec_ml1m*/last.pt); writes docs/results/lrurec_ml1m.{json,md},
lrurec_ml1m_sasrec.{json,md} and the side-by-side lrurec_ml1m_vs_sasrec.md (with the training
time to the best validation of each model).
"""

from bench_lrurec_video import parser, run

if __name__ == "__main__":
    cli = parser(__doc__, max_len=200, dropout=0.2, stem="lrurec_ml1m", with_sasrec=True,
                 filter="k_core", eval_every=2, patience=5, sasrec_dropout=0.1,
                 sasrec_layout="reference", sasrec_run="sasrec_ml1m_ce_windows")
    run("ml-1m", cli.parse_args(),
        notes="targets: LRURec test NDCG@10 >= 0.185 and Recall@10 >= 0.315 (paper 0.193 / 0.326)")
